#include "tune/tune_report.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "report/report_file.h"
#include "report/svg_chart.h"
#include "tune/estimate_json.h"
#include "zt/bytes.h"

namespace zt::trainer {

std::string seconds_text(double s) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.0f s", s);
  return buf;
}

std::string tune_verdict(const TuneResult& r) {
  const TuneCandidate& w = r.candidates[r.winner];
  if (r.winner == 0 && r.rounds.empty() && r.could_race == 1) {
    return "nothing else to race: every other composition was pruned by the estimate or does not "
           "fit (tune.json says why for each), so your config stays (" +
           w.estimate.composition.label + ")";
  }
  if (r.winner == 0 && r.rounds.empty()) {
    // Not a verdict on speed: no other composition ran a step.
    return "nothing raced: after the reference run, the " + seconds_text(r.budget_s) +
           " budget had no time for a trial job and the final A/B, so your config stays (" +
           w.estimate.composition.label + "); give tune a larger --budget";
  }
  if (r.winner == 0) {
    return "your config is the fastest composition found (" + w.estimate.composition.label + ")";
  }
  if (!r.final_ran) {
    return "the search's winner (" + w.estimate.composition.label +
           ") is not confirmed: " + r.final_note +
           "; your config stays (the winner's settings are in tune.json)";
  }
  const RatioInterval& s = r.final_ab.speedup;
  if (!r.final_losses_agree) {
    char buf[200];
    std::snprintf(buf, sizeof(buf), " ran %.2fx the config you gave (95%% CI %.2f-%.2f), but ",
                  s.ratio, s.low, s.high);
    return "the search's winner (" + w.estimate.composition.label + ")" + buf + r.final_losses +
           ": your config stays";
  }
  if (r.keep_yours()) {
    char buf[200];
    std::snprintf(buf, sizeof(buf),
                  " ran %.2fx the config you gave in the final A/B (95%% CI %.2f-%.2f): your "
                  "config stays",
                  s.ratio, s.low, s.high);
    return "the search's winner (" + w.estimate.composition.label + ")" + buf;
  }
  char buf[200];
  std::snprintf(buf, sizeof(buf), ": %.2fx the config you gave (95%% CI %.2f-%.2f)", s.ratio, s.low,
                s.high);
  return w.estimate.composition.label + buf + (r.final_losses.empty() ? "" : ", ") + r.final_losses;
}

void write_tuned_toml(const std::string& path, const std::string& winner_toml,
                      const std::vector<std::vector<std::string>>& changes,
                      const std::string& verdict) {
  std::istringstream in(winner_toml);
  std::ostringstream out;
  out << "# Tuned by trainer tune: " << verdict << "\n";
  out << "# Keys the search changed carry a '# tune:' comment with the value they had.\n";
  std::string section;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line[0] == '[') section = line.substr(1, line.find(']') - 1);
    for (const auto& c : changes) {
      const std::string& key = c[0];
      const size_t dot = key.rfind('.');
      if (key.substr(0, dot) != section) continue;
      const std::string name = key.substr(dot + 1);
      if (line.rfind(name + " = ", 0) != 0) continue;
      const size_t comment = line.find("  #");
      if (comment != std::string::npos) line.resize(comment);
      line += "  # tune: was " + c[1];
    }
    out << line << "\n";
  }
  write_report_file(path, out.str());
}

namespace {

int restarts_of(const ArmResult& arm) {
  int n = 0;
  for (const RunMetrics& run : arm.runs) n += run.restarts;
  return n;
}

nlohmann::json candidate_json(const TuneCandidate& c, size_t index) {
  nlohmann::json j;
  j["index"] = index;
  j["composition"] = c.estimate.composition.label;
  j["overrides"] = c.estimate.composition.overrides;
  j["origin"] = c.estimate.composition.origin;
  j["phase"] = c.phase;
  j["status"] = c.status;
  if (!c.reason.empty()) j["reason"] = c.reason;
  j["estimate"] = estimate_json(c.estimate);
  if (c.race.timed()) {
    const std::vector<double> steps = c.race.step_s();
    j["measured"] = {{"steps_timed", steps.size()},
                     {"median_step_s", c.race.median_s()},
                     {"p10_step_s", percentile(steps, 10)},
                     {"p90_step_s", percentile(steps, 90)},
                     {"vs_leader",
                      {{"ratio", c.race.vs_leader.ratio},
                       {"low", c.race.vs_leader.low},
                       {"high", c.race.vs_leader.high}}},
                     {"round_medians_s", c.round_medians},
                     {"peak_rss", c.rss},
                     {"restarts", c.restarts},
                     {"jobs", c.jobs}};
  }
  if (c.race.left_round > 0) j["left_round"] = c.race.left_round;
  return j;
}

}  // namespace

