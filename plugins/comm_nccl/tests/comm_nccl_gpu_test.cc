// comm_nccl on a GPU, loaded the real way through the plugin catalog, joined through a real
// rendezvous store (c10d::TCPStore) at world size 1: NCCL refuses two ranks on one GPU, so one
// GPU runs one rank (the padded paths of lengths that do not divide by the world, and every
// byte on a wire, need two GPUs and are not tested here). What one rank can show: every op
// on CUDA tensors in fp32, bf16 and fp16, in place and out of place; the comm stream ordered
// after the producer's stream on the GPU; a Work that completes when the GPU has run the op;
// a stalled stream that makes wait() time out, abort the communicator and throw a CommError,
// after which every op fails; CPU tensors refused; counters; split.
//
// Label `gpu`. Without a CUDA device the executable says why and exits with 77 (Skipped).
#include <ATen/ATen.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>

#define DOCTEST_CONFIG_IMPLEMENT
#include "../../../tests/doctest_prelude.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>

#include "zt/communicator.h"
#include "zt/error.h"
#include "zt/host/launcher.h"
#include "zt/host/plugin_loader.h"
#include "zt/host/rendezvous.h"
#include "zt/options.h"

namespace {

constexpr int kSkipReturnCode = 77;
const std::chrono::milliseconds kTimeout(60000);

// One rank's job: a rendezvous store of its own and the plugin from the build tree.
struct OneRank {
  std::unique_ptr<zt::Store> store;
  std::unique_ptr<zt::Communicator> comm;

