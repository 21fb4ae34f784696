// offload_nvme through zt::PluginCatalog, as the engine loads it, on the test machine's disk
// (the system temp folder; ext4 here, so O_DIRECT is really used): round trips of random bytes
// at awkward lengths and offsets through aligned and unaligned host memory, queue depths 1 and 8,
// transfers in flight together, many regions, the folder layout and its removal (also during
// exception unwinding), files truncated or deleted under the tier, unwritable folders, misuse.
#include <doctest/doctest.h>
#include "nvme_test_support.h"

#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include "zt/bytes.h"
#include "zt/error.h"
#include "zt/offload.h"

namespace fs = std::filesystem;
using zt::nvme_test::files_in;
using zt::nvme_test::make_tier;
using zt::nvme_test::random_bytes;
using zt::nvme_test::region_files_in;
using zt::test::contains;
using zt::test::TempDir;

namespace {

constexpr int64_t kMiB = 1 << 20;
constexpr int64_t kAlign = 4096;

fs::path rank_dir(const TempDir& dir, const std::string& job = "test", int rank = 0) {
  return dir.path() / ("zt-" + job) / ("rank" + std::to_string(rank));
}

// The single region file in a rank folder whose name starts with `prefix`.
std::string region_file(const fs::path& rank, const std::string& prefix) {
  for (const auto& name : files_in(rank)) {
    if (name.rfind(prefix, 0) == 0) return (rank / name).string();
  }
  return "";
}

// The open flags of this process's descriptor for `path` (from /proc/self/fdinfo), or -1.
long open_flags_of(const std::string& path) {
  for (const auto& e : fs::directory_iterator("/proc/self/fd")) {
    std::error_code ec;
    if (fs::read_symlink(e.path(), ec).string() != path) continue;
    std::ifstream in("/proc/self/fdinfo/" + e.path().filename().string());
    std::string key, value;
    while (in >> key >> value) {
      if (key == "flags:") return std::stol(value, nullptr, 8);
    }
  }
  return -1;
}

// A host area with room for round_up(bytes, kAlign) plus guard bytes on both sides, placed at
// `misalign` bytes past an aligned address; the guards catch writes outside [0, bytes).
class GuardedBuffer {
 public:
  GuardedBuffer(int64_t bytes, int64_t misalign, uint8_t fill)
      : bytes_(bytes),
        fill_(fill),
        storage_(static_cast<size_t>(zt::round_up(bytes, kAlign) + 3 * kAlign), fill) {
    uintptr_t base = reinterpret_cast<uintptr_t>(storage_.data()) + kAlign;
    base = (base + kAlign - 1) / kAlign * kAlign;
    data_ = reinterpret_cast<uint8_t*>(base) + misalign;
  }
  uint8_t* data() { return data_; }
  // True when nothing outside [data, data + bytes) changed from the fill pattern.
  bool guards_intact() const {
    const uint8_t* begin = storage_.data();
    for (const uint8_t* p = begin; p < begin + storage_.size(); ++p) {
      if ((p < data_ || p >= data_ + bytes_) && *p != fill_) return false;
    }
    return true;
  }

 private:
  int64_t bytes_;
  uint8_t fill_;
  std::vector<uint8_t> storage_;
  uint8_t* data_;
};

}  // namespace

TEST_CASE("the plugin loads as an offload plugin and declares its six options with defaults") {
  const zt::PluginRecord& record = zt::nvme_test::catalog().load("offload_nvme");
  CHECK(record.kind == ZT_KIND_OFFLOAD);
  const auto specs = zt::nvme_test::catalog().offload("offload_nvme", "test").options();
  std::map<std::string, zt::Value> defaults;
  for (const auto& s : specs) {
    CHECK_MESSAGE(s.doc.size() > 20, s.name);
    defaults[s.name] = s.default_value;
  }
  REQUIRE(defaults.size() == 6);
  CHECK(std::get<std::string>(defaults["path"]) == "runs/nvme");
  CHECK(std::get<int64_t>(defaults["queue_depth"]) == 8);
  CHECK(std::get<int64_t>(defaults["buffer_count"]) == 4);
  CHECK(std::get<int64_t>(defaults["buffer_mb"]) == 16);
  CHECK(std::get<int64_t>(defaults["block_kb"]) == 1024);
  CHECK(std::get<bool>(defaults["direct"]) == true);
  for (const auto& s : specs) {
    if (s.name == "queue_depth") {
      CHECK(*s.min == 1);
      CHECK(*s.max == 1024);
      CHECK_THROWS_AS(zt::check_option(s, int64_t{0}, "plugin.offload_nvme", {"--set"}),
                      zt::ConfigError);
      CHECK_THROWS_AS(zt::check_option(s, int64_t{1025}, "plugin.offload_nvme", {"--set"}),
                      zt::ConfigError);
    }
  }
}

