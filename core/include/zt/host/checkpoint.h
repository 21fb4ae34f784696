// Checkpoints: sharded, asynchronous, atomic saves of a run, and loads into any world size,
// ZeRO stage, shard strategy or offload placement (like PyTorch DCP, without a conversion step).
//
// The format is per tensor, independent of who saved it. A *piece* is elements [begin, end) of
// one model tensor flattened in row-major order, of one *kind*: "param" (the fp32 master value of
// the parameter) or an optimizer state named as the optimizer names it ("exp_avg", "exp_avg_sq").
// Every element of every tensor and kind is saved exactly once, by the rank that owns it (stage
// 0: a 1/world split of the whole model), so stages 0-2 save the parameters once, not once per
// rank. A loader intersects the ranges it now owns with the saved pieces.
//
// On disk (dir = checkpoint.dir):
//   dir/step-00000012/manifest.json        format, zt version, step, who saved it (world, stage,
//                                          strategy, offload), every tensor's name and shape,
//                                          every piece (kind, range, file, byte offset, crc32),
//                                          every file's size and header crc32, the engine's
//                                          counters, the trainer's state, the resolved config
//   dir/step-00000012/manifest.json.crc32  crc32 of manifest.json, so a flipped byte is caught
//   dir/step-00000012/rank-00000-of-00002.safetensors  one per rank; entry names
//                                          "<kind>/<tensor>/<begin>-<end>", fp32, 1-D
//   dir/latest                             the newest complete checkpoint's folder name
//   dir/best                               with keep_best: the folder of the lowest metric
//   dir/.tmp-step-00000012-<job>/          a save in progress (removed by the next start)
// A save becomes visible in one step: every rank writes and fsyncs its file in the temporary
// folder and reports its pieces through the Store; rank 0 then writes the manifest, fsyncs it,
// renames the folder to step-<N>, fsyncs dir, and replaces `latest` by rename. A rank killed at
// any moment therefore leaves the previous checkpoint intact and `latest` pointing at it.
//
// Thread safety: a CheckpointSaver is used from the training thread; it runs its writes on one
// thread of its own. A CheckpointReader is immutable after construction (read() is const and
// may run on several threads).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "zt/api.h"
#include "zt/file_lock.h"

namespace zt {

class Engine;
class Store;

struct CheckpointTensor {
  std::string name;            // as the model's units list it ("block0.attn.qkv.weight")
  std::vector<int64_t> shape;  // full shape
  int64_t numel() const;
};

struct CheckpointPiece {
  std::string tensor;
  std::string kind;  // "param" or an optimizer state name
  int64_t begin = 0, end = 0;
};

// The engine's own counters that a resume restores.
struct EngineCounters {
  int64_t optimizer_steps = 0;  // updates applied, skipped steps excluded (Adam's bias correction)
  double loss_scale = 1;        // the LossScaler's state
  int64_t clean_steps = 0;
  int64_t hysteresis_left = 0;
  // The dtype the optimizer kept its states in ("fp32" or "bf16"). The checkpoint holds them as
  // fp32 values either way (bf16 ones exactly), so it loads into either: into bf16 states each
  // value is rounded to nearest even. Checkpoints from before it was recorded are "fp32".
  std::string state_dtype = "fp32";
  // The same for the master weights (Optimizer::master_dtype): held as fp32 values, rounded to
  // nearest even when loaded into bf16 masters. Checkpoints from before it was recorded: "fp32".
  std::string master_dtype = "fp32";
  // The unit of the error-feedback residuals saved (gradient codecs): loss scale /
  // zero.gradient_predivide_factor, which every gradient the codec saw was multiplied by. A
  // resume under another one (fp16 to bf16, another factor) rescales them. 0: not recorded
  // (checkpoints before 2026-12-04), taken as the resumed run's own.
  double residual_unit = 0;
  // 1 when the step before the save was skipped for gradients nothing could rescale (no loss
  // scaling, or the scale at its floor): a second such step in a row stops the job, after a
  // resume as in the run that saved. 0 in checkpoints from before 2026-12-06.
  int64_t unscalable_in_a_row = 0;
};

// What the trainer adds to a checkpoint besides the engine's state.
struct CheckpointMeta {
  std::string trainer_state;  // JSON object text: step, data position, schedule, RNG, ...
  std::string config_toml;    // the resolved config (Config::to_toml)
  std::string saved_by;       // one line: world, stage, strategy, offload, compute dtype
  // Measurements of the saved state, lower is better ("val_loss": the validation loss at this
  // step); recorded in the manifest, and what CheckpointOptions::keep_best ranks by.
  std::map<std::string, double> metrics;
};

// One rank's part of one save, filled by Engine::save_checkpoint: first every tensor and every
// piece this rank saves (add_tensor, declare), then begin_data(), then every piece's bytes.
// Made by CheckpointSaver::save; the engine never constructs one.
class ZT_API CheckpointRankWriter {
 public:
  class Impl;
  explicit CheckpointRankWriter(std::unique_ptr<Impl> impl);
  ~CheckpointRankWriter();
  CheckpointRankWriter(const CheckpointRankWriter&) = delete;
  CheckpointRankWriter& operator=(const CheckpointRankWriter&) = delete;

