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
//                   [--pipeline true|false] [--gradients_in_tier true|false]
//                   [--accessors true|false] [--begin_step true|false] [--nan_grad_step K[-L]]
//                   [--fail_backward_step K] [--min_scale S]
//                   [--eval true|false]
//                   [--save_at K --ckpt_dir D] [--record P]
//                   [--load true --ckpt_dir D --saved_world W] [--compare P]
//                   [--refuse_partial true --ckpt_dir D]
//                   [--mics K] [--hier true --ranks_per_host P]
//                   [--codec_weights B] [--codec_gradients B] [--error_feedback true]
//                   [--codec_block K] [--state_dtype fp32|bf16] [--saved_state_dtype ...]
//                   [--master_dtype fp32|bf16] [--saved_master_dtype ...]
//                   [--rounding nearest|stochastic]
//                   [--plant nan|lost_update|uncoded|fp32_states|fp32_masters]
//                   [--staged true|false]
//                   [--then <the options of another case> ...]
// --then starts another case, run after this one in the same processes (one start of LibTorch
// for many small cases): each case composes its own job, on store keys of its own, and reports
// to $ZT_CHECK_OUT/rank<r>.case<i>.txt; a case that fails ends the run.
// The engine, its plugins and tiers are composed by the core as every program composes them
// (zt/host/compose.h) from the settings of a zt::Config of the core's sections alone: the options
// above become --set overrides of check_config()'s TOML (fp16 is not offered: the config refuses
// it on the CPU, where LibTorch has no fp16 matmul). What the core's sections do not express goes
// through compose's `adjust` hook: --loss_scale (dynamic loss scaling outside fp16), --accum and
// --checkpoint (the trainer's data.grad_accum and model.activation_checkpointing). The check
// brings its own units and samples.
// --hidden widens the hidden layer (17 by default) so offloaded shards span many tiles. NVMe
// tiers write under $ZT_CHECK_OUT/nvme; the worker checks their files are gone at the end.
// With --checkpoint the engine recomputes every unit in backward; the reference never does, and
// each engine unit must have run forward twice per micro step.
// --accessors checks the debug accessors against the reference after every step: full_fp32_param
// and full_optimizer_state (AdamW's exp_avg, exp_avg_sq), and full_fp32_grad after the step's
// micro steps (the reference's .grad before clipping), zeros right after a step.
// --begin_step announces each step's learning rate before its micro steps (Engine::begin_step),
// so groups streamed from a file tier update in backward where that applies. --nan_grad_step K
// (or K-L) makes the last rank's gradients NaN in step K (to L) (its loss stays finite); such a
// step must be skipped, and a second in a row stop the job where nothing can rescale it
// (--min_scale sets precision.min_scale). --fail_backward_step K
// makes every rank's backward throw in step K's first micro step, which must then be skipped.
// --eval checks Engine::forward_eval before the first step and after every step: the mean loss over
// fixed samples shared out among the ranks equals the one the units give in one process from the
// engine's full parameters (fp32: within 1e-6 relative).
// Checkpoints: --save_at K saves after step K into D (zt::CheckpointSaver, asynchronous) and
// trains on; --record P then writes this rank's losses, the loss scales and the final parameters,
// masters and AdamW moments to P-rank<r>.pt.
// --load true starts from the latest checkpoint in D (saved by --saved_world ranks, any stage,
// strategy or offload) and trains to --steps, the reference replaying the saved steps first;
// --compare P requires the losses, scales and final parameters, masters and moments to equal
// P's bit for bit. --rounding stochastic rounds bf16 masters and states stochastically, as the
// plugin does by default; the reference rounds to nearest, so such a run is checked by --record
// and --compare alone (a resume against the uninterrupted run: the same random bits must come
// back with the step count and every element's key).
// --refuse_partial true (one rank) first saves a checkpoint without exp_avg_sq into D by hand and
// requires the engine to refuse loading it.
// --plant plants a fault the check must catch (tests of the oracle itself): nan puts a NaN into
// the engine's last parameter before the final comparison; lost_update gives the engine's second
// step lr 0, so that update is lost while the reference applies it; uncoded leaves the codecs
// out of the engine's config while the reference still applies them; fp32_states makes the
// reference round its moments to bf16 while the engine keeps them in fp32; all_decay leaves
// zero.no_weight_decay out of the engine's config while the reference exempts --no_decay's.
// --no_decay P,Q exempts the parameters matching shell patterns P and Q (of w0 b0 w1 b1 b2) from
// weight decay: zero.no_weight_decay on the engine, a parameter group with weight_decay 0 in the
// reference's AdamW.
// --state_dtype bf16 keeps AdamW's moments in bf16 (optim_hybrid_adam's state_dtype); the
// reference then rounds its moments to bf16 after every step, as the engine's optimizer stores
// them. With --load, --saved_state_dtype names the saver's (default: --state_dtype's), which the
// checkpoint must record.
// --master_dtype bf16 keeps the master weights in bf16 (optim_hybrid_adam's master_dtype, rounded
// to nearest); the reference then rounds its initial weights and its weights after every step
// to bf16, as the engine's optimizer stores them, and the engine's masters must be bf16 values.
// --saved_master_dtype names the saver's, as for the states; --plant fp32_masters makes the
// reference round its weights while the engine keeps fp32 masters.
// Codecs (ZeRO++): --codec_weights / --codec_gradients B run stage 3's gathers / the gradient
// reduce-scatters through codec_blockq at B bits (blocks of --codec_block), --error_feedback true
// keeps the gradient codec's residuals. The reference then computes each step from the engine's
// own exact weights (codec_reference.h): the coded gradient is compared after the micro steps
// (stages 2-3), the parameters and AdamW's moments after every step (shard_tensor's layout, no
// accumulation).
#include <torch/torch.h>

#include <fnmatch.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>

#include "checkpoint/checkpoint_saver.h"  // core-internal: a save filled by hand (--refuse_partial)
#include "codec_reference.h"
#include "compose/staged_communicator.h"  // core-internal: --staged
#include "oracle_tolerance.h"
#include "rank_check.h"
#include "util/torch_compat.h"
#include "zt/error.h"
#include "zt/host/checkpoint.h"
#include "zt/host/compose.h"
#include "zt/host/config.h"
#include "zt/host/engine.h"
#include "zt/host/engine_settings.h"
#include "zt/host/plugin_loader.h"
#include "zt/host/process_exit.h"
#include "zt/host/rendezvous.h"
#include "zt/offload.h"
#include "zt/options.h"

