// comm_local: an example zt communication plugin, and a useful one: a Communicator for a world
// of exactly one rank, so a job can be debugged in one process (gdb, sanitizers, printf) with
// no UCX, no peers and no rendezvous. With one rank every collective is a copy or nothing:
//   all_gather      out = in              (the only shard is the whole tensor)
//   reduce_scatter  out = in              (sum/avg/max/min over one rank is the identity)
//   all_reduce      no-op                 (same reason, in place)
//   broadcast       no-op                 (root can only be rank 0, which already has the data)
//   barrier         no-op
//   split           a new one-rank communicator (own counters), or none for kSplitNoColor
// It checks its arguments the way comm_ucx does, so a bug found here is the bug comm_ucx would
// report, and code that passes here does not first fail on a real multi-rank job.
//
// To start your own plugin, copy this folder, rename the id in CMakeLists.txt and replace the
// Communicator below (or derive from another kind's plugin class). Only the SDK headers
// (<zt/...>), LibTorch and Boost are needed; see README.md.
#include <ATen/ATen.h>  // ATen stays in the .cc: the SDK headers only forward-declare at::Tensor

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "zt/comm_split.h"
#include "zt/communicator.h"
#include "zt/error.h"
#include "zt/plugin.h"
#include "zt/tensor_checks.h"
#include "zt/work.h"

namespace zt_example {

// zt_add_plugin(<id>) defines ZT_PLUGIN_ID, so the id lives only in CMakeLists.txt and always
// matches the file name libzt_<id>.so, which the loader checks.
constexpr const char* kId = ZT_PLUGIN_ID;

// The argument checks come from the SDK (zt/tensor_checks.h), the ones comm_ucx uses, so a
// mistake fails here with the message comm_ucx would give. Each throws InternalError: a wrong
// argument is a bug in the caller (the engine or a plugin), not in the user's config.
void check_tensor(const at::Tensor& t, const char* op, const char* role) {
  // comm_ucx moves host memory only; refusing CUDA tensors here keeps the two interchangeable.
  zt::check_host_tensor(t, std::string(kId) + ": " + op + ": " + role + " tensor",
                        std::string(kId) + " does not support that (host memory only, like "
                                           "comm_ucx)");
}

// The dtypes comm_ucx can reduce; any dtype can be copied, but accepting more here would let
// code pass in one process that fails on two.
void check_reducible(const at::Tensor& t, const char* op) {
  zt::check_dtype(t, std::string(kId) + ": " + op + ": input tensor",
                  {at::kFloat, at::kDouble, at::kBFloat16, at::kHalf},
                  std::string(kId) + " does not support other dtypes in reductions (like "
                                     "comm_ucx)");
}

class LocalCommunicator final : public zt::Communicator {
 public:
  explicit LocalCommunicator(bool validate) : validate_(validate) {}

  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string name() const override { return kId; }

  std::shared_ptr<zt::Work> all_gather(const at::Tensor& out_flat,
                                       const at::Tensor& in_shard) override {
    if (validate_) {
      check_tensor(out_flat, "all_gather", "output");
      check_tensor(in_shard, "all_gather", "input");
      zt::check_shard_of(in_shard, out_flat, std::string(kId) + ": all_gather", "input", "output",
                         1, 0);
    }
    return run(zt::CommOp::kAllGather, out_flat.nbytes(), [&] { copy(out_flat, in_shard); });
  }

  std::shared_ptr<zt::Work> reduce_scatter(const at::Tensor& out_shard, const at::Tensor& in_flat,
                                           zt::ReduceOp /*op: identity over one rank*/) override {
    if (validate_) {
      check_tensor(out_shard, "reduce_scatter", "output");
      check_tensor(in_flat, "reduce_scatter", "input");
      check_reducible(in_flat, "reduce_scatter");
      zt::check_shard_of(out_shard, in_flat, std::string(kId) + ": reduce_scatter", "output",
                         "input", 1, 0);
    }
    return run(zt::CommOp::kReduceScatter, in_flat.nbytes(), [&] { copy(out_shard, in_flat); });
  }

