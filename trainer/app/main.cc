// trainer: the zt command-line front end. Turns every zt::Error into one clear line and the
// error's exit code (see trainer --help).
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <c10/util/Exception.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <new>

#include "app/ab_command.h"
#include "app/cli.h"
#include "app/estimate_command.h"
#include "app/export_command.h"
#include "app/help.h"
#include "app/job.h"
#include "app/observe_command.h"
#include "app/plugins_command.h"
#include "app/prepare_data_command.h"
#include "app/tune_command.h"
#include "run/stop_signals.h"
#include "settings/deepspeed_config.h"
#include "settings/job_config.h"
#include "settings/job_settings.h"
#include "zt/error.h"
#include "zt/host/config.h"
#include "zt/host/file_io_deadline.h"
#include "zt/host/flight_recorder.h"
#include "zt/host/plugin_loader.h"
#include "zt/host/process_exit.h"
#include "zt/host/rendezvous.h"
#include "zt/host/standard_streams.h"
#include "zt/host_memory.h"

namespace {

std::string rank_prefix() {
  try {
    zt::RankEnv env = zt::discover_rank_env();
    if (env.found && env.world > 1) return "[rank " + std::to_string(env.rank) + "] ";
  } catch (const zt::Error&) {
  }
  return "";
}

// Whether what this command prints on standard output is its result (estimate --json,
// --print-config, sample's texts, a help), not a log beside its results (training, eval, ab,
// tune, prepare-data, and the commands that write a file: export, trace merge, report): a result
// cut short is an error, a log cut short is not the job's failure.
bool output_is_the_result = false;

int run(const std::vector<std::string>& argv) {
  using zt::trainer::Command;
  std::vector<std::string> args(argv.begin() + 1, argv.end());
  zt::trainer::CliArgs cli = zt::trainer::parse_cli(args);
  const Command c = cli.command;
  output_is_the_result = cli.help || cli.print_config ||
                         (c == Command::kSample && cli.out_path.empty()) ||
                         !(c == Command::kRun || c == Command::kEval || c == Command::kSample ||
                           c == Command::kAb || c == Command::kTune || c == Command::kPrepareData ||
                           c == Command::kExport || c == Command::kTraceMerge ||
                           c == Command::kReport);
  if (cli.help) {
    // A job's flags with --help ask for training's own (`trainer --config FILE --help`).
    const bool training = !cli.config_path.empty() || !cli.overrides.empty() || cli.nproc;
    std::cout << (cli.subcommand || training ? zt::trainer::command_help(cli.command)
                                             : zt::trainer::overview());
    return 0;
  }
  // Their arms and candidates select plugins the job as written does not: its tables of those are
  // theirs, not unused (settings/job_config.h).
  if (cli.command == Command::kAb || cli.command == Command::kTune ||
      cli.command == Command::kEstimate)
    setenv(zt::trainer::kJobHasArmsVariable, "1", 1);
  switch (cli.command) {
    case Command::kVersion:
      std::cout << "zt trainer 0.1.0 (" << zt::core_build_fingerprint() << ")\n";
      return 0;
    case Command::kPluginsList: {
      zt::PluginCatalog catalog(zt::trainer::plugin_search_dirs(cli));
      return zt::trainer::list_plugins(catalog, std::cout);
    }
    case Command::kPluginsDescribe: {
      zt::PluginCatalog catalog(zt::trainer::plugin_search_dirs(cli));
      return zt::trainer::describe_plugin(catalog, cli.plugin_id, std::cout);
    }
    case Command::kExport: return zt::trainer::export_weights(cli, std::cout);
    case Command::kAb: return zt::trainer::run_ab(cli, std::cout);
    case Command::kCompare: return zt::trainer::run_compare(cli, std::cout);
    case Command::kAbReport: return zt::trainer::run_ab_report(cli, std::cout);
    case Command::kTraceMerge: return zt::trainer::run_trace_merge(cli, std::cout);
    case Command::kFlight: return zt::trainer::run_flight(cli, std::cout);
    case Command::kReport: return zt::trainer::run_report(cli, std::cout);
    case Command::kEstimate: return zt::trainer::run_estimate(cli, std::cout);
    case Command::kTune: return zt::trainer::run_tune(cli, std::cout);
    case Command::kPrepareData: return zt::trainer::run_prepare_data(cli, std::cout);
    case Command::kRun:
    case Command::kEval:
    case Command::kSample: break;
  }
  std::vector<std::string> overrides = zt::trainer::job_overrides(cli);
  // eval and sample without --config run under the config the checkpoint was saved with.
  const bool from_checkpoint = cli.config_path.empty() &&
                               (cli.command == Command::kEval || cli.command == Command::kSample);
  zt::Config config = from_checkpoint
                          ? zt::trainer::load_checkpoint_config(cli.checkpoint, overrides)
                          : zt::trainer::load_job_config(cli.config_path, overrides);
  if (cli.print_config) {
    std::cout << config.to_toml();
    return 0;
  }
  // The door: the config becomes the job's settings once, and everything below takes those.
  const zt::trainer::JobSettings job = zt::trainer::JobSettings::of(config);
  return zt::trainer::run_job(job, config.catalog(), cli, argv);
}

// One write(2) of the whole message: ranks of one job share a terminal (torchrun, mpirun, srun)
// or a pipe (zt's launcher), and separate writes of its pieces interleave with theirs.
void print_line(const std::string& line) {
  zt::write_all_to(STDERR_FILENO, "zt: " + rank_prefix() + line + "\n");
}

// `text` with its line breaks as spaces: an error is one line.
std::string one_line(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  for (char& c : text) {
    if (c == '\n') c = ' ';
  }
  return text;
}

void print_error(const std::string& kind, const std::string& message) {
  print_line(kind + " error: " + message);
}

// Memory refused by the OS (std::bad_alloc, LibTorch's allocator) is the environment's, as the
// error family says, not a bug to report: the memory-fit check's estimate left out some of the
// rank's use, or another process took it meanwhile.
constexpr const char* kOutOfMemoryWayOut =
    "; free memory, lower data.micro_batch or offload more (plugins.offload_optimizer, "
    "plugins.offload_param), and see what a rank needs with trainer estimate";

bool is_out_of_memory(const std::string& what) {
  return what.find("can't allocate memory") != std::string::npos ||
         what.find("out of memory") != std::string::npos;
}

// An exception no zt code expected: a bug, with what to send.
int report_internal(const std::string& what) {
  zt::FlightRecorder::instance().dump_failure("internal error: " + what);
  print_error("internal",
              one_line(what) + " (please report this with the command line and config)");
  return static_cast<int>(zt::ErrorKind::kInternal);
}

int report_out_of_memory(const std::string& what) {
  zt::FlightRecorder::instance().dump_failure("io error: " + what);
  print_error("io", "out of memory: " + one_line(what) + kOutOfMemoryWayOut);
  return static_cast<int>(zt::ErrorKind::kIo);
}

// Whether the reader of a pipe or socket on standard output has gone (`| head` took what it
// wanted): glibc drops what it could not write, so the exit's own flush reports nothing then.
bool reader_gone() {
  struct stat st {};
  if (::fstat(STDOUT_FILENO, &st) != 0 || !(S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode)))
    return false;
  // A pipe without a reader polls POLLERR; a socket whose peer closed, POLLHUP.
  pollfd out{STDOUT_FILENO, POLLOUT, 0};
  return ::poll(&out, 1, 0) == 1 && (out.revents & (POLLERR | POLLHUP)) != 0;
}

