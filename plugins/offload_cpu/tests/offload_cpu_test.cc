// offload_cpu, loaded the way the trainer loads it: regions are page-aligned and addressable,
// reads and writes are exact copies counted in stats(), misuse is an error, and a request for
// more memory than the host has fails in prepare() with a message naming the way out.
#include <ATen/ATen.h>
#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "zt/error.h"
#include "zt/host/plugin_loader.h"
#include "zt/offload.h"

namespace {

std::unique_ptr<zt::OffloadTier> make_tier() {
  static zt::PluginCatalog catalog;
  const zt::OffloadPlugin& plugin = catalog.offload("offload_cpu", "plugins.offload_optimizer");
  zt::OffloadContext context;
  context.role = "plugins.offload_optimizer";
  return plugin.create(zt::Options("plugin.offload_cpu", plugin.options(), {}, {}), context);
}

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const zt::Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("regions are page-aligned, addressable and round trip exactly") {
  auto tier = make_tier();
  CHECK(tier->alignment() == 4096);
  std::vector<int64_t> sizes = {1, 4095, 4096, 4097, (3 << 20) + 5};
  for (int64_t bytes : sizes) {
    const int64_t id = tier->allocate("r" + std::to_string(bytes), bytes);
    auto* base = static_cast<uint8_t*>(tier->address(id));
    REQUIRE(base != nullptr);
    CHECK(reinterpret_cast<uintptr_t>(base) % 4096 == 0);
    std::vector<uint8_t> in(bytes), out(bytes, 0);
    for (int64_t i = 0; i < bytes; ++i) in[i] = static_cast<uint8_t>(i * 131 + bytes);
    auto w = tier->write(id, 0, in.data(), bytes);
    CHECK(w->is_completed());
    CHECK(std::memcmp(base, in.data(), bytes) == 0);  // written where address() points
    tier->read(id, 0, out.data(), bytes)->wait();
    CHECK(out == in);
  }
  zt::OffloadStats s = tier->stats();
  const int64_t total = std::accumulate(sizes.begin(), sizes.end(), int64_t{0});
  CHECK(s.bytes_written == total);
  CHECK(s.bytes_read == total);
  CHECK(s.writes == 5);
  CHECK(s.reads == 5);
  // Sizes round up to whole pages: 1, 1, 1, 2 and 769 pages.
  CHECK(s.bytes_allocated == (1 + 1 + 1 + 2 + 769) * 4096);
}

TEST_CASE("writes at an offset land there and release returns the bytes") {
  auto tier = make_tier();
  const int64_t id = tier->allocate("master", 3 * 4096);
  at::Tensor buf = tier->host_buffer(4096);
  CHECK(buf.nbytes() >= 4096);
  CHECK(reinterpret_cast<uintptr_t>(buf.data_ptr()) % 4096 == 0);
  std::memset(buf.data_ptr(), 7, 4096);
  tier->write(id, 8192, buf.data_ptr(), 4096)->wait();
  auto* base = static_cast<uint8_t*>(tier->address(id));
  CHECK(base[8192] == 7);
  CHECK(base[3 * 4096 - 1] == 7);
  tier->release(id);
  CHECK(tier->stats().bytes_allocated == 0);
}

TEST_CASE("a transfer outside a region is an internal error naming the region") {
  auto tier = make_tier();
  const int64_t id = tier->allocate("exp_avg of group 3", 4096);
  std::vector<uint8_t> buf(8192);
  std::string e = error_of([&] { tier->write(id, 4096, buf.data(), 1); });
  CHECK(e.find("exp_avg of group 3") != std::string::npos);
  CHECK(error_of([&] { tier->read(id + 1, 0, buf.data(), 1); }).find("unknown") !=
        std::string::npos);
  // The contract's misuse, refused here as offload_nvme refuses it: an offset off the alignment
  // and a negative size.
  CHECK(error_of([&] { tier->read(id, 100, buf.data(), 8); }).find("not a multiple of alignment") !=
        std::string::npos);
  CHECK(error_of([&] { tier->allocate("x", -1); }).find("-1 bytes") != std::string::npos);
  // No host memory for a transfer of some bytes: named, where a memcpy from null crashed.
  CHECK(error_of([&] { tier->write(id, 0, nullptr, 8); })
            .find("write of 8 bytes of region " + std::to_string(id) +
                  " (exp_avg of group 3) with no host memory") != std::string::npos);
  CHECK(error_of([&] { tier->read(id, 0, nullptr, 8); }).find("with no host memory") !=
        std::string::npos);
}

TEST_CASE("prepare refuses more memory than the host has, naming the way out") {
  auto tier = make_tier();
  std::string e = error_of([&] { tier->prepare(int64_t{1} << 50); });
  // The host's MemAvailable, or the memory cgroup's limit where that is the tighter bound.
  CHECK((e.find("MemAvailable") != std::string::npos ||
         e.find("memory cgroup's limit") != std::string::npos));
  CHECK(e.find("offload_nvme") != std::string::npos);
  CHECK(error_of([&] { tier->prepare(1 << 20); }).empty());
}
