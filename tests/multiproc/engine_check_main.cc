// zt_engine_check: one rank of the correctness oracle (DESIGN.md §6). Trains a small model with
// uneven tensor shapes and a weight shared by two units through the ZeRO engine, and checks
// every parameter against the same model trained in this one process by LibTorch's own AdamW on
// the same global batch. Writes "OK" or the failure to $ZT_CHECK_OUT/rank<r>.txt.
//
//   zt_engine_check --stage S --shard shard_tensor|shard_bucket [--dtype fp32|bf16|fp16]
//                   [--accum A] [--clip C] [--steps N] [--prefetch K] [--persist T]
//                   [--overlap true|false] [--bucket_mb B] [--force_overflow_step K]
//                   [--loss_scale true|false] [--prefetch_elements E] [--max_live E]
//                   [--predivide F]
//                   [--checkpoint true|false] [--hidden H]
//                   [--offload_optimizer none|offload_cpu|offload_nvme] [--offload_param ...]
//                   [--optimizer_fraction F] [--param_fraction F] [--sub_group E]
//                   [--pipeline true|false]
// --hidden widens the hidden layer (17 by default) so offloaded shards span many tiles. NVMe
// tiers write under $ZT_CHECK_OUT/nvme; the worker checks their files are gone at the end.
// With --checkpoint the engine recomputes every unit in backward; the reference never does, and
// each engine unit must have run forward twice per micro step.
#include <torch/torch.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>

#include "rank_check.h"
#include "zt/communicator.h"
#include "zt/engine.h"
#include "zt/error.h"
#include "zt/offload.h"
#include "zt/optimizer.h"
#include "zt/plugin_loader.h"
#include "zt/rendezvous.h"
#include "zt/shard_strategy.h"

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

}  // namespace

