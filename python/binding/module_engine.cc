#include "python/binding/module_engine.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <iostream>
#include <optional>
#include <set>
#include <system_error>

#include "python/binding/leaving_ranks.h"
#include "run/checkpointing.h"
#include "run/loaded_model.h"
#include "settings/job_config.h"
#include "settings/trainer_config.h"
#include "zt/error.h"
#include "zt/host/checkpoint.h"
#include "zt/host/compose.h"
#include "zt/host/file_io_deadline.h"
#include "zt/host/rank_agreement.h"

namespace zt::python {

namespace {

// A unit as a parameter list: the module's own forward calls it, never the engine.
class ModuleUnit final : public Unit {
 public:
  explicit ModuleUnit(UnitParams params) : params_(std::move(params)) {}
  std::string name() const override { return params_.name; }
  at::Tensor forward(const at::Tensor&) override {
    throw InternalError("unit " + params_.name +
                        " runs inside its module's own forward (Engine::enter_unit), not as a "
                        "link of a chain");
  }
  std::vector<std::pair<std::string, at::Tensor>> parameters() override { return params_.params; }

 private:
  UnitParams params_;
};

// Rank 0's initial values on every rank, each distinct tensor once (a tied one is listed twice),
// through the communicator's device (comm_nccl's GPU) whatever the module's.
void broadcast_initial_values(Communicator& comm, const std::vector<UnitParams>& units) {
  const c10::NoGradGuard no_grad;
  std::set<const void*> seen;
  for (const UnitParams& u : units) {
    for (const auto& [name, tensor] : u.params) {
      if (!seen.insert(tensor.unsafeGetTensorImpl()).second) continue;
      at::Tensor flat = tensor.detach().contiguous();
      broadcast_host(comm, flat, 0);
      if (!flat.is_same(tensor)) tensor.detach().copy_(flat);
    }
  }
}

}  // namespace

PythonJob load_python_job(const std::string& path, const std::string& toml_text,
                          const std::vector<std::string>& overrides, const std::string& caller) {
  // The trainer's door: run.deepspeed's JSON is read here as by `trainer --config`.
  Config config = path.empty() ? trainer::load_job_config_string(
                                     toml_text, "the config dict given to " + caller, overrides)
                               : trainer::load_job_config(path, overrides);
  trainer::JobSettings settings = trainer::JobSettings::of(config);
  return {std::move(config), std::move(settings)};
}

struct JobConnection {
  RankEnv env;
  std::chrono::milliseconds timeout{0};
  std::shared_ptr<Store> store;
};

namespace {

// This process's engines begun so far, failed ones included: the next one's number.
int64_t next_engine_number() {
  static std::atomic<int64_t> begun{0};
  return begun++;
}

std::shared_ptr<JobConnection>& current_job() {
  static std::shared_ptr<JobConnection> job;
  return job;
}

// Collective: every rank learns whether any rank failed (`mine` on this one), so none goes on
// alone into what follows, where its collectives would meet a failed rank's next ones. Rethrows
// this rank's own failure; where only others failed, throws ConfigError(`elsewhere(rank)`), the
// highest rank that failed named (an IoError with `io`: what a retry may fix).
void fail_together(Communicator& comm, const std::exception_ptr& mine,
                   const std::function<std::string(int rank)>& elsewhere, bool io = false) {
  const int failed_rank = highest_failed_rank(comm, mine != nullptr);
  if (mine) std::rethrow_exception(mine);
  if (failed_rank < 0) return;
  if (io) throw IoError(elsewhere(failed_rank));
  throw ConfigError(elsewhere(failed_rank));
}

// The save folders this process's open engines hold (rank 0's CheckpointDirLock each).
std::set<std::string>& held_save_folders() {
  static std::set<std::string> folders;
  return folders;
}

}  // namespace

void leave_job() {
  std::shared_ptr<JobConnection>& job = current_job();
  if (!job) return;
  const std::shared_ptr<JobConnection> leaving = std::move(job);
  depart(*leaving->store, leaving->env.rank, leaving->env.world, leaving->timeout);
}

ModuleEngine::ModuleEngine(const std::string& config_path, const std::string& toml_text,
                           const std::vector<std::string>& overrides, std::vector<UnitParams> units)
    : number_(next_engine_number()),
      loaded_(load_python_job(config_path, toml_text, overrides, "zt.initialize")),
      env_(discover_rank_env()) {
  if (units.empty()) throw ConfigError("zt.initialize: the model has no parameters to train");
  // As the trainer holds it: data.global_batch (or a DeepSpeed JSON's train_batch_size) is what
  // micro_batch x grad_accum x ranks must make, here too.
  job_.data.check_global_batch(env_.world);
  trainer::share_cores_between_local_ranks();
  std::shared_ptr<JobConnection>& connection = current_job();
  if (!connection) {
    // Kept only once joined: a failed rendezvous leaves nothing behind for the next attempt.
    auto joined = std::make_shared<JobConnection>();
    joined->env = env_;
    JobStore job = join_job_store(job_.engine.launch, env_);
    joined->timeout = job.timeout;
    joined->store = std::move(job.store);
    connection = std::move(joined);
  }
  job_connection_ = connection;
  // This engine's own launch.timeout_s bounds its collectives and saves: a later engine of the
  // process kept the first one's (the job's store, joined once, keeps the first's).
  timeout_ = job_.engine.launch.timeout;
  store_ = prefixed_store(connection->store, "engine-" + std::to_string(number_) + "/");
  std::vector<Unit*> pointers;
  for (UnitParams& u : units) {
    units_.push_back(std::make_unique<ModuleUnit>(u));
    pointers.push_back(units_.back().get());
  }
  ComposeHooks hooks;
  hooks.prepare = [&](Composition& c) { broadcast_initial_values(*c.comm, units); };
  setup_ = compose(job_.engine, loaded_.config.catalog(), env_, *store_, timeout_, pointers, hooks);
  if (offloads_to_files(job_.engine.offload_optimizer) ||
      offloads_to_files(job_.engine.offload_param))
    remove_offload_files_on_sigterm();
  schedule_ = trainer::schedule_of(job_.schedule, setup_.optimizer->base_lr());
  warn_about_schedule_length();
  warn_about_launch_nproc();
  if (env_.rank == 0 && !setup_.engine->weight_decay_warning().empty())
    std::cerr << "zt: warning: " << setup_.engine->weight_decay_warning() << "\n";
}

// A script's loop, not run.steps, decides how many steps it trains: a decaying schedule whose
// end nobody set ends at run.steps' default (10), after which the lr sits at its floor for the
// rest of the loop. The trainer warns of a schedule its run cannot complete; here the length is
// the script's, so the warning names the keys that set it.
void ModuleEngine::warn_about_schedule_length() const {
  if (schedule_.kind == "constant" || env_.rank != 0) return;
  const Options& run = loaded_.config.section("run");
  if (run.is_set("steps") || run.is_set("decay_steps")) return;
  std::cerr << "zt: warning: run.lr_schedule = \"" << schedule_.kind
            << "\" decays over run.steps = " << schedule_.total_steps
            << " (its default, set by neither the config nor an override): from step "
            << schedule_.total_steps + 1 << " on the lr stays at run.min_lr_ratio x lr; set "
            << "run.steps (or run.decay_steps) to the steps your loop takes\n";
}

// The processes that started are the job: a config's launch.nproc (configs/zero3.toml's 2) that
// differs was dropped without a word, and `python3 train.py` trained ZeRO-3 as a job of one.
// Under torchrun, srun or mpirun launch.nproc means nothing (their own counts decide, per host).
void ModuleEngine::warn_about_launch_nproc() const {
  if (env_.rank != 0 || !loaded_.config.section("launch").is_set("nproc")) return;
  if (env_.found && env_.source != "zt launcher") return;
  const int64_t nproc = job_.engine.launch.nproc;
  if (nproc == env_.world) return;
  std::cerr << "zt: warning: launch.nproc = " << nproc << ", but this job has " << env_.world
            << " rank(s) (" << (env_.found ? env_.source + " started them" : "one process")
            << "): zt.initialize trains with the ranks that started, not the config's; start "
            << nproc << " with python3 -m zt.launch --nproc " << nproc
            << " script.py, or drop launch.nproc\n";
}

ModuleEngine::~ModuleEngine() {
  try {
    close();
  } catch (const std::exception& e) {
    std::cerr << "zt: leaving the job: " << e.what() << "\n";
  }
}

void ModuleEngine::close() {
  if (closed_) return;
  closed_ = true;
  {
    // Destroyed in reverse order of declaration (assigning would go in declaration order): the
    // engine first, its tiers, ..., last the communicator, whose shutdown is collective.
    const Composition leaving = std::move(setup_);
  }
  saver_.reset();
  dir_lock_.reset();
  if (!held_folder_.empty()) held_save_folders().erase(held_folder_);
  store_.reset();
  job_connection_.reset();
}

Engine& ModuleEngine::live() const {
  if (closed_ || !setup_.engine) {
    throw ConfigError("this zt engine was closed (engine.close(), or the process is leaving its "
                      "job); build another with zt.initialize");
  }
  return *setup_.engine;
}

// Through live(): a closed engine's options were moved out with it (step() read 0 and did
// nothing without a word).
int64_t ModuleEngine::grad_accum() const {
  live();
  return setup_.options.grad_accum;
}
int ModuleEngine::stage() const {
  live();
  return setup_.options.stage;
}
int64_t ModuleEngine::micro_steps() const {
  return closed_ || !setup_.engine ? 0 : setup_.engine->micro_steps();
}

std::string ModuleEngine::describe() const {
  live();
  return "world " + std::to_string(env_.world) + ", ZeRO stage " +
         std::to_string(setup_.options.stage) + ", " + setup_.shard_id + ", " +
         setup_.optimizer_id + ", " + setup_.comm->describe() + ", compute " + job_.run.compute +
         ", timeout " + c10::str(timeout_.count() / 1000.0) + " s";
}

void ModuleEngine::begin_forward(bool training) { live().begin_forward(training); }
void ModuleEngine::enter_unit(int unit) { live().enter_unit(unit); }
void ModuleEngine::leave_unit(int unit, const std::vector<at::Tensor>& outputs) {
  live().leave_unit(unit, outputs);
}
at::Tensor ModuleEngine::backward(const at::Tensor& loss) { return live().backward(loss); }
void ModuleEngine::end_forward() { live().end_forward(); }
void ModuleEngine::abort_forward() { live().abort_forward(); }

double ModuleEngine::scheduled_lr() const { return schedule_.lr(live().optimizer_steps()); }

StepReport ModuleEngine::step(double lr) {
  try {
    const StepReport report = live().step(lr);
    ++steps_;
    return report;
  } catch (const NumericError&) {
    // A step dropped for a loss or gradient that is not finite took its global batch all the
    // same: a script that catches it trains on from the next one, and the next sample a
    // checkpoint records must not replay that batch.
    ++steps_;
    throw;
  }
}

at::Tensor ModuleEngine::full_param(const std::string& name) {
  return live().full_fp32_param(name);
}
at::Tensor ModuleEngine::full_grad(const std::string& name) { return live().full_fp32_grad(name); }
at::Tensor ModuleEngine::optimizer_state(const std::string& name, const std::string& state) {
  return live().full_optimizer_state(name, state);
}
std::vector<std::string> ModuleEngine::parameter_names() const { return live().parameter_names(); }

NamedTensors ModuleEngine::gathered(const std::vector<std::string>& names) {
  NamedTensors out;
  live().with_gathered_parameters(names, -1, [&](NamedTensors& params) { out = params; });
  return out;
}

void ModuleEngine::write_gathered(const std::vector<std::string>& names, int modifier_rank,
                                  const std::vector<at::Tensor>& values, bool failed) {
  live().with_gathered_parameters(names, modifier_rank, [&](NamedTensors& params) {
    if (failed) {
      throw ConfigError("gathered_parameters: on rank " + std::to_string(env_.rank) +
                        " the body of the with-block raised, or left a name without a floating "
                        "tensor; nothing is written back");
    }
    if (env_.rank != modifier_rank) return;
    for (size_t i = 0; i < params.size() && i < values.size(); ++i) params[i].second = values[i];
  });
}

void ModuleEngine::all_reduce(at::Tensor tensor) {
  live();
  at::Tensor flat = tensor.contiguous();
  all_reduce_host(*setup_.comm, flat, ReduceOp::kSum);  // a host metric under comm_nccl too
  if (!flat.is_same(tensor)) tensor.copy_(flat);
}

void ModuleEngine::share_buffers(const std::vector<at::Tensor>& buffers) {
  live();
  trainer::broadcast_buffers(buffers, setup_);
}

MemoryReport ModuleEngine::memory() const { return live().memory(); }
EngineTimes ModuleEngine::times() const { return live().times(); }

// Rank 0 takes the folder's lock; a refusal fails the save on every rank (fail_together) instead
// of leaving the others waiting in it.
void ModuleEngine::take_dir_lock(const std::string& dir) {
  std::exception_ptr refusal;
  if (env_.rank == 0) {
    std::error_code ec;
    const std::string folder = std::filesystem::weakly_canonical(dir, ec).string();
    try {
      // Held already by this engine: an earlier save here failed after taking it (a stopped
      // save it could not clear, the job id, the saver), and was refused as another engine's.
      const bool ours = dir_lock_ && !ec && folder == held_folder_;
      // flock refuses a second open file in the same process too: said apart from another job.
      if (!ours && !ec && !held_save_folders().insert(folder).second) {
        throw ConfigError(dir + " is the save folder of another engine of this process, still " +
                          "open: close it (engine.close()) first, or save elsewhere");
      }
      if (!ours) {
        try {
          auto lock = std::make_unique<CheckpointDirLock>(dir);
          // The folder of a save that failed before this one, given up for this one.
          if (!held_folder_.empty()) held_save_folders().erase(held_folder_);
          dir_lock_ = std::move(lock);
        } catch (...) {
          if (!ec) held_save_folders().erase(folder);
          throw;
        }
        held_folder_ = ec ? "" : folder;
      }
      // Under the lock, as the trainer does at its start: what saves killed or given up left
      // here (temporary folders, a pending `latest`) goes before this engine saves.
      trainer::CheckpointSettings here = job_.checkpoint;
      here.dir = dir;
      trainer::remove_stopped_saves(here);
    } catch (const ConfigError& e) {
      refusal = std::make_exception_ptr(
          ConfigError(std::string("save_checkpoint: ") + e.what() + "; nothing was saved"));
    } catch (...) {  // whatever it is, every rank must reach the all_reduce below
      refusal = std::current_exception();
    }
  }
  fail_together(*setup_.comm, refusal, [&](int) {
    return "save_checkpoint: rank 0 cannot save into " + dir +
           " (its error says why); nothing was saved";
  });
}

std::string ModuleEngine::save_checkpoint(const std::string& dir, int64_t next_sample,
                                          const std::map<std::string, double>& metrics,
                                          const std::string& refusal) {
  live();  // a closed engine's communicator is gone
  // Without the metric it ranks by, keep_best would never point dir/best at a save of this run.
  const std::string& best = job_.checkpoint.keep_best;
  std::exception_ptr unranked;
  if (!refusal.empty()) {
    unranked = std::make_exception_ptr(ConfigError(refusal + "; nothing was saved"));
  } else if (!best.empty() && metrics.count(best) == 0) {
    unranked = std::make_exception_ptr(
        ConfigError("save_checkpoint: checkpoint.keep_best = \"" + best +
                    "\" keeps the checkpoint with the lowest " + best +
                    ", and this save gives none: pass metrics={\"" + best +
                    "\": value} (or leave keep_best unset); nothing was saved"));
  }
  fail_together(*setup_.comm, unranked, [&](int rank) {
    return "save_checkpoint: rank " + std::to_string(rank) +
           "'s metrics were refused (its error says why); nothing was saved";
  });
  const int64_t next = next_sample >= 0
                           ? next_sample
                           : loaded_next_sample_ +
                                 (steps_ - loaded_step_) * job_.data.samples_per_step(env_.world);
  const trainer::TrainerState state = trainer::trainer_state_at(
      job_, env_.world, steps_, live().optimizer_steps(), next, schedule_);
  CheckpointMeta meta;
  meta.trainer_state = state.to_json();
  meta.config_toml = job_.config_toml;
  meta.saved_by = describe() + " (from Python)";
  meta.metrics = metrics;  // rank 0's go into the manifest
  if (!saver_) {
    // One saver for the engine's life: each save gets store keys of its own (two saves at the
    // same step must not meet the first one's reports).
    take_dir_lock(dir);
    const std::string job = setup_.tiers.job.empty() ? offload_job_id(*store_, env_.rank, timeout_)
                                                     : setup_.tiers.job;
    saver_dir_ = dir;
    saver_ = std::make_unique<CheckpointSaver>(
        CheckpointOptions{dir, job_.checkpoint.keep_last, false, timeout_, job,
                          job_.checkpoint.keep_best, "launch.timeout_s"},
        *store_, env_.rank, env_.world);
  } else if (dir != saver_dir_) {
    throw ConfigError("save_checkpoint: this engine saves into " + saver_dir_ +
                      " already; save "
                      "every checkpoint of a run into one directory (" +
                      dir + " given)");
  }
  CheckpointSaver& saver = *saver_;
  // Every rank learns whether the save failed anywhere (rank 0's publish, another rank's part):
  // a rank that threw alone would meet the others' barrier with its next collective.
  std::exception_ptr failure;
  try {
    saver.save(live(), steps_, meta);
    saver.finish();
  } catch (...) {  // whatever it is, every rank must reach the all_reduce below
    failure = std::current_exception();
  }
  fail_together(
      *setup_.comm, failure,
      [&](int rank) {
    return "save_checkpoint: rank " + std::to_string(rank) +
           " could not save (its error says why); the previous checkpoint in " + dir +
           " stays the latest";
      },
      /*io=*/true);
  // Rank 0 published it: no rank returns before the folder is there.
  setup_.comm->barrier()->wait();
  return latest_checkpoint(dir);
}

namespace {

// Whether `path` holds no checkpoint at all, as a first run finds its folder: no such path, or a
// folder with neither a manifest of its own nor a complete checkpoint under it. A path that
// cannot be looked at (EACCES) is not "none": resolving it says why.
bool holds_no_checkpoint(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (ec) return ec == std::errc::no_such_file_or_directory;
  if (!fs::is_directory(st)) return false;
  // A step folder named on purpose that lacks its manifest (a copy cut short) is no first run:
  // resolving it says what is wrong.
  if (fs::path(path).lexically_normal().filename().string().rfind("step-", 0) == 0) return false;
  return !fs::exists(fs::path(path) / "manifest.json", ec) && !ec &&
         latest_checkpoint(path).empty();
}

}  // namespace

std::optional<std::string> ModuleEngine::load_checkpoint(const std::string& path, bool restore_rng,
                                                         bool missing_ok) {
  live();  // a closed engine's store and communicator are gone
  const std::string asked = "load_checkpoint(\"" + path + "\")";
  const std::string key = "load/" + std::to_string(loads_++);  // counted alike on every rank
  // Every rank learns whether every rank could open rank 0's folder (fail_together): the ones
  // that could went on into the load.
  std::unique_ptr<CheckpointReader> opened;
  std::exception_ptr failure;
  try {
    opened = trainer::open_rank0_checkpoint(
        [&]() -> std::unique_ptr<CheckpointReader> {
          if (missing_ok) {
            const FileIoDeadline deadline("looking for a checkpoint in " + path,
                                          trainer::checkpoint_io_limit(timeout_),
                                          kCheckpointIoWayOut);
            if (holds_no_checkpoint(path)) return nullptr;  // every rank then loads nothing
          }
          return std::make_unique<CheckpointReader>(
              trainer::resolve_checkpoint_within(path, timeout_),
              trainer::checkpoint_io_limit(timeout_));
        },
        asked, path, *store_, key, env_.rank, timeout_);
  } catch (...) {  // whatever it is, every rank must reach the all_reduce below
    failure = std::current_exception();
  }
  fail_together(*setup_.comm, failure, [&](int rank) {
    return asked + ": rank " + std::to_string(rank) +
           " could not open the checkpoint rank 0 loads (its error says why); nothing was loaded";
  });
  if (!opened) return std::nullopt;
  const CheckpointReader& reader = *opened;
  live().load_checkpoint(reader);
  steps_ = reader.step();
  loaded_step_ = steps_;
  loaded_next_sample_ = steps_ * job_.data.samples_per_step(env_.world);
  const std::string& state = reader.meta().trainer_state;
  if (!state.empty()) {
    const trainer::TrainerState saved = trainer::TrainerState::from_json(state, reader.folder());
    loaded_next_sample_ = saved.next_sample;
    // Opt-in: the state is rank 0's, and ranks that seed their own generators (a batch drawn
    // per rank) would all draw alike after it.
    if (restore_rng) trainer::restore_cpu_rng_state(saved.rng_state, reader.folder());
  }
  return state;
}

}  // namespace zt::python
