#include "memory_ledger.h"

#include <algorithm>
#include <string>

#include "zt/error.h"

namespace zt {

namespace {

void subtract(int64_t& held, int64_t bytes, const char* what) {
  if (bytes > held) {
    throw InternalError(std::string("memory ledger: freeing ") + std::to_string(bytes) +
                        " bytes of " + what + " but only " + std::to_string(held) +
                        " are held; the engine's accounting is off");
  }
  held -= bytes;
}

}  // namespace

void MemoryLedger::gathered(int64_t bytes) {
  report_.params_gathered += bytes;
  report_.params_gathered_peak = std::max(report_.params_gathered_peak, report_.params_gathered);
}

void MemoryLedger::released(int64_t bytes) {
  subtract(report_.params_gathered, bytes, "gathered parameters");
}

void MemoryLedger::staging_added(int64_t bytes) { report_.offload_staging += bytes; }

void MemoryLedger::staging_freed(int64_t bytes) {
  subtract(report_.offload_staging, bytes, "offload staging");
}

}  // namespace zt
