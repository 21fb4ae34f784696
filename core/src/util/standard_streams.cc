#include "zt/host/standard_streams.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "zt/error.h"

namespace zt {

void keep_standard_streams_open() {
  // In order: the lower ones are open by the time a number is reopened, so open(), which takes
  // the lowest free number, takes this one.
  for (int fd = 0; fd <= 2; ++fd) {
    if (::fcntl(fd, F_GETFD) != -1 || errno != EBADF) continue;
    const int opened = ::open("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY);
    const int err = errno;
    if (opened != fd) {
      if (opened >= 0) ::close(opened);  // another thread's file took it: not at main's start
      throw IoError("standard stream " + std::to_string(fd) +
                    " is closed and /dev/null cannot be opened in its place (" +
                    (opened < 0 ? std::strerror(err) : "another file took its number") +
                    "); start the trainer with its streams open");
    }
  }
}

void write_all_to(int fd, std::string_view text) {
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n > 0) done += static_cast<size_t>(n);
    else if (n < 0 && errno == EINTR) continue;
    else return;
  }
}

}  // namespace zt
