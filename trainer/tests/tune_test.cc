// The pieces of trainer estimate and trainer tune that need no process: the search space keeps
// the global batch, labels say what a composition runs, the fit margin and the estimate's
// pruning, the race's rules, the loss agreement with the reference and tuned.toml's comments.
#include <algorithm>
#include <filesystem>
#include <string>

#include "ab/ab_arms.h"
#include "settings/job_settings.h"
#include "settings/trainer_config.h"
#include "small_gpt_toml.h"
#include "tune/composition_estimate.h"
#include "tune/race.h"
#include "tune/search_space.h"
#include "tune/trial_jobs.h"
#include "tune/tune_report.h"
#include "tune/tuner.h"
#include "zt/error.h"

#include <doctest/doctest.h>

#include <limits>

#include "../../tests/test_util.h"

using namespace zt::trainer;
using zt::test::contains;

namespace {

// The small GPT (small_gpt_toml.h), 4 samples per rank and step.
const char* kJob = ZT_SMALL_GPT_TOML R"([data]
micro_batch = 2
grad_accum = 2
[zero]
stage = 3
[plugins]
shard = "shard_bucket"
optimizer = "optim_hybrid_adam"
[plugin.offload_nvme]
path = "/nonexistent-zt-tune/nvme"
)";

ConfigLoader loader(const std::vector<std::string>& base = {}) {
  return [base](const std::vector<std::string>& overrides) {
    std::vector<std::string> all = base;
    all.insert(all.end(), overrides.begin(), overrides.end());
    return load_config_string(kJob, "job.toml", all);
  };
}

bool sets(const Candidate& c, const std::string& kv) {
  return std::find(c.overrides.begin(), c.overrides.end(), kv) != c.overrides.end();
}

// Timed in trial job `job`.
Contender contender(size_t id, std::vector<double> steps, int64_t job = 1) {
  Contender c;
  c.candidate = id;
  c.step_groups = {std::move(steps)};
  c.jobs = {job};
  return c;
}

}  // namespace

TEST_CASE("tune: the grid covers stages, placements and micro batches with the global batch kept") {
  const zt::Config config = loader()({});
  const std::vector<Candidate> grid = composition_grid(zt::trainer::JobSettings::of(config), 1);
  // 4 samples per rank per step: micro 1, 2, 4; stage 0 one placement, 1-2 three, 3 nine.
  CHECK(grid.size() == 3 * (1 + 3 + 3 + 9));
  for (const Candidate& c : grid) {
    const zt::Config cc = loader()(c.overrides);
    const int64_t micro = cc.section("data").get_int("micro_batch");
    CHECK(micro * cc.section("data").get_int("grad_accum") == 4);
    // No MiCS group on one host; parameter offload only at stage 3.
    for (const std::string& kv : c.overrides) CHECK(kv.rfind("zero.mics_shard_size", 0) != 0);
    if (cc.section("zero").get_int("stage") < 3) CHECK(sets(c, "plugins.offload_param=\"\""));
  }
  // Over 2 hosts, stages 1-3 also try a group per host.
  const std::vector<Candidate> hosts = composition_grid(zt::trainer::JobSettings::of(config), 2);
  CHECK(hosts.size() == 3 * (1 + 2 * (3 + 3 + 9)));
  // One cell holds the placements of one (stage, micro batch).
  // (stage 0 has one placement per micro batch: grid[3] and grid[4] are stage 1, micro 1.)
  CHECK(cell_of(grid[3]) == cell_of(grid[4]));
  CHECK(placement_of(grid[3]) != placement_of(grid[4]));
  CHECK(cell_of(grid[0]) != cell_of(grid[1]));

  // A stage-0 job without plugins.shard: stages 1-3 take shard_bucket (each was refused for
  // want of one), and every composition of the grid loads.
  const ConfigLoader ddp = loader({"zero.stage=0", "plugins.shard=\"\""});
  for (const Candidate& c : composition_grid(JobSettings::of(ddp({})), 1)) {
    CAPTURE(cell_of(c));
    CHECK_NOTHROW(ddp(c.overrides));
    CHECK(sets(c, "plugins.shard=\"shard_bucket\"") ==
          (ddp(c.overrides).section("zero").get_int("stage") >= 1));
  }
  // A job that names the MiCS group zero.shard_group_size: the grid sets that name (the other
  // one contradicted it), -1 at stage 0, over 2 hosts as over one.
  const ConfigLoader named = loader({"zero.shard_group_size=2"});
  for (const int spans : {1, 2}) {
    for (const Candidate& c : composition_grid(JobSettings::of(named({})), spans)) {
      CAPTURE(cell_of(c));
      CHECK_NOTHROW(named(c.overrides));
      for (const std::string& kv : c.overrides) CHECK(kv.rfind("zero.mics_shard_size", 0) != 0);
    }
  }
}

