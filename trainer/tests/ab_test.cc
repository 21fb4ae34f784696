// The pieces of `trainer ab` and `trainer compare` that need no process: arms and the math
// check, percentiles and the bootstrap interval, metrics files, agreement and the verdict.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <random>
#include <sstream>

#include "../../tests/test_util.h"
#include "ab/ab_arms.h"
#include "ab/ab_html.h"
#include "ab/ab_report.h"
#include "ab/ab_stats.h"
#include "ab/arm_run.h"
#include "ab/live_ab.h"
#include "report/run_metrics.h"
#include "zt/error.h"

using namespace zt::trainer;
using zt::test::contains;

namespace {

// A run whose step i has loss losses[i], step time times[i], and `calls` all_gathers a step.
RunMetrics run_of(const std::vector<double>& losses, const std::vector<double>& times,
                  int64_t calls, int64_t states) {
  RunMetrics run;
  run.path = "synthetic";
  for (size_t i = 0; i < losses.size(); ++i) {
    StepRecord s;
    s.step = static_cast<int64_t>(i) + 1;
    s.loss = losses[i];
    s.grad_norm = 1.0 + static_cast<double>(i);
    s.step_time_s = times[i];
    s.tokens_per_s = 1000 / times[i];
    s.memory = {{{"params", states}, {"peak_rss", 100}}, {{"params", states}, {"peak_rss", 90}}};
    s.comm["all_gather"] = {calls * s.step, calls * s.step * 4096};
    run.steps.push_back(s);
  }
  return run;
}

ArmResult arm_of(const std::string& name, const std::string& label, std::vector<RunMetrics> runs) {
  ArmResult arm;
  arm.arm.name = name;
  arm.label = label;
  arm.runs = std::move(runs);
  return arm;
}

}  // namespace

TEST_CASE("an arm is comma-separated overrides: brackets and quotes keep their commas") {
  const Arm arm = parse_arm(
      "B", "plugins.shard=shard_bucket,plugin.optim_hybrid_adam.betas=[0.9,0.95],run.name=\"a,b\"",
      "--b");
  REQUIRE(arm.overrides.size() == 3);
  CHECK(arm.overrides[0] == "plugins.shard=shard_bucket");
  CHECK(arm.overrides[1] == "plugin.optim_hybrid_adam.betas=[0.9,0.95]");
  CHECK(arm.overrides[2] == "run.name=\"a,b\"");
  CHECK(parse_arm("A", "", "--a").overrides.empty());
  const std::string e = zt::test::error_of<zt::ConfigError>(
      [] { parse_arm("A", "zero.stage=2,oops", "--a"); });
  CHECK(contains(e, "--a"));
  CHECK(contains(e, "'oops' is not section.key=value"));
}

TEST_CASE("differing keys, and which of them change the math") {
  const Arm a = parse_arm("A", "plugins.shard=shard_tensor,zero.stage=3", "--a");
  const Arm b = parse_arm("B", "plugins.shard=shard_bucket,zero.stage=3,zero.prefetch_units=2",
                          "--b");
  CHECK(differing_keys(a, b) == std::vector<std::string>{"plugins.shard", "zero.prefetch_units"});
  const std::vector<std::string> optim = {"optim_hybrid_adam"};
  for (const char* neutral :
       {"plugins.shard", "plugin.shard_bucket.bucket_mb", "zero.stage", "zero.reduce_bucket_mb",
        "zero.offload_optimizer_fraction", "plugins.offload_param", "plugin.offload_nvme.path",
        "plugins.comm", "launch.timeout_s", "run.out_dir", "checkpoint.every_steps"}) {
    CHECK_MESSAGE(!changes_math(neutral, optim), std::string(neutral));
  }
  for (const char* math :
       {"plugin.optim_hybrid_adam.lr", "plugins.optimizer", "zero.gradient_clipping",
        "zero.no_weight_decay", "launch.nproc", "run.seed", "model.n_layer", "data.micro_batch",
        "precision.compute", "run.lr_schedule", "plugins.codec_gradients", "codec.weights.bits",
        "zero.codec_error_feedback", "zero.codec_scope", "zero.gradient_predivide_factor"}) {
    CHECK_MESSAGE(changes_math(math, optim), std::string(math));
  }
  // With a codec, the layout moves which collectives are coded and where the blocks start;
  // where bytes are kept and when they travel still do not change the numbers.
  for (const char* layout : {"plugins.shard", "plugin.shard_bucket.bucket_mb", "zero.stage",
                             "zero.mics_shard_size", "zero.param_persistence_threshold"}) {
    CHECK_MESSAGE(changes_math(layout, optim, /*coded=*/true), std::string(layout));
  }
  for (const char* neutral :
       {"zero.offload_optimizer_fraction", "plugins.offload_param", "plugin.offload_nvme.path",
        "zero.prefetch_units", "plugins.comm", "plugin.comm_ucx.ring", "zero.reduce_bucket_mb",
        "zero.allgather_bucket_mb", "launch.timeout_s", "checkpoint.every_steps"}) {
    CHECK_MESSAGE(!changes_math(neutral, optim, /*coded=*/true), std::string(neutral));
  }
  CHECK(arm_label(b) == "shard_bucket,stage=3,prefetch_units=2");
  CHECK(arm_label(Arm{}) == "baseline");
}

