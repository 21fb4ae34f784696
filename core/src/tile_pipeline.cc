#include "tile_pipeline.h"

namespace zt {

TilePipeline::TilePipeline(bool pipeline_read, bool pipeline_write)
    : read_ahead_(pipeline_read),
      write_behind_(pipeline_write),
      sets_(1 + (pipeline_read ? 1 : 0) + (pipeline_write ? 1 : 0)) {}

void TilePipeline::run(int64_t tiles, const IoFn& read, const ComputeFn& compute,
                       const IoFn& write) const {
  std::vector<std::vector<std::shared_ptr<Work>>> pending(sets_);
  auto drain = [&](int set) {
    for (auto& w : pending[set]) w->wait();
    pending[set].clear();
  };
  // A set is read into only once the tile that used it before has been written back.
  auto start_read = [&](int64_t tile) {
    const int set = static_cast<int>(tile % sets_);
    drain(set);
    read(tile, set, pending[set]);
  };
  try {
    if (tiles > 0) start_read(0);
    for (int64_t tile = 0; tile < tiles; ++tile) {
      const int set = static_cast<int>(tile % sets_);
      if (read_ahead_ && tile + 1 < tiles) start_read(tile + 1);
      drain(set);  // this tile's reads
      compute(tile, set);
      write(tile, set, pending[set]);
      if (!write_behind_) drain(set);
      if (!read_ahead_ && tile + 1 < tiles) start_read(tile + 1);
    }
    for (int set = 0; set < sets_; ++set) drain(set);
  } catch (...) {
    // Buffers must outlive their I/O: wait out what is still in flight (ignoring its own
    // errors), then report the first failure.
    for (auto& works : pending) {
      for (auto& w : works) {
        try {
          w->wait();
        } catch (...) {
        }
      }
    }
    throw;
  }
}

}  // namespace zt
