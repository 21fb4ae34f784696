#include "zero/coded_collectives.h"

#include <ATen/ATen.h>

#include <algorithm>

#include "sdk/finishing_work.h"
#include "zero/hierarchical_gather.h"
#include "zero/scratch_buffers.h"
#include "zt/error.h"

namespace zt {

namespace {

uint8_t* bytes(const at::Tensor& t) { return static_cast<uint8_t*>(t.data_ptr()); }
float* floats(const at::Tensor& t) { return t.data_ptr<float>(); }

// Staging buffers kept from call to call (scratch_buffers.h says why).
at::Tensor scratch(int64_t numel, at::ScalarType dtype) {
  return ScratchBuffers::process().get(numel, dtype);
}

// `t` as a contiguous fp32 tensor of `padded` elements, zeros after its own.
at::Tensor padded_fp32(const at::Tensor& t, int64_t padded) {
  if (t.scalar_type() == at::kFloat && t.numel() == padded && t.is_contiguous()) return t;
  at::Tensor out = scratch(padded, at::kFloat);
  out.narrow(0, 0, t.numel()).copy_(t.reshape({-1}));
  out.narrow(0, t.numel(), padded - t.numel()).zero_();
  return out;
}

}  // namespace

std::shared_ptr<Work> coded_all_gather(Communicator& comm, const Codec& codec,
                                       const at::Tensor& out_flat, const at::Tensor& in_shard) {
  // A two-level gather codes only its level across hosts; within a host the values move exact.
  if (auto* two_level = dynamic_cast<HierarchicalGather*>(&comm))
    return two_level->coded_all_gather(out_flat, in_shard, codec);
  const int world = comm.size(), rank = comm.rank();
  const int64_t total = out_flat.numel(), c = padded_shard_numel(total, world);
  const int64_t block = codec.encoded_bytes(c);
  at::Tensor encoded = scratch(block * world, at::kByte);
  codec.encode(floats(padded_fp32(in_shard, c)), c, bytes(encoded) + block * rank);
  auto inner = comm.all_gather(encoded, encoded.narrow(0, block * rank, block));
  // The codec outlives the op (the engine's codecs outlive the engine, which waits for its ops).
  return finishing_work(std::move(inner), [=, &codec] {
    const bool direct = out_flat.scalar_type() == at::kFloat && total == c * world;
    at::Tensor decoded = direct ? out_flat : scratch(c * world, at::kFloat);
    for (int r = 0; r < world; ++r)
      codec.decode(bytes(encoded) + block * r, c, floats(decoded) + c * r);
    if (!direct) out_flat.copy_(decoded.narrow(0, 0, total));
  });
}

std::shared_ptr<Work> coded_reduce_scatter(Communicator& comm, const Codec& codec,
                                           const at::Tensor& out_shard, const at::Tensor& in_flat,
                                           ReduceOp op, const at::Tensor& residual) {
  if (op != ReduceOp::kSum && op != ReduceOp::kAvg) {
    throw InternalError(std::string("coded_reduce_scatter: ") + reduce_op_name(op) +
                        " is not a sum; a codec carries sums only");
  }
  const int world = comm.size(), rank = comm.rank();
  const int64_t total = in_flat.numel(), c = padded_shard_numel(total, world);
  if (residual.defined() && (residual.scalar_type() != at::kFloat || residual.numel() != total)) {
    throw InternalError("coded_reduce_scatter: the residual must be fp32 of " +
                        std::to_string(total) + " elements");
  }
  // x = in + residual, padded to world chunks of c: what this rank sends.
  at::Tensor x = scratch(c * world, at::kFloat);
  at::Tensor head = x.narrow(0, 0, total);
  // One pass where both are fp32; bf16 gradients are widened in place first (add_out would make
  // a temporary fp32 copy of them, the allocation the kept buffers avoid).
  if (residual.defined() && in_flat.scalar_type() == at::kFloat) {
    at::add_out(head, in_flat.reshape({-1}), residual);
  } else {
    head.copy_(in_flat.reshape({-1}));
    if (residual.defined()) head.add_(residual);
  }
  x.narrow(0, total, c * world - total).zero_();
  const int64_t block = codec.encoded_bytes(c);
  at::Tensor send = scratch(block * world, at::kByte);
  at::Tensor recv = scratch(block * world, at::kByte);
  send.narrow(0, block * rank, block).zero_();  // this rank's own chunk is not encoded
  for (int d = 0; d < world; ++d)
    if (d != rank) codec.encode(floats(x) + c * d, c, bytes(send) + block * d);
  if (residual.defined()) {
    // What was meant less what the receivers will decode, chunk by chunk: the next step's
    // residual (its own chunk, sent exactly, loses nothing: x - x).
    at::Tensor decoded = scratch(c, at::kFloat);
    for (int d = 0; d < world; ++d) {
      const int64_t begin = c * d, n = std::min(c, total - begin);
      if (n <= 0) break;
      at::Tensor next = residual.narrow(0, begin, n);  // the caller's storage, written in place
      const at::Tensor meant = x.narrow(0, begin, n);
      if (d != rank) codec.decode(bytes(send) + block * d, c, floats(decoded));
      at::sub_out(next, meant, d != rank ? decoded.narrow(0, 0, n) : meant);
    }
  }
  auto inner = comm.all_to_all(recv, send);
  // send is held until the decode too: the pool must not lend its buffer again while the op may
  // still read it (comm_ucx keeps its tensors until the op ends; the interface does not promise).
  return finishing_work(std::move(inner), [=, &codec] {
    (void)send;
    at::Tensor sum = scratch(c, at::kFloat).zero_();
    at::Tensor part = scratch(c, at::kFloat);
    for (int s = 0; s < world; ++s) {
      if (s == rank) {
        sum.add_(x.narrow(0, c * rank, c));
        continue;
      }
      codec.decode(bytes(recv) + block * s, c, floats(part));
      sum.add_(part);
    }
    if (op == ReduceOp::kAvg) sum.div_(world);
    out_shard.copy_(sum.narrow(0, 0, out_shard.numel()));
  });
}

std::shared_ptr<Work> coded_all_reduce(Communicator& comm, const Codec& codec,
                                       const at::Tensor& tensor, const at::Tensor& residual) {
  const int world = comm.size();
  const int64_t total = tensor.numel(), c = padded_shard_numel(total, world);
  // coded_reduce_scatter copies its input before it returns, so `tensor` may be that input.
  const at::Tensor full = padded_fp32(tensor, c * world);
  at::Tensor mine = scratch(c, at::kFloat);
  coded_reduce_scatter(comm, codec, mine, full, ReduceOp::kSum, residual)->wait();
  at::Tensor sums = scratch(c * world, at::kFloat);
  auto gather = coded_all_gather(comm, codec, sums, mine);
  return finishing_work(std::move(gather),
                        [=] { tensor.copy_(sums.narrow(0, 0, total).view(tensor.sizes())); });
}

}  // namespace zt