TEST_CASE(
    "percentiles interpolate, and the bootstrap interval holds the ratio and is reproducible") {
  CHECK(median({3, 1, 2}) == 2);
  CHECK(median({4, 1, 2, 3}) == doctest::Approx(2.5));
  CHECK(percentile({0, 10}, 10) == doctest::Approx(1));
  CHECK(std::isnan(median({})));
  std::vector<double> a, b;
  for (int i = 0; i < 40; ++i) {
    a.push_back(1.2 + 0.01 * (i % 7));
    b.push_back(1.0 + 0.01 * (i % 5));
  }
  const RatioInterval r = bootstrap_speedup({a}, {b}, 1000, 7);
  CHECK(r.ratio == doctest::Approx(median(a) / median(b)));
  CHECK(r.low <= r.ratio);
  CHECK(r.high >= r.ratio);
  CHECK(r.low > 1.1);  // b is clearly faster: the interval stays above 1
  const RatioInterval again = bootstrap_speedup({a}, {b}, 1000, 7);
  CHECK(again.low == r.low);
  CHECK(again.high == r.high);
  CHECK_THROWS_AS(bootstrap_speedup({}, {b}, 10, 1), zt::InternalError);
  CHECK_THROWS_AS(bootstrap_speedup({{}, {}}, {b}, 10, 1), zt::InternalError);
}

TEST_CASE("the bootstrap resamples runs first: an A/A comparison with run-to-run noise rarely "
          "names a winner") {
  // Both arms the same machine and job: 4 runs x 10 steps each, every run shifted by its own
  // offset (2%, a process's placement) and every step by 0.5%. Pooled steps taken as independent
  // named a winner in 46% of such comparisons; resampling runs first keeps it near the 5% a 95%
  // interval promises.
  std::mt19937_64 gen(2026);
  std::normal_distribution<double> run_offset(0, 0.02), step_noise(0, 0.005);
  auto arm = [&] {
    StepGroups runs(4);
    for (auto& run : runs) {
      const double offset = 1 + run_offset(gen);
      for (int i = 0; i < 10; ++i) run.push_back(offset * (1 + step_noise(gen)));
    }
    return runs;
  };
  const int trials = 200;
  int winners = 0;
  for (int t = 0; t < trials; ++t) {
    const RatioInterval r = bootstrap_speedup(arm(), arm(), 400, static_cast<uint64_t>(t));
    winners += r.low > 1 || r.high < 1 ? 1 : 0;
  }
  CHECK(winners <= trials / 8);
  // A real difference of 10% is still found.
  StepGroups slow = arm();
  for (auto& run : slow)
    for (double& v : run) v *= 1.10;
  CHECK(bootstrap_speedup(slow, arm(), 1000, 3).low > 1);
}

