#include "zt/host/rank_agreement.h"

#include <ATen/ATen.h>

#include "zt/communicator.h"
#include "zt/work.h"

namespace zt {

float max_over_ranks(Communicator& comm, float value) {
  at::Tensor t = at::full({1}, value, at::kFloat);
  all_reduce_host(comm, t, ReduceOp::kMax);
  return t.item<float>();
}

int highest_failed_rank(Communicator& comm, bool failed) {
  return static_cast<int>(max_over_ranks(comm, failed ? comm.rank() + 1.0f : 0.0f)) - 1;
}

uint64_t fingerprint_of(const std::string& text) {
  uint64_t h = 1469598103934665603ULL;
  for (const unsigned char c : text) h = (h ^ c) * 1099511628211ULL;
  return h;
}

int first_rank_differing(Communicator& comm, uint64_t fingerprint) {
  const int world = comm.size();
  if (world == 1) return -1;
  const at::Tensor all = at::empty({world}, at::kLong);
  all_gather_host(comm, all, at::full({1}, static_cast<int64_t>(fingerprint), at::kLong));
  const int64_t* values = all.data_ptr<int64_t>();
  for (int r = 1; r < world; ++r) {
    if (values[r] != values[0]) return r;
  }
  return -1;
}

}  // namespace zt
