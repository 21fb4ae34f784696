#include "compose/staged_communicator.h"

#include <ATen/ATen.h>

#include <utility>

#include "sdk/finishing_work.h"
#include "zt/error.h"

namespace zt {

namespace {

// `work`, and on its wait `out` = `host` unless they are one tensor.
std::shared_ptr<Work> copied_back(std::shared_ptr<Work> work, const at::Tensor& out,
                                  const at::Tensor& host) {
  if (!out.defined() || host.is_same(out)) return work;
  return finishing_work(std::move(work), [out, host] { out.copy_(host); });
}

}  // namespace

StagedCommunicator::StagedCommunicator(std::unique_ptr<Communicator> inner, c10::Device device)
    : inner_(std::move(inner)), device_(device) {
  if (!inner_ || !inner_->device().is_cpu()) {
    throw InternalError(
        "StagedCommunicator stages through host memory for a communicator of "
        "host memory, not " +
        (inner_ ? inner_->name() + " (" + inner_->device().str() + ")" : std::string("none")));
  }
}

std::string StagedCommunicator::describe() const {
  return inner_->describe() + "; tensors on " + device_.str() + " copied through " +
         (device_.is_cuda() ? "pinned " : "") + "host memory";
}

bool StagedCommunicator::staged(const at::Tensor& t) const {
  return t.defined() && t.device() == device_;
}

at::Tensor StagedCommunicator::host_like(const at::Tensor& t) const {
  return at::empty(t.sizes(),
                   at::TensorOptions().dtype(t.scalar_type()).pinned_memory(device_.is_cuda()));
}

at::Tensor StagedCommunicator::to_host(const at::Tensor& t) const {
  if (!staged(t)) return t;
  at::Tensor host = host_like(t);
  host.copy_(t);
  return host;
}

at::Tensor StagedCommunicator::host_output(const at::Tensor& t) const {
  return staged(t) ? host_like(t) : t;
}

std::shared_ptr<Work> StagedCommunicator::all_gather(const at::Tensor& out_flat,
                                                     const at::Tensor& in_shard) {
  at::Tensor host_out, host_in;
  // The in-place gather (stages 1-2): this rank's shard is already at its place in the output,
  // so the output goes over whole and the shard is its view there. A shard elsewhere in the
  // same storage (outside the output) goes on its own.
  const int64_t offset = in_shard.defined() && in_shard.is_alias_of(out_flat)
                             ? in_shard.storage_offset() - out_flat.storage_offset()
                             : -1;
  const bool in_place = staged(out_flat) && offset >= 0 && in_shard.is_contiguous() &&
                        out_flat.is_contiguous() && offset + in_shard.numel() <= out_flat.numel();
  if (in_place) {
    host_out = to_host(out_flat);
    host_in = host_out.narrow(0, offset, in_shard.numel());
  } else {
    host_out = host_output(out_flat);
    host_in = to_host(in_shard);
  }
  return copied_back(inner_->all_gather(host_out, host_in), out_flat, host_out);
}

std::shared_ptr<Work> StagedCommunicator::reduce_scatter(const at::Tensor& out_shard,
                                                         const at::Tensor& in_flat, ReduceOp op) {
  const at::Tensor host_out = host_output(out_shard);
  return copied_back(inner_->reduce_scatter(host_out, to_host(in_flat), op), out_shard, host_out);
}

std::shared_ptr<Work> StagedCommunicator::all_reduce(const at::Tensor& tensor, ReduceOp op) {
  const at::Tensor host = to_host(tensor);
  return copied_back(inner_->all_reduce(host, op), tensor, host);
}

std::shared_ptr<Work> StagedCommunicator::broadcast(const at::Tensor& tensor, int root) {
  const at::Tensor host = to_host(tensor);
  return copied_back(inner_->broadcast(host, root), tensor, host);
}

std::shared_ptr<Work> StagedCommunicator::all_to_all(const at::Tensor& out, const at::Tensor& in) {
  const at::Tensor host_out = host_output(out);
  return copied_back(inner_->all_to_all(host_out, to_host(in)), out, host_out);
}

std::unique_ptr<Communicator> StagedCommunicator::split(int color, int key) {
  std::unique_ptr<Communicator> part = inner_->split(color, key);
  if (!part) return nullptr;
  return std::make_unique<StagedCommunicator>(std::move(part), device_);
}

}  // namespace zt