TEST_CASE(
    "a metrics file: steps with memory, collectives and I/O, events skipped, bad files refused") {
  zt::test::TempDir dir;
  zt::test::write_file(
      dir.file("metrics.jsonl"),
      "{\"step\":1,\"loss\":2.5,\"lr\":0.1,\"grad_norm\":0.75,\"skipped\":false,"
      "\"step_time_s\":0.5,\"tokens_per_s\":100,\"memory\":[{\"rank\":0,\"params\":64,"
      "\"peak_rss\":1000}],\"comm\":{\"all_gather\":{\"calls\":3,\"bytes\":96}},"
      "\"offload_io\":{\"bytes_read\":10,\"reads\":1,\"bytes_written\":20,\"writes\":2}}\n"
      "{\"event\":\"checkpoint\",\"step\":1,\"folder\":\"x\",\"bytes\":1}\n");
  const RunMetrics run = read_run_metrics(dir.path().string());
  REQUIRE(run.steps.size() == 1);
  const StepRecord& s = run.steps[0];
  CHECK(s.loss == 2.5);
  CHECK(s.grad_norm == 0.75);
  CHECK(s.memory.at(0).at("params") == 64);
  CHECK(s.comm.at("all_gather") == std::pair<int64_t, int64_t>{3, 96});
  CHECK(s.io_bytes_written == 20);
  zt::test::write_file(dir.file("bad.jsonl"), "not json\n");
  CHECK(contains(
      zt::test::error_of<zt::ConfigError>([&] { read_run_metrics(dir.file("bad.jsonl")); }),
      "bad.jsonl:1"));
  CHECK(contains(zt::test::error_of<zt::ConfigError>([&] { read_run_metrics(dir.file("none")); }),
                 "no metrics file"));
  // A field of another JSON type names its line, as a syntax error does.
  zt::test::write_file(dir.file("typed.jsonl"), "{\"event\": \"x\"}\n{\"event\": 7}\n");
  CHECK(contains(
      zt::test::error_of<zt::ConfigError>([&] { read_run_metrics(dir.file("typed.jsonl")); }),
      "typed.jsonl:2"));
  // Integers that no integer can hold (a fuzz finding: converting 4.192e+57 was undefined).
  zt::test::write_file(dir.file("huge.jsonl"),
                       "{\"step\": 4.192e+57, \"loss\": 1, \"step_time_s\": 1}\n");
  CHECK(contains(
      zt::test::error_of<zt::ConfigError>([&] { read_run_metrics(dir.file("huge.jsonl")); }),
      "huge.jsonl:1: \"step\" is 4.192e+57, not an integer"));
  zt::test::write_file(dir.file("arms.jsonl"), "{\"event\": \"ab_arms\", \"arms\": [[\"a\"]]}\n");
  CHECK(contains(
      zt::test::error_of<zt::ConfigError>([&] { read_run_metrics(dir.file("arms.jsonl")); }),
      "arms.jsonl:1"));
}

TEST_CASE("collectives per step of a resumed run: its counters restart from 0 after the resume") {
  // 6 steps of 4 all_gathers each; the process resumed before step 4 counts from 0 again.
  RunMetrics run = run_of({5, 4, 3, 2, 1, 0.5}, {1, 1, 1, 1, 1, 1}, 4, 800);
  for (size_t i = 3; i < run.steps.size(); ++i) {
    const int64_t calls = 4 * static_cast<int64_t>(i - 2);
    run.steps[i].comm["all_gather"] = {calls, calls * 4096};
  }
  run.steps[3].resumed = true;
  ArmResult arm = arm_of("A", "shard_tensor", {run});
  summarize_arm(arm, 1);
  // Last less first counted made it (12 - 4) / 5 = 1.6 calls a step, and negative after a
  // longer first part.
  CHECK(arm.comm_per_step.at("all_gather").first == doctest::Approx(4.0));
  CHECK(arm.comm_per_step.at("all_gather").second == doctest::Approx(4.0 * 4096));
  // The reader marks the step after a resume line.
  zt::test::TempDir dir;
  zt::test::write_file(dir.file("metrics.jsonl"),
                       "{\"step\":1,\"loss\":2,\"step_time_s\":1}\n"
                       "{\"event\":\"resume\",\"step\":1,\"folder\":\"x\",\"load_s\":0.1}\n"
                       "{\"step\":2,\"loss\":1,\"step_time_s\":1}\n"
                       "{\"step\":3,\"loss\":1,\"step_time_s\":1}\n");
  const RunMetrics read = read_run_metrics(dir.path().string());
  REQUIRE(read.steps.size() == 3);
  CHECK_FALSE(read.steps[0].resumed);
  CHECK(read.steps[1].resumed);
  CHECK_FALSE(read.steps[2].resumed);
}

