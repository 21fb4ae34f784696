#include "tune/tuner.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <sstream>

#include "ab/ab_arms.h"
#include "ab/arm_run.h"
#include "ab/live_ab.h"
#include "ab/out_folder_lock.h"
#include "report/report_file.h"
#include "settings/job_settings.h"
#include "tune/composition_estimate.h"
#include "tune/race.h"
#include "tune/search_space.h"
#include "tune/trial_jobs.h"
#include "tune/tune_report.h"
#include "zt/error.h"

namespace zt::trainer {

namespace {

using Clock = std::chrono::steady_clock;

constexpr int kMaxRounds = 4;
constexpr size_t kNone = static_cast<size_t>(-1);

std::string first_line(const std::string& text) {
  const size_t nl = text.find('\n');
  return nl == std::string::npos ? text : text.substr(0, nl);
}

class Tuner {
 public:
  Tuner(const TuneRequest& request, std::ostream& out)
      : request_(request), args_(request.args), out_(out), load_(request.load) {
    start_ = Clock::now();
    deadline_ = start_ + std::chrono::milliseconds(static_cast<int64_t>(args_.budget_s * 1000));
    // A turn: the step after a switch (left out of the timings), then half the timed steps.
    turn_ = std::max<int64_t>(2, (args_.trial_steps + 1) / 2 + 1);
    r_.config_path = request.config_path;
    r_.budget_s = args_.budget_s;
    r_.margin = args_.margin;
    r_.trial_steps = (turn_ - 1) * 2;  // an odd --trial-steps rounds up
    plan_.config_path = request.config_path;
    plan_.base = request.base;
    plan_.out_dir = args_.out_dir;
    plan_.launcher = args_.launcher;
  }

  int run();

 private:
  double elapsed() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }
  double left(Clock::time_point until) const {
    return std::chrono::duration<double>(until - Clock::now()).count();
  }
  void estimate();
  // Adds a candidate (or, in phase 2, finds the one phase 1 left unraced); returns its index when
  // it races, kNone otherwise.
  size_t add_candidate(CompositionEstimate e, int phase);
  std::string job_key(size_t i);
  // The candidate's micro batch x grad_accum ("4x1").
  std::string split(size_t i) {
    const std::string key = job_key(i);
    return key.substr(0, key.find('|'));
  }
  void reference_run();
  double projected_job_s(size_t arms) const;
  // Steps of each final A/B run: about 6 s of your config's steps (a timing of fewer steps
  // is noise on a small job), less when the four runs would take more than 30% of the budget;
  // from 2 turns + 2 to 60.
  int64_t final_steps() const {
    const double seconds = std::min(6.0, 0.075 * args_.budget_s - ref_start_s_);
    const auto want = static_cast<int64_t>(seconds / std::max(ref_step_s_, 1e-3));
    return std::clamp<int64_t>(want, 2 * turn_ + 2, 60);
  }
  // The trial jobs of a round: one per micro batch split (and math), at most arms_per_job_ each;
  // `anchor` (kNone for none) joins every job of its split.
  std::vector<std::vector<size_t>> jobs_of(const std::vector<size_t>& racing, size_t anchor);
  size_t race(int phase, std::vector<size_t> indices, Clock::time_point until);
  bool fit_round_to_time(int round, const std::vector<size_t>& indices, size_t anchor,
                         Clock::time_point until, std::vector<size_t>& racing);
  bool run_round(int phase, int round, const std::vector<size_t>& racing, size_t anchor,
                 Clock::time_point until, RaceRules& rules);
  size_t leader_of(int phase, const std::vector<size_t>& indices);
  bool run_job(const std::vector<size_t>& arms, Clock::time_point until, TuneRound& round);
  void final_ab();
  // Sets final_losses(_agree) from the final A/B: its own check where the arms train the same
  // math, else the losses step by step against --rtol.
  void compare_final_losses(bool same_math, bool same_split);
  void write_outputs();

