// Bandwidth-optimal collective algorithms over a ucx::Transport, pipelined in chunks: a chunk
// is forwarded to the next rank as soon as it arrived, so ring steps overlap and large buffers
// stream at link speed. All take raw contiguous memory; the communicator handles tensors,
// dtypes and padding.
// Thread safety: as the Transport (one comm thread).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "ucx_transport.h"
#include "zt/communicator.h"

namespace zt::ucx {

enum class ElemType { kF32, kF64 };
size_t elem_size(ElemType type);

// The ranks a collective runs over: a communicator's members, each a rank of the Transport (a
// split communicator reuses its parent's endpoints). Tags carry member indices.
struct Group {
  std::vector<int> peers;  // transport rank of each member, in member order
  int rank = 0;            // this process's member index
  int size() const { return static_cast<int>(peers.size()); }
  int peer(int member) const { return peers[member]; }
};

// One collective's identity on the wire and in messages.
struct OpTag {
  uint32_t seq;      // same on every rank: Transport::op_seq of the op's index and kind
  std::string what;  // "all_reduce #7 (4.0 MiB)"
};

// out holds world blocks of block_bytes; this rank's block must already be in place.
void ring_all_gather(Transport& t, const Group& g, const OpTag& op, uint8_t* out,
                     size_t block_bytes, size_t chunk_bytes);

// out (block_elems) = op over ranks of block `rank` of in (world * block_elems).
// stage: (world - 1) * block_elems scratch. out may alias in's own block (in-place all_reduce).
void ring_reduce_scatter(Transport& t, const Group& g, const OpTag& op, const void* in, void* out,
                         void* stage, size_t block_elems, ElemType type, ReduceOp reduce,
                         size_t chunk_bytes);

// Block d of `in` goes to member d; block s of `out` arrives from member s (this rank's own block
// is copied). Every pair exchanges directly, chunked: member r sends to r + k while receiving
// from r - k, for k = 1 .. world - 1, all posted at once so the transport overlaps them.
void pairwise_all_to_all(Transport& t, const Group& g, const OpTag& op, const uint8_t* in,
                         uint8_t* out, size_t block_bytes, size_t chunk_bytes);

// buf (bytes) on every rank = root's buf; pipelined chain root -> root+1 -> ...
void chain_broadcast(Transport& t, const Group& g, const OpTag& op, uint8_t* buf, size_t bytes,
                     int root, size_t chunk_bytes);

// dst = a (reduce) b elementwise; dst may alias a or b. kAvg reduces as a sum.
void reduce_elements(void* dst, const void* a, const void* b, size_t n, ElemType type,
                     ReduceOp reduce);

}  // namespace zt::ucx