TEST_CASE("identical runs agree, and a diverging step is named with the run and the values") {
  const std::vector<double> losses = {5.0, 4.5, 4.0, 3.5}, times = {1, 1, 1, 1};
  ArmResult a = arm_of("A", "shard_tensor", {run_of(losses, times, 4, 800)});
  ArmResult b = arm_of("B", "shard_bucket", {run_of(losses, times, 1, 800)});
  Agreement g = check_agreement(a, b, 1e-6);
  CHECK(g.agree);
  CHECK(g.identical);
  CHECK(g.steps_compared == 8);

  std::vector<double> off = losses;
  off[2] *= 1 + 1e-7;  // fp32 rounding: within 1e-6
  b.runs.push_back(run_of(off, times, 1, 800));
  g = check_agreement(a, b, 1e-6);
  CHECK(g.agree);
  CHECK_FALSE(g.identical);
  CHECK(g.max_rel_loss == doctest::Approx(1e-7).epsilon(0.01));

  off[2] = 4.01;
  b.runs.back() = run_of(off, times, 1, 800);
  g = check_agreement(a, b, 1e-6);
  CHECK_FALSE(g.agree);
  CHECK(g.first_step == 3);
  CHECK(g.what == "loss");
  CHECK(g.where == "arm B run 2");
  CHECK(g.a == 4.0);
  CHECK(g.b == 4.01);

  // An overflow in one arm only (its loss written as null, read as NaN) diverges; in both arms
  // alike it is the same step.
  std::vector<double> nan_at_2 = losses;
  nan_at_2[1] = std::numeric_limits<double>::quiet_NaN();
  b.runs.back() = run_of(nan_at_2, times, 1, 800);
  g = check_agreement(a, b, 1e-6);
  CHECK_FALSE(g.agree);
  CHECK(g.first_step == 2);
  ArmResult both_a = arm_of("A", "shard_tensor", {run_of(nan_at_2, times, 4, 800)});
  ArmResult both_b = arm_of("B", "shard_bucket", {run_of(nan_at_2, times, 1, 800)});
  g = check_agreement(both_a, both_b, 1e-6);
  CHECK(g.agree);
  CHECK(g.identical);
}

TEST_CASE("the verdict: speed with its interval, memory, collectives and agreement") {
  const std::vector<double> losses = {5, 4, 3, 2, 1, 0.5};
  std::vector<double> slow, fast;
  for (int i = 0; i < 6; ++i) {
    slow.push_back(1.2 + 0.01 * i);
    fast.push_back(1.0 + 0.01 * i);
  }
  AbResult r = analyse(arm_of("A", "shard_tensor", {run_of(losses, slow, 4, 800)}),
                       arm_of("B", "shard_bucket", {run_of(losses, fast, 1, 800)}), 1, 1e-6,
                       /*check=*/true, {});
  INFO(r.verdict);
  CHECK(contains(r.verdict, "shard_bucket is 1.19x"));  // medians 1.225 s and 1.025 s
  CHECK(contains(r.verdict, "x faster than shard_tensor (95% CI "));
  CHECK(contains(r.verdict, "model states per rank the same within 1%"));
  CHECK(contains(r.verdict, "75% fewer all_gather calls"));
  CHECK(contains(r.verdict, "losses identical"));
  CHECK(r.a.step_s.size() == 5);  // the warm-up step left out
  CHECK(r.a.comm_per_step.at("all_gather").first == doctest::Approx(4));
  CHECK(r.a.peak_rss == 100);

  std::vector<double> other = losses;
  other[4] = 1.5;
  r = analyse(arm_of("A", "shard_tensor", {run_of(losses, fast, 1, 800)}),
              arm_of("B", "shard_bucket", {run_of(other, slow, 1, 1000)}), 1, 1e-6, true, {});
  INFO(r.verdict);
  CHECK(contains(r.verdict, "slower than shard_tensor"));
  CHECK(contains(r.verdict, "25% more model-state memory per rank"));
  CHECK(contains(r.verdict, "LOSSES DIVERGE in arm B run 1: loss at step 5"));

  zt::test::TempDir dir;
  write_ab_json(r, dir.file("ab.json"));
  const std::string json = zt::test::read_file(dir.file("ab.json"));
  CHECK(contains(json, "\"first_divergence\""));
  CHECK(contains(json, "\"speedup_b_over_a\""));
  // Nothing but the report beside it: no temporary file left.
  CHECK(std::distance(std::filesystem::directory_iterator(dir.path()),
                      std::filesystem::directory_iterator()) == 1);
}

