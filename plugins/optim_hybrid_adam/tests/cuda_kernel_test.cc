// optim_hybrid_adam's CUDA kernel (adam_cuda.h) on a GPU, on cudaMalloc'd buffers: against the
// double-precision reference of adam_test_support.h for every length 0..67 and 1,000,003 (all in
// one call, so more shards than one launch holds), in all three decay modes (AdamW, Adam's L2,
// none), with fp32, bf16 and fp16 gradients and no, bf16 and fp16 copy-out; the vector path
// (aligned buffers) against the scalar one (misaligned) bit for bit; hundreds of shards of mixed
// sizes and types in one call, also cut into tiny launches and segments; 20-step trajectories
// against the CPU kernels (the same bits as AVX2/AVX-512, which fuse the same multiply-adds);
// bf16 moments (to nearest and stochastic) over 20 steps against the portable CPU kernel; bad
// arguments (bf16 masters among them: the host kernels' only) refused; and, in a CUDA build of
// zt, the plugin itself with CUDA and host shards in one step.
//
// Label `gpu`. Without a CUDA device (cudaGetDeviceCount fails or finds none) the executable
// prints why and exits with kSkipReturnCode, which CTest reports as "Skipped" (SKIP_RETURN_CODE).
// LibTorch pulls in glog, whose one-argument CHECK (which aborts) would shadow doctest's; include
// it first and drop that macro so every CHECK below is doctest's reporting one.
#include <torch/torch.h>
#undef CHECK
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "adam_cuda.h"
#include "adam_kernel.h"
#include "adam_test_support.h"

namespace {

using namespace zt_adam_test;
using zt::hybrid_adam::AdamBuffers;
using zt::hybrid_adam::AdamConstants;
using zt::hybrid_adam::CudaAdamLimits;
using zt::hybrid_adam::CudaAdamStatus;
using zt::hybrid_adam::ElemType;

// The exit code CTest's SKIP_RETURN_CODE of this test names (tests/CMakeLists.txt).
constexpr int kSkipReturnCode = 77;

void cuda_ok(cudaError_t err, const char* what) {
  REQUIRE_MESSAGE(err == cudaSuccess, what << ": " << cudaGetErrorString(err));
}

class DeviceMemory {
 public:
  explicit DeviceMemory(size_t bytes) {
    if (bytes > 0) cuda_ok(cudaMalloc(&ptr_, bytes), "cudaMalloc");
  }
  ~DeviceMemory() { cudaFree(ptr_); }
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;
  char* get() const { return static_cast<char*>(ptr_); }