TEST_CASE("tune: around a composition, one knob changes at a time") {
  const Candidate leader{{"zero.stage=3", "plugins.offload_optimizer=\"offload_nvme\""}, "", ""};
  const zt::Config config = loader()(leader.overrides);
  const std::vector<Candidate> around = compositions_around(zt::trainer::JobSettings::of(config),
                                                            leader, 1);
  auto has = [&](const std::string& kv) {
    return std::any_of(around.begin(), around.end(),
                       [&](const Candidate& c) { return sets(c, kv) && sets(c, "zero.stage=3"); });
  };
  CHECK(has("plugins.shard=shard_tensor"));
  CHECK(has("plugin.shard_bucket.bucket_mb=4"));
  CHECK(has("zero.prefetch_units=0"));
  CHECK(has("zero.prefetch_units=2"));
  CHECK(has("zero.param_persistence_threshold=0"));
  CHECK(has("plugins.offload_optimizer=\"offload_cpu\""));
  CHECK(has("zero.offload_optimizer_fraction=0.5"));
  CHECK(has("plugin.offload_nvme.queue_depth=32"));
  CHECK(has("zero.sub_group_size=4194304"));
  // States streamed from NVMe: Adam's moments in bf16 are raced too; not when they are already
  // bf16, nor when the states stay in memory.
  CHECK(has("plugin.optim_hybrid_adam.state_dtype=\"bf16\""));
  CHECK(has("plugin.optim_hybrid_adam.master_dtype=\"bf16\""));
  auto variants = [](const std::vector<std::string>& lead) {
    const zt::Config c = loader()(lead);
    return compositions_around(zt::trainer::JobSettings::of(c), Candidate{lead, "", ""}, 1);
  };
  auto count_bf16 = [](const std::vector<Candidate>& near) {
    return std::count_if(near.begin(), near.end(), [](const Candidate& v) {
      return sets(v, "plugin.optim_hybrid_adam.state_dtype=\"bf16\"");
    });
  };
  CHECK(count_bf16(around) == 1);
  // A leader already in bf16 has the same variants less that one (each keeps its setting).
  const std::vector<Candidate> bf16_lead = variants(
      {"zero.stage=3", "plugins.offload_optimizer=\"offload_nvme\"",
       "plugin.optim_hybrid_adam.state_dtype=\"bf16\""});
  CHECK(bf16_lead.size() == around.size() - 1);
  CHECK(count_bf16(bf16_lead) == static_cast<std::ptrdiff_t>(bf16_lead.size()));
  CHECK(count_bf16(variants({"zero.stage=3", "plugins.offload_optimizer=\"offload_cpu\""})) == 0);
  CHECK(count_bf16(variants({"zero.stage=2"})) == 0);
  // bf16 master weights likewise: raced once, not again when the leader has them.
  auto count_masters = [](const std::vector<Candidate>& near) {
    return std::count_if(near.begin(), near.end(), [](const Candidate& v) {
      return sets(v, "plugin.optim_hybrid_adam.master_dtype=\"bf16\"");
    });
  };
  CHECK(count_masters(around) == 1);
  const std::vector<Candidate> masters_lead = variants(
      {"zero.stage=3", "plugins.offload_optimizer=\"offload_nvme\"",
       "plugin.optim_hybrid_adam.master_dtype=\"bf16\""});
  CHECK(masters_lead.size() == around.size() - 1);
  CHECK(count_masters(masters_lead) == static_cast<std::ptrdiff_t>(masters_lead.size()));
  CHECK(count_masters(variants({"zero.stage=3", "plugins.offload_optimizer=\"offload_cpu\""})) ==
        0);
  for (const Candidate& c : around) {
    // The leader's own setting is replaced, never listed twice.
    const auto stage = std::count_if(
        c.overrides.begin(), c.overrides.end(),
        [](const std::string& kv) { return kv.rfind("zero.stage=", 0) == 0; });
    CHECK(stage == 1);
    CHECK(c.origin == "around the leader");
  }
}