TEST_CASE("a run's restarts are read from its log, the first one's cause whole") {
  zt::test::TempDir dir;
  const std::string log = dir.file("B-1.log");
  zt::test::write_file(log, "step 1\nzt: restart 1/2: rank 1 (pid 7) was killed by signal 9 "
                            "(Killed); the kernel's OOM killer ended it: cgroup /x limit 1 GiB "
                            "after step 20; all ranks start again from the beginning (none)\n"
                            "zt: restart 2/2: rank 0 (pid 9) exited with code 5 after step 21; "
                            "all ranks start again from checkpoint c\nstep 2\n");
  const auto [count, why] = zt::trainer::restarts_logged(log);
  CHECK(count == 2);
  // The OOM killer's words (after a ';' of their own) and the step stay.
  CHECK(why == "rank 1 (pid 7) was killed by signal 9 (Killed); the kernel's OOM killer ended "
               "it: cgroup /x limit 1 GiB after step 20");
  // zt.launch's line names no cause: counted, with none.
  zt::test::write_file(log, "zt: restart 1/1: all ranks start again\n");
  CHECK(zt::trainer::restarts_logged(log) == std::pair<int, std::string>{1, ""});
  zt::test::write_file(log, "step 1\nzt: restarting is not a restart line\n");
  CHECK(zt::trainer::restarts_logged(log).first == 0);
  CHECK(zt::trainer::restarts_logged(dir.file("missing.log")).first == 0);
}

TEST_CASE("an arm with a long label keeps its whole row in the table and the HTML report") {
  const std::vector<double> losses = {5, 4, 3}, steps = {1.0, 1.0, 1.0};
  const std::string path = "plugin.offload_nvme.path=/scratch/" + std::string(400, 'x');
  const AbResult r = analyse(arm_of("A", path, {run_of(losses, steps, 1, 800)}),
                             arm_of("B", "shard_bucket", {run_of(losses, steps, 1, 800)}), 1, 1e-6,
                             true, {});
  std::ostringstream table;
  print_ab(r, table);
  const std::string text = table.str();
  const size_t row = text.find("| A: ");
  REQUIRE(row != std::string::npos);
  const std::string line = text.substr(row, text.find('\n', row) - row);
  CHECK(contains(line, std::string(400, 'x')));
  CHECK(line.substr(line.size() - 5) == "MiB |");  // its numbers to the last column
  const std::string html = ab_html(r);
  CHECK(contains(html, std::string(400, 'x') + "</td><td>2</td>"));
}

TEST_CASE("one timed step an arm names no winner: its interval would have zero width") {
  const AbResult r = analyse(arm_of("A", "x", {run_of({3, 2, 1}, {1, 1, 1.2}, 1, 1)}),
                             arm_of("B", "y", {run_of({3, 2, 1}, {1, 1, 1.0}, 1, 1)}), 2, 1e-6,
                             true, {});
  INFO(r.verdict);
  CHECK(contains(r.verdict, "no interval: 1 timed step(s) in an arm"));
  CHECK_FALSE(contains(r.verdict, "faster"));
}

TEST_CASE("an arm with no step past the warm-up is refused, naming the flags") {
  ArmResult a = arm_of("A", "x", {run_of({1, 2}, {1, 1}, 1, 1)});
  const std::string e = zt::test::error_of<zt::ConfigError>([&] { summarize_arm(a, 2); });
  CHECK(contains(e, "--steps"));
  CHECK(contains(e, "--warmup"));
}

