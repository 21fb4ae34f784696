#include "ab/ab_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>

#include "zt/error.h"

namespace zt::trainer {

namespace {

constexpr int kResamples = 2000;
constexpr uint64_t kBootstrapSeed = 20261124;  // any fixed value: the same runs, the same report

// Model-state categories summed for "model states per rank" (tiers included, buffers not).
const char* const kModelStates[] = {"params",           "grads",         "master",
                                    "optimizer_states", "offload_param", "offload_grads",
                                    "offload_optimizer"};

std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", digits, v);
  return buf;
}

// Enough digits to tell apart values that differ in their last bits.
std::string digits(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.9g", v);
  return buf;
}

std::string sci(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.1e", v);
  return buf;
}

// A counter of the metrics (cumulative since its process started) per counted step of `run`:
// the steps' increments summed over the counted steps. The first step after a resume starts
// from 0 (its process counts afresh; last value less first made a resumed run's figures
// negative).
double per_step(const RunMetrics& run, int64_t counted,
                const std::function<int64_t(const StepRecord&)>& counter) {
  int64_t total = 0;
  for (size_t i = static_cast<size_t>(counted); i < run.steps.size(); ++i) {
    const bool from_zero = i == 0 || run.steps[i].resumed;
    total += counter(run.steps[i]) - (from_zero ? 0 : counter(run.steps[i - 1]));
  }
  const double steps = static_cast<double>(run.steps.size()) - static_cast<double>(counted);
  return static_cast<double>(total) / steps;
}

}  // namespace

double relative_difference(double x, double y) {
  if (x == y || (std::isnan(x) && std::isnan(y))) return 0;
  if (!std::isfinite(x) || !std::isfinite(y)) return std::numeric_limits<double>::infinity();
  const double scale = std::max(std::fabs(x), std::fabs(y));
  return scale > 0 ? std::fabs(x - y) / scale : std::fabs(x - y);
}

void summarize_arm(ArmResult& arm, int64_t warmup) {
  arm.step_s.clear();
  arm.step_groups.clear();
  std::vector<double> tokens;
  for (const RunMetrics& run : arm.runs) {
    arm.step_groups.emplace_back();
    // The warm-up is left out at the start and again after each resume (a restart's new
    // processes start as cold as the first: its first steps timed the restart, not the arm).
    size_t cold_until = static_cast<size_t>(warmup);
    for (size_t i = 0; i < run.steps.size(); ++i) {
      if (run.steps[i].resumed) cold_until = i + static_cast<size_t>(warmup);
      if (i < cold_until) continue;
      arm.step_s.push_back(run.steps[i].step_time_s);
      arm.step_groups.back().push_back(run.steps[i].step_time_s);
      tokens.push_back(run.steps[i].tokens_per_s);
    }
    for (const StepRecord& s : run.steps) {
      for (const auto& rank : s.memory) {
        int64_t states = 0;
        for (const char* c : kModelStates) states += rank.count(c) ? rank.at(c) : 0;
        arm.peak_model_states = std::max(arm.peak_model_states, states);
        for (const auto& [name, bytes] : rank) {
          if (name == "peak_rss" || name == "rss") continue;
          arm.peak_memory[name] = std::max(arm.peak_memory[name], bytes);
        }
        if (rank.count("peak_rss")) arm.peak_rss = std::max(arm.peak_rss, rank.at("peak_rss"));
      }
    }
  }
  if (arm.step_s.empty()) {
    throw ConfigError("arm " + arm.arm.name + " (" + arm.label + ") has no step after the " +
                      std::to_string(warmup) +
                      " warm-up steps; train more steps (--steps) or drop fewer (--warmup)");
  }
  arm.median_s = median(arm.step_s);
  arm.p10_s = percentile(arm.step_s, 10);
  arm.p90_s = percentile(arm.step_s, 90);
  arm.tokens_per_s = median(tokens);
  const RunMetrics& first = arm.runs.front();
  const int64_t counted = std::min<int64_t>(warmup, static_cast<int64_t>(first.steps.size()) - 1);
  for (const auto& entry : first.steps.back().comm) {
    const std::string& op = entry.first;
    auto calls = [&](const StepRecord& s) { return s.comm.count(op) ? s.comm.at(op).first : 0; };
    auto bytes = [&](const StepRecord& s) { return s.comm.count(op) ? s.comm.at(op).second : 0; };
    arm.comm_per_step[op] = {per_step(first, counted, calls), per_step(first, counted, bytes)};
  }
  arm.io_read_per_step = per_step(first, counted,
                                  [](const StepRecord& s) { return s.io_bytes_read; });
  arm.io_written_per_step = per_step(first, counted,
                                     [](const StepRecord& s) { return s.io_bytes_written; });
}

