#include "app/job.h"
#include "settings/job_settings.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>

#include "ab/switch_folder.h"
#include "run/checkpointing.h"
#include "run/eval_task.h"
#include "run/sample_task.h"
#include "run/smoke_task.h"
#include "run/stop_signals.h"
#include "run/train_task.h"
#include "settings/job_config.h"
#include "settings/trainer_config.h"
#include "setup/memory_fit.h"
#include "zt/error.h"
#include "zt/host/blas.h"
#include "zt/host/checkpoint.h"
#include "zt/host/compose.h"
#include "zt/host/file_io_deadline.h"
#include "zt/host/flight_diagnosis.h"
#include "zt/host/flight_recorder.h"
#include "zt/host/launcher.h"
#include "zt/host/rendezvous.h"
#include "zt/host_memory.h"

namespace zt::trainer {

namespace {

// The last line of a failed job names the rank that failed first, how, and its own error, so
// the cause is not lost among the other ranks' lines (forwarded above it).
void print_failure(const LaunchResult& result) {
  std::string line = "zt: error: " + result.message;
  std::string cause = result.error_line;
  // The rank's line is "zt: [rank N] <kind> error: ...": the rank is named already.
  const std::string own = "zt: [rank " + std::to_string(result.failed_rank) + "] ";
  if (cause.rfind(own, 0) == 0) cause.erase(0, own.size());
  // The ranks of an evaluation or a sample stopped as the launcher's signal asked, each saying
  // so: no error to add.
  if (result.launcher_signal != 0 && cause.rfind(kStoppedByPrefix, 0) == 0) return;
  if (!cause.empty())
    line += "; rank " + std::to_string(result.failed_rank) + " reported: " + cause;
  std::cerr << line + "\n";
}

// A single process loaded OpenBLAS and glibc before it could choose OpenBLAS's core and glibc's
// tunables, so it starts itself again with them in its environment (as spawned ranks get them;
// huge_page_restart.cc says why the tunable). Returns only if nothing changes or the exec failed
// (then it runs on as it is; the run header's BLAS and allocator lines say how to fix it).
void restart_with_rank_env(const std::vector<std::string>& argv) {
  auto vars = blas_env_for_children(probe_blas());
  const std::string tunables = glibc_tunables(environ);
  if (!glibc_tunables_name_hugetlb(tunables.c_str())) {
    vars.push_back({"GLIBC_TUNABLES", glibc_tunables_for_training(tunables)});
  }
  if (vars.empty()) return;
  vars.push_back({kConfigSpokenVariable, "1"});
  std::vector<std::pair<std::string, std::optional<std::string>>> before;
  for (const auto& [name, value] : vars) {
    const char* old = std::getenv(name.c_str());
    before.push_back({name, old ? std::optional<std::string>(old) : std::nullopt});
    setenv(name.c_str(), value.c_str(), 1);
  }
  std::vector<std::string> args = argv;
  args[0] = self_executable();
  std::vector<char*> c_args;
  for (auto& a : args) c_args.push_back(a.data());
  c_args.push_back(nullptr);
  std::cout.flush();
  std::fflush(nullptr);
  execv(c_args[0], c_args.data());
  for (const auto& [name, old] : before) {
    if (old) setenv(name.c_str(), old->c_str(), 1);
    else unsetenv(name.c_str());
  }
}

// The last optimizer step rank 0 recorded in <run.out_dir>/metrics.jsonl (0 when none): how far
// a failed attempt got.
int64_t last_recorded_step(const JobSettings& job) {
  std::ifstream in(job.run.out_dir + "/metrics.jsonl");
  int64_t last = 0;
  const std::string key = "{\"step\":";
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(key, 0) == 0) last = std::atoll(line.c_str() + key.size());
  }
  return last;
}

// A stop signal while no ranks run, between restart attempts: launch_local's handlers are in
// place only while it supervises ranks, and in between (the flight diagnosis, removing offload
// leftovers, the checkpoint lookups) SIGINT, SIGTERM or SIGUSR1 (Slurm's warning) ended the
// launcher by its default action, without a word and with offload files half removed. Held for
// the whole restart loop (launch_local puts this handler back when it ends) and read before each
// start and restart: the job then stops instead of starting (again).
std::atomic<int> g_signal_between_attempts{0};

