// What `trainer tune` found, and the files it writes into its --out folder:
//   tuned.toml  the winner as a complete config (the user's with the winner's overrides), a
//               comment on each key the search changed saying what it was;
//   tune.json   every candidate: its estimate, measured step times with the interval against
//               the leader, its memory, and why it left (or never started);
//   report.html the race: the verdict, each candidate's median step time per round, the table.
// The verdict is the final `trainer ab` of the winner against the user's config, not the
// search's own numbers.
// Thread safety: free functions of their inputs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ab/ab_report.h"
#include "tune/composition_estimate.h"
#include "tune/race.h"

namespace zt::trainer {

struct TuneCandidate {
  CompositionEstimate estimate;
  int phase = 1;       // 1: the grid (and your config, --candidate); 2: around the leader
  Contender race;      // step times and why it left
  std::string status;  // "winner", "left", "failed", "changes the math", "does not fit",
                       // "pruned", "refused", "same as #N", "not run"
  std::string reason;  // one line for every status but "winner"
  std::vector<std::string> jobs;      // the trial jobs it ran in
  std::vector<double> round_medians;  // its median step time after each round it ran
  int64_t rss = 0;                    // the largest resident memory of a rank while it trained
  int restarts = 0;      // how often a rank of the trial jobs it ran in died and all started again
  std::string identity;  // its resolved config without comments: what makes two the same
};

struct TuneRound {
  int phase = 0, round = 0;
  std::vector<std::string> jobs;
  double seconds = 0;
  int racing_before = 0, racing_after = 0;
};

struct TuneResult {
  std::string config_path;
  std::vector<TuneCandidate> candidates;  // [0] is the config as given
  std::vector<TuneRound> rounds;
  int reference_restarts = 0;  // of the reference run (your config alone), as restarts above
  size_t winner = 0;
  // Candidates that entered a race (your config among them): 1 when every other composition was
  // pruned by the estimate or does not fit, and then no round runs whatever the budget.
  size_t could_race = 0;
  bool final_ran = false;
  AbResult final_ab;       // A: your config, B: the winner
  std::string final_note;  // why there was no final A/B, when there was none
  bool final_losses_agree = true;
  // tuned.toml takes the search's winner only as the final A/B confirmed it: that A/B ran, the
  // losses agree, and the winner is not clearly slower than your config (its interval below 1).
  // Else it keeps your config (a winner that failed its final runs, or diverged, was adopted).
  bool keep_yours() const { return !final_ran || !final_losses_agree || final_ab.speedup.high < 1; }
  std::string final_losses;  // "losses identical", "losses agree within 0.001 (...)", ...
  std::string verdict;
  double budget_s = 0, elapsed_s = 0;
  int world = 1;
  double margin = 0;
  int64_t trial_steps = 0;
};

// "60 s": a time in tune's lines, whole seconds.
std::string seconds_text(double s);

// The one-line verdict from the final A/B (or the reason there is none).
std::string tune_verdict(const TuneResult& r);

// `winner_toml`: the winner's resolved config (Config::to_toml); `changes`: per key the search
// changed, {key, your value, the winner's}.
void write_tuned_toml(const std::string& path, const std::string& winner_toml,
                      const std::vector<std::vector<std::string>>& changes,
                      const std::string& verdict);
void write_tune_json(const TuneResult& r, const std::string& path);
void write_tune_html(const TuneResult& r, const std::string& path);

}  // namespace zt::trainer