TEST_CASE("tune: ranks on several hosts race ZeRO++'s codecs between them, one host never") {
  auto variants = [](const std::vector<std::string>& lead, int hosts) {
    const zt::Config c = loader()(lead);
    return compositions_around(zt::trainer::JobSettings::of(c), Candidate{lead, "", ""}, hosts);
  };
  auto coded = [](const std::vector<Candidate>& near) {
    std::vector<Candidate> out;
    for (const Candidate& v : near) {
      if (std::any_of(v.overrides.begin(), v.overrides.end(),
                      [](const std::string& kv) { return kv.rfind("plugins.codec_", 0) == 0; }))
        out.push_back(v);
    }
    return out;
  };
  const std::vector<std::string> stage3 = {"zero.stage=3"};
  CHECK(coded(variants(stage3, 1)).empty());
  // Stage 3 on two hosts: int8 weights, int4 gradients with error feedback, and both, each only
  // between the hosts.
  const std::vector<Candidate> three = coded(variants(stage3, 2));
  REQUIRE(three.size() == 3);
  CHECK(sets(three[0], "plugins.codec_weights=\"codec_blockq\""));
  CHECK(sets(three[0], "codec.weights.bits=8"));
  CHECK_FALSE(sets(three[0], "plugins.codec_gradients=\"codec_blockq\""));
  CHECK(sets(three[1], "plugins.codec_gradients=\"codec_blockq\""));
  CHECK(sets(three[1], "codec.gradients.bits=4"));
  CHECK(sets(three[1], "zero.codec_error_feedback=true"));
  CHECK(sets(three[2], "plugins.codec_weights=\"codec_blockq\""));
  CHECK(sets(three[2], "plugins.codec_gradients=\"codec_blockq\""));
  for (const Candidate& v : three) {
    CHECK(sets(v, "zero.codec_scope=\"across_hosts\""));
    CHECK(sets(v, "zero.stage=3"));
    // Each variant is a config the loader takes.
    CHECK_NOTHROW(loader()(v.overrides));
  }
  CHECK(zt::trainer::composition_label(zt::trainer::JobSettings::of(loader()(three[2].overrides)))
            .find(", weights codec_blockq int8, gradients codec_blockq int4 + error feedback "
                  "across hosts") != std::string::npos);
  // Stage 1 has no parameter gather: gradients only. Stage 0 reduces nothing a codec codes.
  const std::vector<Candidate> one = coded(variants({"zero.stage=1"}, 2));
  REQUIRE(one.size() == 1);
  CHECK(sets(one[0], "plugins.codec_gradients=\"codec_blockq\""));
  CHECK(coded(variants({"zero.stage=0"}, 2)).empty());
  // MiCS groups of one host gather inside it (launch.nproc: a host's ranks, as the estimate sets
  // it): no weight codec, with or without the two-level gather (it has no level across hosts).
  // Groups larger than a host gather across hosts.
  CHECK(coded(variants({"zero.stage=3", "zero.mics_shard_size=0"}, 2)).size() == 1);
  CHECK(coded(variants({"zero.stage=3", "zero.mics_shard_size=0",
                        "zero.mics_hierarchical_params_gather=true"},
                       2))
            .size() == 1);
  CHECK(coded(variants({"zero.stage=3", "zero.mics_shard_size=2", "launch.nproc=2"}, 2)).size() ==
        1);
  CHECK(coded(variants({"zero.stage=3", "zero.mics_shard_size=4", "launch.nproc=2",
                        "zero.mics_hierarchical_params_gather=true"},
                       2))
            .size() == 3);
  // A leader that already codes a role keeps its codec; the other role is still raced.
  const std::vector<Candidate> kept = variants(
      {"zero.stage=3", "plugins.codec_gradients=\"codec_blockq\""}, 2);
  CHECK(std::count_if(kept.begin(), kept.end(), [](const Candidate& v) {
          return sets(v, "plugins.codec_weights=\"codec_blockq\"");
        }) == 1);
  CHECK(std::none_of(kept.begin(), kept.end(),
                     [](const Candidate& v) { return sets(v, "codec.gradients.bits=4"); }));
  // ... and its scope: the weight codec is the one knob that changes.
  CHECK(std::none_of(kept.begin(), kept.end(), [](const Candidate& v) {
    return sets(v, "zero.codec_scope=\"across_hosts\"");
  }));
}