namespace {

constexpr int64_t kIn = 11, kMicroBatch = 3;
int64_t kHidden = 17;                                        // --hidden
constexpr auto kTimeout = std::chrono::milliseconds(60000);  // every wait of a rank
constexpr double kLr = 1e-2, kBeta1 = 0.9, kBeta2 = 0.99, kEps = 1e-8, kWeightDecay = 0.05;

using zt::test::CheckFailed;

// --zero_init: the engine builds the model from a ModelSource (partitioned construction) and
// every value comes from the declared initialisers; the reference fills its whole tensors from
// the same declarations.
bool g_zero_init = false;

// Declared shapes and initialisers: counter-based normals, and one tensor (b2) filled by a
// function, as a model with its own init would.
std::vector<zt::ParamDecl> declarations() {
  auto pattern = zt::ParamInit::from_function([](const at::Tensor& full) {
    full.copy_(at::arange(full.numel(), at::kFloat).mul_(0.37).sin_().mul_(0.3));
  });
  return {{"w0", {kHidden, kIn}, zt::ParamInit::normal(0.3)},
          {"b0", {kHidden}, zt::ParamInit::normal(0.3)},
          {"w1", {kHidden, kHidden}, zt::ParamInit::normal(0.3)},
          {"b1", {kHidden}, zt::ParamInit::uniform(0.3)},
          {"b2", {kIn}, pattern}};
}

// The model's parameters, created identically from the seed in every process.
struct Weights {
  at::Tensor w0, b0, w1, b1, b2;  // w0 [17x11] is used by unit 0 and, tied, by unit 2
  // `values` false: tensors of the right shapes whose values nobody reads (a ModelSource's).
  explicit Weights(int64_t seed, bool values = true) {
    at::Generator gen = at::detail::createCPUGenerator(seed);
    at::Tensor* slots[] = {&w0, &b0, &w1, &b1, &b2};
    const auto decls = declarations();
    for (size_t i = 0; i < decls.size(); ++i) {
      at::Tensor& t = *slots[i];
      if (!values) {
        t = at::empty(decls[i].shape);
      } else if (g_zero_init) {
        t = at::empty(decls[i].shape);
        zt::init_param(t, decls[i].init, static_cast<uint64_t>(seed), decls[i].name);
      } else {
        t = at::randn(decls[i].shape, gen).mul_(0.3);
      }
      t.requires_grad_(true);
    }
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

// The check's model as a ModelSource: units built one at a time from tensors nobody wrote.
class CheckSource final : public zt::ModelSource {
 public:
  int64_t unit_count() const override { return 3; }
  uint64_t seed() const override { return 42; }
  std::vector<zt::ParamDecl> declare(int64_t unit) const override {
    const auto d = declarations();
    if (unit == 0) return {d[0], d[1]};
    if (unit == 1) return {d[2], d[3]};
    return {d[0], d[4]};  // w0 again: borrowed from unit 0
  }
  std::unique_ptr<zt::Unit> build(int64_t unit) override {
    if (unit == 0) all_ = make_units(weights_);
    built.push_back(all_[unit].get());
    return std::move(all_[unit]);
  }
  std::vector<LambdaUnit*> built;  // owned by the engine

 private:
  Weights weights_{42, /*values=*/false};
  std::vector<std::unique_ptr<LambdaUnit>> all_;
};

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
    {"clip", "zero.gradient_clipping"},
    {"steps", "run.steps"},
    {"prefetch", "zero.prefetch_units"},
    {"prefetch_elements", "zero.prefetch_elements"},
    {"max_live", "zero.max_live_parameters"},
    {"persist", "zero.param_persistence_threshold"},
    {"overlap", "zero.overlap_comm"},
    {"predivide", "zero.gradient_predivide_factor"},
    {"bucket_mb", "plugin.shard_bucket.bucket_mb"},
    {"offload_optimizer", "plugins.offload_optimizer"},
    {"offload_param", "plugins.offload_param"},
    {"optimizer_fraction", "zero.offload_optimizer_fraction"},
    {"param_fraction", "zero.offload_param_fraction"},
    {"sub_group", "zero.sub_group_size"},
    {"pipeline", "zero.pipeline_read"},
    {"pipeline", "zero.pipeline_write"},
    {"mics", "zero.mics_shard_size"},
    {"hier", "zero.mics_hierarchical_params_gather"},
    {"state_dtype", "plugin.optim_hybrid_adam.state_dtype"},
    {"master_dtype", "plugin.optim_hybrid_adam.master_dtype"},
    {"gradients_in_tier", "zero.gradients_in_tier"},
    {"min_scale", "precision.min_scale"}};

// "a,b" -> {"a", "b"}; "" -> {}.
std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> out;
  for (size_t at = 0; at < text.size();) {
    const size_t comma = std::min(text.find(',', at), text.size());
    out.push_back(text.substr(at, comma - at));
    at = comma + 1;
  }
  return out;
}

// The job the check runs: what no test varies, with the command line as --set overrides.
zt::Config check_config(Args& a, const std::string& nvme_dir) {
  using zt::value_to_toml;
  const std::string toml =
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
  // --plant uncoded: the engine trains without the codecs the reference applies.
  for (const char* role : a["plant"] == "uncoded"
                              ? std::vector<const char*>{}
                              : std::vector<const char*>{"weights", "gradients"}) {
    const std::string bits = a[std::string("codec_") + role];
    if (bits == "0") continue;
    overrides.push_back(std::string("plugins.codec_") + role + "=codec_blockq");
    overrides.push_back(std::string("codec.") + role + ".bits=" + bits);
    overrides.push_back(std::string("codec.") + role + ".block=" + a["codec_block"]);
  }
  // --no_decay b0,b[12]: zero.no_weight_decay = ["b0", "b[12]"].
  const std::vector<std::string> no_decay = split_list(a["no_decay"]);
  if (!no_decay.empty() && a["plant"] != "all_decay")
    overrides.push_back("zero.no_weight_decay=" + value_to_toml(no_decay));
  if (a["error_feedback"] == "true" && a["plant"] != "uncoded")
    overrides.push_back("zero.codec_error_feedback=true");
  // The reference rounds to nearest; stochastic rounding against a reference is the kernels'
  // tests' (bf16_master_test), here it is checked through a resume (--rounding).
  const std::string rounding = a["rounding"] == "stochastic" ? "stochastic" : "nearest";
  if (a["master_dtype"] == "bf16")
    overrides.push_back("plugin.optim_hybrid_adam.master_rounding=" + rounding);
  if (a["state_dtype"] == "bf16" || a["saved_state_dtype"] == "bf16")
    overrides.push_back("plugin.optim_hybrid_adam.state_rounding=" + rounding);
  for (const auto& [flag, key] : kConfigFlags) {
    const std::string& value = a[flag];
    const bool no_tier = std::string(key).rfind("plugins.offload_", 0) == 0 && value == "none";
    overrides.push_back(std::string(key) + "=" + (no_tier ? "\"\"" : value));
  }
  return zt::Config::load_string(toml, "zt_engine_check", overrides);
}

// LibTorch's own AdamW on the whole global batch of every micro step, in this one process.
struct Reference {
  bool bf16_states = false;   // --state_dtype bf16
  bool bf16_masters = false;  // --master_dtype bf16: set through round_masters_from_now()
  Weights weights{42};
  std::vector<std::unique_ptr<LambdaUnit>> units = make_units(weights);
  torch::optim::AdamW adamw;

  // `no_decay`: shell patterns of the parameters in a group of their own without weight decay,
  // as torch.optim users exempt biases (zero.no_weight_decay on the engine's side).
  explicit Reference(const std::vector<std::string>& no_decay = {})
      : adamw(param_groups(no_decay), options(kWeightDecay)) {}
  static torch::optim::AdamWOptions options(double weight_decay) {
    return torch::optim::AdamWOptions(kLr)
        .betas({kBeta1, kBeta2})
        .eps(kEps)
        .weight_decay(weight_decay);
  }
  std::vector<torch::optim::OptimizerParamGroup> param_groups(
      const std::vector<std::string>& no_decay) {
    std::vector<at::Tensor> decayed, free;
    for (auto& [name, t] : weights.all()) {
      const bool exempt = std::any_of(no_decay.begin(), no_decay.end(), [&](const std::string& p) {
        return fnmatch(p.c_str(), name.c_str(), 0) == 0;
      });
      (exempt ? free : decayed).push_back(t);
    }
    std::vector<torch::optim::OptimizerParamGroup> groups;
    groups.emplace_back(decayed,
                        std::make_unique<torch::optim::AdamWOptions>(options(kWeightDecay)));
    if (!free.empty())
      groups.emplace_back(free, std::make_unique<torch::optim::AdamWOptions>(options(0.0)));
    return groups;
  }

