#include "nccl_communicator.h"

#include <ATen/ATen.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <cuda_runtime_api.h>

#include <cstring>
#include <thread>

#include "nccl_work.h"
#include "zt/bytes.h"
#include "zt/error.h"
#include "zt/store.h"

namespace zt::nccl {

namespace {

static_assert(NCCL_VERSION_CODE >= NCCL_VERSION(2, 18, 0),
              "comm_nccl needs NCCL 2.18 or newer (non-blocking communicators, ncclCommSplit)");

void cuda_check(cudaError_t err, const std::string& what) {
  if (err == cudaSuccess) return;
  (void)cudaGetLastError();
  throw CommError(what + ": CUDA error " + cudaGetErrorName(err) + " (" + cudaGetErrorString(err) +
                  ")");
}

// The NCCL type that reduces `t`'s elements; nullopt for a dtype NCCL cannot reduce.
std::optional<ncclDataType_t> reduce_type(at::ScalarType t) {
  switch (t) {
    case at::kFloat: return ncclFloat32;
    case at::kDouble: return ncclFloat64;
    case at::kHalf: return ncclFloat16;
    case at::kBFloat16: return ncclBfloat16;
    case at::kInt: return ncclInt32;
    case at::kLong: return ncclInt64;
    case at::kByte: return ncclUint8;
    case at::kChar: return ncclInt8;
    default: return std::nullopt;
  }
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return ncclSum;
    case ReduceOp::kAvg: return ncclAvg;
    case ReduceOp::kMax: return ncclMax;
    case ReduceOp::kMin: return ncclMin;
  }
  return ncclSum;
}

// Bytes of `numel` elements of `t`'s dtype.
uint64_t bytes_of(const at::Tensor& t, int64_t numel) {
  return static_cast<uint64_t>(numel) * static_cast<uint64_t>(t.element_size());
}

std::string where(int rank, int world, int device) {
  return "comm_nccl rank " + std::to_string(rank) + " of " + std::to_string(world) +
         " on cuda:" + std::to_string(device);
}

}  // namespace

NcclCommunicator::NcclCommunicator(const CommContext& ctx, const CommOptions& options)
    : options_(options), rank_(ctx.rank), world_(ctx.world), timeout_(ctx.timeout) {
  if (ctx.store == nullptr) throw InternalError("comm_nccl: CommContext::store is null");
  int devices = 0;
  const cudaError_t counted = cudaGetDeviceCount(&devices);
  if (counted != cudaSuccess || devices < 1) {
    (void)cudaGetLastError();
    throw PluginError("comm_nccl: rank " + std::to_string(rank_) + " sees no CUDA GPU (" +
                      (counted != cudaSuccess ? std::string(cudaGetErrorString(counted))
                                              : std::string("cudaGetDeviceCount found none")) +
                      "); NCCL moves CUDA tensors between GPUs: run on GPUs, or use comm_ucx "
                      "for host memory (plugins.comm = \"comm_ucx\", or --set "
                      "plugins.comm=comm_ucx)");
  }
  device_ = ctx.local_rank % devices;
  const c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device_));

  // NCCL's unique id: made by rank 0, read by the others through the rendezvous store.
  ncclUniqueId id;
  const std::string key = ctx.store_prefix + "comm_nccl/unique_id";
  if (rank_ == 0) {
    const ncclResult_t made = ncclGetUniqueId(&id);
    if (made != ncclSuccess) {
      throw CommError("comm_nccl: rank 0 could not make NCCL's unique id (" +
                      nccl_error_text(made, nullptr) + "); check NCCL_SOCKET_IFNAME");
    }
    const auto* raw = reinterpret_cast<const uint8_t*>(&id);
    ctx.store->set(key, std::vector<uint8_t>(raw, raw + sizeof(id)));
  } else {
    const std::vector<uint8_t> value = ctx.store->get(key, timeout_);
    if (value.size() != sizeof(id)) {
      throw CommError("comm_nccl: the store's '" + key + "' holds " + std::to_string(value.size()) +
                      " bytes, not an NCCL unique id (" + std::to_string(sizeof(id)) +
                      "): every rank must run comm_nccl");
    }
    std::memcpy(&id, value.data(), sizeof(id));
  }

  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;  // so that joining, and every call after, can be bounded
  ncclComm_t comm = nullptr;
  const ncclResult_t started = ncclCommInitRankConfig(&comm, world_, id, rank_, &config);
  if (comm == nullptr) {
    throw CommError("comm_nccl: rank " + std::to_string(rank_) + " could not start joining (" +
                    nccl_error_text(started, nullptr) + ")");
  }
  state_ = std::make_shared<NcclState>(comm, where(rank_, world_, device_), timeout_);
  const std::string joining = "joining the NCCL communicator of " + std::to_string(world_) +
                              " ranks";
  const ncclResult_t joined = state_->settle(started, joining);
  if (joined != ncclSuccess) {
    std::string reason = joined == ncclInProgress ? state_->failure()
                                                  : nccl_error_text(joined, comm);
    if (reason.find("Duplicate GPU") != std::string::npos) {
      reason += "; NCCL needs one GPU per rank: give each rank its own (CUDA_VISIBLE_DEVICES, "
                "more GPUs) or use comm_ucx";
    }
    state_->fail(reason);
    throw CommError("comm_nccl: rank " + std::to_string(rank_) +
                    " on cuda:" + std::to_string(device_) + " failed " + joining + ": " + reason);
  }
  stream_ = c10::cuda::getStreamFromPool(options_.high_priority_stream,
                                         static_cast<c10::DeviceIndex>(device_));
  barrier_flag_ = at::zeros({1}, at::TensorOptions().dtype(at::kInt).device(at::Device(
                                     at::kCUDA, static_cast<c10::DeviceIndex>(device_))));
}