TEST_CASE("tune: on several hosts a codec ranks before the knobs that save bytes inside a host") {
  // 4 ranks on 2 hosts, stage 3: the variants around it, in the order tune's first round races
  // what the user did not name (the least traffic first, a byte between hosts weighing ten).
  EstimateOptions options;
  options.world = 4;
  options.ranks_per_host = 2;
  // Nothing persists, so every unit's gather crosses the hosts (the weight codec has work).
  const std::vector<std::string> lead = {"zero.stage=3", "zero.param_persistence_threshold=0"};
  const zt::Config c = loader()(lead);
  double coded_worst = 0, plain_best = 1e300;
  int coded = 0, plain = 0;
  for (const Candidate& v :
       compositions_around(zt::trainer::JobSettings::of(c), Candidate{lead, "", ""}, 2)) {
    const CompositionEstimate e = estimate_composition(loader(), v, options);
    if (!e.refused.empty()) continue;
    const bool codes = std::any_of(v.overrides.begin(), v.overrides.end(), [](const auto& kv) {
      return kv.rfind("plugins.codec_", 0) == 0;
    });
    (codes ? coded : plain) += 1;
    if (codes) coded_worst = std::max(coded_worst, e.traffic_cost());
    else plain_best = std::min(plain_best, e.traffic_cost());
  }
  REQUIRE(coded == 3);
  REQUIRE(plain > 3);
  CHECK(coded_worst < plain_best);
}

TEST_CASE("tune: a label says what the composition runs") {
  CHECK(composition_label(zt::trainer::JobSettings::of(loader()({}))) ==
        "stage 3, shard_bucket, micro 2 x accum 2, prefetch 1, persist < 100000, no offload");
  CHECK(composition_label(zt::trainer::JobSettings::of(
            loader()({"zero.stage=1", "plugins.offload_optimizer=\"offload_nvme\"",
                      "zero.offload_optimizer_fraction=0.5"}))) ==
        "stage 1, shard_bucket, micro 2 x accum 2, optimizer 50% offload_nvme, sub_group "
        "1000000000, queue 8");
  CHECK(composition_label(zt::trainer::JobSettings::of(
            loader()({"zero.stage=1", "plugins.offload_optimizer=\"offload_nvme\"",
                      "plugin.optim_hybrid_adam.state_dtype=\"bf16\""}))) ==
        "stage 1, shard_bucket, micro 2 x accum 2, optimizer 100% offload_nvme, sub_group "
        "1000000000, queue 8, bf16 states");
  CHECK(composition_label(zt::trainer::JobSettings::of(
            loader()({"zero.stage=1", "plugins.offload_optimizer=\"offload_nvme\"",
                      "plugin.optim_hybrid_adam.master_dtype=\"bf16\""}))) ==
        "stage 1, shard_bucket, micro 2 x accum 2, optimizer 100% offload_nvme, sub_group "
        "1000000000, queue 8, bf16 masters");
  CHECK(config_value(loader()({}), "plugin.offload_nvme.queue_depth") == "8");
  // A codec's table, which tuned.toml compares when a codec wins; a config without the codec
  // has no such key (tuned.toml says "(not set)").
  CHECK(
      config_value(loader()({"plugins.codec_gradients=\"codec_blockq\"", "codec.gradients.bits=4"}),
                   "codec.gradients.bits") == "4");
  CHECK_THROWS_AS(config_value(loader()({}), "codec.gradients.bits"), zt::Error);
}

