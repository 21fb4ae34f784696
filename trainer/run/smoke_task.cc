#include "run/smoke_task.h"
#include "settings/job_settings.h"

#include <ATen/ATen.h>

#include <cstdio>
#include <iostream>

#include "zt/communicator.h"
#include "zt/error.h"
#include "zt/host/blas.h"
#include "zt/host/compose.h"
#include "zt/host/flight_recorder.h"
#include "zt/host/plugin_loader.h"
#include "zt/host_memory.h"

namespace zt::trainer {

namespace {

void expect(bool ok, const std::string& what) {
  if (!ok) throw CommError("smoke check failed: " + what);
}

// all_gather of one size and dtype: every rank's shard holds its rank.
void check_all_gather(Communicator& comm, int64_t numel, at::ScalarType dtype) {
  const int n = comm.size(), r = comm.rank();
  const std::string tag = std::to_string(numel) + " x " + at::toString(dtype);
  auto opts = at::TensorOptions().dtype(dtype).device(comm.device());
  ShardRange mine = flat_shard(numel, n, r);
  at::Tensor gathered = at::full({numel}, n, opts);
  comm.all_gather(gathered, at::full({mine.size()}, r, opts))->wait();
  for (int q = 0; q < n; ++q) {
    ShardRange s = flat_shard(numel, n, q);
    expect(at::all(gathered.narrow(0, s.begin, s.size()) == q).item<bool>(),
           "all_gather of " + tag + " (shard of rank " + std::to_string(q) + ")");
  }
}

// What the engine issues besides the compute dtypes' sums (zt/communicator.h lists them): its
// agreements' max, min and average over fp32 and fp64, gathers of int64 (exchange_split, step
// traces) and bytes (coded gathers), and the gradient codecs' all-to-all of bytes, which a
// plugin may lack (the job then refuses a gradient codec by name).
void check_engine_collectives(Communicator& comm) {
  const int n = comm.size(), r = comm.rank();
  auto opts = at::TensorOptions().device(comm.device());
  for (const at::ScalarType dtype : {at::kFloat, at::kDouble}) {
    const std::string tag = std::string(" of 5 x ") + at::toString(dtype);
    at::Tensor t = at::full({5}, r + 1, opts.dtype(dtype));
    comm.all_reduce(t, ReduceOp::kMax)->wait();
    expect(at::all(t == n).item<bool>(), "all_reduce max" + tag);
    t.fill_(r + 1);
    comm.all_reduce(t, ReduceOp::kMin)->wait();
    expect(at::all(t == 1).item<bool>(), "all_reduce min" + tag);
    t.fill_(2 * (r + 1));
    comm.all_reduce(t, ReduceOp::kAvg)->wait();
    expect(at::all(t == n + 1).item<bool>(), "all_reduce avg" + tag);
  }
  check_all_gather(comm, 1001, at::kLong);
  check_all_gather(comm, 1001, at::kByte);
  // Block d of rank r holds r * 16 + d; after the exchange block s holds s * 16 + r.
  const int64_t block = 33;
  at::Tensor in = at::empty({n * block}, opts.dtype(at::kByte));
  for (int d = 0; d < n; ++d) in.narrow(0, d * block, block).fill_((r * 16 + d) % 256);
  at::Tensor out = at::zeros_like(in);
  try {
    comm.all_to_all(out, in)->wait();
  } catch (const ConfigError& e) {
    std::printf("smoke: %s: without all_to_all a job cannot use a gradient codec\n", e.what());
    return;
  }
  for (int s = 0; s < n; ++s) {
    expect(at::all(out.narrow(0, s * block, block) == (s * 16 + r) % 256).item<bool>(),
           "all_to_all of bytes (block from rank " + std::to_string(s) + ")");
  }
}

// Verifies each collective on one size and dtype; values are small integers, so exact. The
// tensors live where the communicator moves them (comm_nccl: its GPU).
void check_collectives(Communicator& comm, int64_t numel, at::ScalarType dtype) {
  const int n = comm.size(), r = comm.rank();
  const std::string tag = std::to_string(numel) + " x " + at::toString(dtype);
  auto opts = at::TensorOptions().dtype(dtype).device(comm.device());

  at::Tensor t = at::full({numel}, r + 1, opts);
  comm.all_reduce(t, ReduceOp::kSum)->wait();
  expect(at::all(t == n * (n + 1) / 2).item<bool>(), "all_reduce sum of " + tag);

  ShardRange mine = flat_shard(numel, n, r);
  check_all_gather(comm, numel, dtype);

  at::Tensor flat = at::arange(numel, opts.dtype(at::kFloat)).remainder(7).add(r).to(dtype);
  at::Tensor shard = at::empty({mine.size()}, opts);
  comm.reduce_scatter(shard, flat, ReduceOp::kSum)->wait();
  at::Tensor expected = at::arange(numel, at::kFloat).remainder(7).mul(n).add(n * (n - 1) / 2);
  expect(at::equal(shard.to(at::kCPU, at::kFloat), expected.narrow(0, mine.begin, mine.size())),
         "reduce_scatter sum of " + tag);

  at::Tensor b = at::full({numel}, r, opts);
  comm.broadcast(b, n - 1)->wait();
  expect(at::all(b == n - 1).item<bool>(), "broadcast of " + tag);
}

struct Timing {
  const char* op;
  double seconds;
  double busbw_gbps;
};

// Mean time of `reps` back-to-back collectives on `bytes`, and bus bandwidth (nccl-tests).
std::vector<Timing> time_collectives(Communicator& comm, int64_t bytes, int reps) {
  const int n = comm.size();
  const int64_t numel = bytes / 4;
  const auto opts = at::TensorOptions(at::kFloat).device(comm.device());
  at::Tensor flat = at::ones({numel}, opts);
  at::Tensor shard = at::ones({flat_shard(numel, n, comm.rank()).size()}, opts);
  auto timed = [&](auto&& op) {
    op()->wait();  // warm-up: wire-up and registration
    comm.barrier()->wait();
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < reps; ++i) op()->wait();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / reps;
  };
  double algbw_factor = n > 1 ? static_cast<double>(n - 1) / n : 1.0;
  double ar = timed([&] { return comm.all_reduce(flat, ReduceOp::kSum); });
  double ag = timed([&] { return comm.all_gather(flat, shard); });
  double rs = timed([&] { return comm.reduce_scatter(shard, flat, ReduceOp::kSum); });
  double bc = timed([&] { return comm.broadcast(flat, 0); });
  auto bw = [&](double s, double factor) { return bytes / s * factor / 1e9; };
  return {{"all_reduce", ar, bw(ar, 2 * algbw_factor)},
          {"all_gather", ag, bw(ag, algbw_factor)},
          {"reduce_scatter", rs, bw(rs, algbw_factor)},
          {"broadcast", bc, bw(bc, 1.0)}};
}

}  // namespace

