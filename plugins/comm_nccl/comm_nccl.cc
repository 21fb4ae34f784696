// comm_nccl: the NCCL communication plugin. Collectives between CUDA tensors over NCCL (NVLink,
// PCIe, InfiniBand, sockets: whatever NCCL selects), on a stream of its own per communicator.
#include "nccl_communicator.h"
#include "zt/error.h"

namespace {

class NcclCommPlugin final : public zt::CommunicatorPlugin {
 public:
  std::vector<zt::OptionSpec> options() const override {
    return {
        zt::opt_bool("high_priority_stream", true,
                     "collectives run on a high-priority CUDA stream, so their kernels are "
                     "scheduled ahead of compute queued on the same GPU"),
    };
  }

  std::unique_ptr<zt::Communicator> create(const zt::Options& options,
                                           const zt::CommContext& ctx) const override {
    zt::nccl::CommOptions o;
    o.high_priority_stream = options.get_bool("high_priority_stream");
    return std::make_unique<zt::nccl::NcclCommunicator>(ctx, o);
  }
};

}  // namespace

ZT_PLUGIN(ZT_KIND_COMM, "comm_nccl", "0.1.0",
          "collectives over NCCL (CUDA tensors; NVLink, PCIe, InfiniBand, sockets)", NcclCommPlugin)
