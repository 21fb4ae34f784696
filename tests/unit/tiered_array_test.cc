// TieredArray over the real offload_nvme tier: tiles and whole-array reads come back as
// written, and bytes changed under it (a file cut and re-extended, a byte flipped) are caught
// by the checksums and reported with the array's name and the step, not used. The host buffers
// it and TierGradients allocate are counted as staging. TierGradients (gradient shards kept in
// the tier) adds reductions into a gradient tile by tile and measures the step's final value.
#include <ATen/ATen.h>
#include <doctest/doctest.h>

#include <fcntl.h>
#include <unistd.h>

#include <filesystem>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "../test_util.h"
#include "zero/tier_gradients.h"
#include "zero/tiered_array.h"
#include "zt/error.h"
#include "zt/host/plugin_loader.h"

namespace {

std::unique_ptr<zt::OffloadTier> nvme_tier(const std::string& dir) {
  static zt::PluginCatalog catalog;
  const zt::OffloadPlugin& plugin = catalog.offload("offload_nvme", "plugins.offload_optimizer");
  return plugin.create(zt::Options("plugin.offload_nvme", plugin.options(), {{"path", dir}}, {}),
                       zt::OffloadContext{0, "plugins.offload_optimizer", "tiered", false});
}

// The one region file under `dir` (the tier's .zt-owner beside it is no region).
std::string only_file_under(const std::filesystem::path& dir) {
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) {
    if (e.is_regular_file() && e.path().filename().string().rfind('.', 0) != 0)
      return e.path().string();
  }
  return "";
}

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const zt::IoError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("array_checksum is additive over tiles and sees moved and zeroed words") {
  std::vector<uint8_t> data(3 * 4096 + 13);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i * 7 + 3);
  const uint64_t whole = zt::array_checksum(data.data(), data.size(), 0);
  uint64_t tiles = 0;
  for (size_t off = 0; off < data.size(); off += 4096) {
    tiles += zt::array_checksum(data.data() + off, std::min<size_t>(4096, data.size() - off), off);
  }
  CHECK(tiles == whole);
  std::vector<uint8_t> swapped = data;
  std::swap_ranges(swapped.begin(), swapped.begin() + 8,
                   swapped.begin() + 8);  // two words trade places
  CHECK(zt::array_checksum(swapped.data(), swapped.size(), 0) != whole);
  std::vector<uint8_t> zeroed = data;
  std::fill(zeroed.begin() + 4096, zeroed.begin() + 8192, 0);
  CHECK(zt::array_checksum(zeroed.data(), zeroed.size(), 0) != whole);
  // The tail (13 bytes) counts too.
  std::vector<uint8_t> tail = data;
  tail.back() ^= 1;
  CHECK(zt::array_checksum(tail.data(), tail.size(), 0) != whole);
}

TEST_CASE("a tiered array round trips by tiles and whole, and catches bytes changed under it") {
  zt::test::TempDir dir;
  auto tier = nvme_tier(dir.path().string());
  tier->prepare(1 << 20);
  const int64_t bytes = 3 * 4096 + 100, tile = 4096;
  zt::MemoryLedger ledger;
  zt::TieredArray array(*tier, "exp_avg of group 7", bytes, tile, ledger);
  CHECK(array.address() == nullptr);
  at::Tensor values = at::randint(0, 255, {bytes}, at::kByte);
  array.upload(values, at::kByte);
  at::Tensor back = tier->host_buffer(bytes);
  array.read_all(back.data_ptr())->wait();
  CHECK(std::memcmp(back.data_ptr(), values.data_ptr(), bytes) == 0);
  CHECK_NOTHROW(array.verify_all(back.data_ptr(), 1));
  // A tile rewritten through the array is checked against its new bytes.
  at::Tensor t1 = tier->host_buffer(tile);
  std::memset(t1.data_ptr(), 0x5a, tile);
  array.write_tile(1, t1.data_ptr())->wait();
  at::Tensor got = tier->host_buffer(tile);
  array.read_tile(1, got.data_ptr())->wait();
  CHECK_NOTHROW(array.verify_tile(1, got.data_ptr(), 2));

  // Someone cuts the file to nothing and the job writes the last tile again: the size is whole
  // again, the first tiles read back as zeros.
  const std::string file = only_file_under(dir.path());
  REQUIRE(!file.empty());
  REQUIRE(truncate(file.c_str(), 0) == 0);
  at::Tensor last = tier->host_buffer(tile);
  std::memset(last.data_ptr(), 1, tile);
  array.write_tile(3, last.data_ptr())->wait();
  array.read_tile(0, got.data_ptr())->wait();
  std::string e = error_of([&] { array.verify_tile(0, got.data_ptr(), 9); });
  CHECK(zt::test::contains(e, "exp_avg of group 7"));
  CHECK(zt::test::contains(e, "bytes 0..4096 of 12388"));
  CHECK(zt::test::contains(e, "at step 9"));
  CHECK(zt::test::contains(e, dir.path().string()));
  array.read_all(back.data_ptr())->wait();
  CHECK_FALSE(error_of([&] { array.verify_all(back.data_ptr(), 10); }).empty());
}

