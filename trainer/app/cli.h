// Command-line parsing for `trainer`. Pure: no side effects, errors as ConfigError.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ab/arm_run.h"
#include "data/prepare_data.h"
#include "run/sample_task.h"
#include "tune/tuner.h"

namespace zt::trainer {

enum class Command {
  kRun,
  kPluginsList,
  kPluginsDescribe,
  kExport,
  kAb,
  kCompare,
  kAbReport,
  kTraceMerge,   // trainer trace merge RUN_DIR [--out FILE]
  kReport,       // trainer report RUN_DIR [--out FILE]
  kFlight,       // trainer flight RUN_DIR: the diagnosis of the ranks' flight records
  kEval,         // trainer eval --checkpoint DIR: a checkpoint's validation loss
  kSample,       // trainer sample --checkpoint DIR: text from a language model's checkpoint
  kEstimate,     // trainer estimate --config FILE: every composition sized, no rank started
  kTune,         // trainer tune --config FILE --budget 15m: the fastest composition, raced
  kPrepareData,  // trainer prepare-data INPUT... --out PREFIX: text to a token file + index
  kVersion
};

struct CliArgs {
  Command command = Command::kRun;
  std::string config_path;
  std::vector<std::string> overrides;  // --set section.key=value, in order
  bool print_config = false;
  bool help = false;         // --help: the command's help (app/help.h), nothing run
  bool subcommand = false;   // a command word was given (else: training, or --help's overview)
  std::optional<int> nproc;  // --nproc N (same as --set launch.nproc=N)
  std::vector<std::string> plugin_dirs;  // --plugin-dir DIR, searched before plugins.dirs
  std::string plugin_id;                 // plugins describe <id>
  // export --checkpoint DIR --out FILE [--dtype fp32|bf16|fp16]; eval and sample --checkpoint
  std::string checkpoint;
  std::string out_path;  // export, trace merge, report, eval, sample: --out
  std::string dtype = "fp32";
  AbArgs ab;
  TuneArgs tune;
  SampleRequest sample;          // trainer sample's flags (and --checkpoint, --out)
  bool prompt_given = false;     // sample --prompt (its text is sample.prompt)
  data::PrepareRequest prepare;  // trainer prepare-data's inputs and flags
  // trainer compare RUN_A RUN_B; ab-report, trace merge, report and flight RUN_DIR
  std::vector<std::string> compare_runs;
};

CliArgs parse_cli(const std::vector<std::string>& args);

}  // namespace zt::trainer