Agreement check_agreement(const ArmResult& a, const ArmResult& b, double rtol) {
  Agreement g;
  g.checked = true;
  const RunMetrics& reference = a.runs.front();
  for (const ArmResult* arm : {&a, &b}) {
    for (size_t r = 0; r < arm->runs.size(); ++r) {
      const RunMetrics& run = arm->runs[r];
      const size_t n = std::min(run.steps.size(), reference.steps.size());
      for (size_t i = 0; i < n; ++i) {
        const StepRecord &x = reference.steps[i], &y = run.steps[i];
        const double rl = relative_difference(x.loss, y.loss),
                     rg = relative_difference(x.grad_norm, y.grad_norm);
        g.max_rel_loss = std::max(g.max_rel_loss, rl);
        g.max_rel_grad_norm = std::max(g.max_rel_grad_norm, rg);
        g.identical = g.identical && rl == 0 && rg == 0;
        ++g.steps_compared;
        if (g.agree && (rl > rtol || rg > rtol)) {
          g.agree = false;
          g.first_step = y.step;
          g.where = "arm " + arm->arm.name + " run " + std::to_string(r + 1);
          g.what = rl > rtol ? "loss" : "grad_norm";
          g.a = rl > rtol ? x.loss : x.grad_norm;
          g.b = rl > rtol ? y.loss : y.grad_norm;
        }
      }
    }
  }
  return g;
}

AbResult analyse(ArmResult a, ArmResult b, int64_t warmup, double rtol, bool check,
                 std::vector<std::string> math_keys) {
  AbResult r;
  summarize_arm(a, warmup);
  summarize_arm(b, warmup);
  r.speedup = bootstrap_speedup(a.step_groups, b.step_groups, kResamples, kBootstrapSeed);
  if (check) r.agreement = check_agreement(a, b, rtol);
  r.a = std::move(a);
  r.b = std::move(b);
  r.warmup_steps = warmup;
  r.rtol = rtol;
  r.math_keys = std::move(math_keys);
  r.verdict = verdict_line(r);
  return r;
}

std::string verdict_line(const AbResult& r) {
  const RatioInterval& s = r.speedup;
  std::string line;
  const auto timed = [](const StepGroups& groups) {
    size_t n = 0;
    for (const auto& g : groups) n += g.size();
    return n;
  };
  const size_t fewest = std::min(timed(r.a.step_groups), timed(r.b.step_groups));
  if (fewest < 2) {
    // One step an arm resamples to itself: a zero-width "interval" that named a winner.
    line = "no interval: " + std::to_string(fewest) + " timed step(s) in an arm cannot tell a " +
           "difference from noise (" + r.b.label + " ran at " + fixed(s.ratio, 2) + "x " +
           r.a.label + "'s speed); train more steps after the warm-up";
  } else if (s.low <= 1 && s.high >= 1) {
    line = "no clear speed difference: " + r.b.label + " runs at " + fixed(s.ratio, 2) + "x " +
           r.a.label + "'s speed (95% CI " + fixed(s.low, 2) + "-" + fixed(s.high, 2) + ")";
  } else if (s.ratio >= 1) {
    line = r.b.label + " is " + fixed(s.ratio, 2) + "x faster than " + r.a.label + " (95% CI " +
           fixed(s.low, 2) + "-" + fixed(s.high, 2) + ")";
  } else {
    line = r.b.label + " is " + fixed(1 / s.ratio, 2) + "x slower than " + r.a.label + " (95% CI " +
           fixed(1 / s.high, 2) + "-" + fixed(1 / s.low, 2) + ")";
  }
  const double ma = static_cast<double>(r.a.peak_model_states),
               mb = static_cast<double>(r.b.peak_model_states);
  const double mem = ma > 0 ? (mb - ma) / ma : 0;
  if (std::fabs(mem) <= 0.01) {
    line += ", model states per rank the same within 1%";
  } else {
    line += ", " + fixed(std::fabs(mem) * 100, 0) + "% " + (mem < 0 ? "less" : "more") +
            " model-state memory per rank";
  }
  // The collective whose calls per step changed the most, relative to a.
  std::string op;
  double change = 0;
  for (const auto& [name, va] : r.a.comm_per_step) {
    const auto it = r.b.comm_per_step.find(name);
    if (it == r.b.comm_per_step.end() || va.first <= 0) continue;
    const double c = (it->second.first - va.first) / va.first;
    if (std::fabs(c) > std::fabs(change)) {
      change = c;
      op = name;
    }
  }
  if (!op.empty() && std::fabs(change) >= 0.01) {
    line += ", " + fixed(std::fabs(change) * 100, 0) + "% " + (change < 0 ? "fewer " : "more ") +
            op + " calls";
  }
  const Agreement& g = r.agreement;
  if (!g.checked) {
    line += ", losses not compared (" + r.unchecked_reason + ")";
  } else if (!g.agree) {
    line += ", LOSSES DIVERGE in " + g.where + ": " + g.what + " at step " +
            std::to_string(g.first_step) + " is " + digits(g.a) + " vs " + digits(g.b) +
            " (relative " + sci(relative_difference(g.a, g.b)) + " > " + sci(r.rtol) + ")";
  } else if (g.identical) {
    line += ", losses identical";
  } else {
    line += ", losses agree within " + sci(std::max(g.max_rel_loss, g.max_rel_grad_norm));
  }
  return line;
}

