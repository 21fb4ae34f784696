#include "coded_check.h"

#include <ATen/ATen.h>

#include <map>
#include <string>

#include "rank_check.h"
#include "zero/coded_collectives.h"
#include "zt/codec.h"
#include "zt/options.h"

namespace zt::test {

namespace {

std::unique_ptr<Codec> make_codec(PluginCatalog& catalog, int64_t bits) {
  const CodecPlugin& plugin = catalog.codec("codec_blockq", "plugins.codec_gradients");
  std::map<std::string, Value> values{{"bits", bits}, {"block", int64_t{64}}};
  return plugin.create(Options("codec.gradients", plugin.options(), values, {}));
}

// Rank r's input, different on every rank and with outliers, so blocks get different scales.
at::Tensor input(int64_t numel, int rank) {
  at::Generator gen = at::detail::createCPUGenerator(100 + rank);
  at::Tensor x = at::randn({numel}, gen);
  if (numel > 10) x.narrow(0, numel / 3, 1).fill_(40.0 + rank);
  return x;
}

// What the codec makes of `x` (padded to c elements): decode(encode(x)).
at::Tensor roundtrip(const Codec& codec, const at::Tensor& x, int64_t c) {
  at::Tensor in = at::zeros({c}, at::kFloat);
  in.narrow(0, 0, x.numel()).copy_(x);
  std::vector<uint8_t> bytes(static_cast<size_t>(codec.encoded_bytes(c)));
  codec.encode(in.data_ptr<float>(), c, bytes.data());
  at::Tensor out = at::empty({c}, at::kFloat);
  codec.decode(bytes.data(), c, out.data_ptr<float>());
  return out;
}

std::string name(const char* op, int64_t bits, int64_t numel, const std::string& extra = "") {
  return std::string(op) + " with int" + std::to_string(bits) + ", " + std::to_string(numel) +
         " elements" + extra;
}

void check_gather(Communicator& comm, const Codec& codec, int64_t bits, int64_t numel,
                  at::ScalarType dtype) {
  const int n = comm.size(), r = comm.rank();
  const int64_t c = padded_shard_numel(numel, n);
  const ShardRange mine = flat_shard(numel, n, r);
  at::Tensor out = at::full({numel}, -7.0, at::TensorOptions().dtype(dtype));
  const at::Tensor shard = input(numel, 0).narrow(0, mine.begin, mine.size()).to(dtype);
  coded_all_gather(comm, codec, out, shard.contiguous())->wait();
  at::Tensor want = at::empty({numel}, at::kFloat);
  for (int q = 0; q < n; ++q) {
    const ShardRange s = flat_shard(numel, n, q);
    const at::Tensor theirs = input(numel, 0).narrow(0, s.begin, s.size()).to(dtype);
    want.narrow(0, s.begin, s.size()).copy_(roundtrip(codec, theirs, c).narrow(0, 0, s.size()));
  }
  check(at::equal(out, want.to(dtype)),
        name("coded all_gather", bits, numel, std::string(", ") + at::toString(dtype)) +
            " differs from decode(encode(shard)) of every rank on rank " + std::to_string(r));
}

void check_reduce_scatter(Communicator& comm, const Codec& codec, int64_t bits, int64_t numel,
                          ReduceOp op, bool feedback) {
  const int n = comm.size(), r = comm.rank();
  const int64_t c = padded_shard_numel(numel, n);
  auto residual_of = [&](int q) {
    return feedback ? input(numel, 50 + q).mul_(0.01) : at::Tensor();
  };
  at::Tensor residual = feedback ? residual_of(r).clone() : at::Tensor();
  const ShardRange mine = flat_shard(numel, n, r);
  at::Tensor out = at::full({mine.size()}, -7.0, at::kFloat);
  coded_reduce_scatter(comm, codec, out, input(numel, r), op, residual)->wait();
  // Every rank q sends x_q = input + residual; rank r gets decode(encode(x_q's chunk r)), its
  // own chunk exact, summed in rank order from zero.
  at::Tensor sum = at::zeros({c}, at::kFloat);
  for (int q = 0; q < n; ++q) {
    at::Tensor x = at::zeros({c * n}, at::kFloat);
    x.narrow(0, 0, numel).copy_(input(numel, q));
    if (feedback) x.narrow(0, 0, numel).add_(residual_of(q));
    const at::Tensor chunk = x.narrow(0, c * r, c);
    sum.add_(q == r ? chunk : roundtrip(codec, chunk, c));
    if (q != r || !feedback) continue;
    // This rank's new residual: what encoding lost, chunk by chunk, 0 on its own chunk.
    at::Tensor lost = at::zeros({c * n}, at::kFloat);
    for (int d = 0; d < n; ++d) {
      if (d != r)
        lost.narrow(0, c * d, c)
            .copy_(x.narrow(0, c * d, c) - roundtrip(codec, x.narrow(0, c * d, c), c));
    }
    check(at::equal(residual, lost.narrow(0, 0, numel)),
          name("coded reduce_scatter", bits, numel, ", error feedback") +
              ": the residual is not what encoding lost, on rank " + std::to_string(r));
  }
  if (op == ReduceOp::kAvg) sum.div_(n);
  check(at::equal(out, sum.narrow(0, 0, mine.size())),
        name("coded reduce_scatter", bits, numel,
             std::string(", ") + reduce_op_name(op) + (feedback ? ", error feedback" : "")) +
            " differs from the rank-order sum of decoded chunks on rank " + std::to_string(r));
}

// Bytes this rank sent for one large coded collective, against the fp32 ring's (n - 1) chunks.
void check_bytes(Communicator& comm, const Codec& codec, int64_t bits) {
  const int n = comm.size();
  if (n == 1) return;
  const int64_t numel = int64_t{1} << 20, c = padded_shard_numel(numel, n);
  const double fp32 = 4.0 * static_cast<double>(c) * (n - 1);
  const CommStats before = comm.stats();
  check_reduce_scatter(comm, codec, bits, numel, ReduceOp::kSum, false);
  const CommStats after = comm.stats();
  const double sent = static_cast<double>(after[CommOp::kAllToAll].wire_bytes -
                                          before[CommOp::kAllToAll].wire_bytes);
  const double bound = bits == 8 ? 0.27 : 0.15;
  check(sent > 0 && sent <= bound * fp32, name("coded reduce_scatter", bits, numel) + " sent " +
                                              std::to_string(sent) + " bytes, more than " +
                                              std::to_string(bound) + "x the fp32 ring's " +
                                              std::to_string(fp32));
}

}  // namespace

void run_coded_collectives(Communicator& comm, PluginCatalog& catalog) {
  for (int64_t bits : {8, 4}) {
    const auto codec = make_codec(catalog, bits);
    for (int64_t numel : {0, 1, 7, 1000, 65541}) {
      for (at::ScalarType dtype : {at::kFloat, at::kBFloat16})
        check_gather(comm, *codec, bits, numel, dtype);
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg}) {
        for (bool feedback : {false, true})
          check_reduce_scatter(comm, *codec, bits, numel, op, feedback);
      }
    }
    check_bytes(comm, *codec, bits);
  }
  comm.barrier()->wait();
}

}  // namespace zt::test
