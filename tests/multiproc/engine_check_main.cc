// zt_engine_check: one rank of the correctness oracle (docs/architecture.md, "Correctness oracle").
// Trains a small model with uneven tensor shapes and a weight shared by two units through the ZeRO
// engine, and checks every parameter against the same model trained in this one process by
// LibTorch's own AdamW on the same global batch. Writes "OK" or the failure to
// $ZT_CHECK_OUT/rank<r>.txt.
//
//   zt_engine_check --stage S --shard shard_tensor|shard_bucket [--dtype fp32|bf16]
//                   [--accum A] [--clip C] [--steps N] [--prefetch K] [--persist T]
//                   [--overlap true|false] [--bucket_mb B] [--force_overflow_step K]
//                   [--loss_scale true|false] [--prefetch_elements E] [--max_live E]
//                   [--predivide F]
//                   [--checkpoint true|false] [--hidden H]
//                   [--offload_optimizer none|offload_cpu|offload_nvme] [--offload_param ...]
//                   [--optimizer_fraction F] [--param_fraction F] [--sub_group E]
//                   [--pipeline true|false]
// The engine, its plugins and tiers are wired by the trainer's own build_engine_setup
// (trainer/engine_setup.h) from a zt::Config: the options above become --set overrides of
// check_config()'s TOML (fp16 is not offered: the config refuses it on the CPU, where LibTorch
// has no fp16 matmul). --loss_scale turns dynamic loss scaling on outside fp16, which a config
// does not express, through build_engine_setup's `adjust` hook. [model] and [data] are not used
// (the check brings its own units and samples) except model.activation_checkpointing.
// --hidden widens the hidden layer (17 by default) so offloaded shards span many tiles. NVMe
// tiers write under $ZT_CHECK_OUT/nvme; the worker checks their files are gone at the end.
// With --checkpoint the engine recomputes every unit in backward; the reference never does, and
// each engine unit must have run forward twice per micro step.
#include <torch/torch.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>

#include "engine_setup.h"
#include "rank_check.h"
#include "zt/config.h"
#include "zt/engine.h"
#include "zt/error.h"
#include "zt/offload.h"
#include "zt/options.h"
#include "zt/rendezvous.h"

namespace {

constexpr int64_t kIn = 11, kMicroBatch = 3;
int64_t kHidden = 17;  // --hidden
constexpr double kLr = 1e-2, kBeta1 = 0.9, kBeta2 = 0.99, kEps = 1e-8, kWeightDecay = 0.05;

using zt::test::CheckFailed;

// The model's parameters, created identically from the seed in every process.
struct Weights {
  at::Tensor w0, b0, w1, b1, b2;  // w0 [17x11] is used by unit 0 and, tied, by unit 2
  explicit Weights(int64_t seed) {
    at::Generator gen = at::detail::createCPUGenerator(seed);
    auto make = [&](std::vector<int64_t> shape) {
      return at::randn(shape, gen).mul_(0.3).requires_grad_(true);
    };
    w0 = make({kHidden, kIn});
    b0 = make({kHidden});
    w1 = make({kHidden, kHidden});
    b1 = make({kHidden});
    b2 = make({kIn});
  }
  std::vector<std::pair<std::string, at::Tensor>> all() {
    return {{"w0", w0}, {"b0", b0}, {"w1", w1}, {"b1", b1}, {"b2", b2}};
  }
};

class LambdaUnit final : public zt::Unit {
 public:
  LambdaUnit(std::string name, std::vector<std::pair<std::string, at::Tensor>> params,
             std::function<at::Tensor(const at::Tensor&)> fn)
      : name_(std::move(name)), params_(std::move(params)), fn_(std::move(fn)) {}
  std::string name() const override { return name_; }
  at::Tensor forward(const at::Tensor& x) override {
    ++calls_;
    at::Tensor y = fn_(x);
    if (probe) probe(y);
    return y;
  }
  std::function<void(const at::Tensor&)> probe;  // sees every output, e.g. to hook its grad
  std::vector<std::pair<std::string, at::Tensor>> parameters() override { return params_; }
  int64_t calls() const { return calls_; }