  // The step's gradients in .grad, before clipping: what Engine::full_fp32_grad returns.
  void grads(int64_t step, const zt::EngineOptions& opt, int world) {
    const int64_t global = kMicroBatch * world;
    adamw.zero_grad();
    for (int m = 0; m < opt.grad_accum; ++m) {
      auto [x, y] = samples((step * opt.grad_accum + m) * global, global);
      at::Tensor h = x;
      for (auto& u : units) h = u->forward(h);
      (at::mse_loss(h, y) / opt.grad_accum).backward();
    }
  }
  void apply(const zt::EngineOptions& opt) {
    if (opt.gradient_clipping > 0) {
      torch::nn::utils::clip_grad_norm_(
          std::vector<at::Tensor>{weights.w0, weights.b0, weights.w1, weights.b1, weights.b2},
          opt.gradient_clipping);
    }
    adamw.step();
    if (bf16_states) round_states();
    if (bf16_masters) round_masters();
  }
  // bf16 masters: the weights as a bf16 master holds them (to nearest even), from now on: the
  // engine rounds its initial values, a loaded checkpoint's and every step's.
  void round_masters_from_now() {
    bf16_masters = true;
    round_masters();
  }
  void round_masters() {
    const c10::NoGradGuard no_grad;
    for (const at::Tensor& p : {weights.w0, weights.b0, weights.w1, weights.b1, weights.b2})
      p.copy_(p.to(at::kBFloat16));
  }
  // bf16 states: AdamW's fp32 step, each moment then stored in bf16 (to nearest even).
  void round_states() {
    for (const at::Tensor& p : {weights.w0, weights.b0, weights.w1, weights.b1, weights.b2}) {
      for (const char* name : {"exp_avg", "exp_avg_sq"}) {
        at::Tensor m = state(p, name);
        m.copy_(m.to(at::kBFloat16));
      }
    }
  }
  void step(int64_t step, const zt::EngineOptions& opt, int world) {
    grads(step, opt, world);
    apply(opt);
  }
  // AdamW's "exp_avg" or "exp_avg_sq" of `param` (zeros before its first step).
  at::Tensor state(const at::Tensor& param, const std::string& name) {
    using StateMap = std::decay_t<decltype(adamw.state())>;
    auto it = adamw.state().find(zt::compat::optimizer_state_key<StateMap>(param));
    if (it == adamw.state().end()) return at::zeros_like(param);
    auto& s = static_cast<torch::optim::AdamWParamState&>(*it->second);
    return name == "exp_avg" ? s.exp_avg() : s.exp_avg_sq();
  }
};

// Moments rounded to bf16 on both sides at some step (--state_dtype or --saved_state_dtype bf16,
// or --plant fp32_states): with fp32 compute the comparisons allow what that may change
// (oracle_tolerance.h). g_reference_bf16_moments: the reference rounds them now, so the engine's
// must be bf16 values.
bool g_bf16_moments = false;
bool g_reference_bf16_moments = false;
// The same for the master weights (--master_dtype, --saved_master_dtype or --plant fp32_masters).
bool g_bf16_masters = false;
bool g_reference_bf16_masters = false;

void check_close(const std::string& what, const at::Tensor& got, const at::Tensor& want,
                 at::ScalarType dt, zt::test::Compared compared = zt::test::Compared::kParameter) {
  const double e = g_bf16_masters && dt == at::kFloat
                       ? zt::test::excess_bf16_masters(got, want, compared, kLr)
                   : g_bf16_moments && dt == at::kFloat
                       ? zt::test::excess_bf16_moments(got, want, compared, kLr)
                       : zt::test::excess(got, want, dt);
  if (!(e <= 0)) {  // a NaN fails too
    // The element furthest outside: its difference over what it was allowed.
    const at::Tensor w = want.to(at::kDouble).reshape({-1});
    const at::Tensor diff = (got.to(at::kDouble).reshape({-1}) - w).abs();
    const int64_t at = (diff / (w.abs() + 1e-6)).argmax().item<int64_t>();
    throw CheckFailed(what + ": max |zt - torch| exceeds tolerance by " + std::to_string(e) +
                      " (shape " + c10::str(got.sizes()) +
                      "; the largest relative difference: zt " +
                      std::to_string(got.reshape({-1})[at].item<double>()) + ", torch " +
                      std::to_string(want.reshape({-1})[at].item<double>()) + " at element " +
                      std::to_string(at) + ")");
  }
}

// Every parameter, element by element, within the tolerance of the compute dtype, and in bf16
// its mean error within the bound a lost or doubled update exceeds (oracle_tolerance.h). The
// first parameter off is named. Returns the largest bf16 mean error as a fraction of its bound
// (0 in fp32).
double check_parameters(zt::Engine& engine, Weights& ref, at::ScalarType dt, int64_t applied,
                        const std::string& plant) {
  auto got = engine.full_parameters();
  auto want = ref.all();
  // --plant nan: a fault the comparison must catch (tested).
  if (plant == "nan") got.back().second.view(-1)[0] = std::numeric_limits<float>::quiet_NaN();
  // As many as the reference: an extra one went unchecked, a missing one was read past the end.
  if (got.size() != want.size()) {
    throw CheckFailed("the engine has " + std::to_string(got.size()) +
                      " parameters, the reference " + std::to_string(want.size()));
  }
  double worst_mean = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    if (got[i].first != want[i].first)
      throw CheckFailed("parameter order: " + got[i].first + " vs " + want[i].first);
    const at::Tensor mine = got[i].second.view(want[i].second.sizes());
    const std::string when = "after " + std::to_string(applied) + " steps, " + want[i].first;
    check_close(when, mine, want[i].second, dt);
    // With fp32 compute the parameters hold the bf16 masters' values, which bf16 holds exactly.
    if (dt == at::kFloat && g_reference_bf16_masters &&
        !at::equal(mine, mine.to(at::kBFloat16).to(at::kFloat))) {
      throw CheckFailed(when + " holds values bf16 cannot: the masters are not kept in bf16");
    }
    if (dt == at::kFloat && g_bf16_masters) {
      const zt::test::MeanError m = zt::test::moment_mean_error(mine, want[i].second);
      if (!m.ok()) throw CheckFailed(when + ": " + m.describe());
    }
    if (dt == at::kFloat) continue;
    const zt::test::MeanError m = zt::test::mean_error(mine, want[i].second, kLr, true);
    if (!m.ok()) throw CheckFailed(when + ": " + m.describe());
    worst_mean = std::max(worst_mean, m.mean / m.bound);
  }
  return worst_mean;
}

