// StagedCommunicator: a communicator that moves host memory (comm_ucx) serving tensors on a
// device. Each data op copies its inputs on that device into host tensors, runs the inner op on
// them, and when the op is waited for copies the host results into the outputs. device() is
// the device, so the engine keeps its buffers there.
//
// Why: NCCL refuses two ranks on one GPU, so ZeRO at world >= 2 on one GPU (and any job whose
// ranks outnumber its GPUs) goes through host memory. The copies are synchronous: the issuing
// thread waits for the device to produce an input, and the waiting thread for the output's copy
// (for a CUDA device the host tensors are pinned, so each copy is one DMA). Tensors already in
// host memory, which the small agreements of all_reduce_host pass, go to the inner op as they
// are, unless the device is the CPU itself: then every tensor is staged, which is how the CPU
// suite runs this code.
//
// Thread safety: as the inner communicator's: driven from one thread, its Work handles waited on
// from any.
#pragma once

#include <memory>
#include <string>

#include "zt/communicator.h"

namespace zt {

class StagedCommunicator : public Communicator {
 public:
  //   inner:  in, a communicator of host memory (device() the CPU); owned.
  //   device: in, the device whose tensors the ops take.
  StagedCommunicator(std::unique_ptr<Communicator> inner, c10::Device device);

  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  std::string name() const override { return inner_->name(); }
  std::string describe() const override;
  c10::Device device() const override { return device_; }

  std::shared_ptr<Work> all_gather(const at::Tensor& out_flat, const at::Tensor& in_shard) override;
  std::shared_ptr<Work> reduce_scatter(const at::Tensor& out_shard, const at::Tensor& in_flat,
                                       ReduceOp op) override;
  std::shared_ptr<Work> all_reduce(const at::Tensor& tensor, ReduceOp op) override;
  std::shared_ptr<Work> broadcast(const at::Tensor& tensor, int root) override;
  std::shared_ptr<Work> all_to_all(const at::Tensor& out, const at::Tensor& in) override;
  std::shared_ptr<Work> barrier() override { return inner_->barrier(); }
  CommStats stats() const override { return inner_->stats(); }
  // The inner communicator's split, staged for the same device (null stays null).
  std::unique_ptr<Communicator> split(int color, int key) override;

 private:
  // Whether `t` is copied through host memory: a tensor on the device.
  bool staged(const at::Tensor& t) const;
  // An uninitialised host tensor of t's shape and dtype (pinned for a CUDA device).
  at::Tensor host_like(const at::Tensor& t) const;
  // t's values in host memory, for an input: a copy when staged, else t itself.
  at::Tensor to_host(const at::Tensor& t) const;
  // Where the inner op writes an output: a host tensor like t when staged, else t itself.
  at::Tensor host_output(const at::Tensor& t) const;

  std::unique_ptr<Communicator> inner_;
  c10::Device device_;
};

}  // namespace zt
