// The correctness oracle (docs/architecture.md, "Correctness oracle") across processes: every ZeRO
// composition must train the same parameters as LibTorch's own single-process AdamW, element by
// element.
#include <doctest/doctest.h>

#include "comm_check_launch.h"

using zt::test::contains;

namespace {

zt::test::RankReports run_engine(int world, std::vector<std::string> args) {
  zt::LaunchSpec spec;
  zt::test::TempDir out;
  spec.nproc = world;
  spec.argv = {ZT_TEST_ENGINE_CHECK};
  spec.argv.insert(spec.argv.end(), args.begin(), args.end());
  spec.env = {{"ZT_CHECK_OUT", out.path().string()}};
  spec.timeout = std::chrono::minutes(3);
  zt::test::RankReports r;
  r.result = zt::launch_local(spec);
  for (int i = 0; i < world; ++i)
    r.reports.push_back(zt::test::read_file(out.file("rank" + std::to_string(i) + ".txt")));
  return r;
}

void expect_ok(const zt::test::RankReports& r) {
  INFO(r.all());
  CHECK(r.result.exit_code == 0);
  for (const auto& rep : r.reports) CHECK(rep.rfind("OK", 0) == 0);
}

}  // namespace

TEST_CASE("fp32: every stage x strategy x world size matches single-process AdamW") {
  for (int stage : {0, 1, 2, 3}) {
    for (const char* shard : {"shard_tensor", "shard_bucket"}) {
      for (int world : {1, 2, 3}) {
        CAPTURE(stage);
        CAPTURE(shard);
        CAPTURE(world);
        expect_ok(run_engine(world,
                             {"--stage", std::to_string(stage), "--shard", shard, "--steps", "5"}));
      }
    }
  }
}

TEST_CASE("fp32: gradient accumulation and global-norm clipping, every stage") {
  for (int stage : {0, 1, 2, 3}) {
    CAPTURE(stage);
    expect_ok(run_engine(2, {"--stage", std::to_string(stage), "--shard", "shard_bucket", "--accum",
                             "3", "--clip", "0.05", "--steps", "4"}));
  }
}

TEST_CASE("activation checkpointing: stages 0, 2 and 3 still match single-process AdamW") {
  // The reference never checkpoints: recomputing must change nothing beyond rounding. The worker
  // also checks that every unit ran forward twice per micro step. The tied weight (units 0 and
  // 2) and the first unit's input, which needs no grad, are the cases that break naive
  // reentrant checkpointing.
  for (int world : {1, 2}) {
    for (int stage : {0, 2, 3}) {
      for (const char* shard : {"shard_tensor", "shard_bucket"}) {
        for (const char* prefetch : {"0", "1"}) {
          if (stage != 3 && prefetch[0] == '0') continue;  // prefetch only matters in stage 3
          CAPTURE(world);
          CAPTURE(stage);
          CAPTURE(shard);
          CAPTURE(prefetch);
          expect_ok(run_engine(world, {"--stage", std::to_string(stage), "--shard", shard,
                                       "--prefetch", prefetch, "--checkpoint", "true"}));
        }
      }
    }
  }
  expect_ok(run_engine(2, {"--stage", "3", "--shard", "shard_bucket", "--accum", "3", "--clip",
                           "0.05", "--steps", "4", "--checkpoint", "true"}));
  // The recompute in bf16: within the mixed-precision tolerance, like the plain bf16 runs.
  expect_ok(run_engine(
      2, {"--stage", "3", "--shard", "shard_tensor", "--dtype", "bf16", "--checkpoint", "true"}));
}

TEST_CASE("stage 3 without overlap, prefetch 0 and 2, small tensors persistent") {
  expect_ok(run_engine(
      2, {"--stage", "3", "--shard", "shard_tensor", "--overlap", "false", "--prefetch", "0"}));
  expect_ok(run_engine(
      3, {"--stage", "3", "--shard", "shard_tensor", "--prefetch", "2", "--persist", "20"}));
}

TEST_CASE("stage 3 prefetch by elements and under a live-parameter cap gives the same result") {
  expect_ok(
      run_engine(2, {"--stage", "3", "--shard", "shard_tensor", "--prefetch_elements", "400"}));
  expect_ok(run_engine(
      2, {"--stage", "3", "--shard", "shard_bucket", "--prefetch", "2", "--max_live", "500"}));
}

TEST_CASE("gradient_predivide_factor splits the averaging around the reduction, same result") {
  for (int stage : {0, 2}) {
    CAPTURE(stage);
    expect_ok(run_engine(
        3, {"--stage", std::to_string(stage), "--shard", "shard_bucket", "--predivide", "3"}));
  }
}

TEST_CASE("stage 3 frees gathered parameters: peak within (prefetch + 1) units + persistent") {
  // The check itself runs in every rank (it knows the unit sizes); here we also see the numbers.
  auto r = run_engine(2, {"--stage", "3", "--shard", "shard_bucket", "--prefetch", "0"});
  expect_ok(r);
  CHECK(contains(r.reports[0], "persistent=0"));
}

