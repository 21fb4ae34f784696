#include "host_tier.h"

#include <ATen/ATen.h>

#include <cstdlib>
#include <cstring>

#include "zt/bytes.h"
#include "zt/error.h"
#include "zt/host_memory.h"

namespace zt::offload_cpu {

HostTier::HostTier(const OffloadContext& context, bool pin) : context_(context), pin_(pin) {}

HostTier::~HostTier() = default;

std::string HostTier::describe() const {
  return std::string("host memory (") + (pin_ ? "pinned" : "page-aligned") + ")";
}

void HostTier::prepare(int64_t total_bytes) {
  // Only a sanity check: other ranks and processes share the host, so this cannot promise the
  // memory, but a request larger than what the host (or the job's memory cgroup, a container's
  // or a Slurm job's limit) has free now can only end in the OOM killer.
  std::string source;
  const int64_t available = host_memory_room_bytes(&source);
  if (available >= 0 && total_bytes > available) {
    throw IoError("offload_cpu (" + context_.role + ", rank " + std::to_string(context_.rank) +
                  "): needs " + bytes_text(total_bytes) + " of host memory but only " +
                  bytes_text(available) + " is " + source +
                  "; offload to offload_nvme "
                  "instead, lower zero.offload_optimizer_fraction / zero.offload_param_fraction, "
                  "or use more ranks");
  }
}

at::Tensor HostTier::allocate_bytes(int64_t bytes) const {
  if (pin_) return at::empty({bytes}, at::TensorOptions().dtype(at::kByte).pinned_memory(true));
  void* p = nullptr;
  if (posix_memalign(&p, kPage, static_cast<size_t>(std::max<int64_t>(bytes, kPage))) != 0) {
    throw IoError("offload_cpu (" + context_.role + ", rank " + std::to_string(context_.rank) +
                  "): cannot allocate " + bytes_text(bytes) +
                  " of host memory; offload to "
                  "offload_nvme or lower the offload fractions");
  }
  return at::from_blob(
      p, {bytes}, [](void* q) { std::free(q); }, at::TensorOptions().dtype(at::kByte));
}

int64_t HostTier::allocate(const std::string& name, int64_t bytes) {
  if (bytes < 0) {
    throw InternalError("offload_cpu: allocate of region '" + name + "' with " +
                        std::to_string(bytes) + " bytes");
  }
  const int64_t size = round_up(bytes, kPage);
  const int64_t id = next_id_++;
  regions_[id] = Region{name, size, allocate_bytes(size)};
  stats_.bytes_allocated += size;
  return id;
}

void HostTier::release(int64_t id) {
  auto it = regions_.find(id);
  if (it == regions_.end()) return;
  stats_.bytes_allocated -= it->second.bytes;
  regions_.erase(it);
}

HostTier::Region& HostTier::region(int64_t id, int64_t offset, int64_t bytes, const char* op,
                                   const void* host) {
  auto it = regions_.find(id);
  if (it == regions_.end() || offset < 0 || bytes < 0 || offset + bytes > it->second.bytes) {
    throw InternalError("offload_cpu: " + std::string(op) + " of " + std::to_string(bytes) +
                        " bytes at offset " + std::to_string(offset) + " outside region " +
                        std::to_string(id) +
                        (it == regions_.end() ? " (unknown)" : " (" + it->second.name + ")"));
  }
  // The tier contract's alignment, held here as offload_nvme holds it: an engine that passed a
  // misaligned offset here would fail only on the other tier.
  if (offset % kPage != 0) {
    throw InternalError("offload_cpu: " + std::string(op) + " at offset " + std::to_string(offset) +
                        " of region " + std::to_string(id) + " (" + it->second.name +
                        "), not a multiple of alignment() = " + std::to_string(kPage));
  }
  // The contract's check on the caller's memory (offload_nvme's too): a memcpy from null crashed.
  if (bytes > 0 && host == nullptr) {
    throw InternalError("offload_cpu: " + std::string(op) + " of " + std::to_string(bytes) +
                        " bytes of region " + std::to_string(id) + " (" + it->second.name +
                        ") with no host memory");
  }
  return it->second;
}

void* HostTier::address(int64_t id) { return region(id, 0, 0, "address").memory.data_ptr(); }

std::shared_ptr<Work> HostTier::write(int64_t id, int64_t offset, const void* host, int64_t bytes) {
  Region& r = region(id, offset, bytes, "write", host);
  std::memcpy(static_cast<char*>(r.memory.data_ptr()) + offset, host, static_cast<size_t>(bytes));
  stats_.bytes_written += bytes;
  ++stats_.writes;
  // A memcpy: finished by the time the handle is returned.
  return std::make_shared<CompletedWork>();
}

std::shared_ptr<Work> HostTier::read(int64_t id, int64_t offset, void* host, int64_t bytes) {
  Region& r = region(id, offset, bytes, "read", host);
  std::memcpy(host, static_cast<const char*>(r.memory.data_ptr()) + offset,
              static_cast<size_t>(bytes));
  stats_.bytes_read += bytes;
  ++stats_.reads;
  return std::make_shared<CompletedWork>();
}

at::Tensor HostTier::host_buffer(int64_t bytes) { return allocate_bytes(round_up(bytes, kPage)); }

}  // namespace zt::offload_cpu