// The debug accessors after `applied` steps: masters and AdamW's states match the reference
// (stage 3 and offloaded masters are the only full copy there is), gradients are zero again.
void check_states(zt::Engine& engine, Reference& ref, at::ScalarType dt, int64_t applied) {
  const std::string when = " after " + std::to_string(applied) + " steps";
  for (auto& [name, t] : ref.weights.all()) {
    const at::Tensor master = engine.full_fp32_param(name);
    const std::string master_what = "full_fp32_param(" + name + ")" + when;
    // Kept in bf16 (the reference's are): every master is a value bf16 holds, exactly, and on
    // average as close as rounding the same values allows.
    zt::test::check(
        !g_reference_bf16_masters || at::equal(master, master.to(at::kBFloat16).to(at::kFloat)),
        master_what + " holds values bf16 cannot: the masters are not kept in bf16");
    check_close(master_what, master, t, dt);
    if (g_bf16_masters && dt == at::kFloat) {
      const zt::test::MeanError m = zt::test::moment_mean_error(master, t);
      zt::test::check(m.ok(), master_what + ": " + m.describe());
    }
    for (const char* state : {"exp_avg", "exp_avg_sq"}) {
      const at::Tensor moment = engine.full_optimizer_state(name, state);
      const std::string what = "full_optimizer_state(" + name + ", " + state + ")" + when;
      // Kept in bf16 (the reference's are): every value is one bf16 holds, exactly.
      zt::test::check(
          !g_reference_bf16_moments || at::equal(moment, moment.to(at::kBFloat16).to(at::kFloat)),
          what + " holds values bf16 cannot: the moments are not kept in bf16");
      check_close(what, moment, ref.state(t, state), dt, zt::test::Compared::kMoment);
      if (g_bf16_moments && dt == at::kFloat) {
        const zt::test::MeanError m = zt::test::moment_mean_error(moment, ref.state(t, state));
        zt::test::check(m.ok(), what + ": " + m.describe());
      }
    }
    const at::Tensor grad = engine.full_fp32_grad(name);
    zt::test::check(at::equal(grad, at::zeros_like(t)),
                    "full_fp32_grad(" + name + ") is not zero right after a step" + when);
  }
}

// After the step's micro steps, before step(): the averaged, unscaled, unclipped gradient.
void check_grads(zt::Engine& engine, Reference& ref, at::ScalarType dt, int64_t step) {
  for (auto& [name, t] : ref.weights.all()) {
    check_close("full_fp32_grad(" + name + ") at step " + std::to_string(step + 1),
                engine.full_fp32_grad(name), t.grad(), dt, zt::test::Compared::kGradient);
  }
}

// Names: registration order, and unknown ones refused with the valid ones listed (on every rank,
// before any collective, so nothing hangs).
void check_names(zt::Engine& engine) {
  const std::vector<std::string> want{"w0", "b0", "w1", "b1", "b2"};
  zt::test::check(engine.parameter_names() == want, "parameter_names() is not w0 b0 w1 b1 b2");
  auto refused = [](const std::function<void()>& call, const std::string& names) {
    try {
      call();
    } catch (const zt::ConfigError& e) {
      zt::test::check(std::string(e.what()).find(names) != std::string::npos,
                      std::string("the error does not list ") + names + ": " + e.what());
      return;
    }
    throw CheckFailed("an unknown name was not refused (listing " + names + ")");
  };
  refused([&] { engine.full_fp32_param("w9"); }, "w0, b0, w1, b1, b2");
  refused([&] { engine.full_fp32_grad("decoder"); }, "w0, b0, w1, b1, b2");
  refused([&] { engine.full_optimizer_state("w0", "momentum"); }, "exp_avg, exp_avg_sq");
}

// Recomputation really happened (or, without checkpointing, did not).
void check_forward_calls(const std::vector<LambdaUnit*>& units, int64_t steps,
                         const zt::EngineOptions& opt, int64_t eval_calls) {
  const int64_t want_calls = steps * opt.grad_accum * (opt.activation_checkpointing ? 2 : 1) +
                             eval_calls;
  for (const auto& u : units) {
    if (u->calls() != want_calls) {
      throw CheckFailed("unit " + u->name() + " ran forward " + std::to_string(u->calls()) +
                        " times, expected " + std::to_string(want_calls));
    }
  }
}

// --eval: kValSamples fixed samples (the same at every world size), rank r taking samples r,
// r + world, ... in batches of kMicroBatch, every rank running as many batches (a short last one
// padded with sample 0, left out of the sum). Returns the mean per-sample MSE over all ranks'
// samples and adds this rank's forward_eval calls to `calls`.
constexpr int64_t kValSamples = 7, kValFirst = 1000000;

double engine_val_loss(zt::Engine& engine, zt::Communicator& comm, const zt::RankEnv& env,
                       at::ScalarType dt, int64_t& calls) {
  const auto [x, y] = samples(kValFirst, kValSamples);
  const int64_t per_rank = (kValSamples + env.world - 1) / env.world;
  const int64_t batches = (per_rank + kMicroBatch - 1) / kMicroBatch;
  double sum = 0;
  for (int64_t b = 0; b < batches; ++b) {
    std::vector<int64_t> rows;
    int64_t real = 0;
    for (int64_t k = 0; k < kMicroBatch; ++k) {
      const int64_t i = (b * kMicroBatch + k) * env.world + env.rank;
      rows.push_back(i < kValSamples ? i : 0);
      if (i < kValSamples) ++real;
    }
    const at::Tensor index = at::tensor(rows, at::kLong);
    const at::Tensor out = engine.forward_eval(x.index_select(0, index).to(dt)).to(at::kFloat);
    ++calls;
    if (out.requires_grad()) throw CheckFailed("forward_eval's output requires grad");
    const at::Tensor target = y.index_select(0, index);
    for (int64_t k = 0; k < real; ++k) {
      sum += at::mse_loss(out[k], target[k]).item<double>();
    }
  }
  at::Tensor total = at::tensor({sum}, at::kDouble);
  comm.all_reduce(total, zt::ReduceOp::kSum)->wait();
  return total.item<double>() / kValSamples;
}

// The same loss from the engine's own full parameters through the units' functions, in one
// process and one batch: what every world size and stage must reproduce.
double reference_val_loss(zt::Engine& engine) {
  Weights w(42, /*values=*/false);
  for (auto& [name, t] : engine.full_parameters()) {
    for (auto& [mine, slot] : w.all()) {
      if (mine == name) slot.detach().copy_(t);
    }
  }
  const c10::NoGradGuard no_grad;
  auto units = make_units(w);
  auto [x, y] = samples(kValFirst, kValSamples);
  at::Tensor h = x;
  for (auto& u : units) h = u->forward(h);
  double sum = 0;
  for (int64_t i = 0; i < kValSamples; ++i) sum += at::mse_loss(h[i], y[i]).item<double>();
  return sum / kValSamples;
}

// --eval: the engine's validation loss now against the reference's from the same parameters.
double check_val_loss(zt::Engine& engine, zt::Communicator& comm, const zt::RankEnv& env,
                      at::ScalarType dt, int64_t step, int64_t& calls) {
  const double got = engine_val_loss(engine, comm, env, dt, calls);
  const double want = reference_val_loss(engine);
  // fp32: the order of the sums only; bf16 runs the units in bf16, the reference in fp32.
  const double tolerance = dt == at::kFloat ? 1e-6 : 2e-2;
  if (!(std::abs(got - want) <= tolerance * std::abs(want))) {
    throw CheckFailed("validation loss after step " + std::to_string(step) + ": engine " +
                      std::to_string(got) + ", reference " + std::to_string(want) +
                      ", relative difference over " + std::to_string(tolerance));
  }
  return got;
}