 private:
  void* ptr_ = nullptr;
};

// A stream of the test's own, so the kernel is checked on a stream that is not the default one.
cudaStream_t test_stream() {
  static cudaStream_t stream = [] {
    cudaStream_t s = nullptr;
    cuda_ok(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
    return s;
  }();
  return stream;
}

ElemType elem_type(torch::Dtype t) {
  if (t == torch::kBFloat16) return ElemType::kBFloat16;
  if (t == torch::kHalf) return ElemType::kFloat16;
  return ElemType::kFloat32;
}

// Bytes added before the first shard of each buffer (multiples of 4): 4 leaves fp32 buffers
// 4-byte aligned and 16-bit ones on 2 elements, so no shard of that buffer is vector-aligned.
struct Leads {
  size_t param = 0, grad = 0, exp_avg = 0, exp_avg_sq = 0, copy_out = 0;
};

// Host shards copied to the GPU back to back, one allocation per buffer: each shard's buffers
// start where the previous shard's ended, so some are 16-byte aligned (the vector path) and
// others are not (the scalar path), as in an engine's flat allocation.
class GpuShards {
 public:
  GpuShards(const std::vector<Shard>& host, const Leads& leads = {})
      : param_(layout(
            host, leads.param, [](const Shard& s) { return s.param; }, param_at_)),
        grad_(layout(
            host, leads.grad, [](const Shard& s) { return s.grad; }, grad_at_)),
        exp_avg_(layout(
            host, leads.exp_avg, [](const Shard& s) { return s.exp_avg; }, exp_avg_at_)),
        exp_avg_sq_(layout(
            host, leads.exp_avg_sq, [](const Shard& s) { return s.exp_avg_sq; }, exp_avg_sq_at_)),
        copy_out_(layout(
            host, leads.copy_out, [](const Shard& s) { return s.copy_out; }, copy_out_at_)) {
    for (size_t k = 0; k < host.size(); ++k) {
      const Shard& s = host[k];
      upload(s.param, param_.get() + param_at_[k]);
      upload(s.grad, grad_.get() + grad_at_[k]);
      upload(s.exp_avg, exp_avg_.get() + exp_avg_at_[k]);
      upload(s.exp_avg_sq, exp_avg_sq_.get() + exp_avg_sq_at_[k]);
      if (s.copy_out.defined()) upload(s.copy_out, copy_out_.get() + copy_out_at_[k]);
      AdamBuffers b;
      b.numel = s.param.numel();
      b.param = reinterpret_cast<float*>(param_.get() + param_at_[k]);
      b.grad = grad_.get() + grad_at_[k];
      b.grad_type = elem_type(s.grad.scalar_type());
      b.exp_avg = exp_avg_.get() + exp_avg_at_[k];
      b.exp_avg_sq = exp_avg_sq_.get() + exp_avg_sq_at_[k];
      b.state_type = elem_type(s.exp_avg.scalar_type());
      if (s.copy_out.defined()) {
        b.copy_out = copy_out_.get() + copy_out_at_[k];
        b.copy_type = elem_type(s.copy_out.scalar_type());
      }
      buffers_.push_back(b);
    }
  }

  const std::vector<AdamBuffers>& buffers() const { return buffers_; }

  // The updated param, states and copy-out back into `host` (the shards this was made from).
  void download(std::vector<Shard>& host) const {
    cuda_ok(cudaStreamSynchronize(test_stream()), "the kernel (cudaStreamSynchronize)");
    for (size_t k = 0; k < host.size(); ++k) {
      fetch(host[k].param, param_.get() + param_at_[k]);
      fetch(host[k].exp_avg, exp_avg_.get() + exp_avg_at_[k]);
      fetch(host[k].exp_avg_sq, exp_avg_sq_.get() + exp_avg_sq_at_[k]);
      if (host[k].copy_out.defined()) fetch(host[k].copy_out, copy_out_.get() + copy_out_at_[k]);
    }
  }

 private:
  template <class Get>
  static size_t layout(const std::vector<Shard>& host, size_t lead, Get get,
                       std::vector<size_t>& at) {
    size_t bytes = lead;
    for (const Shard& s : host) {
      const torch::Tensor t = get(s);
      // Each shard starts on its element size, as any allocator places it (a GPU faults on a
      // misaligned element); one buffer may hold fp32 and 16-bit gradients side by side.
      const size_t align = t.defined() ? t.element_size() : 1;
      bytes = (bytes + align - 1) / align * align;
      at.push_back(bytes);
      if (t.defined()) bytes += t.nbytes();
    }
    return bytes;
  }
  static void upload(const torch::Tensor& t, char* device) {
    cuda_ok(cudaMemcpy(device, t.data_ptr(), t.nbytes(), cudaMemcpyHostToDevice), "upload");
  }
  static void fetch(torch::Tensor& t, const char* device) {
    cuda_ok(cudaMemcpy(t.data_ptr(), device, t.nbytes(), cudaMemcpyDeviceToHost), "download");
  }

  std::vector<size_t> param_at_, grad_at_, exp_avg_at_, exp_avg_sq_at_, copy_out_at_;
  DeviceMemory param_, grad_, exp_avg_, exp_avg_sq_, copy_out_;
  std::vector<AdamBuffers> buffers_;
};

AdamConstants constants(const Hyper& h, int64_t step, double lr, double divisor) {
  return zt::hybrid_adam::make_adam_constants(lr, h.beta1, h.beta2, h.eps, h.weight_decay, h.adamw,
                                              step, divisor);
}

// One step of every shard on the GPU in one adam_update_cuda call; results back in `shards`.
CudaAdamStatus gpu_step(std::vector<Shard>& shards, const AdamConstants& c,
                        const CudaAdamLimits& limits = {}, const Leads& leads = {}) {
  GpuShards gpu(shards, leads);
  const CudaAdamStatus status = zt::hybrid_adam::adam_update_cuda(
      gpu.buffers().data(), gpu.buffers().size(), c, test_stream(), limits);
  REQUIRE_MESSAGE(status.ok(), "adam_update_cuda: " << status.what);
  gpu.download(shards);
  return status;
}

// Launches adam_update_cuda must make for these shards with these limits: per (gradient,
// copy-out) group, its segments packed max_segments to a launch.
int expected_launches(const std::vector<Shard>& shards, const CudaAdamLimits& limits) {
  std::map<std::pair<int, int>, int64_t> segments;
  for (const Shard& s : shards) {
    const int64_t n = s.param.numel();
    if (n == 0) continue;
    const int copy = s.copy_out.defined() ? static_cast<int>(s.copy_out.scalar_type()) : -1;
    segments[{static_cast<int>(s.grad.scalar_type()), copy}] += (n + limits.max_segment_numel - 1) /
                                                                limits.max_segment_numel;
  }
  int launches = 0;
  for (const auto& [group, count] : segments) {
    launches += static_cast<int>((count + limits.max_segments - 1) / limits.max_segments);
  }
  return launches;
}

bool same_bits(const Shard& a, const Shard& b) {
  bool same = torch::equal(a.param, b.param) && torch::equal(a.exp_avg, b.exp_avg) &&
              torch::equal(a.exp_avg_sq, b.exp_avg_sq);
  if (a.copy_out.defined()) same = same && torch::equal(a.copy_out, b.copy_out);
  return same;
}

// Shards with fresh state, gradients of `grad_type` and, if given, a copy-out pre-filled with 7.
std::vector<Shard> make_shards(const std::vector<int64_t>& sizes, torch::Dtype grad_type,
                               std::optional<torch::Dtype> copy_type, double grad_scale) {
  std::vector<Shard> shards;
  for (int64_t n : sizes) {
    shards.emplace_back(n);
    shards.back().grad = (torch::randn({n}) * grad_scale).to(grad_type);
    if (copy_type) shards.back().copy_out = torch::full({n}, 7.0, torch::dtype(*copy_type));
  }
  return shards;
}

std::vector<Shard> clone_shards(const std::vector<Shard>& shards) {
  std::vector<Shard> out;
  for (const Shard& s : shards) {
    out.emplace_back(0);
    out.back().param = s.param.clone();
    out.back().grad = s.grad.clone();
    out.back().exp_avg = s.exp_avg.clone();
    out.back().exp_avg_sq = s.exp_avg_sq.clone();
    if (s.copy_out.defined()) out.back().copy_out = s.copy_out.clone();
  }
  return out;
}

}  // namespace

TEST_CASE("CUDA kernel vs the double reference: lengths 0..67 and 1,000,003, every mode, "
          "gradient type and copy-out") {
  torch::manual_seed(41);
  std::vector<int64_t> sizes;
  for (int64_t n = 0; n <= 67; ++n) sizes.push_back(n);
  sizes.push_back(1000003);
  const double divisor = 3.0 * 1024;
  WorstError worst;
  for (const Mode& mode : kModes) {
    Hyper h;
    h.adamw = mode.adamw;
    h.weight_decay = mode.weight_decay;
    for (torch::Dtype grad_type : kGradTypes) {
      for (const std::optional<torch::Dtype>& copy_type : kCopyTypes) {
        CAPTURE(mode.name);
        CAPTURE(grad_type);
        CAPTURE(copy_type.has_value());
        std::vector<Shard> shards = make_shards(sizes, grad_type, copy_type, divisor);
        for (int64_t step = 1; step <= 2; ++step) {
          for (Shard& s : shards) {
            s.grad = (torch::randn({s.param.numel()}) * divisor).to(grad_type);
          }
          const std::vector<Shard> before = clone_shards(shards);
          const double lr = scheduled_lr(h, step);
          const CudaAdamStatus status = gpu_step(shards, constants(h, step, lr, divisor));
          // 68 non-empty shards: more than one launch's argument block holds.
          CHECK(status.launches == expected_launches(shards, {}));
          CHECK(status.launches == 2);
          for (size_t k = 0; k < shards.size(); ++k) {
            CAPTURE(sizes[k]);
            check_step_against_reference(h, step, lr, divisor, before[k].param,
                                         before[k].grad.to(torch::kFloat), before[k].exp_avg,
                                         before[k].exp_avg_sq, shards[k], worst);
            if (copy_type) CHECK(torch::equal(shards[k].copy_out, shards[k].param.to(*copy_type)));
          }
        }
      }
    }
  }
  MESSAGE("CUDA kernel: worst error / bound: p " << worst.p << ", m " << worst.m << ", v "
                                                 << worst.v << "; worst relative error of p "
                                                 << "where |p| >= 1e-3: " << worst.p_rel);
}

TEST_CASE("misaligned buffers (the scalar path) give the bits of aligned ones (the vector path)") {
  torch::manual_seed(42);
  const std::vector<int64_t> sizes = {1, 3, 4, 5, 8191, 8192, 8193, 100003};
  Leads all;
  all.param = all.grad = all.exp_avg = all.exp_avg_sq = all.copy_out = 4;
  Leads grad_only;
  grad_only.grad = 4;
  Leads copy_only;
  copy_only.copy_out = 4;
  Leads state_only;
  state_only.exp_avg_sq = 4;
  for (bool adamw : {true, false}) {
    Hyper h;
    h.adamw = adamw;
    for (torch::Dtype grad_type : {torch::kFloat, torch::kBFloat16}) {
      for (torch::Dtype copy_type : {torch::kHalf, torch::kBFloat16}) {
        CAPTURE(adamw);
        CAPTURE(grad_type);
        CAPTURE(copy_type);
        const std::vector<Shard> start = make_shards(sizes, grad_type, copy_type, 1.0);
        std::vector<Shard> aligned = clone_shards(start);
        gpu_step(aligned, constants(h, 1, 1e-2, 2.0));
        for (const Leads& leads : {all, grad_only, copy_only, state_only}) {
          std::vector<Shard> shifted = clone_shards(start);
          gpu_step(shifted, constants(h, 1, 1e-2, 2.0), {}, leads);
          for (size_t k = 0; k < sizes.size(); ++k) {
            CAPTURE(sizes[k]);
            CHECK(same_bits(shifted[k], aligned[k]));
          }
        }
      }
    }
  }
}

TEST_CASE("hundreds of shards of mixed sizes and types in one call, also in tiny launches") {
  // 150 fp32-gradient shards without copy-out (one group of more than two argument blocks),
  // then 250 of every gradient and copy-out type, sizes from 0 to 40,000 and a few long ones.
  torch::manual_seed(43);
  std::vector<Shard> shards;
  for (int k = 0; k < 400; ++k) {
    int64_t n = torch::randint(0, 40000, {1}).item<int64_t>();
    if (k % 97 == 5) n = 300001;
    if (k % 50 == 7) n = 0;
    const torch::Dtype grad_type = k < 150 ? torch::kFloat : kGradTypes[k % 3];
    shards.emplace_back(n);
    shards.back().grad = torch::randn({n}).to(grad_type);
    const std::optional<torch::Dtype>& copy_type = kCopyTypes[k / 3 % 3];
    if (k >= 150 && copy_type) {
      shards.back().copy_out = torch::zeros({n}, torch::dtype(*copy_type));
    }
  }
  Hyper h;
  h.adamw = false;
  const std::vector<Shard> start = clone_shards(shards);
  const AdamConstants c = constants(h, 1, 1e-2, 5.0);

  std::vector<Shard> full = clone_shards(start);
  const CudaAdamStatus status = gpu_step(full, c);
  CHECK(status.launches == expected_launches(full, {}));
  CHECK(status.launches > 9);  // more than one launch per (gradient, copy-out) group somewhere
  WorstError worst;
  for (size_t k = 0; k < full.size(); ++k) {
    CAPTURE(k);
    check_step_against_reference(h, 1, 1e-2, 5.0, start[k].param, start[k].grad.to(torch::kFloat),
                                 start[k].exp_avg, start[k].exp_avg_sq, full[k], worst);
    if (full[k].copy_out.defined()) {
      CHECK(torch::equal(full[k].copy_out, full[k].param.to(full[k].copy_out.scalar_type())));
    }
  }

  // Long shards cut into 2-chunk segments, 5 segments a launch: hundreds of launches, same bits.
  CudaAdamLimits tiny;
  tiny.max_segments = 5;
  tiny.max_segment_numel = 2 * zt::hybrid_adam::kCudaAdamChunk;
  std::vector<Shard> cut = clone_shards(start);
  const CudaAdamStatus cut_status = gpu_step(cut, c, tiny);
  CHECK(cut_status.launches == expected_launches(cut, tiny));
  MESSAGE(status.launches << " launches with the default limits, " << cut_status.launches
                          << " with 5 segments of at most 2 chunks each");
  for (size_t k = 0; k < cut.size(); ++k) {
    CAPTURE(k);
    CHECK(same_bits(cut[k], full[k]));
  }
}

TEST_CASE("bad arguments are refused before anything is enqueued") {
  std::vector<Shard> shards = make_shards({10}, torch::kFloat, torch::kFloat, 1.0);
  GpuShards gpu(shards);
  const AdamConstants c = constants(Hyper{}, 1, 1e-2, 1.0);
  std::vector<AdamBuffers> b = gpu.buffers();
  CudaAdamStatus status = zt::hybrid_adam::adam_update_cuda(b.data(), 1, c, test_stream());
  CHECK_FALSE(status.ok());
  CHECK(std::string(status.what).find("fp32 copy_out") != std::string::npos);
  CHECK(status.launches == 0);
  CudaAdamLimits odd;
  odd.max_segment_numel = zt::hybrid_adam::kCudaAdamChunk + 1;
  b[0].copy_out = nullptr;
  status = zt::hybrid_adam::adam_update_cuda(b.data(), 1, c, test_stream(), odd);
  CHECK_FALSE(status.ok());
  CHECK(status.launches == 0);
  AdamBuffers misaligned = b[0];  // fp32 gradient 2 bytes into its element
  misaligned.grad = static_cast<const char*>(misaligned.grad) + 2;
  status = zt::hybrid_adam::adam_update_cuda(&misaligned, 1, c, test_stream());
  CHECK_FALSE(status.ok());
  CHECK(std::string(status.what).find("not aligned to its element size") != std::string::npos);
  CHECK(status.launches == 0);
  AdamBuffers bf16_master = b[0];  // bf16 masters are the host kernels' only
  bf16_master.param_type = zt::hybrid_adam::ElemType::kBFloat16;
  status = zt::hybrid_adam::adam_update_cuda(&bf16_master, 1, c, test_stream());
  CHECK_FALSE(status.ok());
  CHECK(std::string(status.what).find("bf16 master parameters") != std::string::npos);
  CHECK(status.launches == 0);
  b[0].grad = nullptr;
  status = zt::hybrid_adam::adam_update_cuda(b.data(), 1, c, test_stream());
  CHECK_FALSE(status.ok());
  // Nothing ran: the device buffers still hold the inputs.
  std::vector<Shard> after = clone_shards(shards);
  gpu.download(after);
  CHECK(torch::equal(after[0].param, shards[0].param));
  CHECK(torch::equal(after[0].exp_avg, shards[0].exp_avg));
}

TEST_CASE("20-step trajectories equal every CPU kernel bit for bit") {
  // The CPU side is the plugin itself, with each kernel this CPU runs forced by ZT_ADAM_ISA; the
  // GPU side gets the same constants the plugin forms. Every kernel does the same operations,
  // fused in the same places (adam_kernel.h), so they must agree to the bit.
  const std::vector<int64_t> sizes = {1, 7, 64, 1000, 4099, 100003};
  for (bool adamw : {true, false}) {
    for (const std::string& isa : available_isas()) {
      CAPTURE(adamw);
      CAPTURE(isa);
      Hyper h;
      h.beta2 = 0.95;
      h.weight_decay = 0.1;
      h.adamw = adamw;
      const double divisor = 3.0;
      torch::manual_seed(adamw ? 44 : 45);
      IsaScope scope(isa);
      auto cpu_opt = make_optimizer(h.values());
      std::vector<Shard> cpu, gpu;
      for (size_t k = 0; k < sizes.size(); ++k) {
        cpu.emplace_back(sizes[k]);
        if (k % 2 == 1) cpu.back().copy_out = torch::zeros({sizes[k]}, torch::kBFloat16);
      }
      gpu = clone_shards(cpu);
      for (int64_t step = 1; step <= 20; ++step) {
        const double lr = scheduled_lr(h, step);
        std::vector<zt::ShardTensors> views;
        for (size_t k = 0; k < sizes.size(); ++k) {
          cpu[k].grad = torch::randn({sizes[k]}).to(k % 3 == 2 ? torch::kHalf : torch::kFloat);
          gpu[k].grad = cpu[k].grad.clone();
          views.push_back(cpu[k].view());
        }
        cpu_opt->step(views, zt::StepArgs{step, lr, divisor});
        gpu_step(gpu, constants(h, step, lr, divisor));
        for (size_t k = 0; k < sizes.size(); ++k) {
          CAPTURE(step);
          CAPTURE(sizes[k]);
          CHECK(same_bits(gpu[k], cpu[k]));
        }
      }
    }
  }
}

TEST_CASE("bf16 moments: 20 steps equal the portable CPU kernel bit for bit, both roundings") {
  // The CPU side is the plugin with state_dtype = "bf16"; the GPU side gets its constants, the
  // same rounding and each shard's seed (the key of stochastic rounding's bits).
  const std::vector<int64_t> sizes = {1, 7, 64, 1000, 4099, 100003};
  for (const char* rounding : {"nearest", "stochastic"}) {
    CAPTURE(rounding);
    Hyper h;
    h.weight_decay = 0.1;
    torch::manual_seed(47);
    IsaScope scope("portable");
    std::map<std::string, zt::Value> values = h.values();
    values["state_dtype"] = std::string("bf16");
    values["state_rounding"] = std::string(rounding);
    auto cpu_opt = make_optimizer(values);
    std::vector<Shard> cpu;
    for (int64_t n : sizes) {
      cpu.emplace_back(n);
      cpu.back().exp_avg = cpu.back().exp_avg.to(torch::kBFloat16);
      cpu.back().exp_avg_sq = cpu.back().exp_avg_sq.to(torch::kBFloat16);
    }
    std::vector<Shard> gpu = clone_shards(cpu);
    for (int64_t step = 1; step <= 20; ++step) {
      const double lr = scheduled_lr(h, step);
      std::vector<zt::ShardTensors> views;
      for (size_t k = 0; k < sizes.size(); ++k) {
        cpu[k].grad = torch::randn({sizes[k]});
        gpu[k].grad = cpu[k].grad.clone();
        views.push_back(cpu[k].view());
        views.back().seed = 1000 * k;
      }
      cpu_opt->step(views, zt::StepArgs{step, lr, 2.0});
      GpuShards device(gpu);
      std::vector<AdamBuffers> b = device.buffers();
      for (size_t k = 0; k < b.size(); ++k) {
        b[k].state_rounding = std::string(rounding) == "stochastic"
                                  ? zt::hybrid_adam::StateRounding::kStochastic
                                  : zt::hybrid_adam::StateRounding::kNearest;
        b[k].seed = 1000 * k;
      }
      const CudaAdamStatus status = zt::hybrid_adam::adam_update_cuda(
          b.data(), b.size(), constants(h, step, lr, 2.0), test_stream());
      REQUIRE_MESSAGE(status.ok(), "adam_update_cuda: " << status.what);
      device.download(gpu);
      for (size_t k = 0; k < sizes.size(); ++k) {
        CAPTURE(step);
        CAPTURE(sizes[k]);
        CHECK(same_bits(gpu[k], cpu[k]));
      }
    }
  }
}

TEST_CASE("the plugin: CUDA and host shards in one step, each where it lives" *
          doctest::skip(!ZT_WITH_CUDA)) {
  // Needs a CUDA LibTorch (ZT_WITH_CUDA): CTest runs it as a test of its own only then, and
  // reports it Skipped otherwise (CMakeLists.txt); the decorator keeps a run of the whole binary
  // against a CPU-only one from reaching LibTorch's missing CUDA.
  torch::manual_seed(46);
  const std::vector<int64_t> sizes = {0, 5, 4099, 70001};
  Hyper h;
  h.adamw = true;
  auto opt = make_optimizer(h.values());
  std::vector<Shard> host;
  std::vector<zt::ShardTensors> cuda;
  for (int64_t n : sizes) {
    host.emplace_back(n);
    host.back().copy_out = torch::zeros({n}, torch::kBFloat16);
    const Shard& s = host.back();
    cuda.push_back({s.param.to(torch::kCUDA),
                    s.grad.to(torch::kCUDA),
                    {s.exp_avg.to(torch::kCUDA), s.exp_avg_sq.to(torch::kCUDA)},
                    s.copy_out.to(torch::kCUDA)});
  }
  std::vector<zt::ShardTensors> all = cuda;
  for (const Shard& s : host) all.push_back(s.view());
  opt->step(all, zt::StepArgs{1, 1e-2, 2.0});
  const bool simd = available_isas().size() > 1;  // the plugin's kernel fuses as the GPU's does
  for (size_t k = 0; k < sizes.size(); ++k) {
    CAPTURE(sizes[k]);
    const torch::Tensor p = cuda[k].param.cpu();
    if (simd) {
      CHECK(torch::equal(p, host[k].param));
      CHECK(torch::equal(cuda[k].states[0].cpu(), host[k].exp_avg));
      CHECK(torch::equal(cuda[k].states[1].cpu(), host[k].exp_avg_sq));
      CHECK(torch::equal(cuda[k].copy_out.cpu(), host[k].copy_out));
    } else {
      CHECK(torch::allclose(p, host[k].param, 1e-5, 1e-7));
    }
  }
}

int main(int argc, char** argv) {
  int devices = 0;
  const cudaError_t err = cudaGetDeviceCount(&devices);
  if (err != cudaSuccess || devices < 1) {
    const std::string why = err != cudaSuccess ? std::string("cudaGetDeviceCount failed: ") +
                                                     cudaGetErrorString(err)
                                               : std::string("cudaGetDeviceCount found no device");
    std::printf("zt-skip: optim_hybrid_adam's CUDA kernel tests need a CUDA GPU; %s. "
                "Run them on a GPU machine (scripts/device-build.sh runs ctest -L gpu).\n",
                why.c_str());
    return kSkipReturnCode;
  }
  cudaDeviceProp prop;
  if (cudaGetDeviceProperties(&prop, 0) == cudaSuccess) {
    std::printf("CUDA device 0: %s (sm_%d%d), %d device(s)\n", prop.name, prop.major, prop.minor,
                devices);
  }
  doctest::Context context(argc, argv);
  return context.run();
}
