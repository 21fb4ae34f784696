// CheckpointReader on damaged and foreign folders: every flipped byte is caught by a checksum
// that names the file (and, for data, the tensor); a missing or short rank file, a folder that
// is not a checkpoint, an unknown tensor or state each get their own clear error.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <nlohmann/json.hpp>

#include "../test_util.h"
#include "checkpoint_test_util.h"
#include "zt/error.h"
#include "zt/host/safetensors.h"

namespace fs = std::filesystem;
using zt::test::error_of;

namespace {

// A saved 2-rank checkpoint to damage; one per test case.
struct Saved {
  zt::test::TempDir dir;
  fs::path folder;
  Saved() {
    zt::test::save_steps(zt::test::options_for(dir.path(), false), 2, {5});
    folder = zt::latest_checkpoint(dir.path().string());
  }
  fs::path rank_file(int r) const { return folder / zt::test::rank_file(r, 2); }
};

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace

TEST_CASE("checkpoint reader: a flipped byte in a piece names the file, tensor and kind") {
  Saved s;
  const fs::path file = s.rank_file(1);
  int64_t offset = 0;
  {
    zt::SafetensorsReader st(file.string());
    const zt::SafetensorsEntry* e = st.find("exp_avg/block0.bias/7-13");
    REQUIRE(e != nullptr);
    offset = st.header_bytes() + e->begin + 9;
  }
  zt::test::flip_byte(file, offset);
  zt::CheckpointReader reader(s.folder.string());  // sizes are intact: opens
  std::vector<float> out(13);
  const std::string m = error_of<zt::IoError>(
      [&] { reader.read("block0.bias", "exp_avg", 0, 13, out.data()); });
  CHECK_MESSAGE(has(m, "checksum mismatch in " + file.string()), m);
  CHECK_MESSAGE(has(m, "exp_avg of tensor block0.bias elements [7, 13)"), m);
  CHECK_MESSAGE(has(m, "resume from an older checkpoint"), m);
  // Only the damaged piece fails; a range inside the other rank's piece still reads.
  reader.read("block0.bias", "exp_avg", 0, 7, out.data());
  for (int64_t i = 0; i < 7; ++i) CHECK(out[i] == zt::test::model_value(1, 1, i, 5));
  CHECK_THROWS_AS(reader.read("block0.bias", "exp_avg", 12, 13, out.data()), zt::IoError);
  reader.read("block0.bias", "param", 0, 13, out.data());
  CHECK(out[12] == zt::test::model_value(1, 0, 12, 5));
}

TEST_CASE("checkpoint reader: a flipped byte in a rank file's header is caught at first use") {
  Saved s;
  zt::test::flip_byte(s.rank_file(0), 20);
  zt::CheckpointReader reader(s.folder.string());
  std::vector<float> out(35);
  const std::string m = error_of<zt::IoError>(
      [&] { reader.read("embed.weight", "param", 0, 35, out.data()); });
  CHECK_MESSAGE(has(m, "checksum mismatch in " + s.rank_file(0).string()), m);
  CHECK_MESSAGE(has(m, "header"), m);
  // Rank 1's file is unharmed.
  reader.read("embed.weight", "param", 20, 35, out.data());
  CHECK(out[0] == zt::test::model_value(0, 0, 20, 5));
}

TEST_CASE("checkpoint reader: a flipped byte in the manifest is caught") {
  Saved s;
  const fs::path manifest = s.folder / "manifest.json";
  zt::test::flip_byte(manifest, static_cast<int64_t>(fs::file_size(manifest) / 2));
  const std::string m = error_of<zt::IoError>([&] { zt::CheckpointReader r(s.folder.string()); });
  CHECK_MESSAGE(has(m, "checksum mismatch in " + manifest.string()), m);
}

TEST_CASE("checkpoint reader: missing and short rank files") {
  Saved s;
  fs::rename(s.rank_file(1), s.folder / "elsewhere");
  std::string m = error_of<zt::IoError>([&] { zt::CheckpointReader r(s.folder.string()); });
  CHECK_MESSAGE(has(m, "missing rank file " + s.rank_file(1).string() + " (rank 1 of 2)"), m);
  CHECK_MESSAGE(has(m, "the checkpoint is incomplete: resume from an older checkpoint"), m);
  fs::rename(s.folder / "elsewhere", s.rank_file(1));
  fs::resize_file(s.rank_file(1), fs::file_size(s.rank_file(1)) - 4);
  m = error_of<zt::IoError>([&] { zt::CheckpointReader r(s.folder.string()); });
  CHECK_MESSAGE(has(m, s.rank_file(1).string()), m);
  CHECK_MESSAGE(has(m, "truncated"), m);
  // A folder where the rank file should be: damage, not a lookup to fix.
  fs::rename(s.rank_file(1), s.folder / "elsewhere");
  fs::create_directory(s.rank_file(1));
  m = error_of<zt::IoError>([&] { zt::CheckpointReader r(s.folder.string()); });
  CHECK_MESSAGE(has(m, s.rank_file(1).string() + " is not a plain file"), m);
  CHECK_MESSAGE(has(m, "resume from an older one"), m);
}

TEST_CASE(
    "checkpoint reader: a manifest that cannot be looked at is said as that, not as missing") {
  // A loop of links stands for any lookup that fails other than by absence (a folder without
  // search permission reads the same, but not to root, who runs these tests).
  Saved s;
  for (const char* name : {"manifest.json", "manifest.json.crc32"}) {
    CAPTURE(name);
    const fs::path file = s.folder / name;
    const fs::path kept = s.folder / "kept";
    fs::rename(file, kept);
    fs::create_symlink(file.filename(), file);  // points at itself
    const std::string m = error_of<zt::IoError>([&] { zt::CheckpointReader r(s.folder.string()); });
    CHECK_MESSAGE(has(m, "cannot look at " + file.string() + ": "), m);
    CHECK_MESSAGE(has(m, "symbolic links"), m);  // the system's own words for ELOOP
    CHECK_MESSAGE(!has(m, "not a checkpoint"), m);
    CHECK_MESSAGE(!has(m, "missing"), m);
    fs::remove(file);
    fs::rename(kept, file);
  }
  CHECK_NOTHROW(zt::CheckpointReader(s.folder.string()));
}

TEST_CASE("checkpoint reader: folders that are not checkpoints") {
  zt::test::TempDir dir;
  std::string m = error_of<zt::ConfigError>([&] { zt::CheckpointReader r(dir.path().string()); });
  CHECK_MESSAGE(has(m, "not a checkpoint: " + dir.path().string()), m);
  m = error_of<zt::ConfigError>([&] { zt::resolve_checkpoint(dir.path().string()); });
  CHECK_MESSAGE(has(m, "not a checkpoint: " + dir.path().string()), m);
  m = error_of<zt::ConfigError>([&] { zt::resolve_checkpoint(dir.file("missing")); });
  CHECK_MESSAGE(has(m, dir.file("missing") + " does not exist; check the path"), m);

  // Some other program's manifest.json, with a matching crc32 file.
  const std::string other = R"({"name": "some other tool"})";
  zt::test::write_file(dir.path() / "manifest.json", other);
  char crc[16];
  std::snprintf(crc, sizeof(crc), "%08x\n", static_cast<unsigned>(zt::test::crc32_of(other)));
  zt::test::write_file(dir.path() / "manifest.json.crc32", crc);
  m = error_of<zt::ConfigError>([&] { zt::CheckpointReader r(dir.path().string()); });
  CHECK_MESSAGE(has(m, "not a checkpoint: " + (dir.path() / "manifest.json").string()), m);
}

namespace {

// Rewrites the manifest through `edit`, with a crc32 that matches, as a buggy tool might.
template <typename F>
void edit_manifest(const fs::path& folder, F&& edit) {
  const fs::path manifest = folder / "manifest.json";
  auto j = nlohmann::json::parse(zt::test::read_file(manifest));
  edit(j);
  const std::string text = j.dump();
  zt::test::write_file(manifest, text);
  char crc[16];
  std::snprintf(crc, sizeof(crc), "%08x\n", static_cast<unsigned>(zt::test::crc32_of(text)));
  zt::test::write_file(folder / "manifest.json.crc32", crc);
}

}  // namespace

TEST_CASE("checkpoint reader: a format version from a newer zt is refused") {
  Saved s;
  edit_manifest(s.folder, [](nlohmann::json& j) { j["version"] = 99; });
  const std::string m = error_of<zt::ConfigError>(
      [&] { zt::CheckpointReader r(s.folder.string()); });
  CHECK_MESSAGE(has(m, "format version 99"), m);
}

TEST_CASE("checkpoint reader: a manifest whose pieces do not fit its files is refused") {
  Saved s;
  edit_manifest(s.folder, [](nlohmann::json& j) { j["pieces"][2]["offset"] = 1 << 20; });
  std::string m = error_of<zt::ConfigError>([&] { zt::CheckpointReader r(s.folder.string()); });
  CHECK_MESSAGE(has(m, "does not match the manifest's tensors and files"), m);
  edit_manifest(s.folder, [](nlohmann::json& j) { j["pieces"][2]["tensor"] = "ghost"; });
  m = error_of<zt::ConfigError>([&] { zt::CheckpointReader r(s.folder.string()); });
  CHECK_MESSAGE(has(m, "of tensor 'ghost'"), m);
  edit_manifest(s.folder, [](nlohmann::json& j) { j.erase("counters"); });
  m = error_of<zt::ConfigError>([&] { zt::CheckpointReader r(s.folder.string()); });
  CHECK_MESSAGE(has(m, "does not parse"), m);
}

TEST_CASE("checkpoint reader: a tensor listed twice and overlapping pieces are refused") {
  Saved s;
  edit_manifest(s.folder, [](nlohmann::json& j) { j["tensors"].push_back(j["tensors"][0]); });
  std::string m = error_of<zt::ConfigError>([&] { zt::CheckpointReader r(s.folder.string()); });
  CHECK_MESSAGE(has(m, "is listed twice; the manifest is damaged"), m);
  // A piece saved twice (a second copy of a non-empty one): which would load was unspecified.
  Saved t;
  std::string tensor;
  edit_manifest(t.folder, [&](nlohmann::json& j) {
    for (const auto& p : j["pieces"]) {
      if (p["end"].get<int64_t>() > p["begin"].get<int64_t>()) {
        tensor = p["tensor"].get<std::string>();
        j["pieces"].push_back(p);
        break;
      }
    }
  });
  REQUIRE_FALSE(tensor.empty());
  m = error_of<zt::ConfigError>([&] { zt::CheckpointReader r(t.folder.string()); });
  CHECK_MESSAGE(has(m, "of tensor '" + tensor + "' overlap; the manifest is damaged"), m);
}

TEST_CASE("checkpoint reader: a manifest cannot name files outside its folder") {
  Saved s;
  // A secret beside the checkpoint folder, of the rank file's size, that a path could reach.
  const fs::path secret = s.folder.parent_path() / "secret.safetensors";
  fs::copy_file(s.rank_file(1), secret);
  const std::vector<std::string> names = {"../secret.safetensors", secret.string(),
                                          "sub/x.safetensors", "..", ""};
  for (const std::string& name : names) {
    CAPTURE(name);
    Saved t;
    edit_manifest(t.folder, [&](nlohmann::json& j) {
      j["files"][1]["name"] = name;
      for (auto& p : j["pieces"])
        if (p["file"] == zt::test::rank_file(1, 2)) p["file"] = name;
    });
    const std::string m = error_of<zt::ConfigError>(
        [&] { zt::CheckpointReader r(t.folder.string()); });
    CHECK_MESSAGE(has(m, "is not a plain file name in the checkpoint folder"), m);
  }
  // A rank file that is a symbolic link out of the folder.
  fs::remove(s.rank_file(1));
  fs::create_symlink(secret, s.rank_file(1));
  const std::string m = error_of<zt::ConfigError>(
      [&] { zt::CheckpointReader r(s.folder.string()); });
  CHECK_MESSAGE(has(m, "outside the checkpoint folder"), m);
  // One that stays inside it is a file like any other.
  Saved u;
  const fs::path moved = u.folder / "moved.safetensors";
  fs::rename(u.rank_file(1), moved);
  fs::create_symlink(moved.filename(), u.rank_file(1));
  zt::CheckpointReader r(u.folder.string());
  std::vector<float> out(4);
  const auto big = std::find_if(r.tensors().begin(), r.tensors().end(),
                                [](const zt::CheckpointTensor& t) { return t.numel() >= 4; });
  REQUIRE(big != r.tensors().end());
  r.read(big->name, "param", big->numel() - 4, big->numel(), out.data());
}

TEST_CASE("checkpoint reader: hostile sizes in a manifest are refused before any allocation") {
  Saved s;
  // A header of 100 GB in a small file: the reader would allocate it at first use.
  edit_manifest(s.folder, [](nlohmann::json& j) { j["files"][0]["header_bytes"] = 100ll << 30; });
  std::string m = error_of<zt::ConfigError>([&] { zt::CheckpointReader r(s.folder.string()); });
  CHECK_MESSAGE(has(m, "safetensors header is 107374182400 bytes"), m);
  edit_manifest(s.folder, [](nlohmann::json& j) { j["files"][0]["header_bytes"] = -1; });
  m = error_of<zt::ConfigError>([&] { zt::CheckpointReader r(s.folder.string()); });
  CHECK_MESSAGE(has(m, "safetensors header is -1 bytes"), m);
  // Inside its file, but past any safetensors header (the file's size is checked after).
  edit_manifest(s.folder, [](nlohmann::json& j) {
    j["files"][0]["bytes"] = 300'000'000;
    j["files"][0]["header_bytes"] = 200'000'000;
  });
  m = error_of<zt::ConfigError>([&] { zt::CheckpointReader r(s.folder.string()); });
  CHECK_MESSAGE(has(m, "safetensors header is 200000000 bytes"), m);
  // A shape whose element count overflows, and pieces whose ranges overflow 64 bits.
  Saved t;
  edit_manifest(t.folder, [](nlohmann::json& j) {
    j["tensors"][0]["shape"] = {int64_t{1} << 40, int64_t{1} << 40};
  });
  m = error_of<zt::ConfigError>([&] { zt::CheckpointReader r(t.folder.string()); });
  CHECK_MESSAGE(has(m, "does not fit 64 bits"), m);
  // Numbers no integer can hold, where the manifest has integers.
  edit_manifest(t.folder, [](nlohmann::json& j) { j["tensors"][0]["shape"] = {1e300}; });
  m = error_of<zt::ConfigError>([&] { zt::CheckpointReader r(t.folder.string()); });
  CHECK_MESSAGE(has(m, "\"shape\" is 1e+300, not an integer in its range"), m);
  Saved w;
  edit_manifest(w.folder, [](nlohmann::json& j) { j["world"] = 1e10; });
  m = error_of<zt::ConfigError>([&] { zt::CheckpointReader r(w.folder.string()); });
  CHECK_MESSAGE(has(m, "\"world\" is 10000000000.0, not an integer in its range"), m);
  // Named with the manifest's path, as the format checks are.
  CHECK_MESSAGE(has(m, (w.folder / "manifest.json").string() + ": \"world\""), m);
  // Counts that a run adds to: negative (Adam's first update failed as an internal error) or so
  // large that the next increment overflows.
  Saved c;
  edit_manifest(c.folder, [](nlohmann::json& j) { j["counters"]["optimizer_steps"] = -1; });
  m = error_of<zt::ConfigError>([&] { zt::CheckpointReader r(c.folder.string()); });
  CHECK_MESSAGE(has(m, "\"optimizer_steps\" is -1, not a count from 0 to 2^62"), m);
  edit_manifest(c.folder, [](nlohmann::json& j) {
    j["counters"]["optimizer_steps"] = 1;
    j["step"] = INT64_MAX;
  });
  m = error_of<zt::ConfigError>([&] { zt::CheckpointReader r(c.folder.string()); });
  CHECK_MESSAGE(has(m, "\"step\" is 9223372036854775807, not a count"), m);
  // The bound itself is a count; one past it, or a whole number written as a float, is not.
  edit_manifest(c.folder, [](nlohmann::json& j) { j["step"] = int64_t{1} << 62; });
  CHECK_NOTHROW(zt::CheckpointReader(c.folder.string()));
  edit_manifest(c.folder, [](nlohmann::json& j) { j["step"] = (int64_t{1} << 62) + 1; });
  m = error_of<zt::ConfigError>([&] { zt::CheckpointReader r(c.folder.string()); });
  CHECK_MESSAGE(has(m, "\"step\" is 4611686018427387905, not a count"), m);
  edit_manifest(c.folder, [](nlohmann::json& j) { j["step"] = 3.0; });
  m = error_of<zt::ConfigError>([&] { zt::CheckpointReader r(c.folder.string()); });
  CHECK_MESSAGE(has(m, "\"step\" is 3.0, not a count"), m);
  for (const auto& [begin, end] :
       {std::pair<int64_t, int64_t>{INT64_MIN, INT64_MAX}, {0, INT64_MAX}, {-4, 4}}) {
    Saved u;
    edit_manifest(u.folder, [&](nlohmann::json& j) {
      j["pieces"][0]["begin"] = begin;
      j["pieces"][0]["end"] = end;
    });
    m = error_of<zt::ConfigError>([&] { zt::CheckpointReader r(u.folder.string()); });
    CHECK_MESSAGE(has(m, "does not match the manifest's tensors and files"), m);
  }
}

TEST_CASE("checkpoint reader: unknown tensors, states and ranges are ConfigErrors") {
  Saved s;
  zt::CheckpointReader reader(s.folder.string());
  std::vector<float> out(64);
  std::string m = error_of<zt::ConfigError>(
      [&] { reader.read("embed.weigth", "param", 0, 1, out.data()); });
  CHECK_MESSAGE(has(m, "no tensor 'embed.weigth'"), m);
  CHECK_MESSAGE(has(m, "did you mean 'embed.weight'"), m);
  m = error_of<zt::ConfigError>([&] { reader.read("embed.weight", "momentum", 0, 1, out.data()); });
  CHECK_MESSAGE(has(m, "no 'momentum' state"), m);
  CHECK_MESSAGE(has(m, "param, exp_avg, exp_avg_sq"), m);
  m = error_of<zt::ConfigError>([&] { reader.read("embed.weight", "param", 30, 36, out.data()); });
  CHECK_MESSAGE(has(m, "outside"), m);
  // A tensor with no elements has no pieces; its empty range reads as nothing.
  CHECK_NOTHROW(reader.read("unused", "param", 0, 0, out.data()));
  CHECK_NOTHROW(reader.read("scale", "exp_avg_sq", 1, 1, out.data()));
}

TEST_CASE("checkpoint reader: a missing state's message counts the codec's residuals, one kind "
          "a rank, instead of listing them") {
  Saved s;
  // The exp_avg pieces renamed as three ranks' residuals would be saved (two hops of rank 1).
  edit_manifest(s.folder, [](nlohmann::json& j) {
    const char* names[] = {"codec_residual.rank0", "codec_residual.rank1",
                           "codec_residual_across.rank1"};
    size_t n = 0;
    for (auto& piece : j["pieces"])
      if (piece["kind"] == "exp_avg") piece["kind"] = names[n++ % 3];
  });
  zt::CheckpointReader reader(s.folder.string());
  CHECK(reader.kinds().size() == 5);
  CHECK(reader.kinds_text() == "param, exp_avg_sq, codec residuals of 2 rank(s)");
  std::vector<float> out(4);
  const std::string m = error_of<zt::ConfigError>(
      [&] { reader.read("embed.weight", "exp_avg", 0, 1, out.data()); });
  CHECK_MESSAGE(has(m, "(it holds: param, exp_avg_sq, codec residuals of 2 rank(s))"), m);
}

TEST_CASE("checkpoint reader: ranges the pieces do not cover are ConfigErrors") {
  // A save in which rank 1 declares only part of what it owns.
  zt::test::TempDir dir;
  auto stores = zt::test::make_stores(1);
  {
    zt::CheckpointSaver saver(zt::test::options_for(dir.path(), true), *stores[0], 0, 1);
    zt::CheckpointSaverAccess::save(
        saver,
        [](zt::CheckpointRankWriter& w) {
      w.add_tensor({"w", {10}});
      auto a = w.declare({"w", "param", 0, 4}, false);
      auto b = w.declare({"w", "param", 6, 10}, true);
      w.begin_data();
      const float v[4] = {1, 2, 3, 4};
      w.write(a, 0, v, 4);
      w.write(b, 0, v, 4);
      w.set_counters({});
        },
        1, {});
    saver.finish();
  }
  zt::CheckpointReader reader(zt::resolve_checkpoint(dir.path().string()));
  std::vector<float> out(10);
  reader.read("w", "param", 6, 10, out.data());
  CHECK(out[3] == 4);
  const std::string m = error_of<zt::ConfigError>(
      [&] { reader.read("w", "param", 2, 8, out.data()); });
  CHECK_MESSAGE(has(m, "does not hold elements [4, 8) of param of tensor w"), m);
  CHECK(reader.meta().trainer_state.empty());
}

TEST_CASE("checkpoint reader: reads from several threads at once") {
  Saved s;
  zt::CheckpointReader reader(s.folder.string());
  const auto& tensors = zt::test::model_tensors();
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&, i] {
      for (int round = 0; round < 20; ++round) {
        for (size_t t = 0; t < tensors.size(); ++t) {
          const size_t k = static_cast<size_t>(i + round) % 3;
          std::vector<float> out(static_cast<size_t>(tensors[t].numel()));
          reader.read(tensors[t].name, zt::test::model_kinds()[k], 0, tensors[t].numel(),
                      out.data());
          for (int64_t e = 0; e < tensors[t].numel(); ++e) {
            if (out[e] != zt::test::model_value(t, k, e, 5)) ++wrong;
          }
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  CHECK(wrong == 0);
}
