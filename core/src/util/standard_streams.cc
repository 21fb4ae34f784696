#include "zt/host/standard_streams.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "zt/error.h"

namespace zt {

void keep_standard_streams_open() {
  for (int fd = 0; fd <= 2; ++fd) {
    if (::fcntl(fd, F_GETFD) != -1 || errno != EBADF) continue;
    // open() takes the lowest free number, this one when the lower ones are open; dup2 makes
    // sure where they are not (0 closed as well as 1 takes 0 first, and 0 is done then).
    const int opened = ::open("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY);
    if (opened < 0) {
      throw IoError("standard stream " + std::to_string(fd) +
                    " is closed and /dev/null cannot be opened in its place: " +
                    std::strerror(errno) + "; start the trainer with its streams open");
    }
    if (opened != fd) {
      ::dup2(opened, fd);
      ::close(opened);
    }
  }
}

}  // namespace zt