void note_signal_between_attempts(int sig) {
  int none = 0;
  g_signal_between_attempts.compare_exchange_strong(none, sig);
}

class SignalsBetweenAttempts {
 public:
  SignalsBetweenAttempts() {
    g_signal_between_attempts.store(0);
    struct sigaction sa {};
    sa.sa_handler = note_signal_between_attempts;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < kSignals.size(); ++i) sigaction(kSignals[i], &sa, &old_[i]);
  }
  ~SignalsBetweenAttempts() {
    for (size_t i = 0; i < kSignals.size(); ++i) sigaction(kSignals[i], &old_[i], nullptr);
  }
  SignalsBetweenAttempts(const SignalsBetweenAttempts&) = delete;
  SignalsBetweenAttempts& operator=(const SignalsBetweenAttempts&) = delete;

  // The first stop signal since the loop began, 0 if none.
  int pending() const { return g_signal_between_attempts.load(); }

 private:
  static constexpr std::array<int, 3> kSignals = {SIGINT, SIGTERM, SIGUSR1};
  std::array<struct sigaction, 3> old_{};
};

// argv with `--resume <from>` (once, replacing one given): "auto" for a restarted job, which
// continues from its newest checkpoint; "" for a restarted live A/B job, which starts again from
// the beginning, also when its first start was given --resume auto (its checkpoints now exist,
// and a live A/B job cannot resume from them).
std::vector<std::string> with_resume(std::vector<std::string> argv, const std::string& from) {
  for (size_t i = 0; i < argv.size(); ++i) {
    if (argv[i] == "--resume" && i + 1 < argv.size()) {
      argv[i + 1] = from;
      return argv;
    }
    if (argv[i].rfind("--resume=", 0) == 0) {
      argv[i] = "--resume=" + from;
      return argv;
    }
    if (argv[i] == "--") {  // what follows is no flag: the new one goes before it
      argv.insert(argv.begin() + static_cast<std::ptrdiff_t>(i), {"--resume", from});
      return argv;
    }
  }
  argv.push_back("--resume");
  argv.push_back(from);
  return argv;
}

// The newest checkpoint of a folder and when its manifest was written: a restart resumes from
// it only when this job saved it. One an earlier run left there (the same out_dir, a shared
// checkpoint.dir) is not this job's progress: resuming from it trained on from another run's
// state, or ended at once with "nothing left to train".
struct CheckpointMark {
  std::string folder;
  std::filesystem::file_time_type written{};
  bool operator==(const CheckpointMark& o) const {
    return folder == o.folder && written == o.written;
  }
};

CheckpointMark newest_checkpoint(const std::string& dir) {
  CheckpointMark mark{latest_checkpoint(dir), {}};
  std::error_code ec;
  if (!mark.folder.empty())
    mark.written = std::filesystem::last_write_time(mark.folder + "/manifest.json", ec);
  return mark;
}

// A live A/B job's last switch left its model states in ab.switch_dir; a good end or a failure
// that unwound removed them, a rank killed outright (SIGKILL, the OOM killer) did not, and on
// /dev/shm they held memory until another job used that folder. Once every rank is reaped they
// go, unless another job holds the folder (its lock): that job's states stay, and so does a folder
// no live A/B job marked as its own (switch_folder.h).
void remove_left_switch_states(const std::string& switch_dir) {
  // Unmarked (or not there), taking the lock would leave a lock file or make the folder.
  if (!is_switch_folder(switch_dir)) return;
  try {
    const CheckpointDirLock held(switch_dir);
    // The saves, its lock, and the folder once empty.
    for (const std::string& folder : remove_switch_states(switch_dir)) {
      std::cerr << "zt: removed " << folder << ", model states the stopped live A/B job left\n";
    }
  } catch (const Error&) {  // another job's folder, or one this launcher cannot lock: left
  }
}