TEST_CASE("tune: the fit margin and the estimate's pruning") {
  EstimateOptions options;
  options.world = 2;
  options.ranks_per_host = 2;
  options.margin = 0.1;
  // The estimate of your config, then with a memory limit just above and just below its need
  // less the margin.
  CompositionEstimate e = estimate_composition(loader(), {}, options);
  REQUIRE(e.refused.empty());
  CHECK(e.fits());
  const double need_gb = static_cast<double>(e.fit.host_total()) / (1 << 30);
  const std::string above = "launch.memory_limit_gb=" + std::to_string(need_gb / 0.85);
  const std::string below = "launch.memory_limit_gb=" + std::to_string(need_gb / 0.95);
  CHECK(estimate_composition(loader({above}), {}, options).fits());
  const CompositionEstimate tight = estimate_composition(loader({below}), {}, options);
  CHECK_FALSE(tight.fits());
  REQUIRE(tight.short_of.size() == 1);
  CHECK(contains(tight.short_of[0], "host RAM: needs"));
  CHECK(contains(tight.short_of[0], "10% margin"));
  // A refused combination is recorded, not thrown.
  const CompositionEstimate refused = estimate_composition(loader(), {{"zero.stage=7"}, "", ""},
                                                           options);
  CHECK_FALSE(refused.refused.empty());
  CHECK_FALSE(refused.fits());
  // So is what composing would refuse (a bf16 master beside fp32 parameters, nothing
  // offloaded): counted as fitting, its trial died at its start.
  const CompositionEstimate master = estimate_composition(
      loader(),
      {{"plugins.optimizer=\"optim_hybrid_adam\"",
        "plugin.optim_hybrid_adam.master_dtype=\"bf16\""},
       "",
       ""},
      options);
  CHECK(contains(master.refused, "master_dtype = \"bf16\" with precision.compute = \"fp32\""));
  CHECK_FALSE(master.fits());
  // In a cell, the placement that offloads nothing wins when it fits; the others say why not.
  std::vector<CompositionEstimate> cell;
  for (const Candidate& c : composition_grid(zt::trainer::JobSettings::of(loader()({})), 1)) {
    if (contains(cell_of(c), "zero.stage=1") && contains(cell_of(c), "micro_batch=2"))
      cell.push_back(estimate_composition(loader(), c, options));
  }
  REQUIRE(cell.size() == 3);
  prune_placements(cell);
  CHECK(cell[0].pruned.empty());
  CHECK(contains(cell[1].pruned, "more host copies per step than stage 1"));
  CHECK(contains(cell[2].pruned, "more file I/O per step"));
  CHECK(cell[2].fit.disks.size() == 1);
  CHECK(cell[2].file_io_per_step > 0);
}

TEST_CASE("tune: stage 1 reduces once per step, so its file tier carries no partial sums") {
  EstimateOptions options;
  options.world = 2;
  options.ranks_per_host = 2;
  auto at_stage = [&](const std::string& stage) {
    return estimate_composition(
        loader({"zero.stage=" + stage, "plugins.offload_optimizer=offload_nvme",
                "zero.gradient_clipping=0", "data.grad_accum=2"}),
        {}, options);
  };
  const CompositionEstimate one = at_stage("1"), two = at_stage("2");
  REQUIRE(one.refused.empty());
  REQUIRE(two.refused.empty());
  const zt::trainer::FitInputs& in = one.fit.inputs;
  const double shard = static_cast<double>(in.parameters) / in.shard_world;
  // Master and two states, read and written once per step (fp32: 4 bytes each).
  CHECK(static_cast<double>(one.file_io_per_step) == doctest::Approx(2 * 12 * shard).epsilon(1e-6));
  // Stage 2 updates in backward at the last micro step; the first's sum goes to the file and back.
  CHECK(static_cast<double>(two.file_io_per_step - one.file_io_per_step) ==
        doctest::Approx(8 * shard).epsilon(1e-6));
}

TEST_CASE("tune: the race drops the clearly slower, then halves, and keeps the leader") {
  std::vector<Contender> c = {contender(0, {1.00, 1.01, 0.99, 1.00, 1.02, 0.98}),
                              contender(1, {1.50, 1.52, 1.49, 1.51, 1.50, 1.48}),
                              contender(2, {1.01, 1.00, 1.02, 0.99, 1.01, 1.00}),
                              contender(3, {1.04, 1.02, 1.03, 1.05, 1.01, 1.03}), contender(4, {})};
  RaceRules rules;
  rules.halve = false;
  const size_t leader = judge_round(c, 1, "phase 1 round 1", rules);
  CHECK(leader == 0);
  CHECK_FALSE(c[1].racing);
  CHECK(contains(c[1].left, "clearly slower after phase 1 round 1: 1.50x"));
  CHECK(c[0].racing);
  CHECK(c[2].racing);  // within the noise of the leader
  CHECK(c[4].racing);  // not timed yet: not judged
  // Halving: of the three timed ones still racing, the slowest leaves.
  rules.halve = true;
  judge_round(c, 2, "phase 1 round 2", rules);
  CHECK(c[0].racing);
  CHECK(c[2].racing);
  CHECK_FALSE(c[3].racing);
  CHECK(c[3].left_round == 2);
  CHECK(race_leader(c) == 0);
  std::vector<Contender> none = {contender(0, {})};
  CHECK_THROWS_AS(judge_round(none, 1, "r", rules), zt::InternalError);
}