NcclCommunicator::NcclCommunicator(ncclComm_t comm, int device, const CommOptions& options,
                                   std::chrono::milliseconds timeout)
    : options_(options), device_(device), timeout_(timeout) {
  const c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device_));
  state_ = std::make_shared<NcclState>(comm, "comm_nccl split on cuda:" + std::to_string(device),
                                       timeout_);
  const ncclResult_t joined = state_->settle(ncclInProgress, "joining a split communicator");
  if (joined != ncclSuccess) {
    const std::string reason = joined == ncclInProgress ? state_->failure()
                                                        : nccl_error_text(joined, comm);
    state_->fail(reason);
    throw CommError("comm_nccl: a split communicator on cuda:" + std::to_string(device_) +
                    " did not form: " + reason);
  }
  if (ncclCommUserRank(comm, &rank_) != ncclSuccess ||
      ncclCommCount(comm, &world_) != ncclSuccess) {
    throw CommError("comm_nccl: NCCL did not report a split communicator's rank and size");
  }
  stream_ = c10::cuda::getStreamFromPool(options_.high_priority_stream,
                                         static_cast<c10::DeviceIndex>(device_));
  barrier_flag_ = at::zeros({1}, at::TensorOptions().dtype(at::kInt).device(at::Device(
                                     at::kCUDA, static_cast<c10::DeviceIndex>(device_))));
}

// The NCCL communicator goes with the last Work that still holds its state (NcclState).
NcclCommunicator::~NcclCommunicator() = default;

std::string NcclCommunicator::describe() const {
  int version = 0;
  ncclGetVersion(&version);
  cudaDeviceProp prop{};
  const bool named = cudaGetDeviceProperties(&prop, device_) == cudaSuccess;
  return "comm_nccl: NCCL " + std::to_string(version / 10000) + "." +
         std::to_string(version / 100 % 100) + "." + std::to_string(version % 100) +
         " on cuda:" + std::to_string(device_) +
         (named ? std::string(" (") + prop.name + ")" : std::string()) + ", " +
         (options_.high_priority_stream ? "high" : "normal") + "-priority comm stream";
}

void NcclCommunicator::check_tensor(const char* op, const char* role, const at::Tensor& t,
                                    bool reduce) const {
  const std::string name = std::string("comm_nccl ") + op + ": " + role;
  if (!t.defined()) throw InternalError(name + " is undefined");
  if (!t.is_cuda()) {
    throw InternalError("comm_nccl does not support " + t.device().str() + " tensors (" + name +
                        "): it moves CUDA tensors; use comm_ucx for host memory");
  }
  if (t.device().index() != device_) {
    throw InternalError(name + " is on " + t.device().str() +
                        ", this communicator's GPU is cuda:" + std::to_string(device_));
  }
  if (!t.is_contiguous()) throw InternalError(name + " is not contiguous");
  if (reduce && !reduce_type(t.scalar_type())) {
    throw InternalError(std::string("comm_nccl does not support reducing ") +
                        std::string(c10::toString(t.scalar_type())) + " (" + name + ")");
  }
}

