// The core-internal way into CheckpointSaver: a save whose pieces come from a function instead
// of an Engine, so tests (and tools) can write real checkpoints without building an engine.
// CheckpointSaver::save(Engine&, ...) is this with Engine::save_checkpoint as the function.
// Thread safety: as CheckpointSaver::save (the training thread).
#pragma once

#include <cstdint>
#include <functional>

#include "zt/api.h"
#include "zt/host/checkpoint.h"

namespace zt {

class ZT_API CheckpointSaverAccess {
 public:
  // Declares this rank's tensors and pieces, calls begin_data(), writes every piece and sets
  // the counters, as Engine::save_checkpoint does.
  using Fill = std::function<void(CheckpointRankWriter&)>;
  // CheckpointSaver::save with `fill` in the engine's place; same contract and errors.
  static void save(CheckpointSaver& saver, const Fill& fill, int64_t step,
                   const CheckpointMeta& meta);
};

}  // namespace zt
