// The trainer's side of checkpoints (the format and the saving itself are zt/host/checkpoint.h; the
// [checkpoint] settings are settings/job_settings.h's CheckpointSettings): when a step saves, what
// the trainer adds to a checkpoint besides the engine's state (its own state: step, data position,
// lr schedule, RNG; the resolved config; who saved it), and which checkpoint a run resumes from.
// Thread safety: the training thread only.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "run/schedule.h"
#include "settings/job_settings.h"
#include "zt/host/checkpoint.h"
#include "zt/host/engine.h"
#include "zt/store.h"

namespace zt::data {
struct HeldOutSplit;
}

namespace zt::trainer {

// What the trainer needs, besides the engine's state, to continue a run exactly; saved as the
// checkpoint's trainer_state (JSON).
struct TrainerState {
  int64_t step = 0;              // optimizer steps completed (skipped ones included)
  int64_t next_sample = 0;       // where the next step's global batch starts in the data stream
  int64_t samples_per_step = 0;  // the global batch
  std::string data_kind, data_path;
  uint64_t data_seed = 0;
  std::string data_split;           // DataSource::held_out_split(): "" without data.val_fraction
  bool data_split_recorded = true;  // false: a checkpoint of a zt that did not record it
  // The training data's files as they were (data.path, or each of data.paths): a file rewritten
  // since (prepare-data again, an edited text) feeds the resumed stream other samples at the same
  // positions. Empty for synthetic data and in checkpoints of a zt before 2026-12-06.
  struct DataFile {
    std::string path;
    int64_t bytes = -1;  // -1: it could not be read
    int64_t modified_ns = 0;
    // FNV-1a of its first and last MiB: a copy (node-local staging, a restore) moves the time,
    // not the bytes; a rewrite of the same size moves these (most likely).
    std::string edges;
  };
  std::vector<DataFile> data_files;
  Schedule schedule;
  double next_lr = 0;     // the lr step + 1 trains with under `schedule`
  std::string rng_state;  // the default CPU generator's state, hex
  std::string zt_version;

