// The C++ side of zt's Python package (python/zt): one rank's engine over the parameters of a
// torch.nn.Module that runs its own forward. It reads the config as the trainer does (the same
// TOML: [zero], [precision], [plugins], [plugin.<id>], [launch], [data] grad_accum, [run]'s lr
// schedule), finds its place in the job from the launcher's environment (torchrun, zt.launch,
// mpirun, srun; none = a job of one), meets the other ranks at rank 0's TCPStore, builds the
// plugins and the engine over the module's units, and serves the Python Engine's calls.
// No Python here: module.cc binds it.
// Thread safety: the Python thread that built it (autograd calls the hooks it installs on the
// same thread on the CPU).
#pragma once

#include <ATen/core/Tensor.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "run/schedule.h"
#include "settings/job_settings.h"
#include "zt/host/checkpoint.h"
#include "zt/host/compose.h"
#include "zt/host/config.h"
#include "zt/host/engine.h"
#include "zt/host/engine_types.h"
#include "zt/host/rendezvous.h"
#include "zt/store.h"
#include "zt/unit.h"

namespace zt::python {

// The Python package's door: the config it is given, read as the trainer reads its file (a TOML
// file, `path`, else `toml_text`, a dict the Python layer wrote out, named after `caller` in
// messages, "the config dict given to zt.initialize:3:1", with `overrides` on top), and the job's
// settings resolved from it once. The config is kept for its plugin catalog.
struct PythonJob {
  Config config;
  trainer::JobSettings settings;
};
PythonJob load_python_job(const std::string& path, const std::string& toml_text,
                          const std::vector<std::string>& overrides, const std::string& caller);

using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

// One unit as the Python layer found it: a submodule the model's forward calls (or the root
// module's own parameters), with every parameter it uses under its name in the whole model.
struct UnitParams {
  std::string name;
  NamedTensors params;
};

// This process's place in its job, shared by every engine it builds: the rendezvous runs once,
// and each engine's keys go under a prefix of its own, so a process may build an engine again
// after closing one (every rank building its engines in the same order).
struct JobConnection;

// Leaves the job (the departure barrier; rank 0's store goes last), once no engine is open.
// Idempotent; the Python package calls it at exit.
void leave_job();

class ModuleEngine {
 public:
  // config_path: a TOML file ('' = none); toml_text: a config given as text (a dict the Python
  // layer wrote out), read when config_path is empty; overrides: "section.key=value" on top.
  // Collective: every rank of the job builds one, with the same config and units. Rank 0's
  // parameter values are broadcast before the engine takes them, so ranks that initialised
  // their modules differently still train one model. Throws what the config, the rendezvous, the
  // plugins and the engine throw (ConfigError, PluginError, CommError, IoError).
  ModuleEngine(const std::string& config_path, const std::string& toml_text,
               const std::vector<std::string>& overrides, std::vector<UnitParams> units);
  // close() without throwing (an error goes to stderr).
  ~ModuleEngine();
  ModuleEngine(const ModuleEngine&) = delete;
  ModuleEngine& operator=(const ModuleEngine&) = delete;

  // The engine and the communicator go (a collective shutdown); the process stays in the job
  // (leave_job). Idempotent.
  void close();

  int rank() const { return env_.rank; }
  int world() const { return env_.world; }
  int64_t grad_accum() const;
  int stage() const;
  // Micro steps since the last step(), a failed backward's included (Engine::micro_steps); 0
  // once closed.
  int64_t micro_steps() const;
  // The lr of the next optimizer step under the config's schedule ([run] lr_schedule, ...).
  // The schedule counts applied updates (a skipped step uses up no warmup), as the trainer does.
  double scheduled_lr() const;
  int64_t steps() const { return steps_; }
  std::string describe() const;  // "world 2, ZeRO stage 3, shard_bucket, optim_hybrid_adam, ..."
  std::string config_toml() const { return job_.config_toml; }
  std::string compute() const { return job_.run.compute; }  // "fp32" | "bf16" | "fp16"
  // Where the engine computes, as torch.device takes it: "cpu", or "cuda:N" with launch.device.
  std::string device() const { return setup_.options.device.str(); }

  // Engine's driven forward (zt/host/engine.h).
  void begin_forward(bool training);
  void enter_unit(int unit);
  void leave_unit(int unit, const std::vector<at::Tensor>& outputs);
  at::Tensor backward(const at::Tensor& loss);
  void end_forward();
  void abort_forward();
  StepReport step(double lr);

