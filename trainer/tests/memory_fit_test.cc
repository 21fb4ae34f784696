// The memory-fit check: model-state bytes by place, the estimate of a few jobs against values
// computed by hand from the engine's rules, and the refusals: every tier named with the bytes it
// needs and has, and the knobs (with file:line) that move them.
#include <cstdlib>
#include <string>

#include "settings/job_settings.h"
#include "settings/trainer_config.h"
#include "setup/memory_fit.h"
#include "small_gpt_toml.h"
#include "zt/bytes.h"
#include "zt/error.h"

#include <doctest/doctest.h>

#include "../../tests/test_util.h"

using zt::test::contains;
using zt::trainer::FitEstimate;
using zt::trainer::FitInputs;
using zt::trainer::HostBudget;
using zt::trainer::kProcessBaselineBytes;
using zt::trainer::StateBytes;
using zt::trainer::StatePlacement;
using zt::trainer::TheoryDtypes;

namespace {

// The small GPT (small_gpt_toml.h) at stage 3, fp32. What a test appends lands in [plugins] (line
// 23 on) or opens [plugin.*] tables; the refusal tests name keys by their file:line:column here.
const char* kJob = ZT_SMALL_GPT_TOML R"([data]
micro_batch = 2
[zero]
stage = 3
prefetch_units = 1
param_persistence_threshold = 0
reduce_bucket_mb = 1
sub_group_size = 4096
[plugins]
shard = "shard_bucket"
optimizer = "optim_hybrid_adam"
)";

const char* kBothInFiles = R"(offload_optimizer = "offload_nvme"
offload_param = "offload_nvme"
[plugin.offload_nvme]
path = "/nonexistent-zt-fit/nvme"
buffer_count = 2
buffer_mb = 1
)";

zt::Config job(const std::string& extra = "", const std::vector<std::string>& overrides = {}) {
  return zt::trainer::load_config_string(std::string(kJob) + extra, "job.toml", overrides);
}

// The job's settings, as the trainer resolves them at its door.
zt::trainer::JobSettings settings_of(const zt::Config& config) {
  return zt::trainer::JobSettings::of(config);
}

FitInputs inputs_of(const zt::Config& config, int world) {
  return zt::trainer::fit_inputs(settings_of(config), config.catalog(), world);
}

FitEstimate estimate(const zt::Config& config, int world = 2) {
  return zt::trainer::estimate_fit(inputs_of(config, world), settings_of(config).engine);
}

// As the refusal spells amounts: GiB from one up.
std::string amount(int64_t bytes) {
  return bytes >= zt::kGiB ? zt::gib_text(static_cast<double>(bytes)) : zt::size_text(bytes);
}

std::string refusal(const FitEstimate& e, const HostBudget& budget, const zt::Config& config) {
  try {
    zt::trainer::check_fit(e, budget, settings_of(config));
  } catch (const zt::ConfigError& error) {
    return error.what();
  }
  return "";
}

}  // namespace

TEST_CASE("model-state bytes by place follow the engine's placement") {
  StatePlacement p;
  p.stage = 3;
  p.psi = 1000;
  p.world = 2;
  // fp32 stage 3 in memory: the parameter shard is the master: 4 + 4 (grads) + 8 per owned
  // element, 500 of them: ZeRO's 16psi/N.
  StateBytes b = zt::trainer::rank_state_bytes(p);
  CHECK(b.params == 2000);
  CHECK(b.master == 0);
  CHECK(b.states == 4000);
  CHECK(b.grads == 2000);
  CHECK(b.host() == zt::trainer::theory_model_state_bytes(3, 1000, 2, TheoryDtypes{}));
  // Master and states in files: they leave the host, the parameters and gradients stay.
  p.separate_master = 1;
  p.optimizer_in_files = 1;
  b = zt::trainer::rank_state_bytes(p);
  CHECK(b.host() == 2000 + 2000);
  CHECK(b.optimizer_files == 12 * 500);
  // Half of the parameter shards in files too, and the gradient shards following the states.
  p.params_in_files = 0.5;
  p.grads_in_files = true;
  b = zt::trainer::rank_state_bytes(p);
  CHECK(b.params == 1000);
  CHECK(b.grads == 0);
  CHECK(b.param_files == 1000);
  CHECK(b.optimizer_files == 16 * 500);
  // bf16 stage 2 on 4 ranks: full 16-bit parameters, a separate fp32 master, fp32 grad shards.
  StatePlacement low;
  low.stage = 2;
  low.psi = 1000;
  low.world = 4;
  low.element_size = 2;
  b = zt::trainer::rank_state_bytes(low);
  CHECK(b.params == 2000);
  CHECK(b.master == 1000);
  CHECK(b.states == 2000);
  CHECK(b.grads == 1000);
  // bf16 masters with bf16 compute: the parameters are the masters, no separate copy.
  low.master_element_size = 2;
  b = zt::trainer::rank_state_bytes(low);
  CHECK(b.params == 2000);
  CHECK(b.master == 0);
  // bf16 masters with fp32 compute, in files: 2 + 8 bytes per owned element leave the host.
  StatePlacement files;
  files.stage = 3;
  files.psi = 1000;
  files.world = 2;
  files.master_element_size = 2;
  files.optimizer_in_files = 1;
  b = zt::trainer::rank_state_bytes(files);
  CHECK(b.master == 0);
  CHECK(b.optimizer_files == 10 * 500);
  CHECK(b.host() == 2000 + 2000);
}