TEST_CASE("describe, alignment, stats and host buffers before any I/O") {
  TempDir dir;
  auto tier = make_tier(dir.path().string());
  CHECK(tier->alignment() >= kAlign);
  CHECK(tier->alignment() % kAlign == 0);
  CHECK(tier->describe() == "files under " + rank_dir(dir).string() +
                                " (O_DIRECT, io_uring queue depth 8, 4 x 16 MiB buffers)");
  CHECK(tier->address(0) == nullptr);
  const zt::OffloadStats s = tier->stats();
  CHECK(s.staging_bytes == 4 * 16 * kMiB);
  CHECK(s.bytes_allocated == 0);
  for (int64_t bytes : {int64_t{0}, int64_t{1}, int64_t{4095}, int64_t{4097}, 3 * kMiB + 5}) {
    CAPTURE(bytes);
    at::Tensor t = tier->host_buffer(bytes);
    CHECK((t.scalar_type() == at::kByte));
    CHECK(t.numel() == zt::round_up(bytes, kAlign));
    CHECK(reinterpret_cast<uintptr_t>(t.data_ptr()) % tier->alignment() == 0);
  }
  // Nothing touches the disk before prepare() or allocate().
  CHECK_FALSE(fs::exists(dir.path() / "zt-test"));
}

TEST_CASE("round trips of random bytes: lengths 0..3 MiB+5, aligned offsets, aligned and "
          "unaligned host memory, queue depth 1 and 8, 1 MiB and 4 KiB blocks") {
  const std::vector<int64_t> lengths = {0, 1, 4095, 4096, 4097, 3 * kMiB + 5};
  const std::vector<int64_t> offsets = {0, 4096, 12288, kMiB};
  struct Setting {
    int64_t queue_depth, block_kb;
  };
  for (const Setting setting : {Setting{1, 1024}, Setting{8, 1024}, Setting{8, 4}}) {
    TempDir dir;
    auto tier = make_tier(dir.path().string(), {{"queue_depth", setting.queue_depth},
                                                {"block_kb", setting.block_kb},
                                                {"buffer_count", int64_t{2}},
                                                {"buffer_mb", int64_t{1}}});
    tier->prepare(8 * kMiB);
    const int64_t region = tier->allocate("layers.0/exp_avg", 5 * kMiB);
    uint64_t seed = 1;
    for (int64_t bytes : lengths) {
      for (int64_t offset : offsets) {
        // Host memory: an aligned tier buffer, and pointers 1 and 7 bytes past alignment (the
        // bounce path), each with guard bytes checked after the read.
        for (int64_t misalign : {int64_t{0}, int64_t{1}, int64_t{7}}) {
          CAPTURE(setting.queue_depth);
          CAPTURE(setting.block_kb);
          CAPTURE(bytes);
          CAPTURE(offset);
          CAPTURE(misalign);
          const std::vector<uint8_t> data = random_bytes(static_cast<size_t>(bytes), ++seed);
          // Different guard bytes on each side, so guard bytes written to the file and read
          // back into the other buffer are seen too.
          GuardedBuffer src(bytes, misalign, 0xA5), dst(bytes, (misalign * 3) % 11, 0x5A);
          if (bytes) std::memcpy(src.data(), data.data(), data.size());
          tier->write(region, offset, src.data(), bytes)->wait();
          tier->read(region, offset, dst.data(), bytes)->wait();
          // std::equal, not memcmp: an empty vector's data() may be null, which memcmp forbids.
          CHECK(std::equal(data.begin(), data.end(), dst.data()));
          CHECK(dst.guards_intact());
        }
      }
    }
    // The last write (3 MiB+5 at 1 MiB) reached the file itself, zero-padded to alignment.
    const std::string file = region_file(rank_dir(dir), "layers.0_exp_avg-");
    REQUIRE_FALSE(file.empty());
    std::ifstream in(file, std::ios::binary);
    std::vector<uint8_t> on_disk(static_cast<size_t>(zt::round_up(3 * kMiB + 5, kAlign)));
    in.seekg(kMiB);
    in.read(reinterpret_cast<char*>(on_disk.data()), static_cast<std::streamsize>(on_disk.size()));
    const std::vector<uint8_t> last = random_bytes(3 * kMiB + 5, seed);
    CHECK(std::memcmp(on_disk.data(), last.data(), last.size()) == 0);
    CHECK(std::all_of(on_disk.begin() + static_cast<long>(last.size()), on_disk.end(),
                      [](uint8_t b) { return b == 0; }));
  }
}

