#include "checkpoint/checkpoint_saver.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <filesystem>
#include <functional>
#include <iostream>
#include <mutex>
#include <optional>
#include <thread>

#include "checkpoint/checkpoint_best.h"
#include "checkpoint/checkpoint_layout.h"
#include "checkpoint/checkpoint_manifest.h"
#include "checkpoint/checkpoint_rank_writer.h"
#include "util/posix_file.h"
#include "util/save_io_limit.h"
#include "zt/error.h"
#include "zt/host/trace.h"
#include "zt/store.h"

namespace fs = std::filesystem;

namespace zt {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

std::string text_of(const std::vector<uint8_t>& bytes) { return {bytes.begin(), bytes.end()}; }
std::vector<uint8_t> bytes_of(const std::string& text) { return {text.begin(), text.end()}; }

// The saver's Store as a save's writer thread reaches it. The saver's contract is only that the
// Store outlives the saver, and a thread its destructor gave up waiting for (a rank that never
// reports) would call a Store already gone: the destructor cuts the link, once the call in flight
// (bounded by the timeout) has returned, and later calls throw instead.
class StoreLink {
 public:
  explicit StoreLink(Store& store) : store_(&store) {}
  void set(const std::string& key, const std::vector<uint8_t>& value) {
    std::lock_guard<std::mutex> lock(mu_);
    live().set(key, value);
  }
  std::vector<uint8_t> get(const std::string& key, std::chrono::milliseconds timeout) {
    std::lock_guard<std::mutex> lock(mu_);
    return live().get(key, timeout);
  }
  int64_t add(const std::string& key, int64_t delta) {
    std::lock_guard<std::mutex> lock(mu_);
    return live().add(key, delta);
  }
  void cut() {
    std::lock_guard<std::mutex> lock(mu_);
    store_ = nullptr;
  }

 private:
  Store& live() {
    if (store_ == nullptr) {
      throw CommError("checkpoint: the saver was closed while this save still waited on the other "
                      "ranks; the previous checkpoint stays the latest");
    }
    return *store_;
  }
  std::mutex mu_;
  Store* store_;
};

// Everything one save needs after save() returned. Owned by the writer thread's job, so it
// stays valid whatever happens to the saver.
struct SaveTask {
  CheckpointOptions options;
  std::shared_ptr<StoreLink> store;
  int rank = 0, world = 1;
  int64_t step = 0;
  std::string keys;  // "zt/ckpt/<job>/<save number>-step<step>/": this save's Store keys
  std::string temp;  // the temporary folder
  CheckpointMeta meta;
  std::unique_ptr<CheckpointRankWriter> writer;
  CheckpointRankWriter::Impl* file = nullptr;  // writer's
  Clock::time_point start;
  // Rank 0: when its wait for the other ranks' reports ends (set by the first wait on them).
  std::optional<Clock::time_point> deadline;
  SaveStats stats;
  bool reported = false;  // this rank's report (or error) is in the Store
};

std::string error_kind_of(const std::exception& e) {
  const auto* z = dynamic_cast<const Error*>(&e);
  return z ? z->kind_name() : "internal";
}

[[noreturn]] void throw_kind(const std::string& kind, const std::string& message) {
  if (kind == "comm") throw CommError(message);
  if (kind == "config") throw ConfigError(message);
  if (kind == "internal") throw InternalError(message);
  if (kind == "numeric") throw NumericError(message);
  if (kind == "plugin") throw PluginError(message);
  throw IoError(message);
}

// Tells rank 0 at once that this rank has no part to give, so it stops waiting.
void report_failure(SaveTask& t, const std::exception& e) noexcept {
  if (t.rank == 0 || t.reported) return;
  try {
    ckpt::RankReport r;
    r.rank = t.rank;
    r.error = e.what();
    r.error_kind = error_kind_of(e);
    t.store->set(t.keys + "error", bytes_of(ckpt::report_to_json(r)));
    t.store->add(t.keys + "failed", 1);
    t.reported = true;
  } catch (const std::exception& store_error) {
    std::cerr << "zt: checkpoint of step " << t.step << ": rank " << t.rank
              << " could not tell rank 0 that its save failed: " << store_error.what() << "\n";
  }
}

// Asks `ready` with a pause that doubles from 1 ms to 20 ms between asks, until it holds (true)
// or `deadline` has passed (false). What `ready` throws ends the wait.
bool poll_until(Clock::time_point deadline, const std::function<bool()>& ready) {
  auto pause = std::chrono::milliseconds(1);
  while (!ready()) {
    if (Clock::now() > deadline) return false;
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(20));
  }
  return true;
}