  // Every tensor of the model in model order (every rank gives the same list).
  void add_tensor(const CheckpointTensor& tensor);
  // A piece this rank saves; returns its index. `streamed`: its bytes come from a file tier tile
  // by tile and are written straight to the rank file; otherwise they come from memory that the
  // next step changes, so an asynchronous save copies them into its host buffer.
  int64_t declare(const CheckpointPiece& piece, bool streamed);
  // After every declare(), before the first write(): creates the rank file and its header.
  // Throws IoError when the folder cannot be written or has not room for the file (naming the
  // path, the bytes needed and free, and the way out).
  void begin_data();
  // fp32 elements [offset, offset + count) of piece `index`. A piece's parts come in increasing
  // offset, without gaps, until it is whole. Throws IoError as begin_data().
  void write(int64_t index, int64_t offset, const float* data, int64_t count);
  void set_counters(const EngineCounters& counters);

 private:
  std::unique_ptr<Impl> impl_;
};

struct CheckpointOptions {
  std::string dir;        // checkpoint.dir
  int64_t keep_last = 2;  // complete checkpoints kept (older ones removed after a save); 0 = all
  bool async = true;      // the step waits only for the in-memory bytes to be copied
  std::chrono::milliseconds timeout{std::chrono::minutes(10)};  // every wait on other ranks
  std::string job;  // same on all ranks, unique per job (temporary folder names)
  // A metric of CheckpointMeta::metrics ('' = none): the checkpoint with its lowest value is
  // kept besides the keep_last newest and named by dir/best.
  std::string keep_best;
  // The setting `timeout` comes from, named in errors; half of it bounds each file operation a
  // save makes on the thread that saves (a file system that stopped answering).
  std::string timeout_setting = "checkpoint.timeout_s";
};

struct SaveStats {
  int64_t step = 0;
  std::string folder;          // the published folder (rank 0) or the temporary one (others)
  int64_t bytes = 0;           // this rank's file
  double stall_seconds = 0;    // how long save() held the training thread
  double write_seconds = 0;    // from save() to this rank's file fsynced
  double publish_seconds = 0;  // rank 0: from save() to the rename of the folder
};

class ZT_API CheckpointSaver {
 public:
  //   rank, world: this process's rank and the job's size; store: the job's store (not owned,
  //   must outlive the saver), used by the writer thread to gather the ranks' pieces on rank 0.
  CheckpointSaver(CheckpointOptions options, Store& store, int rank, int world);
  // Waits for a save in flight (up to the timeout) without throwing; a failure is reported
  // on stderr.
  ~CheckpointSaver();
  CheckpointSaver(const CheckpointSaver&) = delete;
  CheckpointSaver& operator=(const CheckpointSaver&) = delete;

  // Saves `engine`'s state after `step` optimizer steps. Collective: every rank calls it at the
  // same step. Waits for the previous save first (rethrowing its error). With async, returns
  // once the in-memory bytes are copied (file-tier states are streamed to the file before it
  // returns); the file is written, fsynced and published in the background.
  // Throws IoError naming the path and bytes (unwritable folder, disk full); the previous
  // checkpoint stays the `latest`.
  void save(Engine& engine, int64_t step, const CheckpointMeta& meta);
  // Rethrows the error of a save that failed in the background. Cheap: call it every step.
  void poll();
  // Waits until the save in flight is published (rank 0) or this rank's part is written, up to
  // twice the timeout (the writer thread's own wait on the other ranks takes up to one, then
  // names the ranks missing); rethrows its error (CommError when a rank never reported). save()
  // waits for the previous save the same way.
  void finish();
  // The last save that completed on this rank.
  std::optional<SaveStats> last_completed() const;

