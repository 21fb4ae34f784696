// The ranks' offload notes (zt/host/compose.h): what a launcher that cannot read its ranks'
// configs removes after they ended, and nothing else.
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "../test_util.h"
#include "zt/host/compose.h"

namespace fs = std::filesystem;
using zt::test::TempDir;
using zt::test::write_file;

TEST_CASE("offload notes: a job's noted folders go, and so does the notes folder") {
  TempDir dir;
  const std::string notes = zt::make_offload_notes_folder();
  REQUIRE_FALSE(notes.empty());
  fs::create_directories(dir.file("nvme/zt-job7/rank0"));
  fs::create_directories(dir.file("nvme/zt-job8/rank0"));
  fs::create_directories(dir.file("data"));
  write_file(notes + "/rank-0-a", dir.file("nvme/zt-job7") + "\n");
  write_file(notes + "/rank-1-a", dir.file("nvme/zt-job8") + "\n");
  write_file(notes + "/rank-1-b", dir.file("data") + "\n");  // not a tier's folder: kept
  const std::vector<std::string> removed = zt::remove_noted_offload_folders(notes, "job7");
  CHECK(removed == std::vector<std::string>{dir.file("nvme/zt-job7")});
  CHECK(fs::exists(dir.file("nvme/zt-job8")));  // another job's, named in this one's notes
  CHECK_FALSE(fs::exists(notes));
}

TEST_CASE("offload notes: without a job id, every noted zt-<job> folder of the notes goes") {
  // trainer tune and ab start a trainer that draws its own job id: its notes folder is that
  // run's alone, so every tier folder noted there is the run's.
  TempDir dir;
  const std::string notes = zt::make_offload_notes_folder();
  REQUIRE_FALSE(notes.empty());
  fs::create_directories(dir.file("nvme/zt-drawn1/rank0"));
  fs::create_directories(dir.file("nvme/zt-"));
  fs::create_directories(dir.file("data"));
  write_file(notes + "/rank-0-a", dir.file("nvme/zt-drawn1") + "\n");
  write_file(notes + "/rank-0-b", dir.file("nvme/zt-") + "\n");
  write_file(notes + "/rank-0-c", dir.file("data") + "\n");
  const std::vector<std::string> removed = zt::remove_noted_offload_folders(notes, "");
  CHECK(removed == std::vector<std::string>{dir.file("nvme/zt-drawn1")});
  CHECK(fs::exists(dir.file("nvme/zt-")));
  CHECK(fs::exists(dir.file("data")));
  CHECK_FALSE(fs::exists(notes));
}
