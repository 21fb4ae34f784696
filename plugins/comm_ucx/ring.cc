#include "ring.h"

#include <algorithm>

namespace zt::ucx {

namespace {

// Splits `bytes` into chunks of at most `chunk` bytes (a multiple of 8, so chunks hold whole
// elements), never more than the tag layout allows.
struct Chunks {
  size_t chunk;
  int count;
  Chunks(size_t bytes, size_t chunk_bytes) {
    chunk = std::max<size_t>(8, chunk_bytes / 8 * 8);
    size_t min_chunk = (bytes + Transport::kMaxChunksPerStep - 1) / Transport::kMaxChunksPerStep;
    chunk = std::max(chunk, (min_chunk + 7) / 8 * 8);
    count = static_cast<int>((bytes + chunk - 1) / chunk);
  }
  size_t offset(int k) const { return static_cast<size_t>(k) * chunk; }
  size_t length(int k, size_t bytes) const { return std::min(chunk, bytes - offset(k)); }
};

int mod(int a, int n) { return ((a % n) + n) % n; }

template <typename T, typename F>
void apply(T* __restrict dst, const T* a, const T* b, size_t n, F f) {
  for (size_t i = 0; i < n; ++i) dst[i] = f(a[i], b[i]);
}

template <typename T>
void reduce_typed(T* dst, const T* a, const T* b, size_t n, ReduceOp reduce) {
  switch (reduce) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg: apply(dst, a, b, n, [](T x, T y) { return x + y; }); break;
    case ReduceOp::kMax: apply(dst, a, b, n, [](T x, T y) { return x > y ? x : y; }); break;
    case ReduceOp::kMin: apply(dst, a, b, n, [](T x, T y) { return x < y ? x : y; }); break;
  }
}

}  // namespace

size_t elem_size(ElemType type) { return type == ElemType::kF32 ? 4 : 8; }

void reduce_elements(void* dst, const void* a, const void* b, size_t n, ElemType type,
                     ReduceOp reduce) {
  if (type == ElemType::kF32) {
    reduce_typed(static_cast<float*>(dst), static_cast<const float*>(a),
                 static_cast<const float*>(b), n, reduce);
  } else {
    reduce_typed(static_cast<double*>(dst), static_cast<const double*>(a),
                 static_cast<const double*>(b), n, reduce);
  }
}

void ring_all_gather(Transport& t, const Group& g, const OpTag& op, uint8_t* out,
                     size_t block_bytes, size_t chunk_bytes) {
  const int n = g.size(), r = g.rank;
  if (n == 1 || block_bytes == 0) return;
  const int right = g.peer(mod(r + 1, n)), left = g.peer(mod(r - 1, n));
  // Tags name the sender by its transport rank: unique among every communicator of the family.
  const int me = g.peer(r);
  const Chunks chunks(block_bytes, chunk_bytes);
  // Step s: send block (r - s) to the right, receive block (r - s - 1) from the left; a chunk
  // received in step s is forwarded in step s + 1 as soon as it lands.
  for (int s = 0; s + 1 < n; ++s) {
    uint8_t* block = out + static_cast<size_t>(mod(r - s - 1, n)) * block_bytes;
    for (int k = 0; k < chunks.count; ++k) {
      uint8_t* chunk = block + chunks.offset(k);
      size_t len = chunks.length(k, block_bytes);
      Transport::Handler forward;
      if (s + 2 < n) {
        forward = [&t, chunk, len, seq = op.seq, me, right, s, k] {
          t.post_send(right, chunk, len, Transport::make_tag(seq, me, s + 1, k));
        };
      }
      t.post_recv(left, chunk, len, Transport::make_tag(op.seq, left, s, k), std::move(forward));
    }
  }
  const uint8_t* mine = out + static_cast<size_t>(r) * block_bytes;
  for (int k = 0; k < chunks.count; ++k) {
    t.post_send(right, mine + chunks.offset(k), chunks.length(k, block_bytes),
                Transport::make_tag(op.seq, me, 0, k));
  }
  t.run(op.what, Transport::Waits::kChain, &g.peers);
}

