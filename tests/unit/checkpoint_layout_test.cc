// Checkpoint folders under checkpoint.dir: names, which folder is the latest, what a killed save
// leaves and how the next start cleans it.
#include <doctest/doctest.h>

#include <algorithm>
#include <cerrno>
#include <chrono>

#include <unistd.h>

#include "../test_util.h"
#include "checkpoint/checkpoint_layout.h"
#include "checkpoint_test_util.h"
#include "util/posix_file.h"
#include "zt/error.h"
#include "zt/host/checkpoint.h"

namespace fs = std::filesystem;

TEST_CASE("checkpoint names: step folders, temporary folders, rank files") {
  CHECK(zt::ckpt::step_folder_name(12) == "step-00000012");
  CHECK(zt::ckpt::step_folder_name(123456789) == "step-123456789");
  CHECK(zt::ckpt::parse_step_folder("step-00000012") == 12);
  CHECK(zt::ckpt::parse_step_folder(zt::ckpt::step_folder_name(123456789)) == 123456789);
  CHECK(zt::ckpt::parse_step_folder("step-") == -1);
  CHECK(zt::ckpt::parse_step_folder("step-12a") == -1);
  CHECK(zt::ckpt::parse_step_folder(".tmp-step-00000012-x") == -1);
  CHECK(zt::ckpt::temp_folder_name(12, "job/1 a") == ".tmp-step-00000012-job_1_a");
  CHECK(zt::ckpt::temp_folder_name(3, "") == ".tmp-step-00000003-job");
  CHECK(zt::ckpt::rank_file_name(2, 16) == "rank-00002-of-00016.safetensors");
}

TEST_CASE("latest_checkpoint: `latest` first, else the highest complete step, never a part") {
  zt::test::TempDir dir;
  const std::string d = dir.path().string();
  CHECK(zt::latest_checkpoint(dir.file("missing")).empty());
  CHECK(zt::latest_checkpoint(d).empty());
  zt::test::save_steps(zt::test::options_for(dir.path(), false, 0), 1, {2, 4});
  CHECK(zt::latest_checkpoint(d) == dir.file("step-00000004"));

  // What a save killed at various moments leaves: a temporary folder, a step folder whose
  // manifest crc32 never landed, a half-replaced `latest`.
  fs::create_directories(dir.path() / ".tmp-step-00000006-test-job");
  zt::test::write_file(dir.path() / ".tmp-step-00000006-test-job" / "manifest.json", "{}");
  fs::create_directories(dir.path() / "step-00000007");
  zt::test::write_file(dir.path() / "step-00000007" / "manifest.json", "{}");
  zt::test::write_file(dir.path() / "latest.tmp-999", "step-0000");
  CHECK(zt::latest_checkpoint(d) == dir.file("step-00000004"));

  // `latest` may name an older one (a run resumed from it and saved since).
  zt::test::write_file(dir.path() / "latest", "step-00000002\n");
  CHECK(zt::latest_checkpoint(d) == dir.file("step-00000002"));
  // A `latest` naming something gone or foreign falls back to the highest complete step.
  zt::test::write_file(dir.path() / "latest", "step-00000003\n");
  CHECK(zt::latest_checkpoint(d) == dir.file("step-00000004"));
  zt::test::write_file(dir.path() / "latest", "../../etc\n");
  CHECK(zt::latest_checkpoint(d) == dir.file("step-00000004"));

  CHECK(zt::resolve_checkpoint(d) == dir.file("step-00000004"));
  CHECK(zt::resolve_checkpoint(dir.file("step-00000002")) == dir.file("step-00000002"));

  auto removed = zt::remove_incomplete_checkpoints(d);
  // A step folder without its crc32 is one a prune's removal left half done (a publish renames
  // only complete folders): nothing would ever take it again.
  CHECK(removed == std::vector<std::string>{dir.file(".tmp-step-00000006-test-job"),
                                            dir.file("latest.tmp-999"), dir.file("step-00000007")});
  CHECK(!fs::exists(dir.path() / ".tmp-step-00000006-test-job"));
  CHECK(!fs::exists(dir.path() / "latest.tmp-999"));
  CHECK(!fs::exists(dir.path() / "step-00000007"));
  CHECK(zt::test::complete_steps(dir.path()) == std::vector<int64_t>{2, 4});
  CHECK(zt::remove_incomplete_checkpoints(dir.file("missing")).empty());
}