  const TuneRequest& request_;
  const TuneArgs& args_;
  std::ostream& out_;
  ConfigLoader load_;
  ConfigLoader per_host_;  // load_ as one of --hosts sees it: every composition is sized so
  Clock::time_point start_, deadline_;
  int64_t turn_ = 5;
  size_t arms_per_job_ = kMaxLiveArms;  // set by the reference run's length
  EstimateOptions options_;
  TuneResult r_;
  ArmRunPlan plan_;
  RunMetrics reference_;
  double ref_step_s_ = 0, ref_start_s_ = 0;
  int jobs_run_ = 0;
  std::map<size_t, std::string> job_keys_;
};

}  // namespace

std::vector<std::string> explicit_overrides(const Config& config,
                                            std::vector<std::string> overrides) {
  for (const char* key : {"zero.stage", "data.micro_batch", "data.grad_accum",
                          "plugins.offload_optimizer", "plugins.offload_param",
                          "zero.offload_optimizer_fraction", "zero.offload_param_fraction"}) {
    const bool set = std::any_of(overrides.begin(), overrides.end(), [&](const std::string& kv) {
      return kv.rfind(std::string(key) + "=", 0) == 0;
    });
    if (!set) overrides.push_back(std::string(key) + "=" + config_value(config, key));
  }
  return overrides;
}

std::vector<std::string> math_overrides(const JobSettings& job,
                                        const std::vector<std::string>& overrides) {
  const std::vector<std::string> optimizers = {job.engine.optimizer.id};
  std::vector<std::string> out;
  for (const std::string& kv : overrides) {
    const std::string name = kv.substr(0, kv.find('='));
    if (name != "data.micro_batch" && name != "data.grad_accum" &&
        changes_math(name, optimizers, layout_changes_math(job)))
      out.push_back(kv);
  }
  return out;
}

std::string math_key(const JobSettings& job, const std::vector<std::string>& overrides) {
  std::string key = std::to_string(job.data.micro_batch) + "x" +
                    std::to_string(job.data.grad_accum);
  // Sorted: a candidate of the grid and your config spell the same values in another order.
  std::vector<std::string> math;
  for (const std::string& kv : math_overrides(job, overrides)) {
    const std::string name = kv.substr(0, kv.find('='));
    if (name != "zero.mics_shard_size" && name != "zero.shard_group_size") math.push_back(kv);
  }
  std::sort(math.begin(), math.end());
  for (const std::string& kv : math) key += "|" + kv;
  // The MiCS group size by its resolved value (the grid spells out the default your config
  // leaves implicit, and the key has two names); with a codec it moves the coded collectives,
  // with 16-bit optimizer states or masters their rounding.
  if (layout_changes_math(job)) key += "|groups=" + std::to_string(job.engine.groups.size);
  // With micro steps in 16-bit compute, stages 0-1 and 2-3 round the reduced gradients apart.
  if (const std::string reduced = gradient_reduction(job); !reduced.empty())
    key += "|reduced " + reduced;
  return key;
}

namespace {

// What a composition runs, whatever overrides spelled it: its resolved config without the
// comments that say where each value came from.
std::string resolved_identity(const JobSettings& job) {
  std::istringstream in(job.config_toml);
  std::string out;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line[0] == '#') continue;
    out += line.substr(0, line.find("  #")) + "\n";
  }
  return out;
}

