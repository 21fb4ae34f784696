// trainer tune on a job whose best composition is known by construction: an MLP of 8.4M
// parameters on 2 ranks under launch.memory_limit_gb = 0.8, where stage 0 (16 bytes a parameter
// per rank) does not fit with tune's 10% margin and stages 1-3 do without offload, which can then
// only add traffic. Tune must never start a composition that does not fit, must pick one of
// stages 1-3 without offload, must go on past a trial that fails (a --candidate whose NVMe folder
// is a regular file: its tier cannot be created) and must end within its budget. Its tuned.toml
// must train, and its report must draw in a browser. A --candidate with another learning rate
// changes the math: its losses leave the reference's and it is rejected. A rank of the reference
// run killed under --max-restarts 1 starts it again, and the tune goes on.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <string>

#include "../skip.h"
#include "../test_util.h"

using zt::test::contains;
using zt::test::run_command;
using zt::test::TempDir;

namespace {

std::string mlp_job() {
  return std::string(" --config ") + ZT_TEST_SOURCE_DIR +
         "/configs/zero3.toml --set model.kind='\"mlp\"' --set model.width=1024 --set "
         "model.depth=8 --set data.kind='\"synthetic\"' --set launch.memory_limit_gb=0.8";
}

}  // namespace

TEST_CASE("trainer tune: picks a fitting composition, skips what does not fit, survives a crash") {
  ZT_SKIP_WITHOUT_CHROMIUM();  // report.html renders in it
  TempDir dir;
  zt::test::write_file(dir.file("not-a-folder"), "a file where the NVMe tier wants a folder\n");
  // An earlier tune's config in the folder goes once this one holds it: a tune that failed or
  // was stopped left it, read as its own.
  std::filesystem::create_directories(dir.file("tune"));
  zt::test::write_file(dir.file("tune/tune.json"), "{}\n");
  zt::test::write_file(dir.file("tune/tuned.toml"), "# an earlier tune's\n");
  const double budget = 60;
  // Under --max-restarts 1, a rank of the reference run (the newest process whose command line
  // names its folder) is killed once the run has logged a step: the run starts again and
  // tune.json counts it.
  const std::string reference = dir.file("tune/runs/reference");
  const std::string kill_a_reference_rank =
      " 2>&1 & pid=$!; for i in $(seq 2400); do [ -s " + reference +
      "/metrics.jsonl ] && break; sleep 0.1; done; kill -KILL $(pgrep -n -f '[/]" +
      reference.substr(1) + "'); wait $pid";
  const auto t0 = std::chrono::steady_clock::now();
  const auto r = run_command(
      std::string(ZT_TEST_TRAINER) + " tune" + mlp_job() + " --budget 60s --out " +
      dir.file("tune") +
      " --candidate "
      "'zero.stage=1,zero.sub_group_size=65536,zero.gradients_in_tier=true,"
      "plugins.offload_optimizer=\"offload_nvme\",plugin.offload_nvme."
      "path=\"" +
      dir.file("not-a-folder") +
      "/nvme\"' --candidate plugin.optim_hybrid_adam.lr=0.01 --max-restarts 1" +
      kill_a_reference_rank);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  INFO(r.output.substr(r.output.size() > 3000 ? r.output.size() - 3000 : 0));
  REQUIRE(r.exit_code == 0);
  // The budget holds (the last child stops at its end; writing the files takes a moment).
  CHECK(seconds <= budget + 15);
  CHECK(contains(r.output, "verdict: "));
  CHECK(contains(r.output, "tune: removed an earlier tune's results from " + dir.file("tune") +
                               " (tune.json, tuned.toml)"));
  CHECK(zt::test::read_file(dir.file("tune/tuned.toml")).find("an earlier tune's") ==
        std::string::npos);
  CHECK(contains(r.output, "the search goes on"));
  CHECK(contains(r.output, ", restarted once (rank "));
  const nlohmann::json j = nlohmann::json::parse(zt::test::read_file(dir.file("tune/tune.json")));
  CHECK(j["elapsed_s"].get<double>() <= budget + 5);
  CHECK(j["reference_restarts"] == 1);
  int no_fit = 0, failed = 0, raced = 0, math = 0;
  for (const auto& c : j["candidates"]) {
    INFO(c.dump());
    const std::string status = c["status"];
    const bool stage0 = contains(c["composition"].get<std::string>(), "stage 0,");
    // Stage 0 never fits; what does not fit never ran.
    if (stage0) CHECK(status == "does not fit");
    if (status == "does not fit") {
      ++no_fit;
      CHECK_FALSE(c.contains("measured"));
      CHECK(contains(c["reason"].get<std::string>(), "host RAM: needs"));
    }
    if (status == "failed") {
      ++failed;
      CHECK(c["origin"] == "--candidate");
      CHECK(contains(c["reason"].get<std::string>(), "exited"));
    }
    if (status == "changes the math") {
      ++math;
      CHECK(contains(c["composition"].get<std::string>(), "stage 3"));
      CHECK(contains(c["reason"].get<std::string>(), "the config you gave trains"));
    }
    if (c.contains("measured")) {
      ++raced;
      CHECK(c["measured"]["restarts"] == 0);
    }
  }
  CHECK(no_fit >= 3);
  CHECK(failed == 1);
  CHECK(math == 1);  // the --candidate with another learning rate
  CHECK(raced >= 3);
  if (j["final_ab"].contains("a_restarts")) {
    CHECK(j["final_ab"]["a_restarts"] == 0);
    CHECK(j["final_ab"]["b_restarts"] == 0);
  }
  // The winner: stages 1-3 without offload.
  const auto& winner = j["candidates"][j["winner"].get<size_t>()];
  INFO(winner.dump());
  CHECK(winner["status"] == "winner");
  const std::string label = winner["composition"];
  CHECK_FALSE(contains(label, "stage 0,"));
  CHECK(contains(label, "no offload"));
  CHECK(contains(j["verdict"].get<std::string>(), label));
  // tuned.toml is a complete config that trains.
  const std::string tuned = zt::test::read_file(dir.file("tune/tuned.toml"));
  CHECK(contains(tuned, "# Tuned by trainer tune: "));
  const auto run = run_command(std::string(ZT_TEST_TRAINER) + " --config " +
                               dir.file("tune/tuned.toml") +
                               " --set run.steps=2 --set run.out_dir=" + dir.file("tuned-run"));
  INFO(run.output);
  CHECK(run.exit_code == 0);
  // report.html draws its race chart in a real browser, no script failing.
  const auto dom = run_command("(timeout 120 chromium --headless --no-sandbox --disable-gpu "
                               "--dump-dom file://" +
                               dir.file("tune/report.html") + " 2>/dev/null)");
  REQUIRE(dom.exit_code == 0);
  CHECK(contains(dom.output, "data-charts-drawn=\"1/1\""));
  CHECK(contains(dom.output, "data-script-errors=\"0\""));
}

