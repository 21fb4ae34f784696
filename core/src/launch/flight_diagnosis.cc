#include "zt/host/flight_diagnosis.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "zt/bytes.h"

namespace zt {

namespace {

using nlohmann::json;

struct Op {
  int64_t seq = 0;
  std::string op, dtype, phase, state;
  int64_t bytes = 0;
};

struct RankRecord {
  int rank = 0;
  std::map<int64_t, Op> world_ops;  // the job-wide communicator's, by sequence number
  std::string waiting;              // the training thread's blocking wait, if any
  double waiting_s = 0;
  std::string doing;  // its innermost activity
  int64_t last_issued = 0, last_completed = 0;
};

std::string describe(const Op& o) {
  return o.op + " #" + std::to_string(o.seq) + " (" + size_text(o.bytes) + " " + o.dtype +
         (o.phase.empty() ? "" : ", " + o.phase) + ")";
}

std::optional<RankRecord> read_rank(const std::string& path, int rank) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  json j;
  try {
    in >> j;
    RankRecord r;
    r.rank = rank;
    const int64_t now = j.value("now_us", int64_t{0});
    for (const auto& t : j.at("threads")) {
      if (t.value("lane", "") != "compute") continue;
      r.waiting = t.value("waiting", "");
      if (!r.waiting.empty())
        r.waiting_s = static_cast<double>(now - t.value("waiting_since_us", now)) / 1e6;
      const auto& stack = t.at("stack");
      if (!stack.empty()) r.doing = stack.back().get<std::string>();
    }
    for (const auto& c : j.at("collectives")) {
      if (c.value("group", "") != "world") continue;
      Op o;
      o.seq = c.value("seq", int64_t{0});
      o.op = c.value("op", "");
      o.dtype = c.value("dtype", "");
      o.phase = c.value("phase", "");
      o.state = c.value("state", "");
      o.bytes = c.value("bytes", int64_t{0});
      r.last_issued = std::max(r.last_issued, o.seq);
      if (o.state == "done") r.last_completed = std::max(r.last_completed, o.seq);
      r.world_ops[o.seq] = o;
    }
    return r;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

bool same(const Op& a, const Op& b) {
  return a.op == b.op && a.bytes == b.bytes && a.dtype == b.dtype && a.phase == b.phase;
}

// The first sequence number at which two ranks recorded different collectives.
std::string first_disagreement(const std::vector<RankRecord>& ranks) {
  const RankRecord& base = ranks.front();
  for (const auto& [seq, op] : base.world_ops) {
    for (size_t i = 1; i < ranks.size(); ++i) {
      auto it = ranks[i].world_ops.find(seq);
      if (it == ranks[i].world_ops.end() || same(op, it->second)) continue;
      return "the ranks' collectives differ at #" + std::to_string(seq) + " on world: rank " +
             std::to_string(base.rank) + " issued " + describe(op) + ", rank " +
             std::to_string(ranks[i].rank) + " issued " + describe(it->second) +
             "; a rank skipped or reordered a collective (launch.check_collectives = true stops "
             "at the first such op)";
    }
  }
  return "";
}

// The sequence number of the collective a wait names ("all_gather #24 (...)"), or 0.
int64_t waited_seq(const std::string& waiting) {
  const size_t at = waiting.find(" #");
  if (at == std::string::npos) return 0;
  return std::strtoll(waiting.c_str() + at + 2, nullptr, 10);
}

std::string whereabouts(const RankRecord& r) {
  if (!r.waiting.empty()) return "it is in " + r.waiting;
  if (!r.doing.empty()) return "it is in " + r.doing;
  return "it is outside any traced phase";
}

}  // namespace

FlightDiagnosis diagnose_flight(const std::string& dir, int world) {
  std::vector<RankRecord> ranks;
  std::vector<int> missing;
  for (int r = 0; r < world; ++r) {
    auto rec = read_rank(dir + "/rank-" + std::to_string(r) + ".json", r);
    if (rec) ranks.push_back(std::move(*rec));
    else missing.push_back(r);
  }
  if (ranks.empty()) return {};
  std::string tail;
  for (int r : missing) {
    tail += "; rank " + std::to_string(r) + " left no flight record (it died before it could)";
  }
  if (ranks.size() > 1) {
    const std::string differ = first_disagreement(ranks);
    if (!differ.empty()) return {differ + tail, true};
  }
  // The rank blocked longest in a collective, and the rank furthest behind it.
  const RankRecord* victim = nullptr;
  for (const RankRecord& r : ranks) {
    const bool in_collective = r.waiting.find(" #") != std::string::npos &&
                               r.waiting.rfind("offload ", 0) != 0;
    if (in_collective && (!victim || r.waiting_s > victim->waiting_s)) victim = &r;
  }
  if (!victim) {
    std::string line;
    for (const RankRecord& r : ranks) {
      line += (line.empty() ? "" : "; ") + std::string("rank ") + std::to_string(r.rank) +
              "'s last completed collective is #" + std::to_string(r.last_completed) + " and " +
              whereabouts(r);
    }
    return {line + tail, false};
  }
  char since[32];
  std::snprintf(since, sizeof since, "%.1f s", victim->waiting_s);
  std::string line = "rank " + std::to_string(victim->rank) + " waits in " + victim->waiting +
                     " since " + since;
  // The rank behind it: one that never issued the collective waited in. Ranks that reached it
  // too are no culprits (with a rank gone without a record they all wait there alike, and the
  // lowest of them was named as if it held the others back).
  // Only the job-wide communicator's numbers compare with last_issued (a split's, MiCS's
  // shard group, count apart).
  const std::string on_world = " on world";
  const bool waits_on_world = victim->waiting.size() >= on_world.size() &&
                              victim->waiting.compare(victim->waiting.size() - on_world.size(),
                                                      on_world.size(), on_world) == 0;
  const int64_t waited = waits_on_world ? waited_seq(victim->waiting) : 0;
  // A rank that died without a record died first (the launcher stopped the others on its
  // death), and a split's numbers say nothing of who is behind: a live rank still computing
  // when the others were stopped was named as the one holding them back.
  const bool can_name = missing.empty() && waited > 0;
  const RankRecord* behind = nullptr;
  for (const RankRecord& r : ranks) {
    if (!can_name || &r == victim || r.last_issued >= waited) continue;
    if (!behind || r.last_issued < behind->last_issued) behind = &r;
  }
  const bool all_reached = waited > 0 &&
                           std::all_of(ranks.begin(), ranks.end(), [&](const auto& r) {
                             return &r == victim || r.last_issued >= waited;
                           });
  if (!missing.empty() && all_reached) {
    line += "; every rank with a record reached #" + std::to_string(waited) +
            ": the one it waits for is among those that left none";
  } else if (!missing.empty()) {
    line += "; the rank(s) that left no record (below) are the first to look at: the others "
            "are where the stop found them";
  } else if (behind) {
    line += "; rank " + std::to_string(behind->rank) + "'s last completed is #" +
            std::to_string(behind->last_completed) + " (last issued #" +
            std::to_string(behind->last_issued) + ") and " + whereabouts(*behind);
  }
  return {line + tail, true};
}

}  // namespace zt