size_t Tuner::add_candidate(CompositionEstimate e, int phase) {
  TuneCandidate c;
  c.phase = phase;
  c.estimate = std::move(e);
  if (c.estimate.refused.empty()) {
    Candidate& comp = c.estimate.composition;
    c.identity = resolved_identity(c.estimate.job);
    // A --candidate's own text, since the label names only the grid's knobs.
    if (comp.origin == "--candidate") {
      std::string text;
      for (const std::string& kv : comp.overrides) text += (text.empty() ? "" : ",") + kv;
      comp.label += " [" + text + "]";
    }
    comp.overrides = explicit_overrides(load_(comp.overrides), comp.overrides);
  }
  const CompositionEstimate& est = c.estimate;
  for (size_t i = 0; i < r_.candidates.size() && est.refused.empty(); ++i) {
    TuneCandidate& same = r_.candidates[i];
    if (same.identity != c.identity) continue;
    if (phase == 1) {
      c.status = "same as #" + std::to_string(i + 1);
      c.reason = "the same composition as #" + std::to_string(i + 1);
      break;
    }
    // Phase 2 races a variant phase 1 pruned or had no time for; one it judged stays judged.
    if (same.status != "pruned" && same.status != "not run") return kNone;
    same.status.clear();
    same.reason.clear();
    same.phase = 2;
    same.race = Contender{};
    same.race.candidate = i;
    return i;
  }
  if (c.status.empty()) {
    if (!est.refused.empty()) {
      c.status = "refused";
      c.reason = first_line(est.refused);
    } else if (!est.fits()) {
      c.status = "does not fit";
      for (const std::string& s : est.short_of) c.reason += (c.reason.empty() ? "" : "; ") + s;
    } else if (!est.pruned.empty()) {
      c.status = "pruned";
      c.reason = est.pruned;
    }
  }
  c.race.racing = c.status.empty();
  c.race.candidate = r_.candidates.size();
  r_.candidates.push_back(std::move(c));
  return r_.candidates.back().race.racing ? r_.candidates.size() - 1 : kNone;
}

void Tuner::estimate() {
  if (args_.hosts != 1 && args_.launcher.empty()) {
    throw ConfigError("--hosts " + std::to_string(args_.hosts) +
                      ": without --launcher, trainer tune starts its trials' ranks on this host; "
                      "inside a Slurm allocation of the job's hosts, add --launcher srun (or "
                      "size the job only, with trainer estimate --hosts)");
  }
  options_.margin = args_.margin;
  JobEstimates estimates = estimate_all(load_, args_.hosts, options_);
  per_host_ = per_host_loader(load_, args_.hosts, options_.ranks_per_host);
  // Every trial, whatever its length, follows the schedule of the job as given (a cosine or
  // linear decay over run.steps would otherwise change with the trial's length).
  plan_.base.push_back("run.decay_steps=" + std::to_string(estimates.given.schedule.total_steps));
  std::vector<CompositionEstimate>& all = estimates.all;
  r_.world = options_.world;
  const CompositionEstimate& yours = all[0];
  if (!yours.refused.empty()) throw ConfigError(yours.refused);
  if (!yours.fits()) {
    std::string why;
    for (const std::string& s : yours.short_of) why += "\n  " + s;
    throw ConfigError("the config as given does not fit this host with a " +
                      std::to_string(static_cast<int>(args_.margin * 100)) +
                      "% margin, and tune runs it as the reference every trial must agree with:" +
                      why + "\n  (trainer estimate shows which compositions fit; start from one)");
  }
  for (CompositionEstimate& e : all) add_candidate(std::move(e), 1);
  for (const std::string& text : args_.candidates) {
    Candidate c;
    c.overrides = parse_arm("candidate", text, "--candidate").overrides;
    c.origin = "--candidate";
    add_candidate(estimate_composition(per_host_, c, options_), 1);
  }
  int racing = 0, no_fit = 0, pruned = 0;
  for (const TuneCandidate& c : r_.candidates) {
    racing += c.race.racing;
    no_fit += c.status == "does not fit";
    pruned += c.status == "pruned";
  }
  out_ << "zt tune: " << request_.config_path << ", " << r_.world << " ranks";
  if (args_.hosts > 1) out_ << " on " << args_.hosts << " hosts";
  if (!args_.launcher.empty()) out_ << ", each trial started by " << args_.launcher[0];
  out_ << ", budget " << seconds_text(args_.budget_s) << "\n  estimate: " << r_.candidates.size()
       << " compositions, " << no_fit << " do not fit (never started), " << pruned
       << " pruned by the estimate, " << racing << " to race\n";
}

// The trial job a candidate can share: one micro batch x grad_accum (the job's data), and the same
// settings of any other key that changes the math (a --candidate may set one: a live job refuses
// arms that differ in it, and on its own the agreement check rejects it).
std::string Tuner::job_key(size_t i) {
  auto it = job_keys_.find(i);
  if (it != job_keys_.end()) return it->second;
  const CompositionEstimate& e = r_.candidates[i].estimate;
  return job_keys_[i] = math_key(e.job, e.composition.overrides);
}

