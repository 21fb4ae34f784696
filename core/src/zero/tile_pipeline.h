// TilePipeline: the loop that streams offloaded arrays through host buffers, tile by tile
// (ZeRO-Infinity's pipelined swapping): optimizer states at the step, gradient shards as they
// are reduced. With pipeline_read the next tile is read while this one is computed; with
// pipeline_write the previous tile is still being written back meanwhile. Each in-flight tile
// needs its own buffer set, so the caller provides sets() of them: 1 when nothing overlaps, 3
// when both do. A buffer set is read into only after its earlier writes completed. The pipeline
// keeps its in-flight transfers across run() calls, so a run may leave its last writes going
// (settle_writes = false) while the caller does other work; the next run reuses the oldest set
// first, and settle() waits for them. Time blocked on reads and writes goes to the clock.
// Thread safety: one thread; the I/O itself completes on the tier's threads. The caller's buffer
// sets must outlive the pipeline (its destructor waits out what is still in flight).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "zero/engine_clock.h"
#include "zt/work.h"

namespace zt {

class TilePipeline {
 public:
  // Issues the tile's I/O into buffer set `set` and appends the handles to `works`.
  using IoFn =
      std::function<void(int64_t tile, int set, std::vector<std::shared_ptr<Work>>& works)>;
  // Computes the tile in buffer set `set` (its reads have completed).
  using ComputeFn = std::function<void(int64_t tile, int set)>;

  TilePipeline(bool pipeline_read, bool pipeline_write, EngineClock& clock);
  ~TilePipeline();
  TilePipeline(const TilePipeline&) = delete;
  TilePipeline& operator=(const TilePipeline&) = delete;

  int sets() const { return sets_; }
  // Runs every tile: returns once every tile was computed and its writes issued, and with
  // `settle_writes` once they completed too. A failed read or write is rethrown (from
  // Work::wait) once its set is waited on, after everything in flight finished; later tiles are
  // not computed.
  void run(int64_t tiles, const IoFn& read, const ComputeFn& compute, const IoFn& write,
           bool settle_writes = true);
  // Waits for every transfer still in flight; rethrows the first failure (after all finished).
  void settle();

 private:
  using Works = std::vector<std::shared_ptr<Work>>;
  void wait(Works& works, TimeField field);
  void abandon();

  bool read_ahead_, write_behind_;
  int sets_;
  EngineClock& clock_;
  std::vector<Works> reads_, writes_;  // per set, in flight
  int next_set_ = 0;                   // the oldest set: where the next run starts
};

}  // namespace zt
