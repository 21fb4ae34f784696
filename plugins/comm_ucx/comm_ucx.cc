// comm_ucx: the UCX communication plugin. Collectives between host-memory tensors over UCX ucp
// (shared memory, CMA, TCP, InfiniBand: whatever UCX selects), pipelined ring algorithms.
#include "ucx_communicator.h"
#include "zt/error.h"

namespace {

class UcxCommPlugin final : public zt::CommunicatorPlugin {
 public:
  std::vector<zt::OptionSpec> options() const override {
    return {
        zt::opt_int("chunk_kb", 1024,
                    "pipeline chunk: smaller overlaps ring steps sooner, larger "
                    "has less per-message overhead",
                    4, 1 << 20),
        zt::opt_bool("shared_memory", true,
                     "ranks on one host exchange data through a "
                     "UCX-mapped shared-memory window (plain memcpy, ~4x faster than CMA "
                     "copies here); off forces the tag-matched ring everywhere"),
        zt::opt_int("shm_chunk_kb", 4096,
                    "size of each shared-memory data area per rank: "
                    "larger means fewer synchronisation rounds, more memory",
                    64, 1 << 20),
        zt::opt_string("tls", "",
                       "UCX transports for this communicator (UCX_TLS syntax, e.g. "
                       "\"shm,tcp\"); empty lets UCX choose"),
        zt::opt_bool("peer_error_handling", false,
                     "UCX peer-failure detection: a dead peer fails "
                     "at once instead of after the timeout, but UCX then avoids transports "
                     "without it (CMA), about 3x slower on one host"),
    };
  }

  std::unique_ptr<zt::Communicator> create(const zt::Options& options,
                                           const zt::CommContext& ctx) const override {
    zt::ucx::CommOptions o;
    o.chunk_bytes = static_cast<size_t>(options.get_int("chunk_kb")) * 1024;
    o.transport.tls = options.get_string("tls");
    o.transport.tls_where = options.where("tls").str();
    o.shared_memory = options.get_bool("shared_memory");
    o.shm_bytes = static_cast<size_t>(options.get_int("shm_chunk_kb")) * 1024;
    o.transport.peer_error_handling = options.get_bool("peer_error_handling");
    return std::make_unique<zt::ucx::UcxCommunicator>(ctx, o);
  }
};

}  // namespace

ZT_PLUGIN(ZT_KIND_COMM, "comm_ucx", "0.1.0",
          "collectives over UCX (host memory; shm, cma, tcp, verbs), pipelined ring algorithms",
          UcxCommPlugin)