 private:
  std::string name_;
  std::vector<std::pair<std::string, at::Tensor>> params_;
  std::function<at::Tensor(const at::Tensor&)> fn_;
  int64_t calls_ = 0;
};

std::vector<std::unique_ptr<LambdaUnit>> make_units(Weights& w) {
  std::vector<std::unique_ptr<LambdaUnit>> units;
  units.push_back(std::make_unique<LambdaUnit>(
      "embed", std::vector<std::pair<std::string, at::Tensor>>{{"w0", w.w0}, {"b0", w.b0}},
      [&w](const at::Tensor& x) { return at::tanh(at::linear(x, w.w0, w.b0)); }));
  units.push_back(std::make_unique<LambdaUnit>(
      "hidden", std::vector<std::pair<std::string, at::Tensor>>{{"w1", w.w1}, {"b1", w.b1}},
      [&w](const at::Tensor& x) { return at::tanh(at::linear(x, w.w1, w.b1)); }));
  units.push_back(std::make_unique<LambdaUnit>(
      "head", std::vector<std::pair<std::string, at::Tensor>>{{"w0", w.w0}, {"b2", w.b2}},
      [&w](const at::Tensor& x) { return at::matmul(x, w.w0) + w.b2; }));  // tied to w0
  return units;
}

// Sample i of the global stream, the same in every process.
std::pair<at::Tensor, at::Tensor> samples(int64_t first, int64_t count) {
  std::vector<at::Tensor> xs, ys;
  for (int64_t i = first; i < first + count; ++i) {
    at::Generator gen = at::detail::createCPUGenerator(1000 + i);
    xs.push_back(at::randn({kIn}, gen));
    ys.push_back(at::randn({kIn}, gen));
  }
  return {at::stack(xs), at::stack(ys)};
}

using Args = std::map<std::string, std::string>;

// The command-line options that are config keys ("none" for an offload role is "").
const std::pair<const char*, const char*> kConfigFlags[] = {
    {"stage", "zero.stage"},
    {"shard", "plugins.shard"},
    {"dtype", "precision.compute"},
    {"accum", "data.grad_accum"},
    {"clip", "zero.gradient_clipping"},
    {"steps", "run.steps"},
    {"prefetch", "zero.prefetch_units"},
    {"prefetch_elements", "zero.prefetch_elements"},
    {"max_live", "zero.max_live_parameters"},
    {"persist", "zero.param_persistence_threshold"},
    {"overlap", "zero.overlap_comm"},
    {"predivide", "zero.gradient_predivide_factor"},
    {"bucket_mb", "plugin.shard_bucket.bucket_mb"},
    {"checkpoint", "model.activation_checkpointing"},
    {"offload_optimizer", "plugins.offload_optimizer"},
    {"offload_param", "plugins.offload_param"},
    {"optimizer_fraction", "zero.offload_optimizer_fraction"},
    {"param_fraction", "zero.offload_param_fraction"},
    {"sub_group", "zero.sub_group_size"},
    {"pipeline", "zero.pipeline_read"},
    {"pipeline", "zero.pipeline_write"}};

// The job the check runs: what no test varies, with the command line as --set overrides.
zt::Config check_config(Args& a, const std::string& nvme_dir) {
  using zt::value_to_toml;
  const std::string toml =
      "[data]\nmicro_batch = " + std::to_string(kMicroBatch) +
      "\n"
      "[precision]\ninitial_scale = 1024\nhysteresis = 1\n"
      "[zero]\nallgather_bucket_mb = 0.001\n"  // forces waits between post-step all-gathers
      "[plugins]\ncomm = \"comm_ucx\"\noptimizer = \"optim_hybrid_adam\"\n"
      "[plugin.optim_hybrid_adam]\nlr = " +
      value_to_toml(kLr) + "\nbetas = " + value_to_toml(std::vector<double>{kBeta1, kBeta2}) +
      "\neps = " + value_to_toml(kEps) + "\nweight_decay = " + value_to_toml(kWeightDecay) +
      "\nadamw = true\n"
      "[plugin.offload_nvme]\npath = " +
      value_to_toml(nvme_dir) + "\nbuffer_count = 2\nbuffer_mb = 1\nqueue_depth = 4\n";
  std::vector<std::string> overrides;
  for (const auto& [flag, key] : kConfigFlags) {
    const std::string& value = a[flag];
    const bool no_tier = std::string(key).rfind("plugins.offload_", 0) == 0 && value == "none";
    overrides.push_back(std::string(key) + "=" + (no_tier ? "\"\"" : value));
  }
  return zt::Config::load_string(toml, "zt_engine_check", overrides);
}

// LibTorch's own AdamW on the whole global batch of every micro step, in this one process.
struct Reference {
  Weights weights{42};
  std::vector<std::unique_ptr<LambdaUnit>> units = make_units(weights);
  torch::optim::AdamW adamw{
      {weights.w0, weights.b0, weights.w1, weights.b1, weights.b2},
      torch::optim::AdamWOptions(kLr).betas({kBeta1, kBeta2}).eps(kEps).weight_decay(kWeightDecay)};

