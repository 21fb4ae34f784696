#include "app/cli.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <utility>

#include "zt/error.h"
#include "zt/host/child_process.h"
#include "zt/options.h"

namespace zt::trainer {

namespace {

// The subcommand words at the front ("export", "plugins list", "plugins describe ID"): sets the
// command and returns how many arguments they took.
size_t parse_subcommand(const std::vector<std::string>& args, CliArgs& out) {
  if (args.empty()) return 0;
  // "trainer plugins --help", "trainer trace --help": the command's help, not its words.
  const bool asks_help = args.size() >= 2 && (args[1] == "--help" || args[1] == "-h");
  if (asks_help && (args[0] == "plugins" || args[0] == "trace")) {
    out.command = args[0] == "plugins" ? Command::kPluginsList : Command::kTraceMerge;
    return 1;
  }
  if (args[0] == "export") {
    out.command = Command::kExport;
    return 1;
  }
  if (args[0] == "ab") {
    out.command = Command::kAb;
    return 1;
  }
  if (args[0] == "estimate" || args[0] == "tune") {
    out.command = args[0] == "estimate" ? Command::kEstimate : Command::kTune;
    return 1;
  }
  if (args[0] == "eval" || args[0] == "sample") {
    out.command = args[0] == "eval" ? Command::kEval : Command::kSample;
    return 1;
  }
  if (args[0] == "compare" || args[0] == "ab-report") {
    const bool compare = args[0] == "compare";
    out.command = compare ? Command::kCompare : Command::kAbReport;
    out.ab.out_dir = compare ? "runs/compare" : "";
    out.ab.warmup = compare ? out.ab.warmup : 1;
    return 1;  // the run folders are the positional arguments, before or after the flags
  }
  if (args[0] == "prepare-data") {
    out.command = Command::kPrepareData;
    return 1;
  }
  if (args[0] == "report" || args[0] == "flight") {
    out.command = args[0] == "report" ? Command::kReport : Command::kFlight;
    return 1;
  }
  if (args[0] == "trace") {
    if (args.size() < 2 || args[1] != "merge")
      throw ConfigError("'trainer trace' needs 'merge RUN_DIR'; see trainer --help");
    out.command = Command::kTraceMerge;
    return 2;
  }
  if (args[0] != "plugins") return 0;
  if (args.size() < 2) throw ConfigError("'trainer plugins' needs 'list' or 'describe ID'");
  if (args[1] == "list") {
    out.command = Command::kPluginsList;
    return 2;
  }
  if (args[1] != "describe") {
    throw ConfigError("unknown 'trainer plugins " + args[1] +
                      "'; use list or describe ID, right after plugins (flags after them)");
  }
  if (args.size() >= 3 && (args[2] == "--help" || args[2] == "-h")) {
    out.command = Command::kPluginsDescribe;
    return 2;
  }
  if (args.size() < 3 || args[2].rfind("--", 0) == 0) {
    throw ConfigError("'trainer plugins describe' needs a plugin id right after describe, before "
                      "any flag: trainer plugins describe comm_ucx --plugin-dir DIR");
  }
  out.command = Command::kPluginsDescribe;
  out.plugin_id = args[2];
  return 3;
}

int parse_nproc(const std::string& v) {
  char* end = nullptr;
  long n = std::strtol(v.c_str(), &end, 10);
  if (*end != '\0' || n < 1 || n > 1024) {
    throw ConfigError("--nproc " + v + ": expected a number of ranks from 1 to 1024");
  }
  return static_cast<int>(n);
}

// export's own flags; false for any other argument.
bool parse_export_flag(const std::string& a, const std::function<std::string()>& value,
                       CliArgs& out) {
  if (out.command != Command::kExport) return false;
  if (a == "--checkpoint") {
    out.checkpoint = value();
  } else if (a == "--out") {
    out.out_path = value();
  } else if (a == "--dtype") {
    out.dtype = value();
    if (out.dtype != "fp32" && out.dtype != "bf16" && out.dtype != "fp16") {
      throw ConfigError("--dtype " + out.dtype + ": expected fp32, bf16 or fp16");
    }
  } else {
    return false;
  }
  return true;
}

// A whole number in [min, max]; one past what strtoll holds (ERANGE) saturated and went through.
int64_t parse_count(const std::string& flag, const std::string& v, int64_t min,
                    int64_t max = std::numeric_limits<int64_t>::max()) {
  char* end = nullptr;
  errno = 0;
  const long long n = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || errno == ERANGE || n < min || n > max) {
    throw ConfigError(
        flag + " " + v + ": expected a whole number of at least " + std::to_string(min) +
        (max < std::numeric_limits<int64_t>::max() ? " and at most " + std::to_string(max)
                                                   : std::string()));
  }
  return n;
}

double parse_number(const std::string& flag, const std::string& v, double min) {
  char* end = nullptr;
  const double x = std::strtod(v.c_str(), &end);
  if (v.empty() || *end != '\0' || !(x >= min) || !std::isfinite(x)) {
    throw ConfigError(flag + " " + v + ": expected a number of at least " + std::to_string(min));
  }
  return x;
}

// "1,2,3" as token ids.
std::vector<int64_t> parse_token_list(const std::string& v) {
  std::vector<int64_t> ids;
  size_t at = 0;
  while (at <= v.size()) {
    const size_t comma = std::min(v.find(',', at), v.size());
    ids.push_back(parse_count("--tokens", v.substr(at, comma - at), 0));
    at = comma + 1;
  }
  return ids;
}

// More texts than a rank's sampling rows can hold (each keeps its tokens): --samples
// 9223372036854775807 overflowed the per-rank count and ended in "internal error".
constexpr int64_t kMaxSamples = 65536;

// eval's and sample's own flags; false for any other argument.
bool parse_sample_flag(const std::string& a, const std::function<std::string()>& value,
                       CliArgs& out) {
  if (out.command != Command::kEval && out.command != Command::kSample) return false;
  SampleRequest& s = out.sample;
  const bool sample = out.command == Command::kSample;
  if (a == "--checkpoint") {
    out.checkpoint = value();
  } else if (a == "--out") {
    out.out_path = value();
  } else if (sample && (a == "--prompt" || a == "--tokens")) {
    // Both given, --tokens won and --prompt was dropped without a word.
    const bool other = a == "--prompt" ? !s.tokens.empty() : out.prompt_given;
    if (other) throw ConfigError("give --prompt TEXT or --tokens ID,ID,..., not both");
    if (a == "--prompt") {
      s.prompt = value();
      out.prompt_given = true;
    } else {
      s.tokens = parse_token_list(value());
    }
  } else if (sample && a == "--max-new-tokens") {
    s.max_new_tokens = parse_count(a, value(), 1);
  } else if (sample && a == "--temperature") {
    s.temperature = parse_number(a, value(), 0);
  } else if (sample && a == "--top-k") {
    s.top_k = parse_count(a, value(), 0);
  } else if (sample && a == "--seed") {
    s.seed = static_cast<uint64_t>(parse_count(a, value(), 0));
  } else if (sample && a == "--samples") {
    s.samples = parse_count(a, value(), 1, kMaxSamples);
  } else if (sample && a == "--stop") {
    s.stop = value();
  } else {
    return false;
  }
  return true;
}

// ab's and compare's own flags; false for any other argument.
bool parse_ab_flag(const std::string& a, const std::function<std::string()>& value, CliArgs& out) {
  if (out.command != Command::kAb && out.command != Command::kCompare &&
      out.command != Command::kAbReport)
    return false;
  AbArgs& ab = out.ab;
  if ((a == "--a" || a == "--b") && out.command == Command::kAb) {
    // Given twice, the second replaced the first, and the arms compared another question.
    std::string& arm = a == "--a" ? ab.a : ab.b;
    if (!arm.empty()) {
      throw ConfigError(a + " given twice; join one arm's overrides with commas: " + a + " " + arm +
                        ",...");
    }
    arm = value();
  } else if (a == "--steps" && out.command == Command::kAb) {
    ab.steps = parse_count(a, value(), 1);
  } else if (a == "--reps" && out.command == Command::kAb) {
    const int64_t reps = parse_count(a, value(), 1);
    if (reps > 1000)
      throw ConfigError(a + " " + std::to_string(reps) + ": at most 1000 runs an arm");
    ab.reps = static_cast<int>(reps);
  } else if ((a == "--rtol" || a == "--allow-different-math") &&
             out.command == Command::kAbReport) {
    // Accepted and ignored, it read as a loss check that never ran.
    throw ConfigError(a +
                      ": trainer ab-report reports a live A/B job's arms as they ran, "
                      "each on steps of its own, and checks no loss agreement; " +
                      a + " is trainer ab's and trainer compare's, for runs of the same steps");
  } else if (a == "--warmup") {
    ab.warmup = parse_count(a, value(), 0);
  } else if (a == "--out") {
    ab.out_dir = value();
  } else if (a == "--rtol") {
    const std::string v = value();
    char* end = nullptr;
    ab.rtol = std::strtod(v.c_str(), &end);
    // Finite: inf turned the loss check off.
    if (v.empty() || *end != '\0' || !(ab.rtol >= 0) || !std::isfinite(ab.rtol)) {
      throw ConfigError("--rtol " + v + ": expected a finite relative tolerance >= 0, e.g. 1e-6");
    }
  } else if (a == "--allow-different-math") {
    ab.allow_different_math = true;
  } else if (a == "--arms" && out.command == Command::kAbReport) {
    const std::string v = value();
    ab.arms.clear();
    std::stringstream names(v);
    for (std::string name; std::getline(names, name, ',');) ab.arms.push_back(name);
    if (ab.arms.size() != 2 || ab.arms[0].empty() || ab.arms[1].empty() ||
        ab.arms[0] == ab.arms[1] || v.back() == ',') {
      throw ConfigError("--arms " + v +
                        ": expected two different arms of the job, as its steps name them, "
                        "e.g. --arms A,C");
    }
  } else {
    return false;
  }
  return true;
}

// "15m", "90s", "1h", "600" (seconds).
double parse_duration(const std::string& flag, const std::string& v) {
  char* end = nullptr;
  const double x = std::strtod(v.c_str(), &end);
  const std::string unit = end ? std::string(end) : "";
  const double scale = unit.empty() || unit == "s" ? 1 : unit == "m" ? 60 : unit == "h" ? 3600 : 0;
  if (v.empty() || end == v.c_str() || scale == 0 || !(x > 0) || !std::isfinite(x)) {
    throw ConfigError(flag + " " + v + ": expected a duration such as 90s, 15m or 1h");
  }
  return x * scale;
}

// tune --launcher "srun --kill-on-bad-exit=1": its words, the first resolved on PATH (a trial is
// started with execv, which does not search it).
std::vector<std::string> parse_launcher(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> words;
  for (std::string w; in >> w;) words.push_back(w);
  if (words.empty()) {
    throw ConfigError("--launcher needs a command, e.g. --launcher srun inside a Slurm allocation");
  }
  std::string& exe = words[0];
  if (exe.find('/') == std::string::npos) {
    const std::string found = find_on_path(exe);
    if (found.empty()) {
      throw ConfigError("--launcher " + text + ": " + exe +
                        " is not on PATH; give its full path, or run tune where it is installed");
    }
    exe = found;
  } else if (!is_executable_file(exe)) {
    // A folder passed access(X_OK), and every trial then failed at its exec.
    throw ConfigError("--launcher " + text + ": " + exe + " is not an executable file");
  }
  return words;
}

// estimate's and tune's own flags; false for any other argument.
bool parse_tune_flag(const std::string& a, const std::function<std::string()>& value,
                     CliArgs& out) {
  if (out.command != Command::kEstimate && out.command != Command::kTune) return false;
  TuneArgs& t = out.tune;
  const bool tune = out.command == Command::kTune;
  if (a == "--hosts") {
    const std::string v = value();
    const int64_t hosts = parse_count(a, v, 1);
    // As --nproc's bound: each host has a rank at least.
    if (hosts > 1024)
      throw ConfigError("--hosts " + v + ": expected a number of hosts from 1 to 1024");
    t.hosts = static_cast<int>(hosts);
  } else if (a == "--margin") {
    t.margin = parse_number(a, value(), 0);
    if (t.margin >= 1) throw ConfigError("--margin: expected a share below 1, e.g. 0.1");
  } else if (a == "--json" && !tune) {
    t.json = true;
  } else if (a == "--budget" && tune) {
    t.budget_s = parse_duration(a, value());
  } else if (a == "--out" && tune) {
    t.out_dir = value();
  } else if (a == "--trial-steps" && tune) {
    t.trial_steps = parse_count(a, value(), 2);
  } else if (a == "--candidate" && tune) {
    t.candidates.push_back(value());
  } else if (a == "--rtol" && tune) {
    t.rtol = parse_number(a, value(), 0);
  } else if (a == "--launcher" && tune) {
    t.launcher = parse_launcher(value());
  } else {
    return false;
  }
  return true;
}

// prepare-data's flags and inputs; false for any other argument.
bool parse_prepare_flag(const std::string& a, const std::function<std::string()>& value,
                        CliArgs& out) {
  if (out.command != Command::kPrepareData) return false;
  data::PrepareRequest& p = out.prepare;
  if (a == "--out") {
    p.out_prefix = value();
  } else if (a == "--tokenizer") {
    p.tokenizer = value();
  } else if (a == "--tokenizer-dir") {
    p.tokenizer_dir = value();
  } else if (a == "--field") {
    p.field = value();
  } else if (a == "--separator") {
    p.separator = value();
  } else if (a == "--exclude") {
    p.exclude.push_back(value());
  } else if (a == "--threads") {
    p.threads = static_cast<int>(parse_count(a, value(), 1, 4096));
  } else if (a == "--unit-kb") {
    p.unit_bytes = parse_count(a, value(), 1, int64_t{16} << 20) * 1024;  // at most 16 GiB
  } else if (a == "--overwrite") {
    p.overwrite = true;
  } else if (a.rfind("-", 0) != 0) {
    p.inputs.push_back(a);
  } else {
    return false;
  }
  return true;
}

// The words that name `command` ("trainer report"), for messages.
std::string command_words(Command command) {
  switch (command) {
    case Command::kRun: return "trainer (training)";
    case Command::kPluginsList: return "trainer plugins list";
    case Command::kPluginsDescribe: return "trainer plugins describe";
    case Command::kExport: return "trainer export";
    case Command::kAb: return "trainer ab";
    case Command::kCompare: return "trainer compare";
    case Command::kAbReport: return "trainer ab-report";
    case Command::kTraceMerge: return "trainer trace merge";
    case Command::kReport: return "trainer report";
    case Command::kFlight: return "trainer flight";
    case Command::kEval: return "trainer eval";
    case Command::kSample: return "trainer sample";
    case Command::kEstimate: return "trainer estimate";
    case Command::kTune: return "trainer tune";
    case Command::kPrepareData: return "trainer prepare-data";
    case Command::kVersion: return "trainer --version";
  }
  return "trainer";
}

// The flags that say which job and how it runs, which the parser reads for every command: each
// with the commands that use it. Another command refuses it, where it dropped it without a word
// (`trainer report RUN --nproc 4`, `trainer eval ... --max-restarts 3`).
void check_job_flags(const CliArgs& out, const std::vector<std::string>& given) {
  using C = Command;
  const std::vector<C> job = {C::kRun, C::kEval, C::kSample, C::kAb, C::kEstimate, C::kTune};
  std::vector<C> read_a_config = job;
  read_a_config.insert(read_a_config.end(), {C::kPluginsList, C::kPluginsDescribe});
  // export reads launch.timeout_s alone, its checkpoint reads' bound (checked below).
  std::vector<C> take_set = read_a_config;
  take_set.push_back(C::kExport);
  const std::vector<std::pair<std::string, std::vector<C>>> flag_users = {
      {"--config", read_a_config},
      {"--plugin-dir", read_a_config},
      {"--set", take_set},
      {"--deepspeed", job},
      {"--deepspeed-lenient", job},
      {"--nproc", job},
      // ab's arms and tune's trials start fresh (checkpoint.resume ""); they restart their
      // ranks as a training job does.
      {"--resume", {C::kRun}},
      {"--max-restarts", {C::kRun, C::kAb, C::kTune}},
      // ab, tune and estimate run or size jobs of their own: --print-config started them.
      {"--print-config", {C::kRun, C::kEval, C::kSample}},
  };
  for (const std::string& flag : given) {
    for (const auto& [name, commands] : flag_users) {
      if (name != flag ||
          std::find(commands.begin(), commands.end(), out.command) != commands.end())
        continue;
      throw ConfigError(command_words(out.command) + " does not take " + flag +
                        (flag == "--print-config" && out.command != C::kRun
                             ? " (trainer --config FILE --print-config prints a job's config)"
                             : std::string()) +
                        "; see " + command_words(out.command) + " --help");
    }
  }
  // Commands that read one key of a config take --set of that key alone.
  const bool exporting = out.command == C::kExport;
  if (exporting || out.command == C::kPluginsList || out.command == C::kPluginsDescribe) {
    const std::string only = exporting ? "launch.timeout_s=" : "plugins.dirs=";
    for (const std::string& kv : out.overrides) {
      if (kv.rfind(only, 0) == 0) continue;
      throw ConfigError(command_words(out.command) + " takes only --set " + only +
                        (exporting ? "S (the bound on each checkpoint read)"
                                   : "[...] (where to look for plugins)") +
                        ": --set " + kv + " has nothing to set");
    }
  }
}

void check_complete(const CliArgs& out) {
  if (out.command == Command::kPrepareData &&
      (out.prepare.inputs.empty() || out.prepare.out_prefix.empty())) {
    throw ConfigError(
        "trainer prepare-data needs the text to read (files, folders, .jsonl) and "
        "--out PREFIX: trainer prepare-data data/ --out data/corpus --tokenizer gpt2; "
        "see trainer prepare-data --help");
  }
  if ((out.command == Command::kEstimate || out.command == Command::kTune) &&
      out.config_path.empty()) {
    throw ConfigError(std::string("trainer ") +
                      (out.command == Command::kTune ? "tune" : "estimate") +
                      " needs --config FILE, the job to size; see trainer --help");
  }
  if (out.command == Command::kAb && (out.ab.a.empty() && out.ab.b.empty())) {
    throw ConfigError("trainer ab needs --a or --b, the overrides of an arm (e.g. --a "
                      "plugins.shard=shard_tensor --b plugins.shard=shard_bucket; an arm not "
                      "given runs the config as written); see trainer ab --help");
  }
  if (out.command == Command::kAb && out.config_path.empty()) {
    throw ConfigError("trainer ab needs --config FILE, the job to compare the arms on");
  }
  if (out.command == Command::kAbReport && out.compare_runs.size() != 1) {
    throw ConfigError("trainer ab-report needs the run.out_dir of a live A/B job: trainer "
                      "ab-report RUN_DIR; see trainer --help");
  }
  if (out.command == Command::kCompare && out.compare_runs.size() != 2) {
    throw ConfigError("trainer compare needs two run folders (their run.out_dir): trainer "
                      "compare RUN_A RUN_B; see trainer --help");
  }
  const bool one_run = out.command == Command::kTraceMerge || out.command == Command::kReport ||
                       out.command == Command::kFlight;
  if (one_run && out.compare_runs.size() != 1) {
    throw ConfigError("this command needs one run folder (a run.out_dir), e.g. trainer report "
                      "runs/gpt-zero3; see trainer --help");
  }
  if (out.command == Command::kExport && (out.checkpoint.empty() || out.out_path.empty())) {
    throw ConfigError(
        "trainer export needs --checkpoint DIR and --out FILE.safetensors; see trainer --help");
  }
  if ((out.command == Command::kEval || out.command == Command::kSample) &&
      out.checkpoint.empty()) {
    throw ConfigError(std::string("trainer ") +
                      (out.command == Command::kEval ? "eval" : "sample") +
                      " needs --checkpoint DIR (a step-N folder, checkpoint.dir for its latest, "
                      "or checkpoint.dir/best); see trainer --help");
  }
  const bool from_checkpoint = (out.command == Command::kEval || out.command == Command::kSample) &&
                               out.config_path.empty();
  const auto deepspeed = std::find_if(out.overrides.begin(), out.overrides.end(),
                                      [](const std::string& kv) {
    return kv.rfind("run.deepspeed=", 0) == 0 || kv.rfind("run.deepspeed_lenient=", 0) == 0;
  });
  if (from_checkpoint && deepspeed != out.overrides.end()) {
    // Without --config the checkpoint's own config is loaded, DeepSpeed's settings in it as it
    // was saved; a JSON given beside it was never read.
    throw ConfigError(command_words(out.command) +
                      " without --config loads the config the "
                      "checkpoint was saved with (its DeepSpeed settings included), and reads "
                      "no DeepSpeed JSON: give --config FILE with --deepspeed, or neither");
  }
  if (out.command == Command::kRun && out.config_path.empty()) {
    throw ConfigError("no config given: trainer --config FILE (e.g. configs/smoke.toml); see "
                      "trainer --help");
  }
}

// Flags whose second value replaced the first without a word where a second one means more
// than one, or another thing: `--config a.toml --config b.toml` trained on b alone (not both,
// layered), `sample --prompt A --prompt B` sampled B alone, and a restart rewrote only the first
// --resume. The other single-valued flags take their last value, as getopt's do (a wrapper's
// default followed by an override); --set, --plugin-dir, --candidate and --exclude add up.
bool given_once(const std::string& flag) {
  return flag == "--config" || flag == "-c" || flag == "--checkpoint" || flag == "--resume" ||
         flag == "--deepspeed" || flag == "--prompt" || flag == "--tokens";
}

// Flags whose value names a file or folder: an empty one fell back to a default, or failed
// later as an I/O error (exit 5) rather than a usage error.
bool names_a_path(const std::string& flag) {
  return flag == "--config" || flag == "-c" || flag == "--out" || flag == "--checkpoint" ||
         flag == "--deepspeed" || flag == "--plugin-dir" || flag == "--tokenizer-dir";
}

// An argument after `--`: a run folder or one of prepare-data's inputs, whose name may start
// with '-'.
void take_positional(const std::string& a, CliArgs& out) {
  switch (out.command) {
    case Command::kPrepareData: out.prepare.inputs.push_back(a); return;
    case Command::kCompare:
    case Command::kAbReport:
    case Command::kTraceMerge:
    case Command::kReport:
    case Command::kFlight: out.compare_runs.push_back(a); return;
    default:
      throw ConfigError("'" + a + "' after --: " + command_words(out.command) +
                        " takes no positional arguments; see " + command_words(out.command) +
                        " --help");
  }
}

using ValueOf = std::function<std::string(const std::string& flag)>;

// One argument into `out`: a flag, its value taken through `value_of`, or a run folder or input.
// `job_flags` collects the shared job flags given, by their names.
void parse_argument(const std::string& a, const ValueOf& value_of, CliArgs& out,
                    std::vector<std::string>& job_flags) {
  const std::function<std::string()> value = [&] { return value_of(a); };
  if (parse_export_flag(a, value, out) || parse_ab_flag(a, value, out) ||
      parse_sample_flag(a, value, out) || parse_tune_flag(a, value, out) ||
      parse_prepare_flag(a, value, out))
    return;
  if (a == "--help" || a == "-h") {
    out.help = true;
  } else if (a == "--version") {
    out.command = Command::kVersion;
  } else if (a == "--config" || a == "-c") {
    out.config_path = value_of(a);
    job_flags.push_back("--config");
  } else if (a == "--set") {
    out.overrides.push_back(value_of(a));
    job_flags.push_back(a);
  } else if (a == "--resume") {
    job_flags.push_back(a);
    // Quoted: a folder named 2024 or 1e5 is a path, not a number.
    out.overrides.push_back("checkpoint.resume=" + value_to_toml(Value(value_of(a))));
  } else if (a == "--max-restarts") {
    job_flags.push_back(a);
    // Checked here: the config's own check named a `--set launch.max_restarts=` never typed.
    out.overrides.push_back("launch.max_restarts=" +
                            std::to_string(parse_count(a, value_of(a), 0, 1000000)));
  } else if (a == "--deepspeed") {
    job_flags.push_back(a);
    out.overrides.push_back("run.deepspeed=" + value_to_toml(Value(value_of(a))));
  } else if (a == "--deepspeed-lenient") {
    job_flags.push_back(a);
    out.overrides.push_back("run.deepspeed_lenient=true");
  } else if (a == "--print-config") {
    job_flags.push_back(a);
    out.print_config = true;
  } else if (a == "--plugin-dir") {
    job_flags.push_back(a);
    out.plugin_dirs.push_back(value_of(a));
  } else if (a == "--nproc") {
    job_flags.push_back(a);
    out.nproc = parse_nproc(value_of(a));
  } else if ((out.command == Command::kCompare || out.command == Command::kAbReport ||
              out.command == Command::kTraceMerge || out.command == Command::kReport ||
              out.command == Command::kFlight) &&
             a.rfind("-", 0) != 0) {
    out.compare_runs.push_back(a);
  } else if (a == "--out" &&
             (out.command == Command::kTraceMerge || out.command == Command::kReport)) {
    out.out_path = value_of(a);
  } else {
    throw ConfigError(
        "unknown argument '" + a + "'; see trainer --help" +
        (a.rfind("-", 0) == 0 ? std::string() : " (after -- an argument is taken as a file)"));
  }
}

// `trainer help [CMD...]` and `trainer --help CMD...` (git's and cargo's forms) as
// `trainer CMD... --help`, the one form the parser knows.
std::vector<std::string> help_as_flag(const std::vector<std::string>& args) {
  const bool asks = !args.empty() && (args[0] == "help" || args[0] == "--help" || args[0] == "-h");
  if (!asks || args.size() < 2 || args[1].rfind("-", 0) == 0) {
    // `trainer help` alone is the overview; `trainer help --config F` training's help, as
    // `trainer --help --config F` is.
    std::vector<std::string> same = args;
    if (asks) same[0] = "--help";
    return same;
  }
  static const std::set<std::string> kCommands = {
      "eval",     "sample", "prepare-data", "export", "ab",     "compare", "ab-report",
      "estimate", "tune",   "report",       "trace",  "flight", "plugins"};
  if (!kCommands.count(args[1])) {
    throw ConfigError("trainer help " + args[1] +
                      ": no such command; trainer --help lists the commands");
  }
  std::vector<std::string> rewritten(args.begin() + 1, args.end());
  rewritten.push_back("--help");
  return rewritten;
}

}  // namespace