// Your config alone, as long as the longest trial job of the first phase: the losses each trial
// must agree with, and the step time and start-up the budget is planned with.
void Tuner::reference_run() {
  size_t longest = 1;
  std::map<std::string, size_t> groups;
  for (size_t i = 0; i < r_.candidates.size(); ++i) {
    if (r_.candidates[i].race.racing) longest = std::max(longest, ++groups[job_key(i)]);
  }
  TrialJob job;
  job.arms = {r_.candidates[0].estimate.composition};
  job.switch_every = turn_;
  // As long as a trial job of as many arms as phase 1's largest group (at least 4): what jobs
  // hold at most, so the losses of every arm's steps are compared.
  arms_per_job_ = std::clamp<size_t>(longest, 4, kMaxLiveArms);
  job.blocks = 2 * static_cast<int64_t>(arms_per_job_);
  job.name = "reference";
  ArmRunPlan plan = plan_;
  plan.deadline = deadline_;
  out_ << "  reference: your config alone (the losses every trial must agree with)\n";
  const TrialJobResult r = run_trial_job(plan, job, out_);
  if (r.failed) {
    throw ConfigError(
        "the config as given failed its reference run, which tune needs: " + r.failure +
        (r.stopped ? "; give tune a larger --budget (the reference is as long as "
                     "a trial job: lower --trial-steps to shorten it)"
                   : "; run it alone (trainer --config ...) to see why"));
  }
  reference_ = r.metrics;
  r_.reference_restarts = r.metrics.restarts;
  // A --launcher places the ranks itself: every estimate assumed the world of --nproc.
  const size_t ranks = reference_.steps.empty() ? 0 : reference_.steps[0].memory.size();
  if (ranks > 0 && ranks != static_cast<size_t>(r_.world)) {
    throw ConfigError("the reference run had " + std::to_string(ranks) + " ranks, but tune sized " +
                      std::to_string(r_.world) + " (--nproc or launch.nproc)" +
                      (args_.launcher.empty()
                           ? ""
                           : "; " + args_.launcher[0] +
                                 " placed them: give --nproc the allocation's task count and "
                                 "--hosts its node count"));
  }
  ref_step_s_ = median(r.step_s[0]);
  // A restarted run's wall time holds every attempt's start (and the steps of those that died):
  // a start is taken as their mean, not their sum, which left phase 1 no time for a round.
  ref_start_s_ = std::max(1.0,
                          (r.seconds - static_cast<double>(reference_.steps.size()) * ref_step_s_) /
                              (1 + r.metrics.restarts));
}

double Tuner::projected_job_s(size_t arms) const {
  const double steps = static_cast<double>(turn_ * 2 * static_cast<int64_t>(arms));
  // A switch costs about a step; other compositions may be slower than yours.
  return ref_start_s_ + 1.5 * steps * ref_step_s_ + (arms > 1 ? 2.0 * arms * ref_step_s_ : 0);
}

std::vector<std::vector<size_t>> Tuner::jobs_of(const std::vector<size_t>& racing, size_t anchor) {
  // The groups in the order `racing` first names them, so its first candidates run first.
  std::vector<std::string> order;
  std::map<std::string, std::vector<size_t>> groups;
  for (size_t i : racing) {
    const std::string key = job_key(i);
    auto [group, fresh] = groups.try_emplace(key);
    if (fresh) order.push_back(key);
    if (i != anchor) group->second.push_back(i);
  }
  // The anchor (phase 2's leader) runs in every job of its group, so each variant is timed
  // beside it.
  const bool anchored = anchor != kNone &&
                        std::find(racing.begin(), racing.end(), anchor) != racing.end();
  const size_t per_job = anchored ? arms_per_job_ - 1 : arms_per_job_;
  std::vector<std::vector<size_t>> jobs;
  for (const std::string& key : order) {
    const std::vector<size_t>& members = groups[key];
    const bool with_anchor = anchored && key == job_key(anchor);
    if (with_anchor && members.empty()) jobs.push_back({anchor});
    for (size_t at = 0; at < members.size(); at += per_job) {
      const size_t end = std::min(members.size(), at + per_job);
      jobs.emplace_back();
      if (with_anchor) jobs.back().push_back(anchor);
      jobs.back().insert(jobs.back().end(), members.begin() + static_cast<std::ptrdiff_t>(at),
                         members.begin() + static_cast<std::ptrdiff_t>(end));
    }
  }
  return jobs;
}