TEST_CASE(
    "ZeRO's theory counts bf16 states and masters, and a bf16 master that is the parameters") {
  using zt::trainer::theory_model_state_bytes;
  const TheoryDtypes fp32{}, low{true};
  // The paper's table (psi = 1000, N = 4): 16psi, 4psi + 4psi + 8psi/N, 4psi + 12psi/N, 16psi/N.
  CHECK(theory_model_state_bytes(0, 1000, 4, fp32) == 16000);
  CHECK(theory_model_state_bytes(1, 1000, 4, fp32) == 8000 + 2000);
  CHECK(theory_model_state_bytes(2, 1000, 4, fp32) == 4000 + 3000);
  CHECK(theory_model_state_bytes(3, 1000, 4, fp32) == 4000);
  CHECK(theory_model_state_bytes(3, 1000, 4, fp32, 1.0) == 5000);  // offloaded: 20psi/N
  CHECK(theory_model_state_bytes(0, 1000, 4, low) == 16000);
  CHECK(theory_model_state_bytes(1, 1000, 4, low) == 4000 + 3000);
  CHECK(theory_model_state_bytes(2, 1000, 4, low) == 2000 + 3500);
  CHECK(theory_model_state_bytes(3, 1000, 4, low) == 4000);
  // bf16 moments: 4 bytes of states where there were 8.
  const TheoryDtypes states16{false, 2, 4};
  CHECK(theory_model_state_bytes(3, 1000, 4, states16) == 3000);
  CHECK(theory_model_state_bytes(0, 1000, 4, states16) == 12000);
  // bf16 masters with fp32 compute are always their own 2-byte copy: 4 + 4 + 2 + 8 at stage 3.
  const TheoryDtypes masters16{false, 4, 2};
  CHECK(theory_model_state_bytes(3, 1000, 4, masters16) == 4500);
  // With bf16 compute the bf16 master is the parameters (2 + 2 + 8), unless it is offloaded.
  const TheoryDtypes all16{true, 2, 2};
  CHECK(theory_model_state_bytes(3, 1000, 4, TheoryDtypes{true, 4, 2}) == 3000);
  CHECK(theory_model_state_bytes(3, 1000, 4, TheoryDtypes{true, 4, 2}, 1.0) == 3500);
  CHECK(theory_model_state_bytes(0, 1000, 4, all16, 1.0) == 8000);
  CHECK(theory_model_state_bytes(1, 1000, 4, all16) == 4000 + 1000);
  // The engine's own account agrees where its gradients are what the theory counts (fp32).
  StatePlacement p;
  p.stage = 3;
  p.psi = 1000;
  p.world = 4;
  p.state_element_size = 2;
  CHECK(zt::trainer::rank_state_bytes(p).host() == theory_model_state_bytes(3, 1000, 4, states16));
  p.master_element_size = 2;
  p.optimizer_in_files = 1;
  const StateBytes b = zt::trainer::rank_state_bytes(p);
  CHECK(b.host() + b.files() == theory_model_state_bytes(3, 1000, 4, TheoryDtypes{false, 2, 2}));
}

TEST_CASE("fit inputs: sizes from the model's declarations, the stage-3 prefetch window") {
  const FitInputs in = inputs_of(job(), 2);
  CHECK(in.parameters == 118528);
  CHECK(in.largest_unit == 49984);
  CHECK(in.largest_owned == 49984);
  CHECK(in.tied == 16384);
  // The head uses ln_f (128) and the tied wte: a block is the largest untied use.
  CHECK(in.largest_untied == 49984);
  CHECK(in.tensors == 28);
  CHECK(in.persistent == 0);
  // One unit ahead: two blocks at once; the window and the unit beyond it are read ahead.
  CHECK(in.largest_window == 2 * 49984);
  CHECK(in.fetch_units == 2);
  const FitInputs two = inputs_of(job("", {"zero.prefetch_units=2"}), 2);
  CHECK(two.largest_window == 18432 + 2 * 49984);
  CHECK(two.fetch_units == 3);
  // Every tensor is below the default threshold of 100,000: all of them stay gathered.
  const FitInputs kept = inputs_of(job("", {"zero.param_persistence_threshold=100000"}), 2);
  CHECK(kept.persistent == 118528);
  CHECK(kept.largest_window == 0);
}