int launch_attempt(const JobSettings& job, int nproc, const std::vector<std::string>& argv,
                   bool training, LaunchResult& result) {
  const LaunchSettings& launch = job.engine.launch;
  LaunchSpec spec;
  spec.nproc = nproc;
  spec.argv = argv;
  spec.argv[0] = self_executable();
  spec.fork_ranks = true;  // the trainer itself: LibTorch loads once, not once per rank
  spec.master_addr = launch.master_addr;
  spec.master_port = launch.master_port;
  // MASTER_ADDR/MASTER_PORT exported to the launcher win over the config, as they do for ranks
  // that torchrun or srun start (and as the "port in use" error advises); read and checked as
  // those ranks read them, but only where exported (not derived from a Slurm job).
  const RankEnv exported = discover_rank_env([](const char* name) -> const char* {
    const std::string n = name;
    return n == "MASTER_ADDR" || n == "MASTER_PORT" ? std::getenv(name) : nullptr;
  });
  if (!exported.master_addr.empty()) spec.master_addr = exported.master_addr;
  if (exported.master_port > 0) spec.master_port = exported.master_port;
  // A signal to the launcher reaches the ranks, which finish their step and save: as long as a
  // step, the save already being written and the stop's own save may take, each bounded by its
  // own limit (a save's waits by checkpoint.timeout_s, the rest by launch.timeout_s).
  spec.drain = 3 * launch.timeout + 2 * job.checkpoint.timeout;
  spec.drain_limit = "3 x launch.timeout_s + 2 x checkpoint.timeout_s";
  const std::string job_id = draw_job_id();
  spec.env.push_back({"ZT_JOB_ID", job_id});
  // OpenBLAS reads its core type when it loads, glibc its tunables when a process starts: the
  // ranks' environment is the place to fix them.
  for (const auto& var : blas_env_for_children(probe_blas())) spec.env.push_back(var);
  spec.env.push_back({"GLIBC_TUNABLES", glibc_tunables_for_training(glibc_tunables(environ))});
  // A rank that fails makes the others write their flight records (SIGUSR2) where they wait, and
  // SIGUSR2 to the launcher (kill -USR2 <trainer's pid>) makes every rank write its own.
  spec.record_signal = SIGUSR2;
  // Only training ranks keep flight records. An evaluation's or a sample's out_dir is most often
  // the training run's, whose records (a hang being looked into) stay.
  const std::string flight_dir = job.run.out_dir + "/flight";
  std::error_code ec;
  if (training) std::filesystem::remove_all(flight_dir, ec);  // an earlier job's would mislead
  // A live A/B arm may keep its tiers where the job's config does not (another offload plugin
  // or path): its ranks note every tier folder they make, for the clean-up below. Under trainer
  // tune or ab, which gave this launcher a notes folder of theirs, the ranks note there, and the
  // folder stays for its giver: a tune trial stopped at the budget's end may be killed with this
  // launcher (no clean-up here), and then tune, reading the folder, removes what they left.
  const char* given_notes = std::getenv("ZT_OFFLOAD_NOTES");
  const bool notes_given = given_notes != nullptr && *given_notes != '\0';
  const std::string own_notes = job.ab.arms.empty() || notes_given ? ""
                                                                   : make_offload_notes_folder();
  const std::string notes = notes_given ? given_notes : own_notes;
  if (!own_notes.empty()) spec.env.push_back({"ZT_OFFLOAD_NOTES", own_notes});
  // A stop signal while this launcher prepared them (launch_ranks holds it until launch_local's
  // own handlers take over): no rank starts.
  if (const int sig = g_signal_between_attempts.load()) {
    if (!own_notes.empty()) remove_noted_offload_folders(own_notes, job_id);
    result.launcher_signal = sig;
    result.exit_code = 128 + sig;
    std::cerr << "zt: " << strsignal(sig) << " came before the ranks started: the job stops\n";
    return result.exit_code;
  }
  try {
    result = launch_local(spec);
  } catch (...) {
    if (!own_notes.empty()) remove_noted_offload_folders(own_notes, job_id);  // no rank started
    throw;
  }
  // What the launcher reads and removes after the ranks ended lies on their storage, which may be
  // what stopped answering (an NVMe device that stalled them): waited for at most half
  // launch.timeout_s each (at least 10 s: removing a large tier's files takes a moment), so that
  // the job still ends with its ranks' verdict.
  const std::chrono::milliseconds after_limit = std::max<std::chrono::milliseconds>(
      checkpoint_io_limit(job.engine.launch.timeout), std::chrono::seconds(10));
  const double after_s = std::chrono::duration<double>(after_limit).count();
  if (result.exit_code != 0) {
    // Where the job hung or the ranks parted ways, above the failure line, which stays last.
    FlightDiagnosis diagnosis;
    if (training) {
      auto read = std::make_shared<FlightDiagnosis>();
      if (finished_within(after_limit, [read, flight_dir, nproc] {
            *read = diagnose_flight(flight_dir, nproc);
          })) {
        diagnosis = *read;
      } else {
        std::fprintf(stderr, "zt: flight record: not read: %s did not answer within %.0f s\n",
                     flight_dir.c_str(), after_s);
      }
    }
    if (diagnosis.found) {
      std::cerr << "zt: flight record: " << diagnosis.line
                << " (every rank's last collectives: " << flight_dir << "/rank-N.json)\n";
    }
    print_failure(result);
  }
  // Ranks remove their offload files as they exit; a rank that was killed could not.
  auto removed = std::make_shared<std::vector<std::string>>();
  if (!finished_within(after_limit, [removed, engine = job.engine, job_id, notes, notes_given] {
        *removed = remove_offload_leftovers(engine, job_id);
        if (!notes.empty()) {
          for (std::string& folder : remove_noted_offload_folders(notes, job_id, notes_given))
            removed->push_back(std::move(folder));
        }
      })) {
    std::fprintf(stderr,
                 "zt: offload files its stopped ranks left were not removed: their storage did "
                 "not answer within %.0f s; the next job on the same path removes them\n",
                 after_s);
    std::fflush(stderr);
    removed = std::make_shared<std::vector<std::string>>();  // the helper's own is still in use
  }
  const std::vector<std::string> left = *removed;
  for (const auto& folder : left) {
    std::cerr << "zt: removed offload files left by stopped ranks: " << folder << "\n";
  }
  // Only a live A/B training's: its ab.switch_dir was checked before launch (a folder that holds
  // checkpoint.dir or run.out_dir is refused); an evaluation or a smoke run switches nothing.
  if (training && job.run.task == "train" && !job.ab.arms.empty())
    remove_left_switch_states(job.ab.switch_dir);
  return result.exit_code;
}

