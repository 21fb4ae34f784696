#include "zt/engine.h"

#include <ATen/ATen.h>
#include <ATen/native/Resize.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>

#include <algorithm>
#include <cmath>
#include <exception>
#include <map>

#include "activation_checkpoint.h"
#include "tile_pipeline.h"
#include "tiered_array.h"
#include "zt/config.h"
#include "zt/error.h"

namespace zt {

namespace {

at::ScalarType dtype_from_name(const std::string& name) {
  if (name == "bf16") return at::kBFloat16;
  if (name == "fp16") return at::kHalf;
  return at::kFloat;
}

// Calls `fn` after autograd accumulated a parameter's gradient into .grad.
class AfterAccumulate final : public torch::autograd::FunctionPostHook {
 public:
  explicit AfterAccumulate(std::function<void()> fn) : fn_(std::move(fn)) {}
  torch::autograd::variable_list operator()(const torch::autograd::variable_list& outputs,
                                            const torch::autograd::variable_list&) override {
    fn_();
    return outputs;
  }

 private:
  std::function<void()> fn_;
};

}  // namespace

EngineOptions EngineOptions::from_config(const Config& config) {
  const Options& zero = config.section("zero");
  const Options& precision = config.section("precision");
  EngineOptions o;
  o.stage = static_cast<int>(zero.get_int("stage"));
  o.compute_dtype = dtype_from_name(precision.get_string("compute"));
  o.dynamic_loss_scale = o.compute_dtype == at::kHalf;
  o.grad_accum = config.section("data").get_int("grad_accum");
  o.reduce_bucket_mb = zero.get_double("reduce_bucket_mb");
  o.overlap_comm = zero.get_bool("overlap_comm");
  o.prefetch_units = zero.get_int("prefetch_units");
  o.prefetch_elements = zero.get_int("prefetch_elements");
  o.max_live_parameters = zero.get_int("max_live_parameters");
  o.allgather_bucket_mb = zero.get_double("allgather_bucket_mb");
  o.param_persistence_threshold = zero.get_int("param_persistence_threshold");
  o.gradient_predivide_factor = zero.get_double("gradient_predivide_factor");
  o.gradient_clipping = zero.get_double("gradient_clipping");
  o.scaler.initial_scale = precision.get_double("initial_scale");
  o.scaler.min_scale = precision.get_double("min_scale");
  o.scaler.max_scale = precision.get_double("max_scale");
  o.scaler.growth_factor = precision.get_double("growth_factor");
  o.scaler.backoff_factor = precision.get_double("backoff_factor");
  o.scaler.growth_interval = precision.get_int("growth_interval");
  o.scaler.hysteresis = precision.get_int("hysteresis");
  o.activation_checkpointing = config.section("model").get_bool("activation_checkpointing");
  o.offload_optimizer_fraction = zero.get_double("offload_optimizer_fraction");
  o.offload_param_fraction = zero.get_double("offload_param_fraction");
  o.sub_group_size = zero.get_int("sub_group_size");
  o.pipeline_read = zero.get_bool("pipeline_read");
  o.pipeline_write = zero.get_bool("pipeline_write");
  return o;
}

struct Engine::Impl {
  struct Param {
    std::string name;
    at::Tensor tensor;
    int group = -1;
    int64_t offset = 0;  // in the group's flat buffer
    std::shared_ptr<torch::autograd::Node> accumulator;  // kept alive: it carries our hook
  };
  struct Group {
    std::vector<int> params;
    int64_t numel = 0, padded = 0, shard = 0;  // shard: elements this rank owns
    at::Tensor flat;           // compute dtype, `padded`; params are views into it
    bool gathered = true;
    bool persistent = true;    // stage 3: never released
    std::shared_ptr<Work> pending_gather;
    at::Tensor param_shard;    // stage 3: compute-dtype shard, the all-gather source
    at::Tensor master;         // fp32, `shard` elements (stage 0: all of them)
    std::vector<at::Tensor> states;
    at::Tensor grad;           // fp32 reduced gradient, `shard` elements
    int ready = 0;             // params whose gradient arrived this micro step
    bool reduced = false;      // this micro step's gradients already sent
    // Offload placement (see place_groups). "streamed": the tier is not addressable, so the
    // bytes move through host buffers; otherwise master/states/param_shard view tier memory.
    bool opt_in_tier = false, opt_streamed = false;
    std::unique_ptr<TieredArray> master_file;
    std::vector<std::unique_ptr<TieredArray>> state_files;
    bool param_in_tier = false, param_streamed = false;
    std::unique_ptr<TieredArray> param_file;
    at::Tensor fetched;        // stage 3, streamed: the shard read ahead of its gather
    std::shared_ptr<Work> fetch_work;
  };
  struct PendingReduce {
    int group;
    at::Tensor out;            // compute-dtype shard being reduce-scattered into
    std::shared_ptr<Work> work;
    int64_t bytes;
  };