std::string NcclCommunicator::op_name(CommOp op, uint64_t bytes) const {
  return std::string("comm_nccl ") + comm_op_name(op) + " #" + std::to_string(next_seq_) + " (" +
         size_text(static_cast<int64_t>(bytes)) + ") on rank " + std::to_string(rank_);
}

void NcclCommunicator::call(ncclResult_t result, const std::string& what) {
  const ncclResult_t settled = state_->settle(result, what);
  if (settled == ncclSuccess) return;
  if (settled != ncclInProgress) {
    state_->fail("NCCL refused it (" + nccl_error_text(settled, state_->comm()) + ")");
  }
  throw CommError(what + " failed: " + state_->failure() + " (" + state_->what() +
                  "; the communicator is unusable, restart the job)");
}

std::shared_ptr<Work> NcclCommunicator::issue(
    CommOp op, uint64_t bytes, uint64_t wire_bytes, std::vector<at::Tensor> keep,
    const std::function<void(const std::string& what)>& body) {
  const std::string what = op_name(op, bytes);
  ++next_seq_;
  {
    std::lock_guard<std::mutex> lock(stats_mutex_);
    stats_[op].calls += 1;
    stats_[op].bytes += bytes;
    stats_[op].wire_bytes += wire_bytes;
  }
  const std::string failure = state_->failure();
  if (!failure.empty()) {
    return std::make_shared<CompletedWork>(
        std::make_exception_ptr(CommError(what + " was not run: the communicator failed earlier (" +
                                          failure + "); restart the job")));
  }
  try {
    const c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device_));
    const cudaStream_t comm_stream = stream_->stream();
    // The comm stream waits, on the GPU, for what the caller's stream queued (the producer).
    cudaEvent_t ready = nullptr;
    cuda_check(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming), what);
    const cudaStream_t producer =
        c10::cuda::getCurrentCUDAStream(static_cast<c10::DeviceIndex>(device_)).stream();
    cudaError_t ordered = cudaEventRecord(ready, producer);
    if (ordered == cudaSuccess) ordered = cudaStreamWaitEvent(comm_stream, ready, 0);
    cudaEventDestroy(ready);
    cuda_check(ordered, what + ": ordering the comm stream after the caller's");
    {
      const c10::cuda::CUDAStreamGuard on_comm(*stream_);
      body(what);
    }
    // The caching allocator must not hand these blocks out again before the comm stream is
    // done with them, whoever drops the last reference first.
    for (const at::Tensor& t : keep) {
      c10::cuda::CUDACachingAllocator::recordStream(t.storage().data_ptr(), *stream_);
    }
    cudaEvent_t done = nullptr;
    cuda_check(cudaEventCreateWithFlags(&done, cudaEventDisableTiming), what);
    const cudaError_t recorded = cudaEventRecord(done, comm_stream);
    if (recorded != cudaSuccess) cudaEventDestroy(done);
    cuda_check(recorded, what + ": recording its completion");
    return std::make_shared<NcclWork>(done, state_, std::move(keep), what);
  } catch (const CommError&) {
    return std::make_shared<CompletedWork>(std::current_exception());
  }
}