// Rank 0, giving a save up: waits (up to the save's deadline) until every other rank has
// reported its part written or failed, after which none touches the temporary folder again. A
// rank still writing, or not yet at its folder, would otherwise make it again or leave its file
// in it after rank 0 removed it. False when time ran out or the Store cannot say.
bool other_ranks_finished(SaveTask& t) noexcept {
  try {
    if (!t.deadline) t.deadline = Clock::now() + t.options.timeout;
    return poll_until(*t.deadline, [&] {
      return t.store->add(t.keys + "done", 0) + t.store->add(t.keys + "failed", 0) >= t.world - 1;
    });
  } catch (const std::exception&) {
    return false;  // a Store the saver's destructor cut, or one lost: remove what is there now
  }
}

// After a failure: other ranks learn of it, rank 0 removes the temporary folder (the other
// ranks' files in it are worthless now) once they are done with it, and the previous checkpoint
// stays the latest.
void abandon(SaveTask& t, const std::exception& e) noexcept {
  report_failure(t, e);
  if (t.rank != 0) return;
  const bool finished = t.world == 1 || other_ranks_finished(t);
  std::error_code ec;
  {
    const ckpt::SaveIoDeadline deadline("removing the unfinished save " + t.temp);
    fs::remove_all(t.temp, ec);
  }
  if (ec || !finished) {
    std::cerr << "zt: checkpoint of step " << t.step << ": "
              << (ec ? "cannot remove " + t.temp + " (" + ec.message() + ")"
                     : "a rank that did not report may still write into " + t.temp)
              << "; the next start of a job on this checkpoint.dir removes it\n";
  }
}

std::string missing_ranks(SaveTask& t) {
  std::string names;
  for (int r = 1; r < t.world; ++r) {
    try {
      t.store->get(t.keys + "rank" + std::to_string(r), std::chrono::milliseconds(1));
    } catch (const std::exception&) {
      names += (names.empty() ? "" : ", ") + std::to_string(r);
    }
  }
  return names;
}

// Rank 0: every rank's report, in rank order; fails as soon as one rank reports a failure.
std::vector<ckpt::RankReport> gather_reports(SaveTask& t, ckpt::RankReport own) {
  t.deadline = Clock::now() + t.options.timeout;
  const bool all_done = poll_until(*t.deadline, [&] {
    if (t.store->add(t.keys + "done", 0) >= t.world - 1) return true;
    if (t.store->add(t.keys + "failed", 0) > 0) {
      ckpt::RankReport failed = ckpt::report_from_json(
          text_of(t.store->get(t.keys + "error", t.options.timeout)));
      throw_kind(failed.error_kind, "checkpoint of step " + std::to_string(t.step) + ": rank " +
                                        std::to_string(failed.rank) +
                                        " could not save its part: " + failed.error +
                                        " (the previous checkpoint stays the latest)");
    }
    return false;
  });
  if (!all_done) {
    throw CommError("checkpoint of step " + std::to_string(t.step) + ": rank(s) " +
                    missing_ranks(t) + " did not report their part within " +
                    std::to_string(t.options.timeout.count()) +
                    " ms (dead, or writing to a slow disk); the previous checkpoint stays the "
                    "latest; raise the timeout or check those ranks");
  }
  std::vector<ckpt::RankReport> reports;
  reports.push_back(std::move(own));
  for (int r = 1; r < t.world; ++r) {
    const std::string key = t.keys + "rank" + std::to_string(r);
    reports.push_back(ckpt::report_from_json(text_of(t.store->get(key, t.options.timeout))));
    // Emptied once read: the store (rank 0's TCPStore, torchrun's agent's) keeps every value for
    // the life of the job, and each save's reports list every piece (~100 B each): a job saving
    // often, or switching live A/B arms, grew it by megabytes per save.
    t.store->set(key, {});
  }
  return reports;
}

