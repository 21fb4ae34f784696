// The offload tiers of a job's [plugins], its job id, and the leftovers of killed ranks.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <random>
#include <set>
#include <string_view>

#include "compose/offload_tiers.h"
#include "util/fault_injection.h"
#include "zt/error.h"
#include "zt/host/file_io_deadline.h"
#include "zt/host/flight_recorder.h"
#include "zt/host/plugin_loader.h"

namespace zt {

namespace {

// Each offload role with its choice in the settings.
std::vector<const PluginChoice*> offload_roles(const EngineSettings& settings) {
  return {&settings.offload_optimizer, &settings.offload_param};
}

// <path>/zt-<job>: where a file tier of `role` keeps this job's files (zt/offload.h).
std::filesystem::path job_folder(const PluginChoice& role, const std::string& job) {
  return std::filesystem::path(role.options.get_string("path")) / ("zt-" + job);
}

// Tells the launcher, where it asked (remove_noted_offload_folders), which folder to clear
// should this rank be killed. A note that cannot be written is a warning: the job can train.
void note_offload_folder(const std::filesystem::path& folder, int rank, const std::string& id) {
  const char* notes = std::getenv("ZT_OFFLOAD_NOTES");
  if (!notes || !*notes) return;
  // One note per folder: two engines of a rank may use one plugin with two paths.
  const std::filesystem::path note = std::filesystem::path(notes) /
                                     ("rank-" + std::to_string(rank) + "-" + id + "-" +
                                      std::to_string(std::hash<std::string>{}(folder.string())));
  std::FILE* f = std::fopen(note.c_str(), "w");
  if (!f || std::fprintf(f, "%s\n", std::filesystem::absolute(folder).c_str()) < 0 ||
      std::fclose(f) != 0) {
    std::fprintf(stderr,
                 "zt: warning: cannot note offload folder %s in %s: %s; should this rank be "
                 "killed, remove it by hand\n",
                 folder.c_str(), notes, std::strerror(errno));
  }
}

// The entries of `job_folder` (its rank<r> folders) that hold a region file this process has
// open: a tier keeps its files open while it lives, so these are this process's tiers' (another
// process of the same job id and rank, whose tier took rank<r>.2, holds its own). Compared as the
// kernel names open files: with symbolic links, "." and ".." resolved.
std::set<std::filesystem::path> folders_with_open_files(const std::filesystem::path& job_folder) {
  std::set<std::filesystem::path> held;
  std::error_code ec;
  const std::filesystem::path real = std::filesystem::canonical(job_folder, ec);
  if (ec) return held;  // no such folder (yet, or any more): nothing of it is open
  const std::string prefix = real.string() + "/";
  constexpr std::string_view kDeleted = " (deleted)";  // how an unlinked file's link reads
  for (std::filesystem::directory_iterator it("/proc/self/fd", ec), end; !ec && it != end;
       it.increment(ec)) {
    std::error_code unreadable;
    const std::string target = std::filesystem::read_symlink(it->path(), unreadable).string();
    if (unreadable || target.rfind(prefix, 0) != 0) continue;
    const std::string below = target.substr(prefix.size());
    const size_t slash = below.find('/');
    // A tier's bookkeeping file (its name starts with '.') says nothing of whose folder it is:
    // this process's tier, starting, opens other ranks' for a moment (offload_nvme looks at each
    // .zt-owner on its path). Region files do.
    if (slash != std::string::npos && below.compare(slash + 1, 1, ".") == 0) continue;
    // A file of the job folder itself (not a rank's folder) that is gone already: nothing to do.
    if (slash == std::string::npos && below.size() >= kDeleted.size() &&
        below.compare(below.size() - kDeleted.size(), kDeleted.size(), kDeleted) == 0)
      continue;
    held.insert(real / below.substr(0, slash));
  }
  return held;
}

// The job folders of the file tiers this process made (remove_own_offload_files), each with the
// process that made it and what that process already had open there when it did: a forked
// child inherits the list and its parent's open files, and neither folder is its.
// A timed mutex: a SIGTERM's remover (python/binding/leaving_ranks.cc) may come while the
// thread it holds still has it, and then gives up instead of waiting for ever.
struct OwnFolder {
  std::filesystem::path job_folder;
  pid_t pid = 0;
  std::set<std::filesystem::path> inherited;
};
struct OwnFolders {
  std::timed_mutex mutex;
  std::vector<OwnFolder> folders;
};

// Never destroyed: a SIGTERM that comes while the process exits still finds it whole.
OwnFolders& own_folders() {
  static OwnFolders* own = new OwnFolders;
  return *own;
}

// Before the tier is made: what is open under the folder then is not the tier's.
void remember_own_folder(const std::filesystem::path& job_folder) {
  OwnFolders& own = own_folders();
  const std::lock_guard<std::timed_mutex> lock(own.mutex);
  const std::filesystem::path folder = std::filesystem::absolute(job_folder);
  bool first_of_process = true;
  for (const OwnFolder& f : own.folders) {
    if (f.pid != ::getpid()) continue;
    if (f.job_folder == folder) return;
    first_of_process = false;
  }
  own.folders.push_back({folder, ::getpid(), folders_with_open_files(folder)});
  // A file operation that outlives its deadline ends the process without destructors.
  if (first_of_process) {
    add_file_io_last_words([] {
      const std::vector<std::string> removed = remove_own_offload_files();
      if (removed.empty()) return std::string();
      std::string line = "ending on a stuck file operation; removed this rank's offload files:";
      for (const std::string& gone : removed) line += " " + gone;
      return line;
    });
  }
}
}  // namespace

EngineTiers OffloadTiers::engine_tiers() const {
  EngineTiers t;
  if (!optimizer_id.empty()) t.optimizer = by_id.at(optimizer_id).get();
  if (!param_id.empty()) t.param = by_id.at(param_id).get();
  return t;
}

std::string OffloadTiers::describe() const {
  std::string out;
  if (!optimizer_id.empty()) {
    out += "optimizer states + master -> " + optimizer_id + ": " +
           by_id.at(optimizer_id)->describe();
  }
  if (!param_id.empty()) {
    out += std::string(out.empty() ? "" : "; ") + "parameter shards -> " + param_id + ": " +
           by_id.at(param_id)->describe();
  }
  return out;
}

std::string draw_job_id() {
  std::random_device device;
  char id[32];
  std::snprintf(id, sizeof(id), "%d-%08x", static_cast<int>(getpid()), device());
  return id;
}

std::string offload_job_id(Store& store, int rank, std::chrono::milliseconds timeout) {
  if (const char* id = std::getenv("ZT_JOB_ID")) {
    // Set by zt's launchers, but a person may export one: it names the offload folders.
    const std::string given = id;
    const bool folder_name = !given.empty() && given != "." && given != ".." &&
                             given.find('/') == std::string::npos;
    if (!folder_name) {
      throw ConfigError("ZT_JOB_ID='" + given +
                        "' cannot name the job's offload folder (zt-<ZT_JOB_ID>): unset it, "
                        "or give letters, digits, '.', '-' or '_'");
    }
    return given;
  }
  const std::string key = "offload/job_id";
  // Drawn once per store: a live A/B switch asks again, and a second draw under the same key
  // raced the other ranks' reads of the first (their savers then met under different keys).
  if (rank == 0 && store.add("offload/job_id_drawn", 1) == 1) {
    const std::string id = draw_job_id();
    store.set(key, std::vector<uint8_t>(id.begin(), id.end()));
  }
  std::vector<uint8_t> value = store.get(key, timeout);
  return std::string(value.begin(), value.end());
}

OffloadTiers make_offload_tiers(const EngineSettings& settings, PluginCatalog& catalog,
                                const RankEnv& env, Store& store,
                                std::chrono::milliseconds timeout) {
  OffloadTiers tiers;
  if (!settings.offload_optimizer.chosen() && !settings.offload_param.chosen()) return tiers;
  tiers.job = offload_job_id(store, env.rank, timeout);
  // Today launch.device reaches only the tiers (pinned host memory); compose refused "cuda"
  // where LibTorch has no CUDA device (check_launch_device).
  const bool cuda = settings.launch.device == "cuda";
  for (const PluginChoice* role : offload_roles(settings)) {
    if (!role->chosen()) continue;
    (role == &settings.offload_optimizer ? tiers.optimizer_id : tiers.param_id) = role->id;
    if (tiers.by_id.count(role->id)) continue;
    const OffloadPlugin& plugin = catalog.offload(role->id, role->key);
    if (offloads_to_files(*role)) {
      const std::filesystem::path folder = job_folder(*role, tiers.job);
      note_offload_folder(folder, env.rank, role->id);
      remember_own_folder(folder);
    }
    OffloadContext context{env.rank, role->key, tiers.job, cuda};
    // Observed: a rank blocked on a transfer says which region (flight recorder, trace).
    tiers.by_id[role->id] = observe_tier(
        created_by(plugin.create(role->options, context), role->id, "offload"), role->id);
  }
  return tiers;
}

bool offloads_to_files(const PluginChoice& role) {
  return role.chosen() && role.declares("path", ValueType::kString);
}

double separate_master_share(const EngineSettings& settings) {
  double share = 0;
  if (settings.offload_optimizer.chosen()) share = settings.options.offload_optimizer_fraction;
  if (settings.offload_param.chosen())
    share = std::max(share, settings.options.offload_param_fraction);
  return share;
}

std::vector<std::string> remove_offload_leftovers(const EngineSettings& settings,
                                                  const std::string& job) {
  // A test's storage that stopped answering (ZT_TEST_FAULT=stall_offload_cleanup:0:1; the
  // launcher, which calls this, has no RANK and counts as 0): its caller must not wait for it.
  static std::atomic<int64_t> cleanups{0};
  stall_if_injected("stall_offload_cleanup", cleanups, std::chrono::minutes(2));
  std::vector<std::string> removed;
  for (const PluginChoice* role : offload_roles(settings)) {
    if (!offloads_to_files(*role)) continue;
    const std::filesystem::path folder = job_folder(*role, job);
    std::error_code ec;
    if (std::filesystem::exists(folder, ec)) {
      std::filesystem::remove_all(folder, ec);
      if (!ec) {
        removed.push_back(folder.string());
      } else {
        // Said, not counted as removed: tens of GB stay, and the next job's room check would
        // take them for another job's.
        std::fprintf(stderr,
                     "zt: warning: cannot remove the offload files stopped ranks left in %s (%s); "
                     "remove them by hand\n",
                     folder.c_str(), ec.message().c_str());
      }
    }
  }
  return removed;
}

std::string make_offload_notes_folder() {
  const char* tmp = std::getenv("TMPDIR");
  std::string path = std::string(tmp && *tmp ? tmp : "/tmp") + "/zt-offload-notes-XXXXXX";
  if (::mkdtemp(path.data()) == nullptr) {
    std::fprintf(stderr,
                 "zt: warning: cannot make a folder under TMPDIR for the ranks' offload notes "
                 "(%s); offload files of ranks that are killed stay\n",
                 std::strerror(errno));
    return "";
  }
  return path;
}

std::vector<std::string> remove_own_offload_files() {
  OwnFolders& own = own_folders();
  std::vector<OwnFolder> mine;
  {
    const std::unique_lock<std::timed_mutex> lock(own.mutex, std::chrono::seconds(2));
    if (!lock.owns_lock()) return {};
    for (const OwnFolder& f : own.folders) {
      if (f.pid == ::getpid()) mine.push_back(f);
    }
  }
  std::vector<std::string> removed;
  for (const OwnFolder& f : mine) {
    for (const std::filesystem::path& folder : folders_with_open_files(f.job_folder)) {
      if (f.inherited.count(folder)) continue;
      std::error_code removing;
      std::filesystem::remove_all(folder, removing);
      if (!removing) removed.push_back(folder.string());
    }
    // The last rank out takes the job's folder; rmdir leaves one that still holds another's.
    ::rmdir(f.job_folder.c_str());
  }
  return removed;
}

std::vector<std::string> remove_noted_offload_folders(const std::string& notes,
                                                      const std::string& job, bool keep_notes) {
  std::vector<std::string> removed;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(notes, ec), end; !ec && it != end; it.increment(ec)) {
    std::ifstream note(it->path());
    for (std::string line; std::getline(note, line);) {
      const std::filesystem::path folder(line);
      // Only this job's own folders: a note names nothing else, whatever else it says.
      const std::string name = folder.filename().string();
      const bool ours = job.empty() ? name.rfind("zt-", 0) == 0 && name.size() > 3
                                    : name == "zt-" + job;
      if (!ours || !std::filesystem::exists(folder, ec)) continue;
      std::filesystem::remove_all(folder, ec);
      if (!ec && std::find(removed.begin(), removed.end(), line) == removed.end())
        removed.push_back(line);
    }
  }
  if (!keep_notes) std::filesystem::remove_all(notes, ec);
  return removed;
}

}  // namespace zt