TEST_CASE("tune: one job each is not enough to call a candidate in another job clearly slower") {
  // Another micro batch split trains in a job of its own: one job against one holds the steps'
  // noise, not the offset between two processes.
  std::vector<Contender> c = {contender(0, {1.00, 1.01, 0.99, 1.00}, 1),
                              contender(1, {1.10, 1.11, 1.09, 1.10}, 2)};
  RaceRules rules;
  rules.halve = false;
  judge_round(c, 1, "phase 1 round 1", rules);
  CHECK(c[1].racing);
  // A second job each: now the interval holds the jobs' offset too, and it is clear.
  c[0].step_groups.push_back({1.00, 1.01, 0.99, 1.00});
  c[0].jobs.push_back(3);
  c[1].step_groups.push_back({1.10, 1.12, 1.09, 1.11});
  c[1].jobs.push_back(4);
  judge_round(c, 2, "phase 1 round 2", rules);
  CHECK_FALSE(c[1].racing);
  CHECK(contains(c[1].left, "clearly slower after phase 1 round 2"));
}

TEST_CASE("tune: a trial's losses are checked against the reference's, step by step") {
  RunMetrics ref, run;
  for (int64_t s = 1; s <= 4; ++s) {
    StepRecord r;
    r.step = s;
    r.loss = 5.0 - 0.1 * static_cast<double>(s);
    r.grad_norm = 1.0;
    ref.steps.push_back(r);
    r.arm = s <= 2 ? "A" : "B";
    run.steps.push_back(r);
  }
  std::string what;
  CHECK(first_disagreement(run, ref, 1e-6, true, what) == -1);
  run.steps[2].loss *= 1 + 1e-3;
  CHECK(first_disagreement(run, ref, 1e-6, true, what) == 3);
  CHECK(contains(what, "loss at step 3"));
  CHECK(arm_of_record(run.steps[2]) == 1);
  // A tolerance above the difference accepts it.
  CHECK(first_disagreement(run, ref, 1e-2, true, what) == -1);
  // Gradient norms count only when asked (runs of one micro batch split).
  run.steps[2].loss = ref.steps[2].loss;
  run.steps[1].grad_norm *= 1.05;
  CHECK(first_disagreement(run, ref, 1e-3, true, what) == 2);
  CHECK(contains(what, "grad_norm at step 2"));
  CHECK(first_disagreement(run, ref, 1e-3, false, what) == -1);
  // A loss that overflowed to inf (a diverging codec, fp16) disagrees with any finite one, at
  // any tolerance: |inf - b| > rtol * inf was false, and it read as agreement.
  run.steps[1].grad_norm = ref.steps[1].grad_norm;
  run.steps[3].loss = std::numeric_limits<double>::infinity();
  CHECK(first_disagreement(run, ref, 1e-2, false, what) == 4);
  CHECK(contains(what, "loss at step 4 is inf"));
}

TEST_CASE("tune: tuned.toml marks each changed key with what it was") {
  zt::test::TempDir dir;
  const std::string toml =
      "[zero]\nstage = 2\nprefetch_units = 1  # default\n[data]\nmicro_batch = 4\n";
  write_tuned_toml(dir.file("tuned.toml"), toml,
                   {{"zero.stage", "3", "2"}, {"data.micro_batch", "2", "4"}}, "stage 2: 1.3x");
  const std::string text = zt::test::read_file(dir.file("tuned.toml"));
  CHECK(contains(text, "# Tuned by trainer tune: stage 2: 1.3x"));
  CHECK(contains(text, "stage = 2  # tune: was 3\n"));
  CHECK(contains(text, "micro_batch = 4  # tune: was 2\n"));
  CHECK(contains(text, "prefetch_units = 1  # default\n"));
}