TEST_CASE("aligned host buffers of the tier round-trip zero-copy sized transfers") {
  TempDir dir;
  auto tier = make_tier(dir.path().string(),
                        {{"buffer_count", int64_t{1}}, {"buffer_mb", int64_t{1}}});
  // 24 MiB through one 1 MiB bounce buffer would be slow and serial; aligned memory needs none.
  const int64_t bytes = 24 * kMiB;
  const int64_t region = tier->allocate("big", bytes);
  at::Tensor out = tier->host_buffer(bytes), in = tier->host_buffer(bytes);
  const std::vector<uint8_t> data = random_bytes(bytes, 99);
  std::memcpy(out.data_ptr(), data.data(), data.size());
  tier->write(region, 0, out.data_ptr(), bytes)->wait();
  tier->read(region, 0, in.data_ptr(), bytes)->wait();
  CHECK(std::memcmp(in.data_ptr(), data.data(), data.size()) == 0);
  const zt::OffloadStats s = tier->stats();
  CHECK(s.bytes_written == bytes);
  CHECK(s.bytes_read == bytes);
  CHECK(s.writes == 1);
  CHECK(s.reads == 1);
  CHECK(s.staging_bytes == kMiB);
}

TEST_CASE("region files are opened with O_DIRECT on a disk that supports it") {
  TempDir dir;
  auto tier = make_tier(dir.path().string());
  tier->prepare(kMiB);
  tier->allocate("m", kMiB);
  const std::string file = region_file(rank_dir(dir), "m-");
  REQUIRE_FALSE(file.empty());
  const long flags = open_flags_of(file);
  REQUIRE(flags >= 0);
  CHECK((flags & O_DIRECT) != 0);
  CHECK(contains(tier->describe(), "(O_DIRECT,"));
  // And with direct = false, the same folder is used buffered and says so.
  auto buffered = make_tier(dir.path().string(), {{"direct", false}}, "other");
  buffered->allocate("m", kMiB);
  const long buffered_flags = open_flags_of(region_file(rank_dir(dir, "other"), "m-"));
  REQUIRE(buffered_flags >= 0);
  CHECK((buffered_flags & O_DIRECT) == 0);
  CHECK(contains(buffered->describe(), "(buffered: direct = false,"));
}