  std::vector<Unit*> units;
  std::vector<std::vector<int>> unit_groups;  // groups each unit uses (owned and borrowed)
  Communicator& comm;
  Optimizer& optimizer;
  EngineOptions opt;
  EngineTiers tiers;
  int world, rank;
  std::vector<Param> params;
  std::vector<Group> groups;
  std::vector<PendingReduce> pending;
  LossScaler scaler;
  int64_t steps = 0;
  int64_t micro = 0;
  MemoryReport mem;
  int64_t tile_elements = 0;                 // streamed tile length (a multiple of the alignment)
  std::vector<std::vector<at::Tensor>> tile_sets;  // host buffers, one set per tile in flight

  Impl(std::vector<Unit*> u, Communicator& c, const ShardStrategy& strategy, Optimizer& o,
       EngineOptions options, EngineTiers t)
      : units(std::move(u)), comm(c), optimizer(o), opt(options), tiers(t), world(c.size()),
        rank(c.rank()), scaler(options.scaler, options.dynamic_loss_scale) {
    if (opt.stage < 0 || opt.stage > 3) throw ConfigError("zero.stage must be 0-3");
    if (tiers.optimizer && opt.stage < 1) {
      throw ConfigError("plugins.offload_optimizer needs zero.stage >= 1 (stage is 0)");
    }
    if (tiers.param && opt.stage != 3) {
      throw ConfigError("plugins.offload_param needs zero.stage = 3 (stage is " +
                        std::to_string(opt.stage) + ")");
    }
    register_parameters(strategy);
  }

  std::vector<OffloadTier*> distinct_tiers() const {
    std::vector<OffloadTier*> out;
    for (OffloadTier* t : {tiers.optimizer, tiers.param}) {
      if (t && std::find(out.begin(), out.end(), t) == out.end()) out.push_back(t);
    }
    return out;
  }

  int64_t es() const { return static_cast<int64_t>(c10::elementSize(opt.compute_dtype)); }
  bool sharded() const { return opt.stage >= 1; }

  // Parameters, deduplicated by tensor identity: the first unit listing one owns it.
  void register_parameters(const ShardStrategy& strategy) {
    std::map<const void*, int> seen;
    unit_groups.resize(units.size());
    for (size_t u = 0; u < units.size(); ++u) {
      std::vector<int> owned;
      std::vector<int> used;
      for (auto& [name, tensor] : units[u]->parameters()) {
        const void* key = tensor.unsafeGetTensorImpl();
        auto it = seen.find(key);
        if (it != seen.end()) {
          used.push_back(it->second);
          continue;
        }
        seen[key] = static_cast<int>(params.size());
        owned.push_back(static_cast<int>(params.size()));
        used.push_back(static_cast<int>(params.size()));
        params.push_back({name, tensor, -1, 0, nullptr});
      }
      std::vector<TensorMeta> metas;
      for (int p : owned) metas.push_back({params[p].name, params[p].tensor.numel(), es()});
      ShardPlan plan = strategy.plan(metas, world);
      validate_plan(plan, metas, world, "of unit " + units[u]->name());
      for (const auto& fg : plan.groups) {
        Group g;
        g.numel = fg.numel;
        g.padded = fg.padded_numel;
        for (const auto& seg : fg.segments) {
          int p = owned[seg.tensor];
          params[p].group = static_cast<int>(groups.size());
          params[p].offset = seg.flat_offset;
          g.params.push_back(p);
        }
        groups.push_back(std::move(g));
      }
      for (int p : used) {
        int g = params[p].group;
        if (g >= 0 && std::find(unit_groups[u].begin(), unit_groups[u].end(), g) == unit_groups[u].end()) {
          unit_groups[u].push_back(g);
        }
      }
    }
    place_groups();
    for (size_t g = 0; g < groups.size(); ++g) build_group(static_cast<int>(g));
    for (size_t u = 0; u < units.size(); ++u) {
      int64_t bytes = 0;
      for (int g : unit_groups[u]) bytes += groups[g].padded * es();
      mem.unit_max_params = std::max(mem.unit_max_params, bytes);
    }
    for (size_t p = 0; p < params.size(); ++p) install_grad_hook(static_cast<int>(p));
    if (opt.stage == 3) {
      for (size_t g = 0; g < groups.size(); ++g) {
        if (!groups[g].persistent) release(static_cast<int>(g));
      }
    }
    mem.params_gathered_peak = mem.params_gathered;
  }