namespace {

// Flips one byte of the tier's only file at `offset`, as a disk or a person might.
void flip_byte(const std::filesystem::path& dir, int64_t offset) {
  const std::string file = only_file_under(dir);
  REQUIRE(!file.empty());
  const int fd = open(file.c_str(), O_RDWR);
  REQUIRE(fd >= 0);
  unsigned char b = 0;
  REQUIRE(pread(fd, &b, 1, offset) == 1);
  b ^= 0x40;
  REQUIRE(pwrite(fd, &b, 1, offset) == 1);
  close(fd);
}

}  // namespace

TEST_CASE("upload and read_range count their one tile buffer, and a range cuts partial tiles") {
  zt::test::TempDir dir;
  auto tier = nvme_tier(dir.path().string());
  tier->prepare(1 << 20);
  zt::MemoryLedger ledger;
  const int64_t bytes = 3 * 4096 + 100, tile = 4096;  // the last tile is 100 bytes
  zt::TieredArray array(*tier, "fp32 gradient of group 3", bytes, tile, ledger);
  at::Tensor values = at::randint(0, 255, {bytes}, at::kByte);
  array.upload(values, at::kByte);
  CHECK(ledger.report().offload_staging == 0);
  CHECK(ledger.report().offload_staging_peak == tile);
  // From inside the first tile to inside the partial last one: runs split at tile bounds only.
  std::vector<uint8_t> got;
  std::vector<int64_t> runs;
  array.read_range(1000, bytes - 40, 1, [&](int64_t offset, const void* data, int64_t n) {
    CHECK(offset == 1000 + static_cast<int64_t>(got.size()));
    runs.push_back(n);
    got.insert(got.end(), static_cast<const uint8_t*>(data), static_cast<const uint8_t*>(data) + n);
  });
  CHECK(runs == std::vector<int64_t>{4096 - 1000, 4096, 4096, 60});
  REQUIRE(static_cast<int64_t>(got.size()) == bytes - 40 - 1000);
  CHECK(std::memcmp(got.data(), values.data_ptr<uint8_t>() + 1000, got.size()) == 0);
  CHECK(ledger.report().offload_staging == 0);
  CHECK(ledger.report().offload_staging_peak == tile);
  // A byte changed in the partial tile is caught there, named.
  flip_byte(dir.path(), 3 * 4096 + 7);
  const std::string e = error_of(
      [&] { array.read_range(0, bytes, 4, [](int64_t, const void*, int64_t) {}); });
  CHECK(zt::test::contains(e, "fp32 gradient of group 3 (bytes 12288..12388 of 12388)"));
  CHECK(zt::test::contains(e, "at step 4"));
  CHECK(ledger.report().offload_staging == 0);
}

