// The small, typed family of errors zt throws. Every message names the thing, the place and the
// way out; the trainer turns any of them into one line and a non-zero exit (see exit_code()).
// Plugins throw these too, picking the class by who can fix the problem (as NCCL's plugin
// headers split system error / internal error / invalid usage):
//   ConfigError   the user: a value in the TOML file or --set (name the key as plugin.<id>.<key>)
//   PluginError   the installation: a plugin missing, broken, or built without a feature
//   CommError     the job's peers: a dead or silent rank, a timeout, a failed rendezvous
//   IoError       the OS or storage: a file, folder, device or allocation refused
//   NumericError  the training itself: NaN or inf where no loss scaler can absorb it
//   InternalError a caller broke an interface contract (a bug in zt or a plugin)
// Anything else that escapes a plugin (std::exception, c10::Error) is reported as internal, but
// a refused allocation (std::bad_alloc, LibTorch's out of memory) and a std::filesystem error,
// which the trainer reports as I/O errors.
// Thread safety: immutable after construction; may be copied and rethrown on any thread.
#pragma once

#include <stdexcept>
#include <string>

#include "zt/api.h"

namespace zt {

enum class ErrorKind {
  kConfig = 2,   // invalid usage: the TOML file, --set overrides, command line
  kPlugin = 3,   // a plugin that cannot be found, loaded or used
  kComm = 4,     // communication: a dead peer, a timeout, a rendezvous that failed
  kIo = 5,       // the OS refused: files, directories, devices
  kNumeric = 6,  // NaN/inf or other numeric failure during training
  kInternal = 7  // zt or a plugin misused an interface: a bug to report
};

class ZT_API Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& message);
  ~Error() override;
  ErrorKind kind() const { return kind_; }
  // The process exit code the trainer uses for this error.
  int exit_code() const { return static_cast<int>(kind_); }
  // "config", "plugin", ...
  const char* kind_name() const;

 private:
  ErrorKind kind_;
};

class ZT_API ConfigError : public Error {
 public:
  explicit ConfigError(const std::string& m) : Error(ErrorKind::kConfig, m) {}
};
class ZT_API PluginError : public Error {
 public:
  explicit PluginError(const std::string& m) : Error(ErrorKind::kPlugin, m) {}
};
class ZT_API CommError : public Error {
 public:
  explicit CommError(const std::string& m) : Error(ErrorKind::kComm, m) {}
};
class ZT_API IoError : public Error {
 public:
  explicit IoError(const std::string& m) : Error(ErrorKind::kIo, m) {}
};
class ZT_API NumericError : public Error {
 public:
  explicit NumericError(const std::string& m) : Error(ErrorKind::kNumeric, m) {}
};
class ZT_API InternalError : public Error {
 public:
  explicit InternalError(const std::string& m) : Error(ErrorKind::kInternal, m) {}
};

}  // namespace zt
