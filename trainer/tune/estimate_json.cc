#include "tune/estimate_json.h"

namespace zt::trainer {

nlohmann::json estimate_json(const CompositionEstimate& e) {
  nlohmann::json j;
  j["composition"] = e.composition.label;
  j["overrides"] = e.composition.overrides;
  j["origin"] = e.composition.origin;
  if (!e.refused.empty()) {
    j["refused"] = e.refused;
    return j;
  }
  const FitInputs& in = e.fit.inputs;
  const HostNeed& h = e.fit.host;
  const StateBytes& s = e.fit.state_bytes;
  const double psi = static_cast<double>(std::max<int64_t>(1, in.parameters));
  j["psi"] = in.parameters;
  j["world"] = in.world;
  j["shard_world"] = in.shard_world;
  j["ranks_per_host"] = in.local_ranks;
  j["host_ram_per_rank"] = {{"total", h.total()},
                            {"expected_peak", h.expected()},
                            {"process", h.process},
                            {"model_states", h.model_states},
                            {"construction", h.construction},
                            {"params_gathered", h.params_gathered},
                            {"grads", h.grads},
                            {"activations", h.activations},
                            {"staging", h.staging},
                            {"tier_pools", h.tier_pools},
                            {"checkpoint", h.checkpoint},
                            {"allocator", h.allocator}};
  // Each model-state array as a multiple of psi: the theory's 16psi/N and its offloaded parts.
  j["model_states_per_param"] = {{"params", static_cast<double>(s.params) / psi},
                                 {"master", static_cast<double>(s.master) / psi},
                                 {"optimizer_states", static_cast<double>(s.states) / psi},
                                 {"grads", static_cast<double>(s.grads) / psi},
                                 {"optimizer_files", static_cast<double>(s.optimizer_files) / psi},
                                 {"param_files", static_cast<double>(s.param_files) / psi}};
  nlohmann::json disks = nlohmann::json::array();
  for (size_t i = 0; i < e.fit.disks.size(); ++i) {
    const DiskNeed& d = e.fit.disks[i];
    nlohmann::json dj = {
        {"plugin", d.plugin}, {"path", d.path}, {"roles", d.roles}, {"bytes_per_rank", d.per_rank}};
    if (i < e.budget.disk_free.size()) dj["free"] = e.budget.disk_free[i];
    disks.push_back(dj);
  }
  j["file_tiers"] = disks;
  nlohmann::json comm = nlohmann::json::array();
  for (const CollectiveEstimate& c : e.comm.collectives) {
    comm.push_back({{"op", c.op},
                    {"group", c.group},
                    {"ranks", c.ranks},
                    {"link", c.link},
                    {"calls_per_step", c.calls},
                    {"bytes_per_step", c.bytes},
                    {"sent_per_step", c.sent},
                    {"why", c.why}});
  }
  j["collectives"] = comm;
  j["sent_per_step"] = e.comm.sent();
  j["offload_per_step"] = {{"host_copies", e.host_copies_per_step},
                           {"file_io", e.file_io_per_step}};
  j["host_ram"] = {
      {"have", e.budget.ram}, {"source", e.budget.ram_source}, {"need", e.fit.host_total()}};
  j["fits"] = e.fits();
  j["short_of"] = e.short_of;
  if (!e.pruned.empty()) j["pruned"] = e.pruned;
  return j;
}

}  // namespace zt::trainer
