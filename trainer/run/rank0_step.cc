#include "run/rank0_step.h"

#include <exception>
#include <vector>

#include "zt/error.h"

namespace zt::trainer {

void throw_of_kind(int kind, const std::string& message) {
  switch (static_cast<ErrorKind>(kind)) {
    case ErrorKind::kConfig: throw ConfigError(message);
    case ErrorKind::kPlugin: throw PluginError(message);
    case ErrorKind::kComm: throw CommError(message);
    case ErrorKind::kIo: throw IoError(message);
    case ErrorKind::kNumeric: throw NumericError(message);
    default: throw InternalError(message);
  }
}

void rank0_step(Store& store, const std::string& key, int rank, std::chrono::milliseconds timeout,
                const std::string& what, const std::function<void()>& step) {
  // "ok", or "failed <kind>" and a newline before the error's text (which may hold any byte).
  auto publish = [&](const std::string& text) {
    store.set(key, std::vector<uint8_t>(text.begin(), text.end()));
  };
  if (rank == 0) {
    try {
      step();
    } catch (const Error& e) {
      publish("failed " + std::to_string(static_cast<int>(e.kind())) + "\n" + e.what());
      throw;
    } catch (const std::exception& e) {
      publish("failed " + std::to_string(static_cast<int>(ErrorKind::kInternal)) + "\n" + e.what());
      throw;
    }
    publish("ok");
    return;
  }
  const std::vector<uint8_t> value = store.get(key, timeout);
  const std::string word(value.begin(), value.end());
  if (word == "ok") return;
  const size_t newline = word.find('\n');
  const int kind = word.rfind("failed ", 0) == 0 && newline != std::string::npos
                       ? std::atoi(word.substr(7, newline - 7).c_str())
                       : static_cast<int>(ErrorKind::kInternal);
  // A comm error here, how a rank sees a peer go: a launcher names rank 0, whose error is the
  // cause, and takes its exit code (a config error is not restarted), though this line may come
  // first.
  const Error cause(static_cast<ErrorKind>(kind), "");
  throw CommError("rank " + std::to_string(rank) + ": rank 0 failed to " + what + " (" +
                  cause.kind_name() +
                  " error): " + (newline == std::string::npos ? word : word.substr(newline + 1)));
}

}  // namespace zt::trainer