// Rank 0: what each rank reported writing must be in the folder it publishes. A
// checkpoint.dir that is not one file system for every rank (each node's own disk) held only
// rank 0's file there: it was published whole, and the older checkpoints were pruned.
void check_rank_files(const SaveTask& t, const std::vector<ckpt::RankReport>& reports) {
  for (const ckpt::RankReport& r : reports) {
    const fs::path path = fs::path(t.temp) / r.file.name;
    // Opening (not a stat by name) makes an NFS client look again at the folder.
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    struct stat st {};
    const bool seen = fd >= 0 && ::fstat(fd, &st) == 0;
    if (fd >= 0) ::close(fd);
    if (seen && st.st_size == r.file.bytes) continue;
    throw IoError("checkpoint of step " + std::to_string(t.step) + ": rank " +
                  std::to_string(r.rank) + " wrote " + path.string() + " (" +
                  std::to_string(r.file.bytes) + " bytes), but rank 0 finds " +
                  (seen ? "it with " + std::to_string(st.st_size) + " bytes" : "no such file") +
                  "; checkpoint.dir must be one file system every rank sees (a shared one, not "
                  "each node's own disk); the previous checkpoint stays the latest");
  }
}

// Rank 0: the manifest into the temporary folder, then the rename that makes it the latest.
void publish(SaveTask& t, const std::vector<ckpt::RankReport>& reports) {
  const std::string name = ckpt::step_folder_name(t.step);
  {
    const ckpt::SaveIoDeadline deadline("publishing the checkpoint of step " +
                                        std::to_string(t.step) + " from " + t.temp + " as " +
                                        (fs::path(t.options.dir) / name).string());
    check_rank_files(t, reports);
    const std::string text = ckpt::manifest_to_json(
        ckpt::assemble_manifest(t.step, t.meta, reports));
    const fs::path temp(t.temp);
    ckpt::replace_file_atomically((temp / ckpt::kManifestName).string(), text);
    const uint32_t crc = ckpt::crc32_update(0, text.data(), static_cast<int64_t>(text.size()));
    ckpt::replace_file_atomically((temp / ckpt::kManifestCrcName).string(),
                                  ckpt::crc32_hex(crc) + "\n");
    ckpt::publish_checkpoint(t.options.dir, t.temp, name);
  }
  t.stats.publish_seconds = seconds_since(t.start);
  t.stats.folder = (fs::path(t.options.dir) / name).string();
  // The checkpoint is saved and the latest from here: what follows only tidies, and its
  // failure is a warning, not a failed save (which skipped the metrics line and the pruning).
  // Apart: a `best` that cannot be written must not stop the pruning, or the disk fills.
  std::string best;
  try {
    if (!t.options.keep_best.empty()) {
      const ckpt::SaveIoDeadline deadline("pointing " + t.options.dir + "/best at the lowest " +
                                          t.options.keep_best);
      best = ckpt::update_best(t.options.dir, t.options.keep_best, t.step);
    }
  } catch (const std::exception& e) {
    // The `best` named before stays spared: it is still the lowest that was recorded.
    best = ckpt::folder_named_by(t.options.dir, ckpt::kBestName);
    std::cerr << "zt: warning: " << t.stats.folder
              << " is saved and the latest, but pointing `best` at the lowest metric failed: "
              << e.what() << "\n";
  }
  try {
    const ckpt::SaveIoDeadline deadline("removing older checkpoints in " + t.options.dir);
    ckpt::prune_checkpoints(t.options.dir, t.options.keep_last, t.stats.folder, best);
  } catch (const std::exception& e) {
    std::cerr << "zt: warning: " << t.stats.folder
              << " is saved and the latest, but removing older checkpoints failed: " << e.what()
              << "\n";
  }
}

// What follows the engine's part: on the writer thread (async) or in save() (sync).
SaveStats write_and_publish(SaveTask& t) {
  trace::name_this_thread("checkpoint writer");
  const trace::Scope span("checkpoint write", trace::kCheckpoint);
  try {
    ckpt::RankReport own = t.file->finish_file();
    t.stats.bytes = own.file.bytes;
    t.stats.write_seconds = seconds_since(t.start);
    if (t.rank != 0) {
      t.store->set(t.keys + "rank" + std::to_string(t.rank), bytes_of(ckpt::report_to_json(own)));
      t.reported = true;
      t.store->add(t.keys + "done", 1);
      return t.stats;
    }
    publish(t, gather_reports(t, std::move(own)));
    return t.stats;
  } catch (const std::exception& e) {
    abandon(t, e);
    throw;
  }
}

}  // namespace