TEST_CASE("tune: a verdict where nothing raced says so, not that your config is the fastest") {
  TuneResult r;
  r.candidates.resize(2);
  r.candidates[0].estimate.composition.label = "stage 3, shard_bucket";
  r.budget_s = 60;
  r.could_race = 2;
  CHECK(tune_verdict(r) ==
        "nothing raced: after the reference run, the 60 s budget had no time for a trial job and "
        "the final A/B, so your config stays (stage 3, shard_bucket); give tune a larger --budget");
  r.rounds.emplace_back();  // a round ran, and your config led it
  CHECK(tune_verdict(r) == "your config is the fastest composition found (stage 3, shard_bucket)");
  // Nothing else could race: a larger budget would not help, and the verdict does not ask for one.
  r.rounds.clear();
  r.could_race = 1;
  CHECK(contains(tune_verdict(r), "nothing else to race: every other composition was pruned"));
  CHECK_FALSE(contains(tune_verdict(r), "--budget"));
}

TEST_CASE("tune: tuned.toml takes the winner only as the final A/B confirmed it") {
  TuneResult r;
  r.candidates.resize(2);
  r.candidates[1].estimate.composition.label = "stage 2, bf16 moments";
  r.winner = 1;
  r.rounds.emplace_back();
  // The final A/B failed (a crash, the budget): the winner's short trials are all it has.
  r.final_note = "the final A/B did not finish: arm B exited 137";
  CHECK(r.keep_yours());
  CHECK(contains(tune_verdict(r), "is not confirmed: the final A/B did not finish"));
  CHECK(contains(tune_verdict(r), "your config stays"));
  // It ran, faster, with the losses agreeing: adopted.
  r.final_ran = true;
  r.final_ab.speedup = {1.3, 1.2, 1.4};
  r.final_losses = "losses agree";
  CHECK_FALSE(r.keep_yours());
  CHECK(contains(tune_verdict(r), "stage 2, bf16 moments: 1.30x the config you gave"));
  // Faster, but diverging: kept out.
  r.final_losses_agree = false;
  r.final_losses = "LOSSES DIVERGE: loss at step 40";
  CHECK(r.keep_yours());
  CHECK(contains(tune_verdict(r), "but LOSSES DIVERGE: loss at step 40: your config stays"));
  // Clearly slower: kept out.
  r.final_losses_agree = true;
  r.final_ab.speedup = {0.9, 0.85, 0.95};
  CHECK(r.keep_yours());
}

TEST_CASE("tune: across hosts every composition is sized with one host's ranks") {
  // The grid was sized per host, --candidate and phase 2's variants with the whole job's ranks:
  // the same composition resolved twice (raced twice), and a host asked for every rank's memory.
  const ConfigLoader job = loader({"launch.nproc=4"});
  const ConfigLoader one_host = per_host_loader(job, 2, 2);
  CHECK(one_host({"zero.stage=2"}).section("launch").get_int("nproc") == 2);
  CHECK(one_host({"zero.stage=2"}).section("zero").get_int("stage") == 2);
  CHECK(per_host_loader(job, 1, 4)({}).section("launch").get_int("nproc") == 4);
}

TEST_CASE("tune: a candidate the same as your config is the same math, with a codec too") {
  // A grid candidate spells out the values your config leaves to its defaults (MiCS groups across
  // hosts: zero.mics_shard_size = -1), in its own order. With a codec the layout keys are math, so
  // such a candidate read as other math: the final A/B's own exact check was turned off for a
  // winner that only moved offload.
  const ConfigLoader coded = loader(
      {"plugins.codec_gradients=\"codec_blockq\"", "codec.gradients.bits=4"});
  const auto key = [&](const std::vector<std::string>& overrides) {
    const std::vector<std::string> all = explicit_overrides(coded(overrides), overrides);
    return math_key(JobSettings::of(coded(all)), all);
  };
  const std::string yours = key({});
  CHECK(contains(yours, "zero.stage=3"));
  CHECK(key({"zero.stage=3", "data.micro_batch=2", "data.grad_accum=2", "zero.mics_shard_size=-1",
             "plugins.offload_optimizer=\"offload_cpu\"", "zero.offload_optimizer_fraction=1.0"}) ==
        yours);
  // Another layout is other math where a codec codes it, and not without one.
  CHECK(key({"zero.mics_shard_size=1"}) != yours);
  // A config that sets the group size under its other name: the same groups are the same math,
  // and tune's candidates do not spell the key out over the config's own value.
  const ConfigLoader named = loader({"plugins.codec_gradients=\"codec_blockq\"",
                                     "codec.gradients.bits=4", "zero.shard_group_size=1"});
  const std::vector<std::string> own = explicit_overrides(named({}), {});
  CHECK(JobSettings::of(named(own)).engine.groups.size == 1);
  CHECK(math_key(JobSettings::of(named(own)), own) == key({"zero.mics_shard_size=1"}));
  const ConfigLoader exact = loader();
  const std::vector<std::string> groups = {"zero.mics_shard_size=1"};
  CHECK(math_key(JobSettings::of(exact(groups)), explicit_overrides(exact(groups), groups)) ==
        math_key(JobSettings::of(exact({})), explicit_overrides(exact({}), {})));
}

