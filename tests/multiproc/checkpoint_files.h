// What the multi-process tests read of the checkpoints a job wrote: a step's folder by name, and
// every value of every tensor and kind (reading checks every piece's crc32); and the checks that
// two runs trained alike: the same losses (metrics.jsonl), the same checkpointed bits, or the
// same checkpointed values up to the order of a sum.
// Include after doctest and test_util.h.
#pragma once

#include <cmath>
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

// Checks two checkpoints hold the same training state: the same step, engine counters (the loss
// scaler's, the optimizer's step count and state dtypes), trainer state (data position,
// schedule, RNG) and tensors, kinds and bits.
inline void check_same_state(const std::string& a, const std::string& b) {
  CheckpointReader ra(a), rb(b);
  CHECK(ra.step() == rb.step());
  const EngineCounters ca = ra.counters(), cb = rb.counters();
  CHECK(ca.optimizer_steps == cb.optimizer_steps);
  CHECK(std::memcmp(&ca.loss_scale, &cb.loss_scale, sizeof(double)) == 0);
  CHECK(ca.clean_steps == cb.clean_steps);
  CHECK(ca.hysteresis_left == cb.hysteresis_left);
  CHECK(ca.state_dtype == cb.state_dtype);
  CHECK(ca.master_dtype == cb.master_dtype);
  CHECK(std::memcmp(&ca.residual_unit, &cb.residual_unit, sizeof(double)) == 0);
  CHECK(ca.unscalable_in_a_row == cb.unscalable_in_a_row);
  CHECK(ra.meta().trainer_state == rb.meta().trainer_state);
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

// Checks two checkpoints of runs that sum their gradients in other orders (another stage,
// strategy or world size) hold the same step, optimizer step count and tensors and kinds, every
// element within the fp32 tolerance the engine oracle allows against its reference: 1e-6 +
// 1e-5 |b| for the parameters; for every other kind (optimizer states, whose values may all be
// far below 1e-6), 1e-5 of the tensor's mean |b| in place of 1e-6.
inline void check_close_state(const std::string& a, const std::string& b) {
  CheckpointReader ra(a), rb(b);
  CHECK(ra.step() == rb.step());
  CHECK(ra.counters().optimizer_steps == rb.counters().optimizer_steps);
  REQUIRE(ra.kinds() == rb.kinds());
  REQUIRE(ra.tensors().size() == rb.tensors().size());
  CHECK(ra.kinds().size() >= 3);  // param, exp_avg, exp_avg_sq
  for (const auto& kind : ra.kinds()) {
    for (const auto& tensor : ra.tensors()) {
      const int64_t n = tensor.numel();
      REQUIRE(rb.find_tensor(tensor.name) != nullptr);
      REQUIRE(rb.find_tensor(tensor.name)->numel() == n);
      std::vector<float> va(static_cast<size_t>(n)), vb(static_cast<size_t>(n));
      ra.read(tensor.name, kind, 0, n, va.data());
      rb.read(tensor.name, kind, 0, n, vb.data());
      double mean = 0;
      for (const float v : vb) mean += std::abs(static_cast<double>(v)) / static_cast<double>(n);
      const double atol = kind == "param" ? 1e-6 : 1e-5 * mean;
      int64_t outside = 0, worst = -1;
      double worst_excess = 0;
      for (int64_t i = 0; i < n; ++i) {
        const double x = va[static_cast<size_t>(i)], y = vb[static_cast<size_t>(i)];
        const double excess = std::abs(x - y) - (atol + 1e-5 * std::abs(y));
        // A NaN fails: !(excess <= 0).
        if (!(excess <= 0)) {
          ++outside;
          if (worst < 0 || !(excess <= worst_excess)) worst = i, worst_excess = excess;
        }
      }
      INFO(kind << " of " << tensor.name << ": " << outside << " of " << n
                << " elements outside the tolerance, the worst element " << worst << ": "
                << (worst >= 0 ? va[static_cast<size_t>(worst)] : 0.0f) << " vs "
                << (worst >= 0 ? vb[static_cast<size_t>(worst)] : 0.0f));
      CHECK(outside == 0);
    }
  }
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
