#include "run/rank0_step.h"

#include <exception>
#include <filesystem>
#include <thread>
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

void rank0_step(Store& store, const std::string& key, int rank, int world,
                std::chrono::milliseconds timeout, const std::string& what,
                const std::function<void()>& step) {
  // "ok", or "failed <kind>" and a newline before the error's text (which may hold any byte).
  auto publish = [&](const std::string& text) {
    store.set(key, std::vector<uint8_t>(text.begin(), text.end()));
  };
  // Rank 0 hosts the store: failing, it stays until every other rank read its word (each adds
  // one under key/read), or `timeout`, so that none of them meets a store that is gone instead.
  auto fail = [&](ErrorKind kind, const std::string& message) {
    try {
      publish("failed " + std::to_string(static_cast<int>(kind)) + "\n" + message);
      const auto until = std::chrono::steady_clock::now() + timeout;
      while (store.add(key + "/read", 0) < world - 1 && std::chrono::steady_clock::now() < until)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    } catch (const std::exception&) {  // the store failing too: rank 0's own error is the one
    }
  };
  if (rank == 0) {
    try {
      step();
    } catch (const Error& e) {
      fail(e.kind(), e.what());
      throw;
    } catch (const std::filesystem::filesystem_error& e) {
      fail(ErrorKind::kIo, e.what());  // as main reports it
      throw;
    } catch (const std::exception& e) {
      fail(ErrorKind::kInternal, e.what());
      throw;
    }
    publish("ok");
    return;
  }
  const std::vector<uint8_t> value = store.get(key, timeout);
  const std::string word(value.begin(), value.end());
  if (word == "ok") return;
  store.add(key + "/read", 1);
  const size_t newline = word.find('\n');
  const int kind = word.rfind("failed ", 0) == 0 && newline != std::string::npos
                       ? std::atoi(word.substr(7, newline - 7).c_str())
                       : static_cast<int>(ErrorKind::kInternal);
  // Of rank 0's kind: the job's exit code is right whichever rank a launcher names (srun ends
  // with the highest of its tasks'), and a config error is not restarted.
  throw_of_kind(kind, "rank " + std::to_string(rank) + ": rank 0 failed to " + what + ": " +
                          (newline == std::string::npos ? word : word.substr(newline + 1)));
}

}  // namespace zt::trainer