int run_smoke(const JobSettings& job, PluginCatalog& catalog, Store& store, const RankEnv& env,
              std::chrono::milliseconds timeout) {
  const bool leader = env.rank == 0;
  std::string broken;
  auto entries = catalog.load_all();
  for (const auto& e : entries) {
    if (!e.record) broken += "\n  " + e.error;
  }
  if (!broken.empty()) throw PluginError("some plugins cannot be loaded:" + broken);

  const std::string& comm_id = job.engine.comm.id;
  std::unique_ptr<Communicator> made = created_by(
      catalog.comm(comm_id).create(job.engine.comm.options,
                                   comm_context(env, store, "comm/0/", timeout)),
      comm_id, "comm");
  check_made_communicator(*made, comm_id, env);
  // Observed as the engine's is: the same checks of what the plugin returns (a null Work is
  // named, not a crash at its wait).
  std::unique_ptr<Communicator> comm = observe_communicator(std::move(made), "world");

  for (int64_t numel : {int64_t{0}, int64_t{1}, int64_t{7}, int64_t{1000003}}) {
    check_collectives(*comm, numel, at::kFloat);
  }
  check_collectives(*comm, 4099, at::kBFloat16);
  check_collectives(*comm, 4099, at::kDouble);
  check_engine_collectives(*comm);

  const std::string path = comm->describe();
  const int reps = static_cast<int>(job.run.steps);
  const int64_t bytes = 16 << 20;
  auto timings = time_collectives(*comm, bytes, reps);
  CommStats stats = comm->stats();
  comm.reset();  // collective: every rank finishes its transfers before any leaves

  if (leader) {
    std::printf("zt smoke: %d rank(s) over %s (rendezvous: %s)\n", env.world, comm_id.c_str(),
                env.source == "none" ? "single process" : env.source.c_str());
    std::printf("data path: %s\n", path.c_str());
    std::printf("%s\n", blas_header_line(probe_blas()).c_str());
    std::printf("%s\n", host_allocator_line().c_str());
    std::printf("plugins loaded:\n");
    for (const auto& e : entries) {
      std::printf("  %-20s %-9s %-7s %s\n", e.id.c_str(), plugin_kind_name(e.record->kind),
                  e.record->version.c_str(), e.path.c_str());
    }
    std::printf("collectives verified: all_reduce, all_gather, reduce_scatter, broadcast on "
                "0, 1, 7, 1000003 fp32 elements and 4099 bf16/fp64 elements; all_reduce max, "
                "min and avg of fp32 and fp64; all_gather of int64 and bytes; all_to_all of "
                "bytes where the plugin has it\n");
    std::printf("\n%-16s %10s %12s %14s\n", "op (16 MiB)", "reps", "time (ms)", "busbw (GB/s)");
    for (const auto& t : timings) {
      std::printf("%-16s %10d %12.3f %14.2f\n", t.op, reps, t.seconds * 1e3, t.busbw_gbps);
    }
    std::printf("\n%-16s %10s %14s %14s\n", "counters", "calls", "bytes", "wire bytes");
    for (int i = 0; i < kNumCommOps; ++i) {
      const auto& s = stats.ops[i];
      std::printf("%-16s %10llu %14llu %14llu\n", comm_op_name(static_cast<CommOp>(i)),
                  static_cast<unsigned long long>(s.calls),
                  static_cast<unsigned long long>(s.bytes),
                  static_cast<unsigned long long>(s.wire_bytes));
    }
    std::printf("smoke run OK\n");
  }
  return 0;
}

}  // namespace zt::trainer
