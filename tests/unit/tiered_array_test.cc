// TieredArray over the real offload_nvme tier: tiles and whole-array reads come back as
// written, and bytes changed under it (a file cut and re-extended, a byte flipped) are caught
// by the checksums and reported with the array's name and the step, not used.
#include <ATen/ATen.h>
#undef CHECK
#include <doctest/doctest.h>

#include <fcntl.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "../test_util.h"
#include "tiered_array.h"
#include "zt/error.h"
#include "zt/plugin_loader.h"

namespace {

std::unique_ptr<zt::OffloadTier> nvme_tier(const std::string& dir) {
  static zt::PluginCatalog catalog;
  const zt::OffloadPlugin& plugin = catalog.offload("offload_nvme", "plugins.offload_optimizer");
  return plugin.create(zt::Options("plugin.offload_nvme", plugin.options(), {{"path", dir}}, {}),
                       zt::OffloadContext{0, "plugins.offload_optimizer", "tiered", false});
}

std::string only_file_under(const std::filesystem::path& dir) {
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) {
    if (e.is_regular_file()) return e.path().string();
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
  zt::TieredArray array(*tier, "exp_avg of group 7", bytes, tile);
  CHECK(array.address() == nullptr);
  at::Tensor values = at::randint(0, 255, {bytes}, at::kByte);
  array.upload(values.data_ptr());
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
