// The per-step collectives trainer estimate predicts, against values computed by hand from the
// engine's rules for a small GPT (the runs' own counters are compared in
// tests/multiproc/estimate_test.cc).
#include <string>

#include "settings/job_settings.h"
#include "settings/trainer_config.h"
#include "setup/comm_estimate.h"
#include "small_gpt_toml.h"
#include "zt/error.h"
#include "zt/host/compose.h"

#include <doctest/doctest.h>

using zt::trainer::CommEstimate;

namespace {

// The small GPT (small_gpt_toml.h): the embedding unit 18,432 (wte 16,384 + wpe 2,048), blocks
// of 49,984, the head's own ln_f 128 (and the tied wte, borrowed). shard_bucket with bucket_mb 0
// makes one group per unit: 4 groups, all of even length.
const char* kJob = ZT_SMALL_GPT_TOML R"([data]
micro_batch = 2
[zero]
stage = 3
param_persistence_threshold = 0
[plugins]
shard = "shard_bucket"
optimizer = "optim_hybrid_adam"
)";

CommEstimate estimate(const std::vector<std::string>& overrides, int world = 2,
                      int ranks_per_host = 2) {
  std::vector<std::string> all = {"run.log_every=1"};
  all.insert(all.end(), overrides.begin(), overrides.end());
  const zt::Config config = zt::trainer::load_config_string(kJob, "job.toml", all);
  return zt::trainer::estimate_comm(zt::trainer::JobSettings::of(config), config.catalog(), world,
                                    ranks_per_host);
}

constexpr int64_t kModelBytes = 118528 * 4;

}  // namespace

TEST_CASE(
    "estimate: stage 3 gathers each unit's groups before forward and backward, the last once") {
  const CommEstimate e = estimate({});
  // The reduce-scatter of each group's gradients after backward; comm_ucx's shared-memory
  // window publishes the other rank's half.
  CHECK(e.calls("reduce_scatter") == 4);
  CHECK(e.bytes("reduce_scatter") == kModelBytes);
  CHECK(e.sent("reduce_scatter") == kModelBytes / 2);
  // Forward and backward of each unit's groups: the head gathers the embedding's group again
  // for the tied wte. The head, the last unit, keeps both its groups from its forward into its
  // backward: gathered once. Plus one memory report a step (104 bytes per rank: 13 counters of
  // 8 bytes).
  const int64_t uses = (18432 + 49984 + 49984 + 128 + 18432) * 4;
  const int64_t head = (128 + 18432) * 4;
  CHECK(e.calls("all_gather") == doctest::Approx(8 + 1));
  CHECK(e.bytes("all_gather") == 2 * uses - head + 2 * 104);
  // A gather publishes this rank's own half.
  CHECK(e.sent("all_gather") == uses - head / 2 + 104);
  for (const auto& c : e.collectives) CHECK(c.link == "shared memory");
}

TEST_CASE("estimate: stage 2 reduces every micro step, stage 0 all-reduces once a step") {
  const CommEstimate two = estimate({"zero.stage=2", "data.micro_batch=1", "data.grad_accum=2"});
  CHECK(two.calls("reduce_scatter") == 8);
  CHECK(two.bytes("reduce_scatter") == 2 * kModelBytes);
  // The updated parameters gathered once a step (and the memory report).
  CHECK(two.bytes("all_gather") == kModelBytes + 2 * 104);
  const CommEstimate zero = estimate({"zero.stage=0", "data.micro_batch=1", "data.grad_accum=2"});
  CHECK(zero.calls("reduce_scatter") == 0);
  // The gradients plus the loop's loss average and stop flag (12 bytes).
  CHECK(zero.bytes("all_reduce") == kModelBytes + 12);
  // The shared-memory all-reduce publishes the other rank's half and this rank's reduced half.
  CHECK(zero.sent("all_reduce") == kModelBytes + 12);
}

TEST_CASE("estimate: MiCS groups reduce within a host and all-reduce shards across hosts") {
  // 4 ranks on 2 hosts, shard groups of one host's 2 ranks: the shard group's collectives stay in
  // shared memory, each reduced shard crosses the hosts over the network ring.
  const CommEstimate e = estimate({"zero.stage=2", "launch.nproc=4", "zero.mics_shard_size=2"}, 4,
                                  2);
  bool across = false;
  for (const auto& c : e.collectives) {
    if (c.group == "replicas") {
      across = true;
      CHECK(c.link == "network");
      CHECK(c.ranks == 2);
      CHECK(c.bytes == kModelBytes / 2);
      CHECK(c.sent == kModelBytes / 2);  // the ring's 2 (N-1)/N of it
    } else if (c.group == "shard group") {
      CHECK(c.link == "shared memory");
    }
  }
  CHECK(across);
  // One host: every collective in shared memory.
  for (const auto& c : estimate({"zero.stage=2", "launch.nproc=4"}, 4, 4).collectives)
    CHECK(c.link == "shared memory");
}

