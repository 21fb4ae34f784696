// Collectives on encoded bytes (ZeRO++): a codec (zt/codec.h) shrinks what crosses the link.
//   coded_all_gather      stage 3's parameter gather (qwZ): each rank encodes its shard once,
//                         the encoded shards are all-gathered, every rank decodes every shard
//                         (its own too, so all ranks compute with the same values).
//   coded_reduce_scatter  the gradient reduce-scatter in its all-to-all form (qgZ): each rank
//                         encodes the chunk of every other rank once, the chunks are exchanged
//                         all-to-all, and each rank decodes and sums what it received in fp32,
//                         in rank order, its own chunk taken exactly. Each element is encoded
//                         once per hop, where a ring would re-encode partial sums at every step.
// Error feedback (LoCo-style): with a residual, what encoding lost is kept and added to the next
// input before it is encoded, so the error does not accumulate over steps.
// Decoding runs in the Work's wait(), on the waiting thread: wait on the thread that issues the
// ops (the engine's training thread). The communicator moves bytes only: any comm plugin that
// has all_gather (and all_to_all, for gradients) works, MiCS groups too. A two-level gather
// (hierarchical_gather.h) codes only its level across hosts: the shards cross the link encoded
// and move decoded, exactly, within each host.
// Exported (ZT_API) for the multi-process test of them (tests/multiproc/coded_check.cc).
// Thread safety: as the communicator's ops; the codec is shared read-only.
#pragma once

#include <ATen/core/Tensor.h>

#include <memory>

#include "zt/api.h"
#include "zt/codec.h"
#include "zt/communicator.h"

namespace zt {

// As Communicator::all_gather, on the codec's encoding: out_flat (fp32 or bf16) holds every
// rank's decoded shard once the Work's wait() returned.
ZT_API std::shared_ptr<Work> coded_all_gather(Communicator& comm, const Codec& codec,
                                              const at::Tensor& out_flat,
                                              const at::Tensor& in_shard);

// As Communicator::reduce_scatter with op kSum or kAvg, on the codec's encoding.
//   residual: in/out, fp32, in_flat's length, or undefined for no error feedback: added to
//             in_flat before encoding, and set to what encoding lost (0 on this rank's chunk,
//             which is not encoded). Updated before this returns.
// Throws InternalError for another op, or a residual of the wrong length or dtype.
ZT_API std::shared_ptr<Work> coded_reduce_scatter(Communicator& comm, const Codec& codec,
                                                  const at::Tensor& out_shard,
                                                  const at::Tensor& in_flat, ReduceOp op,
                                                  const at::Tensor& residual);

// As Communicator::all_reduce with op kSum, on the codec's encoding, in the two hops each element
// takes: a coded reduce-scatter (all-to-all) of `tensor`'s chunks, waited for here, then a coded
// all-gather of the sums, whose Work is returned (every rank decodes every chunk alike, its own
// too). MiCS uses it across its groups.
//   tensor:   in/out, fp32 or bf16, any length.
//   residual: in/out, fp32 of ceil(numel / size()) * size() elements, or undefined: the error
//             feedback of the first hop (the second encodes sums, which no rank keeps).
// Throws InternalError for a residual of the wrong length or dtype; CommError from the first
// hop's wait.
ZT_API std::shared_ptr<Work> coded_all_reduce(Communicator& comm, const Codec& codec,
                                              const at::Tensor& tensor, const at::Tensor& residual);

}  // namespace zt
