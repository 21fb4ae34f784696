// CheckpointSaver and CheckpointReader together: ranks (threads, each with its own client of a
// real TCPStore) save a model through CheckpointRankWriter into real files, asynchronously and
// synchronously; the reader gives every range back exactly; old checkpoints are pruned; a rank
// that fails or never reports makes rank 0 fail, and the previous checkpoint stays the latest.
#include <doctest/doctest.h>

#include <sys/mount.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>
#include <thread>

#include "../skip.h"
#include "../test_util.h"
#include "checkpoint_test_util.h"
#include "zt/error.h"
#include "zt/host/compose.h"
#include "zt/host/safetensors.h"

namespace fs = std::filesystem;
using zt::test::model_kinds;
using zt::test::model_tensors;
using zt::test::model_value;

namespace {

// Every range [b, e) of every tensor and kind reads back as saved at `step`.
void check_every_range(const zt::CheckpointReader& reader, int64_t step) {
  const auto& tensors = model_tensors();
  for (size_t t = 0; t < tensors.size(); ++t) {
    const int64_t n = tensors[t].numel();
    for (size_t k = 0; k < model_kinds().size(); ++k) {
      for (int64_t b = 0; b <= n; ++b) {
        for (int64_t e = b; e <= n; ++e) {
          std::vector<float> got(static_cast<size_t>(e - b), -7.0f);
          reader.read(tensors[t].name, model_kinds()[k], b, e, got.data());
          bool exact = true;
          for (int64_t i = b; i < e; ++i) exact &= got[i - b] == model_value(t, k, i, step);
          REQUIRE_MESSAGE(
              exact, tensors[t].name << " " << model_kinds()[k] << " [" << b << ", " << e << ")");
        }
      }
    }
  }
}

void check_saved(const fs::path& dir, int world, int64_t step) {
  const std::string folder = zt::latest_checkpoint(dir.string());
  CHECK(folder ==
        (dir / ("step-" + std::string(8 - std::to_string(step).size(), '0') + std::to_string(step)))
            .string());
  zt::CheckpointReader reader(folder);
  CHECK(reader.step() == step);
  CHECK(reader.kinds() == std::vector<std::string>{"param", "exp_avg", "exp_avg_sq"});
  REQUIRE(reader.tensors().size() == model_tensors().size());
  for (size_t t = 0; t < model_tensors().size(); ++t) {
    CHECK(reader.tensors()[t].name == model_tensors()[t].name);
    CHECK(reader.tensors()[t].shape == model_tensors()[t].shape);
  }
  REQUIRE(reader.find_tensor("block0.bias") != nullptr);
  CHECK(reader.find_tensor("block0.bias")->numel() == 13);
  CHECK(reader.find_tensor("nope") == nullptr);
  const zt::EngineCounters c = reader.counters();
  const zt::EngineCounters want = zt::test::counters_at(step);
  CHECK(c.optimizer_steps == want.optimizer_steps);
  CHECK(c.loss_scale == want.loss_scale);
  CHECK(c.clean_steps == want.clean_steps);
  CHECK(c.hysteresis_left == want.hysteresis_left);
  CHECK(c.unscalable_in_a_row == want.unscalable_in_a_row);
  const zt::CheckpointMeta meta = zt::test::model_meta(step);
  CHECK(nlohmann::json::parse(reader.meta().trainer_state) ==
        nlohmann::json::parse(meta.trainer_state));
  CHECK(reader.meta().config_toml == meta.config_toml);
  CHECK(reader.meta().saved_by == meta.saved_by);
  CHECK(!reader.zt_version().empty());
  for (int r = 0; r < world; ++r) {
    CHECK(fs::exists(fs::path(folder) / zt::test::rank_file(r, world)));
  }
  check_every_range(reader, step);
}

}  // namespace

