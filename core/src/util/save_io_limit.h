// A bound on each file operation of a checkpoint save, on the thread that saves.
//
// Why: a write, fsync or rename on a file system that stopped answering (an NFS server gone)
// blocks its thread with no timeout of its own. A load bounds each of its operations
// (FileIoDeadline, zt/host/file_io_deadline.h); a save that held the training thread (all of a
// synchronous one, the pieces an asynchronous one writes as they come) hung the job. Each
// operation is bounded, not the save: a large save on slow but working storage takes as long as
// it takes, 16 MiB at a time.
// While a SaveIoLimit lives on a thread, each SaveIoDeadline made on that thread watches its
// call (a FileIoDeadline of the limit); on other threads (the asynchronous writer, which the saver
// gives up on instead, and `trainer export`) a SaveIoDeadline watches nothing.
// Thread safety: both are per thread; neither may be shared.
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include "zt/host/file_io_deadline.h"

namespace zt::ckpt {

// Writes are made in chunks of at most this many bytes, each watched on its own.
inline constexpr int64_t kSaveIoChunkBytes = int64_t{16} << 20;

class SaveIoLimit {
 public:
  // `limit`: each operation's bound (0: none); `way_out`: what the line says to do.
  SaveIoLimit(std::chrono::milliseconds limit, std::string way_out);
  ~SaveIoLimit();
  SaveIoLimit(const SaveIoLimit&) = delete;
  SaveIoLimit& operator=(const SaveIoLimit&) = delete;

 private:
  friend class SaveIoDeadline;
  std::chrono::milliseconds limit_;
  std::string way_out_;
  const SaveIoLimit* outer_;  // the one it hides, back in force when it ends
};

class SaveIoDeadline {
 public:
  // `what`: e.g. "writing 16777216 bytes at offset 4096 of <file>".
  explicit SaveIoDeadline(const std::string& what);
  SaveIoDeadline(const SaveIoDeadline&) = delete;
  SaveIoDeadline& operator=(const SaveIoDeadline&) = delete;

 private:
  std::optional<FileIoDeadline> deadline_;
};

}  // namespace zt::ckpt
