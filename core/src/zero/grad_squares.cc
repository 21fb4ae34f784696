#include "zero/grad_squares.h"

#include <ATen/ATen.h>

#include "zero/scratch_buffers.h"

namespace zt {

at::Tensor squares_in_double(const at::Tensor& values) {
  at::Tensor sq = ScratchBuffers::process().get_per_step(values.numel(),
                                                         values.options().dtype(at::kDouble));
  sq.copy_(values.reshape({-1}));
  return sq.mul_(sq);
}

double squared_sum(const at::Tensor& values) {
  return squares_in_double(values).sum().item<double>();
}

}  // namespace zt
