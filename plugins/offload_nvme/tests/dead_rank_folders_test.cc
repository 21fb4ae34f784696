// A rank killed outright leaves its offload folder (no destructor ran), and where no zt launcher
// started it (torchrun, srun) nobody else removes it: the next tier started on the same path
// does, and only that one. Folders of a live tier, of another machine sharing the path, and
// without an owner file stay, byte for byte.
#include <doctest/doctest.h>
#include "nvme_test_support.h"

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "zt/file_lock.h"

namespace fs = std::filesystem;
using zt::ExclusiveFileLock;
using zt::nvme_test::files_in;
using zt::nvme_test::make_tier;
using zt::nvme_test::region_files_in;
using zt::nvme_test::StderrCapture;
using zt::test::contains;
using zt::test::TempDir;

namespace {

constexpr const char* kOwner = ".zt-owner";  // the plugin's README names it

// A rank folder with one 1 MiB region-like file, as a tier leaves it mid-training.
void make_rank_folder(const fs::path& rank) {
  fs::create_directories(rank);
  std::ofstream(rank / "fp32_master-1.bin", std::ios::binary) << std::string(1 << 20, 'x');
}

// A child process claims `rank` as a tier does (its owner file locked, itself recorded) and is
// then killed outright, as the OOM killer or a launcher's SIGKILL would. Returns its pid.
pid_t claim_then_die(const fs::path& rank) {
  make_rank_folder(rank);
  const pid_t child = ::fork();
  if (child == 0) {
    const ExclusiveFileLock owner((rank / kOwner).string());
    owner.record_holder();
    ::raise(SIGKILL);
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  REQUIRE((WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL));
  return child;
}

// What write_record writes; each field as a tier records itself unless set otherwise.
struct Record {
  pid_t pid = ::getpid();
  std::string boot = zt::this_boot_id();
  std::string file_id;  // "" = the owner file's own device and inode
  std::string start;    // "" = no start time recorded
};

// An owner file in `rank` recorded as `record` says, not locked.
void write_record(const fs::path& rank, const Record& record) {
  const fs::path owner = rank / kOwner;
  std::ofstream(owner).flush();
  struct stat st {};
  REQUIRE(::stat(owner.c_str(), &st) == 0);
  char host[256] = "?";
  ::gethostname(host, sizeof host - 1);
  std::ofstream out(owner);
  out << "pid " << record.pid << " on " << host << "\nboot " << record.boot << "\nfile "
      << (record.file_id.empty() ? std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino)
                                 : record.file_id)
      << "\n";
  if (!record.start.empty()) out << "start " << record.start << "\n";
}

}  // namespace