  static int64_t round_up(int64_t n, int64_t to) { return (n + to - 1) / to * to; }
  int64_t state_count() const { return static_cast<int64_t>(optimizer.state_names().size()); }

  // Decides which groups' states live in a tier: groups in model order until the configured
  // fraction of the bytes is placed (ColossalAI Gemini's static placement). Stage 3 parameter
  // shards go only for groups that are released between uses (persistent ones stay gathered).
  // Then tells every tier how many bytes are coming, so a full disk fails before training.
  void place_groups() {
    for (Group& g : groups) {
      int64_t max_numel = 0;
      for (int p : g.params) max_numel = std::max(max_numel, params[p].tensor.numel());
      g.persistent = opt.stage < 3 || max_numel < opt.param_persistence_threshold;
      g.shard = sharded() ? g.padded / world : g.padded;
    }
    auto place = [&](double fraction, auto bytes_of, auto eligible, auto mark) {
      double total = 0, placed = 0;
      for (Group& g : groups) if (eligible(g)) total += bytes_of(g);
      for (Group& g : groups) {
        if (!eligible(g) || placed >= fraction * total - 0.5 || fraction <= 0) continue;
        mark(g);
        placed += bytes_of(g);
      }
    };
    const int64_t opt_bytes_per_element = 4 * (1 + state_count());
    if (tiers.optimizer) {
      place(opt.offload_optimizer_fraction,
            [&](const Group& g) { return static_cast<double>(g.shard * opt_bytes_per_element); },
            [](const Group& g) { return g.shard > 0; }, [](Group& g) { g.opt_in_tier = true; });
    }
    if (tiers.param) {
      place(opt.offload_param_fraction, [&](const Group& g) { return static_cast<double>(g.shard * es()); },
            [](const Group& g) { return g.shard > 0 && !g.persistent; },
            [](Group& g) { g.param_in_tier = true; });
    }
    std::map<OffloadTier*, int64_t> need;
    int64_t tiered_max = 0, granule = 1;
    for (Group& g : groups) {
      if (g.opt_in_tier) {
        need[tiers.optimizer] += (1 + state_count()) * round_up(g.shard * 4, tiers.optimizer->alignment());
        tiered_max = std::max(tiered_max, g.shard);
      }
      if (g.param_in_tier) {
        need[tiers.param] += round_up(g.shard * es(), tiers.param->alignment());
        tiered_max = std::max(tiered_max, g.shard);
      }
    }
    // Tiles start at element offsets whose byte offsets every tier can take (O_DIRECT).
    for (OffloadTier* t : distinct_tiers()) granule = std::max(granule, t->alignment() / std::min<int64_t>(es(), 4));
    tile_elements = round_up(std::max<int64_t>(1, std::min(opt.sub_group_size, tiered_max)), granule);
    for (auto& [tier, bytes] : need) tier->prepare(bytes);
  }

  at::Tensor view_of(void* address, int64_t numel, at::ScalarType dtype) const {
    return at::from_blob(address, {numel}, at::TensorOptions().dtype(dtype));
  }

