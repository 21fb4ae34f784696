// What the multi-process tests read of the checkpoints a job wrote: a step's folder by name, and
// every value of every tensor and kind (reading checks every piece's crc32); and the checks that
// two runs trained alike: the same losses (metrics.jsonl), the same checkpointed bits.
// Include after doctest and test_util.h.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstring>
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

// Checks two checkpoints hold the same tensors, kinds and bits.
inline void check_same_state(const std::string& a, const std::string& b) {
  CheckpointReader ra(a), rb(b);
  REQUIRE(ra.kinds() == rb.kinds());
  REQUIRE(ra.tensors().size() == rb.tensors().size());
  CHECK(ra.kinds().size() >= 3);  // param, exp_avg, exp_avg_sq
  const auto va = all_values(ra), vb = all_values(rb);
  REQUIRE(va.size() == vb.size());
  size_t differing = 0;
  for (size_t i = 0; i < va.size(); ++i) {
    REQUIRE(va[i].size() == vb[i].size());
    if (std::memcmp(va[i].data(), vb[i].data(), va[i].size() * sizeof(float)) != 0) ++differing;
  }
  CHECK(differing == 0);
}

// `run`'s losses equal `reference`'s step for step, all `steps` of them (metrics.jsonl).
inline void check_same_losses(const std::string& reference, const std::string& run, size_t steps) {
  const auto expected = losses_of(reference + "/metrics.jsonl");
  const auto got = losses_of(run + "/metrics.jsonl");
  REQUIRE(expected.size() == steps);
  REQUIRE(got.size() == expected.size());
  for (size_t s = 0; s < got.size(); ++s) {
    INFO("step " << s + 1);
    CHECK(got[s] == expected[s]);
  }
}

}  // namespace zt::test