  explicit OneRank(std::chrono::milliseconds timeout = kTimeout) {
    store = zt::rendezvous("127.0.0.1", zt::pick_free_port("127.0.0.1"), 0, 1, timeout);
    static zt::PluginCatalog catalog;
    const zt::CommunicatorPlugin& plugin = catalog.comm("comm_nccl");
    const zt::Options options("plugin.comm_nccl", plugin.options(), {}, {});
    zt::RankEnv env;
    comm = plugin.create(options, zt::comm_context(env, *store, "test/", timeout));
  }
};

at::TensorOptions on_gpu(at::ScalarType dtype) {
  return at::TensorOptions().dtype(dtype).device(at::kCUDA, 0);
}

// A host function that holds its stream until released: a producer that has not finished.
struct StreamGate {
  std::atomic<bool> open{false};
  static void CUDART_CB hold(void* self) {
    auto* gate = static_cast<StreamGate*>(self);
    while (!gate->open.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  void close_on(cudaStream_t stream) {
    REQUIRE(cudaLaunchHostFunc(stream, &StreamGate::hold, this) == cudaSuccess);
  }
};

}  // namespace

TEST_CASE("every op on CUDA tensors, fp32, bf16 and fp16") {
  OneRank rank;
  CHECK(rank.comm->size() == 1);
  std::printf("%s\n", rank.comm->describe().c_str());
  CHECK(rank.comm->describe().find("NCCL") != std::string::npos);
  for (const at::ScalarType dtype : {at::kFloat, at::kBFloat16, at::kHalf}) {
    CAPTURE(c10::toString(dtype));
    const at::Tensor data = at::randn({4099}, on_gpu(at::kFloat)).to(dtype);

    at::Tensor gathered = at::full({4099}, -1.0, on_gpu(dtype));
    rank.comm->all_gather(gathered, data)->wait();
    CHECK(at::equal(gathered, data));
    at::Tensor in_place = data.clone();  // the engine's in-place gather: in is out's own shard
    rank.comm->all_gather(in_place, in_place.narrow(0, 0, 4099))->wait();
    CHECK(at::equal(in_place, data));

    for (const zt::ReduceOp op : {zt::ReduceOp::kSum, zt::ReduceOp::kAvg}) {
      at::Tensor shard = at::full({4099}, -1.0, on_gpu(dtype));
      rank.comm->reduce_scatter(shard, data, op)->wait();
      CHECK(at::equal(shard, data));
    }
    for (const zt::ReduceOp op :
         {zt::ReduceOp::kSum, zt::ReduceOp::kAvg, zt::ReduceOp::kMax, zt::ReduceOp::kMin}) {
      at::Tensor t = data.clone();
      rank.comm->all_reduce(t, op)->wait();
      CHECK(at::equal(t, data));
    }
    at::Tensor b = data.clone();
    rank.comm->broadcast(b, 0)->wait();
    CHECK(at::equal(b, data));
  }
  rank.comm->barrier()->wait();

  const zt::CommStats s = rank.comm->stats();
  CHECK(s[zt::CommOp::kAllGather].calls == 6);
  CHECK(s[zt::CommOp::kAllGather].bytes == 2 * 4099 * (4 + 2 + 2));
  CHECK(s[zt::CommOp::kReduceScatter].calls == 6);
  CHECK(s[zt::CommOp::kAllReduce].calls == 12);
  CHECK(s[zt::CommOp::kBroadcast].calls == 3);
  CHECK(s[zt::CommOp::kBarrier].calls == 1);
  CHECK(s[zt::CommOp::kAllReduce].wire_bytes == 0);  // one rank sends nothing
}

TEST_CASE("the comm stream runs after the producer's stream, and the Work completes on the GPU") {
  OneRank rank;
  const c10::cuda::CUDAStream producer = c10::cuda::getStreamFromPool(false, 0);
  const c10::cuda::CUDAStreamGuard on_producer(producer);
  // A producer that is still busy when the op is issued: a second of matrix products, then the
  // value. Without the comm stream waiting on the GPU, NCCL would copy the zeros.
  const at::Tensor a = at::randn({4096, 4096}, on_gpu(at::kFloat));
  at::Tensor in = at::zeros({1 << 20}, on_gpu(at::kFloat));
  at::Tensor x = a;
  for (int i = 0; i < 40; ++i) x = at::mm(x, a).div_(64.0);
  in.fill_(7.0);
  at::Tensor out = at::full({1 << 20}, -1.0, on_gpu(at::kFloat));
  auto work = rank.comm->all_gather(out, in);
  work->wait();
  CHECK(at::all(out.eq(7.0)).item<bool>());

  StreamGate gate;
  gate.close_on(producer.stream());
  at::Tensor t = at::ones({1024}, on_gpu(at::kFloat));
  auto held = rank.comm->all_reduce(t, zt::ReduceOp::kSum);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  CHECK_FALSE(held->is_completed());  // the GPU has not run it: its producer is held
  gate.open = true;
  held->wait();
  CHECK(held->is_completed());
  CHECK(held->exception() == nullptr);
}

TEST_CASE("a stalled op times out, aborts the communicator and fails every later op") {
  OneRank rank;
  const c10::cuda::CUDAStream producer = c10::cuda::getStreamFromPool(false, 0);
  const c10::cuda::CUDAStreamGuard on_producer(producer);
  StreamGate gate;
  gate.close_on(producer.stream());
  // Released later from another thread: aborting may wait for the held stream.
  std::thread opener([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    gate.open = true;
  });
  at::Tensor t = at::ones({1024}, on_gpu(at::kFloat));
  auto stalled = rank.comm->all_reduce(t, zt::ReduceOp::kSum);
  const auto start = std::chrono::steady_clock::now();
  std::string message;
  try {
    stalled->wait(std::chrono::milliseconds(300));
  } catch (const zt::CommError& e) {
    message = e.what();
  }
  opener.join();
  CHECK(std::chrono::steady_clock::now() - start >= std::chrono::milliseconds(300));
  CHECK(message.find("all_reduce") != std::string::npos);
  CHECK(message.find("did not complete within 300 ms") != std::string::npos);
  CHECK(message.find("aborted") != std::string::npos);
  CHECK(stalled->is_completed());
  CHECK(stalled->exception() != nullptr);

  auto later = rank.comm->all_reduce(t, zt::ReduceOp::kSum);
  std::string later_message;
  try {
    later->wait();
  } catch (const zt::CommError& e) {
    later_message = e.what();
  }
  CHECK(later_message.find("failed earlier") != std::string::npos);
  cudaDeviceSynchronize();
}

TEST_CASE("refusals: host tensors, a dtype NCCL cannot reduce, wrong sizes") {
  OneRank rank;
  at::Tensor host = at::ones({16});
  try {
    rank.comm->all_reduce(host, zt::ReduceOp::kSum);
    FAIL("a host tensor was accepted");
  } catch (const zt::InternalError& e) {
    CHECK(std::string(e.what()).find("comm_ucx") != std::string::npos);
  }
  at::Tensor flags = at::ones({16}, on_gpu(at::kBool));
  CHECK_THROWS_AS(rank.comm->all_reduce(flags, zt::ReduceOp::kSum), zt::InternalError);
  at::Tensor out = at::ones({16}, on_gpu(at::kFloat));
  CHECK_THROWS_AS(rank.comm->all_gather(out, out.narrow(0, 0, 8)), zt::InternalError);
}

TEST_CASE("split: a communicator of the ranks of one color, none for kSplitNoColor") {
  OneRank rank;
  std::unique_ptr<zt::Communicator> group = rank.comm->split(0, 0);
  REQUIRE(group != nullptr);
  CHECK(group->size() == 1);
  CHECK(group->rank() == 0);
  at::Tensor t = at::full({8}, 3.0, on_gpu(at::kFloat));
  group->all_reduce(t, zt::ReduceOp::kSum)->wait();
  CHECK(at::all(t.eq(3.0)).item<bool>());
  CHECK(group->stats()[zt::CommOp::kAllReduce].calls == 1);
  CHECK(rank.comm->split(zt::kSplitNoColor, 0) == nullptr);
}

int main(int argc, char** argv) {
  int devices = 0;
  const cudaError_t err = cudaGetDeviceCount(&devices);
  if (err != cudaSuccess || devices < 1) {
    std::printf("zt-skip: comm_nccl's tests need a CUDA GPU; %s. Run them on a GPU machine "
                "(scripts/device-build.sh runs ctest -L gpu).\n",
                err != cudaSuccess ? cudaGetErrorString(err) : "cudaGetDeviceCount found none");
    return kSkipReturnCode;
  }
  doctest::Context context(argc, argv);
  return context.run();
}