TEST_CASE("checkpoint: 3 ranks save, async and sync: every range reads back exactly") {
  for (bool async : {true, false}) {
    CAPTURE(async);
    zt::test::TempDir dir;
    const int world = 3;
    auto stores = zt::test::make_stores(world);
    std::vector<std::optional<zt::SaveStats>> stats(world);
    zt::test::require_no_errors(zt::test::run_ranks(world, [&](int r) {
      zt::CheckpointSaver saver(zt::test::options_for(dir.path(), async), *stores[r], r, world);
      zt::CheckpointSaverAccess::save(saver, zt::test::model_fill(r, world, 7), 7,
                                      zt::test::model_meta(7));
      saver.poll();
      saver.finish();
      stats[r] = saver.last_completed();
    }));
    check_saved(dir.path(), world, 7);
    CHECK(zt::test::read_file(dir.path() / "latest") == "step-00000007\n");
    for (int r = 0; r < world; ++r) {
      REQUIRE(stats[r].has_value());
      CHECK(stats[r]->step == 7);
      const fs::path file = dir.path() / "step-00000007" / zt::test::rank_file(r, world);
      CHECK(stats[r]->bytes == static_cast<int64_t>(fs::file_size(file)));
      // Async: the training thread stalls for the snapshot only, within the write; sync: for
      // the whole write.
      if (async) {
        CHECK(stats[r]->write_seconds >= stats[r]->stall_seconds);
      } else {
        CHECK(stats[r]->stall_seconds >= stats[r]->write_seconds);
      }
    }
    CHECK(stats[0]->folder == (dir.path() / "step-00000007").string());
    CHECK(stats[0]->publish_seconds >= stats[0]->write_seconds);
    // Rank 0 emptied the reports it read: the store keeps every value for the job's life, and a
    // report lists every piece of its rank's file.
    for (int r = 1; r < world; ++r) {
      CHECK(stores[0]
                ->get("zt/ckpt/test-job/1-step7/rank" + std::to_string(r), std::chrono::seconds(1))
                .empty());
    }
    // No temporary folder is left behind.
    CHECK(zt::remove_incomplete_checkpoints(dir.path().string()).empty());
  }
}

TEST_CASE("checkpoint: rank files are safetensors files anyone can read") {
  zt::test::TempDir dir;
  zt::test::save_steps(zt::test::options_for(dir.path(), true), 2, {3});
  zt::SafetensorsReader file((dir.path() / "step-00000003" / zt::test::rank_file(1, 2)).string());
  CHECK(file.metadata().at("step") == "3");
  CHECK(file.header_bytes() % 4096 == 0);
  // Rank 1 of 2 owns elements [18, 35) of embed.weight (tensor 0); exp_avg is kind 1.
  const zt::SafetensorsEntry* e = file.find("exp_avg/embed.weight/18-35");
  REQUIRE(e != nullptr);
  CHECK(e->dtype == "F32");
  CHECK(e->shape == std::vector<int64_t>{17});
  std::vector<float> got(17);
  file.read(*e, 0, got.data(), 17 * 4);
  for (int64_t i = 0; i < 17; ++i) CHECK(got[i] == model_value(0, 1, 18 + i, 3));
}

TEST_CASE("checkpoint: keep_last prunes the oldest, never the new one nor a newer run's, and "
          "latest follows") {
  zt::test::TempDir dir;
  auto options = zt::test::options_for(dir.path(), true, 2);
  zt::test::save_steps(options, 2, {1, 2, 3});
  auto complete = zt::test::complete_steps(dir.path());
  CHECK(complete == std::vector<int64_t>{2, 3});
  check_saved(dir.path(), 2, 3);

  // A newer step from an earlier run stays beside the new saves, neither pruned nor counted:
  // keep_last still keeps this run's two newest. `latest` names the new one.
  fs::rename(dir.path() / "step-00000002", dir.path() / "step-00000009");
  zt::test::save_steps(options, 2, {4});
  CHECK(zt::test::complete_steps(dir.path()) == std::vector<int64_t>{3, 4, 9});
  check_saved(dir.path(), 2, 4);
  zt::test::save_steps(options, 2, {5});
  CHECK(zt::test::complete_steps(dir.path()) == std::vector<int64_t>{4, 5, 9});
  check_saved(dir.path(), 2, 5);

  // The same step saved again replaces it; keep_last = 0 keeps everything.
  options.keep_last = 0;
  options.async = false;
  zt::test::save_steps(options, 2, {5, 6});
  CHECK(zt::test::complete_steps(dir.path()) == std::vector<int64_t>{4, 5, 6, 9});
  check_saved(dir.path(), 2, 6);
}