int main(int argc, char** argv) {
  std::map<std::string, std::string> a{{"stage", "0"}, {"shard", "shard_tensor"}, {"dtype", "fp32"},
                                       {"accum", "1"}, {"clip", "0"}, {"steps", "5"}, {"prefetch", "1"},
                                       {"persist", "0"}, {"overlap", "true"}, {"bucket_mb", "25"},
                                       {"force_overflow_step", "0"}, {"loss_scale", "false"},
                                       {"prefetch_elements", "0"}, {"max_live", "1000000000"},
                                       {"predivide", "1"},
                                       {"checkpoint", "false"}, {"hidden", "17"},
                                       {"offload_optimizer", "none"}, {"offload_param", "none"},
                                       {"optimizer_fraction", "1"}, {"param_fraction", "1"},
                                       {"sub_group", "1000000000"}, {"pipeline", "true"}};
  for (int i = 1; i + 1 < argc; i += 2) a[std::string(argv[i]).substr(2)] = argv[i + 1];
  kHidden = std::stoll(a["hidden"]);
  zt::RankEnv env = zt::discover_rank_env();
  const std::string nvme_dir = std::string(std::getenv("ZT_CHECK_OUT") ? std::getenv("ZT_CHECK_OUT") : "/tmp") + "/nvme";
  return zt::test::run_rank_check(env.rank, [&]() -> std::string {
      auto timeout = std::chrono::milliseconds(60000);
      auto store = zt::rendezvous(env.master_addr.empty() ? "127.0.0.1" : env.master_addr, env.master_port,
                                  env.rank, env.world, timeout);
      zt::PluginCatalog catalog;
      auto& comm_plugin = catalog.comm("comm_ucx");
      auto comm = comm_plugin.create(zt::Options("plugin.comm_ucx", comm_plugin.options(), {}, {}),
                                     zt::comm_context(env, *store, "engine/", timeout));
      auto& shard_plugin = catalog.shard(a["shard"]);
      std::map<std::string, zt::Value> shard_values;
      for (const auto& s : shard_plugin.options()) {
        if (s.name == "bucket_mb") shard_values["bucket_mb"] = std::stod(a["bucket_mb"]);
      }
      auto strategy = shard_plugin.create(zt::Options("plugin." + a["shard"], shard_plugin.options(), shard_values, {}));
      auto& adam_plugin = catalog.optimizer("optim_hybrid_adam");
      auto adam = adam_plugin.create(zt::Options(
          "plugin.optim_hybrid_adam", adam_plugin.options(),
          {{"lr", kLr}, {"betas", std::vector<double>{kBeta1, kBeta2}}, {"eps", kEps},
           {"weight_decay", kWeightDecay}, {"adamw", true}}, {}));

      zt::EngineOptions opt;
      opt.stage = std::stoi(a["stage"]);
      opt.compute_dtype = a["dtype"] == "bf16" ? at::kBFloat16 : a["dtype"] == "fp16" ? at::kHalf : at::kFloat;
      opt.grad_accum = std::stoi(a["accum"]);
      opt.gradient_clipping = std::stod(a["clip"]);
      opt.prefetch_units = std::stoi(a["prefetch"]);
      opt.prefetch_elements = std::stoll(a["prefetch_elements"]);
    opt.gradient_predivide_factor = std::stod(a["predivide"]);
      opt.max_live_parameters = std::stoll(a["max_live"]);
      opt.allgather_bucket_mb = 0.001;  // forces waits between post-step all-gathers
      opt.param_persistence_threshold = std::stoll(a["persist"]);
      opt.overlap_comm = a["overlap"] == "true";
      opt.dynamic_loss_scale = a["loss_scale"] == "true" || opt.compute_dtype == at::kHalf;
      opt.scaler.initial_scale = 1024;
      opt.scaler.hysteresis = 1;
      opt.activation_checkpointing = a["checkpoint"] == "true";
      opt.offload_optimizer_fraction = std::stod(a["optimizer_fraction"]);
      opt.offload_param_fraction = std::stod(a["param_fraction"]);
      opt.sub_group_size = std::stoll(a["sub_group"]);
      opt.pipeline_read = opt.pipeline_write = a["pipeline"] == "true";
      // Tiers, created the way the trainer does: one per plugin id, shared by both roles.
      std::map<std::string, std::unique_ptr<zt::OffloadTier>> tier_by_id;
      auto tier = [&](const std::string& id, const std::string& role) -> zt::OffloadTier* {
        if (id == "none") return nullptr;
        if (!tier_by_id.count(id)) {
          auto& plugin = catalog.offload(id, role);
          std::map<std::string, zt::Value> values;
          if (id == "offload_nvme") {
            values = {{"path", nvme_dir}, {"buffer_count", int64_t{2}}, {"buffer_mb", int64_t{1}},
                      {"queue_depth", int64_t{4}}};
          }
          zt::OffloadContext context{env.rank, role, "check", false};
          tier_by_id[id] = plugin.create(zt::Options("plugin." + id, plugin.options(), values, {}), context);
        }
        return tier_by_id[id].get();
      };
      zt::EngineTiers tiers{tier(a["offload_optimizer"], "plugins.offload_optimizer"),
                            tier(a["offload_param"], "plugins.offload_param")};
      const int steps = std::stoi(a["steps"]);
      const int force_overflow = std::stoi(a["force_overflow_step"]);

      Weights mine(42), ref(42);
      auto units = make_units(mine);
      std::vector<zt::Unit*> unit_ptrs;
      for (auto& u : units) unit_ptrs.push_back(u.get());
      auto engine_ptr = std::make_unique<zt::Engine>(unit_ptrs, *comm, *strategy, *adam, opt, tiers);
      zt::Engine& engine = *engine_ptr;

      // Stages 2-3 must reduce-scatter a unit's gradients as soon as it finished backward: by the
    // time the gradient reaches the first unit's output, later units' groups were sent.
    uint64_t reduces_at_first_unit = 0;
    units[0]->probe = [&](const at::Tensor& y) {
      if (!y.requires_grad()) return;
      y.register_hook([&](const at::Tensor& g) {
        reduces_at_first_unit = comm->stats()[zt::CommOp::kReduceScatter].calls;
        return g;
      });
    };
    torch::optim::AdamW reference({ref.w0, ref.b0, ref.w1, ref.b1, ref.b2},
                                    torch::optim::AdamWOptions(kLr).betas({kBeta1, kBeta2}).eps(kEps).weight_decay(kWeightDecay));
      auto ref_units = make_units(ref);
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
            if (overflow_now && env.rank == env.world - 1) loss = loss * std::numeric_limits<float>::infinity();
            return loss;
          });
        }
        if (step == 0 && opt.stage >= 2 && !opt.activation_checkpointing &&
          reduces_at_first_unit == 0) {
        throw CheckFailed("stage " + std::to_string(opt.stage) + " sent no gradient before backward reached "
                          "the first unit: reductions wait for the whole backward");
      }
      zt::StepReport rep = engine.step(kLr);
        if (overflow_now) {
          if (!rep.skipped) throw CheckFailed("step " + std::to_string(step + 1) + " overflowed but was not skipped");
          continue;
        }
        if (rep.skipped) throw CheckFailed("step " + std::to_string(step + 1) + " was skipped without an overflow");
        ++applied;
        // The reference: one process, the whole global batch of every micro step.
        reference.zero_grad();
        for (int m = 0; m < opt.grad_accum; ++m) {
          auto [x, y] = samples((static_cast<int64_t>(step) * opt.grad_accum + m) * global, global);
          at::Tensor h = x;
          for (auto& u : ref_units) h = u->forward(h);
          (at::mse_loss(h, y) / opt.grad_accum).backward();
        }
        if (opt.gradient_clipping > 0) {
          torch::nn::utils::clip_grad_norm_(std::vector<at::Tensor>{ref.w0, ref.b0, ref.w1, ref.b1, ref.b2},
                                            opt.gradient_clipping);
        }
        reference.step();
      }
      // Every parameter, element by element.
      const double rtol = dt == at::kFloat ? 1e-5 : 2e-2, atol = dt == at::kFloat ? 1e-6 : 2e-2;
      auto got = engine.full_parameters();
      auto want = ref.all();
      std::string worst;
      double worst_err = 0;
      for (size_t i = 0; i < want.size(); ++i) {
        at::Tensor w = want[i].second.detach();
        at::Tensor g = got[i].second.view(w.sizes());
        if (got[i].first != want[i].first) throw CheckFailed("parameter order: " + got[i].first + " vs " + want[i].first);
        at::Tensor excess = ((g - w).abs() - (atol + rtol * w.abs())).max();
        double e = excess.item<double>();
        if (e > 0 && e > worst_err) {
          worst_err = e;
          worst = want[i].first + ": max |zt - torch| exceeds tolerance by " + std::to_string(e);
        }
      }
      if (!worst.empty()) throw CheckFailed("after " + std::to_string(applied) + " steps, " + worst);
      // Recomputation really happened (or, without checkpointing, did not).
      const int64_t want_calls = int64_t{steps} * opt.grad_accum * (opt.activation_checkpointing ? 2 : 1);
      for (const auto& u : units) {
        if (u->calls() != want_calls) {
          throw CheckFailed("unit " + u->name() + " ran forward " + std::to_string(u->calls()) + " times, expected " +
                            std::to_string(want_calls));
        }
      }
      zt::MemoryReport mem = engine.memory();
      std::string text = "OK peak_gathered=" + std::to_string(mem.params_gathered_peak) +
                         " unit_max=" + std::to_string(mem.unit_max_params) +
                         " persistent=" + std::to_string(mem.persistent_params);
      if (opt.stage == 3 &&
          mem.params_gathered_peak > (opt.prefetch_units + 1) * mem.unit_max_params + mem.persistent_params) {
        throw CheckFailed("stage 3 gathered " + std::to_string(mem.params_gathered_peak) + " bytes at peak, over " +
                          std::to_string(opt.prefetch_units + 1) + " units (" + std::to_string(mem.unit_max_params) +
                          " B each) + persistent " + std::to_string(mem.persistent_params));
      }
      zt::CommStats stats = comm->stats();
      text += " all_gather_calls=" + std::to_string(stats[zt::CommOp::kAllGather].calls) +
              " reduce_scatter_calls=" + std::to_string(stats[zt::CommOp::kReduceScatter].calls);
      if (tiers.optimizer || tiers.param) {
        text += " offload_optimizer=" + std::to_string(mem.offload_optimizer) +
                " offload_param=" + std::to_string(mem.offload_param);
        int64_t held = 0, moved = 0;
        for (auto& [id, t] : tier_by_id) {
          held += t->stats().bytes_allocated;
          moved += t->stats().bytes_read + t->stats().bytes_written;
        }
        if (held < mem.offload_optimizer + mem.offload_param) {
          throw CheckFailed("tiers hold " + std::to_string(held) + " bytes, less than the engine placed there");
        }
        text += " tier_bytes_moved=" + std::to_string(moved);
      }
      engine_ptr.reset();
      tier_by_id.clear();
      // Files of the NVMe tier are gone once it is destroyed.
      const std::string rank_dir = nvme_dir + "/zt-check/rank" + std::to_string(env.rank);
      if (std::filesystem::exists(rank_dir)) throw CheckFailed("NVMe tier left " + rank_dir + " behind");
      comm.reset();
      return text;
  });
}
