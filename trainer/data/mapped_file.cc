#include "data/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "zt/error.h"

namespace zt::data {

MappedFile::MappedFile(const std::string& path, const std::string& what, const std::string& key) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    throw IoError("cannot open " + what + ": " + std::strerror(errno) + "; check " + key +
                  " (relative paths start from the working directory)");
  }
  struct stat st {};
  const bool stat_ok = ::fstat(fd, &st) == 0;
  if (!stat_ok || !S_ISREG(st.st_mode)) {
    std::string why = !stat_ok              ? std::strerror(errno)
                      : S_ISDIR(st.st_mode) ? "it is a directory"
                                            : "it is not a regular file";
    ::close(fd);
    throw IoError("cannot read " + what + ": " + why + "; " + key + " must name a regular file");
  }
  size_ = static_cast<size_t>(st.st_size);
  if (size_ > 0) {
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      int err = errno;
      ::close(fd);
      throw IoError("cannot map " + what + " (" + std::to_string(size_) +
                    " bytes): " + std::strerror(err));
    }
    data_ = static_cast<const unsigned char*>(p);
  }
  ::close(fd);  // the mapping keeps the file alive
}

MappedFile::~MappedFile() {
  if (data_) ::munmap(const_cast<unsigned char*>(data_), size_);
}

}  // namespace zt::data