// Runs the ranks; when one fails (a signal, an error exit, a hang past the timeout), starts all
// of them again, at most launch.max_restarts times: with --resume auto once the job saved a
// checkpoint, else as the job started (fresh, or from the checkpoint it was given). A job that
// fails again without recording a step further than the last attempt stops with that failure:
// restarting cannot get past it.
int launch_ranks(const JobSettings& job, int nproc, const std::vector<std::string>& argv) {
  const int64_t max_restarts = job.engine.launch.max_restarts;
  const std::string& ckpt_dir = job.checkpoint.dir;
  const CheckpointMark at_start = newest_checkpoint(ckpt_dir);
  int64_t failed_at = -1;
  std::vector<std::string> args = argv;
  const SignalsBetweenAttempts held;
  for (int64_t restart = 0;; ++restart) {
    LaunchResult result;
    const int code = launch_attempt(job, nproc, args, /*training=*/true, result);
    // The launcher's own SIGINT/SIGTERM stops the job: no restart, also when a rank had failed
    // just before it came.
    // A config error (exit 2: a rank refused the config, or another job holds checkpoint.dir) is
    // the same at every start; a restart would only repeat it (or, the other job done by then,
    // train on from its checkpoints).
    if (code == 0 || restart >= max_restarts || result.failed_rank < 0 ||
        result.launcher_signal != 0 || code == 2) {
      if (code != 0 && max_restarts > 0 && restart >= max_restarts) {
        std::cerr << "zt: error: gave up after " << restart
                  << " restart(s) (launch.max_restarts = " << max_restarts
                  << "); the last failure is above\n";
      }
      return code;
    }
    const int64_t step = last_recorded_step(job);
    if (step == failed_at) {
      std::cerr << "zt: error: rank " << result.failed_rank << " failed again after step " << step
                << ", as before the last restart; restarting cannot get past it, so the job "
                   "stops with that failure (above)\n";
      return code;
    }
    failed_at = step;
    const CheckpointMark now = newest_checkpoint(ckpt_dir);
    const bool saved = !now.folder.empty() && !(now == at_start);
    const std::string& given = job.checkpoint.resume;  // --resume's, or the config's
    std::string how = result.message;  // "rank 1 (pid 42) was killed by ...; stopping the others"
    how.erase(std::min(how.size(), how.find("; stopping")));
    std::string from;
    const bool live_ab = !job.ab.arms.empty();
    if (live_ab) {
      from = "the beginning (a live A/B job, [ab] arms, cannot resume from a checkpoint)";
    } else if (saved) {
      from = "checkpoint " + now.folder;
    } else if (given == "auto" && !at_start.folder.empty()) {
      from = "checkpoint " + at_start.folder +
             ", as the job started (--resume auto; it saved none since)";
    } else if (given.empty() || given == "auto") {
      from = "the beginning (the job saved no checkpoint in " + ckpt_dir + " yet)";
    } else {
      from = "checkpoint.resume = " + given + ", as the job started (it saved no checkpoint yet)";
    }
    if (const int sig = held.pending()) {
      std::cerr << "zt: " << strsignal(sig) << " came while the launcher was restarting the "
                << "ranks: the job stops instead of starting again from " << from << " (" << how
                << " after step " << step << ")\n";
      return 128 + sig;
    }
    std::cerr << "zt: restart " << restart + 1 << "/" << max_restarts << ": " << how
              << " after step " << step << "; all ranks start again from " << from << "\n";
    args = live_ab ? with_resume(argv, "") : saved ? with_resume(argv, "auto") : argv;
  }
}

}  // namespace