TEST_CASE("tier gradients: the first reduction writes, later ones add, the last one is measured") {
  zt::test::TempDir dir;
  auto tier = nvme_tier(dir.path().string());
  tier->prepare(1 << 20);
  zt::MemoryLedger ledger;
  const int64_t shard = 2 * 1024 + 37, tile = 1024;  // three tiles of fp32, the last partial
  std::vector<zt::ShardStorage> storage(1);
  zt::ShardStorage& s = storage[0];
  s.grad_file = std::make_unique<zt::TieredArray>(*tier, "fp32 gradient of group 0", shard * 4,
                                                  tile * 4, ledger);
  zt::TierGradients grads(storage, ledger, true, true);
  // Reductions arrive in the compute dtype (bf16 here), the sum is kept in fp32.
  const at::Tensor a = at::randn({shard}).to(at::kBFloat16),
                   b = at::randn({shard}).to(at::kBFloat16);
  const at::Tensor c = at::randn({shard}).to(at::kBFloat16);
  grads.add(0, a, /*first=*/true, /*last=*/false, 1);
  CHECK_FALSE(s.grad_measured);
  grads.add(0, b, false, false, 1);
  grads.add(0, c, false, true, 1);
  grads.settle();
  const at::Tensor want = a.to(at::kFloat).add_(b.to(at::kFloat)).add_(c.to(at::kFloat));
  REQUIRE(s.grad_measured);
  CHECK_FALSE(s.grad_nonfinite);
  const double want_sq = want.to(at::kDouble).pow(2).sum().item<double>();
  CHECK(s.grad_sq == doctest::Approx(want_sq).epsilon(1e-12));
  at::Tensor back = at::empty({shard}, at::kFloat);
  s.grad_file->read_range(0, shard * 4, 1, [&](int64_t offset, const void* data, int64_t n) {
    std::memcpy(static_cast<char*>(back.data_ptr()) + offset, data, static_cast<size_t>(n));
  });
  CHECK(at::equal(back, want));
  // Three tile buffers (read ahead, compute, write behind), kept for the next micro step.
  CHECK(ledger.report().offload_staging == 3 * tile * 4);
  CHECK(ledger.report().offload_staging_peak == 3 * tile * 4 + tile * 4);  // + read_range's

  // The next step's first reduction replaces the sum; a non-finite value is flagged.
  at::Tensor inf = at::zeros({shard}, at::kBFloat16);
  inf[shard - 1] = std::numeric_limits<float>::infinity();
  grads.add(0, inf, true, true, 2);
  grads.settle();
  CHECK(s.grad_measured);
  CHECK(s.grad_nonfinite);

  // A tile changed under the job is caught by the next read-add-write, naming the step.
  grads.add(0, a, true, false, 3);
  grads.settle();
  flip_byte(dir.path(), 1024 * 4 + 12);
  const std::string e = error_of([&] { grads.add(0, b, false, true, 3); });
  CHECK(zt::test::contains(e, "fp32 gradient of group 0 (bytes 4096..8192 of 8340)"));
  CHECK(zt::test::contains(e, "at step 3"));
}

TEST_CASE("tier gradients without pipelining use one tile buffer") {
  zt::test::TempDir dir;
  auto tier = nvme_tier(dir.path().string());
  tier->prepare(1 << 20);
  zt::MemoryLedger ledger;
  const int64_t shard = 5000, tile = 1024;
  std::vector<zt::ShardStorage> storage(1);
  storage[0].grad_file = std::make_unique<zt::TieredArray>(*tier, "fp32 gradient of group 0",
                                                           shard * 4, tile * 4, ledger);
  zt::TierGradients grads(storage, ledger, false, false);
  const at::Tensor a = at::randn({shard}), b = at::randn({shard});
  grads.add(0, a, true, false, 1);
  grads.add(0, b, false, true, 1);
  grads.settle();
  CHECK(ledger.report().offload_staging_peak == tile * 4);
  const at::Tensor want = a + b;
  CHECK(storage[0].grad_sq ==
        doctest::Approx(want.to(at::kDouble).pow(2).sum().item<double>()).epsilon(1e-12));
}

TEST_CASE("upload converts to the array's dtype one tile at a time, from any strides") {
  zt::test::TempDir dir;
  auto tier = nvme_tier(dir.path().string());
  tier->prepare(1 << 20);
  zt::MemoryLedger ledger;
  const int64_t elements = 5000, tile = 4096;  // bf16: 2048 elements a tile, the last 904
  zt::TieredArray array(*tier, "parameters of group 1", elements * 2, tile, ledger);
  const at::Tensor master = at::randn({elements}, at::kFloat);
  array.upload(master, at::kBFloat16);
  // One tile buffer, not a converted copy of the whole array.
  CHECK(ledger.report().offload_staging_peak == tile);
  at::Tensor back = tier->host_buffer(elements * 2);
  array.read_all(back.data_ptr())->wait();
  const at::Tensor got = zt::view_of(back.data_ptr(), elements, at::kBFloat16);
  CHECK(at::equal(got, master.to(at::kBFloat16)));
  // A broadcast source (zeros for optimizer states) needs no buffer of its own size.
  array.upload(at::full({1}, 3.0, at::kFloat).expand({elements}), at::kBFloat16);
  array.read_all(back.data_ptr())->wait();
  CHECK(at::equal(got, at::full({elements}, 3.0, at::kBFloat16)));
}