TEST_CASE("shard_tensor and shard_bucket issue different numbers of collectives") {
  auto tensor = run_engine(2, {"--stage", "2", "--shard", "shard_tensor", "--steps", "2"});
  auto bucket = run_engine(2, {"--stage", "2", "--shard", "shard_bucket", "--steps", "2"});
  expect_ok(tensor);
  expect_ok(bucket);
  // 5 tensors in 3 units: shard_tensor reduces 5 groups per step, shard_bucket 3.
  CHECK(contains(tensor.reports[0], "reduce_scatter_calls=10"));
  CHECK(contains(bucket.reports[0], "reduce_scatter_calls=6"));
}

TEST_CASE("bf16 compute with fp32 master weights stays within mixed-precision tolerance") {
  for (int stage : {0, 2, 3}) {
    CAPTURE(stage);
    expect_ok(run_engine(
        2, {"--stage", std::to_string(stage), "--shard", "shard_bucket", "--dtype", "bf16"}));
  }
}

TEST_CASE("dynamic loss scaling: an overflow on one rank skips the step on every rank") {
  // fp16 compute has no CPU matmul in LibTorch 1.13, so the scaler runs here with bf16 (and
  // fp32): the skip decision and the unscaling are what is under test.
  for (int stage : {1, 3}) {
    CAPTURE(stage);
    expect_ok(run_engine(
        2, {"--stage", std::to_string(stage), "--shard", "shard_tensor", "--dtype", "bf16",
            "--loss_scale", "true", "--steps", "5", "--force_overflow_step", "3"}));
  }
  expect_ok(run_engine(3, {"--stage", "2", "--shard", "shard_bucket", "--loss_scale", "true",
                           "--steps", "4", "--force_overflow_step", "2"}));
}

TEST_CASE("offload: optimizer states in offload_cpu / offload_nvme, stages 1-3, same result") {
  // hidden 100 gives shards of up to 5000 elements, streamed in tiles of 1024 (sub_group 1 is
  // rounded up to one 4 KiB-aligned tile), tails included; world 3 makes the shards uneven.
  for (const char* tier : {"offload_cpu", "offload_nvme"}) {
    for (int stage : {1, 2, 3}) {
      for (const char* shard : {"shard_tensor", "shard_bucket"}) {
        const int world = stage == 3 ? 3 : 2;
        CAPTURE(tier);
        CAPTURE(stage);
        CAPTURE(shard);
        auto r = run_engine(world, {"--stage", std::to_string(stage), "--shard", shard, "--hidden",
                                    "100", "--offload_optimizer", tier, "--sub_group", "1"});
        expect_ok(r);
        // Streamed tiers move bytes every step; host memory is used in place.
        CHECK(contains(r.reports[0], std::string(tier) == "offload_nvme" ? "tier_bytes_moved="
                                                                         : "tier_bytes_moved=0"));
        CHECK_FALSE(contains(r.reports[0], "offload_optimizer=0 "));
      }
    }
  }
}

TEST_CASE(
    "offload: stage 3 parameter shards in a tier, with and without offloaded optimizer states") {
  const char* combos[][2] = {{"offload_cpu", "none"},
                             {"offload_nvme", "none"},
                             {"offload_nvme", "offload_nvme"},
                             {"offload_cpu", "offload_nvme"},
                             {"offload_nvme", "offload_cpu"}};
  for (auto& [param, optim] : combos) {
    for (const char* prefetch : {"0", "1"}) {
      CAPTURE(param);
      CAPTURE(optim);
      CAPTURE(prefetch);
      auto r = run_engine(
          3, {"--stage", "3", "--shard", "shard_tensor", "--hidden", "100", "--offload_param",
              param, "--offload_optimizer", optim, "--sub_group", "1", "--prefetch", prefetch});
      expect_ok(r);
      CHECK_FALSE(contains(r.reports[0], "offload_param=0 "));
    }
  }
}

TEST_CASE("offload: fractions, no pipelining, accumulation + clipping, bf16, checkpointing") {
  // Half of the bytes offloaded (the rest in compute memory), both tiers.
  for (const char* tier : {"offload_cpu", "offload_nvme"}) {
    CAPTURE(tier);
    auto r = run_engine(2, {"--stage", "3", "--shard", "shard_tensor", "--hidden", "100",
                            "--offload_optimizer", tier, "--offload_param", tier,
                            "--optimizer_fraction", "0.5", "--param_fraction", "0.5"});
    expect_ok(r);
  }
  expect_ok(run_engine(
      2, {"--stage", "2", "--shard", "shard_bucket", "--hidden", "100", "--offload_optimizer",
          "offload_nvme", "--sub_group", "1", "--pipeline", "false"}));
  expect_ok(run_engine(2, {"--stage", "3", "--shard", "shard_bucket", "--offload_optimizer",
                           "offload_nvme", "--offload_param", "offload_nvme", "--accum", "3",
                           "--clip", "0.05", "--steps", "4", "--checkpoint", "true"}));
  for (const char* tier : {"offload_cpu", "offload_nvme"}) {
    CAPTURE(tier);
    expect_ok(run_engine(2, {"--stage", "3", "--shard", "shard_tensor", "--dtype", "bf16",
                             "--offload_optimizer", tier, "--offload_param", tier}));
  }
  // An overflow skips the step on every rank with nothing written to the tier's states.
  expect_ok(run_engine(
      2, {"--stage", "2", "--shard", "shard_bucket", "--dtype", "bf16", "--loss_scale", "true",
          "--offload_optimizer", "offload_nvme", "--steps", "5", "--force_overflow_step", "3"}));
}
