// The JSON documents of a checkpoint: each rank's report of what it wrote (sent to rank 0
// through the Store) and manifest.json, which rank 0 assembles from them. docs/checkpoints.md
// describes both fields for people writing tools.
// Thread safety: plain values and pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "zt/host/checkpoint.h"

namespace zt::ckpt {

constexpr const char* kFormatName = "zt-checkpoint";
constexpr int64_t kFormatVersion = 1;

struct PieceRecord {
  CheckpointPiece piece;
  std::string file;    // rank file name, in the checkpoint folder
  int64_t offset = 0;  // byte offset of the piece's first element in that file
  uint32_t crc32 = 0;  // of the piece's bytes
};

struct FileRecord {
  std::string name;
  int64_t bytes = 0;
  int64_t header_bytes = 0;  // the safetensors header section, length prefix included
  uint32_t header_crc32 = 0;
};

// One rank's part of a save, or the reason it has none (`error` not empty).
struct RankReport {
  int rank = 0;
  std::string error;       // the failure's message
  std::string error_kind;  // Error::kind_name() of the failure ("io", ...)
  FileRecord file;
  std::vector<PieceRecord> pieces;
  std::vector<CheckpointTensor> tensors;
  EngineCounters counters;
};

struct Manifest {
  int64_t version = kFormatVersion;
  std::string zt_version;
  int64_t step = 0;
  int world = 1;
  std::string created;  // UTC, ISO 8601
  CheckpointMeta meta;
  EngineCounters counters;
  std::vector<CheckpointTensor> tensors;
  std::vector<FileRecord> files;  // rank order
  std::vector<PieceRecord> pieces;
};

std::string report_to_json(const RankReport& report);
// Throws InternalError when `text` is not a report (a bug: only zt writes them).
RankReport report_from_json(const std::string& text);

// The manifest of `reports` (one per rank, rank order), stamped with this zt's version and the
// time now. Throws InternalError when meta.trainer_state is not a JSON object.
Manifest assemble_manifest(int64_t step, const CheckpointMeta& meta,
                           const std::vector<RankReport>& reports);
std::string manifest_to_json(const Manifest& manifest);
// Throws ConfigError naming `path` for text that is not a zt checkpoint manifest, or one of a
// newer format version.
Manifest manifest_from_json(const std::string& text, const std::string& path);

}  // namespace zt::ckpt
