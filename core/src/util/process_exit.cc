#include "zt/host/process_exit.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>

#include "zt/sanitized_build.h"

namespace zt {

void exit_without_library_teardown(int code) {
  std::cout.flush();
  std::cerr.flush();
  std::clog.flush();
  std::fflush(nullptr);
#ifdef ZT_SANITIZED_BUILD
  std::exit(code);
#else
  _exit(code);
#endif
}

}  // namespace zt
