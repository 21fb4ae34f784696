// zt_bench_adam's instruction sets: which optim_hybrid_adam kernels this CPU runs, the --isa list
// made concrete, the plugin told which one to use, and the roofline pass built for each.
// The test repeats the plugin's own (adam_isa.cc): the plugin is loaded at run time, not linked.
// Thread safety: pure functions, except use_zt_isa, which sets the environment.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace zt::bench {

// optim_hybrid_adam's kernels, best first, as ZT_ADAM_ISA spells them.
constexpr const char* kIsas[] = {"avx512", "avx2", "portable"};
// The ISA column of torch::optim::AdamW's rows: it runs whatever LibTorch's kernels pick.
constexpr const char* kLibtorchIsa = "libtorch";

// Whether this build has the kernel and its roofline and this CPU and OS run them (AVX2 needs
// avx2, fma and f16c; AVX-512 needs avx512f and avx512bw), as the plugin decides.
bool isa_runs(const std::string& isa);
// The first of kIsas that runs: what the plugin picks when ZT_ADAM_ISA is unset or "auto".
std::string best_isa();

// "auto|avx512|avx2|portable[,...]", given to `flag`, as concrete names ("auto" made best_isa()),
// in the order given without repeats. ConfigError quoting `usage` for an unknown name, and one
// naming the best ISA for a name this CPU or build cannot run.
std::vector<std::string> parse_isas(const std::string& list, const std::string& flag,
                                    const char* usage);

// Sets ZT_ADAM_ISA to `isa` (concrete), so the optimizer created next runs that kernel: the
// plugin reads it once, at create(), and throws there if it cannot run it.
void use_zt_isa(const std::string& isa);

using RooflinePass = void (*)(float* p, const float* g, float* m, float* v, int64_t n);
// The roofline pass compiled with the flags of `isa`'s kernel; `isa` must run here.
RooflinePass roofline_pass(const std::string& isa);

}  // namespace zt::bench