  void build_group(int gi) {
    Group& g = groups[gi];
    const std::string label = "group " + std::to_string(gi);
    at::Tensor full32 = at::zeros({g.padded}, at::kFloat);
    for (int p : g.params) {
      const at::Tensor& t = params[p].tensor;
      full32.narrow(0, params[p].offset, t.numel()).copy_(t.detach().reshape({-1}));
    }
    g.flat = full32.to(opt.compute_dtype);
    // Re-point every parameter into the flat buffer. set_data keeps the parameter's own
    // version counter, so writes into `flat` (gathers) never trip autograd's checks.
    for (int p : g.params) {
      at::Tensor& t = params[p].tensor;
      t.set_data(g.flat.narrow(0, params[p].offset, t.numel()).view(t.sizes()));
    }
    int64_t first = sharded() ? g.shard * rank : 0;
    const at::Tensor init = full32.narrow(0, first, g.shard);
    // In fp32 the parameters are the master weights (ZeRO's fp32 accounting): stages 0-2
    // update their own slot of the flat buffer in place, stage 3 gathers from the master shard.
    // A master in a tier, or a stage 3 parameter shard in one, is its own copy.
    const bool fp32 = opt.compute_dtype == at::kFloat;
    const bool master_is_param = fp32 && !g.opt_in_tier && !g.param_in_tier;
    if (g.opt_in_tier) {
      OffloadTier& tier = *tiers.optimizer;
      g.master_file = std::make_unique<TieredArray>(tier, "fp32 master of " + label, g.shard * 4, tile_elements * 4);
      for (const auto& name : optimizer.state_names()) {
        g.state_files.push_back(std::make_unique<TieredArray>(tier, name + " of " + label, g.shard * 4, tile_elements * 4));
      }
      g.opt_streamed = g.master_file->address() == nullptr;
      const at::Tensor master0 = init.contiguous(), zeros = at::zeros({g.shard}, at::kFloat);
      g.master_file->upload(master0.data_ptr());
      for (auto& f : g.state_files) f->upload(zeros.data_ptr());
      if (!g.opt_streamed) {
        g.master = view_of(g.master_file->address(), g.shard, at::kFloat);
        for (auto& f : g.state_files) g.states.push_back(view_of(f->address(), g.shard, at::kFloat));
      }
      mem.offload_optimizer += (1 + state_count()) * g.shard * 4;
    } else {
      g.master = master_is_param && opt.stage < 3 ? g.flat.narrow(0, first, g.shard) : init.clone();
      for (int64_t s = 0; s < state_count(); ++s) g.states.push_back(at::zeros({g.shard}, at::kFloat));
      if (!master_is_param) mem.master_params += g.shard * 4;  // else counted as parameters
      mem.optimizer_states += state_count() * g.shard * 4;
    }
    g.grad = at::zeros({g.shard}, at::kFloat);
    if (opt.stage == 3) {
      if (g.param_in_tier) {
        g.param_file = std::make_unique<TieredArray>(*tiers.param, "parameters of " + label, g.shard * es(),
                                                     tile_elements * es());
        const at::Tensor typed = init.to(opt.compute_dtype).contiguous();
        g.param_file->upload(typed.data_ptr());
        g.param_streamed = g.param_file->address() == nullptr;
        if (!g.param_streamed) g.param_shard = view_of(g.param_file->address(), g.shard, opt.compute_dtype);
        mem.offload_param += g.shard * es();
      } else {
        g.param_shard = master_is_param ? g.master : init.to(opt.compute_dtype).clone();
        mem.params_shard += g.shard * es();  // fp32 without offload: the master itself
      }
    }
    mem.params_gathered += g.padded * es();
    mem.grads += g.shard * 4;
    if (opt.stage == 3 && g.persistent) mem.persistent_params += g.padded * es();
  }

  void install_grad_hook(int p) {
    Param& param = params[p];
    param.accumulator = torch::autograd::impl::grad_accumulator(param.tensor);
    if (!param.accumulator) {
      throw InternalError("parameter " + param.name + " does not require grad; the engine trains "
                          "every parameter a unit lists");
    }
    param.accumulator->add_post_hook(std::make_unique<AfterAccumulate>([this, p] { on_grad_ready(p); }));
  }

  // ---- stage 3 gather / release -------------------------------------------------------------
  void materialize(Group& g) {
    at::native::resize_bytes_cpu(g.flat.storage().unsafeGetStorageImpl(), g.padded * es());
  }

  // Waits out every read-ahead (their buffers must outlive the I/O) and drops the shards. With
  // `rethrow`, the first failure is thrown once all have finished.
  void drop_fetches(bool rethrow) {
    std::exception_ptr first;
    for (auto& g : groups) {
      if (g.fetch_work) {
        try {
          g.fetch_work->wait();
        } catch (...) {
          if (!first) first = std::current_exception();
        }
      }
      g.fetch_work.reset();
      forget_fetched(g);
    }
    if (first && rethrow) std::rethrow_exception(first);
  }

  void forget_fetched(Group& g) {
    if (!g.fetched.defined()) return;
    mem.offload_staging -= static_cast<int64_t>(g.fetched.nbytes());
    g.fetched = at::Tensor();
  }

  // In-flight reads and gathers write into buffers this engine owns: let them finish first,
  // also when the engine is torn down by an error.
  ~Impl() {
    drop_fetches(/*rethrow=*/false);
    for (auto& g : groups) {
      if (!g.pending_gather) continue;
      try {
        g.pending_gather->wait();
      } catch (...) {
      }
    }
  }