TEST_CASE("the next tier on a path removes the folders of ranks killed outright, and only those") {
  TempDir dir;
  const fs::path path = dir.path();
  const pid_t dead = claim_then_die(path / "zt-killedjob" / "rank1");
  // The same job id and rank as the new tier below (a restart): its name is free again.
  claim_then_die(path / "zt-newjob" / "rank0");
  // A live tier's (this process holds its lock through another open file).
  make_rank_folder(path / "zt-livejob" / "rank0");
  const ExclusiveFileLock live((path / "zt-livejob" / "rank0" / kOwner).string());
  REQUIRE(live.held());
  live.record_holder();
  // Another machine's on a shared file system (another kernel's record, whole otherwise, its
  // pid gone here): its lock is not seen here, free or not.
  make_rank_folder(path / "zt-elsewhere" / "rank0");
  write_record(path / "zt-elsewhere" / "rank0",
               {dead, "01234567-89ab-cdef-0123-456789abcdef", "", ""});
  // No owner file: a folder in the making, or not a tier's; an owner file without a record: a
  // tier between taking its lock and writing in it.
  make_rank_folder(path / "zt-noowner" / "rank0");
  make_rank_folder(path / "zt-norecord" / "rank0");
  std::ofstream(path / "zt-norecord" / "rank0" / kOwner).flush();
  // Recorded under this kernel, free, but its process runs (a lock NFS lost when a lease ran
  // out): this very process, its record written as a live owner's would be.
  make_rank_folder(path / "zt-lostlock" / "rank0");
  write_record(path / "zt-lostlock" / "rank0", {});
  // Free, this kernel's, its process gone, but recorded as another file: its owner saw another
  // file by this name (through another mount of a remote file system, whose locks are not this
  // mount's).
  make_rank_folder(path / "zt-othermount" / "rank0");
  write_record(path / "zt-othermount" / "rank0", {dead, zt::this_boot_id(), "12345:678", ""});
  // Recorded with a pid this kernel now gives a later process (this one: its start time is not
  // the recorded one), as a restarted container's ranks get their predecessors' pids: dead.
  make_rank_folder(path / "zt-pidreused" / "rank0");
  write_record(path / "zt-pidreused" / "rank0", {::getpid(), zt::this_boot_id(), "", "1"});

  std::string said;
  {
    StderrCapture capture;
    auto tier = make_tier(path.string(), {}, "newjob", 0);
    tier->prepare(4 << 20);
    said = capture.text();
    INFO(said);
    CHECK_FALSE(fs::exists(path / "zt-killedjob"));  // its only rank folder went, and then it
    // Its size: the region and the owner file's record.
    CHECK(contains(said, "removed " + (path / "zt-killedjob" / "rank1").string() + " (10486"));
    CHECK(contains(
        said, " bytes (1.0 MiB)), the offload folder of pid " + std::to_string(dead) + " on "));
    CHECK(contains(said, "which ended without removing it (killed)"));
    CHECK_FALSE(fs::exists(path / "zt-pidreused"));
    CHECK(contains(said, "removed " + (path / "zt-pidreused" / "rank0").string()));
    // The new tier took rank0, not rank0.2: the dead one's folder went first.
    CHECK(contains(tier->describe(), "zt-newjob/rank0 "));
    CHECK(files_in(path / "zt-newjob") == std::vector<std::string>{"rank0"});
    CHECK(region_files_in(path / "zt-newjob" / "rank0").empty());
    // Its own folder: claimed, with this process recorded under this kernel.
    const ExclusiveFileLock looking((path / "zt-newjob" / "rank0" / kOwner).string(),
                                    ExclusiveFileLock::IfMissing::fail);
    CHECK(looking.state() == ExclusiveFileLock::State::busy);
    CHECK(looking.holder().rfind("pid " + std::to_string(::getpid()) + " on ", 0) == 0);
    CHECK(zt::read_lock_holder(looking.path()).boot_id == zt::this_boot_id());
  }
  CHECK_FALSE(fs::exists(path / "zt-newjob"));  // the tier removed its own, owner file too
  for (const char* kept : {"zt-livejob", "zt-elsewhere", "zt-noowner", "zt-norecord", "zt-lostlock",
                           "zt-othermount"}) {
    CAPTURE(kept);
    CHECK(fs::file_size(path / kept / "rank0" / "fp32_master-1.bin") == (1u << 20));
    CHECK_FALSE(contains(said, kept));
  }
}

TEST_CASE("a folder whose owner was killed is removed once when several tiers start together") {
  // Every rank of a job on one machine starts its tier at once; each looks at the same dead
  // folder. One removes it; the others neither fail nor say they did.
  TempDir dir, logs;
  claim_then_die(dir.path() / "zt-killedjob" / "rank0");
  std::vector<pid_t> children;
  for (int rank = 0; rank < 4; ++rank) {
    const pid_t child = ::fork();
    if (child == 0) {
      // Each tier's stderr to a file of its own: what each said it removed.
      if (!std::freopen((logs.path() / std::to_string(rank)).c_str(), "w", stderr)) ::_exit(2);
      int code = 1;
      try {
        auto tier = make_tier(dir.path().string(), {}, "together", rank);
        tier->prepare(1 << 20);
        code = 0;
      } catch (...) {
      }
      ::_exit(code);
    }
    children.push_back(child);
  }
  for (const pid_t child : children) {
    int status = 0;
    ::waitpid(child, &status, 0);
    CHECK((WIFEXITED(status) && WEXITSTATUS(status) == 0));
  }
  CHECK(files_in(dir.path()).empty());
  int said = 0;
  for (int rank = 0; rank < 4; ++rank) {
    const std::string log = zt::test::read_file((logs.path() / std::to_string(rank)).string());
    for (size_t at = log.find("offload_nvme: removed "); at != std::string::npos;
         at = log.find("offload_nvme: removed ", at + 1))
      ++said;
  }
  CHECK(said == 1);
}
