#include "zt/host/process_exit.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>

#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || \
    __has_feature(memory_sanitizer) || __has_feature(undefined_behavior_sanitizer)
#define ZT_SANITIZED_BUILD 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define ZT_SANITIZED_BUILD 1
#endif

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