// One trial job; false when the budget stopped it.
bool Tuner::run_job(const std::vector<size_t>& arms, Clock::time_point until, TuneRound& round) {
  TrialJob job;
  for (size_t i : arms) job.arms.push_back(r_.candidates[i].estimate.composition);
  job.switch_every = turn_;
  job.blocks = 2;
  job.name = "trial-" + std::to_string(++jobs_run_);
  ArmRunPlan plan = plan_;
  plan.deadline = until;
  const TrialJobResult r = run_trial_job(plan, job, out_);
  round.jobs.push_back(job.name);
  for (size_t a = 0; a < arms.size(); ++a) {
    TuneCandidate& c = r_.candidates[arms[a]];
    c.jobs.push_back(job.name);
    c.rss = std::max(c.rss, r.rss[a]);
    c.restarts += r.metrics.restarts;
    c.race.step_groups.push_back(r.step_s[a]);
    c.race.jobs.push_back(jobs_run_);
  }
  // The losses first: a job the budget stopped is checked as far as it went. The gradient norms
  // too where the job computes what your config does but for rounding: the same micro batch
  // split, and no knob that changes the numbers (bf16 states, a codec), whose losses --rtol
  // judges.
  std::string what;
  const int64_t step = first_disagreement(r.metrics, reference_, args_.rtol,
                                          job_key(arms[0]) == job_key(0), what);
  if (step > 0) {
    for (const StepRecord& s : r.metrics.steps) {
      if (s.step != step) continue;
      TuneCandidate& c = r_.candidates[arms[std::min<size_t>(
          static_cast<size_t>(std::max(0, arm_of_record(s))), arms.size() - 1)]];
      c.race.racing = false;
      c.status = "changes the math";
      c.reason = "rejected, changes the math: " + what;
      out_ << "  " << c.estimate.composition.label << ": " << c.reason << "\n";
    }
  }
  if (r.failed && r.stopped) {
    out_ << "  " << job.name << " stopped at the budget's end\n";
    return false;
  }
  if (r.failed && r.failed_arm >= 0) {
    TuneCandidate& c = r_.candidates[arms[static_cast<size_t>(r.failed_arm)]];
    c.race.racing = false;
    c.status = "failed";
    c.reason = r.failure;
    out_ << "  trial failed: " << c.estimate.composition.label << ": " << r.failure
         << "; the search goes on\n";
  }
  return true;
}

// Whether the round fits the time left. The first round runs the phase's leader so far (phase
// 2's: phase 1's winner) first, then what the user named (their config, --candidate), then the
// grid by the estimate, so that a round the budget stops on a slower machine than projected has
// measured what was named; and the candidates the estimate ranks last (most bytes sent and
// offloaded per step, a byte between hosts counting as ten: traffic_cost) wait until it fits.
// Later rounds stop the race instead. False when fewer than two are left to race.
bool Tuner::fit_round_to_time(int round, const std::vector<size_t>& indices, size_t anchor,
                              Clock::time_point until, std::vector<size_t>& racing) {
  auto projected = [&] {
    double s = 0;
    for (const auto& job : jobs_of(racing, anchor)) s += projected_job_s(job.size());
    return s;
  };
  if (round == 1) {
    std::stable_sort(racing.begin(), racing.end(), [&](size_t a, size_t b) {
      auto rank = [&](size_t i) {
        const CompositionEstimate& e = r_.candidates[i].estimate;
        const bool named = e.composition.origin != "grid" &&
                           e.composition.origin != "around the leader";
        return std::make_pair(i == indices[0] ? 0 : named ? 1 : 2, e.traffic_cost());
      };
      return rank(a) < rank(b);
    });
  }
  if (projected() <= left(until)) return true;
  if (round > 1) return false;
  while (racing.size() > 1 && projected() > left(until)) {
    TuneCandidate& c = r_.candidates[racing.back()];
    c.race.racing = false;
    c.status = "not run";
    c.reason = "the budget has no time for it: the estimate ranks it last of those left";
    racing.pop_back();
  }
  return racing.size() > 1;
}