// The OK line's numbers: gathered bytes (bounded in stage 3), collectives, offloaded bytes.
std::string memory_text(const zt::Composition& setup) {
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
  zt::CommStats stats = zt::job_comm_stats(setup);
  text += " all_gather_calls=" + std::to_string(stats[zt::CommOp::kAllGather].calls) +
          " reduce_scatter_calls=" + std::to_string(stats[zt::CommOp::kReduceScatter].calls);
  if (setup.tiers.by_id.empty()) return text;
  text += " offload_optimizer=" + std::to_string(mem.offload_optimizer) +
          " offload_param=" + std::to_string(mem.offload_param) +
          " grads=" + std::to_string(mem.grads) +
          " offload_grads=" + std::to_string(mem.offload_grads);
  int64_t held = 0, moved = 0;
  for (const auto& [id, t] : setup.tiers.by_id) {
    held += t->stats().bytes_allocated;
    moved += t->stats().bytes_read + t->stats().bytes_written;
  }
  if (held < mem.offload_optimizer + mem.offload_param) {
    throw CheckFailed("tiers hold " + std::to_string(held) +
                      " bytes, less than the engine placed there");
  }
  int64_t read = 0;
  for (const auto& [id, t] : setup.tiers.by_id) read += t->stats().bytes_read;
  return text + " tier_bytes_moved=" + std::to_string(moved) +
         " tier_bytes_read=" + std::to_string(read) +
         " tier_bytes_written=" + std::to_string(moved - read);
}

// "K" (step K) or "K-L" (steps K to L) as {first, last}; "0" is none.
std::pair<int, int> step_range(const std::string& text) {
  const size_t dash = text.find('-');
  if (dash == std::string::npos) return {std::stoi(text), std::stoi(text)};
  return {std::stoi(text.substr(0, dash)), std::stoi(text.substr(dash + 1))};
}

// The micro steps of `step`, each rank on its slice of the global batch; with `overflow_now` the
// last rank's loss is inf, with `nan_grad_now` its loss is finite but the gradient of the
// model's output NaN. Appends the losses.
// Returns whether the planted backward failure (fail_backward_now: the step's first micro step)
// was met.
bool run_micro_steps(zt::Engine& engine, const zt::EngineOptions& opt, const zt::RankEnv& env,
                     int64_t step, bool overflow_now, std::vector<double>& losses,
                     bool nan_grad_now = false, bool fail_backward_now = false) {
  const int64_t global = kMicroBatch * env.world;
  bool failed = false;
  for (int m = 0; m < opt.grad_accum; ++m) {
    const int64_t first_sample = (step * opt.grad_accum + m) * global;
    auto [x, y] = samples(first_sample + env.rank * kMicroBatch, kMicroBatch);
    const bool fail = fail_backward_now && m == 0;
    try {
      losses.push_back(engine
                           .forward_backward(
                               x.to(opt.compute_dtype),
                               [&](const at::Tensor& out) {
        if (nan_grad_now && env.rank == env.world - 1 && out.requires_grad()) {
          out.register_hook([](const at::Tensor& g) { return g * std::nan(""); });
        }
        // Every rank's backward fails at its start (one rank's alone would leave its peers in
        // the reductions it never joins).
        if (fail && out.requires_grad()) {
          out.register_hook([](const at::Tensor&) -> at::Tensor {
            throw std::runtime_error("planted: this backward fails");
          });
        }
        at::Tensor loss = at::mse_loss(out.to(at::kFloat), y);
        // An inf on one rank only: the skip decision must still be the same everywhere.
        if (overflow_now && env.rank == env.world - 1)
          loss = loss * std::numeric_limits<float>::infinity();
        return loss;
                               })
                           .item<double>());
    } catch (const std::exception& e) {
      // The caller goes on with the step's other micro steps, as a training loop that catches
      // the error might: the step is skipped all the same.
      if (!fail || std::string(e.what()).find("planted: this backward fails") == std::string::npos)
        throw;
      failed = true;
    }
  }
  return failed;
}

// An inf loss on the last rank without loss scaling (--force_overflow_step): step() throws on
// every rank, naming the micro step where the loss was, and that rank elsewhere.
void check_loss_error(const std::string& what, const zt::RankEnv& env, int64_t step) {
  const std::string at_step = " at step " + std::to_string(step + 1);
  const std::string want = env.rank == env.world - 1
                               ? "loss is inf" + at_step + " (micro step 1)"
                               : "the loss on rank " + std::to_string(env.world - 1) +
                                     " is not finite" + at_step + " (this rank's were)";
  if (what.find(want) == std::string::npos ||
      what.find("nothing of the step was applied") == std::string::npos) {
    throw CheckFailed("step " + std::to_string(step + 1) + " threw \"" + what +
                      "\", not the error of an inf loss (\"" + want + "\")");
  }
}

// --save_at: a saver writing into --ckpt_dir (null without).
std::unique_ptr<zt::CheckpointSaver> make_saver(Args& a, zt::Store& store, const zt::RankEnv& env,
                                                std::chrono::milliseconds timeout,
                                                const std::string& job) {
  if (std::stoi(a["save_at"]) <= 0) return nullptr;
  zt::CheckpointOptions options;
  options.dir = a["ckpt_dir"];
  options.keep_last = 0;
  options.timeout = timeout;
  options.job = job;
  return std::make_unique<zt::CheckpointSaver>(options, store, env.rank, env.world);
}

// --load: the latest checkpoint under --ckpt_dir into `engine`; the reference replays the steps
// it holds (with the saver's world size, hence its batches; a forced overflow skips one). Returns
// the steps done.
int64_t resume(zt::Engine& engine, Reference& ref, Args& a, const zt::EngineOptions& opt,
               bool accessors) {
  zt::CheckpointReader reader(zt::resolve_checkpoint(a["ckpt_dir"]));
  engine.load_checkpoint(reader);
  const int64_t done = reader.step(), overflow = std::stoi(a["force_overflow_step"]);
  // The saver's states were bf16 or fp32 (--saved_state_dtype); the load rounds fp32 ones to
  // nearest even into bf16 states, as the reference does once it has replayed the saved steps.
  const std::string saved_dtype = a["saved_state_dtype"].empty() ? a["state_dtype"]
                                                                 : a["saved_state_dtype"];
  zt::test::check(reader.counters().state_dtype == saved_dtype,
                  "the checkpoint records state dtype " + reader.counters().state_dtype + ", not " +
                      saved_dtype);
  const bool bf16_states = ref.bf16_states;
  ref.bf16_states = saved_dtype == "bf16";
  // The masters likewise (--saved_master_dtype, default --master_dtype's).
  const std::string saved_master = a["saved_master_dtype"].empty() ? a["master_dtype"]
                                                                   : a["saved_master_dtype"];
  zt::test::check(reader.counters().master_dtype == saved_master,
                  "the checkpoint records master dtype " + reader.counters().master_dtype +
                      ", not " + saved_master);
  const bool bf16_masters = ref.bf16_masters;
  ref.bf16_masters = false;
  if (saved_master == "bf16") ref.round_masters_from_now();
  int64_t applied = 0;
  for (int64_t s = 0; s < done; ++s) {
    if (s + 1 == overflow) continue;
    ref.step(s, opt, std::stoi(a["saved_world"]));
    ++applied;
  }
  ref.bf16_states = bf16_states;
  if (bf16_states) ref.round_states();
  ref.bf16_masters = false;
  if (bf16_masters) ref.round_masters_from_now();
  zt::test::check(reader.counters().optimizer_steps == applied,
                  "the checkpoint of step " + std::to_string(done) + " counts " +
                      std::to_string(reader.counters().optimizer_steps) + " optimizer steps, not " +
                      std::to_string(applied));
  if (accessors) check_states(engine, ref, opt.compute_dtype, applied);
  return done;
}

