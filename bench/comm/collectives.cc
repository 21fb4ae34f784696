// zt_bench_comm, rank side: comm_ucx and LibTorch's ProcessGroupGloo behind one small
// interface, timed block by block with the backends interleaved (ucx, gloo, ucx, gloo, ...) so
// that drift on this shared machine hits both alike.
#include "collectives.h"

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>

#include "zt/communicator.h"
#include "zt/error.h"
#include "zt/host/launcher.h"
#include "zt/host/plugin_loader.h"
#include "zt/options.h"

namespace zt::bench {

namespace {

// Bound on every wait: a 256 MiB Gloo all_gather takes about a second here.
constexpr std::chrono::milliseconds kTimeout{120000};
constexpr const char* kGlooPortKey = "bench/gloo_port";

// The flat buffer of one size and this rank's shard of it (flat_shard convention).
struct Buffers {
  at::Tensor flat;
  at::Tensor shard;
};

Buffers make_buffers(int64_t bytes, int world, int rank) {
  const int64_t numel = bytes / static_cast<int64_t>(sizeof(float));
  // Filled, not empty: page faults of first touch must not land in a timed block.
  return {at::ones({numel}), at::ones({flat_shard(numel, world, rank).size()})};
}

// One backend under test. run() blocks until the collective completed on this rank.
class Backend {
 public:
  virtual ~Backend() = default;
  virtual const char* name() const = 0;
  virtual void run(const std::string& op, const Buffers& buf) = 0;
  virtual void barrier() = 0;
  // Set when the row does not time what its op name says.
  virtual std::string note(const std::string& op) const {
    (void)op;
    return "";
  }
};

class UcxBackend final : public Backend {
 public:
  explicit UcxBackend(std::unique_ptr<Communicator> comm) : comm_(std::move(comm)) {}
  const char* name() const override { return kCommUcx; }

  void run(const std::string& op, const Buffers& buf) override {
    if (op == kAllGather) {
      comm_->all_gather(buf.flat, buf.shard)->wait();
    } else if (op == kReduceScatter) {
      comm_->reduce_scatter(buf.shard, buf.flat, ReduceOp::kSum)->wait();
    } else {
      comm_->all_reduce(buf.flat, ReduceOp::kSum)->wait();
    }
  }
  void barrier() override { comm_->barrier()->wait(); }

 private:
  std::unique_ptr<Communicator> comm_;
};

std::unique_ptr<Communicator> make_comm_ucx(Store& store, const RankEnv& env) {
  PluginCatalog catalog;  // the plugin library stays loaded after the catalog goes
  const CommunicatorPlugin& plugin = catalog.comm("comm_ucx");
  // Defaults only: the bench measures comm_ucx as shipped.
  Options options("plugin.comm_ucx", plugin.options(), {}, {});
  return plugin.create(options, comm_context(env, store, "bench/comm_ucx/", kTimeout));
}

class GlooBackend final : public Backend {
 public:
  GlooBackend(c10::intrusive_ptr<c10d::ProcessGroupGloo> pg, int world)
      : pg_(std::move(pg)), world_(world) {}
  const char* name() const override { return kGloo; }

  void run(const std::string& op, const Buffers& buf) override {
    if (op == kAllGather) {
      // Gloo 1.13 has no flat all_gather (_allgather_base): its outputs are one tensor per
      // rank, here views into the flat buffer so the result lands where comm_ucx puts it.
      std::vector<std::vector<at::Tensor>> outputs(1);
      for (int q = 0; q < world_; ++q) {
        ShardRange s = flat_shard(buf.flat.numel(), world_, q);
        outputs[0].push_back(buf.flat.narrow(0, s.begin, s.size()));
      }
      std::vector<at::Tensor> inputs{buf.shard};
      pg_->allgather(outputs, inputs)->wait(kTimeout);
    } else {
      // reduce_scatter too: see note().
      std::vector<at::Tensor> tensors{buf.flat};
      pg_->allreduce(tensors)->wait(kTimeout);
    }
  }
  void barrier() override { pg_->barrier()->wait(kTimeout); }

  std::string note(const std::string& op) const override {
    // What a Gloo user does instead: all_reduce the flat buffer and keep their shard.
    return op == kReduceScatter ? "gloo allreduce (no reduce_scatter in Gloo 1.13)" : "";
  }