CliArgs parse_cli(const std::vector<std::string>& given_args) {
  const std::vector<std::string> args = help_as_flag(given_args);
  CliArgs out;
  size_t i = parse_subcommand(args, out);
  out.subcommand = i > 0;
  // `--flag=value`, as getopt_long takes it: the value after '=', taken by the flag's parser.
  std::optional<std::string> inline_value;
  std::map<std::string, std::string> values;  // the given_once() flags' values
  const ValueOf value_of = [&](const std::string& flag) {
    std::string v;
    if (inline_value) {
      v = *inline_value;
      inline_value.reset();
    } else {
      if (i + 1 >= args.size()) throw ConfigError(flag + " needs a value; see trainer --help");
      v = args[++i];
    }
    if (v.empty() && names_a_path(flag)) {
      throw ConfigError(flag + " \"\": expected a path; see trainer --help");
    }
    if (given_once(flag)) {
      const auto [first, fresh] = values.emplace(flag == "-c" ? "--config" : flag, v);
      if (!fresh) {
        throw ConfigError(flag + " given twice (" + first->second + ", then " + v +
                          "): it takes one; give it once");
      }
    }
    return v;
  };
  std::vector<std::string> job_flags;  // the shared job flags given, by their names
  std::set<std::string> given;         // every flag given, by its name
  for (bool positional_only = false; i < args.size(); ++i) {
    if (positional_only) {
      take_positional(args[i], out);
      continue;
    }
    if (args[i] == "--") {
      positional_only = true;
      continue;
    }
    std::string a = args[i];
    inline_value.reset();
    if (a.rfind("--", 0) == 0 && a.find('=') != std::string::npos) {
      inline_value = a.substr(a.find('=') + 1);
      a.erase(a.find('='));
    }
    given.insert(a);
    parse_argument(a, value_of, out, job_flags);
    if (inline_value) throw ConfigError(args[i] + ": " + a + " takes no value; see trainer --help");
  }
  if (given.count("--rtol") && given.count("--allow-different-math")) {
    // The runs compute different math, so no loss is checked: --rtol read as a check that ran.
    throw ConfigError("--rtol with --allow-different-math: no loss is checked between runs of "
                      "different math; give one or the other");
  }
  // A flag the command does not take is refused with --help too, as an unknown one is: a
  // command line checked by its --help (the docs' test does) is then checked whole.
  if (out.command != Command::kVersion) check_job_flags(out, job_flags);
  if (out.help) return out;  // what the command needs besides is its help's to say
  check_complete(out);
  out.sample.checkpoint = out.checkpoint;
  out.sample.out_path = out.out_path;
  return out;
}

}  // namespace zt::trainer
