#include "ucx_communicator.h"

#include <ATen/ATen.h>

#include <cstdio>

#include "zt/bytes.h"
#include "zt/comm_split.h"
#include "zt/error.h"
#include "zt/tensor_checks.h"

namespace zt::ucx {

namespace {

void require(bool ok, const std::string& message) {
  if (!ok) throw InternalError("comm_ucx: " + message);
}

void check_tensor(const at::Tensor& t, const char* op, const char* role) {
  check_host_tensor(t, std::string("comm_ucx: ") + op + ": " + role + " tensor",
                    "comm_ucx does not support that: it moves host memory (use comm_nccl for "
                    "CUDA tensors)");
}

// The dtype reductions run in: fp32/fp64 as is, bf16/fp16 in fp32.
at::ScalarType accumulate_type(at::ScalarType t, const char* op) {
  switch (t) {
    case at::kFloat:
    case at::kBFloat16:
    case at::kHalf: return at::kFloat;
    case at::kDouble: return at::kDouble;
    default:
      throw InternalError(std::string("comm_ucx does not support dtype ") + at::toString(t) +
                          " in " + op + " (supported: float32, float64, bfloat16, float16)");
  }
}

ElemType elem_type(at::ScalarType t) { return t == at::kDouble ? ElemType::kF64 : ElemType::kF32; }

uint8_t* bytes_of(const at::Tensor& t) { return static_cast<uint8_t*>(t.data_ptr()); }

}  // namespace

CommFamily::CommFamily(const CommContext& ctx, const CommOptions& o)
    : store(ctx.store), timeout(ctx.timeout), options(o) {
  if (ctx.store == nullptr) throw InternalError("comm_ucx: CommContext.store is null");
  transport = std::make_unique<Transport>(ctx, o.transport);
  executor = std::make_unique<SerialExecutor>();
}

CommFamily::~CommFamily() {
  // What failed ops still own (their tensors, the scratch they used) outlives the transport,
  // whose teardown cancels the transfers that may still write into it: freed earlier, a
  // rendezvous receive completing late wrote into the heap.
  // Taken once the queue has run: an op failing while the executor drains is retained too.
  executor->drain();
  std::vector<SerialExecutor::Task> failed_ops = executor->take_retained();
  executor.reset();
  transport.reset();
  failed_ops.clear();
  failed_buffers.clear();
}

namespace {

Group whole_world(const CommContext& ctx) {
  Group g;
  for (int r = 0; r < ctx.world; ++r) g.peers.push_back(r);
  g.rank = ctx.rank;
  return g;
}

}  // namespace

UcxCommunicator::UcxCommunicator(const CommContext& ctx, const CommOptions& options)
    : UcxCommunicator(std::make_shared<CommFamily>(ctx, options), whole_world(ctx),
                      ctx.store_prefix) {}

UcxCommunicator::UcxCommunicator(std::shared_ptr<CommFamily> family, Group group,
                                 std::string prefix)
    : family_(std::move(family)),
      transport_(*family_->transport),
      options_(family_->options),
      group_(std::move(group)),
      prefix_(std::move(prefix)),
      rank_(group_.rank),
      world_(group_.size()),
      timeout_(family_->timeout) {
  open_window();
}

void UcxCommunicator::on_comm_thread(const std::function<void()>& fn) {
  auto done = std::make_shared<FutureWork>("comm_ucx: " + prefix_, 2 * timeout_);
  family_->executor->submit([fn, done] {
    try {
      fn();
      done->complete();
    } catch (...) {
      done->complete(std::current_exception());
    }
  });
  done->wait();
}

void UcxCommunicator::open_window() {
  if (!options_.shared_memory || world_ == 1) return;
  // The task builds into state of its own, not into `this`: when the wait below gives up, the
  // constructor throws and this object is gone while the task may still run (the family's
  // transport and store, which it uses, outlive it: the family drains its comm thread first).
  struct Opened {
    std::unique_ptr<ShmWindow> window;
    std::unique_ptr<ShmCollectives> collectives;
  };
  auto opened = std::make_shared<Opened>();
  on_comm_thread([opened, &transport = transport_, group = group_, &store = *family_->store,
                  prefix = prefix_ + "shm/", timeout = timeout_, bytes = options_.shm_bytes] {
    opened->window = ShmWindow::create(transport, group, store, prefix, timeout, bytes);
    if (opened->window)
      opened->collectives = std::make_unique<ShmCollectives>(*opened->window, group, timeout);
  });
  shm_window_ = std::move(opened->window);
  shm_ = std::move(opened->collectives);
}

UcxCommunicator::~UcxCommunicator() {
  // Collective shutdown: once every rank passed this barrier nobody sends to us any more.
  if (!transport_.broken()) {
    try {
      barrier()->wait();
    } catch (const std::exception&) {
      // Already broken or a peer left: the transport closes endpoints forcibly.
    }
  }
  // Nothing of ours may still run on the family's comm thread once this object goes: its
  // queued ops and the barrier above hold `this`, and a stalled op that ends late still writes
  // its counters and scratch here. Every op there ends within launch.timeout_s of no progress
  // (and fails fast once the transport is broken), so this fence comes; returning before it
  // did once wrote into the freed communicator (a split's, its family still alive).
  auto fenced = std::make_shared<FutureWork>("comm_ucx close " + prefix_, 2 * timeout_);
  family_->executor->submit([this, fenced] {
    shm_.reset();
    shm_window_.reset();
    fenced->complete();
  });
  for (bool said = false;;) {
    try {
      fenced->wait();
      break;
    } catch (const std::exception&) {
      if (!said) {
        std::fprintf(stderr,
                     "zt: comm_ucx: closing waits for its comm thread, still in an earlier op "
                     "that makes progress past launch.timeout_s\n");
        said = true;
      }
    }
  }
}

std::unique_ptr<Communicator> UcxCommunicator::split(int color, int key) {
  const int index = splits_++;
  const SplitMembers mine = exchange_split(*this, color, key);
  if (mine.rank < 0) return nullptr;
  Group group;
  for (int m : mine.members) group.peers.push_back(group_.peer(m));
  group.rank = mine.rank;
  return std::unique_ptr<Communicator>(new UcxCommunicator(
      family_, std::move(group),
      prefix_ + "split" + std::to_string(index) + "/" + std::to_string(color) + "/"));
}

std::shared_ptr<Work> UcxCommunicator::submit(CommOp kind, uint64_t bytes,
                                              std::function<void(const OpTag&)> body) {
  // Each op owns two sequence numbers (all_reduce runs two phases), so an op's tags differ from
  // the communicator's other ops' (a split's op of the same number and kind shares them: the
  // family's single issue order keeps the two apart, README). Its kind is part of them, checked
  // by each receive (Transport::op_seq).
  const uint32_t index = next_index_++;
  const uint32_t seq = Transport::op_seq(index, kind);
  {
    std::lock_guard<std::mutex> lock(stats_mutex_);
    stats_[kind].calls += 1;
    stats_[kind].bytes += bytes;
  }
  // A split names this process by its job rank too: its member index is another job rank's.
  const std::string who = world_ == transport_.world()
                              ? "rank " + std::to_string(rank_) + " of " + std::to_string(world_)
                              : "job rank " + std::to_string(group_.peer(rank_)) + ", member " +
                                    std::to_string(rank_) + " of " + std::to_string(world_);
  OpTag tag{seq, std::string(comm_op_name(kind)) + " #" + std::to_string(index) + " (" +
                     size_text(static_cast<int64_t>(bytes)) + ", " + who + ")"};
  // The comm thread fails a stalled op after `timeout_` without progress, naming the silent
  // peer; a caller's plain wait() allows longer so that precise error is the one it sees.
  auto work = std::make_shared<FutureWork>("comm_ucx " + tag.what,
                                           2 * timeout_ + std::chrono::seconds(1));
  family_->executor->submit([this, work, tag, kind, body = std::move(body)] {
    try {
      if (transport_.broken()) {
        throw CommError("comm_ucx is unusable after an earlier failure (" +
                        transport_.broken_reason() + "); restart the job");
      }
      auto sent = [this] {
        return transport_.wire_bytes_sent() + (shm_ ? shm_->published_bytes() : 0);
      };
      uint64_t sent_before = sent();
      body(tag);
      {
        std::lock_guard<std::mutex> lock(stats_mutex_);
        stats_[kind].wire_bytes += sent() - sent_before;
      }
      work->complete();
    } catch (const std::exception& e) {
      if (!transport_.broken()) transport_.mark_broken(e.what());
      keep_scratch_until_closed();
      work->complete(std::current_exception());
      throw;  // the executor retains the closure: its tensors may still be UCX's
    } catch (...) {
      if (!transport_.broken()) transport_.mark_broken("unknown failure");
      keep_scratch_until_closed();
      work->complete(std::current_exception());
      throw;  // the executor retains the closure: its tensors may still be UCX's
    }
  });
  return work;
}

std::shared_ptr<Work> UcxCommunicator::all_gather(const at::Tensor& out_flat,
                                                  const at::Tensor& in_shard) {
  check_tensor(out_flat, "all_gather", "output");
  check_tensor(in_shard, "all_gather", "input");
  check_shard_of(in_shard, out_flat, "comm_ucx: all_gather", "input", "output", world_, rank_);
  // Flat views (the tensors are contiguous): the ops slice and copy along one dimension.
  return submit(CommOp::kAllGather, out_flat.nbytes(),
                [this, out = out_flat.view(-1), in = in_shard.view(-1)](const OpTag& tag) {
    run_all_gather(tag, out, in);
  });
}

at::Tensor UcxCommunicator::scratch(Scratch slot, int64_t numel, at::ScalarType dtype) {
  at::Tensor& buf = scratch_[slot];
  const int64_t bytes = numel * static_cast<int64_t>(c10::elementSize(dtype));
  if (!buf.defined() || buf.nbytes() < static_cast<size_t>(bytes)) {
    buf = at::empty({std::max<int64_t>(bytes, 64)}, at::kByte);
  }
  return buf.narrow(0, 0, bytes).view(dtype);
}

void UcxCommunicator::keep_scratch_until_closed() {
  for (at::Tensor& buf : scratch_) {
    if (buf.defined()) family_->failed_buffers.push_back(std::move(buf));
    buf = at::Tensor();
  }
}

// Copies `src` into the head of `dst` and zeroes the padding after it.
static void copy_padded(const at::Tensor& dst, const at::Tensor& src) {
  dst.narrow(0, 0, src.numel()).copy_(src);
  if (dst.numel() > src.numel()) dst.narrow(0, src.numel(), dst.numel() - src.numel()).zero_();
}

void UcxCommunicator::run_all_gather(const OpTag& tag, at::Tensor out, at::Tensor in) {
  const int64_t c = padded_shard_numel(out.numel(), world_);
  const bool padded = c * world_ != out.numel();
  at::Tensor full = padded ? scratch(kGather, c * world_, out.scalar_type()) : out;
  at::Tensor slot = full.narrow(0, c * rank_, in.numel());
  if (slot.data_ptr() != in.data_ptr()) slot.copy_(in);
  const size_t block_bytes = static_cast<size_t>(c) * full.element_size();
  if (shm_) shm_->all_gather(tag.what, bytes_of(full), block_bytes);
  else ring_all_gather(transport_, group_, tag, bytes_of(full), block_bytes, options_.chunk_bytes);
  if (padded) out.copy_(full.narrow(0, 0, out.numel()));
}

std::shared_ptr<Work> UcxCommunicator::reduce_scatter(const at::Tensor& out_shard,
                                                      const at::Tensor& in_flat, ReduceOp op) {
  check_tensor(out_shard, "reduce_scatter", "output");
  check_tensor(in_flat, "reduce_scatter", "input");
  accumulate_type(in_flat.scalar_type(), "reduce_scatter");
  check_shard_of(out_shard, in_flat, "comm_ucx: reduce_scatter", "output", "input", world_, rank_);
  return submit(CommOp::kReduceScatter, in_flat.nbytes(),
                [this, out = out_shard.view(-1), in = in_flat.view(-1), op](const OpTag& tag) {
    run_reduce_scatter(tag, out, in, op);
  });
}

void UcxCommunicator::run_reduce_scatter(const OpTag& tag, at::Tensor out, at::Tensor in,
                                         ReduceOp op) {
  const at::ScalarType acc = accumulate_type(in.scalar_type(), "reduce_scatter");
  const int64_t c = padded_shard_numel(in.numel(), world_);
  at::Tensor work_in = in;
  if (acc != in.scalar_type() || c * world_ != in.numel()) {
    work_in = scratch(kWork, c * world_, acc);
    copy_padded(work_in, in);
  }
  const bool direct = acc == out.scalar_type() && out.numel() == c;
  at::Tensor work_out = direct ? out : scratch(kGather, c, acc);
  if (shm_) {
    shm_->reduce_scatter(tag.what, work_in.data_ptr(), work_out.data_ptr(), static_cast<size_t>(c),
                         elem_type(acc), op);
  } else {
    at::Tensor stage = scratch(kStage, c * (world_ - 1), acc);
    ring_reduce_scatter(transport_, group_, tag, work_in.data_ptr(), work_out.data_ptr(),
                        stage.data_ptr(), static_cast<size_t>(c), elem_type(acc), op,
                        options_.chunk_bytes);
  }
  if (op == ReduceOp::kAvg) work_out.div_(world_);
  if (!direct) out.copy_(work_out.narrow(0, 0, out.numel()));
}

std::shared_ptr<Work> UcxCommunicator::all_reduce(const at::Tensor& tensor, ReduceOp op) {
  check_tensor(tensor, "all_reduce", "input");
  accumulate_type(tensor.scalar_type(), "all_reduce");
  return submit(CommOp::kAllReduce, tensor.nbytes(),
                [this, t = tensor.view(-1), op](const OpTag& tag) { run_all_reduce(tag, t, op); });
}

void UcxCommunicator::run_all_reduce(const OpTag& tag, at::Tensor tensor, ReduceOp op) {
  const at::ScalarType acc = accumulate_type(tensor.scalar_type(), "all_reduce");
  const int64_t c = padded_shard_numel(tensor.numel(), world_);
  const bool in_place = acc == tensor.scalar_type() && c * world_ == tensor.numel();
  at::Tensor work = tensor;
  if (!in_place) {
    work = scratch(kWork, c * world_, acc);
    copy_padded(work, tensor);
  }
  if (shm_) {
    shm_->all_reduce(tag.what, work.data_ptr(), static_cast<size_t>(c), elem_type(acc), op);
    if (op == ReduceOp::kAvg) work.div_(world_);
    if (!in_place) tensor.copy_(work.narrow(0, 0, tensor.numel()));
    return;
  }
  // Reduce-scatter into this rank's block of `work` (in place), then all-gather the blocks.
  at::Tensor mine = work.narrow(0, c * rank_, c);
  at::Tensor stage = scratch(kStage, c * (world_ - 1), acc);
  ring_reduce_scatter(transport_, group_, tag, work.data_ptr(), mine.data_ptr(), stage.data_ptr(),
                      static_cast<size_t>(c), elem_type(acc), op, options_.chunk_bytes);
  if (op == ReduceOp::kAvg) mine.div_(world_);
  // 16-bit tensors gather in their own dtype: every rank rounds the same fp32 sums the same way.
  at::Tensor gathered = work;
  if (!in_place && tensor.scalar_type() != acc) {
    gathered = scratch(kGather, c * world_, tensor.scalar_type());
    gathered.narrow(0, c * rank_, c).copy_(mine);
  }
  // The gather phase uses the second of the two sequence numbers each op owns.
  ring_all_gather(transport_, group_, OpTag{tag.seq + 1, tag.what}, bytes_of(gathered),
                  static_cast<size_t>(c) * gathered.element_size(), options_.chunk_bytes);
  if (!in_place) tensor.copy_(gathered.narrow(0, 0, tensor.numel()));
}

std::shared_ptr<Work> UcxCommunicator::broadcast(const at::Tensor& tensor, int root) {
  check_tensor(tensor, "broadcast", "input");
  require(root >= 0 && root < world_, "broadcast: root " + std::to_string(root) +
                                          " is not a rank of this " + std::to_string(world_) +
                                          "-rank communicator");
  return submit(CommOp::kBroadcast, tensor.nbytes(), [this, t = tensor, root](const OpTag& tag) {
    if (shm_) shm_->broadcast(tag.what, bytes_of(t), t.nbytes(), root);
    else
      chain_broadcast(transport_, group_, tag, bytes_of(t), t.nbytes(), root, options_.chunk_bytes);
  });
}

std::shared_ptr<Work> UcxCommunicator::all_to_all(const at::Tensor& out, const at::Tensor& in) {
  check_tensor(out, "all_to_all", "output");
  check_tensor(in, "all_to_all", "input");
  require(out.numel() == in.numel() && out.scalar_type() == in.scalar_type(),
          "all_to_all: output (" + std::to_string(out.numel()) + " x " +
              at::toString(out.scalar_type()) + ") and input (" + std::to_string(in.numel()) +
              " x " + at::toString(in.scalar_type()) + ") must have one length and dtype");
  require(in.numel() % world_ == 0, "all_to_all: input of " + std::to_string(in.numel()) +
                                        " elements is not " + std::to_string(world_) +
                                        " equal blocks");
  const auto* a = bytes_of(in);
  const auto* b = bytes_of(out);
  require(in.numel() == 0 || a + in.nbytes() <= b || b + out.nbytes() <= a,
          "all_to_all: output overlaps input");
  return submit(CommOp::kAllToAll, in.nbytes(), [this, out, in](const OpTag& tag) {
    // Over the transport even on one host: UCX's own shared-memory transports carry it, and
    // the shared window's collectives are all-to-all's opposite (every rank reads every block).
    pairwise_all_to_all(transport_, group_, tag, bytes_of(in), bytes_of(out), in.nbytes() / world_,
                        options_.chunk_bytes);
  });
}

std::shared_ptr<Work> UcxCommunicator::barrier() {
  return submit(CommOp::kBarrier, 0, [this](const OpTag& tag) {
    if (shm_) {
      shm_->barrier(tag.what);
      return;
    }
    at::Tensor token = at::ones({world_}, at::kFloat);
    run_all_reduce(tag, token, ReduceOp::kSum);
  });
}

std::string UcxCommunicator::describe() const {
  std::string who = "comm_ucx";
  if (world_ != transport_.world()) {
    who += " (split: job ranks";
    for (int i = 0; i < world_; ++i) who += (i ? "," : " ") + std::to_string(group_.peer(i));
    who += ")";
  }
  if (world_ == 1) return who + ": one rank, no transfers";
  if (shm_) {
    return who + ": UCX-mapped shared memory between the " + std::to_string(world_) +
           " ranks of this host (" + std::to_string(shm_window_->capacity() >> 10) +
           " KiB window per rank)";
  }
  return who + ": pipelined ring over UCX tagged messages (" +
         std::to_string(options_.chunk_bytes >> 10) + " KiB chunks)";
}

CommStats UcxCommunicator::stats() const {
  std::lock_guard<std::mutex> lock(stats_mutex_);
  return stats_;
}

}  // namespace zt::ucx
