#include "app/ab_command.h"

#include <cstdio>
#include <filesystem>
#include <iostream>

#include "ab/ab_html.h"
#include "ab/ab_report.h"
#include "ab/arm_run.h"
#include "ab/live_ab.h"
#include "ab/out_folder_lock.h"
#include "app/estimate_command.h"
#include "report/report_file.h"
#include "settings/deepspeed_config.h"
#include "settings/job_config.h"
#include "settings/job_settings.h"
#include "zt/error.h"
#include "zt/host/config.h"
#include "zt/options.h"

namespace zt::trainer {

namespace {

std::vector<std::string> math_keys_of(const Arm& a, const Arm& b, const JobSettings& ja,
                                      const JobSettings& jb) {
  const std::vector<std::string> optimizers = {ja.engine.optimizer.id, jb.engine.optimizer.id};
  std::vector<std::string> keys;
  for (const std::string& key : differing_keys(a, b)) {
    if (changes_math_between(key, optimizers, layout_changes_math(ja) || layout_changes_math(jb),
                             ja, jb))
      keys.push_back(key);
  }
  return keys;
}

void name_arms(ArmResult& a, ArmResult& b) {
  a.label = arm_label(a.arm);
  b.label = arm_label(b.arm);
  if (a.label != b.label) return;
  // Values alone are ambiguous (both set some key to 2): the whole overrides say which keys.
  auto joined = [](const Arm& arm) {
    std::string text;
    for (const std::string& o : arm.overrides) text += (text.empty() ? "" : ",") + o;
    return text.empty() ? std::string("baseline") : text;
  };
  a.label = joined(a.arm);
  b.label = joined(b.arm);
  if (a.label == b.label) {
    a.label = "A";
    b.label = "B";
  }
}

// Prints the comparison, writes out_dir/ab.json and report.html. Returns 0, or 6 when arms
// that must agree diverged (said on stderr).
int report_ab(AbResult result, const std::string& out_dir, std::ostream& out) {
  print_ab(result, out);
  make_output_folder(out_dir, "--out");
  const std::string json = out_dir + "/ab.json";
  write_ab_json(result, json);
  write_ab_html(result, out_dir + "/report.html");
  out << "report: " << out_dir << "/report.html, every number in " << json << "\n";
  const Agreement& g = result.agreement;
  if (g.checked && !g.agree) {
    std::cerr.precision(9);
    std::cerr << "zt: numeric error: the runs must train the same math but diverge: " << g.what
              << " at step " << g.first_step << " is " << g.a << " in arm A's first run and " << g.b
              << " in " << g.where
              << "; a setting that differs between them changes the numbers (see " << json << ")\n";
    return static_cast<int>(ErrorKind::kNumeric);
  }
  return 0;
}

}  // namespace

int run_ab(const CliArgs& args, std::ostream& out) {
  ArmRunPlan plan;
  plan.config_path = args.config_path;
  plan.base = job_overrides(args);
  plan.out_dir = args.ab.out_dir;
  ArmResult a, b;
  a.arm = parse_arm("A", args.ab.a, "--a");
  b.arm = parse_arm("B", args.ab.b, "--b");
  // Each arm's door: its config loaded as its run will load it (an unknown or misspelt key fails
  // here, with the config's did-you-mean error, before anything runs) and resolved once.
  auto settings_of = [&](const Arm& arm) {
    std::vector<std::string> overrides = plan.base;
    overrides.insert(overrides.end(), arm.overrides.begin(), arm.overrides.end());
    return JobSettings::of(load_job_config(plan.config_path, overrides));
  };
  const JobSettings ja = settings_of(a.arm), jb = settings_of(b.arm);
  plan.steps = args.ab.steps > 0 ? args.ab.steps : ja.run.steps;
  if (plan.steps <= args.ab.warmup) {
    throw ConfigError("--steps " + std::to_string(plan.steps) + " leaves nothing after --warmup " +
                      std::to_string(args.ab.warmup) + "; train more steps than the warm-up");
  }
  const std::vector<std::string> math = math_keys_of(a.arm, b.arm, ja, jb);
  if (!math.empty() && !args.ab.allow_different_math) {
    std::string keys;
    for (const std::string& k : math) keys += (keys.empty() ? "" : ", ") + k;
    const bool layout = layout_changes_math(ja) || layout_changes_math(jb);
    throw ConfigError(
        "the arms set " + keys +
        " differently, which changes the math: their losses cannot be checked for agreement. "
        "Compare arms that differ in where bytes live and how they travel (" +
        (layout ? "offload, prefetch, overlap, the bytes in flight: with a codec, or 16-bit "
                  "optimizer states or masters rounded stochastically, the layout (stage, shard "
                  "plugin and buckets, MiCS groups) is math too"
                : "shard plugin, stage, buckets, prefetch, offload") +
        (reductions_round_apart(ja, jb)
             ? "; with micro steps in " + ja.engine.compute +
                   ", stages 0-1 reduce their fp32 sum once and stages 2-3 each micro step, "
                   "rounded apart: compare stages on one side of that"
             : std::string()) +
        "), or pass --allow-different-math to compare speed and memory without the check");
  }
  name_arms(a, b);
  const OutFolderLock out_lock(plan.out_dir, "trainer ab");
  const std::vector<std::string> earlier = remove_previous_outputs(plan.out_dir,
                                                                   {"ab.json", "report.html"});
  if (!earlier.empty()) {
    out << "ab: removed an earlier A/B's " << earlier.front()
        << (earlier.size() > 1 ? " and " + earlier.back() : std::string()) << " from "
        << plan.out_dir << "; this one writes its own at its end\n";
  }
  AbResult result;
  try {
    result = run_ab_arms(plan, std::move(a), std::move(b), args.ab, math, out);
  } catch (const ArmRunFailed& e) {
    // The run's own exit code, as the trainer's launcher ends with a failed rank's.
    std::cout.flush();
    std::cerr << "zt: " << e.kind_name() << " error: " << e.what() << "\n";
    return e.run_exit_code();
  }
  return report_ab(std::move(result), plan.out_dir, out);
}

int run_compare(const CliArgs& args, std::ostream& out) {
  ArmResult a, b;
  a.arm.name = "A";
  b.arm.name = "B";
  a.runs.push_back(read_run_metrics(args.compare_runs.at(0)));
  b.runs.push_back(read_run_metrics(args.compare_runs.at(1)));
  a.label = std::filesystem::path(args.compare_runs[0]).filename().string();
  b.label = std::filesystem::path(args.compare_runs[1]).filename().string();
  if (a.label == b.label) {
    a.label = args.compare_runs[0];
    b.label = args.compare_runs[1];
  }
  out << "zt compare: A " << a.runs[0].path << ", B " << b.runs[0].path << "\n";
  // Two runs of one job with other placements must agree; --allow-different-math compares runs
  // that differ in anything (another lr, model) for speed and memory only.
  const bool check = !args.ab.allow_different_math;
  return report_ab(analyse(std::move(a), std::move(b), args.ab.warmup, args.ab.rtol, check, {}),
                   args.ab.out_dir, out);
}

int run_ab_report(const CliArgs& args, std::ostream& out) {
  const std::string& run_dir = args.compare_runs.at(0);
  const RunMetrics metrics = read_run_metrics(run_dir);
  out << "zt ab-report: " << metrics.path << "\n";
  // Given the metrics file itself, the report goes beside it.
  std::error_code ec;
  const std::string beside = std::filesystem::is_directory(run_dir, ec)
                                 ? run_dir
                                 : std::filesystem::path(run_dir).parent_path().string();
  return report_ab(live_ab_result(metrics, args.ab.warmup, args.ab.arms),
                   args.ab.out_dir.empty() ? (beside.empty() ? "." : beside) : args.ab.out_dir,
                   out);
}

}  // namespace zt::trainer