// What a run did step by step, for --record / --compare.
struct Trace {
  std::vector<double> losses;  // this rank's, every micro step
  std::vector<double> scales;  // every step's loss scale
};

void check_equal(const at::Tensor& got, const at::Tensor& want, const std::string& what) {
  zt::test::check(
      got.sizes() == want.sizes() && at::equal(got, want),
      what + " differ from the recorded run's: " + c10::str(got) + " vs " + c10::str(want));
}

// --record / --compare: the trace from step `first` on, and the final state: every parameter in
// its compute dtype, its fp32 master and AdamW's two moments (a resume that restored a master or a
// moment wrongly could still round to the same bf16 parameters).
void record_or_compare(Args& a, int rank, zt::Engine& engine, const Trace& trace, int64_t first,
                       int64_t accum) {
  std::vector<at::Tensor> mine{at::tensor(trace.losses, at::kDouble),
                               at::tensor(trace.scales, at::kDouble)};
  const std::string from = " from step " + std::to_string(first + 1) + " on";
  std::vector<std::string> what{"the losses" + from, "the loss scales" + from};
  for (auto& [name, t] : engine.full_parameters()) {
    mine.push_back(t);
    what.push_back("the final values of parameter " + name);
    mine.push_back(engine.full_fp32_param(name));
    what.push_back("the final fp32 master of " + name);
    for (const char* state : {"exp_avg", "exp_avg_sq"}) {
      mine.push_back(engine.full_optimizer_state(name, state));
      what.push_back(std::string("the final ") + state + " of " + name);
    }
  }
  const std::string suffix = "-rank" + std::to_string(rank) + ".pt";
  if (!a["record"].empty()) torch::save(mine, a["record"] + suffix);
  if (a["compare"].empty()) return;
  std::vector<at::Tensor> want;
  torch::load(want, a["compare"] + suffix);
  if (mine.size() != want.size()) {
    throw CheckFailed("this run has " + std::to_string(mine.size() - 2) +
                      " final tensors, the recorded one " + std::to_string(want.size() - 2));
  }
  check_equal(mine[0], want[0].narrow(0, first * accum, want[0].numel() - first * accum), what[0]);
  check_equal(mine[1], want[1].narrow(0, first, want[1].numel() - first), what[1]);
  for (size_t i = 2; i < want.size(); ++i) check_equal(mine[i], want[i], what[i]);
}

// The engine over the check's units: built here, or (--zero_init) by the engine from `source`,
// in which case `units` is filled with the units it built.
std::unique_ptr<zt::Composition> make_setup(Args& a, const zt::Config& config,
                                            const zt::RankEnv& env, zt::Store& store,
                                            std::chrono::milliseconds timeout,
                                            std::vector<LambdaUnit*>& units, CheckSource& source) {
  zt::ComposeHooks hooks;
  hooks.adjust = [&](zt::EngineOptions& o) {
    // The trainer's sections' two engine options.
    o.grad_accum = std::stoi(a["accum"]);
    o.activation_checkpointing = a["checkpoint"] == "true";
    // Dynamic loss scaling outside fp16 is no config setting (fp16 turns it on by itself).
    if (a["loss_scale"] == "true") o.dynamic_loss_scale = true;
    // Simulated hosts: the launcher puts every rank on one host (LOCAL_WORLD_SIZE = world).
    if (a["ranks_per_host"] != "0") o.ranks_per_host = std::stoi(a["ranks_per_host"]);
  };
  // --staged: every collective through StagedCommunicator for the CPU, which copies each op's
  // tensors into host tensors and its results back: the path of a GPU engine over comm_ucx.
  if (a["staged"] == "true") {
    hooks.prepare = [](zt::Composition& made) {
      made.comm = std::make_unique<zt::StagedCommunicator>(std::move(made.comm), at::kCPU);
    };
  }
  const zt::EngineSettings settings = zt::EngineSettings::of(config);
  if (g_zero_init) {
    auto setup = std::make_unique<zt::Composition>(
        zt::compose(settings, config.catalog(), env, store, timeout, source, hooks));
    units = source.built;
    return setup;
  }
  std::vector<zt::Unit*> plain(units.begin(), units.end());
  return std::make_unique<zt::Composition>(
      zt::compose(settings, config.catalog(), env, store, timeout, plain, hooks));
}

// Stages 2-3 must reduce-scatter a unit's gradients as soon as it finished backward: by the time
// the gradient reached the first unit's output (`reduces` then), later units' groups were sent.
void check_early_reduce(const zt::EngineOptions& opt, uint64_t reduces) {
  if (opt.stage >= 2 && !opt.activation_checkpointing && reduces == 0) {
    throw CheckFailed("stage " + std::to_string(opt.stage) +
                      " sent no gradient before backward reached "
                      "the first unit: reductions wait for the whole backward");
  }
}

// --refuse_partial (one rank): a checkpoint of this model holding the masters and exp_avg only,
// as another optimizer's would, written by hand through the saver, must be refused by the load
// naming exp_avg_sq, with nothing changed (the training that follows still matches).
void check_partial_refused(zt::Engine& engine, zt::Store& store, std::chrono::milliseconds timeout,
                           const std::string& dir) {
  zt::CheckpointOptions options;
  options.dir = dir;
  options.async = false;
  options.timeout = timeout;
  options.job = "partial";
  zt::CheckpointSaver saver(options, store, 0, 1);
  std::vector<std::pair<zt::CheckpointPiece, at::Tensor>> pieces;
  for (const std::string& name : engine.parameter_names()) {
    pieces.push_back({{name, "param", 0, 0}, engine.full_fp32_param(name)});
    pieces.push_back({{name, "exp_avg", 0, 0}, engine.full_optimizer_state(name, "exp_avg")});
  }
  auto fill = [&](zt::CheckpointRankWriter& w) {
    for (auto& [piece, t] : pieces) {
      if (piece.kind == "param") w.add_tensor({piece.tensor, t.sizes().vec()});
    }
    for (auto& [piece, t] : pieces) piece.end = t.numel();
    for (auto& [piece, t] : pieces) w.declare(piece, false);
    w.begin_data();
    for (size_t i = 0; i < pieces.size(); ++i) {
      const at::Tensor& t = pieces[i].second;
      w.write(static_cast<int64_t>(i), 0, t.data_ptr<float>(), t.numel());
    }
    w.set_counters({});
  };
  zt::CheckpointSaverAccess::save(saver, fill, 0, {});
  saver.finish();
  try {
    engine.load_checkpoint(zt::CheckpointReader(zt::resolve_checkpoint(dir)));
  } catch (const zt::ConfigError& e) {
    const std::string m = e.what();
    zt::test::check(m.find("no optimizer state 'exp_avg_sq'") != std::string::npos &&
                        m.find("plugins.optimizer") != std::string::npos,
                    "the refusal does not name exp_avg_sq and plugins.optimizer: " + m);
    return;
  }
  throw CheckFailed("a checkpoint without exp_avg_sq was loaded");
}

