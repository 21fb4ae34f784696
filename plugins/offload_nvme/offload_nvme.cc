// offload_nvme: the NVMe offload plugin. Shard bytes live in preallocated files under a folder
// (one per job and rank), moved with O_DIRECT through io_uring by a dedicated I/O thread, with a
// fixed pool of aligned bounce buffers for callers whose memory is not aligned. This file only
// declares the options and turns them into an NvmeTier (nvme_tier.h).
#include <memory>
#include <string>
#include <vector>

#include "nvme_tier.h"
#include "zt/error.h"

namespace {

class NvmeOffloadPlugin final : public zt::OffloadPlugin {
 public:
  std::vector<zt::OptionSpec> options() const override {
    return {
        zt::opt_string("path", "runs/nvme",
                       "folder for the region files (zt-<job>/rank<r>/ is "
                       "made in it and removed at exit); a local NVMe disk with room for this "
                       "rank's offloaded bytes, not tmpfs or a network file system"),
        zt::opt_int("queue_depth", 8,
                    "I/O requests in flight per tier: deeper keeps a fast "
                    "NVMe busy (it needs parallel requests for full bandwidth), at the cost of "
                    "latency for other users of the disk",
                    1, 1024),
        zt::opt_int("buffer_count", 4,
                    "aligned bounce buffers for transfers from unaligned "
                    "host memory and for an aligned transfer's tail past its last whole block "
                    "(an array's last tile, a stage-3 shard): more lets such transfers "
                    "overlap, each costs buffer_mb of host memory",
                    1, 1024),
        zt::opt_int("buffer_mb", 16,
                    "size of each bounce buffer, MiB: larger stages more of an "
                    "unaligned transfer per buffer, smaller saves host memory",
                    1, 4096),
        zt::opt_int("block_kb", 1024,
                    "size of each I/O request a transfer is split into, KiB "
                    "(a multiple of the device block, 4 KiB): larger has less per-request "
                    "overhead, smaller spreads a transfer over more of queue_depth",
                    4, 65536),
        zt::opt_bool("direct", true,
                     "O_DIRECT: bypass the page cache, so offloaded bytes cost "
                     "no host memory; file systems refusing it (tmpfs, ramfs) fall back to "
                     "buffered I/O with one notice; false always buffers"),
    };
  }

  std::unique_ptr<zt::OffloadTier> create(const zt::Options& options,
                                          const zt::OffloadContext& context) const override {
    zt::nvme::NvmeConfig c;
    c.path = options.get_string("path");
    c.queue_depth = static_cast<int>(options.get_int("queue_depth"));
    c.buffer_count = static_cast<int>(options.get_int("buffer_count"));
    c.buffer_bytes = options.get_int("buffer_mb") << 20;
    c.block_bytes = options.get_int("block_kb") << 10;
    c.block_kb_where = options.where("block_kb").str();
    c.direct = options.get_bool("direct");
    if (c.path.empty()) {
      throw zt::ConfigError(options.where("path").str() +
                            ": plugin.offload_nvme.path is empty; "
                            "name a folder on a local disk, e.g. path = \"runs/nvme\"");
    }
    return std::make_unique<zt::nvme::NvmeTier>(c, context);
  }
};

}  // namespace

ZT_PLUGIN(ZT_KIND_OFFLOAD, "offload_nvme", "0.1.0",
          "shard bytes in files on NVMe: O_DIRECT + io_uring, aligned bounce buffers, queue depth",
          NvmeOffloadPlugin)
