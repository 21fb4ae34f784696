#include "zero/tile_pipeline.h"

namespace zt {

TilePipeline::TilePipeline(bool pipeline_read, bool pipeline_write, EngineClock& clock)
    : read_ahead_(pipeline_read),
      write_behind_(pipeline_write),
      sets_(1 + (pipeline_read ? 1 : 0) + (pipeline_write ? 1 : 0)),
      clock_(clock),
      reads_(sets_),
      writes_(sets_) {}

// Buffers must outlive their I/O, also when the owner is torn down by an error.
TilePipeline::~TilePipeline() { abandon(); }

void TilePipeline::wait(Works& works, TimeField field) {
  for (auto& w : works) clock_.wait(*w, field);
  works.clear();
}

void TilePipeline::run(int64_t tiles, const IoFn& read, const ComputeFn& compute, const IoFn& write,
                       bool settle_writes) {
  auto set_of = [&](int64_t tile) { return static_cast<int>((next_set_ + tile) % sets_); };
  // A set is read into only once the tile that used it before has been written back.
  auto start_read = [&](int64_t tile) {
    const int set = set_of(tile);
    wait(writes_[set], &EngineTimes::write_wait);
    read(tile, set, reads_[set]);
  };
  try {
    if (tiles > 0) start_read(0);
    for (int64_t tile = 0; tile < tiles; ++tile) {
      const int set = set_of(tile);
      if (read_ahead_ && tile + 1 < tiles) start_read(tile + 1);
      wait(reads_[set], &EngineTimes::read_wait);
      compute(tile, set);
      write(tile, set, writes_[set]);
      if (!write_behind_) wait(writes_[set], &EngineTimes::write_wait);
      if (!read_ahead_ && tile + 1 < tiles) start_read(tile + 1);
    }
    next_set_ = set_of(tiles);
    if (settle_writes) settle();
  } catch (...) {
    abandon();
    throw;
  }
}

void TilePipeline::settle() {
  try {
    for (int set = 0; set < sets_; ++set) {
      wait(reads_[set], &EngineTimes::read_wait);
      wait(writes_[set], &EngineTimes::write_wait);
    }
  } catch (...) {
    abandon();
    throw;
  }
}

// Waits out everything still in flight, ignoring its errors (the first one is already on its
// way up, or the owner is going away).
void TilePipeline::abandon() {
  for (auto* per_set : {&reads_, &writes_}) {
    for (auto& works : *per_set) {
      for (auto& w : works) {
        try {
          w->wait();
        } catch (...) {
        }
      }
      works.clear();
    }
  }
}

}  // namespace zt