// One round: every trial job of those racing, then the judgement (race.h). Returns whether the
// budget stopped it.
bool Tuner::run_round(int phase, int round, const std::vector<size_t>& racing, size_t anchor,
                      Clock::time_point until, RaceRules& rules) {
  TuneRound t;
  t.phase = phase;
  t.round = round;
  t.racing_before = static_cast<int>(racing.size());
  const auto t0 = Clock::now();
  out_ << "  phase " << phase << " round " << round << ": " << racing.size() << " racing\n";
  bool stopped = false;
  for (const auto& job : jobs_of(racing, anchor)) {
    if (!run_job(job, until, t)) {
      stopped = true;
      break;
    }
  }
  std::vector<Contender> contenders;
  for (size_t i : racing) {
    if (r_.candidates[i].race.racing && r_.candidates[i].race.timed())
      contenders.push_back(r_.candidates[i].race);
  }
  if (!contenders.empty()) {
    rules.halve = !stopped;
    judge_round(contenders, round,
                "phase " + std::to_string(phase) + " round " + std::to_string(round), rules);
    for (const Contender& c : contenders) {
      TuneCandidate& cand = r_.candidates[c.candidate];
      cand.race = c;
      cand.round_medians.push_back(c.median_s());
      if (!c.racing) {
        cand.status = "left";
        cand.reason = c.left;
      }
    }
  }
  t.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  for (size_t i : racing) t.racing_after += r_.candidates[i].race.racing;
  r_.rounds.push_back(t);
  return stopped;
}

// The leader: the fastest still racing (a failed or rejected one is out); without one, the
// phase's first if it still races, else your config (which ran as the reference). Those still
// racing but the leader lost to it.
size_t Tuner::leader_of(int phase, const std::vector<size_t>& indices) {
  size_t leader = kNone;
  for (size_t i : indices) {
    const Contender& c = r_.candidates[i].race;
    if (!c.racing || !c.timed()) continue;
    if (leader == kNone || c.median_s() < r_.candidates[leader].race.median_s()) leader = i;
  }
  if (leader == kNone) {
    leader = !indices.empty() && r_.candidates[indices[0]].race.racing ? indices[0] : 0;
  }
  for (size_t i : indices) {
    TuneCandidate& c = r_.candidates[i];
    if (i == leader || !c.race.racing) continue;
    c.race.racing = false;
    c.status = "left";
    char buf[200];
    std::snprintf(buf, sizeof(buf),
                  "slower than the leader when phase %d ended: %.2fx its step time (95%% CI "
                  "%.2f-%.2f)",
                  phase, c.race.vs_leader.ratio, c.race.vs_leader.low, c.race.vs_leader.high);
    c.reason = !c.race.timed() ? "not timed before phase " + std::to_string(phase) + " ended" : buf;
  }
  return leader;
}

size_t Tuner::race(int phase, std::vector<size_t> indices, Clock::time_point until) {
  RaceRules rules;
  rules.seed = static_cast<uint64_t>(phase);
  const size_t anchor = phase == 2 && !indices.empty() ? indices[0] : kNone;
  for (int round = 1; round <= kMaxRounds; ++round) {
    std::vector<size_t> racing;
    for (size_t i : indices) {
      if (r_.candidates[i].race.racing) racing.push_back(i);
    }
    if (racing.size() <= 1) break;
    const size_t named = racing.size();
    if (!fit_round_to_time(round, indices, anchor, until, racing)) {
      if (round == 1) {
        char line[200];
        std::snprintf(line, sizeof(line),
                      "  phase %d: no time for its %zu candidates: a trial job of two is projected "
                      "at %.0f s, %.0f s of the phase's time are left\n",
                      phase, named, projected_job_s(2), std::max(0.0, left(until)));
        out_ << line;
      }
      break;
    }
    if (run_round(phase, round, racing, anchor, until, rules)) break;
  }
  return leader_of(phase, indices);
}