class CheckpointSaver::Impl {
 public:
  Impl(CheckpointOptions options, Store& store, int rank, int world)
      : options_(std::move(options)),
        store_(std::make_shared<StoreLink>(store)),
        rank_(rank),
        world_(world),
        shared_(std::make_shared<Shared>()) {}
  ~Impl();

  void save(const CheckpointSaverAccess::Fill& fill, int64_t step, const CheckpointMeta& meta);
  void poll();
  void finish();
  std::optional<SaveStats> last_completed() const;

 private:
  // What the training thread and the writer thread share; the thread holds it too, so a thread
  // left behind by a destructor that gave up waiting still finds it.
  struct Shared {
    mutable std::mutex mu;
    std::condition_variable cv;
    std::function<SaveStats()> job;
    bool busy = false, stop = false;
    int64_t step = -1;  // of the save in flight, or the last one
    std::exception_ptr error;
    std::optional<SaveStats> last;
  };
  static void writer_loop(std::shared_ptr<Shared> shared);
  void wait_idle();
  std::shared_ptr<SaveTask> prepare(int64_t step, const CheckpointMeta& meta,
                                    Clock::time_point start);

  CheckpointOptions options_;
  std::shared_ptr<StoreLink> store_;
  int rank_, world_;
  int64_t saves_ = 0;
  std::shared_ptr<ckpt::SnapshotBuffer> snapshot_;
  std::shared_ptr<Shared> shared_;
  std::thread thread_;
};

void CheckpointSaver::Impl::writer_loop(std::shared_ptr<Shared> shared) {
  std::unique_lock<std::mutex> lock(shared->mu);
  for (;;) {
    shared->cv.wait(lock, [&] { return shared->stop || shared->job; });
    if (!shared->job) return;
    auto job = std::move(shared->job);
    shared->job = nullptr;
    lock.unlock();
    std::optional<SaveStats> stats;
    std::exception_ptr error;
    try {
      stats = job();
    } catch (...) {
      error = std::current_exception();
    }
    job = nullptr;  // the task (and its file) goes before the saver hears it is done
    lock.lock();
    if (stats) shared->last = stats;
    if (error) shared->error = error;
    shared->busy = false;
    shared->cv.notify_all();
  }
}

void CheckpointSaver::Impl::wait_idle() {
  // The writer thread bounds its own wait on other ranks by the timeout and then reports which
  // rank is missing; the second timeout leaves it room for that and for its disk writes.
  const auto limit = 2 * options_.timeout;
  std::unique_lock<std::mutex> lock(shared_->mu);
  if (!shared_->cv.wait_for(lock, limit, [&] { return !shared_->busy; })) {
    throw CommError("checkpoint of step " + std::to_string(shared_->step) +
                    " is still being written after " + std::to_string(limit.count()) +
                    " ms (a stuck disk or rank); check " + options_.dir);
  }
}

void CheckpointSaver::Impl::poll() {
  std::lock_guard<std::mutex> lock(shared_->mu);
  if (!shared_->error) return;
  std::exception_ptr error = shared_->error;
  shared_->error = nullptr;
  std::rethrow_exception(error);
}

void CheckpointSaver::Impl::finish() {
  wait_idle();
  poll();
}

std::optional<SaveStats> CheckpointSaver::Impl::last_completed() const {
  std::lock_guard<std::mutex> lock(shared_->mu);
  return shared_->last;
}

CheckpointSaver::Impl::~Impl() {
  std::unique_lock<std::mutex> lock(shared_->mu);
  // As finish(): the writer's own wait on the other ranks takes up to one timeout, its reads of
  // their reports and its disk writes the rest.
  const bool idle = shared_->cv.wait_for(lock, 2 * options_.timeout,
                                         [&] { return !shared_->busy; });
  if (shared_->error) {
    try {
      std::rethrow_exception(shared_->error);
    } catch (const std::exception& e) {
      std::cerr << "zt: checkpoint of step " << shared_->step << " failed: " << e.what() << "\n";
    }
  }
  shared_->stop = true;
  lock.unlock();
  shared_->cv.notify_all();
  if (!thread_.joinable()) {
    store_->cut();
    return;
  }
  if (idle) {
    thread_.join();
    store_->cut();
    return;
  }
  std::cerr << "zt: checkpoint of step " << shared_->step << " still not written after "
            << 2 * options_.timeout.count() << " ms; giving up on it (the previous checkpoint "
            << "stays the latest)\n";
  store_->cut();
  thread_.detach();
}

