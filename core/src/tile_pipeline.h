// TilePipeline: the loop that streams offloaded optimizer state through host buffers, tile by
// tile (ZeRO-Infinity's pipelined swapping). With pipeline_read the next tile is read while this
// one is updated; with pipeline_write the previous tile is still being written back meanwhile.
// Each in-flight tile needs its own buffer set, so the caller provides sets() of them: 1 when
// nothing overlaps, 3 when both do. A buffer set is reused only after its writes completed.
// Thread safety: one thread; the I/O itself completes on the tier's threads.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "zt/work.h"

namespace zt {

class TilePipeline {
 public:
  // Issues the tile's I/O into buffer set `set` and appends the handles to `works`.
  using IoFn =
      std::function<void(int64_t tile, int set, std::vector<std::shared_ptr<Work>>& works)>;
  // Updates the tile in buffer set `set` (its reads have completed).
  using ComputeFn = std::function<void(int64_t tile, int set)>;

  TilePipeline(bool pipeline_read, bool pipeline_write);
  int sets() const { return sets_; }
  // Runs every tile; returns when all writes completed. A failed read or write is rethrown
  // (from Work::wait) once its set is waited on; later tiles are not updated.
  void run(int64_t tiles, const IoFn& read, const ComputeFn& compute, const IoFn& write) const;

 private:
  bool read_ahead_, write_behind_;
  int sets_;
};

}  // namespace zt
