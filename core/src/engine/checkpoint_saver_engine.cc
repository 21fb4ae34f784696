// CheckpointSaver::save for an Engine: the engine fills this rank's part (kept apart from the
// saver so the saver itself, and its tests, need no engine).
#include "checkpoint/checkpoint_saver.h"
#include "zt/host/engine.h"

namespace zt {

void CheckpointSaver::save(Engine& engine, int64_t step, const CheckpointMeta& meta) {
  CheckpointSaverAccess::save(
      *this, [&engine](CheckpointRankWriter& writer) { engine.save_checkpoint(writer); }, step,
      meta);
}

}  // namespace zt