// What a command printed as its result (output_is_the_result): one the disk or quota cut short
// is an I/O error, not a success with half a file. A reader that closed the pipe early took what
// it wanted: not an error.
int check_standard_output(int code) {
  if (!output_is_the_result) return code;
  std::cout.flush();
  errno = 0;
  const bool flushed = std::fflush(stdout) == 0;
  const int error = errno;
  if ((flushed && !std::ferror(stdout) && !std::cout.fail()) || error == EPIPE || reader_gone())
    return code;
  print_error("io", std::string("cannot write standard output (") +
                        (error ? std::strerror(error) : "a write failed: a full disk or quota?") +
                        "): what this command printed is incomplete; give it a file or pipe "
                        "with room");
  return code == 0 ? static_cast<int>(zt::ErrorKind::kIo) : code;
}

}  // namespace

int main(int argc, char** argv) {
  // Before anything allocates: measured here, glibc's own moving thresholds left a 24-layer
  // MLP's construction 380 MiB per rank resident (zt/host_memory.h says why).
  zt::configure_host_allocator();
  std::vector<std::string> args(argv, argv + argc);
  int code = 0;
  try {
    zt::keep_standard_streams_open();
    // A file operation past its deadline ends the rank with a line like the errors below.
    zt::set_file_io_line_start([] { return "zt: " + rank_prefix(); });
    code = run(args);
  } catch (const zt::trainer::StoppedBySignal& e) {
    // Asked to stop, by the user or a scheduler: no error, and no flight record.
    print_line(e.what());
    code = 128 + e.signal();
  } catch (const zt::Error& e) {
    print_error(e.kind_name(), e.what());
    // A rank of a training job leaves its last collectives (flight_recorder.h) for the diagnosis.
    zt::FlightRecorder::instance().dump_failure(std::string(e.kind_name()) + " error: " + e.what());
    code = e.exit_code();
  } catch (const std::filesystem::filesystem_error& e) {
    // A file operation no zt code expected to fail (permissions, a file system gone): the
    // environment's, named by its path, not a bug of zt's.
    zt::FlightRecorder::instance().dump_failure(std::string("io error: ") + e.what());
    print_error("io", std::string(e.what()) + "; check that path and its permissions");
    code = static_cast<int>(zt::ErrorKind::kIo);
  } catch (const std::bad_alloc& e) {
    // std::bad_array_new_length is a size computed wrong (negative, overflowing): a bug.
    code = dynamic_cast<const std::bad_array_new_length*>(&e) != nullptr
               ? report_internal(e.what())
               : report_out_of_memory(std::string("an allocation was refused (") + e.what() + ")");
  } catch (const std::exception& e) {
    // LibTorch's errors carry a C++ backtrace after their message: the message alone, on one
    // line (the launcher names a failed rank by its last line).
    const auto* torch_error = dynamic_cast<const c10::Error*>(&e);
    const std::string what = torch_error ? torch_error->what_without_backtrace() : e.what();
    code = torch_error && is_out_of_memory(what) ? report_out_of_memory(what)
                                                 : report_internal(what);
  } catch (...) {
    code = report_internal("an exception of no known type");
  }
  code = check_standard_output(code);
  // Everything of the job is closed by now; LibTorch's teardown would only cost time (a forked
  // rank's most of all: zt/host/process_exit.h).
  zt::exit_without_library_teardown(code);
}
