// One rank's file of one save (CheckpointRankWriter::Impl): the pieces the engine declares
// become the entries of a safetensors file; in-memory pieces of an asynchronous save are copied
// into the saver's snapshot buffer (laid out as the start of the file's data section, so it
// goes to disk in one large write), streamed pieces and every piece of a synchronous save go
// straight to the file. finish_file() does the rest (on the saver's writer thread when async).
// Thread safety: the engine's calls come from one thread; finish_file() runs after them, on
// one thread.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "checkpoint/checkpoint_manifest.h"
#include "util/posix_file.h"
#include "zt/host/checkpoint.h"
#include "zt/host/safetensors.h"

namespace zt {

namespace ckpt {

// Host memory an asynchronous save copies in-memory pieces into; kept by the saver and reused,
// so a save allocates only when the rank's in-memory bytes grew.
class SnapshotBuffer {
 public:
  // At least `bytes` of memory rounded up to kDirectAlignment, aligned to it so the snapshot can
  // go to disk with direct I/O (its contents are not kept). Throws IoError when the host has not
  // that much.
  char* reserve(int64_t bytes);

 private:
  struct Free {
    void operator()(char* p) const { std::free(p); }
  };
  std::unique_ptr<char, Free> data_;
  int64_t bytes_ = 0;
};

}  // namespace ckpt

class CheckpointRankWriter::Impl {
 public:
  struct Setup {
    std::string folder;  // the save's temporary folder (exists)
    int64_t step = 0;
    int rank = 0, world = 1;
    // The snapshot buffer for in-memory pieces; null: write everything straight to the file.
    std::shared_ptr<ckpt::SnapshotBuffer> snapshot;
  };
  explicit Impl(Setup setup);

  void add_tensor(const CheckpointTensor& tensor);
  int64_t declare(const CheckpointPiece& piece, bool streamed);
  void begin_data();
  void write(int64_t index, int64_t offset, const float* data, int64_t count);
  void set_counters(const EngineCounters& counters);

  // After the engine returned: every piece whole and the counters given. Throws InternalError
  // naming what is missing.
  void check_complete() const;
  // Writes the snapshot, computes its pieces' crc32s, fsyncs and closes the file, and returns
  // this rank's report. Throws IoError naming the file.
  ckpt::RankReport finish_file();

  const std::string& path() const { return path_; }
  int64_t file_bytes() const { return file_.file_bytes(); }

 private:
  void write_snapshot();

  struct Piece {
    CheckpointPiece piece;
    bool streamed = false;
    bool buffered = false;      // copied into the snapshot buffer
    int64_t entry = -1;         // index in the safetensors file
    int64_t buffer_offset = 0;  // bytes, when buffered
    int64_t written = 0;        // elements so far
    uint32_t crc32 = 0;         // of the bytes so far (direct pieces)
  };

  void add_entry(Piece& p);
  void check_free_space() const;
  Piece& piece_at(int64_t index, const char* call);

  Setup setup_;
  std::string file_name_, path_;
  std::vector<CheckpointTensor> tensors_;
  std::unordered_map<std::string, int64_t> numel_;
  std::vector<Piece> pieces_;
  SafetensorsWriter file_;
  std::unique_ptr<ckpt::SequentialDirectWriter> sequential_;  // pieces not in the snapshot
  char* buffer_ = nullptr;
  int64_t buffer_bytes_ = 0;
  bool data_started_ = false, counters_set_ = false;
  EngineCounters counters_;
};

}  // namespace zt