TEST_CASE("many transfers in flight at once over many regions, queue depth 1 and 8") {
  for (int64_t depth : {int64_t{1}, int64_t{8}}) {
    CAPTURE(depth);
    TempDir dir;
    auto tier = make_tier(dir.path().string(), {{"queue_depth", depth},
                                                {"block_kb", int64_t{64}},
                                                {"buffer_count", int64_t{2}},
                                                {"buffer_mb", int64_t{1}}});
    constexpr int kRegions = 64;
    std::vector<int64_t> regions, sizes;
    std::vector<std::vector<uint8_t>> data;
    std::vector<std::vector<uint8_t>> back(kRegions);
    std::mt19937_64 rng(depth);
    for (int i = 0; i < kRegions; ++i) {
      sizes.push_back(static_cast<int64_t>(rng() % (600 * 1024)));
      regions.push_back(tier->allocate("unit" + std::to_string(i) + ".w", sizes.back()));
      data.push_back(random_bytes(sizes.back(), 1000 + i));
      back[i].assign(sizes.back() + 1, 0);  // +1: an odd address for the unaligned half
    }
    CHECK(region_files_in(rank_dir(dir)).size() == static_cast<size_t>(kRegions));
    // Every other region from and into the tier's aligned host buffers (the zero-copy path,
    // many direct requests in flight at once), the rest from vectors at an odd address (the
    // bounce buffers): a vector's memory is 16-byte aligned, never the 4 KiB O_DIRECT needs.
    std::vector<at::Tensor> aligned(kRegions);
    for (int i = 0; i < kRegions; i += 2) {
      aligned[i] = tier->host_buffer(sizes[i]);
      if (sizes[i] > 0) std::memcpy(aligned[i].data_ptr(), data[i].data(), data[i].size());
    }
    const auto host_of = [&](int i) -> uint8_t* {
      return i % 2 == 0 ? static_cast<uint8_t*>(aligned[i].data_ptr()) : back[i].data() + 1;
    };
    std::vector<std::shared_ptr<zt::Work>> works;
    for (int i = 0; i < kRegions; ++i) {
      const uint8_t* from = i % 2 == 0 ? host_of(i) : data[i].data();
      works.push_back(tier->write(regions[i], 0, from, sizes[i]));
    }
    for (auto& w : works) w->wait();
    works.clear();
    for (int i = 0; i < kRegions; i += 2) {
      if (sizes[i] > 0) std::memset(aligned[i].data_ptr(), 0, static_cast<size_t>(sizes[i]));
    }
    for (int i = 0; i < kRegions; ++i)
      works.push_back(tier->read(regions[i], 0, host_of(i), sizes[i]));
    for (auto& w : works) w->wait();
    for (int i = 0; i < kRegions; ++i) {
      CAPTURE(i);
      CHECK(std::memcmp(host_of(i), data[i].data(), data[i].size()) == 0);
    }
    zt::OffloadStats s = tier->stats();
    CHECK(s.writes == kRegions);
    CHECK(s.reads == kRegions);
    int64_t allocated = 0;
    for (int64_t n : sizes) allocated += zt::round_up(n, kAlign);
    CHECK(s.bytes_allocated == allocated);
    // Releasing half removes their files and their bytes from the count.
    for (int i = 0; i < kRegions; i += 2) tier->release(regions[i]);
    CHECK(region_files_in(rank_dir(dir)).size() == static_cast<size_t>(kRegions / 2));
    for (int i = 0; i < kRegions; i += 2) allocated -= zt::round_up(sizes[i], kAlign);
    CHECK(tier->stats().bytes_allocated == allocated);
    CHECK_THROWS_AS(tier->read(regions[0], 0, back[0].data(), 1), zt::InternalError);
  }
}

TEST_CASE("a read queued behind a write to the same bytes sees the write, without waiting") {
  TempDir dir;
  auto tier = make_tier(dir.path().string());
  const int64_t bytes = 2 * kMiB + 3;
  const int64_t region = tier->allocate("r", bytes);
  const auto a = random_bytes(bytes, 1), b = random_bytes(bytes, 2), c = random_bytes(bytes, 3);
  std::vector<uint8_t> first(bytes), second(bytes);
  auto w1 = tier->write(region, 0, a.data(), bytes);
  auto r1 = tier->read(region, 0, first.data(), bytes);
  auto w2 = tier->write(region, 0, b.data(), bytes);
  auto w3 = tier->write(region, 0, c.data(), bytes);
  auto r2 = tier->read(region, 0, second.data(), bytes);
  for (auto& w : {w1, r1, w2, w3, r2}) w->wait();
  CHECK(first == a);
  CHECK(second == c);
}

