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

}  // namespace zt