 private:
  friend class CheckpointSaverAccess;  // core-internal: a save fed without an Engine (tests)
  class Impl;
  std::unique_ptr<Impl> impl_;
};

// How long one file operation of a save may block (CheckpointSaver; the rank then ends naming the
// file): half of `timeout` (checkpoint.timeout_s), at least 10 s.
ZT_API std::chrono::milliseconds checkpoint_save_io_limit(std::chrono::milliseconds timeout);

// The newest complete checkpoint folder under `dir` (the one `latest` names, else the highest
// step-* holding a manifest), or "" when there is none. Never throws for a missing dir.
ZT_API std::string latest_checkpoint(const std::string& dir);
// The complete checkpoint folder dir/best names (CheckpointOptions::keep_best), or "".
ZT_API std::string best_checkpoint(const std::string& dir);
// `path` as a checkpoint folder: `path` itself when it holds a manifest, the folder named by
// `path` when it is a checkpoint dir's `latest` or `best` file, else the latest one under it.
// Throws ConfigError when none ("not a checkpoint: ...", with the way out).
ZT_API std::string resolve_checkpoint(const std::string& path);
// A save killed between making its folder visible and pointing `latest` at it left that
// pointer pending: commits it and returns the folder it names (now the latest); "" when no save
// was cut short there. Throws IoError when the commit fails.
ZT_API std::string finish_interrupted_publish(const std::string& dir);
// Removes the temporary folders a killed save left under `dir` (after finishing an interrupted
// publish, whose pending `latest` is not incomplete) and step folders a killed prune left without
// their crc32 file; returns their paths. A step folder a killed publish had moved aside
// (.old-step-N, where the file system cannot swap folders) is put back where no step-N stands.
ZT_API std::vector<std::string> remove_incomplete_checkpoints(const std::string& dir);
// One job at a time saves into a checkpoint dir: the job's rank 0 holds `dir`/.zt-lock (flock)
// from before it cleans up what a stopped save left until it ends, so a second job on the same
// folder (a script started twice, a requeue while the first still runs) stops at once instead of
// removing the first one's saves. Creates `dir`. Throws ConfigError naming the holder when another
// process holds it, IoError when the file cannot be opened or locked. The kernel releases it when
// the process ends, however it ends.
class ZT_API CheckpointDirLock {
 public:
  explicit CheckpointDirLock(const std::string& dir);

 private:
  ExclusiveFileLock lock_;
};

// What saves made under `dir`, sorted: the paths remove_saves removes. Never throws.
ZT_API std::vector<std::string> list_saves(const std::string& dir);
// Removes what saves made under `dir`: step folders, `latest`, `best`, their pending
// replacements and temporary folders, folders a publish moved aside; not the lock. Returns what
// it removed. Best effort: what cannot be removed is left.
ZT_API std::vector<std::string> remove_saves(const std::string& dir);
// remove_saves, then the lock, then `dir` itself when that leaves it empty. Anything else stays,
// so a `dir` given by mistake as a folder with other contents loses none of them. Returns what
// remove_saves removed.
ZT_API std::vector<std::string> remove_checkpoint_dir(const std::string& dir);

// What a rank's last line says to do when an open, lookup or read of a checkpoint's files outlives
// the reader's io_limit (below).
inline constexpr const char* kCheckpointIoWayOut =
    "check that the storage answers, then load again; storage this slow but working needs a "
    "longer launch.timeout_s (each checkpoint file operation may take half of it)";

// A published checkpoint, opened for loading.
class ZT_API CheckpointReader {
 public:
  // Reads and checks manifest.json (its crc32, format version) and that every rank file is
  // there at its size. Throws ConfigError for a folder that is not a checkpoint or a manifest
  // that does not parse, IoError for a missing or short file; each message names the path.
  // `io_limit` (0: none) bounds each open, lookup and read (16 MiB at most) of its files, here and
  // in read(): one still blocked after it ends the process naming the file
  // (zt/host/file_io_deadline.h). Training, eval, sample and the Python engine give half of
  // launch.timeout_s, so that the rank whose storage stopped answering names the file, where its
  // peers' collectives would time out waiting for it and name only the collective; `trainer
  // export` and the config read from a checkpoint give none.
  explicit CheckpointReader(const std::string& folder,
                            std::chrono::milliseconds io_limit = std::chrono::milliseconds{0});
  ~CheckpointReader();
  CheckpointReader(const CheckpointReader&) = delete;
  CheckpointReader& operator=(const CheckpointReader&) = delete;

  const std::string& folder() const;
  int64_t step() const;
  const std::vector<CheckpointTensor>& tensors() const;
  const CheckpointTensor* find_tensor(const std::string& name) const;
  std::vector<std::string> kinds() const;  // "param" first, then the optimizer states
  // kinds() for a message: the gradient codec's residuals (a kind per saving rank and hop, 512
  // at world 256) as one "codec residuals of N rank(s)".
  std::string kinds_text() const;
  EngineCounters counters() const;
  const CheckpointMeta& meta() const;
  std::string zt_version() const;
  // Elements [begin, end) of `tensor`'s `kind` into `out` (fp32). Reads every saved piece that
  // overlaps the range whole and checks its crc32. Throws IoError on a mismatch or short read
  // (naming the file, the tensor, the kind and the range), ConfigError for an unknown tensor or
  // kind or a range the pieces do not cover.
  void read(const std::string& tensor, const std::string& kind, int64_t begin, int64_t end,
            float* out) const;
  // The parts of [begin, end) of `tensor`'s `kind` that saved pieces cover, in order, adjacent
  // pieces merged; none for an unknown tensor or kind. For state that may be partly absent (a
  // rank's codec residual over a shard whose bounds moved with the world size).
  std::vector<std::pair<int64_t, int64_t>> saved_ranges(const std::string& tensor,
                                                        const std::string& kind, int64_t begin,
                                                        int64_t end) const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace zt