TEST_CASE("activations: saved tensors per block and head, and with checkpointing") {
  zt::models::ModelShape s;
  s.kind = "gpt";
  s.n_layer = 2;
  s.n_head = 2;
  s.d_model = 64;
  s.seq_len = 32;
  s.vocab = 256;
  // B T = 64 tokens. Block: 64 x (16 x 64 + 2 x 2 x 32) x 4 = 294,912 bytes; head: 64 x (2 x 64 x
  // 4 + 256 x 4 + 256 x 4) = 163,840; backward: max(2 x 64 x 256 x 4, 2 blocks) = 589,824; the
  // embedding's output 64 x 64 x 4 = 16,384.
  CHECK(zt::trainer::activation_bytes(s, 2, 4, false) == 2 * 294912 + 16384 + 163840 + 589824);
  // Checkpointed: every unit's input (n_layer + 2 of them) and one unit recomputed at a time.
  CHECK(zt::trainer::activation_bytes(s, 2, 4, true) == 4 * 16384 + 294912 + 589824);
  // Twice the micro batch, twice the bytes.
  CHECK(zt::trainer::activation_bytes(s, 4, 4, false) ==
        2 * zt::trainer::activation_bytes(s, 2, 4, false));
}

TEST_CASE("estimate: stage 3 with optimizer states and parameters in offload_nvme") {
  const zt::Config config = job(kBothInFiles);
  const FitEstimate e = estimate(config);
  // Shards of 59,264 elements per rank: parameters, master, states and the fp32 gradient all in
  // the file tier, nothing in host memory.
  CHECK(e.state_bytes.host() == 0);
  CHECK(e.host.model_states == 0);
  // Tiles of 4,096 elements (sub_group_size < the largest shard, 24,992), 16 KiB each: 3 buffer
  // sets of master + 2 states + gradient for the update, 3 more tiles for the reduced gradients
  // on their way to the tier; fetch buffers for 2 unit shards of 24,992 x 4 bytes, rounded up to
  // 4 KiB: 102,400 each.
  CHECK(e.host.staging == 3 * 5 * 16384 + 2 * 102400);
  CHECK(e.host.params_gathered == 4 * 2 * 49984);
  // The tied wte's .grad, a block's .grad and its flat buffer, reductions in flight (the 1 MiB
  // bucket, capped by the model's gradients: 4 x 118,528 bytes), and the global norm's fp64 copy
  // of a gradient tile and its square (16 x 4,096).
  CHECK(e.host.grads == 4 * 16384 + 2 * 4 * 49984 + 4 * 118528 + 16 * 4096);
  CHECK(e.host.tier_pools == 2 * (1 << 20));
  CHECK(e.host.checkpoint == 0);
  // Built a group at a time: a block's fp32 shard of initial values and the zeroed shard its
  // states start from.
  CHECK(e.host.construction == 4 * 24992 + 4 * 24992);
  CHECK(e.host.allocator == e.host.working_set() / 10);
  // Construction comes first and is the smaller: the working set counts.
  CHECK(e.host.working_set() > e.host.construction);
  CHECK(e.host.total() ==
        kProcessBaselineBytes + 2 * (1 << 20) + e.host.working_set() + e.host.allocator);
  CHECK(e.host_total() == 2 * e.host.total());
  // One folder: master, 2 states, gradient and parameter shard, 4 bytes each per element, each
  // of the 4 + 1 arrays of each of 28 tensors rounded up to a 4 KiB block.
  REQUIRE(e.disks.size() == 1);
  CHECK(e.disks[0].plugin == "offload_nvme");
  CHECK(e.disks[0].path == "/nonexistent-zt-fit/nvme");
  CHECK(e.disks[0].per_rank == 20 * 59264 + 5 * 28 * 4096);
}

