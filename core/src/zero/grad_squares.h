// The global gradient norm's squares, taken one way wherever a gradient is: in compute memory
// (ShardedStep), or tile by tile as it is written to a tier (TierGradients) or streamed into the
// update (StreamedUpdate). Each element is squared in double (exact: a float's square fits a
// double's mantissa), what grad.to(kDouble).pow(2) gives, in a buffer of the process's scratch
// pool: a fresh one per group or tile was mapped and zero-filled by the kernel at every step, more
// memory traffic than the update's own.
// Thread safety: free functions; the pool is shared safely (scratch_buffers.h).
#pragma once

#include <ATen/core/Tensor.h>

namespace zt {

// `values` squared in double, 1-D, on `values`' device: at::sum of it adds as it would add
// values.to(kDouble).pow(2).
at::Tensor squares_in_double(const at::Tensor& values);
// The sum of `values`' squares in double (inf or nan when one is not finite).
double squared_sum(const at::Tensor& values);

}  // namespace zt
