#include "tiered_array.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cstring>

#include "zt/error.h"

namespace zt {

uint64_t array_checksum(const void* data, int64_t bytes, int64_t offset) {
  const auto* p = static_cast<const unsigned char*>(data);
  uint64_t sum = 0;
  int64_t index = offset / 8;
  int64_t i = 0;
  // A word's contribution depends on where it sits, so moved or zeroed ranges change the sum;
  // the multiply-xorshift is cheap next to the I/O it guards.
  auto mix = [](uint64_t word, uint64_t at) {
    uint64_t x = word ^ (at * 0x9E3779B97F4A7C15ull);
    x *= 0xBF58476D1CE4E5B9ull;
    return x ^ (x >> 31);
  };
  for (; i + 8 <= bytes; i += 8, ++index) {
    uint64_t word;
    std::memcpy(&word, p + i, 8);
    sum += mix(word, static_cast<uint64_t>(index));
  }
  if (i < bytes) {
    uint64_t word = 0;
    std::memcpy(&word, p + i, static_cast<size_t>(bytes - i));
    sum += mix(word, static_cast<uint64_t>(index));
  }
  return sum;
}

TieredArray::TieredArray(OffloadTier& tier, std::string name, int64_t bytes, int64_t tile_bytes)
    : tier_(tier),
      name_(std::move(name)),
      bytes_(bytes),
      tile_bytes_(std::max<int64_t>(1, tile_bytes)) {
  region_ = tier_.allocate(name_, bytes_);
  address_ = tier_.address(region_);
  tile_sums_.assign(static_cast<size_t>((bytes_ + tile_bytes_ - 1) / tile_bytes_), 0);
}

TieredArray::~TieredArray() { tier_.release(region_); }

int64_t TieredArray::tile_length(int64_t t) const {
  return std::min(tile_bytes_, bytes_ - t * tile_bytes_);
}

void TieredArray::upload(const void* src) {
  if (address_) {
    std::memcpy(address_, src, static_cast<size_t>(bytes_));
    return;
  }
  if (bytes_ == 0) return;
  at::Tensor buffer = tier_.host_buffer(std::min(bytes_, tile_bytes_));
  for (int64_t t = 0; t < static_cast<int64_t>(tile_sums_.size()); ++t) {
    std::memcpy(buffer.data_ptr(), static_cast<const char*>(src) + t * tile_bytes_,
                static_cast<size_t>(tile_length(t)));
    write_tile(t, buffer.data_ptr())->wait();
  }
}

std::shared_ptr<Work> TieredArray::read_tile(int64_t t, void* host) {
  return tier_.read(region_, t * tile_bytes_, host, tile_length(t));
}

void TieredArray::verify_tile(int64_t t, const void* host, int64_t step) const {
  if (array_checksum(host, tile_length(t), t * tile_bytes_) != tile_sums_[t]) {
    mismatch(t * tile_bytes_, tile_length(t), step);
  }
}

std::shared_ptr<Work> TieredArray::write_tile(int64_t t, const void* host) {
  tile_sums_[t] = array_checksum(host, tile_length(t), t * tile_bytes_);
  return tier_.write(region_, t * tile_bytes_, host, tile_length(t));
}

std::shared_ptr<Work> TieredArray::read_all(void* host) {
  return tier_.read(region_, 0, host, bytes_);
}

void TieredArray::verify_all(const void* host, int64_t step) const {
  uint64_t want = 0;
  for (uint64_t s : tile_sums_) want += s;
  if (array_checksum(host, bytes_, 0) != want) mismatch(0, bytes_, step);
}

void TieredArray::mismatch(int64_t first, int64_t length, int64_t step) const {
  throw IoError("offload: " + name_ + " (bytes " + std::to_string(first) + ".." +
                std::to_string(first + length) + " of " + std::to_string(bytes_) +
                ") read back different from what was written, at step " + std::to_string(step) +
                ": the tier's storage (" + tier_.describe() +
                ") was changed under the running "
                "job; step " +
                std::to_string(step) +
                " was not completed, rerun the job and leave "
                "the offload folder alone while it runs");
}

}  // namespace zt