TEST_CASE("checkpoint: keep_best spares the lowest val_loss besides keep_last and names it") {
  zt::test::TempDir dir;
  auto options = zt::test::options_for(dir.path(), true, 2);
  options.keep_best = "val_loss";
  const std::string d = dir.path().string();
  // Step 5 records no loss (a save a stop signal asked for, between evaluations).
  zt::test::save_steps(options, 2, {1, 2, 3, 4, 5}, {{1, 3.0}, {2, 1.5}, {3, 2.0}, {4, 2.5}});
  CHECK(zt::test::complete_steps(dir.path()) == std::vector<int64_t>{2, 4, 5});
  CHECK(zt::best_checkpoint(d) == (dir.path() / "step-00000002").string());
  CHECK(zt::latest_checkpoint(d) == (dir.path() / "step-00000005").string());
  {
    const zt::CheckpointReader best(zt::best_checkpoint(d));
    CHECK(best.meta().metrics.at("val_loss") == 1.5);
    CHECK(zt::CheckpointReader(zt::latest_checkpoint(d)).meta().metrics.empty());
  }
  // A better one takes over; the old best is only old now, and goes.
  zt::test::save_steps(options, 2, {6}, {{6, 1.0}});
  CHECK(zt::test::complete_steps(dir.path()) == std::vector<int64_t>{5, 6});
  CHECK(zt::best_checkpoint(d) == (dir.path() / "step-00000006").string());
  // A loss that is not finite is not recorded and never the best.
  zt::test::save_steps(options, 2, {7, 8}, {{7, std::nan("")}, {8, 1.25}});
  CHECK(zt::test::complete_steps(dir.path()) == std::vector<int64_t>{6, 7, 8});
  CHECK(zt::CheckpointReader((dir.path() / "step-00000007").string()).meta().metrics.empty());
  CHECK(zt::best_checkpoint(d) == (dir.path() / "step-00000006").string());
  // dir/best and dir/latest resolve to the folders they name.
  CHECK(zt::resolve_checkpoint((dir.path() / "best").string()) ==
        (dir.path() / "step-00000006").string());
  CHECK(zt::resolve_checkpoint((dir.path() / "latest").string()) ==
        (dir.path() / "step-00000008").string());
  // Without keep_best a leftover `best` spares nothing.
  options.keep_best = "";
  zt::test::save_steps(options, 2, {9});
  CHECK(zt::test::complete_steps(dir.path()) == std::vector<int64_t>{8, 9});
  CHECK(zt::best_checkpoint(d).empty());
  CHECK_THROWS_AS(zt::resolve_checkpoint((dir.path() / "best").string()), zt::ConfigError);
}

TEST_CASE("checkpoint: keep_best ranks this run's steps only, not a newer run's left in the "
          "folder, and spares this run's best") {
  zt::test::TempDir dir;
  auto options = zt::test::options_for(dir.path(), true, 2);
  options.keep_best = "val_loss";
  const std::string d = dir.path().string();
  // An earlier run left steps 8 and 9, step 9 with the lowest loss of all.
  zt::test::save_steps(options, 2, {8, 9}, {{8, 2.9}, {9, 0.5}});
  REQUIRE(zt::best_checkpoint(d) == (dir.path() / "step-00000009").string());
  // This run starts afresh. Its first save records no loss (a stop before any evaluation):
  // `best` no longer names the other run's step 9.
  zt::test::save_steps(options, 2, {1});
  CHECK(zt::best_checkpoint(d).empty());
  // Its best is step 2, whatever the other run's step 9 recorded.
  zt::test::save_steps(options, 2, {2, 3, 4}, {{2, 1.5}, {3, 2.0}, {4, 2.5}});
  CHECK(zt::best_checkpoint(d) == (dir.path() / "step-00000002").string());
  // Pruning kept this run's two newest and its best, and the other run's steps untouched.
  CHECK(zt::test::complete_steps(dir.path()) == std::vector<int64_t>{2, 3, 4, 8, 9});
}