TEST_CASE("an optimizer that keeps 16-bit states or masters makes the layout part of the math") {
  // Stochastic rounding keys each element's bits on its place in its group, which the shard
  // layout sets: a live A/B of shard_tensor against shard_bucket with bf16 masters matched
  // neither arm's run, and was accepted as one loss curve.
  const auto job = [](const std::vector<std::string>& overrides) {
    return JobSettings::of(loader()(overrides));
  };
  CHECK_FALSE(layout_changes_math(job({})));
  CHECK(layout_changes_math(job({"plugin.optim_hybrid_adam.state_dtype=\"bf16\""})));
  // Rounded to nearest (state_rounding), they round the same in any layout.
  CHECK_FALSE(layout_changes_math(job({"plugin.optim_hybrid_adam.state_dtype=\"bf16\"",
                                       "plugin.optim_hybrid_adam.state_rounding=\"nearest\""})));
  CHECK(layout_changes_math(
      job({"precision.compute=\"bf16\"", "plugin.optim_hybrid_adam.master_dtype=\"bf16\""})));
  CHECK(layout_changes_math(job({"plugins.codec_gradients=\"codec_blockq\""})));
  const std::vector<std::string> optim = {"optim_hybrid_adam"};
  CHECK_FALSE(changes_math("plugins.shard", optim, layout_changes_math(job({}))));
  const bool bf16_masters = layout_changes_math(
      job({"precision.compute=\"bf16\"", "plugin.optim_hybrid_adam.master_dtype=\"bf16\""}));
  CHECK(changes_math("plugins.shard", optim, bf16_masters));
  // Where bytes are kept stays neutral.
  CHECK_FALSE(changes_math("plugins.offload_optimizer", optim, bf16_masters));
  // bf16 compute with micro steps: stages 0-1 round the micro steps' fp32 sum once, stages 2-3
  // each micro step's reduction (trainer ab's stage 1 against stage 2 failed its check on
  // losses that trained right). Stages on one side agree; without micro steps, or in fp32, the
  // stage leaves them alone.
  const std::vector<std::string> bf16 = {"precision.compute=\"bf16\"", "data.grad_accum=2"};
  const auto at = [&](const std::vector<std::string>& base, const char* stage) {
    std::vector<std::string> o = base;
    o.push_back(std::string("zero.stage=") + stage);
    return job(o);
  };
  CHECK(reductions_round_apart(at(bf16, "1"), at(bf16, "2")));
  CHECK_FALSE(reductions_round_apart(at(bf16, "2"), at(bf16, "3")));
  CHECK_FALSE(reductions_round_apart(at(bf16, "0"), at(bf16, "1")));
  CHECK_FALSE(
      reductions_round_apart(at({"data.grad_accum=2"}, "1"), at({"data.grad_accum=2"}, "3")));
  const std::vector<std::string> one_micro = {"precision.compute=\"bf16\"", "data.grad_accum=1"};
  CHECK_FALSE(reductions_round_apart(at(one_micro, "1"), at(one_micro, "3")));
  CHECK_FALSE(layout_changes_math(job(bf16)));
  // tune: candidates on either side run as other jobs (their math keys differ), those on one
  // side alternate in one.
  CHECK(math_key(at(bf16, "1"), {"zero.stage=1"}) != math_key(at(bf16, "3"), {"zero.stage=3"}));
  CHECK(math_key(at(bf16, "2"), {"zero.stage=2"}) == math_key(at(bf16, "3"), {"zero.stage=3"}));
}