void Tuner::final_ab() {
  const TuneCandidate& w = r_.candidates[r_.winner];
  if (r_.winner == 0) {
    r_.final_note = "the winner is your config: nothing to compare";
    return;
  }
  ArmRunPlan plan = plan_;
  plan.out_dir = args_.out_dir + "/final-ab";
  plan.steps = final_steps();
  plan.deadline = deadline_;
  for (const char* kv : kTrialOverrides) {
    plan.base.push_back(kv);
  }
  ArmResult a, b;
  a.arm.name = "A";
  a.label = "your config";
  b.arm.name = "B";
  b.arm.overrides = w.estimate.composition.overrides;
  b.label = w.estimate.composition.label;
  AbArgs ab;
  ab.reps = 2;
  ab.warmup = 2;
  ab.rtol = args_.rtol;
  // Another micro batch split, or a knob that changes the numbers: the A/B's own check (losses
  // and gradient norms) is off, and the losses are compared here (first_disagreement says why
  // the norms are not).
  const bool same_split = split(r_.winner) == split(0);
  const bool same_math = job_key(r_.winner) == job_key(0);
  std::vector<std::string> math_keys;
  if (!same_split) math_keys = {"data.micro_batch", "data.grad_accum"};
  for (const std::string& kv : math_overrides(w.estimate.job, w.estimate.composition.overrides))
    math_keys.push_back(kv.substr(0, kv.find('=')));
  out_ << "  final A/B: your config (A) against the winner (B)\n";
  try {
    r_.final_ab = run_ab_arms(plan, std::move(a), std::move(b), ab,
                              same_math ? std::vector<std::string>{} : math_keys, out_);
    r_.final_ran = true;
  } catch (const Error& e) {
    r_.final_note = "the final A/B did not finish: " + first_line(e.what());
    return;
  }
  compare_final_losses(same_math, same_split);
  if (!same_math) {
    // The A/B's own check was off (not --allow-different-math, which its verdict named): tune
    // compared the losses, and its verdict says so.
    r_.final_ab.unchecked_reason = "tune compared them: " + r_.final_losses;
    r_.final_ab.verdict = verdict_line(r_.final_ab);
  }
  make_output_folder(plan.out_dir, "--out");
  write_ab_json(r_.final_ab, plan.out_dir + "/ab.json");
}

void Tuner::compare_final_losses(bool same_math, bool same_split) {
  const Agreement& g = r_.final_ab.agreement;
  if (same_math) {
    r_.final_losses_agree = g.agree;
    r_.final_losses = g.agree ? (g.identical ? "losses identical" : "losses agree")
                              : "LOSSES DIVERGE: " + g.what + " at step " +
                                    std::to_string(g.first_step);
    return;
  }
  const RunMetrics& ref = r_.final_ab.a.runs.at(0);
  for (const ArmResult* arm : {&r_.final_ab.a, &r_.final_ab.b}) {
    for (const RunMetrics& run : arm->runs) {
      std::string what;
      if (first_disagreement(run, ref, args_.rtol, false, what) > 0) {
        r_.final_losses_agree = false;
        r_.final_losses = "LOSSES DIVERGE: " + what;
        return;
      }
    }
  }
  // A codec's or a bf16 state's gap grows with the steps, and the final A/B runs seconds of
  // them: the verdict says how few, and where to look further.
  char buf[400];
  std::snprintf(buf, sizeof(buf), "losses agree within %g over %zu steps (%s)", args_.rtol,
                ref.steps.size(),
                same_split ? "a setting that changes the numbers, whose gap can grow over more "
                             "steps: trainer ab --allow-different-math --steps 300 shows it"
                           : "another micro batch split");
  r_.final_losses = buf;
}