TEST_CASE("the folder is <path>/zt-<job>/rank<r>/, one file per region named from its name and "
          "id, and all of it is gone when the tiers are destroyed") {
  TempDir dir;
  auto rank0 = make_tier(dir.path().string(), {}, "job42", 0);
  auto rank1 = make_tier(dir.path().string(), {}, "job42", 1);
  rank0->prepare(4 * kMiB);
  rank1->prepare(4 * kMiB);
  const int64_t a = rank0->allocate("layers.3/attn:qkv", 5000);
  const int64_t b = rank0->allocate("../escape", 1);
  rank1->allocate("x", 0);
  const auto names = region_files_in(rank_dir(dir, "job42", 0));
  REQUIRE(names.size() == 2);
  CHECK(names[0] == "_._escape-" + std::to_string(b) + ".bin");
  CHECK(names[1] == "layers.3_attn_qkv-" + std::to_string(a) + ".bin");
  struct stat st;
  REQUIRE(stat((rank_dir(dir, "job42", 0) / names[1]).c_str(), &st) == 0);
  CHECK(st.st_size == 8192);  // 5000 bytes, rounded up to the alignment and reserved
  CHECK((files_in(dir.path() / "zt-job42") == std::vector<std::string>{"rank0", "rank1"}));

  rank0.reset();
  CHECK_FALSE(fs::exists(rank_dir(dir, "job42", 0)));
  CHECK(fs::exists(rank_dir(dir, "job42", 1)));  // the other rank's folder stays
  rank1.reset();
  CHECK_FALSE(fs::exists(dir.path() / "zt-job42"));
  CHECK(fs::exists(dir.path()));  // <path> itself is the user's
}

TEST_CASE("out of file descriptors, a region names the open-file limit, not another folder") {
  TempDir dir;
  auto tier = make_tier(dir.path().string(), {}, "job7", 0);
  tier->prepare(4 * kMiB);
  // A few descriptors above what this process holds now: the regions run out of them.
  int open_now = 0;
  for (auto it = fs::directory_iterator("/proc/self/fd"); it != fs::directory_iterator(); ++it)
    ++open_now;
  rlimit before{};
  REQUIRE(getrlimit(RLIMIT_NOFILE, &before) == 0);
  rlimit tight = before;
  tight.rlim_cur = static_cast<rlim_t>(open_now + 4);
  REQUIRE(setrlimit(RLIMIT_NOFILE, &tight) == 0);
  std::string error;
  try {
    for (int i = 0; i < 64; ++i) tier->allocate("r" + std::to_string(i), 4096);
  } catch (const zt::IoError& e) {
    // The limit first: UBSan's check of the call below needs a descriptor of its own (a pipe
    // to probe the object's memory), and without one reports a false "invalid vptr".
    REQUIRE(setrlimit(RLIMIT_NOFILE, &before) == 0);
    error = e.what();
  }
  REQUIRE(setrlimit(RLIMIT_NOFILE, &before) == 0);
  INFO(error);
  CHECK(contains(error, "Too many open files"));
  CHECK(contains(error, "ulimit -n"));
  CHECK_FALSE(contains(error, "plugin.offload_nvme.path"));
}

TEST_CASE("two tiers of one job and rank on one path (two engines of a process) keep apart") {
  // Both named their first region's file alike in one folder: the second truncated the first's
  // live file, and its end removed the first's files.
  TempDir dir;
  auto first = make_tier(dir.path().string(), {}, "job7", 0);
  auto second = make_tier(dir.path().string(), {}, "job7", 0);
  first->prepare(kMiB);
  second->prepare(kMiB);
  const int64_t bytes = 3 * kAlign;
  const int64_t a = first->allocate("fp32 master of group 0", bytes);
  const int64_t b = second->allocate("fp32 master of group 0", bytes);
  const auto one = random_bytes(bytes, 11), two = random_bytes(bytes, 12);
  first->write(a, 0, one.data(), bytes)->wait();
  second->write(b, 0, two.data(), bytes)->wait();
  CHECK((files_in(dir.path() / "zt-job7") == std::vector<std::string>{"rank0", "rank0.2"}));
  second.reset();
  std::vector<uint8_t> back(bytes);
  first->read(a, 0, back.data(), bytes)->wait();
  CHECK(back == one);
  // A folder left by a killed rank of the same job is not reused either.
  auto third = make_tier(dir.path().string(), {}, "job7", 0);
  third->prepare(kMiB);
  CHECK(fs::exists(dir.path() / "zt-job7" / "rank0.2"));
  CHECK(contains(third->describe(), "zt-job7/rank0.2"));
}