TEST_CASE("estimate: pipelines off, stage 1 in bf16, an asynchronous checkpoint") {
  const FitEstimate one = estimate(
      job(kBothInFiles, {"zero.pipeline_read=false", "zero.pipeline_write=false"}));
  CHECK(one.host.staging == 1 * 5 * 16384 + 2 * 102400);
  // Stage 1, bf16, 4 ranks, states in memory: 2-byte parameters in full, every .grad until the
  // step; a checkpoint every step snapshots master + 2 states of the 29,632-element shard.
  const FitEstimate s1 = estimate(
      job("", {"zero.stage=1", "precision.compute=\"bf16\"", "checkpoint.every_steps=1"}), 4);
  CHECK(s1.state_bytes.params == 2 * 118528);
  CHECK(s1.state_bytes.master == 4 * 29632);
  CHECK(s1.host.params_gathered == 0);
  // Every .grad, a group's flat buffer, reductions in flight, the norm's fp64 shard (squared in
  // place), and the communicator's fp32 scratch for a group and a shard.
  CHECK(s1.host.grads == 2 * 118528 + 2 * 49984 + 2 * 118528 + 8 * 12496 + 4 * (49984 + 12496));
  CHECK(s1.host.staging == 0);
  // Below stage 3 a group is filled whole in fp32, then its states start from a zeroed shard.
  CHECK(s1.host.construction == 4 * 49984 + 4 * 12496);
  CHECK(s1.host.checkpoint == 8 * zt::kMiB + 12 * 29632);
  CHECK(s1.disks.empty());
  // 16-bit masters and moments: the snapshot holds the fp32 values a checkpoint holds, 12 bytes
  // per element all the same, while the master itself is the bf16 parameters.
  const FitEstimate bf16 = estimate(
      job("[plugin.optim_hybrid_adam]\nstate_dtype = \"bf16\"\nmaster_dtype = \"bf16\"\n",
          {"zero.stage=1", "precision.compute=\"bf16\"", "checkpoint.every_steps=1"}),
      4);
  CHECK(bf16.state_bytes.master == 0);
  CHECK(bf16.state_bytes.states == 2 * 2 * 29632);
  CHECK(bf16.host.checkpoint == 8 * zt::kMiB + 12 * 29632);
  // Stage 0 saves each rank's 1/4 share of its full copies too (it was counted whole).
  const FitEstimate s0 = estimate(job("", {"zero.stage=0", "checkpoint.every_steps=1"}), 4);
  CHECK(s0.host.checkpoint == 8 * zt::kMiB + 12 * 29632);
  // Error feedback's residuals are saved from memory by every rank: the whole model in fp32 for
  // the reduce-scatter's codec.
  const FitEstimate coded = estimate(
      job("", {"zero.stage=1", "plugins.codec_gradients=\"codec_blockq\"",
               "zero.codec_error_feedback=true", "checkpoint.every_steps=1"}),
      4);
  CHECK(coded.host.checkpoint == 8 * zt::kMiB + 12 * 29632 + 4 * 118528);
}

TEST_CASE("estimate: with clipping, gradients wait in host memory beside a file tier, and bf16 "
          "moments take half the states' bytes") {
  // Clipping: the gradient shards wait for the global norm in host memory, so the folder holds
  // master, 2 states and the parameter shard (4 arrays of 4 bytes per element), and host memory
  // the 59,264-element fp32 gradient shard; the update's buffer sets keep their gradient tile.
  const zt::Config clipped = job(kBothInFiles, {"zero.gradient_clipping=1.0"});
  const FitEstimate e = estimate(clipped);
  CHECK(e.state_bytes.grads == 4 * 59264);
  CHECK(e.state_bytes.host() == 4 * 59264);
  REQUIRE(e.disks.size() == 1);
  CHECK(e.disks[0].per_rank == 16 * 59264 + 4 * 28 * 4096);
  CHECK(e.host.staging == 3 * 4 * 16384 + 2 * 102400);
  // Short of RAM, the refusal names the way back to the tier.
  HostBudget budget;
  budget.ram = e.host_total() - 1;
  budget.ram_source = "of launch.memory_limit_gb";
  CHECK(contains(refusal(e, budget, clipped), "zero.gradients_in_tier (default) = true"));
  // zero.gradients_in_tier: the gradients go to the folder again.
  const FitEstimate tier = estimate(
      job(kBothInFiles, {"zero.gradient_clipping=1.0", "zero.gradients_in_tier=true"}));
  CHECK(tier.state_bytes.host() == 0);
  CHECK(tier.disks[0].per_rank == 20 * 59264 + 5 * 28 * 4096);
  // bf16 moments: 2 bytes per element each, in the folder and in memory.
  const std::string bf16 = "[plugin.optim_hybrid_adam]\nstate_dtype = \"bf16\"\n";
  const FitEstimate files = estimate(job(std::string(kBothInFiles) + bf16));
  CHECK(files.disks[0].per_rank == 16 * 59264 + 5 * 28 * 4096);
  const FitEstimate memory = estimate(job(bf16));
  CHECK(memory.state_bytes.states == 2 * 2 * 59264);
  // bf16 masters: 2 bytes per element in the folder; with bf16 compute in memory they are the
  // parameter shard itself, where fp32 masters are a copy of 4.
  const std::string masters = "[plugin.optim_hybrid_adam]\nmaster_dtype = \"bf16\"\n";
  const FitEstimate master_files = estimate(job(std::string(kBothInFiles) + masters));
  CHECK(master_files.disks[0].per_rank == 18 * 59264 + 5 * 28 * 4096);
  CHECK(estimate(job("", {"precision.compute=\"bf16\""})).state_bytes.master == 4 * 59264);
  CHECK(estimate(job(masters, {"precision.compute=\"bf16\""})).state_bytes.master == 0);
}