void Tuner::write_outputs() {
  const std::string& dir = args_.out_dir;
  make_output_folder(dir, "--out");
  const TuneCandidate& w = r_.candidates[r_.keep_yours() ? 0 : r_.winner];
  const Config given = load_({});
  const Config winner = load_(w.estimate.composition.overrides);
  std::vector<std::vector<std::string>> changes;
  for (const std::string& kv : w.estimate.composition.overrides) {
    const std::string key = kv.substr(0, kv.find('='));
    std::string was;
    try {
      was = config_value(given, key);
    } catch (const Error&) {
      was = "(not set)";
    }
    if (was != config_value(winner, key)) changes.push_back({key, was, config_value(winner, key)});
  }
  // tuned.toml last: there, it says the whole set was written.
  write_tune_json(r_, dir + "/tune.json");
  write_tune_html(r_, dir + "/report.html");
  write_tuned_toml(dir + "/tuned.toml", winner.to_toml(), changes, r_.verdict);
}

int Tuner::run() {
  estimate();
  const OutFolderLock out_lock(args_.out_dir, "trainer tune");  // made and held to the end
  const std::vector<std::string> earlier = remove_previous_outputs(
      args_.out_dir, {"tune.json", "tuned.toml", "report.html", "final-ab/ab.json"});
  if (!earlier.empty()) {
    out_ << "tune: removed an earlier tune's results from " << args_.out_dir << " (";
    for (size_t i = 0; i < earlier.size(); ++i) out_ << (i ? ", " : "") << earlier[i];
    out_ << "); this one writes its own at its end\n";
  }
  reference_run();
  // The final A/B's four runs are kept out of the search's time.
  const double reserve = 4 *
                         (ref_start_s_ + 1.2 * static_cast<double>(final_steps()) * ref_step_s_);
  const double search = std::max(0.0, left(deadline_) - reserve);
  const auto phase1_end = Clock::now() +
                          std::chrono::milliseconds(static_cast<int64_t>(search * 600));
  const auto search_end = Clock::now() +
                          std::chrono::milliseconds(static_cast<int64_t>(search * 1000));
  std::vector<size_t> first;
  for (size_t i = 0; i < r_.candidates.size(); ++i) {
    if (r_.candidates[i].race.racing) first.push_back(i);
  }
  r_.could_race = first.size();
  size_t leader = race(1, first, phase1_end);
  // Phase 2: one knob at a time around the leader, raced against it afresh.
  // Copied: add_candidate grows r_.candidates, which would leave a reference dangling.
  const CompositionEstimate lead = r_.candidates[leader].estimate;
  std::vector<size_t> second = {leader};
  for (const Candidate& c : compositions_around(lead.job, lead.composition, args_.hosts)) {
    const size_t i = add_candidate(estimate_composition(per_host_, c, options_), 2);
    if (i != kNone && std::find(second.begin(), second.end(), i) == second.end())
      second.push_back(i);
  }
  r_.could_race += second.size() - 1;
  if (second.size() > 1) {
    Contender& l = r_.candidates[leader].race;
    l.step_groups.clear();  // measured again beside the variants, in the same jobs
    l.jobs.clear();
    out_ << "  phase 2: " << second.size() - 1 << " variants of the leader ("
         << lead.composition.label << ")\n";
    leader = race(2, second, search_end);
  }
  r_.winner = leader;
  r_.candidates[leader].status = "winner";
  r_.candidates[leader].reason.clear();
  final_ab();
  r_.verdict = tune_verdict(r_);
  r_.elapsed_s = elapsed();
  write_outputs();
  out_ << "verdict: " << r_.verdict << "\n"
       << "tune: " << seconds_text(r_.elapsed_s) << " of the " << seconds_text(r_.budget_s)
       << " budget; " << args_.out_dir << "/tuned.toml, every candidate in " << args_.out_dir
       << "/tune.json, the race in " << args_.out_dir << "/report.html\n";
  return r_.final_ran && !r_.final_losses_agree ? static_cast<int>(ErrorKind::kNumeric) : 0;
}

}  // namespace

int run_tune(const TuneRequest& request, std::ostream& out) {
  Tuner tuner(request, out);
  return tuner.run();
}

}  // namespace zt::trainer
