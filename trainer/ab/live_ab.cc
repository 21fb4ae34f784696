#include "ab/live_ab.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "ab/ab_stats.h"
#include "zt/error.h"
#include "zt/host/compose.h"
#include "zt/host/plugin_loader.h"

namespace zt::trainer {

namespace {

// The plugins an arm selects, loaded now into the job's catalog, which composes every arm: a
// missing or broken one fails here.
void load_plugins(const EngineSettings& arm, PluginCatalog& catalog) {
  catalog.comm(arm.comm.id);
  if (!arm.shard_stands_in) catalog.shard(arm.shard.id);
  catalog.optimizer(arm.optimizer.id);
  for (const PluginChoice* role : {&arm.offload_optimizer, &arm.offload_param}) {
    if (role->chosen()) catalog.offload(role->id, role->key);
  }
}

// One arm has nothing to alternate with. More than two (what trainer tune races in one job) are
// bounded so that each gets turns in a job of reasonable length.
void check_arm_count(const AbSettings& ab) {
  if (ab.arms.size() == 1) {
    throw ConfigError(ab.arms_where +
                      ": ab.arms has one arm, nothing to alternate with; give two or more "
                      "(e.g. arms = [\"plugins.shard=shard_tensor\", "
                      "\"plugins.shard=shard_bucket\"]) or remove it");
  }
  if (ab.arms.size() > kMaxLiveArms) {
    throw ConfigError(ab.arms_where + ": ab.arms has " + std::to_string(ab.arms.size()) +
                      " arms; a live job alternates at most " + std::to_string(kMaxLiveArms) +
                      " (run one job per group of arms)");
  }
}

// `inner` is `outer` or lies inside it, both as absolute paths without `..` (symbolic links
// resolved where the folders exist).
bool within(const std::filesystem::path& inner, const std::filesystem::path& outer) {
  std::error_code ec;
  const std::filesystem::path in = std::filesystem::weakly_canonical(inner, ec).lexically_normal();
  const std::filesystem::path out = std::filesystem::weakly_canonical(outer, ec).lexically_normal();
  auto i = in.begin();
  for (auto o = out.begin(); o != out.end(); ++o, ++i) {
    if (o->empty()) continue;  // the trailing "" of a path ending in '/'
    if (i == in.end() || *i != *o) return false;
  }
  return true;
}

// The switch folder is pruned while the job runs and its checkpoints removed at its end: never
// one of the job's own folders, nor a folder holding them.
void check_switch_dir(const JobSettings& settings) {
  const AbSettings& ab = settings.ab;
  for (const std::string& own : {settings.run.out_dir, settings.checkpoint.dir}) {
    if (within(own, ab.switch_dir)) {
      throw ConfigError(ab.switch_dir_where + ": ab.switch_dir = '" + ab.switch_dir +
                        "' holds the job's own folder " + own +
                        ", whose checkpoints a switch would prune and the job's end remove; give "
                        "a folder of its own (or '' for <run.out_dir>/ab-switch)");
    }
  }
}

// Each arm parsed, its settings resolved from the job's config with its overrides, its plugins
// loaded.
void load_arms(const JobSettings& job, PluginCatalog& catalog, LiveAb& live) {
  const AbSettings& ab = job.ab;
  for (size_t i = 0; i < ab.arms.size(); ++i) {
    const std::string name(1, static_cast<char>('A' + i));
    live.arms.push_back(
        parse_arm(name, ab.arms[i], ab.arms_where + ": ab.arms[" + std::to_string(i) + "]"));
    try {
      live.settings.push_back(JobSettings::with_overrides(job, live.arms.back().overrides));
      load_plugins(live.settings.back().engine, catalog);
      check_made_plugins(live.settings.back().engine, catalog);
    } catch (const Error& e) {
      // Said from the arm's point of view: its overrides read as --set.
      throw Error(e.kind(), ab.arms_where + ": live A/B arm " + name + " (ab.arms[" +
                                std::to_string(i) + "]): " + e.what());
    }
  }
}

// Arms may differ only in where bytes live and how they travel: not in the communicator or the
// ranks (they stay for the whole job), and not in what changes the math (one loss curve).
void check_arms_keep_the_math(const AbSettings& ab, const LiveAb& live) {
  std::vector<std::string> optimizers;
  bool layout_is_math = false;
  for (const JobSettings& arm : live.settings) {
    optimizers.push_back(arm.engine.optimizer.id);
    layout_is_math = layout_is_math || layout_changes_math(arm);
  }
  const std::string& comm = live.settings[0].engine.comm.id;
  for (size_t i = 1; i < live.arms.size(); ++i) {
    for (const std::string& key : differing_keys(live.arms[0], live.arms[i])) {
      if (key == "plugins.comm" || key.rfind("plugin." + comm + ".", 0) == 0 ||
          key.rfind("launch.", 0) == 0) {
        // Either arm may be the one that sets it (the other keeps the job's value).
        throw ConfigError(ab.arms_where + ": arms A and " + live.arms[i].name + " differ in " +
                          key +
                          ", but a live A/B keeps the job's communicator and ranks; compare it "
                          "with trainer ab, which runs each arm as its own job");
      }
      if (!changes_math_between(key, optimizers, layout_is_math, live.settings[0],
                                live.settings[i]))
        continue;
      throw ConfigError(ab.arms_where + ": arms A and " + live.arms[i].name + " differ in " + key +
                        ", which changes the math: a live A/B keeps one "
                        "loss curve, so its arms may differ only in where bytes live and how they "
                        "travel (shard plugin, stage, buckets, prefetch, offload; with a codec, "
                        "or an optimizer keeping 16-bit states or masters, only prefetch, "
                        "offload and the bytes in flight, which leave the coded and rounded "
                        "values as they are; with micro steps in 16-bit compute, stages 0-1 and "
                        "2-3 round the reduced gradients apart); compare other settings with "
                        "trainer ab --allow-different-math");
    }
  }
}

}  // namespace

LiveAb LiveAb::of(const JobSettings& job, PluginCatalog& catalog) {
  const AbSettings& ab = job.ab;
  LiveAb live;
  if (ab.arms.empty()) return live;
  check_arm_count(ab);
  check_switch_dir(job);
  live.switch_every = ab.switch_every;
  live.switch_dir = ab.switch_dir;
  load_arms(job, catalog, live);
  check_arms_keep_the_math(ab, live);
  return live;
}

AbResult live_ab_result(const RunMetrics& metrics, int64_t warmup,
                        const std::vector<std::string>& pick) {
  if (!pick.empty() && (pick.size() != 2 || pick[0] == pick[1])) {
    throw InternalError("live_ab_result: pick names " + std::to_string(pick.size()) +
                        " arm(s); it takes two different ones (the command line checks --arms)");
  }
  // A block's collectives and offload I/O per step are differences of counters from a step of
  // the same block, so at least its first step must be left out.
  if (warmup < 1) {
    throw ConfigError("a live A/B report leaves out at least the first step after each switch: "
                      "--warmup " +
                      std::to_string(warmup) + " is too few; use 1 or more");
  }
  std::vector<ArmResult> arms;
  auto arm_named = [&](const std::string& name) -> ArmResult& {
    for (ArmResult& a : arms) {
      if (a.arm.name == name) return a;
    }
    arms.emplace_back();
    arms.back().arm.name = name;
    return arms.back();
  };
  // Each block of consecutive steps of one arm is one "run" of it.
  for (size_t i = 0; i < metrics.steps.size(); ++i) {
    const StepRecord& s = metrics.steps[i];
    if (s.arm.empty()) {
      throw ConfigError(metrics.path + ": step " + std::to_string(s.step) +
                        " names no arm; is this a live A/B job ([ab] arms)?");
    }
    ArmResult& arm = arm_named(s.arm);
    if (i == 0 || metrics.steps[i - 1].arm != s.arm) {
      arm.runs.emplace_back();
      arm.runs.back().path = metrics.path;
    }
    arm.runs.back().steps.push_back(s);
  }
  if (arms.size() < 2) {
    throw ConfigError(metrics.path + " holds " + std::to_string(arms.size()) +
                      " arm(s); a live A/B report needs the steps of two (raise run.steps "
                      "above ab.switch_every)");
  }
  std::string names;
  for (const ArmResult& a : arms) names += (names.empty() ? "" : ", ") + a.arm.name;
  if (!pick.empty()) {
    // Two arms of more (or the job's two, in the order asked): their blocks as they ran, the
    // other arms' steps between them left out.
    std::vector<ArmResult> picked;
    for (const std::string& name : pick) {
      const auto found = std::find_if(arms.begin(), arms.end(),
                                      [&](const ArmResult& a) { return a.arm.name == name; });
      if (found == arms.end()) {
        throw ConfigError(metrics.path + " holds no steps of arm " + name + "; its arms: " + names);
      }
      picked.push_back(*found);
    }
    arms = std::move(picked);
  } else if (arms.size() > 2) {
    // Two of them would read as the job's verdict (the job itself writes no report then).
    throw ConfigError(metrics.path + " holds the steps of " + std::to_string(arms.size()) +
                      " arms (" + names +
                      "); a live A/B report compares two: pick them with trainer ab-report "
                      "RUN_DIR --arms " +
                      arms[0].arm.name + "," + arms[2].arm.name);
  }
  // Blocks too short for the warm-up leave nothing: drop them rather than the arm.
  for (ArmResult& arm : arms) {
    arm.runs.erase(
        std::remove_if(
            arm.runs.begin(), arm.runs.end(),
            [&](const RunMetrics& r) { return static_cast<int64_t>(r.steps.size()) <= warmup; }),
        arm.runs.end());
    const auto overrides = metrics.arm_overrides.find(arm.arm.name);
    if (overrides != metrics.arm_overrides.end()) arm.arm.overrides = overrides->second;
    arm.label = arm_label(arm.arm);
  }
  AbResult r = analyse(arms[0], arms[1], warmup, 0, /*check=*/false, {});
  r.unchecked_reason = "one live job: a single loss curve";
  r.switches = metrics.switches;
  r.verdict = verdict_line(r);
  if (!r.switches.empty()) {
    std::vector<double> costs;
    for (const ArmSwitch& w : r.switches) costs.push_back(w.seconds);
    char buf[128];
    std::snprintf(buf, sizeof(buf), ", %zu switches of %.3f s each (median)", costs.size(),
                  median(costs));
    r.verdict += buf;
  }
  return r;
}

}  // namespace zt::trainer
