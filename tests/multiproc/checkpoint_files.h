// What the multi-process tests read of the checkpoints a job wrote: a step's folder by name, and
// every value of every tensor and kind (reading checks every piece's crc32).
#pragma once

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "zt/host/checkpoint.h"

namespace zt::test {

// dir/step-<8 digits>, as checkpoint.dir names a step's folder.
inline std::string step_folder(const std::filesystem::path& dir, int64_t step) {
  char name[32];
  std::snprintf(name, sizeof(name), "step-%08lld", static_cast<long long>(step));
  return (dir / name).string();
}

// Every element of every tensor and kind of a checkpoint, kind by kind.
inline std::vector<std::vector<float>> all_values(const CheckpointReader& reader) {
  std::vector<std::vector<float>> values;
  for (const auto& kind : reader.kinds()) {
    for (const auto& tensor : reader.tensors()) {
      std::vector<float> v(static_cast<size_t>(tensor.numel()));
      reader.read(tensor.name, kind, 0, tensor.numel(), v.data());
      values.push_back(std::move(v));
    }
  }
  return values;
}

}  // namespace zt::test