TEST_CASE("a live job's report: each arm's blocks of steps, warm-up after each switch left out") {
  // A A A B B B A A A (switch_every 3), B faster.
  RunMetrics job;
  job.path = "live";
  const char* arms = "AAABBBAAA";
  for (int i = 0; i < 9; ++i) {
    RunMetrics one = run_of({5.0 - 0.1 * i}, {arms[i] == 'A' ? 1.0 + 0.01 * i : 0.5}, 1, 800);
    one.steps[0].step = i + 1;
    one.steps[0].arm = std::string(1, arms[i]);
    job.steps.push_back(one.steps[0]);
  }
  job.switches = {{3, "B", 0.25}, {6, "A", 0.75}};
  job.arm_overrides = {{"A", {"plugins.shard=shard_tensor"}},
                       {"B", {"plugins.shard=shard_bucket"}}};
  const AbResult r = live_ab_result(job, 1);
  INFO(r.verdict);
  CHECK(r.a.runs.size() == 2);
  CHECK(r.b.runs.size() == 1);
  CHECK(r.a.step_s.size() == 4);  // 2 + 2 after the warm-up step of each block
  CHECK(r.b.step_s.size() == 2);
  CHECK(r.a.label == "shard_tensor");
  CHECK(contains(r.verdict, "shard_bucket is "));
  CHECK(contains(r.verdict, "losses not compared (one live job: a single loss curve)"));
  CHECK(contains(r.verdict, "2 switches of 0.500 s each (median)"));

  CHECK(contains(zt::test::error_of<zt::ConfigError>([&] { live_ab_result(job, 0); }),
                 "--warmup 0 is too few"));
  RunMetrics three = job;  // A A A B B B C A A
  three.steps[6].arm = "C";
  CHECK(contains(zt::test::error_of<zt::ConfigError>([&] { live_ab_result(three, 1); }),
                 "live holds the steps of 3 arms (A, B, C); a live A/B report compares two: "
                 "pick them with trainer ab-report RUN_DIR --arms A,C"));
  // Two of them, picked, in the order asked: B (steps 4-6) against A (steps 1-3 and 8-9), each
  // block's first step left out; C's step 7 in no block of either, and A's block after it a
  // block of its own.
  const AbResult ab = live_ab_result(three, 1, {"B", "A"});
  CHECK(ab.a.label == "shard_bucket");
  CHECK(ab.b.label == "shard_tensor");
  CHECK(ab.a.step_s.size() == 2);
  CHECK(ab.b.step_s.size() == 3);  // 2 of steps 1-3, 1 of steps 7-8
  CHECK(contains(zt::test::error_of<zt::ConfigError>([&] {
                   live_ab_result(three, 1, {"A", "D"});
                 }),
                 "live holds no steps of arm D; its arms: A, B, C"));
  CHECK_THROWS_AS(live_ab_result(three, 1, {"A"}), zt::InternalError);
  CHECK_THROWS_AS(live_ab_result(three, 1, {"A", "A"}), zt::InternalError);
  RunMetrics plain = job;
  for (StepRecord& s : plain.steps) s.arm.clear();
  CHECK(contains(zt::test::error_of<zt::ConfigError>([&] { live_ab_result(plain, 1); }),
                 "names no arm"));
}

TEST_CASE("an arm whose loss went non-finite keeps its other steps on the HTML loss chart") {
  // null in metrics.jsonl reads back as NaN: as an SVG coordinate it broke the arm's whole line
  // (the --allow-different-math case of a codec that diverged).
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const std::vector<double> steps = {1.0, 1.0, 1.0, 1.0};
  const AbResult r = analyse(arm_of("A", "exact", {run_of({5, 4, 3, 2}, steps, 1, 800)}),
                             arm_of("B", "coded", {run_of({5, 4, nan, nan}, steps, 1, 800)}), 1,
                             1e-6, false, {});
  const std::string html = ab_html(r);
  CHECK_FALSE(contains(html, "nan"));
  CHECK_FALSE(contains(html, "NaN"));
  CHECK(contains(html, "B: coded (run 1)"));
}

TEST_CASE("a restarted run's first steps after its resume are left out of the timings, as its "
          "first steps are") {
  // A restart's processes start cold: their first steps timed the restart (10 s here), not the
  // arm, and counted in its median and interval.
  RunMetrics run = run_of({6, 5, 4, 3, 2, 1}, {9, 1, 1, 10, 10, 1}, 1, 800);
  run.steps[3].resumed = true;  // steps 4 and 5 (index 3, 4): the first after the resume
  const AbResult r = analyse(
      arm_of("A", "restarted", {run}),
      arm_of("B", "plain", {run_of({6, 5, 4, 3, 2, 1}, std::vector<double>(6, 1.0), 1, 800)}), 2,
      1e-6, false, {});
  CHECK(r.a.step_s == std::vector<double>{1, 1});  // steps 3 and 6
  CHECK(r.a.median_s == 1.0);
}
