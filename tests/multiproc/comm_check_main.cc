// zt_comm_check: one rank of a multi-process communicator test. Started N times by the test
// driver through zt::launch_local; rendezvouses, builds a communicator from a comm plugin and
// runs one scenario. It writes "OK" or the failure to $ZT_CHECK_OUT/rank<r>.txt and exits 0 on
// success, 1 on a failed check, or the zt::Error's exit code.
//
//   zt_comm_check --scenario collectives|split|coded|die|wait_for_dead|mismatch|crossed|
//                            rendezvous_only|rendezvous_then_leave
//                 [--plugin ID]
//                 [--timeout-ms T] [--victim R] [--option name=value[,name=value...]]
#include <ATen/ATen.h>
#include <malloc.h>
#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <thread>

#include "coded_check.h"
#include "rank_check.h"
#include "zt/comm_split.h"
#include "zt/communicator.h"
#include "zt/error.h"
#include "zt/host/plugin_loader.h"
#include "zt/host/process_exit.h"
#include "zt/host/rendezvous.h"
#include "zt/options.h"

namespace {

using zt::test::check;

std::map<std::string, std::string> parse_args(int argc, char** argv) {
  std::map<std::string, std::string> args{{"plugin", "comm_ucx"},
                                          {"timeout-ms", "20000"},
                                          {"victim", "1"},
                                          {"scenario", "collectives"}};
  for (int i = 1; i + 1 < argc; i += 2) args[std::string(argv[i]).substr(2)] = argv[i + 1];
  return args;
}

// The plugin's options, some set from "--option name=value[,name=value...]".
zt::Options plugin_options(const zt::Plugin& plugin, const std::string& id,
                           const std::string& assignments) {
  std::map<std::string, zt::Value> values;
  auto specs = plugin.options();
  size_t pos = 0;
  while (pos < assignments.size()) {
    size_t end = assignments.find(',', pos);
    if (end == std::string::npos) end = assignments.size();
    std::string assignment = assignments.substr(pos, end - pos);
    pos = end + 1;
    size_t eq = assignment.find('=');
    std::string name = assignment.substr(0, eq),
                text = eq == std::string::npos ? "" : assignment.substr(eq + 1);
    bool known = false;
    for (const auto& spec : specs) {
      if (spec.name != name) continue;
      known = true;
      if (spec.type == zt::ValueType::kInt) values[name] = int64_t{std::stoll(text)};
      else if (spec.type == zt::ValueType::kBool) values[name] = text == "true";
      else if (spec.type == zt::ValueType::kDouble) values[name] = std::stod(text);
      else values[name] = text;
    }
    if (!known) throw zt::ConfigError("--option " + assignment + ": no such option of " + id);
  }
  return zt::Options("plugin." + id, specs, values, {});
}

// arange(numel) % 5, made once per length: the remainder over a million doubles, made again for
// every op, peer and dtype, was a third of the collectives check's time.
const at::Tensor& pattern(int64_t numel) {
  static std::map<int64_t, at::Tensor> made;
  auto it = made.find(numel);
  if (it == made.end()) it = made.emplace(numel, at::arange(numel, at::kDouble).remainder(5)).first;
  return it->second;
}

// Small integers so every sum is exact even in bf16/fp16.
at::Tensor values(int64_t numel, int rank, at::ScalarType dtype) {
  return pattern(numel).add(rank).to(dtype);
}

at::Tensor reduce_expected(int64_t numel, int world, at::ScalarType dtype, zt::ReduceOp op) {
  at::Tensor acc = values(numel, 0, at::kDouble);
  for (int q = 1; q < world; ++q) {
    at::Tensor v = values(numel, q, at::kDouble);
    if (op == zt::ReduceOp::kMax) acc = at::maximum(acc, v);
    else if (op == zt::ReduceOp::kMin) acc = at::minimum(acc, v);
    else acc = acc + v;
  }
  // The communicator divides in the accumulation dtype (fp32 for 16-bit, else the dtype).
  at::ScalarType accum = dtype == at::kDouble ? at::kDouble : at::kFloat;
  at::Tensor out = acc.to(accum);
  if (op == zt::ReduceOp::kAvg) out = out.div(world);
  return out.to(dtype);
}

std::string describe(const char* op, int64_t numel, at::ScalarType dtype, const char* extra = "") {
  return std::string(op) + " of " + std::to_string(numel) + " " + at::toString(dtype) + extra;
}

const std::vector<int64_t> kLengths = {0, 1, 2, 7, 1000, (1 << 20) + 3};

// Every op, dtype and length, several ops in flight before the first wait; then the counters.
void run_collectives(zt::Communicator& comm, const std::vector<int64_t>& lengths = kLengths) {
  const int n = comm.size(), r = comm.rank();
  const std::vector<at::ScalarType> dtypes = {at::kFloat, at::kDouble, at::kBFloat16, at::kHalf};
  const std::vector<zt::ReduceOp> ops = {zt::ReduceOp::kSum, zt::ReduceOp::kAvg, zt::ReduceOp::kMax,
                                         zt::ReduceOp::kMin};
  uint64_t gather_calls = 0, gather_bytes = 0;
  for (auto dtype : dtypes) {
    for (int64_t numel : lengths) {
      zt::ShardRange mine = zt::flat_shard(numel, n, r);
      // Issue everything, then wait: results must not depend on waiting between ops.
      at::Tensor gathered = at::full({numel}, -7, at::TensorOptions().dtype(dtype));
      auto w_gather = comm.all_gather(
          gathered, values(numel, r, dtype).narrow(0, mine.begin, mine.size()).contiguous());
      gather_calls += 1;
      gather_bytes += gathered.nbytes();
      std::vector<std::pair<zt::ReduceOp, at::Tensor>> reduced, scattered;
      std::vector<std::shared_ptr<zt::Work>> works;
      for (auto op : ops) {
        at::Tensor t = values(numel, r, dtype);
        works.push_back(comm.all_reduce(t, op));
        reduced.emplace_back(op, t);
        at::Tensor shard = at::full({mine.size()}, -7, at::TensorOptions().dtype(dtype));
        works.push_back(comm.reduce_scatter(shard, values(numel, r, dtype), op));
        scattered.emplace_back(op, shard);
      }
      // all_to_all: block d of rank r's input is values(numel, r) + d; it lands as block r on d.
      at::Tensor to_all = values(numel, r, dtype).repeat({n});
      for (int d = 0; d < n; ++d) to_all.narrow(0, d * numel, numel).add_(d);
      at::Tensor from_all = at::full({numel * n}, -7, at::TensorOptions().dtype(dtype));
      works.push_back(comm.all_to_all(from_all, to_all));
      std::vector<at::Tensor> broadcasts;
      for (int root = 0; root < n; ++root) {
        at::Tensor b = values(numel, r, dtype);
        works.push_back(comm.broadcast(b, root));
        broadcasts.push_back(b);
      }
      w_gather->wait();
      for (auto& w : works) w->wait();
      check(w_gather->is_completed(), "all_gather handle reports completion after wait");

      at::Tensor expect_gather = at::empty({numel}, at::TensorOptions().dtype(dtype));
      for (int q = 0; q < n; ++q) {
        zt::ShardRange s = zt::flat_shard(numel, n, q);
        expect_gather.narrow(0, s.begin, s.size())
            .copy_(values(numel, q, dtype).narrow(0, s.begin, s.size()));
      }
      check(at::equal(gathered, expect_gather), describe("all_gather", numel, dtype));
      for (auto& [op, t] : reduced) {
        check(at::equal(t, reduce_expected(numel, n, dtype, op)),
              describe("all_reduce", numel, dtype, zt::reduce_op_name(op)));
      }
      for (auto& [op, shard] : scattered) {
        at::Tensor expect = reduce_expected(numel, n, dtype, op).narrow(0, mine.begin, mine.size());
        check(at::equal(shard, expect),
              describe("reduce_scatter", numel, dtype, zt::reduce_op_name(op)));
      }
      for (int s = 0; s < n; ++s) {
        check(at::equal(from_all.narrow(0, s * numel, numel), values(numel, s, dtype).add(r)),
              describe("all_to_all", numel, dtype, (" block from " + std::to_string(s)).c_str()));
      }
      for (int root = 0; root < n; ++root) {
        check(at::equal(broadcasts[root], values(numel, root, dtype)),
              describe("broadcast", numel, dtype, (" from root " + std::to_string(root)).c_str()));
      }
    }
  }
  comm.barrier()->wait();
  zt::CommStats stats = comm.stats();
  check(stats[zt::CommOp::kAllGather].calls == gather_calls, "all_gather call counter");
  check(stats[zt::CommOp::kAllGather].bytes == gather_bytes, "all_gather byte counter");
  check(stats[zt::CommOp::kAllReduce].calls == gather_calls * ops.size(),
        "all_reduce call counter");
  check(stats[zt::CommOp::kBroadcast].calls == gather_calls * n, "broadcast call counter");
  check(stats[zt::CommOp::kBarrier].calls == 1, "barrier call counter");
  check(stats[zt::CommOp::kAllToAll].calls == gather_calls, "all_to_all call counter");
  check(n == 1 || stats[zt::CommOp::kAllToAll].wire_bytes > 0, "all_to_all sent bytes");
  check(n == 1 || stats[zt::CommOp::kAllGather].wire_bytes > 0, "all_gather sent bytes");
}

// Tensors of more than one dimension (contiguous, as the SDK asks): the ops see their elements
// in order, whatever the shape, and the communicator stays usable after them.
void run_shaped(zt::Communicator& comm) {
  const int n = comm.size(), r = comm.rank();
  for (auto dtype : {at::kFloat, at::kBFloat16}) {
    const int64_t numel = 15;
    at::Tensor t = values(numel, r, dtype).view({3, 5});
    comm.all_reduce(t, zt::ReduceOp::kSum)->wait();
    check(at::equal(t.view(-1), reduce_expected(numel, n, dtype, zt::ReduceOp::kSum)),
          describe("all_reduce", numel, dtype, " as 3 x 5"));
    const zt::ShardRange mine = zt::flat_shard(numel, n, r);
    at::Tensor gathered = at::full({3, 5}, -7, at::TensorOptions().dtype(dtype));
    comm.all_gather(gathered, values(numel, r, dtype).narrow(0, mine.begin, mine.size()).clone())
        ->wait();
    at::Tensor expect = at::empty({numel}, at::TensorOptions().dtype(dtype));
    for (int q = 0; q < n; ++q) {
      const zt::ShardRange s = zt::flat_shard(numel, n, q);
      expect.narrow(0, s.begin, s.size())
          .copy_(values(numel, q, dtype).narrow(0, s.begin, s.size()));
    }
    check(at::equal(gathered.view(-1), expect),
          describe("all_gather", numel, dtype, " into 3 x 5"));
    at::Tensor shard = at::full({mine.size()}, -7, at::TensorOptions().dtype(dtype));
    comm.reduce_scatter(shard, values(numel, r, dtype).view({3, 5}), zt::ReduceOp::kSum)->wait();
    check(at::equal(shard, reduce_expected(numel, n, dtype, zt::ReduceOp::kSum)
                               .narrow(0, mine.begin, mine.size())),
          describe("reduce_scatter", numel, dtype, " from 3 x 5"));
  }
  comm.barrier()->wait();
}

// Checks that `child` is this rank's communicator of a split of `parent` by (colors, keys):
// its size, its rank (by key, then parent rank), and that every collective is exact on it.
void check_split(zt::Communicator& parent, const std::unique_ptr<zt::Communicator>& child,
                 const std::vector<int>& colors, const std::vector<int>& keys,
                 const std::string& what) {
  const zt::SplitMembers expect = zt::split_members(colors, keys, parent.rank());
  if (expect.rank < 0) {
    check(child == nullptr, what + ": a rank passing kSplitNoColor gets no communicator");
    return;
  }
  check(child != nullptr, what + ": a communicator for color " + std::to_string(expect.color));
  check(child->size() == static_cast<int>(expect.members.size()),
        what + ": size " + std::to_string(child->size()) + ", expected " +
            std::to_string(expect.members.size()));
  check(child->rank() == expect.rank, what + ": rank " + std::to_string(child->rank()) +
                                          ", expected " + std::to_string(expect.rank));
  // Shorter lengths than the world's matrix (it runs once per split), still odd and multi-round.
  run_collectives(*child, {0, 1, 7, 1000, (1 << 18) + 3});
}

// Splits of a world of n: interleaved groups ordered by a reversed key, consecutive pairs, one
// rank left out, everyone together, and a split of a split; then parent and child ops issued
// alternately (one family, one order) with their counters kept apart.
void run_splits(zt::Communicator& world) {
  const int n = world.size(), r = world.rank();
  auto colors_of = [n](const std::function<int(int)>& f) {
    std::vector<int> v(n);
    for (int q = 0; q < n; ++q) v[q] = f(q);
    return v;
  };
  const std::vector<int> by_rank = colors_of([](int q) { return q; });
  const std::vector<int> reversed = colors_of([](int q) { return -q; });

  const std::vector<int> parity = colors_of([](int q) { return q % 2; });
  auto interleaved = world.split(parity[r], reversed[r]);
  check_split(world, interleaved, parity, reversed, "split by rank % 2, reversed keys");

  const std::vector<int> pairs = colors_of([](int q) { return q / 2; });
  auto consecutive = world.split(pairs[r], r);
  check_split(world, consecutive, pairs, by_rank, "split into consecutive pairs");

  const std::vector<int> all_but_0 = colors_of(
      [](int q) { return q == 0 ? zt::kSplitNoColor : 7; });
  auto without_0 = world.split(all_but_0[r], r);
  check_split(world, without_0, all_but_0, by_rank, "split leaving rank 0 out");

  const std::vector<int> one = colors_of([](int) { return 3; });
  auto everyone = world.split(3, r);
  check_split(world, everyone, one, by_rank, "split with one color");

  // A split of the consecutive pairs: each pair's member 0 alone, members 1 alone.
  const zt::CommStats before = consecutive->stats();
  const int pr = consecutive->rank();
  auto singles = consecutive->split(pr, 0);
  check(singles && singles->size() == 1 && singles->rank() == 0, "split of a split: size 1");
  run_collectives(*singles, {0, 7, 1000});

  // Parent and child ops in flight together, issued alternately, waited at the end.
  at::Tensor a = at::full({4099}, static_cast<double>(r + 1), at::kFloat);
  at::Tensor b = at::full({4099}, static_cast<double>(r + 1), at::kFloat);
  auto wa = world.all_reduce(a, zt::ReduceOp::kSum);
  auto wb = consecutive->all_reduce(b, zt::ReduceOp::kSum);
  at::Tensor c = at::full({3}, static_cast<double>(r), at::kFloat);
  auto wc = world.broadcast(c, n - 1);
  wa->wait();
  wb->wait();
  wc->wait();
  const double world_sum = n * (n + 1) / 2.0;
  double pair_sum = 0;
  for (int q = 0; q < n; ++q) pair_sum += pairs[q] == pairs[r] ? q + 1 : 0;
  check(at::equal(a, at::full({4099}, world_sum, at::kFloat)), "world sum among child ops");
  check(at::equal(b, at::full({4099}, pair_sum, at::kFloat)), "pair sum among world ops");
  check(at::equal(c, at::full({3}, n - 1.0, at::kFloat)), "world broadcast among child ops");
  const zt::CommStats after = consecutive->stats();
  check(after[zt::CommOp::kAllReduce].calls == before[zt::CommOp::kAllReduce].calls + 1,
        "a child counts its own ops only");
  check(after[zt::CommOp::kBroadcast].calls == before[zt::CommOp::kBroadcast].calls,
        "a world broadcast is not counted by the child");
  // Destroyed in another order than created: each destruction is collective over its ranks.
  interleaved.reset();
  singles.reset();
  everyone.reset();
  without_0.reset();
  consecutive.reset();
  world.barrier()->wait();
}

}  // namespace

