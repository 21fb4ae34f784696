// Command-line parsing for `trainer`. Pure: no side effects, errors as ConfigError.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "run/sample_task.h"

namespace zt::trainer {

enum class Command {
  kRun,
  kPluginsList,
  kPluginsDescribe,
  kExport,
  kAb,
  kCompare,
  kAbReport,
  kTraceMerge,  // trainer trace merge RUN_DIR [--out FILE]
  kReport,      // trainer report RUN_DIR [--out FILE]
  kFlight,      // trainer flight RUN_DIR: the diagnosis of the ranks' flight records
  kEval,        // trainer eval --checkpoint DIR: a checkpoint's validation loss
  kSample,      // trainer sample --checkpoint DIR: text from a language model's checkpoint
  kEstimate,    // trainer estimate --config FILE: every composition sized, no rank started
  kTune,        // trainer tune --config FILE --budget 15m: the fastest composition, raced
  kHelp,
  kVersion
};

// trainer ab / trainer compare (ab_command.h).
struct AbArgs {
  std::string a, b;                 // --a / --b: comma-separated overrides of each arm
  int64_t steps = 0;                // --steps: per run; 0 = the config's run.steps
  int reps = 2;                     // --reps: runs per arm, interleaved A B B A
  int64_t warmup = 2;               // --warmup: steps of each run left out of the timings
  std::string out_dir = "runs/ab";  // --out
  bool allow_different_math = false;
  double rtol = 1e-6;  // --rtol: relative difference of losses and gradient norms that agree
};

// trainer estimate / trainer tune (estimate_command.h, tune_command.h).
struct TuneArgs {
  int hosts = 1;                      // --hosts: hosts the ranks spread over (MiCS groups per host)
  bool json = false;                  // estimate --json
  double margin = 0.1;                // --margin: share of each tier a composition must leave free
  double budget_s = 900;              // tune --budget (15m)
  std::string out_dir = "runs/tune";  // tune --out
  int64_t trial_steps = 6;            // tune --trial-steps: timed, per candidate and round
  std::vector<std::string> candidates;  // tune --candidate: extra compositions to race
  double rtol = 1e-3;                   // tune --rtol: losses of a trial vs the given config
};

struct CliArgs {
  Command command = Command::kRun;
  std::string config_path;
  std::vector<std::string> overrides;  // --set section.key=value, in order
  bool print_config = false;
  std::optional<int> nproc;              // --nproc N (same as --set launch.nproc=N)
  std::vector<std::string> plugin_dirs;  // --plugin-dir DIR, searched before plugins.dirs
  std::string plugin_id;                 // plugins describe <id>
  // export --checkpoint DIR --out FILE [--dtype fp32|bf16|fp16]; eval and sample --checkpoint
  std::string checkpoint;
  std::string out_path;  // export, trace merge, report, eval, sample: --out
  std::string dtype = "fp32";
  AbArgs ab;
  TuneArgs tune;
  SampleRequest sample;  // trainer sample's flags (and --checkpoint, --out)
  // trainer compare RUN_A RUN_B; ab-report, trace merge, report and flight RUN_DIR
  std::vector<std::string> compare_runs;
};

CliArgs parse_cli(const std::vector<std::string>& args);
const char* usage();

}  // namespace zt::trainer
