// Command-line parsing for `trainer`. Pure: no side effects, errors as ConfigError.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace zt::trainer {

enum class Command { kRun, kPluginsList, kPluginsDescribe, kExport, kHelp, kVersion };

struct CliArgs {
  Command command = Command::kRun;
  std::string config_path;
  std::vector<std::string> overrides;  // --set section.key=value, in order
  bool print_config = false;
  std::optional<int> nproc;              // --nproc N (same as --set launch.nproc=N)
  std::vector<std::string> plugin_dirs;  // --plugin-dir DIR, searched before plugins.dirs
  std::string plugin_id;                 // plugins describe <id>
  // export --checkpoint DIR --out FILE [--dtype fp32|bf16|fp16]
  std::string checkpoint;
  std::string out_path;
  std::string dtype = "fp32";
};

CliArgs parse_cli(const std::vector<std::string>& args);
const char* usage();

}  // namespace zt::trainer