void pairwise_all_to_all(Transport& t, const Group& g, const OpTag& op, const uint8_t* in,
                         uint8_t* out, size_t block_bytes, size_t chunk_bytes) {
  const int n = g.size(), r = g.rank;
  const size_t own = static_cast<size_t>(r) * block_bytes;
  std::copy(in + own, in + own + block_bytes, out + own);
  if (n == 1 || block_bytes == 0) return;
  const int me = g.peer(r);
  const Chunks chunks(block_bytes, chunk_bytes);
  // The tag's step is the distance k, which sender and receiver agree on.
  for (int k = 1; k < n; ++k) {
    const int from = mod(r - k, n), to = mod(r + k, n);
    uint8_t* into = out + static_cast<size_t>(from) * block_bytes;
    const uint8_t* send = in + static_cast<size_t>(to) * block_bytes;
    for (int c = 0; c < chunks.count; ++c) {
      const size_t off = chunks.offset(c), len = chunks.length(c, block_bytes);
      t.post_recv(g.peer(from), into + off, len, Transport::make_tag(op.seq, g.peer(from), k, c));
      t.post_send(g.peer(to), send + off, len, Transport::make_tag(op.seq, me, k, c));
    }
  }
  t.run(op.what);
}

void ring_reduce_scatter(Transport& t, const Group& g, const OpTag& op, const void* in, void* out,
                         void* stage, size_t block_elems, ElemType type, ReduceOp reduce,
                         size_t chunk_bytes) {
  const int n = g.size(), r = g.rank;
  const size_t es = elem_size(type), block_bytes = block_elems * es;
  const auto* in_bytes = static_cast<const uint8_t*>(in);
  if (n == 1) {
    if (out != in) std::copy(in_bytes, in_bytes + block_bytes, static_cast<uint8_t*>(out));
    return;
  }
  if (block_elems == 0) return;
  const int right = g.peer(mod(r + 1, n)), left = g.peer(mod(r - 1, n));
  // Tags name the sender by its transport rank: unique among every communicator of the family.
  const int me = g.peer(r);
  const Chunks chunks(block_bytes, chunk_bytes);
  // Step s: send the partial of block (r - s - 1), receive the partial of block (r - s - 2)
  // into stage[s], add this rank's contribution, and forward it in step s + 1. The last step
  // lands block r: out = stage + in[r] (in place when out aliases in[r]).
  for (int s = 0; s + 1 < n; ++s) {
    const bool last = s + 2 == n;
    const int b = mod(r - s - 2, n);
    uint8_t* staged = static_cast<uint8_t*>(stage) + static_cast<size_t>(s) * block_bytes;
    const uint8_t* contribution = in_bytes + static_cast<size_t>(b) * block_bytes;
    for (int k = 0; k < chunks.count; ++k) {
      size_t off = chunks.offset(k), len = chunks.length(k, block_bytes);
      uint8_t* dst = last ? static_cast<uint8_t*>(out) + off : staged + off;
      Transport::Handler combine = [&t, dst, src = staged + off, mine = contribution + off, len, es,
                                    type, reduce, last, seq = op.seq, me, right, s, k] {
        reduce_elements(dst, mine, src, len / es, type, reduce);
        if (!last) t.post_send(right, dst, len, Transport::make_tag(seq, me, s + 1, k));
      };
      t.post_recv(left, staged + off, len, Transport::make_tag(op.seq, left, s, k),
                  std::move(combine));
    }
  }
  const uint8_t* first = in_bytes + static_cast<size_t>(mod(r - 1, n)) * block_bytes;
  for (int k = 0; k < chunks.count; ++k) {
    t.post_send(right, first + chunks.offset(k), chunks.length(k, block_bytes),
                Transport::make_tag(op.seq, me, 0, k));
  }
  t.run(op.what, Transport::Waits::kChain, &g.peers);
}

void chain_broadcast(Transport& t, const Group& g, const OpTag& op, uint8_t* buf, size_t bytes,
                     int root, size_t chunk_bytes) {
  const int n = g.size(), r = g.rank;
  if (n == 1 || bytes == 0) return;
  const int pos = mod(r - root, n), next = g.peer(mod(r + 1, n)), prev = g.peer(mod(r - 1, n));
  const int me = g.peer(r);
  const Chunks chunks(bytes, chunk_bytes);
  for (int k = 0; k < chunks.count; ++k) {
    uint8_t* chunk = buf + chunks.offset(k);
    size_t len = chunks.length(k, bytes);
    if (pos == 0) {
      t.post_send(next, chunk, len, Transport::make_tag(op.seq, me, 0, k));
      continue;
    }
    Transport::Handler forward;
    if (pos + 1 < n) {
      forward = [&t, chunk, len, seq = op.seq, me, next, k] {
        t.post_send(next, chunk, len, Transport::make_tag(seq, me, 0, k));
      };
    }
    t.post_recv(prev, chunk, len, Transport::make_tag(op.seq, prev, 0, k), std::move(forward));
  }
  t.run(op.what, Transport::Waits::kChain);
}

}  // namespace zt::ucx