std::shared_ptr<Work> NcclCommunicator::all_gather(const at::Tensor& out_flat,
                                                   const at::Tensor& in_shard) {
  check_tensor("all_gather", "out_flat", out_flat, false);
  check_tensor("all_gather", "in_shard", in_shard, false);
  if (in_shard.scalar_type() != out_flat.scalar_type()) {
    throw InternalError("comm_nccl all_gather: in_shard is " +
                        std::string(c10::toString(in_shard.scalar_type())) + ", out_flat " +
                        std::string(c10::toString(out_flat.scalar_type())));
  }
  const int64_t numel = out_flat.numel();
  const int64_t own = flat_shard(numel, world_, rank_).size();
  if (in_shard.numel() != own) {
    throw InternalError("comm_nccl all_gather: in_shard has " + std::to_string(in_shard.numel()) +
                        " elements; rank " + std::to_string(rank_) + "'s shard of " +
                        std::to_string(numel) + " over " + std::to_string(world_) + " has " +
                        std::to_string(own));
  }
  const int64_t shard = padded_shard_numel(numel, world_);
  // Any dtype moves as bytes: NCCL need not know it to gather it.
  const size_t shard_bytes = bytes_of(out_flat, shard);
  const uint64_t wire = world_ > 1 ? static_cast<uint64_t>(world_ - 1) * shard_bytes : 0;
  std::vector<at::Tensor> keep = {out_flat, in_shard};
  return issue(CommOp::kAllGather, bytes_of(out_flat, numel), wire, keep,
               [&](const std::string& what) {
    const cudaStream_t s = stream_->stream();
    if (shard * world_ == numel) {
      call(ncclAllGather(in_shard.data_ptr(), out_flat.data_ptr(), shard_bytes, ncclUint8,
                         state_->comm(), s),
           what);
      return;
    }
    // NCCL gathers equal counts: pad this rank's shard and the result.
    at::Tensor in_pad = at::zeros({shard}, out_flat.options());
    in_pad.narrow(0, 0, own).copy_(in_shard);
    at::Tensor out_pad = at::empty({shard * world_}, out_flat.options());
    call(ncclAllGather(in_pad.data_ptr(), out_pad.data_ptr(), shard_bytes, ncclUint8,
                       state_->comm(), s),
         what);
    out_flat.copy_(out_pad.narrow(0, 0, numel));
  });
}

std::shared_ptr<Work> NcclCommunicator::reduce_scatter(const at::Tensor& out_shard,
                                                       const at::Tensor& in_flat, ReduceOp op) {
  check_tensor("reduce_scatter", "out_shard", out_shard, true);
  check_tensor("reduce_scatter", "in_flat", in_flat, true);
  if (in_flat.scalar_type() != out_shard.scalar_type()) {
    throw InternalError("comm_nccl reduce_scatter: in_flat is " +
                        std::string(c10::toString(in_flat.scalar_type())) + ", out_shard " +
                        std::string(c10::toString(out_shard.scalar_type())));
  }
  const int64_t numel = in_flat.numel();
  const int64_t own = flat_shard(numel, world_, rank_).size();
  if (out_shard.numel() != own) {
    throw InternalError("comm_nccl reduce_scatter: out_shard has " +
                        std::to_string(out_shard.numel()) + " elements; rank " +
                        std::to_string(rank_) + "'s shard of " + std::to_string(numel) + " over " +
                        std::to_string(world_) + " has " + std::to_string(own));
  }
  const int64_t shard = padded_shard_numel(numel, world_);
  const ncclDataType_t type = *reduce_type(in_flat.scalar_type());
  const uint64_t wire = world_ > 1 ? static_cast<uint64_t>(world_ - 1) * bytes_of(in_flat, shard)
                                   : 0;
  std::vector<at::Tensor> keep = {out_shard, in_flat};
  return issue(CommOp::kReduceScatter, bytes_of(in_flat, numel), wire, keep,
               [&](const std::string& what) {
    const cudaStream_t s = stream_->stream();
    if (shard * world_ == numel) {
      call(ncclReduceScatter(in_flat.data_ptr(), out_shard.data_ptr(), static_cast<size_t>(shard),
                             type, nccl_op(op), state_->comm(), s),
           what);
      return;
    }
    // Zeros pad the tail: they never reach a real element of any shard.
    at::Tensor in_pad = at::zeros({shard * world_}, in_flat.options());
    in_pad.narrow(0, 0, numel).copy_(in_flat);
    at::Tensor out_pad = at::empty({shard}, in_flat.options());
    call(ncclReduceScatter(in_pad.data_ptr(), out_pad.data_ptr(), static_cast<size_t>(shard), type,
                           nccl_op(op), state_->comm(), s),
         what);
    out_shard.copy_(out_pad.narrow(0, 0, own));
  });
}