Config load_checkpoint_config(const std::string& checkpoint,
                              const std::vector<std::string>& overrides) {
  // Bounded as a resume's reads are: the config that sets the bound is what is read here.
  const std::chrono::milliseconds timeout = launch_timeout_before_config(overrides);
  const std::unique_ptr<CheckpointReader> opened = open_checkpoint_within(checkpoint, timeout);
  const CheckpointReader& reader = *opened;
  const std::string& folder = reader.folder();
  if (reader.meta().config_toml.empty()) {
    throw ConfigError(folder + " records no config (it was not saved by the trainer); give the "
                               "job's config with --config FILE");
  }
  const std::string source = folder + "/manifest.json (the config it was saved with)";
  // A checkpoint may come from someone else: the folders its config names for plugins are not
  // searched, or a shared library shipped beside it would run here. --plugin-dir (or --set
  // plugins.dirs) names them; given, it comes after this and replaces it.
  std::vector<std::string> searched = {"plugins.dirs=[]"};
  searched.insert(searched.end(), overrides.begin(), overrides.end());
  const std::vector<std::string> given = Config::plugin_dirs_of_string("", "--set", searched);
  std::string unsearched;
  for (const std::string& dir : Config::plugin_dirs_of_string(reader.meta().config_toml, source)) {
    if (std::find(given.begin(), given.end(), dir) == given.end())
      unsearched += (unsearched.empty() ? "" : ", ") + dir;
  }
  if (!unsearched.empty()) {
    warn_about_config(source + " names plugin folders (plugins.dirs: " + unsearched +
                      ") that are not searched: a checkpoint does not choose where code is "
                      "loaded from; give them with --plugin-dir DIR if you trust them");
  }
  return load_config_string(reader.meta().config_toml, source, searched);
}

