// The Adam/AdamW update of optim_hybrid_adam on GPU memory: one fused multi-tensor kernel that
// computes, element for element, exactly what the AVX2/AVX-512 kernels compute on the host
// (adam_simd.h: LibTorch 1.13's fp32 operations in LibTorch's order, fused into one multiply-add
// exactly where adam_kernel.h fuses (the L2 term, m, v and the denominator), every other step
// correctly rounded and unfused).
//
// Multi-tensor: one launch updates many shards. Their pointers and lengths travel in the
// kernel's argument block (no host-to-device copy, no allocation); each block of threads finds
// its shard by a binary search over the shards' first block numbers and updates one chunk of
// kCudaAdamChunk elements, with 16-byte vector loads and stores where all of that shard's
// buffers are aligned for them. Shards beyond one argument block's capacity, or longer than a
// segment, are split over further launches on the same stream.
//
// This header needs no CUDA header: the stream is a cudaStream_t passed as void*. The kernel
// is compiled only when CMake finds a CUDA toolkit (adam_cuda.cu).
// Thread safety: adam_update_cuda only enqueues work on `stream` and touches no host state; it
// may be called from several threads with disjoint buffers.
#pragma once

#include <cstddef>
#include <cstdint>

#include "adam_kernel.h"

namespace zt::hybrid_adam {

// Elements one block of threads updates: the unit shards are cut into.
inline constexpr int64_t kCudaAdamChunk = 8192;
// Shard pieces (segments) one launch's argument block holds (it stays under CUDA's 4 KB limit
// for kernel parameters, which every driver and GPU accepts).
inline constexpr int kCudaAdamMaxSegments = 64;
// Longest segment: a shard longer than this is split into several (int32 indexing inside one).
inline constexpr int64_t kCudaAdamMaxSegmentNumel = int64_t{1} << 30;

// How launches are cut. The defaults are the fastest; tests shrink them to exercise splitting.
struct CudaAdamLimits {
  int max_segments = kCudaAdamMaxSegments;               // 1..kCudaAdamMaxSegments per launch
  int64_t max_segment_numel = kCudaAdamMaxSegmentNumel;  // a positive multiple of kCudaAdamChunk,
                                                         // at most kCudaAdamMaxSegmentNumel
};

// What adam_update_cuda did.
struct CudaAdamStatus {
  int cuda_error = 0;          // cudaError_t of the first failed CUDA call; 0 = none
  const char* what = nullptr;  // static text naming the problem; nullptr when ok()
  int launches = 0;            // kernel launches enqueued
  bool ok() const { return what == nullptr; }
};

// Enqueues one Adam/AdamW step of every shard in `shards[0, count)` on `stream` (a
// cudaStream_t; nullptr = the legacy default stream) of the current CUDA device, and returns
// without waiting for it. Every buffer must be device memory of that device (or memory it can
// address), `numel` elements long, with param_type fp32 (bf16 masters are the host kernels'
// only), grad_type fp32/bf16/fp16 and, when copy_out is given, copy_type bf16 or fp16; shards
// must not overlap. Shards of 0 elements are skipped. Shards of
// different gradient and copy-out types are grouped, one kernel instance per group.
// On a bad argument (a type above, a null buffer, a buffer not aligned to its element size, bad
// limits) nothing is enqueued and `what` says which; a failed launch gives cuda_error and
// cudaGetErrorString's text, after the launches before it were enqueued. Errors of the kernel
// itself surface on the stream later, as with any CUDA kernel.
CudaAdamStatus adam_update_cuda(const AdamBuffers* shards, size_t count,
                                const AdamConstants& constants, void* stream,
                                const CudaAdamLimits& limits = {});

}  // namespace zt::hybrid_adam
