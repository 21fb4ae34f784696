#include "tune/trial_jobs.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "ab/ab_report.h"
#include "ab/live_ab.h"
#include "zt/error.h"
#include "zt/options.h"

namespace zt::trainer {

namespace {

std::string joined(const std::vector<std::string>& overrides) {
  std::string out;
  for (const std::string& kv : overrides) out += (out.empty() ? "" : ",") + kv;
  return out;
}

// The overrides every arm sets alike: the job's own (its data settings are the job's, not an
// arm's).
std::vector<std::string> shared_overrides(const std::vector<Candidate>& arms) {
  std::vector<std::string> out;
  for (const std::string& kv : arms[0].overrides) {
    const bool everywhere = std::all_of(arms.begin(), arms.end(), [&](const Candidate& c) {
      return std::find(c.overrides.begin(), c.overrides.end(), kv) != c.overrides.end();
    });
    if (everywhere) out.push_back(kv);
  }
  return out;
}

int64_t largest_rss(const StepRecord& s) {
  int64_t rss = 0;
  for (const auto& rank : s.memory) {
    for (const char* key : {"rss", "peak_rss"}) {
      auto it = rank.find(key);
      if (it != rank.end()) rss = std::max(rss, it->second);
    }
  }
  return rss;
}

// One line for a failed job: how it ended and the error it printed last (arm_run's message ends
// with the log's last lines, each after "  | ").
std::string failure_line(const std::string& message) {
  const size_t nl = message.find('\n');
  std::string head = message.substr(0, nl);
  head = head.substr(0, head.find("; its output is"));
  std::string error;
  for (size_t at = nl; at != std::string::npos && at < message.size();) {
    const size_t next = message.find('\n', at + 1);
    const std::string line = message.substr(at + 1,
                                            next == std::string::npos ? next : next - at - 1);
    if (line.find("error") != std::string::npos) error = line.substr(line.find_first_not_of(" |"));
    at = next;
  }
  return error.empty() ? head : head + ": " + error;
}

// The arm a failed job was running: the one its error names ("live A/B arm C", as a live job
// says of an arm whose config or plugins fail at its start), else the arm of the turn after its
// last step (the one training, or being built at a switch).
int failed_arm(const std::string& message, const RunMetrics& metrics, const TrialJob& job) {
  const int arms = static_cast<int>(job.arms.size());
  if (arms == 1) return 0;
  const std::string named = "live A/B arm ";
  const size_t at = message.find(named);
  if (at != std::string::npos && at + named.size() < message.size()) {
    const int arm = message[at + named.size()] - 'A';
    if (arm >= 0 && arm < arms) return arm;
  }
  const auto done = static_cast<int64_t>(metrics.steps.size());
  return static_cast<int>((done / job.switch_every) % arms);
}

}  // namespace

int arm_of_record(const StepRecord& s) { return s.arm.empty() ? 0 : s.arm[0] - 'A'; }

TrialJobResult run_trial_job(ArmRunPlan plan, const TrialJob& job, std::ostream& out) {
  const int arms = static_cast<int>(job.arms.size());
  if (arms < 1 || arms > static_cast<int>(kMaxLiveArms)) {
    throw InternalError("tune: a trial job of " + std::to_string(arms) + " arms");
  }
  Arm arm;
  arm.name = job.name;
  arm.overrides = shared_overrides(job.arms);
  if (arms > 1) {
    // Each arm carries only what it sets differently; the rest is the job's.
    std::vector<std::string> texts;
    for (const Candidate& c : job.arms) {
      std::vector<std::string> own;
      for (const std::string& kv : c.overrides) {
        if (std::find(arm.overrides.begin(), arm.overrides.end(), kv) == arm.overrides.end())
          own.push_back(kv);
      }
      texts.push_back(joined(own));
    }
    arm.overrides.push_back("ab.arms=" + value_to_toml(Value(texts)));
    arm.overrides.push_back("ab.switch_every=" + std::to_string(job.switch_every));
  } else {
    arm.overrides = job.arms[0].overrides;
  }
  for (const char* kv : kTrialOverrides) {
    arm.overrides.push_back(kv);
  }
  plan.steps = job.switch_every * job.blocks * arms;
  char head[160];
  std::snprintf(head, sizeof(head), "  %s: %d candidate%s, %lld steps", job.name.c_str(), arms,
                arms == 1 ? "" : "s", static_cast<long long>(plan.steps));
  TrialJobResult r;
  r.step_s.resize(arms);
  r.rss.resize(arms);
  const auto t0 = std::chrono::steady_clock::now();
  try {
    r.metrics = run_arm(plan, arm, job.name, head, "the trial job " + job.name, out);
  } catch (const Error& e) {
    const std::string message = e.what();
    r.failed = true;
    r.stopped = message.find("stopped at the time budget's end") != std::string::npos;
    r.failure = failure_line(message) + " (log: " + plan.out_dir + "/runs/" + job.name + ".log)";
    try {
      r.metrics = read_run_metrics(plan.out_dir + "/runs/" + job.name);
    } catch (const Error&) {
    }
    r.failed_arm = failed_arm(message, r.metrics, job);
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  // Timed steps: each turn's first step (a switch rebuilds the engine) and the job's first two
  // (the process warms up, as trainer ab's default --warmup 2 says: with one, the first arm, your
  // config or the leader, carried the process's second step every time) are left out.
  const auto& steps = r.metrics.steps;
  for (size_t i = 0; i < steps.size(); ++i) {
    const int a = std::clamp(arm_of_record(steps[i]), 0, arms - 1);
    r.rss[a] = std::max(r.rss[a], largest_rss(steps[i]));
    const bool turn_start = i < 2 || steps[i - 1].arm != steps[i].arm;
    if (!turn_start && !steps[i].skipped) r.step_s[a].push_back(steps[i].step_time_s);
  }
  return r;
}

int64_t first_disagreement(const RunMetrics& run, const RunMetrics& reference, double rtol,
                           bool with_grad_norm, std::string& what) {
  for (const StepRecord& s : run.steps) {
    auto ref = std::find_if(reference.steps.begin(), reference.steps.end(),
                            [&](const StepRecord& r) { return r.step == s.step; });
    if (ref == reference.steps.end()) continue;
    const std::vector<std::tuple<const char*, double, double>> values = {
        {"loss", s.loss, ref->loss}, {"grad_norm", s.grad_norm, ref->grad_norm}};
    for (const auto& [name, a, b] : values) {
      if (!with_grad_norm && std::string(name) == "grad_norm") continue;
      if (relative_difference(a, b) > rtol) {
        char buf[200];
        std::snprintf(buf, sizeof(buf), "%s at step %lld is %.9g, the config you gave trains %.9g",
                      name, static_cast<long long>(s.step), a, b);
        what = buf;
        return s.step;
      }
    }
  }
  return -1;
}

}  // namespace zt::trainer
