#include "app/estimate_command.h"

#include "settings/deepspeed_config.h"
#include "settings/job_config.h"
#include "tune/estimate_json.h"
#include "tune/estimate_table.h"
#include "tune/search_space.h"
#include "zt/error.h"
#include "zt/options.h"

namespace zt::trainer {

std::vector<std::string> plugin_search_dirs(const CliArgs& args) {
  std::vector<std::string> dirs = args.plugin_dirs;
  // Without --config, a --set plugins.dirs=[...] alone names them (it was dropped).
  const std::vector<std::string> listed =
      args.config_path.empty() ? Config::plugin_dirs_of_string("", "--set", args.overrides)
                               : Config::plugin_dirs_of_file(args.config_path, args.overrides);
  dirs.insert(dirs.end(), listed.begin(), listed.end());
  return dirs;
}

std::vector<std::string> job_overrides(const CliArgs& args) {
  std::vector<std::string> base = args.overrides;
  if (args.nproc) base.push_back("launch.nproc=" + std::to_string(*args.nproc));
  // An override replaces the file's list: it carries the file's folders after --plugin-dir's.
  if (!args.plugin_dirs.empty()) {
    base.push_back("plugins.dirs=" + value_to_toml(Value(plugin_search_dirs(args))));
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

int run_estimate(const CliArgs& args, std::ostream& out) {
  EstimateOptions options;
  options.margin = args.tune.margin;
  const std::vector<CompositionEstimate> estimates =
      estimate_all(job_loader(args), args.tune.hosts, options).all;
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