TEST_CASE("refusal: host RAM short names its bytes, what it has and the knobs with file:line") {
  const zt::Config config = job("offload_optimizer = \"offload_cpu\"\n");
  const FitEstimate e = estimate(config);
  HostBudget budget;
  budget.ram = e.host_total() - 1;
  budget.ram_source = "of launch.memory_limit_gb";
  const std::string m = refusal(e, budget, config);
  INFO(m);
  CHECK(contains(m, "the job does not fit this host: 118528 parameters, ZeRO stage 3"));
  CHECK(contains(m, "host RAM: needs " + amount(e.host_total())));
  CHECK(contains(m, "2 rank(s) x " + zt::bytes_text(e.host.total()) + ": process "));
  CHECK(contains(m, "over the " + amount(budget.ram) + " of launch.memory_limit_gb"));
  // A host tier is host memory: the way out is files, for both roles.
  CHECK(contains(m, "offload to files: plugins.offload_optimizer (job.toml:23:21) = "
                    "\"offload_nvme\""));
  CHECK(contains(m, "offload to files: plugins.offload_param (default) = \"offload_nvme\""));
  CHECK(contains(m, "lower zero.prefetch_units (job.toml:16:18)"));
  CHECK(contains(m, "a smaller data.micro_batch (job.toml:13:15), or "
                    "model.activation_checkpointing (default) = true"));
  CHECK(contains(m, "more ranks on other hosts"));
  // Just enough memory: accepted.
  budget.ram = e.host_total();
  CHECK(refusal(e, budget, config).empty());
}

TEST_CASE("refusal: a file tier's disk short names its folder, bytes and knobs, and RAM is fine") {
  const zt::Config config = job(kBothInFiles);
  const FitEstimate e = estimate(config);
  HostBudget budget;
  budget.ram = e.host_total() * 2;
  budget.ram_source = "available (MemAvailable)";
  budget.disk_free = {2 * e.disks[0].per_rank - 4096};
  const std::string m = refusal(e, budget, config);
  INFO(m);
  CHECK(contains(m, "host RAM: needs "));
  CHECK(contains(m, "within the " + amount(budget.ram)));
  CHECK(contains(
      m, "disk /nonexistent-zt-fit/nvme (offload_nvme): needs " + amount(2 * e.disks[0].per_rank)));
  CHECK(contains(m, "master, optimizer states, gradient shards + parameter shards"));
  CHECK(contains(m, "over the " + amount(budget.disk_free[0]) + " free there"));
  CHECK(contains(m, "plugin.offload_nvme.path (job.toml:26:8) on a disk with more room"));
  CHECK(contains(m, "lower zero.offload_optimizer_fraction (default)"));
  CHECK(contains(m, "lower zero.offload_param_fraction (default)"));
  // The staging knob belongs to host RAM, which fits: not offered for the disk.
  CHECK_FALSE(contains(m, "sub_group_size"));
  budget.disk_free = {2 * e.disks[0].per_rank};
  CHECK(refusal(e, budget, config).empty());
}

TEST_CASE("the free space of a folder that does not exist yet is its nearest ancestor's") {
  const int64_t root = zt::trainer::file_tier_free_bytes("/");
  CHECK(root > 0);
  // Other writers on that disk (parallel tests, a fuzzer's corpus) move its free space between
  // the two reads by a few blocks: equal within 64 MiB, far below any other disk's figure.
  const int64_t missing = zt::trainer::file_tier_free_bytes("/nonexistent-zt-fit/a/b");
  CHECK(missing > 0);
  CHECK(std::llabs(missing - root) <= (int64_t{64} << 20));
}
