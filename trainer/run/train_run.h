// One rank's training run (run.task = "train") as train_task.cc builds and trains it, and the
// pieces of it that live in files of their own: the live-A/B switches (train_live_ab.cc).
// Thread safety: the training thread only.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "ab/live_ab.h"
#include "data/data_source.h"
#include "models/model.h"
#include "run/checkpointing.h"
#include "run/evaluation.h"
#include "run/peak_flops.h"
#include "run/schedule.h"
#include "run/step_trace.h"
#include "settings/job_settings.h"
#include "zt/host/checkpoint.h"
#include "zt/host/compose.h"
#include "zt/host/plugin_loader.h"

namespace zt::trainer {

// One rank's training run, in the order it is built: the model source and the data outlive the
// engine (in `setup`), which owns the units the source built.
struct TrainRun {
  const JobSettings& settings;  // the job's, resolved once at the door
  PluginCatalog& catalog;       // composes the engine (and each live-A/B arm's)
  const RankEnv& env;
  std::unique_ptr<models::Model> model;  // shape, loss and description; the engine has the units
  std::unique_ptr<ModelSource> source;
  std::unique_ptr<data::DataSource> data;
  std::unique_ptr<data::DataSource> val_data;  // [eval]; null when the run does not evaluate
  OwnForward own_forward;  // a TorchScript module that is not a chain of its units: its forward
  Composition setup;
  Schedule schedule{};
  int64_t next_sample = 0;  // where the next step's global batch starts in the data stream
  int64_t first_step = 0;   // steps trained before this process: the resumed checkpoint's
  double load_seconds = 0;  // reading the resumed checkpoint into the engine
  // The newest checkpoint of this run's own state: the one it resumed from, then each save it
  // completed. A stop signal's save is skipped when that one is of the same step or recent
  // (checkpoint.min_interval_s); the folder's `latest` may be another run's (a rollback).
  int64_t newest_saved_step = -1;
  std::chrono::steady_clock::time_point newest_saved_at{};
  Store* store = nullptr;  // live A/B rebuilds the engine's parts through it
  std::chrono::milliseconds timeout{0};
  LiveAb live{};   // [ab]: arms the job alternates between (off with fewer than two)
  size_t arm = 0;  // the live arm training now
  std::unique_ptr<TrainCheckpoints> switch_saves{};  // the state passes through these at a switch
  std::unique_ptr<StepTrace> trace{};  // [trace]: the timeline of the configured steps
  double flops_per_step = 0;           // analytic, the whole job's (0 = unknown)
  PeakFlops peak{};                    // one rank's measured peak, for MFU
  EngineTimes traced_times{};          // the engine's times in the traced steps, for the file
};

// What the trainer adds to a checkpoint after `step`: its state, the config, who saved it.
CheckpointMeta checkpoint_meta(const TrainRun& run, int64_t step);
// The job id the saver names its temporary folders by (the offload tiers' when there are any).
std::string checkpoint_job(const TrainRun& run, Store& store, std::chrono::milliseconds timeout);

// Live A/B: hands the engine's state to arm `to` after optimizer step `step`. The state is saved
// as a checkpoint under ab.switch_dir, every part but the communicator is rebuilt from the arm's
// settings (the model built again, partitioned), and the checkpoint is loaded into the new
// layout. Collective. Returns the seconds it took on this rank.
double switch_arm(TrainRun& run, Store& store, std::chrono::milliseconds timeout, size_t to,
                  int64_t step);
// Live A/B before the first step: every rank must see the ab.switch_dir rank 0 writes into (a
// switch reads the state back from there). Rank 0 writes a token into it, every rank reads it
// back from its own view of the path. Throws ConfigError on every rank, naming how many ranks
// see another folder (a local disk or /dev/shm of each host). Collective.
void check_switch_dir_shared(const TrainRun& run, Store& store, std::chrono::milliseconds timeout);
// Live A/B at the end of the job: the switch folder goes, and rank 0 writes the report of the
// job's own steps (the first step after each switch left out of the timings).
void finish_live_ab(TrainRun& run, const std::string& out_dir, bool leader);

}  // namespace zt::trainer
