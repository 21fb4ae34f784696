// The memory-fit check against what real ranks use: a job the check accepts does not run out of
// memory (its estimate bounds every rank's measured peak RSS, and not loosely), and one it
// refuses would have (a host limit below what the ranks measured is refused before any rank
// starts). Stage 3 on 2 ranks with offload_nvme, tiles large enough that the staging buffers
// matter; and bytes sent to files do not count against the host's limit.
#include <doctest/doctest.h>

#include <cstdio>
#include <regex>

#include "../test_util.h"
#include "small_gpt_job.h"

using zt::test::contains;
using zt::test::run_command;
using zt::test::TempDir;

namespace {

// A GPT of 4 blocks of d_model 512 (12.8M parameters): its tensors are above
// param_persistence_threshold, so stage 3 gathers and releases them, and a rank's shard of a
// block (1.6M elements) is streamed in tiles of sub_group_size = 1M elements: 3 buffer sets of
// 3 fp32 arrays, 36 MiB, next to a process of ~180 MiB. offload_nvme's bounce buffers are
// counted whole though the engine's aligned tiles never touch them: one of 4 MiB here.
std::string fit_job(const TempDir& dir, const std::string& extra) {
  return zt::test::small_gpt_job(
      dir.file("out"),
      "--set run.steps=3 --set model.n_layer=4 --set model.d_model=512 --set model.n_head=8 "
      "--set model.seq_len=64 --set data.micro_batch=2 --set zero.sub_group_size=1000000 "
      "--set plugin.offload_nvme.buffer_count=1 --set plugin.offload_nvme.buffer_mb=4 "
      "--set plugin.offload_nvme.path=" +
          dir.file("nvme") + " " + extra);
}

// The host RAM a refusal says the job needs per rank ("2 rank(s) x N bytes"); -1 when absent.
int64_t refused_per_rank(const std::string& output) {
  std::smatch m;
  if (!std::regex_search(output, m,
                         std::regex("host RAM: needs [^(]*\\(2 rank\\(s\\) x (\\d+) bytes")))
    return -1;
  return std::stoll(m[1]);
}

std::string limit_gb(double bytes) {
  char text[64];
  std::snprintf(text, sizeof(text), " --set launch.memory_limit_gb=%.6f", bytes / (1 << 30));
  return text;
}

// "memory fit: host RAM per rank N bytes ..." as the first rank printed it; -1 when absent.
int64_t estimate_per_rank(const std::string& output) {
  std::smatch m;
  if (!std::regex_search(output, m, std::regex("memory fit: host RAM per rank (\\d+) bytes")))
    return -1;
  return std::stoll(m[1]);
}

// Every rank's peak RSS at the last step of metrics.jsonl.
std::vector<int64_t> peak_rss(const std::string& metrics) {
  const std::string text = zt::test::read_file(metrics);
  const std::string last = text.substr(text.rfind("{\"step\""));
  std::vector<int64_t> out;
  const std::regex field("\"peak_rss\":(\\d+)");
  for (auto it = std::sregex_iterator(last.begin(), last.end(), field);
       it != std::sregex_iterator(); ++it) {
    out.push_back(std::stoll((*it)[1]));
  }
  return out;
}

// Runs the job and checks the estimate against each rank's peak: at least as large, and within
// 1.5x (the process baseline is rounded up and the tiers' bounce buffers are counted whole,
// though aligned tiles never touch them) plus 86 MiB: the check counts a process of 192 MiB,
// and the ranks trainer --nproc forks from one start measure 106 (memory_fit.h). Returns the
// ranks' peaks.
std::vector<int64_t> check_bound(const std::string& extra) {
  TempDir dir;
  const auto r = run_command(fit_job(dir, extra));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  const int64_t estimate = estimate_per_rank(r.output);
  const std::vector<int64_t> peaks = peak_rss(dir.file("out") + "/metrics.jsonl");
  REQUIRE(estimate > 0);
  REQUIRE(peaks.size() == 2);
  MESSAGE("host RAM per rank: estimate " << estimate << " bytes, peak RSS " << peaks[0] << " and "
                                         << peaks[1] << " bytes");
  for (int64_t peak : peaks) {
    CHECK(estimate >= peak);
    CHECK(static_cast<double>(estimate) <= 1.5 * static_cast<double>(peak) + (86 << 20));
  }
  return peaks;
}

}  // namespace

