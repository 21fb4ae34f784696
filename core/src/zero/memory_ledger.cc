#include "zero/memory_ledger.h"

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

void MemoryLedger::staging_added(int64_t bytes) {
  report_.offload_staging += bytes;
  report_.offload_staging_peak = std::max(report_.offload_staging_peak, report_.offload_staging);
}

void MemoryLedger::staging_freed(int64_t bytes) {
  subtract(report_.offload_staging, bytes, "offload staging");
}

StagingBuffer::StagingBuffer(OffloadTier& tier, int64_t bytes, MemoryLedger& ledger)
    : ledger_(&ledger), buffer_(tier.host_buffer(bytes)) {
  ledger_->staging_added(static_cast<int64_t>(buffer_.nbytes()));
}

StagingBuffer::~StagingBuffer() {
  // Never throws here: what was added at construction is exactly what is freed.
  if (buffer_.defined()) ledger_->staging_freed(static_cast<int64_t>(buffer_.nbytes()));
}

StagingBuffer::StagingBuffer(StagingBuffer&& other) noexcept
    : ledger_(other.ledger_), buffer_(std::move(other.buffer_)) {
  other.buffer_ = at::Tensor();
}

}  // namespace zt