  void step(int64_t step, const zt::EngineOptions& opt, int world) {
    const int64_t global = kMicroBatch * world;
    adamw.zero_grad();
    for (int m = 0; m < opt.grad_accum; ++m) {
      auto [x, y] = samples((step * opt.grad_accum + m) * global, global);
      at::Tensor h = x;
      for (auto& u : units) h = u->forward(h);
      (at::mse_loss(h, y) / opt.grad_accum).backward();
    }
    if (opt.gradient_clipping > 0) {
      torch::nn::utils::clip_grad_norm_(
          std::vector<at::Tensor>{weights.w0, weights.b0, weights.w1, weights.b1, weights.b2},
          opt.gradient_clipping);
    }
    adamw.step();
  }
};

// Every parameter, element by element, within the tolerance of the compute dtype.
void check_parameters(zt::Engine& engine, Weights& ref, at::ScalarType dt, int64_t applied) {
  const double rtol = dt == at::kFloat ? 1e-5 : 2e-2, atol = dt == at::kFloat ? 1e-6 : 2e-2;
  auto got = engine.full_parameters();
  auto want = ref.all();
  std::string worst;
  double worst_err = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    at::Tensor w = want[i].second.detach();
    at::Tensor g = got[i].second.view(w.sizes());
    if (got[i].first != want[i].first)
      throw CheckFailed("parameter order: " + got[i].first + " vs " + want[i].first);
    at::Tensor excess = ((g - w).abs() - (atol + rtol * w.abs())).max();
    double e = excess.item<double>();
    if (e > 0 && e > worst_err) {
      worst_err = e;
      worst = want[i].first + ": max |zt - torch| exceeds tolerance by " + std::to_string(e);
    }
  }
  if (!worst.empty()) throw CheckFailed("after " + std::to_string(applied) + " steps, " + worst);
}

// Recomputation really happened (or, without checkpointing, did not).
void check_forward_calls(const std::vector<std::unique_ptr<LambdaUnit>>& units, int64_t steps,
                         const zt::EngineOptions& opt) {
  const int64_t want_calls = steps * opt.grad_accum * (opt.activation_checkpointing ? 2 : 1);
  for (const auto& u : units) {
    if (u->calls() != want_calls) {
      throw CheckFailed("unit " + u->name() + " ran forward " + std::to_string(u->calls()) +
                        " times, expected " + std::to_string(want_calls));
    }
  }
}

// The OK line's numbers: gathered bytes (bounded in stage 3), collectives, offloaded bytes.
std::string memory_text(const zt::trainer::EngineSetup& setup) {
  const zt::EngineOptions& opt = setup.options;
  zt::MemoryReport mem = setup.engine->memory();
  std::string text = "OK peak_gathered=" + std::to_string(mem.params_gathered_peak) +
                     " unit_max=" + std::to_string(mem.unit_max_params) +
                     " persistent=" + std::to_string(mem.persistent_params);
  if (opt.stage == 3 && mem.params_gathered_peak > (opt.prefetch_units + 1) * mem.unit_max_params +
                                                       mem.persistent_params) {
    throw CheckFailed("stage 3 gathered " + std::to_string(mem.params_gathered_peak) +
                      " bytes at peak, over " + std::to_string(opt.prefetch_units + 1) +
                      " units (" + std::to_string(mem.unit_max_params) + " B each) + persistent " +
                      std::to_string(mem.persistent_params));
  }
  zt::CommStats stats = setup.comm->stats();
  text += " all_gather_calls=" + std::to_string(stats[zt::CommOp::kAllGather].calls) +
          " reduce_scatter_calls=" + std::to_string(stats[zt::CommOp::kReduceScatter].calls);
  if (setup.tiers.by_id.empty()) return text;
  text += " offload_optimizer=" + std::to_string(mem.offload_optimizer) +
          " offload_param=" + std::to_string(mem.offload_param);
  int64_t held = 0, moved = 0;
  for (const auto& [id, t] : setup.tiers.by_id) {
    held += t->stats().bytes_allocated;
    moved += t->stats().bytes_read + t->stats().bytes_written;
  }
  if (held < mem.offload_optimizer + mem.offload_param) {
    throw CheckFailed("tiers hold " + std::to_string(held) +
                      " bytes, less than the engine placed there");
  }
  return text + " tier_bytes_moved=" + std::to_string(moved);
}