// --codec_*: codec_blockq as the engine's config makes it (made here too for --plant uncoded).
std::unique_ptr<zt::Codec> check_codec(Args& a, const zt::Config& config, const char* role) {
  const std::string bits = a[std::string("codec_") + role];
  if (bits == "0") return nullptr;
  const zt::CodecPlugin& plugin = config.catalog().codec("codec_blockq",
                                                         "--codec_" + std::string(role));
  std::map<std::string, zt::Value> values{{"bits", int64_t{std::stoll(bits)}},
                                          {"block", int64_t{std::stoll(a["codec_block"])}}};
  return plugin.create(zt::Options(std::string("codec.") + role, plugin.options(), values, {}));
}

// The reference's coded gradients of `step` (codec_reference.h), from the engine's weights
// `exact` at the step's start, each simulated rank on its own micro batch.
void coded_reference_grads(zt::test::CodecReference& coded, Reference& ref,
                           const zt::test::NamedTensors& exact, int64_t step, int world) {
  zt::test::NamedTensors params = ref.weights.all();
  for (size_t i = 0; i < params.size(); ++i) {
    if (params[i].first != exact[i].first)
      throw CheckFailed("parameter order: " + exact[i].first + " vs " + params[i].first);
  }
  coded.gradients(params, exact, [&](int q) {
    auto [x, y] = samples(step * kMicroBatch * world + q * kMicroBatch, kMicroBatch);
    at::Tensor h = x;
    for (auto& u : ref.units) h = u->forward(h);
    return at::mse_loss(h, y);
  });
}

// One rank's check: train through the engine and the reference side by side, compare.
std::string run_check(Args& a, const zt::RankEnv& env, const std::string& nvme_dir,
                      const std::unique_ptr<zt::Store>& store) {
  const auto timeout = kTimeout;
  const zt::Config config = check_config(a, nvme_dir);
  const int steps = static_cast<int>(config.section("run").get_int("steps"));
  const int force_overflow = std::stoi(a["force_overflow_step"]);
  const std::pair<int, int> nan_grads = step_range(a["nan_grad_step"]);
  const bool accessors = a["accessors"] == "true";

  Weights mine(42);
  auto own_units = make_units(mine);
  std::vector<LambdaUnit*> units;
  for (auto& u : own_units) units.push_back(u.get());
  CheckSource source;  // --zero_init: its units live in the engine, its tensors here
  auto setup = make_setup(a, config, env, *store, timeout, units, source);
  zt::Engine& engine = *setup->engine;
  const zt::EngineOptions& opt = setup->options;

  uint64_t reduces_at_first_unit = 0;  // see check_early_reduce
  units[0]->probe = [&](const at::Tensor& y) {
    if (!y.requires_grad()) return;
    y.register_hook([&](const at::Tensor& g) {
      // A gradient codec reduce-scatters by all-to-all.
      const zt::CommStats stats = zt::job_comm_stats(*setup);
      reduces_at_first_unit = stats[zt::CommOp::kReduceScatter].calls +
                              stats[zt::CommOp::kAllToAll].calls;
      return g;
    });
  };
  Reference reference(split_list(a["no_decay"]));
  // --plant fp32_states: the engine keeps fp32 states while the reference rounds its to bf16.
  reference.bf16_states = a["state_dtype"] == "bf16" || a["plant"] == "fp32_states";
  g_bf16_moments = reference.bf16_states || a["saved_state_dtype"] == "bf16";
  g_reference_bf16_moments = reference.bf16_states;
  // --plant fp32_masters: the engine keeps fp32 masters while the reference rounds its weights
  // after every step (from the same initial values, so the first gradients agree and the masters
  // are what differs). A load starts from the saver's weights: resume() rounds them where the
  // saver did.
  const bool bf16_masters = a["master_dtype"] == "bf16" || a["plant"] == "fp32_masters";
  if (a["master_dtype"] == "bf16" && a["load"] != "true") reference.round_masters_from_now();
  reference.bf16_masters = bf16_masters;
  g_bf16_masters = bf16_masters || a["saved_master_dtype"] == "bf16";
  g_reference_bf16_masters = bf16_masters;
  const auto weight_codec = check_codec(a, config, "weights");
  const auto gradient_codec = check_codec(a, config, "gradients");
  std::unique_ptr<zt::test::CodecReference> coded;
  if (weight_codec || gradient_codec) {
    if (opt.grad_accum != 1 || a["shard"] != "shard_tensor")
      throw zt::ConfigError("the codec reference takes shard_tensor without accumulation");
    const int mics = std::stoi(a["mics"]);
    // The check's ranks share one host, so codec_scope = "all" (the default) codes MiCS's
    // all-reduce across the groups too.
    const bool groups = mics > 0 && mics < env.world;
    coded = std::make_unique<zt::test::CodecReference>(
        weight_codec.get(), gradient_codec.get(), groups ? gradient_codec.get() : nullptr,
        a["error_feedback"] == "true", env.world, groups ? mics : env.world);
  }
  if (accessors) check_names(engine);
  if (a["refuse_partial"] == "true") check_partial_refused(engine, *store, timeout, a["ckpt_dir"]);
  // A resumed coded run has no reference: the steps before the checkpoint would need the
  // engine's weights of then. Its check is --compare against the uninterrupted run, bit for bit.
  // So is a run rounding stochastically, resumed or not (the reference rounds to nearest).
  const bool stochastic = a["rounding"] == "stochastic";
  if (a["rounding"] != "nearest" && !stochastic)
    throw zt::ConfigError("--rounding " + a["rounding"] + ": nearest or stochastic");
  if (stochastic && a["master_dtype"] != "bf16" && a["state_dtype"] != "bf16")
    throw zt::ConfigError("--rounding stochastic rounds bf16 masters or states: give "
                          "--master_dtype bf16 or --state_dtype bf16");
  if (stochastic && accessors)
    throw zt::ConfigError("--rounding stochastic with --accessors: the accessors are checked "
                          "against the reference, which rounds to nearest");
  if (stochastic && a["record"].empty() && a["compare"].empty())
    throw zt::ConfigError("--rounding stochastic is checked by --record or --compare only");
  const bool compare_only_resume = (coded || stochastic) && a["load"] == "true";
  if (compare_only_resume && a["compare"].empty())
    throw zt::ConfigError(
        "a resumed coded or stochastic run is checked by --compare only; give it");
  int64_t first = 0;
  if (compare_only_resume) {  // loaded without the reference replaying the saved steps
    const zt::CheckpointReader reader(zt::resolve_checkpoint(a["ckpt_dir"]));
    engine.load_checkpoint(reader);
    first = reader.step();
    coded.reset();
  } else if (a["load"] == "true") {
    first = resume(engine, reference, a, opt, accessors);
  }
  auto saver = make_saver(a, *store, env, timeout, setup->tiers.job);
  const at::ScalarType dt = opt.compute_dtype;
  int64_t applied = first - (force_overflow >= 1 && force_overflow <= first ? 1 : 0);
  Trace trace;
  const bool eval = a["eval"] == "true";
  int64_t eval_calls = 0;
  const double val_loss_first =
      eval ? check_val_loss(engine, *setup->comm, env, dt, first, eval_calls) : 0;
  for (int64_t step = first; step < steps; ++step) {
    const bool overflow_now = step + 1 == force_overflow;
    const bool nan_grad_now = step + 1 >= nan_grads.first && step + 1 <= nan_grads.second;
    // --plant lost_update: the engine's second update is lost (lr 0), the reference's is not.
    const bool lose = a["plant"] == "lost_update" && step == first + 1;
    const double lr = lose ? 0.0 : kLr;
    if (a["begin_step"] == "true") engine.begin_step(lr);
    const zt::test::NamedTensors exact = coded ? engine.full_parameters()
                                               : zt::test::NamedTensors{};
    // --fail_backward_step: the step's first backward throws on every rank; the step is skipped.
    const bool fail_now = step + 1 == std::stoi(a["fail_backward_step"]);
    const bool failed = run_micro_steps(engine, opt, env, step, overflow_now, trace.losses,
                                        nan_grad_now, fail_now);
    if (fail_now && !failed)
      throw CheckFailed("the planted backward failure did not reach the caller");
    if (step == first) check_early_reduce(opt, reduces_at_first_unit);
    if (coded) {
      coded_reference_grads(*coded, reference, exact, step, env.world);
    } else {
      reference.grads(step, opt, env.world);
    }
    // Stage 1 reduces at the step: before it, full_fp32_grad is the exact sum of the ranks'
    // .grad, not what the codec delivers (the optimizer states after the step show that).
    // An overflowing step's gradients are not finite: what matters is that it is skipped.
    if ((accessors || (coded && opt.stage >= 2)) && !overflow_now && !nan_grad_now && !fail_now)
      check_grads(engine, reference, dt, step);
    zt::StepReport rep;
    try {
      rep = engine.step(lr);
    } catch (const zt::NumericError& e) {
      if (!overflow_now || opt.dynamic_loss_scale) throw;
      check_loss_error(e.what(), env, step);
      rep.skipped = true;  // nothing of the step was applied: going on skips it
    }
    trace.scales.push_back(rep.loss_scale);
    if (saver && step + 1 == std::stoi(a["save_at"])) saver->save(engine, step + 1, {});
    if (overflow_now || nan_grad_now || fail_now) {
      if (!rep.skipped) {
        throw CheckFailed("step " + std::to_string(step + 1) +
                          (fail_now ? "'s backward failed" : " overflowed") +
                          " but was not skipped");
      }
      if (coded) coded->forget_residuals();
      continue;
    }
    if (rep.skipped)
      throw CheckFailed("step " + std::to_string(step + 1) + " was skipped without an overflow");
    ++applied;
    // What the trainer's lr schedule counts: updates applied, the skipped step left out.
    if (engine.optimizer_steps() != applied || rep.step != applied) {
      throw CheckFailed("step " + std::to_string(step + 1) + ": the engine counts " +
                        std::to_string(engine.optimizer_steps()) + " updates applied (report " +
                        std::to_string(rep.step) + "), not " + std::to_string(applied));
    }
    reference.apply(opt);
    // Coded: each step starts from the engine's weights, so each update is checked on its own,
    // and AdamW's moments show the coded gradient at every stage.
    if (accessors || coded) check_states(engine, reference, dt, applied);
    if (eval) check_val_loss(engine, *setup->comm, env, dt, step + 1, eval_calls);
  }
  if (saver) saver->finish();
  saver.reset();
  const double mean_vs_bound = compare_only_resume || stochastic
                                   ? 0
                                   : check_parameters(engine, reference.weights, dt, applied,
                                                      a["plant"]);
  check_forward_calls(units, steps - first, opt, eval_calls);
  record_or_compare(a, env.rank, engine, trace, first, opt.grad_accum);
  std::string text = memory_text(*setup);
  if (eval) {
    char loss[64];
    std::snprintf(loss, sizeof loss, " val_loss_first=%.17g", val_loss_first);
    text += loss;
  }
  if (dt != at::kFloat) text += " bf16_mean_error_over_bound=" + std::to_string(mean_vs_bound);
  // Files of the NVMe tier are gone once the setup (engine first, then its tiers) is destroyed.
  const std::string rank_dir = nvme_dir + "/zt-" + setup->tiers.job + "/rank" +
                               std::to_string(env.rank);
  setup.reset();
  if (std::filesystem::exists(rank_dir))
    throw CheckFailed("NVMe tier left " + rank_dir + " behind");
  return text;
}