  // Streamed parameter shards: reads the shard from its tier into a host buffer, ahead of
  // the gather that needs it.
  void fetch(int gi) {
    Group& g = groups[gi];
    if (!g.param_streamed || g.gathered || g.pending_gather || g.fetch_work) return;
    g.fetched = tiers.param->host_buffer(g.shard * es());
    g.fetch_work = g.param_file->read_all(g.fetched.data_ptr());
    mem.offload_staging += static_cast<int64_t>(g.fetched.nbytes());
  }

  void start_gather(int gi) {
    Group& g = groups[gi];
    if (g.gathered || g.pending_gather) return;
    at::Tensor source = g.param_shard;
    if (g.param_streamed) {
      fetch(gi);
      g.fetch_work->wait();
      g.fetch_work.reset();
      g.param_file->verify_all(g.fetched.data_ptr(), steps + 1);
      // A view of the buffer itself, so the gather's handle keeps it alive until it is done.
      source = g.fetched.view(opt.compute_dtype).narrow(0, 0, g.shard);
    }
    materialize(g);
    mem.params_gathered += g.padded * es();
    mem.params_gathered_peak = std::max(mem.params_gathered_peak, mem.params_gathered);
    g.pending_gather = comm.all_gather(g.flat, source);
  }

  void ensure_gathered(int gi) {
    Group& g = groups[gi];
    if (g.gathered) return;
    start_gather(gi);
    g.pending_gather->wait();
    g.pending_gather.reset();
    g.gathered = true;
    forget_fetched(g);
  }

  void release(int gi) {
    Group& g = groups[gi];
    if (g.persistent || !g.gathered) return;
    at::native::resize_bytes_cpu(g.flat.storage().unsafeGetStorageImpl(), 0);
    g.gathered = false;
    mem.params_gathered -= g.padded * es();
  }

  // Units to gather ahead of unit `u` in `direction`: prefetch_units of them, or, when
  // prefetch_elements is set, as many as fit in that many elements; never past
  // max_live_parameters gathered elements.
  std::vector<int> prefetch_window(int u, int direction) const {
    std::vector<int> out;
    int64_t elements = 0, live = mem.params_gathered / es();
    for (int next = u + direction; next >= 0 && next < static_cast<int>(units.size()); next += direction) {
      int64_t unit_elements = 0;
      for (int g : unit_groups[next]) unit_elements += groups[g].padded;
      if (opt.prefetch_elements > 0 ? elements >= opt.prefetch_elements
                                    : static_cast<int64_t>(out.size()) >= opt.prefetch_units) {
        break;
      }
      if (live + unit_elements > opt.max_live_parameters) break;
      elements += unit_elements;
      live += unit_elements;
      out.push_back(next);
    }
    return out;
  }

  void gather_unit(int u, int direction) {
    for (int g : unit_groups[u]) ensure_gathered(g);
    std::vector<int> window = prefetch_window(u, direction);
    for (int next : window) {
      for (int g : unit_groups[next]) start_gather(g);
    }
    // Offloaded shards are read one unit further ahead than they are gathered, so the tier's
    // latency hides behind this unit's compute too.
    const int beyond = (window.empty() ? u : window.back()) + direction;
    if (beyond >= 0 && beyond < static_cast<int>(units.size())) {
      for (int g : unit_groups[beyond]) fetch(g);
    }
  }

  bool needed_soon(int gi, int u, int direction) const {
    for (int next : prefetch_window(u, direction)) {
      const auto& gs = unit_groups[next];
      if (std::find(gs.begin(), gs.end(), gi) != gs.end()) return true;
    }
    return false;
  }

  void release_after_backward(int done_unit, int next_unit) {
    if (done_unit >= static_cast<int>(units.size())) return;
    const auto& keep = unit_groups[next_unit];
    for (int g : unit_groups[done_unit]) {
      if (std::find(keep.begin(), keep.end(), g) == keep.end() && !needed_soon(g, next_unit, -1)) {
        release(g);
      }
    }
  }

  // ---- gradients ------------------------------------------------------------------------------
  void on_grad_ready(int p) {
    Group& g = groups[params[p].group];
    if (++g.ready == static_cast<int>(g.params.size()) && opt.stage >= 2) {
      reduce_group(params[p].group);
    }
  }