namespace {

std::vector<std::string> pointer_files(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("latest.tmp-", 0) == 0) names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace

TEST_CASE("a damaged checkpoint's way out names the newest complete one before it") {
  zt::test::TempDir dir;
  zt::test::save_steps(zt::test::options_for(dir.path(), false, 0), 1, {2, 4, 6});
  // A step-5 folder whose save never finished is no way out.
  fs::create_directories(dir.path() / "step-00000005");
  zt::test::write_file(dir.path() / "step-00000005" / "manifest.json", "{}");
  CHECK(zt::ckpt::older_checkpoint_hint(dir.file("step-00000006")) ==
        "resume from an older checkpoint: " + dir.file("step-00000004") +
            " is the newest before it");
  CHECK(zt::ckpt::older_checkpoint_hint(dir.file("step-00000006") + "/") ==
        "resume from an older checkpoint: " + dir.file("step-00000004") +
            " is the newest before it");
  CHECK(zt::ckpt::older_checkpoint_hint(dir.file("step-00000002")) ==
        "resume from an older checkpoint (none is left beside it in " + dir.path().string() + ")");
  CHECK(zt::ckpt::older_checkpoint_hint(dir.file("exported")) == "resume from an older checkpoint");
}

TEST_CASE("latest_checkpoint: a folder that cannot be read is an error, not \"no checkpoint\"") {
  // A file-system error (here a link to itself: ELOOP; on a cluster EACCES, ESTALE, EIO) read
  // as "none" started `--resume auto` over from step 0.
  zt::test::TempDir dir;
  fs::create_symlink("loop", dir.path() / "loop");
  CHECK_THROWS_WITH_AS(zt::latest_checkpoint(dir.file("loop")),
                       doctest::Contains(("cannot read " + dir.file("loop")).c_str()), zt::IoError);
  CHECK_THROWS_WITH_AS(zt::latest_checkpoint(dir.file("loop")),
                       doctest::Contains("check that file system"), zt::IoError);
  // Absent is still "none": a fresh start.
  CHECK(zt::latest_checkpoint(dir.file("missing/deeper")).empty());
}

TEST_CASE("a save killed between its folder rename and `latest`: that folder is the latest") {
  zt::test::TempDir dir;
  const std::string d = dir.path().string();
  zt::test::save_steps(zt::test::options_for(dir.path(), false, 0), 1, {2, 4, 6});
  CHECK(pointer_files(dir.path()).empty());  // a whole publish commits its pending `latest`
  CHECK(zt::test::read_file(dir.path() / "latest") == "step-00000006\n");

  // The kill: step-6 renamed into place, its pending `latest` written, `latest` not yet replaced.
  zt::test::write_file(dir.path() / "latest", "step-00000004\n");
  zt::test::write_file(dir.path() / "latest.tmp-4242", "step-00000006\n");
  // Pointers that name no complete folder, or were cut short, name nothing.
  zt::test::write_file(dir.path() / "latest.tmp-4343", "step-00000008\n");
  zt::test::write_file(dir.path() / "latest.tmp-4444", "step-0000000");
  CHECK(zt::latest_checkpoint(d) == dir.file("step-00000006"));
  CHECK(zt::resolve_checkpoint(d) == dir.file("step-00000006"));

  CHECK(zt::finish_interrupted_publish(d) == dir.file("step-00000006"));
  CHECK(zt::test::read_file(dir.path() / "latest") == "step-00000006\n");
  CHECK(pointer_files(dir.path()) ==
        std::vector<std::string>{"latest.tmp-4343", "latest.tmp-4444"});
  CHECK(zt::finish_interrupted_publish(d).empty());  // nothing pending any more
  CHECK(zt::remove_incomplete_checkpoints(d) ==
        std::vector<std::string>{dir.file("latest.tmp-4343"), dir.file("latest.tmp-4444")});
  CHECK(zt::latest_checkpoint(d) == dir.file("step-00000006"));

  // Without a pending pointer an older `latest` still wins (a run resumed from it saved since).
  zt::test::write_file(dir.path() / "latest", "step-00000004\n");
  CHECK(zt::latest_checkpoint(d) == dir.file("step-00000004"));
}

TEST_CASE("removing a killed save's leftovers finishes its interrupted publish, never drops it") {
  zt::test::TempDir dir;
  const std::string d = dir.path().string();
  zt::test::save_steps(zt::test::options_for(dir.path(), true, 0), 1, {2, 4});
  zt::test::write_file(dir.path() / "latest", "step-00000002\n");
  zt::test::write_file(dir.path() / "latest.tmp-77", "step-00000004\n");
  CHECK(zt::remove_incomplete_checkpoints(d).empty());
  CHECK(zt::test::read_file(dir.path() / "latest") == "step-00000004\n");
  CHECK(pointer_files(dir.path()).empty());
}

TEST_CASE("a pending `latest` older than the committed one is a dead process's, never the latest") {
  zt::test::TempDir dir;
  const std::string d = dir.path().string();
  zt::test::save_steps(zt::test::options_for(dir.path(), false, 0), 1, {2, 4, 6});
  // A process killed before committing step-6's pointer, long ago; a later run resumed from
  // step-2 and committed step-4 since (a Python engine does not clean up when it starts).
  zt::test::write_file(dir.path() / "latest.tmp-31", "step-00000006\n");
  zt::test::write_file(dir.path() / "latest", "step-00000004\n");
  const auto now = fs::last_write_time(dir.path() / "latest");
  fs::last_write_time(dir.path() / "latest.tmp-31", now - std::chrono::seconds(60));
  CHECK(zt::latest_checkpoint(d) == dir.file("step-00000004"));
  CHECK(zt::finish_interrupted_publish(d).empty());
  CHECK(zt::remove_incomplete_checkpoints(d) ==
        std::vector<std::string>{dir.file("latest.tmp-31")});
  CHECK(zt::test::read_file(dir.path() / "latest") == "step-00000004\n");

  // Written after `latest` (the kill between a publish's rename and its commit): it wins.
  zt::test::write_file(dir.path() / "latest.tmp-32", "step-00000006\n");
  fs::last_write_time(dir.path() / "latest.tmp-32", now + std::chrono::seconds(1));
  CHECK(zt::latest_checkpoint(d) == dir.file("step-00000006"));
  // The same time (a file system with a coarse clock): the higher step wins.
  fs::last_write_time(dir.path() / "latest.tmp-32", now);
  CHECK(zt::latest_checkpoint(d) == dir.file("step-00000006"));
  zt::test::write_file(dir.path() / "latest.tmp-32", "step-00000002\n");
  fs::last_write_time(dir.path() / "latest.tmp-32", now);
  CHECK(zt::latest_checkpoint(d) == dir.file("step-00000004"));
}

TEST_CASE(
    "publishing a step whose folder exists swaps the two: a complete one is there throughout") {
  zt::test::TempDir dir;
  const std::string d = dir.path().string();
  zt::test::save_steps(zt::test::options_for(dir.path(), false, 0), 1, {2, 4});
  const fs::path old_step = dir.path() / "step-00000004";
  zt::test::write_file(old_step / "old-marker", "old");
  // A new step-4, finished in its temporary folder (a copy of a complete one, marked).
  const fs::path temp = dir.path() / ".tmp-step-00000004-job";
  fs::copy(dir.path() / "step-00000002", temp, fs::copy_options::recursive);
  zt::test::write_file(temp / "new-marker", "new");
  zt::ckpt::publish_checkpoint(d, temp.string(), "step-00000004");
  CHECK(fs::exists(old_step / "new-marker"));
  CHECK_FALSE(fs::exists(old_step / "old-marker"));
  CHECK_FALSE(fs::exists(temp));  // the old one, swapped there, is removed
  CHECK(zt::ckpt::is_complete_checkpoint(old_step.string()));
  CHECK(zt::test::read_file(dir.path() / "latest") == "step-00000004\n");
  CHECK(pointer_files(dir.path()).empty());
}

TEST_CASE("publishing over a step's folder without a swap moves the old one aside: one survives") {
  zt::test::TempDir dir;
  const std::string d = dir.path().string();
  zt::test::save_steps(zt::test::options_for(dir.path(), false, 0), 1, {2, 4});
  const fs::path step = dir.path() / "step-00000004";
  const fs::path aside = dir.path() / ".old-step-00000004";
  const auto new_step_4 = [&] {
    const fs::path temp = dir.path() / ".tmp-step-00000004-job";
    fs::copy(dir.path() / "step-00000002", temp, fs::copy_options::recursive);
    zt::test::write_file(temp / "new-marker", "new");
    return temp;
  };
  zt::test::write_file(step / "old-marker", "old");

  // The whole publish (NFS's way): the new folder in place, the old one gone.
  fs::path temp = new_step_4();
  zt::ckpt::publish_by_moving_aside(d, temp.string(), "step-00000004");
  CHECK(fs::exists(step / "new-marker"));
  CHECK_FALSE(fs::exists(aside));
  CHECK_FALSE(fs::exists(temp));
  CHECK(zt::test::read_file(dir.path() / "latest") == "step-00000004\n");

  // The pending `latest` cannot be written (a full disk, a used-up quota; here a folder in its
  // place): the old folder is put back, complete, and nothing is left aside.
  zt::test::write_file(step / "old-marker", "old");
  const fs::path blocked = dir.path() / ("latest.tmp-" + std::to_string(::getpid()));
  fs::create_directories(blocked / "in-the-way");
  temp = new_step_4();
  CHECK_THROWS_AS(zt::ckpt::publish_by_moving_aside(d, temp.string(), "step-00000004"),
                  zt::IoError);
  CHECK(fs::exists(step / "old-marker"));
  CHECK(zt::ckpt::is_complete_checkpoint(step.string()));
  CHECK_FALSE(fs::exists(aside));
  CHECK(fs::exists(temp));  // the caller's to remove
  fs::remove_all(blocked);
  fs::remove_all(temp);
  fs::remove(step / "old-marker");

  // Killed between its two renames: the old folder aside, the new one still temporary, its
  // `latest` pending. The next start puts the old one back (removing it first lost both).
  fs::rename(step, aside);
  temp = new_step_4();
  zt::test::write_file(dir.path() / "latest.tmp-55", "step-00000004\n");
  const auto removed = zt::remove_incomplete_checkpoints(d);
  CHECK(std::find(removed.begin(), removed.end(), temp.string()) != removed.end());
  CHECK(zt::ckpt::is_complete_checkpoint(step.string()));
  CHECK(fs::exists(step / "new-marker"));  // the folder that was aside: the first publish's
  CHECK_FALSE(fs::exists(aside));
  CHECK(zt::latest_checkpoint(d) == step.string());

  // Killed after the new one took its name, before the old one went: the old one is removed.
  fs::copy(step, aside, fs::copy_options::recursive);
  CHECK(zt::remove_incomplete_checkpoints(d) == std::vector<std::string>{aside.string()});
  CHECK(zt::test::complete_steps(dir.path()) == std::vector<int64_t>{2, 4});

  // One whose removal failed after a whole publish, its step pruned since: no save of that step
  // was cut short (no temporary folder), so it is removed, not brought back. Other names that
  // start alike are not folders a publish moved aside, and stay.
  fs::copy(step, aside, fs::copy_options::recursive);
  fs::remove_all(step);
  zt::test::write_file(dir.path() / ".old-latest", "step-00000002\n");
  CHECK(zt::remove_incomplete_checkpoints(d) == std::vector<std::string>{aside.string()});
  CHECK(zt::test::complete_steps(dir.path()) == std::vector<int64_t>{2});
  CHECK(fs::exists(dir.path() / ".old-latest"));
}

TEST_CASE("pruning a step folder that is a link removes the link, never what is in its target") {
  zt::test::TempDir other, dir;
  // Another run's checkpoint, linked in as this folder's first step (to resume from it).
  zt::test::save_steps(zt::test::options_for(other.path(), false, 0), 1, {1});
  zt::test::save_steps(zt::test::options_for(dir.path(), false, 0), 1, {2, 3});
  const fs::path target = other.path() / "step-00000001";
  REQUIRE(zt::ckpt::is_complete_checkpoint(target.string()));
  fs::create_directory_symlink(target, dir.path() / "step-00000001");
  const auto removed = zt::ckpt::prune_checkpoints(dir.path().string(), 1,
                                                   dir.file("step-00000003"), "");
  CHECK(std::count(removed.begin(), removed.end(), dir.file("step-00000001")) == 1);
  CHECK_FALSE(fs::exists(fs::symlink_status(dir.path() / "step-00000001")));
  // The other run's checkpoint is whole: its crc32 file was not removed through the link.
  CHECK(zt::ckpt::is_complete_checkpoint(target.string()));
  CHECK(zt::latest_checkpoint(other.path().string()) == other.file("step-00000001"));
}

TEST_CASE("a failed write's way out: a full disk and a used-up quota ask for room or elsewhere") {
  CHECK(zt::ckpt::write_way_out(ENOSPC, "point checkpoint.dir elsewhere") ==
        "; the disk is full: free space or point checkpoint.dir elsewhere");
  // statvfs's free space does not show a quota, so the check before a save passes and the
  // write fails with EDQUOT: the same advice, not "check the storage".
  CHECK(zt::ckpt::write_way_out(EDQUOT, "write elsewhere") ==
        "; the disk quota is used up: free space under it or write elsewhere");
  CHECK(zt::ckpt::write_way_out(EIO, "write elsewhere") == "; check the storage");
}

TEST_CASE("a checkpoint.dir that cannot be made is said with its own reason, not the lock's") {
  // A file where the folder's parent should be: "Not a directory", where the lock file's open
  // said only "No such file or directory".
  zt::test::TempDir dir;
  zt::test::write_file(dir.file("file"), "x");
  const std::string wanted = dir.file("file") + "/checkpoints";
  const std::string e = zt::test::error_of<zt::IoError>(
      [&] { zt::CheckpointDirLock lock(wanted); });
  CHECK(zt::test::contains(e, "cannot create the folder " + wanted + " (Not a directory)"));
  CHECK(zt::test::contains(e, "give a folder this job can write (checkpoint.dir"));
}