TEST_CASE("a tier that never made its folder leaves alone the one another tier of its rank made") {
  // Before prepare() the tier's folder is only a name, rank<r>, which another tier of the same
  // rank holds; its end removed that folder while it was empty, and the other's next file failed.
  TempDir dir;
  auto first = make_tier(dir.path().string(), {}, "job8", 0);
  first->prepare(kMiB);
  REQUIRE(region_files_in(rank_dir(dir, "job8", 0)).empty());
  make_tier(dir.path().string(), {}, "job8", 0).reset();
  CHECK(fs::exists(rank_dir(dir, "job8", 0)));
  const int64_t bytes = 2 * kAlign;
  const int64_t region = first->allocate("after the other tier ended", bytes);
  const auto data = random_bytes(bytes, 21);
  first->write(region, 0, data.data(), bytes)->wait();
  std::vector<uint8_t> back(bytes);
  first->read(region, 0, back.data(), bytes)->wait();
  CHECK(back == data);
}

TEST_CASE("files and folders are removed when the tier dies during exception unwinding, with "
          "transfers still in flight") {
  TempDir dir;
  std::shared_ptr<zt::Work> pending;
  // One byte more than the longest transfer, which starts at data() + 1 (the bounce path).
  std::vector<uint8_t> data = random_bytes(8 * kMiB + 2, 5);
  try {
    auto tier = make_tier(dir.path().string(),
                          {{"queue_depth", int64_t{1}}, {"block_kb", int64_t{4}}});
    tier->prepare(16 * kMiB);
    const int64_t region = tier->allocate("states", 8 * kMiB + 1);
    tier->write(region, 0, data.data(), 4096)->wait();
    CHECK(region_files_in(rank_dir(dir)).size() == 1);
    pending = tier->write(region, 0, data.data() + 1, 8 * kMiB + 1);  // 2049 requests at depth 1
    throw std::runtime_error("a failing step");
  } catch (const std::runtime_error&) {
  }
  CHECK_FALSE(fs::exists(dir.path() / "zt-test"));
  // The transfer finished or was cancelled, but it is not left hanging.
  CHECK(pending->is_completed());
}

TEST_CASE("a region file truncated under the tier makes read() fail naming the path and step") {
  TempDir dir;
  auto tier = make_tier(dir.path().string());
  const int64_t region = tier->allocate("exp_avg_sq", 2 * kMiB);
  const auto data = random_bytes(2 * kMiB, 8);
  tier->write(region, 0, data.data(), 2 * kMiB)->wait();
  const std::string file = region_file(rank_dir(dir), "exp_avg_sq-");
  REQUIRE(truncate(file.c_str(), 4096) == 0);
  tier->set_step(12);
  std::vector<uint8_t> back(2 * kMiB);
  std::string message;
  try {
    tier->read(region, 0, back.data(), 2 * kMiB)->wait();
  } catch (const zt::IoError& e) {
    message = e.what();
  }
  INFO(message);
  CHECK(contains(message, file));
  CHECK(contains(message, "at step 12"));
  CHECK(contains(message, "of 2097152 bytes at offset 0"));
  CHECK(contains(message, "truncated"));
  // check() finds it too, with both sizes.
  std::string checked;
  try {
    tier->check();
  } catch (const zt::IoError& e) {
    checked = e.what();
  }
  INFO(checked);
  CHECK(contains(checked, file));
  CHECK(contains(checked, "truncated from 2097152 to 4096 bytes"));
  CHECK(contains(checked, "at step 12"));
  // Cut off a block boundary: O_DIRECT's short read there, asked again for the rest at an
  // unaligned offset, failed as EINVAL instead of saying the file was cut.
  REQUIRE(truncate(file.c_str(), 5000) == 0);
  std::string odd;
  try {
    tier->read(region, 0, back.data(), 2 * kMiB)->wait();
  } catch (const zt::IoError& e) {
    odd = e.what();
  }
  INFO(odd);
  CHECK(contains(odd, "truncated under the running job"));
  CHECK_FALSE(contains(odd, "EINVAL"));
}