TEST_CASE("estimate: a two-level gather sends a host's share across hosts, the rest within") {
  // 4 ranks on 2 hosts, one shard group, zero.mics_hierarchical_params_gather: each gather first
  // among the 2 ranks at one place on each host (half the group's bytes, over the network), then
  // within each host (all of them, in shared memory). Counted as one flat gather, its bytes
  // across hosts were the whole group's.
  // Each use gathered twice but the head's (the last unit's, kept across the turn), once.
  const int64_t uses = 2 * (18432 + 49984 + 49984) * 4 + (128 + 18432) * 4;
  const CommEstimate e = estimate({"launch.nproc=4", "zero.mics_hierarchical_params_gather=true"},
                                  4, 2);
  int levels = 0;
  for (const auto& c : e.collectives) {
    if (c.op != "all_gather" || c.group == "world") continue;
    CAPTURE(c.group);
    CHECK(c.calls == doctest::Approx(8));
    if (c.group == "hosts") {
      CHECK(c.link == "network");
      CHECK(c.ranks == 2);
      CHECK(c.bytes == uses / 2);
      CHECK(c.sent == uses / 4);  // the ring sends the other host's block
    } else {
      CHECK(c.group == "host");
      CHECK(c.link == "shared memory");
      CHECK(c.bytes == uses);
      CHECK(c.sent == uses / 2);  // the window publishes this rank's own half
    }
    ++levels;
  }
  CHECK(levels == 2);
  // With int8 weights only the level across hosts is encoded: about a quarter of its bytes.
  const CommEstimate coded = estimate(
      {"launch.nproc=4", "zero.mics_hierarchical_params_gather=true",
       "plugins.codec_weights=codec_blockq", "codec.weights.bits=8"},
      4, 2);
  for (const auto& c : coded.collectives) {
    if (c.op != "all_gather" || c.group == "world") continue;
    CAPTURE(c.group);
    if (c.group == "hosts") {
      CHECK(c.bytes > uses / 8);
      CHECK(c.bytes < uses * 27 / 200);
    } else {
      CHECK(c.bytes == uses);
    }
  }
  // Groups the hosts' ranks do not divide cannot be split in two levels: refused as composing
  // refuses them, not counted as flat gathers of a job that would never start.
  CHECK_THROWS_WITH_AS(estimate({"launch.nproc=12", "zero.mics_shard_size=6",
                                 "zero.mics_hierarchical_params_gather=true"},
                                12, 4),
                       doctest::Contains("4 ranks each, which does not divide it"),
                       zt::ConfigError);
  // On one host (or a group within one) there is no second level to go to.
  for (const auto& c :
       estimate({"launch.nproc=4", "zero.mics_hierarchical_params_gather=true"}, 4, 4).collectives)
    CHECK(c.group != "hosts");
}

TEST_CASE("estimate: a gradient codec across hosts codes MiCS's all-reduce in two hops only") {
  // codec_scope = "across_hosts" with groups of one host: the group's reduce-scatter stays exact
  // in shared memory; across the groups an all-to-all of int4 chunks, then their sums gathered.
  const CommEstimate e = estimate({"zero.stage=2", "launch.nproc=4", "zero.mics_shard_size=2",
                                   "plugins.codec_gradients=codec_blockq", "codec.gradients.bits=4",
                                   "zero.codec_scope=\"across_hosts\""},
                                  4, 2);
  int coded = 0;
  for (const auto& c : e.collectives) {
    CAPTURE(c.op);
    CAPTURE(c.group);
    if (c.group == "replicas") {
      CHECK((c.op == "all_to_all" || c.op == "all_gather"));
      // int4 with an fp32 scale per 256: between 0.125x and 0.15x of the fp32 shard.
      CHECK(c.bytes > kModelBytes / 2 / 8);
      CHECK(c.bytes < kModelBytes / 2 * 15 / 100);
      ++coded;
    }
    if (c.group == "shard group" && c.op != "all_gather") CHECK(c.op == "reduce_scatter");
  }
  CHECK(coded == 2);
  CHECK(e.calls("all_reduce") < 4);  // only the loop's own few-byte ones
}

TEST_CASE("estimate: a MiCS group no wider than a host may still straddle two, and is coded") {
  // 12 ranks, 6 to a host, groups of 4: ranks 4-7 span hosts 0 and 1, so the groups'
  // collectives cross the network, and codec_scope = "across_hosts" codes them.
  CHECK(zt::groups_on_one_host(12, 4, 6, false) == false);
  CHECK(zt::groups_on_one_host(12, 3, 6, false));
  CHECK(zt::groups_on_one_host(12, 6, 6, false));
  CHECK(zt::groups_on_one_host(12, 12, 6, false) == false);
  // Replica groups take one rank of each shard group: on one host only when the shard groups
  // all share it.
  CHECK(zt::groups_on_one_host(4, 2, 4, true));
  CHECK(zt::groups_on_one_host(4, 2, 2, true) == false);
  CHECK(zt::groups_on_one_host(4, 2, 0, false) == false);  // unknown hosts
  // One process is one host, whatever the launcher said (a plain `python train.py` coded its
  // gathers with codec_scope = "across_hosts").
  CHECK(zt::groups_on_one_host(1, 1, 0, false));
  const CommEstimate e = estimate({"zero.stage=2", "launch.nproc=12", "zero.mics_shard_size=4",
                                   "plugins.codec_gradients=codec_blockq", "codec.gradients.bits=4",
                                   "zero.codec_scope=\"across_hosts\""},
                                  12, 6);
  bool coded_in_group = false;
  for (const auto& c : e.collectives) {
    if (c.group != "shard group" || c.op == "all_gather") continue;
    CAPTURE(c.op);
    CHECK(c.link == "network");
    coded_in_group = coded_in_group || c.op == "all_to_all";
  }
  CHECK(coded_in_group);
}
