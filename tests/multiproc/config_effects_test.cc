// Config keys seen by their effect on a job, not only parsed: the learning-rate schedule's keys
// in each step's lr, eval.at_end in the metrics. (The loss scaler's act only in fp16, which needs
// the engine on a GPU: tests/unit/config_test.cc checks they reach its options.) The
// expected values are worked out here from the keys' documented meaning (docs/config.md), so a
// key the trainer ignored, or read into the wrong place, fails its case.
#include <doctest/doctest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "../test_util.h"
#include "small_gpt_job.h"

using zt::test::contains;
using zt::test::run_command;
using zt::test::TempDir;

namespace {

// The step lines of a run's metrics.jsonl, in order (evaluations left out).
std::vector<nlohmann::json> step_lines(const std::string& out_dir) {
  std::vector<nlohmann::json> steps;
  std::istringstream lines(zt::test::read_file(out_dir + "/metrics.jsonl"));
  for (std::string line; std::getline(lines, line);) {
    auto j = nlohmann::json::parse(line);
    if (!j.contains("event")) steps.push_back(std::move(j));
  }
  return steps;
}

// The small GPT on 2 ranks for `steps` steps with `extra` keys; its step lines.
std::vector<nlohmann::json> train(const TempDir& dir, int steps, const std::string& extra) {
  const auto r = run_command(zt::test::quiet_small_gpt_job(
      dir.file("out"), "--set run.steps=" + std::to_string(steps) + " " + extra));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  auto lines = step_lines(dir.file("out"));
  REQUIRE(lines.size() == static_cast<size_t>(steps));
  return lines;
}

// The warm-up and decay docs/config.md describes, for 0-based optimizer step `s`: from
// warmup_min_ratio * lr up to lr over warmup_steps (linear, or log: ln(s + 2) / ln(warmup + 1) of
// the way), then down to min_lr_ratio * lr at run.steps (cosine or linear).
struct ScheduleKeys {
  double lr;
  int warmup;
  std::string warmup_type;
  double warmup_min_ratio;
  std::string decay;
  double min_lr_ratio;
  int steps;

  double at(int s) const {
    if (s < warmup) {
      const double way = warmup_type == "log" ? std::log(s + 2.0) / std::log(warmup + 1.0)
                                              : (s + 1.0) / warmup;
      return lr * (warmup_min_ratio + (1 - warmup_min_ratio) * way);
    }
    const double progress = static_cast<double>(s - warmup) / (steps - warmup);
    const double floor = lr * min_lr_ratio;
    const double left = decay == "linear" ? 1 - progress : 0.5 * (1 + std::cos(M_PI * progress));
    return floor + (lr - floor) * left;
  }

  std::string as_set() const {
    return "--set plugin.optim_hybrid_adam.lr=" + std::to_string(lr) +
           " --set run.warmup_steps=" + std::to_string(warmup) +
           " --set run.warmup_type=" + warmup_type +
           " --set run.warmup_min_ratio=" + std::to_string(warmup_min_ratio) +
           " --set run.lr_schedule=" + decay +
           " --set run.min_lr_ratio=" + std::to_string(min_lr_ratio);
  }
};

}  // namespace

TEST_CASE("run.lr_schedule, warmup_type, warmup_min_ratio and min_lr_ratio give each step's lr") {
  for (const ScheduleKeys& keys : {ScheduleKeys{2e-3, 3, "log", 0.25, "linear", 0.3, 9},
                                   ScheduleKeys{1e-3, 2, "linear", 0.5, "cosine", 0.2, 9}}) {
    CAPTURE(keys.as_set());
    TempDir dir;
    const auto steps = train(dir, keys.steps, keys.as_set());
    for (int s = 0; s < keys.steps; ++s) {
      CAPTURE(s);
      REQUIRE(steps[s]["step"] == s + 1);
      CHECK(steps[s]["lr"].get<double>() == doctest::Approx(keys.at(s)).epsilon(1e-9));
    }
    // The last step is still above the floor, which the step after the schedule's end reaches.
    CHECK(steps.back()["lr"].get<double>() > keys.lr * keys.min_lr_ratio);
  }
}

TEST_CASE("eval.at_end evaluates after the last step, or not") {
  for (const bool at_end : {true, false}) {
    CAPTURE(at_end);
    TempDir dir;
    const auto r = run_command(zt::test::quiet_small_gpt_job(
        dir.file("out"), std::string("--set run.steps=2 --set data.val_fraction=0.1 ") +
                             "--set eval.every_steps=0 --set eval.batches=2 --set eval.at_end=" +
                             (at_end ? "true" : "false")));
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    int evaluations = 0;
    std::istringstream lines(zt::test::read_file(dir.file("out/metrics.jsonl")));
    for (std::string line; std::getline(lines, line);) {
      const auto j = nlohmann::json::parse(line);
      if (j.value("event", "") != "eval") continue;
      ++evaluations;
      CHECK(j["step"] == 2);
    }
    CHECK(evaluations == (at_end ? 1 : 0));
  }
}

TEST_CASE("zero.no_weight_decay exempts the parameters it names, and warns of a pattern that "
          "matches none") {
  // Exempting every parameter ("*") under a strong decay trains exactly as no decay; the same
  // decay on every parameter trains otherwise. Then the header's count and a refused pattern.
  const std::string decay =
      "--set plugin.optim_hybrid_adam.lr=0.01 --set plugin.optim_hybrid_adam.weight_decay=";
  TempDir none, exempt, decayed;
  const auto losses = [](const std::vector<nlohmann::json>& lines) {
    std::vector<double> out;
    for (const auto& j : lines) out.push_back(j["loss"].get<double>());
    return out;
  };
  const auto without = losses(train(none, 3, decay + "0"));
  const auto all_exempt = losses(
      train(exempt, 3, decay + "0.5 --set 'zero.no_weight_decay=[\"*\"]'"));
  const auto with = losses(train(decayed, 3, decay + "0.5"));
  CHECK(all_exempt == without);
  CHECK(with.back() != without.back());

  TempDir dir;
  // The small GPT's 28 tensors (wte tied to the head): per block 4 biases and 2 LayerNorms of
  // 2 tensors each, and ln_f's 2.
  const auto header = run_command(zt::test::quiet_small_gpt_job(
      dir.file("out"), "--set run.steps=1 --set 'zero.no_weight_decay=[\"*.bias\", \"*ln*\"]'"));
  INFO(header.output);
  CHECK(header.exit_code == 0);
  CHECK(contains(header.output, "weight decay: none on 18 of 28 tensors (zero.no_weight_decay)"));

  // A pattern that matches nothing (a typo, or "*ln*" of a shipped config on a model without
  // LayerNorms) is warned of, naming its place; the rest apply.
  const auto warned = run_command(zt::test::quiet_small_gpt_job(
      dir.file("out2"), "--set run.steps=1 --set 'zero.no_weight_decay=[\"*.bias\", \"*norm*\"]'"));
  INFO(warned.output);
  CHECK(warned.exit_code == 0);
  CHECK(contains(warned.output,
                 "zt: warning: zero.no_weight_decay (--set zero.no_weight_decay=[\"*.bias\", "
                 "\"*norm*\"]): the pattern '*norm*' matches no parameter of this model"));
  CHECK(contains(warned.output, "weight decay: none on 13 of 28 tensors"));  // the biases
}