TEST_CASE("memory fit: the estimate bounds each rank's peak RSS, states on NVMe, no pipelining") {
  check_bound("--set plugins.offload_optimizer=offload_nvme --set zero.pipeline_read=false "
              "--set zero.pipeline_write=false");
}

TEST_CASE("memory fit: parameters and states on NVMe: bounded, and a limit below use is refused") {
  const std::string offload =
      "--set plugins.offload_optimizer=offload_nvme --set plugins.offload_param=offload_nvme ";
  const std::vector<int64_t> peaks = check_bound(offload);
  // Below what the two ranks together used at their peaks: this job would not have fit.
  TempDir dir;
  const auto r = run_command(fit_job(dir, offload + limit_gb(0.95 * (peaks[0] + peaks[1]))));
  INFO(r.output);
  CHECK(r.exit_code == 2);
  CHECK(contains(r.output, "the job does not fit this host"));
  CHECK(contains(r.output, "host RAM: needs "));
  CHECK(contains(r.output, "of launch.memory_limit_gb (--set launch.memory_limit_gb="));
  CHECK(contains(r.output, "lower zero.sub_group_size (--set zero.sub_group_size=1000000)"));
  CHECK(contains(r.output, "disk " + dir.file("nvme") + " (offload_nvme): needs "));
  // Refused by the launcher: no rank started, nothing trained, no offload folder made.
  CHECK_FALSE(contains(r.output, "[rank "));
  CHECK_FALSE(std::filesystem::exists(dir.file("out") + "/metrics.jsonl"));
  CHECK_FALSE(std::filesystem::exists(dir.file("nvme")));
}

TEST_CASE("memory fit: bytes sent to files do not count against the host memory limit") {
  // Small tiles, so moving the master and Adam states to files saves far more host memory than
  // their streaming buffers cost.
  TempDir dir;
  const std::string small_tiles = "--set zero.sub_group_size=65536 ";
  const std::string files = "--set plugins.offload_optimizer=offload_nvme ";
  // A limit of 1 MiB refuses both at once; the refusals say what each needs.
  const auto plain = run_command(fit_job(dir, small_tiles + limit_gb(1 << 20)));
  const auto offloaded = run_command(fit_job(dir, small_tiles + files + limit_gb(1 << 20)));
  INFO(plain.output);
  INFO(offloaded.output);
  REQUIRE(plain.exit_code == 2);
  REQUIRE(offloaded.exit_code == 2);
  const int64_t in_memory = refused_per_rank(plain.output);
  const int64_t in_files = refused_per_rank(offloaded.output);
  REQUIRE(in_files > 0);
  // The Adam states, 8 bytes per element of a rank's 6,387,200, leave host memory; the tile sets
  // and the bounce buffer that stream them cost less than 8 MiB.
  CHECK(in_memory - in_files > 8 * 6387200 - 8 * (1 << 20));
  // A limit between the two: the job in memory is refused, the one with files runs.
  const std::string between = limit_gb(static_cast<double>(in_memory + in_files));
  const auto refused = run_command(fit_job(dir, small_tiles + between));
  CHECK(refused.exit_code == 2);
  CHECK(contains(refused.output, "offload to files: plugins.offload_optimizer (default)"));
  const auto runs = run_command(fit_job(dir, small_tiles + files + between));
  INFO(runs.output);
  CHECK(runs.exit_code == 0);
}