TEST_CASE(
    "trainer tune: a config that does not fit, and bad flags, are refused before anything runs") {
  TempDir dir;
  const auto r = run_command(std::string(ZT_TEST_TRAINER) + " tune" + mlp_job() +
                             " --set zero.stage=0 --budget 30s --out " + dir.file("tune"));
  CHECK(r.exit_code == 2);
  CHECK(contains(r.output, "the config as given does not fit this host"));
  CHECK(contains(r.output, "trainer estimate shows which compositions fit"));
  CHECK_FALSE(std::filesystem::exists(dir.file("tune/runs")));
  const auto hosts = run_command(std::string(ZT_TEST_TRAINER) + " tune" + mlp_job() +
                                 " --hosts 2 --out " + dir.file("tune"));
  CHECK(hosts.exit_code == 2);
  CHECK(contains(hosts.output, "without --launcher, trainer tune starts its trials' ranks on "
                               "this host"));
  CHECK(contains(hosts.output, "--launcher srun"));
  // The smoke task trains nothing: nothing to size.
  const auto smoke = run_command(std::string(ZT_TEST_TRAINER) +
                                 " estimate --config " ZT_TEST_SOURCE_DIR "/configs/smoke.toml");
  CHECK(smoke.exit_code == 2);
  CHECK(contains(smoke.output, "smoke.toml:5:8: run.task = \"smoke\" trains nothing"));
}
