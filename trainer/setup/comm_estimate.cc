#include "setup/comm_estimate.h"

#include <c10/util/accumulate.h>

#include <algorithm>
#include <map>
#include <set>

#include "models/model.h"
#include "settings/job_settings.h"
#include "zt/codec.h"
#include "zt/host/compose.h"
#include "zt/host/plugin_loader.h"

namespace zt::trainer {

double CommEstimate::calls(const std::string& op) const {
  double n = 0;
  for (const auto& c : collectives) n += op.empty() || c.op == op ? c.calls : 0;
  return n;
}

int64_t CommEstimate::bytes(const std::string& op) const {
  int64_t n = 0;
  for (const auto& c : collectives) n += op.empty() || c.op == op ? c.bytes : 0;
  return n;
}

int64_t CommEstimate::sent(const std::string& op) const {
  int64_t n = 0;
  for (const auto& c : collectives) n += op.empty() || c.op == op ? c.sent : 0;
  return n;
}

namespace {

// One flat group of the strategy's plan, as the collectives see it.
struct GroupSize {
  int64_t padded = 0;          // elements on the wire
  int64_t largest_tensor = 0;  // decides stage-3 persistence
};

struct PlannedModel {
  std::vector<GroupSize> groups;
  // Per unit, the groups its forward needs gathered: its own and those of tensors it borrows.
  std::vector<std::set<size_t>> used;
};

// The model's units planned by the job's strategy over `world` ranks, from declarations only.
PlannedModel plan_model(const JobSettings& job, PluginCatalog& catalog, int world,
                        int64_t element_size) {
  const models::ModelShape shape = models::resolve_model_shape(job.model, catalog);
  const std::unique_ptr<ModelSource> source = models::make_model_source(shape, job.run.seed);
  const std::unique_ptr<ShardStrategy> strategy = make_shard_strategy(job.engine, catalog);
  PlannedModel m;
  std::map<std::string, size_t> group_of;  // tensor name -> its group
  for (int64_t u = 0; u < source->unit_count(); ++u) {
    std::vector<TensorMeta> owned;
    std::set<size_t> used;
    for (const ParamDecl& decl : source->declare(u)) {
      auto it = group_of.find(decl.name);
      if (it != group_of.end()) {
        used.insert(it->second);  // borrowed (tied): the owner's whole group is gathered
      } else {
        owned.push_back({decl.name, c10::multiply_integers(decl.shape), element_size});
      }
    }
    const ShardPlan plan = strategy->plan(owned, world);
    for (const FlatGroup& g : plan.groups) {
      GroupSize size{g.padded_numel, 0};
      for (const FlatSegment& s : g.segments) {
        size.largest_tensor = std::max(size.largest_tensor, owned[s.tensor].numel);
        group_of[owned[s.tensor].name] = m.groups.size();
      }
      used.insert(m.groups.size());
      m.groups.push_back(size);
    }
    m.used.push_back(std::move(used));
  }
  return m;
}

// Bytes one rank sends of a collective with `bytes` payload over `ranks` ranks: comm_ucx's
// shared-memory window publishes a rank's own block for a gather and the others' blocks for a
// reduction (plus its reduced block for an all-reduce); its ring sends N-1 blocks per pass.
int64_t sent_bytes(const std::string& op, int64_t bytes, int ranks, bool window) {
  if (ranks <= 1) return 0;
  const double b = static_cast<double>(bytes), n = ranks, others = (n - 1) / n;
  double sent = 0;
  if (op == "all_gather") sent = window ? b / n : b * others;
  if (op == "reduce_scatter") sent = b * others;
  if (op == "all_reduce") sent = window ? b : 2 * b * others;
  if (op == "all_to_all") sent = b * others;  // each block straight to its rank, window or not
  return static_cast<int64_t>(sent);
}

struct Groups {
  int world = 1, shard = 1, replicas = 1;
  int ranks_per_host = 1;
  bool window = true;  // comm_ucx's shared-memory collectives inside a host
  // Whether every group of the kind lies on one host (its collectives move through its
  // shared memory): the world, the shard groups or the replica groups.
  bool one_host(const std::string& group) const {
    if (group == "world") return world <= ranks_per_host;
    // A two-level gather's levels: the ranks at one place on each host, and each host's ranks.
    if (group == "hosts") return false;
    if (group == "host") return true;
    return groups_on_one_host(world, shard, ranks_per_host, group == "replicas");
  }
};

// `widened`: what the comm's reductions send per payload byte (comm_ucx reduces 16-bit values in
// fp32: 2). A ring all-reduce widens only its reduce-scatter half; it gathers in the payload's
// dtype, so over the network it sends (2 + 1) / 2 per byte; its shared-memory form is all fp32.
void add(CommEstimate& e, const Groups& g, const std::string& op, const std::string& group,
         int ranks, double calls, int64_t bytes, const std::string& why, double widened = 1.0) {
  if (calls <= 0) return;
  const bool local = g.one_host(group);
  const bool window = local && g.window;
  const double per_byte = op == "all_reduce" && !window ? (widened + 1) / 2 : widened;
  const int64_t sent = sent_bytes(op, bytes, ranks, window);
  e.collectives.push_back({op, group, ranks, local ? "shared memory" : "network", calls, bytes,
                           static_cast<int64_t>(static_cast<double>(sent) * per_byte), why});
}

// The codec a role's choice makes where codec_placement() puts it (null: exact bytes).
std::unique_ptr<Codec> role_codec(const PluginChoice& role, PluginCatalog& catalog, bool placed) {
  return placed
             ? created_by(catalog.codec(role.id, role.key).create(role.options), role.id, "codec")
             : nullptr;
}

// The bytes a group's flat buffer of `padded` elements of `es` bytes takes on the wire: as is,
// or each of the `ranks` chunks encoded (what a coded gather or all-to-all moves).
int64_t wire_bytes(const Codec* codec, int64_t padded, int64_t es, int ranks) {
  if (!codec) return padded * es;
  return codec->encoded_bytes(padded / ranks) * ranks;
}

std::string times(int64_t n, const char* what) {
  return std::to_string(n) + " " + what + (n == 1 ? "" : "s");
}

}  // namespace

CommEstimate estimate_comm(const JobSettings& job, PluginCatalog& catalog, int world,
                           int ranks_per_host) {
  const EngineSettings& engine = job.engine;
  const int stage = engine.options.stage;
  const int64_t es = engine.compute == "fp32" ? 4 : 2;
  const int64_t accum = job.data.grad_accum;
  Groups g;
  g.world = world;
  g.ranks_per_host = ranks_per_host > 0 ? ranks_per_host : world;
  g.shard = stage >= 1 ? shard_groups(engine, world, ranks_per_host).sharding_world(world) : world;
  g.replicas = world / g.shard;
  g.window = engine.comm.id == "comm_ucx" && engine.comm.options.get_bool("shared_memory");
  // comm_ucx reduces bf16 and fp16 in fp32, on the wire too (its accumulate type); NCCL reduces
  // in the payload's dtype.
  const double exact_reduce_wire = engine.comm.id == "comm_ucx" ? 4.0 / static_cast<double>(es)
                                                                : 1.0;

  // zero.mics_hierarchical_params_gather with a shard group that spans hosts: every parameter
  // gather goes in two levels (HierarchicalGather): across the hosts among the ranks at one
  // place, 1/ranks_per_host of the group's bytes (the weight codec's, encoded), then within each
  // host, all of them exact.
  const ShardGroupChoice groups_choice = shard_groups(engine, world, ranks_per_host);
  const int per_host = g.ranks_per_host;
  const bool two_level = stage >= 1 && groups_choice.hierarchical && ranks_per_host > 0 &&
                         per_host < g.shard && g.shard % per_host == 0;
  const int hosts = two_level ? g.shard / per_host : 1;

  const PlannedModel m = plan_model(job, catalog, g.shard, es);
  const int64_t threshold = engine.options.param_persistence_threshold;
  // ZeRO++: the weight codec codes stage 3's gathers of released groups, the gradient codec
  // turns each reduce-scatter into an all-to-all of encoded chunks.
  // With MiCS it also codes the all-reduce across the groups: an all-to-all of encoded chunks of
  // each shard, then an all-gather of their encoded sums.
  const CodecPlacement place = codec_placement(engine, world, g.shard, g.ranks_per_host);
  const auto weight_codec = role_codec(engine.codec_weights, catalog, place.weights);
  const auto grad_codec = role_codec(engine.codec_gradients, catalog,
                                     stage >= 1 && place.gradients_in_group);
  const auto across_codec = role_codec(engine.codec_gradients, catalog,
                                       stage >= 1 && place.gradients_across);
  int64_t all = 0, released = 0, persistent = 0, released_uses = 0, shard_bytes = 0;
  int64_t released_groups = 0, reduced = 0, across = 0;
  int64_t persistent_level1 = 0, released_uses_level1 = 0;  // two-level: the bytes across hosts
  // Stage 3 releases a group whose largest tensor reaches the persistence threshold.
  const auto is_released = [&](const GroupSize& s) {
    return stage == 3 && s.largest_tensor >= threshold;
  };
  for (const GroupSize& s : m.groups) {
    all += s.padded * es;
    reduced += wire_bytes(grad_codec.get(), s.padded, es, g.shard);
    shard_bytes += s.padded / g.shard * es;
    const int64_t shard = s.padded / g.shard;
    across += wire_bytes(across_codec.get(), padded_shard_numel(shard, g.replicas) * g.replicas, es,
                         g.replicas);
    const bool kept = !is_released(s);
    (kept ? persistent : released) += s.padded * es;
    if (kept) persistent_level1 += s.padded / per_host * es;
    released_groups += kept ? 0 : 1;
  }
  // Stage 3 gathers a released group before each unit that uses it runs forward, and again
  // before its backward; but the last unit that uses one keeps its groups across the turn from
  // forward to backward (ParamGatherer): its uses are gathered once.
  size_t turn = m.used.size();
  for (size_t u = 0; u < m.used.size(); ++u) {
    for (size_t gi : m.used[u]) {
      if (is_released(m.groups[gi])) turn = u;
    }
  }
  int64_t released_calls = 0, turn_calls = 0, turn_uses = 0, turn_uses_level1 = 0;
  for (size_t u = 0; u < m.used.size(); ++u) {
    for (size_t gi : m.used[u]) {
      if (!is_released(m.groups[gi])) continue;
      const GroupSize& s = m.groups[gi];
      const int64_t bytes = two_level ? s.padded * es
                                      : wire_bytes(weight_codec.get(), s.padded, es, g.shard);
      const int64_t level1 = two_level
                                 ? wire_bytes(weight_codec.get(), s.padded / per_host, es, hosts)
                                 : 0;
      released_uses += bytes;
      released_uses_level1 += level1;
      ++released_calls;
      if (u == turn) {
        turn_uses += bytes;
        turn_uses_level1 += level1;
        ++turn_calls;
      }
    }
  }
  const auto groups = static_cast<int64_t>(m.groups.size());
  const std::string micro = " x " + times(accum, "micro step");
  CommEstimate e;
  e.groups = groups;
  if (stage == 0) {
    add(e, g, "all_reduce", "world", world, static_cast<double>(groups), all,
        "gradients of " + times(groups, "group") + ", once per step", exact_reduce_wire);
  } else {
    // Stages 0-1 reduce at the step, stages 2-3 after every micro step's backward.
    const int64_t reductions = stage >= 2 ? accum : 1;
    add(e, g, grad_codec ? "all_to_all" : "reduce_scatter", "shard group", g.shard,
        static_cast<double>(groups * reductions), reduced * reductions,
        std::string(grad_codec ? "encoded " : "") + "gradients of " + times(groups, "group") +
            (stage >= 2 ? micro : ", once per step"),
        grad_codec ? 1.0 : exact_reduce_wire);
    if (g.replicas > 1 && across_codec) {
      for (const char* op : {"all_to_all", "all_gather"}) {
        add(e, g, op, "replicas", g.replicas, static_cast<double>(groups * reductions),
            across * reductions,
            std::string("each reduced shard across the shard groups (MiCS), encoded: the ") +
                (op[4] == 't' ? "chunks to their groups" : "chunks' sums to every group"));
      }
    } else if (g.replicas > 1) {
      add(e, g, "all_reduce", "replicas", g.replicas, static_cast<double>(groups * reductions),
          shard_bytes * reductions, "each reduced shard across the shard groups (MiCS)",
          exact_reduce_wire);
    }
    // A parameter gather: over the shard group, or in its two levels.
    const auto gather =
        [&](double calls, int64_t bytes, int64_t level1, bool coded, const std::string& why) {
      const std::string what = std::string(coded ? "encoded " : "") + why;
      if (!two_level) {
        add(e, g, "all_gather", "shard group", g.shard, calls, bytes, what);
        return;
      }
      add(e, g, "all_gather", "hosts", hosts, calls, level1,
          what + ", first level: across the hosts");
      add(e, g, "all_gather", "host", per_host, calls, bytes,
          why + ", second level: within each host");
    };
    const int64_t refreshed = stage == 3 ? groups - released_groups : groups;
    gather(static_cast<double>(refreshed), persistent, persistent_level1, false,
           "updated parameters of " + times(refreshed, stage == 3 ? "persistent group" : "group") +
               ", once per step");
    if (stage == 3) {
      gather(static_cast<double>((2 * released_calls - turn_calls) * accum),
             (2 * released_uses - turn_uses) * accum,
             (2 * released_uses_level1 - turn_uses_level1) * accum, weight_codec != nullptr,
             "forward and backward gathers of " + times(released_groups, "released group") +
                 " (the last unit's once)" + micro);
    }
  }
  // The training loop's own: the loss average and the stop flag each step, the global gradient
  // norm's sums (stages 1-3), and the memory report's gather each logged step.
  add(e, g, "all_reduce", "world", world, stage >= 1 ? 3 : 2, stage >= 1 ? 28 : 12,
      stage >= 1 ? "loss average, stop flag, gradient norm" : "loss average, stop flag");
  const double logged = 1.0 / static_cast<double>(std::max<int64_t>(1, job.run.log_every));
  add(e, g, "all_gather", "world", world, logged, static_cast<int64_t>(104.0 * world * logged),
      "memory report of every rank, each logged step");
  return e;
}

}  // namespace zt::trainer