// Every option's default (the usage above).
Args default_args() {
  return Args{{"stage", "0"},
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
              {"nan_grad_step", "0"},
              {"min_scale", "1"},
              {"fail_backward_step", "0"},
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
              {"pipeline", "true"},
              {"accessors", "false"},
              {"begin_step", "false"},
              {"eval", "false"},
              {"zero_init", "false"},
              {"save_at", "0"},
              {"ckpt_dir", ""},
              {"record", ""},
              {"load", "false"},
              {"saved_world", "0"},
              {"compare", ""},
              {"refuse_partial", "false"},
              {"mics", "-1"},
              {"hier", "false"},
              {"ranks_per_host", "0"},
              {"codec_weights", "0"},
              {"codec_gradients", "0"},
              {"error_feedback", "false"},
              {"codec_block", "8"},
              {"state_dtype", "fp32"},
              {"saved_state_dtype", ""},
              {"master_dtype", "fp32"},
              {"saved_master_dtype", ""},
              {"rounding", "nearest"},
              {"gradients_in_tier", "false"},
              {"plant", ""},
              {"no_decay", ""},
              {"staged", "false"}};
}

// The cases of one run: argv split at "--then", each case's options over the defaults.
std::vector<Args> parse_cases(int argc, char** argv) {
  std::vector<Args> cases{default_args()};
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--then") {
      cases.push_back(default_args());
    } else if (i + 1 < argc) {
      cases.back()[std::string(argv[i]).substr(2)] = argv[i + 1];
      ++i;
    }
  }
  return cases;
}

}  // namespace

static int run_main(int argc, char** argv) {
  std::vector<Args> cases = parse_cases(argc, argv);
  zt::RankEnv env = zt::discover_rank_env();
  const std::string nvme_dir =
      std::string(std::getenv("ZT_CHECK_OUT") ? std::getenv("ZT_CHECK_OUT") : "/tmp") + "/nvme";
  // One rendezvous for all cases; each composes its job on keys of its own.
  std::shared_ptr<zt::Store> job_store;
  for (size_t i = 0; i < cases.size(); ++i) {
    Args& a = cases[i];
    const std::string report =
        cases.size() == 1 ? "" : "rank" + std::to_string(env.rank) + ".case" + std::to_string(i);
    const int code = zt::test::run_rank_check(
        env.rank,
        [&] {
      kHidden = std::stoll(a["hidden"]);
      g_zero_init = a["zero_init"] == "true";
      if (!job_store) {
        job_store = zt::rendezvous(env.master_addr.empty() ? "127.0.0.1" : env.master_addr,
                                   env.master_port, env.rank, env.world, kTimeout, env.cluster_job);
      }
      return run_check(a, env, nvme_dir,
                       zt::prefixed_store(job_store, "case" + std::to_string(i) + "/"));
        },
        report);
    if (code != 0) return code;
  }
  if (job_store) zt::depart(*job_store, env.rank, env.world, kTimeout);
  return 0;
}

// As the trainer ends its ranks: LibTorch's teardown is most of a forked rank's exit
// (zt/host/process_exit.h).
int main(int argc, char** argv) { zt::exit_without_library_teardown(run_main(argc, argv)); }