  // Flattens the group's .grad tensors (zeros where a parameter got none) and frees them.
  at::Tensor flatten_grads(Group& g) {
    at::Tensor flat = at::zeros({g.padded}, opt.compute_dtype);
    for (int p : g.params) {
      at::Tensor& t = params[p].tensor;
      if (t.grad().defined()) flat.narrow(0, params[p].offset, t.numel()).copy_(t.grad().reshape({-1}));
      t.mutable_grad().reset();
    }
    if (opt.gradient_predivide_factor != 1.0) flat.div_(opt.gradient_predivide_factor);
    return flat;
  }

  void reduce_group(int gi) {
    Group& g = groups[gi];
    if (g.reduced) return;
    g.reduced = true;
    at::Tensor flat = flatten_grads(g);
    if (opt.stage == 3) release(gi);
    PendingReduce r{gi, {}, nullptr, g.padded * es()};
    if (opt.stage == 0) {
      r.out = flat;
      r.work = comm.all_reduce(flat, ReduceOp::kSum);
    } else {
      r.out = at::empty({g.shard}, opt.compute_dtype);
      r.work = comm.reduce_scatter(r.out, flat, ReduceOp::kSum);
    }
    pending.push_back(std::move(r));
    // Bound the gradient bytes in flight (reduce_bucket_mb); without overlap, wait at once.
    int64_t in_flight = 0;
    for (const auto& q : pending) in_flight += q.bytes;
    if (!opt.overlap_comm || in_flight > static_cast<int64_t>(opt.reduce_bucket_mb * (1 << 20))) {
      drain_reduces();
    }
  }

  void drain_reduces() {
    for (auto& r : pending) {
      r.work->wait();
      groups[r.group].grad.add_(r.out.to(at::kFloat));
    }
    pending.clear();
  }

  // Every group not reduced in this micro step (stages 0-1 always; stages 2-3 groups whose
  // parameters got no gradient), in group order so all ranks issue the same collectives.
  void reduce_remaining() {
    for (size_t g = 0; g < groups.size(); ++g) reduce_group(static_cast<int>(g));
    drain_reduces();
  }

  // ---- the step ----------------------------------------------------------------------------------
  double forward_backward(const at::Tensor& input,
                          const std::function<at::Tensor(const at::Tensor&)>& loss_fn) {
    for (OffloadTier* t : distinct_tiers()) t->set_step(steps + 1);
    for (auto& g : groups) {
      g.ready = 0;
      g.reduced = false;
    }
    at::Tensor x = input;
    for (size_t u = 0; u < units.size(); ++u) {
      int ui = static_cast<int>(u);
      if (opt.stage == 3) gather_unit(ui, +1);
      // Checkpointed, the unit keeps no activations, so the release below frees its parameters
      // outright; the hook re-gathers them before the recompute, which runs in the unit's node.
      x = opt.activation_checkpointing ? checkpointed_forward(*units[u], x) : units[u]->forward(x);
      if (opt.stage == 3) {
        if (x.requires_grad()) {
          x.register_hook([this, ui](const at::Tensor& grad) {
            // The gradient of this unit's output is complete, so the next unit's backward has
            // run: its parameters can go (a tied one is re-gathered when needed again).
            release_after_backward(ui + 1, ui);
            gather_unit(ui, -1);  // re-gather before this unit's backward runs
            return grad;
          });
        }
        for (int g : unit_groups[u]) {
          if (!needed_soon(g, ui, +1)) release(g);
        }
      }
    }
    at::Tensor loss = loss_fn(x);
    double value = loss.item<double>();
    if (!std::isfinite(value) && !scaler.enabled()) {
      throw NumericError("loss is " + std::to_string(value) + " at step " + std::to_string(steps + 1) +
                         " (micro step " + std::to_string(micro + 1) + ") in " +
                         std::string(at::toString(opt.compute_dtype)) + "; lower the learning rate, "
                         "enable zero.gradient_clipping, or check the data");
    }
    (loss * scaler.scale()).backward();
    ++micro;
    if (opt.stage >= 2) reduce_remaining();
    if (opt.stage == 3) {
      for (size_t g = 0; g < groups.size(); ++g) release(static_cast<int>(g));
    }
    return value;
  }