// One rank's check: train through the engine and the reference side by side, compare.
std::string run_check(Args& a, const zt::RankEnv& env, const std::string& nvme_dir) {
  auto timeout = std::chrono::milliseconds(60000);
  auto store = zt::rendezvous(env.master_addr.empty() ? "127.0.0.1" : env.master_addr,
                              env.master_port, env.rank, env.world, timeout);
  const zt::Config config = check_config(a, nvme_dir);
  const int steps = static_cast<int>(config.section("run").get_int("steps"));
  const int force_overflow = std::stoi(a["force_overflow_step"]);

  Weights mine(42);
  auto units = make_units(mine);
  std::vector<zt::Unit*> unit_ptrs;
  for (auto& u : units) unit_ptrs.push_back(u.get());
  // Dynamic loss scaling outside fp16 is no config setting (fp16 turns it on by itself).
  auto setup = std::make_unique<zt::trainer::EngineSetup>(zt::trainer::build_engine_setup(
      config, env, *store, timeout, unit_ptrs, [&](zt::EngineOptions& o) {
        if (a["loss_scale"] == "true") o.dynamic_loss_scale = true;
      }));
  zt::Engine& engine = *setup->engine;
  zt::Communicator& comm = *setup->comm;
  const zt::EngineOptions& opt = setup->options;

  // Stages 2-3 must reduce-scatter a unit's gradients as soon as it finished backward: by the
  // time the gradient reaches the first unit's output, later units' groups were sent.
  uint64_t reduces_at_first_unit = 0;
  units[0]->probe = [&](const at::Tensor& y) {
    if (!y.requires_grad()) return;
    y.register_hook([&](const at::Tensor& g) {
      reduces_at_first_unit = comm.stats()[zt::CommOp::kReduceScatter].calls;
      return g;
    });
  };
  Reference reference;
  const int64_t global = kMicroBatch * env.world;
  const at::ScalarType dt = opt.compute_dtype;
  int64_t applied = 0;
  for (int step = 0; step < steps; ++step) {
    const bool overflow_now = step + 1 == force_overflow;
    for (int m = 0; m < opt.grad_accum; ++m) {
      int64_t first = (static_cast<int64_t>(step) * opt.grad_accum + m) * global;
      auto [x, y] = samples(first + env.rank * kMicroBatch, kMicroBatch);
      engine.forward_backward(x.to(dt), [&](const at::Tensor& out) {
        at::Tensor loss = at::mse_loss(out.to(at::kFloat), y);
        // An inf on one rank only: the skip decision must still be the same everywhere.
        if (overflow_now && env.rank == env.world - 1)
          loss = loss * std::numeric_limits<float>::infinity();
        return loss;
      });
    }
    if (step == 0 && opt.stage >= 2 && !opt.activation_checkpointing &&
        reduces_at_first_unit == 0) {
      throw CheckFailed("stage " + std::to_string(opt.stage) +
                        " sent no gradient before backward reached "
                        "the first unit: reductions wait for the whole backward");
    }
    zt::StepReport rep = engine.step(kLr);
    if (overflow_now) {
      if (!rep.skipped)
        throw CheckFailed("step " + std::to_string(step + 1) + " overflowed but was not skipped");
      continue;
    }
    if (rep.skipped)
      throw CheckFailed("step " + std::to_string(step + 1) + " was skipped without an overflow");
    ++applied;
    reference.step(step, opt, env.world);
  }
  check_parameters(engine, reference.weights, dt, applied);
  check_forward_calls(units, steps, opt);
  const std::string text = memory_text(*setup);
  // Files of the NVMe tier are gone once the setup (engine first, then its tiers) is destroyed.
  const std::string rank_dir = nvme_dir + "/zt-" + setup->tiers.job + "/rank" +
                               std::to_string(env.rank);
  setup.reset();
  if (std::filesystem::exists(rank_dir))
    throw CheckFailed("NVMe tier left " + rank_dir + " behind");
  return text;
}

}  // namespace

int main(int argc, char** argv) {
  Args a{{"stage", "0"},
         {"shard", "shard_tensor"},
         {"dtype", "fp32"},
         {"accum", "1"},
         {"clip", "0"},
         {"steps", "5"},
         {"prefetch", "1"},
         {"persist", "0"},
         {"overlap", "true"},
         {"bucket_mb", "25"},
         {"force_overflow_step", "0"},
         {"loss_scale", "false"},
         {"prefetch_elements", "0"},
         {"max_live", "1000000000"},
         {"predivide", "1"},
         {"checkpoint", "false"},
         {"hidden", "17"},
         {"offload_optimizer", "none"},
         {"offload_param", "none"},
         {"optimizer_fraction", "1"},
         {"param_fraction", "1"},
         {"sub_group", "1000000000"},
         {"pipeline", "true"}};
  for (int i = 1; i + 1 < argc; i += 2) a[std::string(argv[i]).substr(2)] = argv[i + 1];
  kHidden = std::stoll(a["hidden"]);
  zt::RankEnv env = zt::discover_rank_env();
  const std::string nvme_dir =
      std::string(std::getenv("ZT_CHECK_OUT") ? std::getenv("ZT_CHECK_OUT") : "/tmp") + "/nvme";
  return zt::test::run_rank_check(env.rank, [&] { return run_check(a, env, nvme_dir); });
}