TEST_CASE("checkpoint: a rank whose save fails makes rank 0 fail at once, naming it") {
  for (bool async : {true, false}) {
    CAPTURE(async);
    zt::test::TempDir dir;
    const int world = 3;
    auto options = zt::test::options_for(dir.path(), async);
    zt::test::save_steps(options, world, {1});
    // Long enough that waiting for it would exceed the test's own time limit.
    options.timeout = std::chrono::minutes(5);
    auto stores = zt::test::make_stores(world);
    // Rank 2 fails once rank 1's part is written (rank 0 giving a save up while others still
    // write is the next test's).
    std::atomic<bool> rank1_done{false};
    auto errors = zt::test::run_ranks(world, [&](int r) {
      zt::CheckpointSaver saver(options, *stores[r], r, world);
      auto fill = zt::test::model_fill(r, world, 2);
      if (r == 2) {
        fill = [&](zt::CheckpointRankWriter&) {
          for (int i = 0; i < 3000 && !rank1_done; ++i) {
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
          }
          throw zt::IoError("disk of rank 2 caught fire");
        };
      }
      zt::CheckpointSaverAccess::save(saver, fill, 2, zt::test::model_meta(2));
      saver.finish();
      if (r == 1) rank1_done = true;
    });
    CHECK(!errors[1]);
    CHECK(zt::test::message(errors[2]) == "disk of rank 2 caught fire");
    const std::string m = zt::test::message(errors[0]);
    CHECK_MESSAGE(m.find("rank 2") != std::string::npos, m);
    CHECK_MESSAGE(m.find("disk of rank 2 caught fire") != std::string::npos, m);
    CHECK_THROWS_AS(std::rethrow_exception(errors[0]), zt::IoError);
    CHECK(zt::latest_checkpoint(dir.path().string()) == (dir.path() / "step-00000001").string());
    CHECK(!fs::exists(dir.path() / "step-00000002"));
    CHECK(zt::remove_incomplete_checkpoints(dir.path().string()).empty());  // rank 0 removed it
  }
}

namespace {

// A real store that counts the calls made through it.
class CountingStore : public zt::Store {
 public:
  explicit CountingStore(zt::Store& inner) : inner_(inner) {}
  void set(const std::string& key, const std::vector<uint8_t>& value) override {
    ++calls;
    inner_.set(key, value);
  }
  std::vector<uint8_t> get(const std::string& key, std::chrono::milliseconds timeout) override {
    ++calls;
    return inner_.get(key, timeout);
  }
  int64_t add(const std::string& key, int64_t delta) override {
    ++calls;
    return inner_.add(key, delta);
  }
  std::atomic<int> calls{0};

 private:
  zt::Store& inner_;
};

}  // namespace