  StepReport step(double lr) {
    if (opt.stage < 2) reduce_remaining();
    StepReport report;
    report.loss_scale = scaler.scale();
    // Gradients were summed over ranks and micro steps; average them and undo the scale.
    double divisor = scaler.scale() * opt.grad_accum * world / opt.gradient_predivide_factor;
    // One all-reduce carries both the overflow flag and the squared norm of the owned shards.
    double sq = 0;
    bool overflow = false;
    for (auto& g : groups) {
      double s = g.grad.to(at::kDouble).pow(2).sum().item<double>();
      if (!std::isfinite(s)) overflow = true;
      else sq += s;
    }
    at::Tensor totals = at::tensor({sq, overflow ? 1.0 : 0.0}, at::kDouble);
    // Stage 0 shards are full copies: every rank already holds the global values.
    if (sharded()) comm.all_reduce(totals, ReduceOp::kSum)->wait();
    overflow = totals[1].item<double>() > 0;
    report.grad_norm = std::sqrt(totals[0].item<double>()) / divisor;
    if (overflow) {
      scaler.update(true);
      report.skipped = true;
      report.step = steps;
      for (auto& g : groups) g.grad.zero_();
      micro = 0;
      return report;
    }
    scaler.update(false);
    if (opt.gradient_clipping > 0) {
      double coef = opt.gradient_clipping / (report.grad_norm + 1e-6);
      if (coef < 1) divisor /= coef;
    }
    ++steps;
    // A tier whose files vanished or shrank fails here, before any state of this step changes.
    for (OffloadTier* t : distinct_tiers()) {
      t->set_step(steps);
      t->check();
    }
    std::vector<ShardTensors> shards;
    for (auto& g : groups) {
      if (!g.opt_streamed) shards.push_back({g.master, g.grad, g.states, {}});
    }
    // A shard read ahead but not yet gathered is about to go stale.
    drop_fetches(/*rethrow=*/true);
    const StepArgs args{steps, lr, divisor};
    optimizer.step(shards, args);
    stream_step(args);
    refresh_parameters();
    for (auto& g : groups) g.grad.zero_();
    micro = 0;
    report.step = steps;
    return report;
  }

  static void copy_unless_same(const at::Tensor& dst, const at::Tensor& src) {
    if (dst.data_ptr() != src.data_ptr()) dst.copy_(src);
  }

  // The step for groups whose master and states are in a streamed tier: tiles of
  // tile_elements go through host buffer sets (TilePipeline), each updated by the optimizer
  // and copied into the parameters (stage 1-2 flat slot, stage 3 shard or its tier region).
  void stream_step(const StepArgs& args) {
    struct Tile {
      int group;
      int64_t start, len;
    };
    std::vector<Tile> tiles;
    for (size_t gi = 0; gi < groups.size(); ++gi) {
      const Group& g = groups[gi];
      if (!g.opt_streamed) continue;
      for (int64_t start = 0; start < g.shard; start += tile_elements) {
        tiles.push_back({static_cast<int>(gi), start, std::min(tile_elements, g.shard - start)});
      }
    }
    if (tiles.empty()) return;
    TilePipeline pipeline(opt.pipeline_read, opt.pipeline_write);
    OffloadTier& tier = *tiers.optimizer;
    const int64_t arrays = 1 + state_count();
    // Buffers per set: master, each state, and for 16-bit parameters streamed to a tier, their
    // converted tile (fp32 parameters are the master tile itself).
    bool param_tile = false;
    for (const Group& g : groups) param_tile |= g.opt_streamed && g.param_streamed && opt.compute_dtype != at::kFloat;
    while (static_cast<int>(tile_sets.size()) < pipeline.sets()) {
      std::vector<at::Tensor> set;
      for (int64_t a = 0; a < arrays + (param_tile ? 1 : 0); ++a) set.push_back(tier.host_buffer(tile_elements * 4));
      for (const auto& b : set) mem.offload_staging += static_cast<int64_t>(b.nbytes());
      tile_sets.push_back(std::move(set));
    }
    auto file_of = [&](const Group& g, int64_t a) -> TieredArray& {
      return a == 0 ? *g.master_file : *g.state_files[a - 1];
    };
    auto read = [&](int64_t i, int set, std::vector<std::shared_ptr<Work>>& works) {
      const Tile& t = tiles[i];
      for (int64_t a = 0; a < arrays; ++a) {
        works.push_back(file_of(groups[t.group], a).read_tile(t.start / tile_elements, tile_sets[set][a].data_ptr()));
      }
    };
    auto compute = [&](int64_t i, int set) {
      const Tile& t = tiles[i];
      Group& g = groups[t.group];
      for (int64_t a = 0; a < arrays; ++a) file_of(g, a).verify_tile(t.start / tile_elements, tile_sets[set][a].data_ptr(), steps);
      at::Tensor master = view_of(tile_sets[set][0].data_ptr(), t.len, at::kFloat);
      std::vector<at::Tensor> states;
      for (int64_t a = 1; a < arrays; ++a) states.push_back(view_of(tile_sets[set][a].data_ptr(), t.len, at::kFloat));
      optimizer.step({{master, g.grad.narrow(0, t.start, t.len), states, {}}}, args);
      if (opt.stage < 3) {
        g.flat.narrow(0, g.shard * rank + t.start, t.len).copy_(master);
      } else if (!g.param_streamed) {
        g.param_shard.narrow(0, t.start, t.len).copy_(master);
      } else if (opt.compute_dtype != at::kFloat) {
        view_of(tile_sets[set][arrays].data_ptr(), t.len, opt.compute_dtype).copy_(master);
      }
    };
    auto write = [&](int64_t i, int set, std::vector<std::shared_ptr<Work>>& works) {
      const Tile& t = tiles[i];
      const Group& g = groups[t.group];
      for (int64_t a = 0; a < arrays; ++a) {
        works.push_back(file_of(g, a).write_tile(t.start / tile_elements, tile_sets[set][a].data_ptr()));
      }
      if (g.param_streamed) {
        // fp32 parameters are the master tile's own bytes.
        void* params = opt.compute_dtype == at::kFloat ? tile_sets[set][0].data_ptr() : tile_sets[set][arrays].data_ptr();
        works.push_back(g.param_file->write_tile(t.start / tile_elements, params));
      }
    };
    pipeline.run(static_cast<int64_t>(tiles.size()), read, compute, write);
  }

