#include "setup/memory_fit.h"

#include <c10/util/accumulate.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <set>

#include "settings/job_settings.h"
#include "zt/bytes.h"
#include "zt/host/compose.h"
#include "zt/host/launcher.h"
#include "zt/host/plugin_loader.h"
#include "zt/host/rendezvous.h"

namespace zt::trainer {

namespace {

// Per unit, the elements it owns, the elements it uses (its own and those it borrows), of those
// the ones stage 3 releases after the unit ran (tensors at or above the persistence threshold;
// smaller ones stay gathered, whatever group the strategy puts them in), and the ones of tensors
// no other unit uses.
struct UnitSizes {
  int64_t owned = 0, used = 0, released = 0, untied = 0;
};

struct ModelSizes {
  std::vector<UnitSizes> units;
  std::vector<int64_t> tensors;  // elements of each distinct tensor
  int64_t parameters = 0, tied = 0;
};

// From the model's declarations: nothing is allocated, so a model too large to build is sized.
ModelSizes model_sizes(const models::ModelShape& shape, uint64_t seed, int64_t persistence) {
  const std::unique_ptr<ModelSource> source = models::make_model_source(shape, seed);
  ModelSizes out;
  std::map<std::string, int64_t> owner;  // tensor name -> the unit that declared it first
  std::set<std::string> tied;
  std::vector<std::vector<ParamDecl>> units;
  for (int64_t u = 0; u < source->unit_count(); ++u) units.push_back(source->declare(u));
  for (size_t u = 0; u < units.size(); ++u) {
    UnitSizes unit;
    for (const ParamDecl& decl : units[u]) {
      const int64_t n = c10::multiply_integers(decl.shape);
      unit.used += n;
      if (n >= persistence) unit.released += n;
      auto [it, first] = owner.emplace(decl.name, u);
      if (first) {
        unit.owned += n;
        out.tensors.push_back(n);
        out.parameters += n;
      } else if (it->second != static_cast<int64_t>(u) && tied.insert(decl.name).second) {
        out.tied += n;
      }
    }
    out.units.push_back(unit);
  }
  for (size_t u = 0; u < units.size(); ++u) {
    for (const ParamDecl& decl : units[u]) {
      if (!tied.count(decl.name)) out.units[u].untied += c10::multiply_integers(decl.shape);
    }
  }
  return out;
}

// Stage 3: the most elements gathered at once (a unit and the units prefetched with it, as
// ParamGatherer::prefetch_window picks them) and the most units in a window.
void prefetch_window(const ModelSizes& m, const EngineOptions& zero, FitInputs& in) {
  const int64_t units = static_cast<int64_t>(m.units.size());
  const int64_t by_units = zero.prefetch_units;
  const int64_t by_elements = zero.prefetch_elements;
  const int64_t max_live = zero.max_live_parameters;
  for (int64_t u = 0; u < units; ++u) {
    for (int direction : {+1, -1}) {
      int64_t live = m.units[u].released, elements = 0, count = 0;
      for (int64_t next = u + direction; next >= 0 && next < units; next += direction) {
        const bool full = by_elements > 0 ? elements >= by_elements : count >= by_units;
        if (full || live + m.units[next].released > max_live) break;
        elements += m.units[next].used;
        live += m.units[next].released;
        ++count;
      }
      in.largest_window = std::max(in.largest_window, live);
      // The shards of the window and of the unit beyond it are read ahead (ParamGatherer).
      in.fetch_units = std::max(in.fetch_units, count + 1);
    }
  }
}

void read_model(const JobSettings& job, PluginCatalog& catalog, FitInputs& in) {
  const models::ModelShape shape = models::resolve_model_shape(job.model, catalog);
  const EngineOptions& zero = job.engine.options;
  // Below stage 3 nothing is released: every tensor counts as persistent.
  const int64_t persistence = in.stage == 3 ? zero.param_persistence_threshold : INT64_MAX;
  const ModelSizes m = model_sizes(shape, job.run.seed, persistence);
  in.parameters = m.parameters;
  in.tied = m.tied;
  in.tensors = static_cast<int64_t>(m.tensors.size());
  for (int64_t n : m.tensors) in.largest_tensor = std::max(in.largest_tensor, n);
  for (const UnitSizes& u : m.units) {
    in.largest_unit = std::max(in.largest_unit, u.used);
    in.largest_owned = std::max(in.largest_owned, u.owned);
    in.largest_untied = std::max(in.largest_untied, u.untied);
  }
  if (in.stage == 3) {
    prefetch_window(m, zero, in);
    for (int64_t n : m.tensors) {
      if (n < persistence) in.persistent += n;
    }
  }
  in.activation_bytes = activation_bytes(shape, job.data.micro_batch, in.element_size,
                                         job.model.activation_checkpointing);
  // A TorchScript module's saved values stay whole on every rank until the engine holds them
  // (models/torchscript.h), as fp32 as torch.jit.save keeps an fp32 module.
  if (shape.kind == "torchscript") in.loaded_model_bytes = 4 * in.parameters;
}

// The share of a role's bytes that goes to files: its fraction when its tier keeps files.
double files_share(const PluginChoice& role, double fraction) {
  return offloads_to_files(role) ? fraction : 0;
}

// Host buffers of every file tier (one tier per plugin id): buffer_count x buffer_mb where a
// plugin declares them (offload_nvme's bounce buffers).
int64_t tier_pool_bytes(const EngineSettings& engine) {
  std::map<std::string, const Options*> tiers;
  for (const PluginChoice* role : {&engine.offload_optimizer, &engine.offload_param}) {
    if (offloads_to_files(*role)) tiers[role->id] = &role->options;
  }
  int64_t bytes = 0;
  for (const auto& [id, o] : tiers) {
    bool count = false, mb = false;
    for (const auto& spec : o->specs()) {
      // By name and type, as zt/offload.h's convention has them: integers.
      count |= spec.name == "buffer_count" && spec.type == ValueType::kInt;
      mb |= spec.name == "buffer_mb" && spec.type == ValueType::kInt;
    }
    if (count && mb) bytes += o->get_int("buffer_count") * (o->get_int("buffer_mb") << 20);
  }
  return bytes;
}

// Ranks on this host: what the launcher's environment says in a running rank (zt's launcher,
// torchrun, mpirun, srun), launch.nproc before the ranks start.
int local_ranks(const LaunchSettings& launch, const RankEnv& env, int world) {
  int64_t n = launch.nproc;
  if (env.local_world > 0) n = env.local_world;
  return static_cast<int>(std::min<int64_t>(n, world));
}

// Whether the job's ranks fork from one start of zt's launcher: a rank knows from its
// environment (zt/host/launcher.h's kRanksForkedVariable); before the launch, the trainer's
// launcher forks the ranks of a job of more than one rank that all run on this host.
bool ranks_forked(const RankEnv& env, int world, int local) {
  if (env.found) return std::getenv(kRanksForkedVariable) != nullptr;
  return world > 1 && local == world;
}

}  // namespace

// Activations, estimated per micro batch from the tensors autograd saves. GPT, per block of
// B x T tokens, width d, H heads (elements of the compute dtype): the block input, ln1's output,
// the q/k/v copies matmul makes, the attention output, the residual, ln2's output (1 BTd each),
// the MLP's 4d pre- and post-GELU (8 BTd), and the attention probabilities with their
// transients (2 BHT^2): 16 BTd + 2 BHT^2 (Megatron-LM counts 17 BTd + 2.5 BHT^2 in 16 bits).
// The head keeps ln_f's output and the logits, the loss its fp32 log-softmax (B T V each);
// backward adds the logits' gradient twice, or two blocks' worth, whichever is more. With
// activation checkpointing each unit keeps only its input and one unit at a time is recomputed.
// Checked against the slope of the trainer's peak RSS from micro_batch 4 to 16 (stage 0, one
// rank): docs/architecture.md, "Memory fit", has the table.
int64_t activation_bytes(const models::ModelShape& s, int64_t micro_batch, int64_t element_size,
                         bool checkpointing) {
  const double b = static_cast<double>(micro_batch), es = static_cast<double>(element_size);
  // A TorchScript or plugin model's activations depend on code zt cannot see: counted as 0, so
  // the check covers its model states, buffers and working set only.
  if (s.custom) return 0;
  if (s.kind == "mlp") {
    const double layer = b * static_cast<double>(s.width) * es * (s.activation == "none" ? 1 : 2);
    const double loss = 4 * b * static_cast<double>(s.width) * 4;
    const double saved = checkpointing ? static_cast<double>(s.depth) * b * s.width * es + layer
                                       : static_cast<double>(s.depth) * layer;
    return static_cast<int64_t>(saved + loss);
  }
  const double t = static_cast<double>(s.seq_len), d = static_cast<double>(s.d_model);
  const double h = static_cast<double>(s.n_head), v = static_cast<double>(s.vocab);
  const double layers = static_cast<double>(s.n_layer);
  const double block = b * t * (16 * d + 2 * h * t) * es;
  const double head = b * t * (2 * d * es + v * es + v * 4);
  const double backward = std::max(2 * b * t * v * 4, 2 * block);
  const double input = b * t * d * es;
  const double saved = checkpointing ? (layers + 2) * input + std::max(block, head)
                                     : layers * block + input + head;
  return static_cast<int64_t>(saved + backward);
}

namespace {

// The host buffers the coded collectives stage their payloads in (core's ScratchBuffers, kept
// from step to step): coded reduce-scatters' fp32 inputs and encoded chunks out and in, for the
// gradients in flight (the largest group, or reduce_bucket_mb's worth with overlap_comm), and
// one shard's decoded sum (with error feedback, what its encoding lost too); MiCS's coded
// all-reduce of a shard, the same over the groups plus the gathered sums; a coded gather's
// encoded chunks of the window, and for 16-bit parameters the fp32 values a group decodes to.
// Left out, a codec's run measured some 50 MiB over the estimate on 36M parameters (2 ranks,
// int8 and int4).
int64_t codec_staging(const EngineSettings& engine, PluginCatalog& catalog, const FitInputs& in) {
  if (in.stage < 1) return 0;
  const CodecPlacement place = codec_placement(engine, in.world, in.shard_world, in.local_ranks);
  const int64_t k = in.shard_world;
  const auto encoded = [&](const PluginChoice& role, int64_t chunk, int64_t chunks) {
    return created_by(catalog.codec(role.id, role.key).create(role.options), role.id, "codec")
               ->encoded_bytes(chunk) *
           chunks;
  };
  const int64_t shard = (in.largest_owned + k - 1) / k;
  const int64_t sums = (engine.options.codec_error_feedback ? 12 : 8) * shard;
  int64_t bytes = 0;
  if (place.gradients_in_group) {
    const int64_t in_flight =
        (std::max(in.largest_owned, in.reduce_bucket_bytes / in.element_size) + k - 1) / k;
    bytes += 4 * in_flight * k + 2 * encoded(engine.codec_gradients, in_flight, k) + sums;
  }
  if (place.gradients_across) {
    const int64_t replicas = in.world / k, chunk = (shard + replicas - 1) / replicas;
    bytes += 12 * chunk * replicas + 3 * encoded(engine.codec_gradients, chunk, replicas) +
             16 * chunk;
  }
  if (place.weights && in.stage == 3) {
    const int64_t window = (in.largest_window + k - 1) / k;
    bytes += encoded(engine.codec_weights, window, k) +
             (in.element_size < 4 ? 4 * (shard * k + shard) : 0);
  }
  return bytes;
}

}  // namespace

FitInputs fit_inputs(const JobSettings& job, PluginCatalog& catalog, int world) {
  FitInputs in;
  const EngineSettings& engine = job.engine;
  const EngineOptions& zero = engine.options;
  in.world = world;
  const RankEnv env = discover_rank_env();
  in.local_ranks = local_ranks(engine.launch, env, world);
  in.forked_ranks = ranks_forked(env, world, in.local_ranks);
  in.shard_world = shard_groups(engine, world, in.local_ranks).sharding_world(world);
  in.stage = zero.stage;
  in.element_size = engine.compute == "fp32" ? 4 : 2;
  in.grad_accum = job.data.grad_accum;
  read_model(job, catalog, in);
  // Not Adam's 2 whatever the plugin: a momentum SGD's tier holds a third fewer arrays.
  const OptimizerFootprint optimizer = optimizer_footprint(engine, catalog);
  in.optimizer_states = optimizer.states;
  StatePlacement& p = in.states;
  p.stage = in.stage;
  p.psi = in.parameters;
  p.world = in.shard_world;
  p.element_size = in.element_size;
  p.optimizer_states = in.optimizer_states;
  in.state_element_size = optimizer.state_bytes;
  p.state_element_size = in.state_element_size;
  in.master_element_size = optimizer.master_bytes;
  p.master_element_size = in.master_element_size;
  p.separate_master = separate_master_share(engine);
  p.optimizer_in_files = files_share(engine.offload_optimizer, zero.offload_optimizer_fraction);
  p.params_in_files = files_share(engine.offload_param, zero.offload_param_fraction);
  // A group's reduced gradient shard lives in the tier that holds its optimizer states, unless
  // the step waits for the global norm (clipping, loss scaling): then it waits in host memory
  // (zero.gradients_in_tier false, as the engine's shard storage decides).
  p.grads_in_files = p.optimizer_in_files > 0 && !streamed_gradients_in_memory(zero);
  in.params_streamed = in.stage == 3 && p.params_in_files > 0;
  in.sub_group_size = zero.sub_group_size;
  in.pipeline_sets = 1 + (zero.pipeline_read ? 1 : 0) + (zero.pipeline_write ? 1 : 0);
  // Reductions in flight: at most a bucket, and never more than the model's gradients.
  if (zero.overlap_comm) {
    in.reduce_bucket_bytes = std::min(static_cast<int64_t>(zero.reduce_bucket_mb * kMiB),
                                      in.element_size * in.parameters);
  }
  in.tier_pool_bytes = tier_pool_bytes(engine);
  // Error feedback keeps each rank's gradient error, fp32, where a gradient codec codes: every
  // element for the reduce-scatter in the shard group, its shard for MiCS's all-reduce across.
  if (in.stage >= 1 && zero.codec_error_feedback) {
    const CodecPlacement place = codec_placement(engine, world, in.shard_world, in.local_ranks);
    if (place.gradients_in_group) in.codec_residual_bytes += 4 * in.parameters;
    if (place.gradients_across) in.codec_residual_bytes += 4 * in.parameters / in.shard_world;
  }
  in.codec_staging_bytes = codec_staging(engine, catalog, in);
  in.init_from = !job.model.init_from.empty();
  const CheckpointSettings& checkpoint = job.checkpoint;
  if (checkpoint.every_steps > 0) {
    // The saver's aligned staging buffer, and for an asynchronous save a copy of what this rank
    // saves from memory (file tiers are streamed into the file instead), as the fp32 values a
    // checkpoint holds whatever their dtype in memory: its 1/k share of the master and states
    // at every stage (stage 0 splits its full copies the same way; the first shard group's
    // ranks save, so theirs is the figure), and the codec's error-feedback residuals, which
    // every rank saves whole.
    const double share = static_cast<double>(in.parameters) / in.shard_world;
    const double in_memory = static_cast<double>(4 * (1 + in.optimizer_states)) * share *
                                 (1 - p.optimizer_in_files) +
                             static_cast<double>(in.codec_residual_bytes);
    in.checkpoint_bytes = 8 * kMiB + (checkpoint.async ? static_cast<int64_t>(in_memory) : 0);
  }
  return in;
}

namespace {

// What a rank owns of `elements` of one group (stage 0 owns it all).
int64_t shard_of(const FitInputs& in, int64_t elements) {
  return in.stage >= 1 ? (elements + in.shard_world - 1) / in.shard_world : elements;
}

// The streamed tile (offload_placement): sub_group_size capped by the largest offloaded shard,
// rounded up to the tiers' alignment; 0 when nothing is streamed.
int64_t tile_elements(const FitInputs& in) {
  if (in.states.optimizer_in_files <= 0 && !in.params_streamed) return 0;
  const int64_t largest = std::min(in.sub_group_size, shard_of(in, in.largest_owned));
  // Aligned in the narrowest array a tile holds, as the engine's placement rounds it.
  const int64_t narrowest = std::min<int64_t>(
      {in.element_size, in.master_element_size,
       in.optimizer_states > 0 ? in.state_element_size : 4});
  return round_up(std::max<int64_t>(1, largest), in.alignment / narrowest);
}

// The model while it is built, beyond its model states. The engine builds it a group at a time
// from its declarations (zero.Init): a stage-3 group it releases gets only this rank's fp32
// initial values, a group kept whole (below stage 3, or persistent) all of them, and the states
// start from a zeroed shard. model.init_from then writes the file's tensors one at a time through
// a gather: the file's copy and the gathered fp32 tensor. A TorchScript file is held whole
// meanwhile.
int64_t construction_bytes(const FitInputs& in) {
  const int64_t shard = shard_of(in, in.largest_owned);
  const int64_t filled = in.stage == 3 ? shard + std::min(in.persistent, in.largest_owned)
                                       : in.largest_owned;
  return 4 * filled + 4 * shard + (in.init_from ? 8 * in.largest_tensor : 0) +
         in.loaded_model_bytes;
}

// Gradients while backward runs: stages 0-1 keep every .grad until the step (and, 16-bit with
// accumulation, its fp32 sum); stages 2-3 the
// tied weights' .grad (filled by the last unit that uses them, reduced only after the first),
// one unit's other .grad and a group's flat buffer at a time; reductions in flight up to
// reduce_bucket_mb. The global norm squares a gradient shard in fp64 (one buffer, squared in
// place; a tile's copy and its square when every shard is in a file tier). 16-bit gradients are
// reduced in fp32 through scratch buffers the communicator keeps (comm_ucx: a group and a shard). A
// codec adds its residuals and the buffers its collectives keep (codec_staging).
int64_t gradient_bytes(const FitInputs& in) {
  const int64_t es = in.element_size;
  const int64_t shard = shard_of(in, in.largest_owned);
  const int64_t flat = es * in.largest_owned;
  const bool all_in_files = in.states.grads_in_files && in.states.optimizer_in_files >= 1;
  const int64_t norm = all_in_files ? 16 * tile_elements(in) : 8 * shard;
  const int64_t scratch = es < 4 ? 4 * (in.largest_owned + shard) : 0;
  const int64_t transient = flat + in.reduce_bucket_bytes + norm + scratch;
  // A 16-bit job that accumulates keeps the finished micro steps' sum in fp32 beside .grad.
  const int64_t fp32_sums = es < 4 && in.grad_accum > 1 ? 4 * in.parameters : 0;
  const int64_t codec = in.codec_residual_bytes + in.codec_staging_bytes;
  if (in.stage <= 1) return es * in.parameters + fp32_sums + transient + codec;
  return es * (in.tied + in.largest_untied) + transient + codec;
}

// Host buffers of streamed tiers: the update's buffer sets (master, each state, the gradient
// and, for streamed 16-bit parameters, a parameter tile: fp32-sized each), the sets a reduced
// gradient reaches its file through, and at stage 3 the parameter shards read ahead of their
// gathers.
int64_t staging_bytes(const FitInputs& in) {
  const int64_t tile = round_up(tile_elements(in) * 4, in.alignment);
  int64_t bytes = 0;
  if (in.states.optimizer_in_files > 0) {
    // The update's set holds a gradient tile even where gradients wait in host memory.
    const int64_t arrays = 2 + in.optimizer_states + (in.states.grads_in_files ? 1 : 0) +
                           (in.params_streamed && in.element_size != in.master_element_size ? 1
                                                                                            : 0);
    bytes += in.pipeline_sets * arrays * tile;
  }
  if (in.params_streamed) {
    bytes += in.fetch_units *
             round_up(shard_of(in, in.largest_unit) * in.element_size, in.alignment);
  }
  return bytes;
}

// What each file tier's folder gets from one rank: its arrays, each rounded up to the tier's
// block (one array per state per group: at most one group per tensor, unless the plan is known).
std::vector<DiskNeed> disk_needs(const FitInputs& in, const StateBytes& b,
                                 const EngineSettings& engine) {
  std::vector<DiskNeed> out;
  auto add = [&](const PluginChoice& role, const std::string& what, int64_t bytes, int64_t arrays) {
    if (bytes <= 0) return;
    auto it = std::find_if(out.begin(), out.end(),
                           [&](const DiskNeed& d) { return d.plugin == role.id; });
    if (it == out.end()) {
      const Options& o = role.options;
      out.push_back({role.id, o.get_string("path"), o.where("path").str(), "", 0});
      it = out.end() - 1;
    }
    it->roles += (it->roles.empty() ? "" : " + ") + what;
    it->per_rank += bytes + arrays * (in.groups > 0 ? in.groups : in.tensors) * in.alignment;
  };
  const int64_t optimizer_arrays = 1 + in.optimizer_states + (in.states.grads_in_files ? 1 : 0);
  add(engine.offload_optimizer,
      in.states.grads_in_files ? "master, optimizer states, gradient shards"
                               : "master and optimizer states",
      b.optimizer_files, optimizer_arrays);
  add(engine.offload_param, "parameter shards", b.param_files, 1);
  return out;
}

}  // namespace

FitEstimate estimate_fit(const FitInputs& in, const EngineSettings& engine) {
  FitEstimate e;
  e.inputs = in;
  e.state_bytes = rank_state_bytes(in.states);
  HostNeed& h = e.host;
  h.process = kProcessBaselineBytes;
  h.process_measured = in.forked_ranks ? kForkedProcessMeasuredBytes : kProcessMeasuredBytes;
  h.model_states = e.state_bytes.host();
  h.construction = construction_bytes(in);
  if (in.stage == 3) h.params_gathered = in.element_size * (in.largest_window + in.persistent);
  h.grads = gradient_bytes(in);
  h.activations = in.activation_bytes;
  h.staging = staging_bytes(in);
  h.tier_pools = in.tier_pool_bytes;
  h.checkpoint = in.checkpoint_bytes;
  h.allocator = h.working_set() * kAllocatorSlackPercent / 100;
  e.tile_elements = tile_elements(in);
  e.disks = disk_needs(in, e.state_bytes, engine);
  return e;
}

}  // namespace zt::trainer