std::shared_ptr<SaveTask> CheckpointSaver::Impl::prepare(int64_t step, const CheckpointMeta& meta,
                                                         Clock::time_point start) {
  auto t = std::make_shared<SaveTask>();
  t->options = options_;
  t->store = store_;
  t->rank = rank_;
  t->world = world_;
  t->step = step;
  t->keys = "zt/ckpt/" + options_.job + "/" + std::to_string(++saves_) + "-step" +
            std::to_string(step) + "/";
  t->temp = (fs::path(options_.dir) / ckpt::temp_folder_name(step, options_.job)).string();
  t->meta = meta;
  t->start = start;
  t->stats.step = step;
  t->stats.folder = t->temp;
  return t;
}

std::chrono::milliseconds checkpoint_save_io_limit(std::chrono::milliseconds timeout) {
  return std::max<std::chrono::milliseconds>(timeout / 2, std::chrono::seconds(10));
}

void CheckpointSaver::Impl::save(const CheckpointSaverAccess::Fill& fill, int64_t step,
                                 const CheckpointMeta& meta) {
  const auto start = Clock::now();
  std::shared_ptr<SaveTask> t = prepare(step, meta, start);
  // A file system that stopped answering (an NFS server gone) blocks a write with no timeout of
  // its own: each file operation of the save on this thread (all of a synchronous one, the pieces
  // an asynchronous one writes as they come) is bounded by half the timeout, as a load's are.
  // At least 10 s: checkpoint.timeout_s may be 1 s, and launch.timeout_s (the Python engine's)
  // 0.1 s, too short for a 16 MiB write on working storage.
  const ckpt::SaveIoLimit bounded(
      checkpoint_save_io_limit(options_.timeout),
      "check the storage under checkpoint.dir, or, for storage that is only slow, raise " +
          options_.timeout_setting +
          " (each file operation of a save may take half of it, at least 10 s)");
  try {
    wait_idle();
    poll();
    std::error_code ec;
    {
      const ckpt::SaveIoDeadline deadline("making the folder " + t->temp);
      fs::create_directories(t->temp, ec);
    }
    if (ec) {
      throw IoError("cannot create checkpoint folder " + t->temp + ": " + ec.message() +
                    "; make checkpoint.dir writable or point it elsewhere");
    }
    if (options_.async && !snapshot_) snapshot_ = std::make_shared<ckpt::SnapshotBuffer>();
    auto impl = std::make_unique<CheckpointRankWriter::Impl>(CheckpointRankWriter::Impl::Setup{
        t->temp, step, rank_, world_, options_.async ? snapshot_ : nullptr});
    t->file = impl.get();
    t->writer = std::make_unique<CheckpointRankWriter>(std::move(impl));
    fill(*t->writer);
    t->file->check_complete();
  } catch (const std::exception& e) {
    abandon(*t, e);
    throw;
  }
  {
    std::lock_guard<std::mutex> lock(shared_->mu);
    shared_->step = step;
  }
  if (!options_.async) {
    SaveStats stats = write_and_publish(*t);
    stats.stall_seconds = seconds_since(start);
    std::lock_guard<std::mutex> lock(shared_->mu);
    shared_->last = stats;
    return;
  }
  t->stats.stall_seconds = seconds_since(start);
  std::lock_guard<std::mutex> lock(shared_->mu);
  if (!thread_.joinable()) thread_ = std::thread(writer_loop, shared_);
  shared_->job = [t] { return write_and_publish(*t); };
  shared_->busy = true;
  shared_->cv.notify_all();
}

// ---------------------------------------------------------------------------------------------

CheckpointSaver::CheckpointSaver(CheckpointOptions options, Store& store, int rank, int world)
    : impl_(std::make_unique<Impl>(std::move(options), store, rank, world)) {}
CheckpointSaver::~CheckpointSaver() = default;

void CheckpointSaver::poll() { impl_->poll(); }
void CheckpointSaver::finish() { impl_->finish(); }
std::optional<SaveStats> CheckpointSaver::last_completed() const { return impl_->last_completed(); }

void CheckpointSaverAccess::save(CheckpointSaver& saver, const Fill& fill, int64_t step,
                                 const CheckpointMeta& meta) {
  saver.impl_->save(fill, step, meta);
}

}  // namespace zt
