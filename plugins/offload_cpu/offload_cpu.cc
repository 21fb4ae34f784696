// offload_cpu: the host-memory offload tier (ZeRO-Offload's CPU placement). Optimizer states,
// fp32 master weights or parameter shards placed here live in page-aligned (or, beside a CUDA
// device, pinned) host memory and are updated in place by the CPU optimizer.
#include <memory>
#include <string>
#include <vector>

#include "host_tier.h"
#include "zt/offload.h"

namespace {

class OffloadCpuPlugin final : public zt::OffloadPlugin {
 public:
  std::vector<zt::OptionSpec> options() const override {
    return {
        zt::opt_bool("pin_memory", true,
                     "page-lock the memory when a CUDA device computes (faster, asynchronous "
                     "copies; pinned memory cannot be swapped, so it counts fully against RAM)")};
  }

  std::unique_ptr<zt::OffloadTier> create(const zt::Options& options,
                                          const zt::OffloadContext& context) const override {
    // Pinning only helps copies to a GPU, and a CPU-only LibTorch cannot pin.
    const bool pin = options.get_bool("pin_memory") && context.cuda;
    return std::make_unique<zt::offload_cpu::HostTier>(context, pin);
  }
};

}  // namespace

ZT_PLUGIN(ZT_KIND_OFFLOAD, "offload_cpu", "0.1.0",
          "host-memory offload tier: page-aligned (pinned beside CUDA) regions used in place",
          OffloadCpuPlugin)