  std::string to_json() const;
  // Throws ConfigError naming `folder` when `text` is not a trainer state zt wrote.
  static TrainerState from_json(const std::string& text, const std::string& folder);
};

// A checkpoint's config (`saved_toml`, its manifest's) against this job's (`now_toml`, both as
// JobSettings::config_toml prints them) where tensor shapes cannot tell: a model.kind,
// model.n_head or model.activation that differs computes another function on the same tensors,
// so loading it is refused (ConfigError naming the key, both values, `folder` and the way out).
// A checkpoint without a config (one a Python engine saved without it) is not checked.
void check_same_model(const std::string& saved_toml, const std::string& now_toml,
                      const std::string& folder);
// A note (one line, "" when none) when data.val_fraction differs: the training windows and the
// held-out tail move, so a validation loss may count samples the checkpoint trained on.
std::string val_fraction_note(const std::string& saved_toml, const std::string& now_toml);
// A note (one line, "" when none) when data.val_fraction's share is the same as when the
// checkpoint trained (`saved`, with its config `saved_toml`) but its held-out part starts
// elsewhere than `now` (DataSource::held_out_split() of this job, config `now_toml`): the
// training windows moved, and validation may count tokens the checkpoint trained on. A
// checkpoint of a zt before 2026-12-04 records no split; its zt split a prepared file at the
// share's token, so it is noted only when the part now starts at a document's start.
std::string held_out_split_note(const TrainerState& saved, const std::string& saved_toml,
                                const data::HeldOutSplit& now, const std::string& now_toml);

// The trainer's state after `step` optimizer steps of the job `job` on `world` ranks, `updates`
// of them applied (skipped ones left out: the schedule counts those), its data at `next_sample`
// and its lr following `schedule`, with the CPU generator's state now: what a checkpoint of the
// trainer, or of a Python engine (which the trainer resumes), records.
TrainerState trainer_state_at(const JobSettings& job, int world, int64_t step, int64_t updates,
                              int64_t next_sample, const Schedule& schedule);

// The default CPU generator's state as hex, and back (ConfigError naming `folder` when the
// text is not a state this LibTorch accepts).
std::string cpu_rng_state_hex();
void restore_cpu_rng_state(const std::string& hex, const std::string& folder);

// Rank 0 at start: finishes a publish a kill cut short (its folder becomes the latest), removes
// the temporary folders a killed save left under settings.dir, and says so on stdout.
void remove_stopped_saves(const CheckpointSettings& settings);

// How long one file operation of a checkpoint load may block (CheckpointReader's io_limit; the
// rank then ends naming the file): half of `launch_timeout`, so that the rank whose storage
// stopped answering is named before its peers' collectives time out waiting for it.
std::chrono::milliseconds checkpoint_io_limit(std::chrono::milliseconds launch_timeout);
// resolve_checkpoint(path) (zt/host/checkpoint.h), its lookups bounded by
// checkpoint_io_limit(launch_timeout).
std::string resolve_checkpoint_within(const std::string& path,
                                      std::chrono::milliseconds launch_timeout);
// The checkpoint `path` names (a step folder, a folder of them, `latest` or `best`), opened with
// its lookups and file operations bounded by checkpoint_io_limit(launch_timeout): what eval,
// sample and export load. Throws what resolve_checkpoint and CheckpointReader throw.
std::unique_ptr<CheckpointReader> open_checkpoint_within(const std::string& path,
                                                         std::chrono::milliseconds launch_timeout);

// The checkpoint checkpoint.resume names, opened: null for a fresh start ('' or 'auto' with no
// checkpoint under dir; `leader` then says "no checkpoint under DIR: starting fresh"). A path
// that is not a checkpoint throws ConfigError; a missing or short rank file IoError. Its file
// operations are bounded by checkpoint_io_limit(launch_timeout).
std::unique_ptr<CheckpointReader> open_resume_checkpoint(const CheckpointSettings& settings,
                                                         bool leader,
                                                         std::chrono::milliseconds launch_timeout);

// The checkpoint every rank loads: the one rank 0 opens with `open` (null: none, a fresh start),
// which the other ranks open by the folder rank 0 names. They do not resolve `latest` or `best`
// themselves: one that found another folder there, or none (a node-local folder on a job across
// hosts, a file system's stale cache), loaded other states than rank 0 and trained on from them.
// `path`: the checkpoint path this rank was given (a folder of step folders, `latest`, `best` or
// a step folder); another rank looks for rank 0's step folder under its own `path` first, then
// at rank 0's path. `asked` names what the ranks were asked to load, in errors. Collective
// through `store`: rank 0 sets `key` (one per load); the others' lookups and reads are bounded
// by checkpoint_io_limit(timeout). Throws on rank 0 what `open` throws, the others then an error of
// the same kind saying so; on another rank, IoError where rank 0's folder is not there, ConfigError
// where it holds another checkpoint (step or saved state).
std::unique_ptr<CheckpointReader> open_rank0_checkpoint(
    const std::function<std::unique_ptr<CheckpointReader>()>& open, const std::string& asked,
    const std::string& path, Store& store, const std::string& key, int rank,
    std::chrono::milliseconds timeout);

// Notes (one line each, "" when none) on what differs between the state a checkpoint was saved
// with and the run resuming from it: the global batch, the data, the lr schedule. Resuming
// across them is allowed (the data position is a sample index), but the user should know.
std::string resume_differences(const TrainerState& saved, const TrainerState& now);

// The saves of one run: saver.save() when a step is due, completed saves reported once each.
class TrainCheckpoints {
 public:
  // `job`: the same on every rank, unique per job (temporary folder names).
  TrainCheckpoints(const CheckpointSettings& settings, Store& store, int rank, int world,
                   const std::string& job);
  // Collective: saves `engine` after step `step` (when settings.due says so). Returns the
  // previous save if it completed while this one waited for it and was not reported yet.
  std::optional<SaveStats> save(Engine& engine, int64_t step, const CheckpointMeta& meta);
  // Rethrows a background save's error; returns a save that completed since the last call.
  std::optional<SaveStats> poll();
  // Waits for the save in flight (rethrowing its error); returns it if not reported yet.
  std::optional<SaveStats> finish();

 private:
  std::optional<SaveStats> newly_completed();

  CheckpointSaver saver_;
  int64_t reported_step_ = 0;
};

// Bytes of every file in `folder` (a published checkpoint), 0 when it cannot be read.
int64_t folder_bytes(const std::string& folder);

}  // namespace zt::trainer