TEST_CASE("check() passes on intact files and fails on a file deleted under the tier") {
  TempDir dir;
  auto tier = make_tier(dir.path().string());
  tier->allocate("a", kMiB);
  tier->allocate("b", 3);
  CHECK_NOTHROW(tier->check());
  const std::string file = region_file(rank_dir(dir), "b-");
  REQUIRE(unlink(file.c_str()) == 0);
  tier->set_step(7);
  std::string message;
  try {
    tier->check();
  } catch (const zt::IoError& e) {
    message = e.what();
  }
  INFO(message);
  CHECK(contains(message, file));
  CHECK(contains(message, "deleted under a running job"));
  CHECK(contains(message, "4096 bytes"));
  CHECK(contains(message, "at step 7"));
}

TEST_CASE("prepare() under a regular file fails naming the folder, the reason and the option") {
  TempDir dir;
  zt::test::write_file(dir.file("plain"), "not a folder");
  auto tier = make_tier(dir.file("plain") + "/nvme");
  std::string message;
  try {
    tier->prepare(kMiB);
  } catch (const zt::IoError& e) {
    message = e.what();
  }
  INFO(message);
  // The job's folder, which is what failed, and the path in the way.
  CHECK(contains(message, dir.file("plain") + "/nvme/zt-test for "));
  CHECK(contains(message, "Not a directory"));
  CHECK(contains(message, "the nearest path above it that exists: " + dir.file("plain") + ")"));
  CHECK(contains(message, "plugin.offload_nvme.path"));
  // allocate() prepares on its own when prepare() was skipped, and fails the same way.
  CHECK_THROWS_AS(tier->allocate("x", 1), zt::IoError);
}

TEST_CASE("prepare() asking for more than the disk has fails naming needed and free bytes") {
  TempDir dir;
  auto tier = make_tier(dir.path().string());
  const int64_t huge = int64_t{1} << 60;  // an exabyte: more than any test machine's disk
  std::string message;
  try {
    tier->prepare(huge);
  } catch (const zt::IoError& e) {
    message = e.what();
  }
  INFO(message);
  CHECK(contains(message, std::to_string(huge) + " bytes"));
  CHECK(contains(message, "needed"));
  CHECK(contains(message, "free"));
  CHECK(contains(message, rank_dir(dir).string()));
  CHECK(contains(message, "--set plugin.offload_nvme.path="));
}

TEST_CASE("misuse is an InternalError (unaligned offsets, ranges past the region, unknown "
          "regions, a bad job name) and a block size off the alignment is a ConfigError") {
  TempDir dir;
  auto tier = make_tier(dir.path().string());
  const int64_t region = tier->allocate("r", 3 * 4096);
  std::vector<uint8_t> buf(4 * 4096);
  CHECK_THROWS_AS(tier->write(region, 100, buf.data(), 10), zt::InternalError);
  CHECK_THROWS_AS(tier->write(region, 8192, buf.data(), 4097), zt::InternalError);
  CHECK_THROWS_AS(tier->read(region, 12288, buf.data(), 1), zt::InternalError);
  CHECK_THROWS_AS(tier->read(region, -4096, buf.data(), 1), zt::InternalError);
  CHECK_THROWS_AS(tier->read(region, 0, nullptr, 1), zt::InternalError);
  CHECK_THROWS_AS(tier->read(region + 1, 0, buf.data(), 1), zt::InternalError);
  CHECK_THROWS_AS(tier->release(region + 1), zt::InternalError);
  CHECK_NOTHROW(tier->read(region, 8192, buf.data(), 4096)->wait());  // the last block: fine
  CHECK_THROWS_AS(make_tier(dir.path().string(), {}, "a/b"), zt::InternalError);
  CHECK_THROWS_AS(make_tier(dir.path().string(), {}, ""), zt::InternalError);
  CHECK_THROWS_AS(make_tier(dir.path().string(), {{"block_kb", int64_t{6}}}), zt::ConfigError);
}