std::shared_ptr<Work> NcclCommunicator::all_reduce(const at::Tensor& tensor, ReduceOp op) {
  check_tensor("all_reduce", "tensor", tensor, true);
  const int64_t numel = tensor.numel();
  const ncclDataType_t type = *reduce_type(tensor.scalar_type());
  // A ring all-reduce: a reduce-scatter and an all-gather of ceil(n / world) elements each.
  const uint64_t wire = world_ > 1 ? 2 * static_cast<uint64_t>(world_ - 1) *
                                         bytes_of(tensor, padded_shard_numel(numel, world_))
                                   : 0;
  return issue(CommOp::kAllReduce, bytes_of(tensor, numel), wire, {tensor},
               [&](const std::string& what) {
    call(ncclAllReduce(tensor.data_ptr(), tensor.data_ptr(), static_cast<size_t>(numel), type,
                       nccl_op(op), state_->comm(), stream_->stream()),
         what);
  });
}

std::shared_ptr<Work> NcclCommunicator::broadcast(const at::Tensor& tensor, int root) {
  check_tensor("broadcast", "tensor", tensor, false);
  if (root < 0 || root >= world_) {
    throw InternalError("comm_nccl broadcast: root " + std::to_string(root) + " is not a rank of " +
                        std::to_string(world_));
  }
  const uint64_t bytes = bytes_of(tensor, tensor.numel());
  // A ring broadcast: every rank but the root's predecessor forwards the whole tensor.
  const uint64_t wire = world_ > 1 && rank_ != (root + world_ - 1) % world_ ? bytes : 0;
  return issue(CommOp::kBroadcast, bytes, wire, {tensor}, [&](const std::string& what) {
    call(ncclBroadcast(tensor.data_ptr(), tensor.data_ptr(), static_cast<size_t>(bytes), ncclUint8,
                       root, state_->comm(), stream_->stream()),
         what);
  });
}

std::shared_ptr<Work> NcclCommunicator::barrier() {
  const uint64_t wire = world_ > 1 ? 2 * static_cast<uint64_t>(world_ - 1) * 4 : 0;
  return issue(CommOp::kBarrier, 4, wire, {barrier_flag_}, [&](const std::string& what) {
    call(ncclAllReduce(barrier_flag_.data_ptr(), barrier_flag_.data_ptr(), 1, ncclInt32, ncclSum,
                       state_->comm(), stream_->stream()),
         what);
  });
}

CommStats NcclCommunicator::stats() const {
  std::lock_guard<std::mutex> lock(stats_mutex_);
  return stats_;
}

std::unique_ptr<Communicator> NcclCommunicator::split(int color, int key) {
  if (color < kSplitNoColor) {
    throw InternalError("comm_nccl split: color " + std::to_string(color) +
                        " (a color is >= 0, or kSplitNoColor)");
  }
  const std::string failure = state_->failure();
  if (failure.empty() == false) {
    throw CommError("comm_nccl split on rank " + std::to_string(rank_) +
                    ": the communicator failed earlier (" + failure + "); restart the job");
  }
  const c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device_));
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t child = nullptr;
  const std::string what = "comm_nccl split (color " + std::to_string(color) + ") on rank " +
                           std::to_string(rank_);
  call(ncclCommSplit(state_->comm(), color == kSplitNoColor ? NCCL_SPLIT_NOCOLOR : color, key,
                     &child, &config),
       what);
  if (color == kSplitNoColor) return nullptr;
  // A non-blocking split hands the new communicator out when NCCL's own thread has made it,
  // which can be after the parent settled (seen on an H100 with NCCL 2.28): wait for it, bounded.
  const auto deadline = std::chrono::steady_clock::now() + timeout_;
  while (__atomic_load_n(&child, __ATOMIC_ACQUIRE) == nullptr) {
    if (std::chrono::steady_clock::now() >= deadline) {
      state_->fail(what + " gave no communicator within " + std::to_string(timeout_.count()) +
                   " ms (launch.timeout_s): a peer did not join the split");
      throw CommError(what + " failed: " + state_->failure() + " (" + state_->what() +
                      "; the communicator is unusable, restart the job)");
    }
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  return std::unique_ptr<Communicator>(new NcclCommunicator(child, device_, options_, timeout_));
}

}  // namespace zt::nccl