  std::shared_ptr<zt::Work> all_reduce(const at::Tensor& tensor, zt::ReduceOp) override {
    if (validate_) {
      check_tensor(tensor, "all_reduce", "input");
      check_reducible(tensor, "all_reduce");
    }
    return run(zt::CommOp::kAllReduce, tensor.nbytes(), [] {});
  }

  std::shared_ptr<zt::Work> broadcast(const at::Tensor& tensor, int root) override {
    if (validate_) {
      check_tensor(tensor, "broadcast", "input");
      if (root != 0) {
        throw zt::InternalError(std::string(kId) + ": broadcast: root " + std::to_string(root) +
                                " is not a rank of this 1-rank communicator");
      }
    }
    return run(zt::CommOp::kBroadcast, tensor.nbytes(), [] {});
  }

  std::shared_ptr<zt::Work> barrier() override {
    return run(zt::CommOp::kBarrier, 0, [] {});
  }

  zt::CommStats stats() const override {
    std::lock_guard<std::mutex> lock(stats_mutex_);
    return stats_;
  }

  // One rank splits into itself (with fresh counters) or into nothing. exchange_split is the
  // SDK's all-gather of (color, key) that every plugin runs, so a bad color fails as it would
  // on comm_ucx.
  std::unique_ptr<zt::Communicator> split(int color, int key) override {
    const zt::SplitMembers mine = zt::exchange_split(*this, color, key);
    if (mine.rank < 0) return nullptr;
    return std::make_unique<LocalCommunicator>(validate_);
  }

 private:
  // Skips the copy when the caller passed the shard as a view of the flat tensor's own slot
  // (the usual ZeRO layout), where there is nothing to move.
  static void copy(const at::Tensor& dst, const at::Tensor& src) {
    if (dst.data_ptr() != src.data_ptr()) dst.copy_(src);
  }

  // Runs the op at once on the caller's thread (nothing to overlap with one rank) and hands
  // back an already completed handle (zt::run_now). A failure is delivered through wait(), as
  // an asynchronous communicator would deliver it, so callers see one error path for both.
  std::shared_ptr<zt::Work> run(zt::CommOp kind, uint64_t bytes,
                                const std::function<void()>& body) {
    {
      std::lock_guard<std::mutex> lock(stats_mutex_);
      stats_[kind].calls++;
      stats_[kind].bytes += bytes;  // wire_bytes stays 0: nothing ever leaves this process
    }
    return zt::run_now(body);
  }

  const bool validate_;
  mutable std::mutex stats_mutex_;  // stats() may be read from any thread
  zt::CommStats stats_;
};

// The factory the loader gets from ZT_PLUGIN below: declares the options and builds
// communicators. Stateless, as the loader requires.
class LocalCommPlugin final : public zt::CommunicatorPlugin {
 public:
  // What `trainer plugins describe comm_local` prints, and what the config loader checks
  // [plugin.comm_local] against before any rank starts.
  std::vector<zt::OptionSpec> options() const override {
    return {zt::opt_bool("validate", true,
                         "check every op's tensors like comm_ucx does (CPU, contiguous, dtype, "
                         "flat_shard sizes), so mistakes fail here first; false skips the checks "
                         "to time the caller alone")};
  }

  std::unique_ptr<zt::Communicator> create(const zt::Options& options,
                                           const zt::CommContext& ctx) const override {
    if (ctx.world != 1) {
      throw zt::CommError(std::string(kId) +
                          " serves a world of exactly 1 rank, but this job has " +
                          std::to_string(ctx.world) +
                          " ranks; use plugins.comm = \"comm_ucx\" "
                          "for more than one rank, or launch.nproc = 1 to debug in one process");
    }
    return std::make_unique<LocalCommunicator>(options.get_bool("validate"));
  }
};

}  // namespace zt_example

// The two entries the loader looks for: zt_plugin_info_v1 (kind, id, version, the build
// fingerprint checked before any C++ is touched) and the factory. One line, at namespace scope.
ZT_PLUGIN(ZT_KIND_COMM, ZT_PLUGIN_ID, "0.1.0",
          "one-rank collectives in process (world size 1 only), for single-process debugging",
          zt_example::LocalCommPlugin)