void print_ab(const AbResult& r, std::ostream& out) {
  char buf[512];
  out << "\n| arm | runs | steps | step s (median) | p10 | p90 | tokens/s | model states/rank "
         "| peak RSS | offload read/step | offload written/step |\n"
         "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n";
  for (const ArmResult* arm : {&r.a, &r.b}) {
    // The label apart from the fixed-size numbers: a long override (a path) cut the row short.
    out << "| " << arm->arm.name << ": " << arm->label;
    std::snprintf(buf, sizeof(buf),
                  " | %zu | %zu | %.4f | %.4f | %.4f | %.1f | %.1f MiB | %.1f MiB | %.1f "
                  "MiB | %.1f MiB |\n",
                  arm->runs.size(), arm->step_s.size(), arm->median_s, arm->p10_s, arm->p90_s,
                  arm->tokens_per_s, arm->peak_model_states / 1048576.0, arm->peak_rss / 1048576.0,
                  arm->io_read_per_step / 1048576.0, arm->io_written_per_step / 1048576.0);
    out << buf;
  }
  out << "\ncollectives per step (calls, MiB):";
  for (const auto& [op, va] : r.a.comm_per_step) {
    const auto vb = r.b.comm_per_step.count(op) ? r.b.comm_per_step.at(op) : std::pair{0.0, 0.0};
    std::snprintf(buf, sizeof(buf), "  %s A %.1f (%.1f) B %.1f (%.1f);", op.c_str(), va.first,
                  va.second / 1048576.0, vb.first, vb.second / 1048576.0);
    out << buf;
  }
  out << "\n\nverdict: " << r.verdict << "\n";
}

void write_ab_json(const AbResult& r, const std::string& path) {
  auto arm_json = [](const ArmResult& arm) {
    nlohmann::json j;
    j["name"] = arm.arm.name;
    j["label"] = arm.label;
    j["overrides"] = arm.arm.overrides;
    j["step_s"] = arm.step_s;
    j["median_step_s"] = arm.median_s;
    j["p10_step_s"] = arm.p10_s;
    j["p90_step_s"] = arm.p90_s;
    j["tokens_per_s"] = arm.tokens_per_s;
    j["peak_memory_bytes"] = arm.peak_memory;
    j["peak_model_states_per_rank"] = arm.peak_model_states;
    j["peak_rss"] = arm.peak_rss;
    for (const auto& [op, v] : arm.comm_per_step)
      j["comm_per_step"][op] = {{"calls", v.first}, {"bytes", v.second}};
    j["offload_io_per_step"] = {{"bytes_read", arm.io_read_per_step},
                                {"bytes_written", arm.io_written_per_step}};
    for (const RunMetrics& run : arm.runs) {
      nlohmann::json steps = nlohmann::json::array();
      for (const StepRecord& s : run.steps) {
        steps.push_back({{"step", s.step},
                         {"loss", s.loss},
                         {"grad_norm", s.grad_norm},
                         {"step_time_s", s.step_time_s},
                         {"tokens_per_s", s.tokens_per_s}});
      }
      j["runs"].push_back({{"metrics", run.path}, {"restarts", run.restarts}, {"steps", steps}});
    }
    return j;
  };
  nlohmann::json j;
  j["a"] = arm_json(r.a);
  j["b"] = arm_json(r.b);
  j["speedup_b_over_a"] = {
      {"ratio", r.speedup.ratio}, {"ci95_low", r.speedup.low}, {"ci95_high", r.speedup.high}};
  const Agreement& g = r.agreement;
  j["agreement"] = {{"checked", g.checked},
                    {"agree", g.agree},
                    {"identical", g.identical},
                    {"steps_compared", g.steps_compared},
                    {"max_rel_loss", g.max_rel_loss},
                    {"max_rel_grad_norm", g.max_rel_grad_norm},
                    {"rtol", r.rtol}};
  if (g.checked && !g.agree) {
    j["agreement"]["first_divergence"] = {
        {"step", g.first_step}, {"what", g.what}, {"where", g.where}, {"a", g.a}, {"b", g.b}};
  }
  j["math_keys"] = r.math_keys;
  j["warmup_steps"] = r.warmup_steps;
  for (const ArmSwitch& w : r.switches)
    j["switches"].push_back({{"after_step", w.step}, {"to", w.to}, {"seconds", w.seconds}});
  j["verdict"] = r.verdict;
  write_report_file(path, j.dump(2) + "\n");
}

}  // namespace zt::trainer