void write_tune_json(const TuneResult& r, const std::string& path) {
  nlohmann::json j;
  j["config"] = r.config_path;
  j["world"] = r.world;
  j["budget_s"] = r.budget_s;
  j["elapsed_s"] = r.elapsed_s;
  j["margin"] = r.margin;
  j["trial_steps"] = r.trial_steps;
  j["verdict"] = r.verdict;
  j["winner"] = r.winner;
  nlohmann::json rounds = nlohmann::json::array();
  for (const TuneRound& t : r.rounds) {
    rounds.push_back({{"phase", t.phase},
                      {"round", t.round},
                      {"jobs", t.jobs},
                      {"seconds", t.seconds},
                      {"racing_before", t.racing_before},
                      {"racing_after", t.racing_after}});
  }
  j["rounds"] = rounds;
  j["reference_restarts"] = r.reference_restarts;
  nlohmann::json all = nlohmann::json::array();
  for (size_t i = 0; i < r.candidates.size(); ++i)
    all.push_back(candidate_json(r.candidates[i], i));
  j["candidates"] = all;
  if (r.final_ran) {
    const AbResult& f = r.final_ab;
    j["final_ab"] = {{"a", f.a.label},
                     {"b", f.b.label},
                     {"a_restarts", restarts_of(f.a)},
                     {"b_restarts", restarts_of(f.b)},
                     {"a_median_step_s", f.a.median_s},
                     {"b_median_step_s", f.b.median_s},
                     {"speedup", f.speedup.ratio},
                     {"low", f.speedup.low},
                     {"high", f.speedup.high},
                     {"losses_agree", r.final_losses_agree},
                     {"losses", r.final_losses},
                     {"losses_identical", f.agreement.checked && f.agreement.identical},
                     {"verdict", f.verdict}};
  } else {
    j["final_ab"] = {{"ran", false}, {"why", r.final_note}};
  }
  write_report_file(path, j.dump(1) + "\n");
}

namespace {

std::string ms(double s) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f", s * 1000);
  return buf;
}

// Each raced candidate's median step time after each round it ran: the race as it went.
std::string race_chart(const TuneResult& r) {
  std::vector<svg::Series> series;
  const auto& colors = svg::palette();
  int rounds_total = static_cast<int>(r.rounds.size());
  for (size_t i = 0; i < r.candidates.size(); ++i) {
    const TuneCandidate& c = r.candidates[i];
    if (c.round_medians.empty()) continue;
    svg::Series s;
    s.name = "#" + std::to_string(i + 1) + " " + c.estimate.composition.label;
    s.color = colors[series.size() % colors.size()];
    // Its rounds are the last ones of its phase it ran in: placed by the round index overall.
    int first = 0;
    for (int k = 0; k < rounds_total; ++k) {
      if (r.rounds[k].phase == c.phase) {
        first = k;
        break;
      }
    }
    for (size_t k = 0; k < c.round_medians.size(); ++k) {
      s.points.push_back({static_cast<double>(first + k + 1), c.round_medians[k] * 1000});
    }
    series.push_back(std::move(s));
  }
  if (series.empty()) return "";
  return svg::line_chart("race", "median step time of each candidate after each round", "round",
                         "ms per step", series, {}, true);
}

}  // namespace

void write_tune_html(const TuneResult& r, const std::string& path) {
  std::ostringstream s;
  s << svg::page_head("zt tune: " + r.config_path);
  s << "<h1>zt tune: " << svg::escape(r.config_path) << "</h1>\n";
  s << "<p><b>verdict:</b> " << svg::escape(r.verdict) << "</p>\n";
  char buf[256];
  std::snprintf(buf, sizeof(buf),
                "<p>%zu candidates, %zu rounds, %.0f s of a %.0f s budget, %d ranks, fit margin "
                "%.0f%%.</p>\n",
                r.candidates.size(), r.rounds.size(), r.elapsed_s, r.budget_s, r.world,
                r.margin * 100);
  s << buf;
  s << race_chart(r);
  s << "<table><tr><th>#</th><th>composition</th><th>status</th><th>median ms/step</th>"
       "<th>vs leader (95% CI)</th><th>peak RSS</th><th>estimated RAM/rank</th><th>why</th></tr>\n";
  for (size_t i = 0; i < r.candidates.size(); ++i) {
    const TuneCandidate& c = r.candidates[i];
    std::string versus, median;
    if (c.race.timed()) {
      median = ms(c.race.median_s());
      std::snprintf(buf, sizeof(buf), "%.2fx (%.2f-%.2f)", c.race.vs_leader.ratio,
                    c.race.vs_leader.low, c.race.vs_leader.high);
      versus = buf;
    }
    const std::string ram = c.estimate.refused.empty() ? size_text(c.estimate.fit.host.total())
                                                       : "";
    s << "<tr><td>" << i + 1 << "</td><td>" << svg::escape(c.estimate.composition.label)
      << "</td><td>" << svg::escape(c.status) << "</td><td>" << median << "</td><td>" << versus
      << "</td><td>" << (c.rss > 0 ? size_text(c.rss) : "") << "</td><td>" << ram << "</td><td>"
      << svg::escape(c.reason) << "</td></tr>\n";
  }
  s << "</table>\n";
  if (r.final_ran) {
    s << "<h2>Final A/B (A: your config, B: the winner)</h2><p>" << svg::escape(r.final_ab.verdict)
      << "</p>\n";
  }
  s << svg::page_foot();
  write_report_file(path, s.str());
}

}  // namespace zt::trainer
