// A world of one for unit tests: every op completes at once, as comm plugins do for one rank.
// It claims the device it is given (Communicator::device()); its ops never touch a device's
// memory beyond the copies a gather and a reduce-scatter of one rank are.
#pragma once

#include <ATen/ATen.h>

#include <memory>
#include <string>

#include "zt/communicator.h"
#include "zt/work.h"

namespace zt::test {

class SoloCommunicator final : public zt::Communicator {
 public:
  explicit SoloCommunicator(c10::Device device = c10::Device(c10::kCPU)) : device_(device) {}
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string name() const override { return "solo"; }
  c10::Device device() const override { return device_; }
  std::shared_ptr<zt::Work> all_gather(const at::Tensor& out, const at::Tensor& in) override {
    return zt::run_now([&] { out.copy_(in); });
  }
  std::shared_ptr<zt::Work> reduce_scatter(const at::Tensor& out, const at::Tensor& in,
                                           zt::ReduceOp) override {
    return zt::run_now([&] { out.copy_(in); });
  }
  std::shared_ptr<zt::Work> all_reduce(const at::Tensor&, zt::ReduceOp) override {
    return std::make_shared<zt::CompletedWork>();
  }
  std::shared_ptr<zt::Work> broadcast(const at::Tensor&, int) override {
    return std::make_shared<zt::CompletedWork>();
  }
  std::shared_ptr<zt::Work> barrier() override { return std::make_shared<zt::CompletedWork>(); }
  zt::CommStats stats() const override { return {}; }
  std::unique_ptr<zt::Communicator> split(int, int) override {
    return std::make_unique<SoloCommunicator>(device_);
  }

 private:
  c10::Device device_;
};

}  // namespace zt::test