static int run_main(int argc, char** argv) {
  // The checks make and free tensors of up to 8 MiB per op; glibc maps each such block afresh
  // (above its mmap threshold) and gives the heap's top back, so every one page-faults in again,
  // which on a VM was over a third of the collectives check's time. Keep them in the heap.
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  auto args = parse_args(argc, argv);
  zt::RankEnv env = zt::discover_rank_env();
  std::chrono::milliseconds timeout(std::stol(args["timeout-ms"]));
  const std::string scenario = args["scenario"];
  const int victim = std::stoi(args["victim"]);
  return zt::test::run_rank_check(env.rank, [&]() -> std::string {
    auto store = zt::rendezvous(env.master_addr.empty() ? "127.0.0.1" : env.master_addr,
                                env.master_port, env.rank, env.world, timeout, env.cluster_job);
    if (scenario == "rendezvous_only") {
      return std::string("OK");
    }
    if (scenario == "rendezvous_then_leave") {
      // The victim leaves the moment its rendezvous returns, closing the store if it hosts it,
      // as a rank 0 that fails on its first line of work does.
      if (env.rank == victim) _exit(0);
      return std::string("OK");
    }
    zt::PluginCatalog catalog;
    const zt::CommunicatorPlugin& plugin = catalog.comm(args["plugin"]);
    zt::Options options = plugin_options(plugin, args["plugin"], args["option"]);
    auto comm = plugin.create(options, zt::comm_context(env, *store, "check/", timeout));
    // What the ops ran over (the path and its chunk or window), for the tests that choose it.
    const std::string report = "OK: " + comm->describe();
    if (scenario == "collectives") {
      run_collectives(*comm);
      run_shaped(*comm);
    } else if (scenario == "split") {
      run_splits(*comm);
    } else if (scenario == "coded") {
      zt::test::run_coded_collectives(*comm, catalog);
    } else if (scenario == "die" || scenario == "wait_for_dead") {
      // Everyone finishes one collective, then the victim dies before the next one.
      at::Tensor t = at::ones({1 << 16});
      comm->all_reduce(t, zt::ReduceOp::kSum)->wait();
      if (env.rank == victim) {
        if (scenario == "die") _exit(9);
        raise(SIGKILL);
      }
      comm->all_reduce(t, zt::ReduceOp::kSum)->wait();
      throw zt::test::CheckFailed("the all_reduce after rank " + std::to_string(victim) +
                                  " died completed");
    } else if (scenario == "mismatch") {
      // A caller's bug: the victim gives all_reduce 4 more elements than the others (one
      // chunk each, so a short message may already wait when its receive is posted).
      at::Tensor t = at::ones({env.rank == victim ? 100 : 96});
      comm->all_reduce(t, zt::ReduceOp::kSum)->wait();
      throw zt::test::CheckFailed("an all_reduce of 96 and 100 elements completed");
    } else if (scenario == "crossed") {
      // A caller's bug of the same size: the victim all-gathers where the others reduce-scatter
      // (ranks whose backward reached a gather and a reduction in different orders).
      at::Tensor shard = at::ones({96}), full = at::ones({96 * env.world});
      if (env.rank == victim) {
        comm->all_gather(full, shard)->wait();
      } else {
        comm->reduce_scatter(shard, full, zt::ReduceOp::kSum)->wait();
      }
      throw zt::test::CheckFailed("an all_gather met a reduce_scatter and completed");
    } else {
      throw zt::ConfigError("unknown scenario " + scenario);
    }
    comm.reset();
    return report;
  });
}

// As the trainer ends its ranks: LibTorch's teardown is most of a forked rank's exit
// (zt/host/process_exit.h).
int main(int argc, char** argv) { zt::exit_without_library_teardown(run_main(argc, argv)); }
