#include "zt/error.h"

namespace zt {

Error::Error(ErrorKind kind, const std::string& message)
    : std::runtime_error(message), kind_(kind) {}

// Out of line so the typeinfo lives in libzt_core and is shared with plugins.
Error::~Error() = default;

const char* Error::kind_name() const {
  switch (kind_) {
    case ErrorKind::kConfig: return "config";
    case ErrorKind::kPlugin: return "plugin";
    case ErrorKind::kComm: return "comm";
    case ErrorKind::kIo: return "io";
    case ErrorKind::kNumeric: return "numeric";
    case ErrorKind::kInternal: return "internal";
  }
  return "error";
}

}  // namespace zt