TEST_CASE("checkpoint: rank 0 giving a save up removes its folder after the other ranks wrote "
          "into it, leaving nothing behind") {
  // Rank 0's own part fails before it asks the Store anything; ranks 1 and 2 start their save
  // only once it has either asked (the fix: it waits for their reports before it removes the
  // folder) or thrown (before: its removal came first, and they made the folder again and left
  // their files in it).
  for (bool async : {true, false}) {
    CAPTURE(async);
    zt::test::TempDir dir;
    const int world = 3;
    auto options = zt::test::options_for(dir.path(), async);
    zt::test::save_steps(options, world, {1});
    auto stores = zt::test::make_stores(world);
    CountingStore rank0_store(*stores[0]);
    std::atomic<bool> rank0_threw{false};
    auto errors = zt::test::run_ranks(world, [&](int r) {
      zt::CheckpointSaver saver(options, r == 0 ? rank0_store : *stores[r], r, world);
      auto fill = zt::test::model_fill(r, world, 2);
      if (r == 0) {
        fill = [](zt::CheckpointRankWriter&) { throw zt::IoError("disk of rank 0 caught fire"); };
        try {
          zt::CheckpointSaverAccess::save(saver, fill, 2, zt::test::model_meta(2));
        } catch (...) {
          rank0_threw = true;
          throw;
        }
        return;
      }
      for (int i = 0; i < 3000 && !rank0_threw && rank0_store.calls == 0; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      zt::CheckpointSaverAccess::save(saver, fill, 2, zt::test::model_meta(2));
      saver.finish();
    });
    CHECK(zt::test::message(errors[0]) == "disk of rank 0 caught fire");
    CHECK(zt::latest_checkpoint(dir.path().string()) == (dir.path() / "step-00000001").string());
    CHECK(!fs::exists(dir.path() / "step-00000002"));
    for (const auto& entry : fs::directory_iterator(dir.path())) {
      const std::string left = entry.path().filename().string();
      CHECK_MESSAGE(left.rfind(".tmp-step-", 0) != 0, left);
    }
    CHECK(zt::remove_incomplete_checkpoints(dir.path().string()).empty());
  }
}

TEST_CASE("checkpoint: rank 0 publishes only when every rank's file is in its folder") {
  // Node-local checkpoint.dir: each rank's own disk, so rank 0's folder lacks rank 1's file.
  // It was published whole (and the older checkpoints pruned, all as broken).
  zt::test::TempDir dir, other;
  const int world = 2;
  auto options = zt::test::options_for(dir.path(), false);
  zt::test::save_steps(options, world, {1});
  auto stores = zt::test::make_stores(world);
  auto errors = zt::test::run_ranks(world, [&](int r) {
    zt::CheckpointSaver saver(r == 0 ? options : zt::test::options_for(other.path(), false),
                              *stores[r], r, world);
    zt::CheckpointSaverAccess::save(saver, zt::test::model_fill(r, world, 2), 2,
                                    zt::test::model_meta(2));
    saver.finish();
  });
  CHECK(!errors[1]);
  const std::string m = zt::test::message(errors[0]);
  CHECK_MESSAGE(m.find("rank 1 wrote") != std::string::npos, m);
  CHECK_MESSAGE(m.find("rank 0 finds no such file") != std::string::npos, m);
  CHECK_MESSAGE(m.find("one file system every rank sees") != std::string::npos, m);
  CHECK_THROWS_AS(std::rethrow_exception(errors[0]), zt::IoError);
  CHECK(zt::latest_checkpoint(dir.path().string()) == (dir.path() / "step-00000001").string());
  CHECK(!fs::exists(dir.path() / "step-00000002"));
}

TEST_CASE("the job id savers and tiers name folders by is drawn once per store") {
  // Outside zt's launcher (no ZT_JOB_ID) rank 0 draws it; a live A/B switch asks again, and a
  // second draw raced rank 1's read of the first.
  const char* had = std::getenv("ZT_JOB_ID");
  const std::string saved = had ? had : "";
  unsetenv("ZT_JOB_ID");
  auto stores = zt::test::make_stores(2);
  std::vector<std::vector<std::string>> ids(2);
  zt::test::require_no_errors(zt::test::run_ranks(2, [&](int r) {
    for (int i = 0; i < 3; ++i) {
      ids[static_cast<size_t>(r)].push_back(
          zt::offload_job_id(*stores[static_cast<size_t>(r)], r, std::chrono::seconds(10)));
    }
  }));
  if (had) setenv("ZT_JOB_ID", saved.c_str(), 1);
  REQUIRE(ids[0].size() == 3);
  CHECK(!ids[0][0].empty());
  for (const auto& rank : ids) {
    for (const std::string& id : rank) CHECK(id == ids[0][0]);
  }
}

TEST_CASE("a ZT_JOB_ID a person exported that cannot name a folder is a config error naming it") {
  const char* had = std::getenv("ZT_JOB_ID");
  const std::string saved = had ? had : "";
  auto stores = zt::test::make_stores(1);
  for (const char* bad : {"exp/1", "", ".."}) {
    setenv("ZT_JOB_ID", bad, 1);
    const std::string m = zt::test::error_of<zt::ConfigError>(
        [&] { zt::offload_job_id(*stores[0], 0, std::chrono::seconds(10)); });
    CHECK_MESSAGE(m.find(std::string("ZT_JOB_ID='") + bad + "' cannot name") != std::string::npos,
                  m);
  }
  setenv("ZT_JOB_ID", "exp-1.a_b", 1);
  CHECK(zt::offload_job_id(*stores[0], 0, std::chrono::seconds(10)) == "exp-1.a_b");
  if (had) {
    setenv("ZT_JOB_ID", saved.c_str(), 1);
  } else {
    unsetenv("ZT_JOB_ID");
  }
}

TEST_CASE("rendezvous: a rank that finds more ranks counted in than its job has is refused") {
  // Job A's two ranks met at a port; job B's rank 1 comes to the same port (a clash of derived
  // ports, or one fixed master_port): it joined A's store and mixed the jobs.
  const int port = zt::pick_free_port("127.0.0.1");
  std::vector<std::unique_ptr<zt::Store>> job_a(2);
  std::vector<std::thread> threads;
  threads.emplace_back(
      [&] { job_a[0] = zt::rendezvous("127.0.0.1", port, 0, 2, std::chrono::seconds(20)); });
  for (int i = 0; i < 5000 && !zt::test::listening(port); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  threads.emplace_back(
      [&] { job_a[1] = zt::rendezvous("127.0.0.1", port, 1, 2, std::chrono::seconds(20)); });
  for (auto& t : threads) t.join();
  REQUIRE(job_a[0]);
  CHECK_THROWS_WITH_AS(zt::rendezvous("127.0.0.1", port, 1, 2, std::chrono::seconds(5)),
                       doctest::Contains("3 ranks counted in for a job of 2"), zt::CommError);
}

TEST_CASE("rendezvous: rank 0 given another host's address says MASTER_ADDR must be its own") {
  // 192.0.2.1 is TEST-NET-1 (RFC 5737), no host's: rank 0's store listens here, and its own
  // client cannot reach it there. It said "rank 0 cannot reach rank 0".
  const int port = zt::pick_free_port("127.0.0.1");
  const std::string m = zt::test::error_of<zt::CommError>(
      [&] { zt::rendezvous("192.0.2.1", port, 0, 2, std::chrono::seconds(1)); });
  CHECK_MESSAGE(
      m.find("rank 0 hosts the store but cannot reach it at 192.0.2.1:") != std::string::npos, m);
  CHECK_MESSAGE(m.find("MASTER_ADDR must name rank 0's own host (this is ") != std::string::npos,
                m);
}

TEST_CASE("checkpoint: a rank that never reports times rank 0 out, naming it") {
  zt::test::TempDir dir;
  auto options = zt::test::options_for(dir.path(), true);
  options.timeout = std::chrono::milliseconds(300);
  auto stores = zt::test::make_stores(2);
  auto errors = zt::test::run_ranks(2, [&](int r) {
    if (r == 1) return;  // never saves
    zt::CheckpointSaver saver(options, *stores[r], r, 2);
    zt::CheckpointSaverAccess::save(saver, zt::test::model_fill(r, 2, 1), 1,
                                    zt::test::model_meta(1));
    saver.finish();
  });
  const std::string m = zt::test::message(errors[0]);
  CHECK_MESSAGE(m.find("rank(s) 1 did not report") != std::string::npos, m);
  CHECK_THROWS_AS(std::rethrow_exception(errors[0]), zt::CommError);
  CHECK(zt::latest_checkpoint(dir.path().string()).empty());
}

namespace {

// A real store whose first zero add() (rank 0's first look at who has reported) takes `stall`:
// a writer thread slower than the saver's destructor waits. Counts the calls made after the
// test says its owner is gone.
class StallingStore : public zt::Store {
 public:
  StallingStore(zt::Store& inner, std::chrono::milliseconds stall) : inner_(inner), stall_(stall) {}
  void set(const std::string& key, const std::vector<uint8_t>& value) override {
    seen();
    inner_.set(key, value);
  }
  std::vector<uint8_t> get(const std::string& key, std::chrono::milliseconds timeout) override {
    seen();
    return inner_.get(key, timeout);
  }
  int64_t add(const std::string& key, int64_t delta) override {
    seen();
    if (delta == 0 && stall_next_.exchange(false)) std::this_thread::sleep_for(stall_);
    return inner_.add(key, delta);
  }
  std::atomic<bool> gone{false};
  std::atomic<int> calls_when_gone{0};

 private:
  void seen() {
    if (gone) ++calls_when_gone;
  }
  zt::Store& inner_;
  std::chrono::milliseconds stall_;
  std::atomic<bool> stall_next_{true};
};

}  // namespace

TEST_CASE("checkpoint: a saver destroyed while its writer still waits leaves its Store alone") {
  zt::test::TempDir dir;
  auto options = zt::test::options_for(dir.path(), true);
  options.timeout = std::chrono::milliseconds(200);
  auto stores = zt::test::make_stores(2);
  StallingStore store(*stores[0], std::chrono::milliseconds(700));
  const auto start = std::chrono::steady_clock::now();
  {
    // Rank 1 never saves; rank 0's writer stalls in the Store past the destructor's wait (twice
    // the timeout), which then gives up on the save.
    zt::CheckpointSaver saver(options, store, 0, 2);
    zt::CheckpointSaverAccess::save(saver, zt::test::model_fill(0, 2, 1), 1,
                                    zt::test::model_meta(1));
  }
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  store.gone = true;  // the owner may destroy the Store from here on
  // The writer would have gone on asking who reported, every 20 ms, then named rank 1 missing.
  std::this_thread::sleep_for(std::chrono::milliseconds(600));
  CHECK(store.calls_when_gone == 0);
  CHECK(waited >= 0.4);  // 2 x the timeout, then the stalled call's end
  CHECK(zt::latest_checkpoint(dir.path().string()).empty());
}

TEST_CASE("checkpoint: a failure in the background comes back from poll() and the next save") {
  zt::test::TempDir dir;
  auto stores = zt::test::make_stores(1);
  zt::CheckpointSaver saver(zt::test::options_for(dir.path(), true), *stores[0], 0, 1);
  zt::CheckpointSaverAccess::save(saver, zt::test::model_fill(0, 1, 1), 1, zt::test::model_meta(1));
  saver.finish();
  // A trainer state that is not JSON fails when rank 0 writes the manifest, in the background.
  zt::CheckpointMeta bad = zt::test::model_meta(2);
  bad.trainer_state = "not json";
  zt::CheckpointSaverAccess::save(saver, zt::test::model_fill(0, 1, 2), 2, bad);
  bool thrown = false;
  for (int i = 0; i < 2000 && !thrown; ++i) {
    try {
      saver.poll();
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    } catch (const zt::InternalError& e) {
      thrown = std::string(e.what()).find("trainer state") != std::string::npos;
    }
  }
  CHECK(thrown);
  CHECK_NOTHROW(saver.poll());  // reported once
  CHECK(zt::latest_checkpoint(dir.path().string()) == (dir.path() / "step-00000001").string());
  CHECK(!fs::exists(dir.path() / ".tmp-step-00000002-test-job"));
  // The saver still works afterwards.
  zt::CheckpointSaverAccess::save(saver, zt::test::model_fill(0, 1, 3), 3, zt::test::model_meta(3));
  saver.finish();
  check_saved(dir.path(), 1, 3);
}

TEST_CASE("checkpoint: an engine that breaks the writer's contract gets an InternalError") {
  zt::test::TempDir dir;
  auto stores = zt::test::make_stores(1);
  zt::CheckpointSaver saver(zt::test::options_for(dir.path(), false), *stores[0], 0, 1);
  auto save = [&](const zt::CheckpointSaverAccess::Fill& fill) {
    zt::CheckpointSaverAccess::save(saver, fill, 1, zt::test::model_meta(1));
  };
  const zt::CheckpointTensor t{"w", {4}};
  const float four[4] = {1, 2, 3, 4};
  CHECK_THROWS_AS(save([&](zt::CheckpointRankWriter& w) {
                    w.declare({"w", "param", 0, 4}, false);
                  }),
                  zt::InternalError);
  CHECK_THROWS_AS(save([&](zt::CheckpointRankWriter& w) {
                    w.add_tensor(t);
                    w.declare({"w", "param", 0, 5}, false);
                  }),
                  zt::InternalError);
  CHECK_THROWS_AS(save([&](zt::CheckpointRankWriter& w) {
                    w.add_tensor(t);
                    auto i = w.declare({"w", "param", 0, 4}, false);
                    w.begin_data();
                    w.write(i, 1, four, 3);  // skips element 0
                  }),
                  zt::InternalError);
  try {
    save([&](zt::CheckpointRankWriter& w) {
      w.add_tensor(t);
      auto i = w.declare({"w", "param", 0, 4}, false);
      w.begin_data();
      w.write(i, 0, four, 2);
      w.set_counters({});
    });
    FAIL("an incomplete piece was accepted");
  } catch (const zt::InternalError& e) {
    CHECK(std::string(e.what()).find("got 2 elements") != std::string::npos);
  }
  CHECK(zt::latest_checkpoint(dir.path().string()).empty());
  CHECK(zt::remove_incomplete_checkpoints(dir.path().string()).empty());
}

TEST_CASE("checkpoint: a disk that fills fails the save naming path and bytes, latest stays") {
  zt::test::TempDir dir;
  const fs::path mount = dir.path() / "small";
  fs::create_directories(mount);
  if (::mount("tmpfs", mount.c_str(), "tmpfs", 0, "size=1m") != 0) {
    ZT_SKIP_UNLESS_CI(std::string("cannot mount a 1 MiB tmpfs here (") + std::strerror(errno) +
                      "); needs root");
  }
  struct Unmount {
    std::string path;
    ~Unmount() { ::umount2(path.c_str(), MNT_DETACH); }
  } unmount{mount.string()};
  auto options = zt::test::options_for(mount, true);
  zt::test::save_steps(options, 2, {1});
  const std::string previous = zt::latest_checkpoint(mount.string());
  REQUIRE(!previous.empty());

  // 1) Too big for the free space: refused before any data is written, by begin_data().
  const zt::CheckpointTensor big{"big", {300 * 1024}};  // 1.2 MB of fp32
  auto big_fill = [&](zt::CheckpointRankWriter& w) {
    w.add_tensor(big);
    auto i = w.declare({"big", "param", 0, big.numel()}, false);
    w.begin_data();
    std::vector<float> zeros(static_cast<size_t>(big.numel()));
    w.write(i, 0, zeros.data(), big.numel());
    w.set_counters({});
  };
  auto stores = zt::test::make_stores(1);
  {
    zt::CheckpointSaver saver(options, *stores[0], 0, 1);
    try {
      zt::CheckpointSaverAccess::save(saver, big_fill, 2, zt::test::model_meta(2));
      FAIL("a save bigger than the disk passed");
    } catch (const zt::IoError& e) {
      const std::string m = e.what();
      CHECK_MESSAGE(m.find((mount / ".tmp-step-00000002-test-job").string()) != std::string::npos,
                    m);
      CHECK_MESSAGE(
          m.find("needs " + std::to_string(4096 + big.numel() * 4) + " bytes") != std::string::npos,
          m);
      CHECK_MESSAGE(m.find("checkpoint.keep_last") != std::string::npos, m);
    }
  }
  CHECK(zt::latest_checkpoint(mount.string()) == previous);

  // 2) Each rank fits alone, both do not: a write itself meets ENOSPC, in the background.
  const zt::CheckpointTensor half{"half", {2 * 150 * 1024}};  // 2 x 600 KB
  std::atomic<int> checked{0};
  auto half_fill = [&](int r) {
    return [&, r](zt::CheckpointRankWriter& w) {
      w.add_tensor(half);
      auto [b, e] = zt::test::owned(half.numel(), r, 2);
      auto i = w.declare({"half", "param", b, e}, false);
      w.begin_data();
      // Both ranks pass the free-space check before either writes.
      ++checked;
      for (int wait = 0; checked < 2 && wait < 10000; ++wait) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
      std::vector<float> ones(static_cast<size_t>(e - b), 1.0f);
      w.write(i, 0, ones.data(), e - b);
      w.set_counters({});
    };
  };
  auto stores2 = zt::test::make_stores(2);
  auto errors = zt::test::run_ranks(2, [&](int r) {
    zt::CheckpointSaver saver(options, *stores2[r], r, 2);
    zt::CheckpointSaverAccess::save(saver, half_fill(r), 3, zt::test::model_meta(3));
    saver.finish();
  });
  std::string all = zt::test::message(errors[0]) + " | " + zt::test::message(errors[1]);
  CHECK_MESSAGE(errors[0], all);
  CHECK_MESSAGE(all.find("No space left on device") != std::string::npos, all);
  CHECK_MESSAGE(all.find(".safetensors") != std::string::npos, all);
  CHECK(zt::latest_checkpoint(mount.string()) == previous);
  zt::CheckpointReader reader(previous);
  check_every_range(reader, 1);
}

TEST_CASE("depart: rank 0 keeps the store open until every rank has left, and says so on a "
          "timeout") {
  auto stores = zt::test::make_stores(2);
  std::atomic<bool> rank1_left{false};
  std::atomic<bool> rank0_saw_rank1{false};
  auto errors = zt::test::run_ranks(2, [&](int rank) {
    if (rank == 0) {
      zt::depart(*stores[0], 0, 2, std::chrono::seconds(20));
      rank0_saw_rank1 = rank1_left.load();
      return;
    }
    // Rank 1 still uses the store well after rank 0 arrived at the exit.
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    CHECK(stores[1]->add("still/here", 1) == 1);
    rank1_left = true;
    zt::depart(*stores[1], 1, 2, std::chrono::seconds(20));
  });
  CHECK_FALSE(errors[0]);
  CHECK_FALSE(errors[1]);
  CHECK(rank0_saw_rank1);

  // A second exit where rank 1 never leaves: rank 0 gives up after its timeout, counting.
  auto again = zt::test::make_stores(2);
  auto message = zt::test::error_of<zt::CommError>(
      [&] { zt::depart(*again[0], 0, 2, std::chrono::milliseconds(300)); });
  CHECK(message.find("only 1 of 2 ranks finished within 300 ms") != std::string::npos);
}