int run_job(const JobSettings& job, PluginCatalog& catalog, const CliArgs& args,
            const std::vector<std::string>& argv) {
  const RunSettings& run = job.run;
  const bool training = args.command == Command::kRun;
  RankEnv env = discover_rank_env();
  const int nproc = job.engine.launch.nproc;
  // A Slurm step of one task (`srun --pty bash`, `srun -n 1 trainer`) is no job of ranks: a
  // --nproc (or --set launch.nproc) above 1 on the command line there asks zt's launcher for
  // them, as in a batch script; the DeepSpeed batch rule counted them so (settings/job_config).
  // A config's launch.nproc does not: a GPU job of one task per GPU keeps its one rank.
  if (env.found && env.source == "slurm" && env.world == 1 && nproc > 1 &&
      (args.nproc || command_line_sets_nproc(args.overrides))) {
    std::fprintf(stderr,
                 "zt: a Slurm step of one task: zt's launcher starts the %d "
                 "ranks of launch.nproc here\n",
                 nproc);
    env.found = false;
  }
  // Another launcher started this process as one of its ranks: a --nproc (or a --set
  // launch.nproc on the command line) that is neither its ranks on this host (what --nproc
  // means) nor all of them was dropped without a word (torchrun --nproc_per_node 2 trainer
  // --nproc 4). A config's launch.nproc is no such request.
  const bool nproc_asked = args.nproc || command_line_sets_nproc(args.overrides);
  if (env.found && nproc_asked && nproc != env.world &&
      (env.local_world <= 0 || nproc != env.local_world)) {
    const std::string asked = args.nproc ? "--nproc" : "--set launch.nproc";
    throw ConfigError(
        (args.nproc ? "--nproc " : "--set launch.nproc=") + std::to_string(nproc) + ", but " +
        env.source + " started this process as rank " + std::to_string(env.rank) + " of " +
        std::to_string(env.world) +
        (env.local_world > 0 ? " (" + std::to_string(env.local_world) + " on this host)" : "") +
        ": its ranks are the job's; drop " + asked + ", or ask " + env.source + " for " +
        std::to_string(nproc) + " ranks per host");
  }
  // A single process is the rank itself, except where restarts are asked for: zt's launcher
  // then supervises its one rank as it does N (a lone rank that died was not started again).
  const bool supervised = !env.found &&
                          (nproc > 1 || (training && job.engine.launch.max_restarts > 0));
  if (!env.found && !supervised) restart_with_rank_env(argv);
  if (env.found && env.source != "zt launcher" && training && env.rank == 0 &&
      job.engine.launch.max_restarts > 0) {
    std::fprintf(stderr,
                 "zt: warning: launch.max_restarts = %lld is zt's launcher's, and %s started "
                 "these ranks: it restarts none of them; ask %s to start the job again (with "
                 "--resume auto)\n",
                 static_cast<long long>(job.engine.launch.max_restarts), env.source.c_str(),
                 env.source.c_str());
  }
  // Bad input to eval and sample fails here, once, before the ranks start (each rank checks it
  // again, as one that torchrun or srun started must; a single process is the rank itself).
  if (supervised && args.command == Command::kEval) check_eval_inputs(job);
  if (supervised && args.command == Command::kSample) plan_sample(job, catalog, args.sample);
  // Checked once, before any rank starts or allocates anything (a single process is about to
  // become the rank). Evaluating and sampling train nothing: only the model's states must fit
  // (not the global batch).
  if (run.task == "train" && !env.found) {
    const FitCheck before_ranks{true, false, !supervised};
    if (training) check_job_fits(job, catalog, nproc, before_ranks);
    else check_memory_fits(job, catalog, nproc, before_ranks);
  }
  if (supervised) {
    if (training) return launch_ranks(job, nproc, argv);
    LaunchResult result;  // a failed evaluation is not resumed: it has nothing to continue
    return launch_attempt(job, nproc, argv, /*training=*/false, result);
  }
  // A training rank catches the stop signals before it joins the others, not once its training
  // starts: the launcher forwards a SIGTERM to ranks it has just (re)started, and one that died of
  // it left its peers waiting in a collective (the chaos soak, tests/chaos, found that).
  if (training && run.task == "train") catch_stop_signals();
  // When a rank fails, the launcher sends the others SIGUSR2 (write your flight record): a rank
  // takes it from here on, whatever its task, rather than die of it before it prints its own
  // error (the peer's failure, as a collective saw it). Only a training rank has a record.
  dump_flight_record_on_sigusr2();
  JobStore joined = join_job_store(job.engine.launch, env);
  const std::chrono::milliseconds timeout = joined.timeout;
  std::unique_ptr<Store> store = std::move(joined.store);
  // An evaluation or a sample stops on them between its forwards, its tier files removed; caught
  // from here, where it has made nothing yet (a signal while this rank waited for the others
  // ended it; one that came to a peer still waiting ends that peer, and zt's launcher the rest).
  if (args.command == Command::kEval || args.command == Command::kSample) catch_stop_signals();
  int code = 0;
  if (args.command == Command::kEval) {
    code = run_eval(job, catalog, *store, env, timeout, args.checkpoint, args.out_path);
  } else if (args.command == Command::kSample) {
    code = run_sample(job, catalog, *store, env, timeout, args.sample);
  } else {
    code = run.task == "smoke" ? run_smoke(job, catalog, *store, env, timeout)
                               : run_train(job, catalog, *store, env, timeout);
  }
  depart(*store, env.rank, env.world, timeout);
  return code;
}

}  // namespace zt::trainer