  // Puts the updated master weights back into the parameters. All-gathers run asynchronously,
  // at most allgather_bucket_mb of them in flight.
  void refresh_parameters() {
    std::vector<std::shared_ptr<Work>> works;
    int64_t in_flight = 0;
    const auto limit = static_cast<int64_t>(opt.allgather_bucket_mb * (1 << 20));
    auto gather = [&](const at::Tensor& flat, const at::Tensor& shard) {
      if (in_flight > 0 && in_flight + flat.nbytes() > static_cast<uint64_t>(limit)) {
        for (auto& w : works) w->wait();
        works.clear();
        in_flight = 0;
      }
      works.push_back(comm.all_gather(flat, shard));
      in_flight += static_cast<int64_t>(flat.nbytes());
    };
    for (size_t gi = 0; gi < groups.size(); ++gi) {
      Group& g = groups[gi];
      if (opt.stage == 0) {
        copy_unless_same(g.flat, g.master);
      } else if (opt.stage < 3) {
        at::Tensor slot = g.flat.narrow(0, g.shard * rank, g.shard);
        if (!g.opt_streamed) copy_unless_same(slot, g.master);
        gather(g.flat, slot);
      } else {
        if (!g.opt_streamed) {
          if (g.param_streamed) g.param_file->upload(g.master.to(opt.compute_dtype).data_ptr());
          else copy_unless_same(g.param_shard, g.master);
        }
        if (g.persistent) gather(g.flat, g.param_shard);
      }
    }
    for (auto& w : works) w->wait();
  }

  std::vector<std::pair<std::string, at::Tensor>> full_parameters() {
    std::vector<std::pair<std::string, at::Tensor>> out;
    for (size_t gi = 0; gi < groups.size(); ++gi) {
      Group& g = groups[gi];
      bool was = g.gathered;
      ensure_gathered(static_cast<int>(gi));
      for (int p : g.params) out.emplace_back(params[p].name, params[p].tensor.detach().to(at::kFloat).clone());
      if (!was) release(static_cast<int>(gi));
    }
    return out;
  }
};

Engine::Engine(std::vector<Unit*> units, Communicator& comm, const ShardStrategy& strategy,
               Optimizer& optimizer, EngineOptions options, EngineTiers tiers)
    : impl_(std::make_unique<Impl>(std::move(units), comm, strategy, optimizer, options, tiers)) {}

Engine::~Engine() = default;

double Engine::forward_backward(const at::Tensor& input,
                                const std::function<at::Tensor(const at::Tensor&)>& loss_fn) {
  return impl_->forward_backward(input, loss_fn);
}

StepReport Engine::step(double lr) { return impl_->step(lr); }

std::vector<std::pair<std::string, at::Tensor>> Engine::full_parameters() {
  return impl_->full_parameters();
}

MemoryReport Engine::memory() const { return impl_->mem; }

void Engine::reset_peak() { impl_->mem.params_gathered_peak = impl_->mem.params_gathered; }

int64_t Engine::parameter_count() const {
  int64_t n = 0;
  for (const auto& p : impl_->params) n += p.tensor.numel();
  return n;
}

}  // namespace zt
