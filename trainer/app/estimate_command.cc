#include "app/estimate_command.h"

#include "settings/deepspeed_config.h"
#include "tune/estimate_json.h"
#include "tune/estimate_table.h"
#include "tune/search_space.h"
#include "zt/error.h"
#include "zt/options.h"

namespace zt::trainer {

std::vector<std::string> job_overrides(const CliArgs& args) {
  std::vector<std::string> base = args.overrides;
  if (args.nproc) base.push_back("launch.nproc=" + std::to_string(*args.nproc));
  if (!args.plugin_dirs.empty()) {
    base.push_back("plugins.dirs=" + value_to_toml(Value(args.plugin_dirs)));
  }
  return base;
}

ConfigLoader job_loader(const CliArgs& args) {
  const std::vector<std::string> base = job_overrides(args);
  const std::string path = args.config_path;
  return [base, path](const std::vector<std::string>& overrides) {
    std::vector<std::string> all = base;
    all.insert(all.end(), overrides.begin(), overrides.end());
    return load_job_config(path, all);
  };
}

std::vector<CompositionEstimate> estimate_all(const CliArgs& args, EstimateOptions& options) {
  const ConfigLoader load = job_loader(args);
  const Config config = load({});
  const Options& run = config.section("run");
  if (run.get_string("task") != "train") {
    throw ConfigError(run.where("task").str() + ": run.task = \"" + run.get_string("task") +
                      "\" trains nothing; trainer estimate and trainer tune size training jobs "
                      "(run.task = \"train\", e.g. configs/zero3.toml)");
  }
  options.world = static_cast<int>(config.section("launch").get_int("nproc"));
  if (options.world % args.tune.hosts != 0) {
    throw ConfigError("--hosts " + std::to_string(args.tune.hosts) + " does not divide the " +
                      std::to_string(options.world) +
                      " ranks (launch.nproc or --nproc): give a number of hosts that holds "
                      "the same number of ranks each");
  }
  options.ranks_per_host = options.world / args.tune.hosts;
  // Each host runs ranks_per_host of the ranks: what the memory-fit model multiplies by.
  const ConfigLoader per_host = [&](const std::vector<std::string>& overrides) {
    std::vector<std::string> all = overrides;
    if (args.tune.hosts > 1)
      all.push_back("launch.nproc=" + std::to_string(options.ranks_per_host));
    return load(all);
  };
  std::vector<CompositionEstimate> out;
  Composition yours;
  yours.origin = "your config";
  out.push_back(estimate_composition(per_host, yours, options));
  std::vector<CompositionEstimate> grid;
  for (const Composition& c : composition_grid(config, args.tune.hosts)) {
    grid.push_back(estimate_composition(per_host, c, options));
  }
  prune_placements(grid);
  out.insert(out.end(), grid.begin(), grid.end());
  return out;
}

int run_estimate(const CliArgs& args, std::ostream& out) {
  EstimateOptions options;
  options.margin = args.tune.margin;
  const std::vector<CompositionEstimate> estimates = estimate_all(args, options);
  if (args.tune.json) {
    nlohmann::json j = nlohmann::json::array();
    for (const CompositionEstimate& e : estimates) j.push_back(estimate_json(e));
    out << j.dump(1) << "\n";
    return 0;
  }
  out << "zt estimate: " << args.config_path << " (#1 is your config as given)\n";
  print_estimates(estimates, options, out);
  return 0;
}

}  // namespace zt::trainer