 private:
  c10::intrusive_ptr<c10d::ProcessGroupGloo> pg_;
  int world_;
};

// Gloo gets a c10d::TCPStore of its own (zt::Store does not expose the c10d one): rank 0
// hosts it on a free port and publishes the port through zt's store.
c10::intrusive_ptr<c10d::Store> make_gloo_store(Store& store, const RankEnv& env) {
  const std::string addr = "127.0.0.1";
  c10d::TCPStoreOptions opts;
  opts.isServer = env.rank == 0;
  opts.numWorkers = static_cast<size_t>(env.world);
  opts.waitWorkers = false;  // ProcessGroupGloo's own rendezvous waits for everyone
  opts.timeout = kTimeout;
  if (env.rank == 0) {
    opts.port = static_cast<uint16_t>(pick_free_port(addr));
    auto tcp = c10::make_intrusive<c10d::TCPStore>(addr, opts);
    std::string port = std::to_string(opts.port);
    store.set(kGlooPortKey, std::vector<uint8_t>(port.begin(), port.end()));
    return tcp;
  }
  std::vector<uint8_t> port = store.get(kGlooPortKey, kTimeout);
  opts.port = static_cast<uint16_t>(std::stoi(std::string(port.begin(), port.end())));
  return c10::make_intrusive<c10d::TCPStore>(addr, opts);
}

c10::intrusive_ptr<c10d::ProcessGroupGloo> make_gloo(Store& store, const RankEnv& env) {
  auto options = c10d::ProcessGroupGloo::Options::create(kTimeout);
  // Loopback, as comm_ucx's peers are on this host too.
  options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
  return c10::make_intrusive<c10d::ProcessGroupGloo>(make_gloo_store(store, env), env.rank,
                                                     env.world, options);
}

// Mean seconds per op over `iters` back-to-back ops that start together after a barrier.
double time_block(Backend& backend, const std::string& op, const Buffers& buf, int iters) {
  backend.barrier();
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) backend.run(op, buf);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / iters;
}

Row make_row(const Backend& backend, const std::string& op, int64_t bytes, int world, int iters,
             const std::vector<double>& times) {
  Row row;
  row.backend = backend.name();
  row.op = op;
  row.bytes = bytes;
  row.world = world;
  row.iters = iters;
  row.reps = static_cast<int>(times.size());
  row.seconds = median(times);
  row.min_seconds = *std::min_element(times.begin(), times.end());
  row.max_seconds = *std::max_element(times.begin(), times.end());
  row.note = backend.note(op);
  return row;
}

// Every op at one size: one warm-up op per backend (wire-up, registration, Gloo's algorithm
// cache), then `reps` timed blocks per backend, alternating backends block by block.
std::vector<Row> bench_size(const std::vector<Backend*>& backends, int64_t bytes, const Plan& plan,
                            const RankEnv& env) {
  Buffers buf = make_buffers(bytes, env.world, env.rank);
  const int iters = collective_iters(bytes);
  std::vector<Row> rows;
  for (const char* op : {kAllGather, kReduceScatter, kAllReduce}) {
    for (Backend* b : backends) b->run(op, buf);
    std::vector<std::vector<double>> times(backends.size());
    for (int rep = 0; rep < plan.reps; ++rep) {
      for (size_t i = 0; i < backends.size(); ++i) {
        times[i].push_back(time_block(*backends[i], op, buf, iters));
      }
    }
    for (size_t i = 0; i < backends.size(); ++i) {
      rows.push_back(make_row(*backends[i], op, bytes, env.world, iters, times[i]));
    }
  }
  return rows;
}

}  // namespace

std::vector<Row> run_collectives(const Plan& plan, const RankEnv& env) {
  std::unique_ptr<Store> store = rendezvous(env.master_addr, env.master_port, env.rank, env.world,
                                            kTimeout, env.cluster_job);
  UcxBackend ucx(make_comm_ucx(*store, env));
  GlooBackend gloo(make_gloo(*store, env), env.world);
  const std::vector<Backend*> backends{&ucx, &gloo};

  std::vector<Row> rows;
  for (int64_t bytes : plan.sizes_bytes) {
    if (env.rank == 0) {
      std::fprintf(stderr, "zt_bench_comm: timing %s: %d op(s) per block, %d rep(s)\n",
                   size_label(bytes).c_str(), collective_iters(bytes), plan.reps);
    }
    for (Row& r : bench_size(backends, bytes, plan, env)) rows.push_back(std::move(r));
  }
  return rows;  // ucx's destructor is collective: every rank gets here before it closes
}

}  // namespace zt::bench