  at::Tensor full_param(const std::string& name);
  at::Tensor full_grad(const std::string& name);
  at::Tensor optimizer_state(const std::string& name, const std::string& state);
  std::vector<std::string> parameter_names() const;
  // The named parameters' full fp32 values (collective); then, with modifier_rank >= 0, every
  // rank's write_gathered() puts that rank's `values` into all ranks' shards (collective, and
  // all ranks refuse together when one passes failed = true: its body raised).
  NamedTensors gathered(const std::vector<std::string>& names);
  void write_gathered(const std::vector<std::string>& names, int modifier_rank,
                      const std::vector<at::Tensor>& values, bool failed);
  // Sums `tensor` (any dtype the communicator takes; fp64 for counts) over the ranks, in place.
  // Collective.
  void all_reduce(at::Tensor tensor);
  // The module's buffers as the trainer shares a TorchScript model's (broadcast_buffers):
  // floating ones in the compute dtype, rank 0's values everywhere. Collective.
  void share_buffers(const std::vector<at::Tensor>& buffers);
  MemoryReport memory() const;
  EngineTimes times() const;

  // Saves the engine's state as the trainer does (zt/host/checkpoint.h) under `dir` (a
  // checkpoint.dir: step-N folders, latest), synchronously; `next_sample`: the data position the
  // trainer resumes at (< 0: steps x the global batch); `metrics`: measurements of the saved
  // state, lower is better, the same on every rank (rank 0's recorded), which
  // checkpoint.keep_best ranks by: a save where a rank lacks the metric it names, or gives a
  // `refusal` (the caller's objection to its metrics, "" for none), is refused on every rank.
  // Collective. Returns the folder.
  std::string save_checkpoint(const std::string& dir, int64_t next_sample,
                              const std::map<std::string, double>& metrics,
                              const std::string& refusal);
  // Loads a checkpoint folder, its dir (latest) or dir/best, from any world size and
  // composition; with `restore_rng`, also the CPU generator state it recorded (rank 0's when it
  // was saved) on every rank. Collective. Returns the saved trainer state's JSON (step,
  // next_sample, ...). With `missing_ok`, nothing when rank 0 finds no checkpoint at `path`
  // (no such path, or a folder without a complete one: a first run), on every rank alike.
  std::optional<std::string> load_checkpoint(const std::string& path, bool restore_rng,
                                             bool missing_ok);

 private:
  // The engine, or ConfigError once closed (a closed engine holds nothing).
  Engine& live() const;
  void take_dir_lock(const std::string& dir);
  void warn_about_schedule_length() const;
  void warn_about_launch_nproc() const;

  // Drawn first, before anything that may fail on one rank alone (its config, its environment):
  // every rank's n-th zt.initialize takes the key prefix "engine-n/", whichever of them failed.
  int64_t number_;
  PythonJob loaded_;
  const trainer::JobSettings& job_ = loaded_.settings;
  RankEnv env_;
  std::chrono::milliseconds timeout_{0};
  std::shared_ptr<JobConnection> job_connection_;
  std::unique_ptr<Store> store_;  // the job's store under this engine's prefix
  std::vector<std::unique_ptr<Unit>> units_;
  Composition setup_;
  trainer::Schedule schedule_;
  std::unique_ptr<CheckpointSaver> saver_;  // made by the first save_checkpoint
  std::string saver_dir_;
  // Rank 0's hold on saver_dir_ (as a trainer job's): another job saving there, a trainer's or
  // another script's, removed this one's checkpoints in its prunes.
  std::unique_ptr<CheckpointDirLock> dir_lock_;
  std::string held_folder_;  // dir_lock_'s folder, canonical: this process's engines keep apart
  int64_t steps_ = 0;        // optimizer steps taken (skipped ones included), as the trainer counts
  // The data position of the last checkpoint loaded and its step: a save without next_sample
  // continues from there (steps x the global batch was wrong after a load at another world size
  // or batch).
  int64_t loaded_next_sample_ = 0, loaded_step_ = 0;
  int64_t loads_ = 0;  // load_checkpoint calls so far: each agrees on its folder by its own key
  bool closed_ = false;
};

}  // namespace zt::python
