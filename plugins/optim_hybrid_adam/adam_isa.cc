// Picks optim_hybrid_adam's kernel from the CPU's features and ZT_ADAM_ISA (see adam_isa.h).
#include "adam_isa.h"

#if defined(ZT_ADAM_X86)
#include <cpuid.h>
#endif

#include <cstdlib>
#include <string>

#include "zt/error.h"

namespace zt::hybrid_adam {

namespace {

constexpr const char* kEnv = "ZT_ADAM_ISA";
constexpr Isa kBestFirst[] = {Isa::kAvx512, Isa::kAvx2, Isa::kPortable};

}  // namespace

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::kPortable: return "portable";
    case Isa::kAvx2: return "avx2";
    case Isa::kAvx512: return "avx512";
  }
  return "unknown";
}

#if defined(ZT_ADAM_X86)
namespace {
// F16C from CPUID (leaf 1, ECX bit 29): Clang before 15 does not know the name in
// __builtin_cpu_supports; the YMM state it uses is what the avx2 check already covers.
bool has_f16c() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & (1u << 29)) != 0;
}
}  // namespace
#endif

bool isa_available(Isa isa) {
  switch (isa) {
    case Isa::kPortable: return true;
#if defined(ZT_ADAM_X86)
    // libgcc's checks include the OS's support for the wider registers (XGETBV), so a
    // hypervisor that hides AVX-512 state makes these false rather than faulting later.
    case Isa::kAvx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && has_f16c();
    case Isa::kAvx512:
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw");
#else
    case Isa::kAvx2:
    case Isa::kAvx512: return false;
#endif
  }
  return false;
}

Isa choose_isa() {
  const char* raw = std::getenv(kEnv);
  const std::string wanted = raw ? raw : "";
  if (wanted.empty() || wanted == "auto") {
    for (Isa isa : kBestFirst) {
      if (isa_available(isa)) return isa;
    }
  }
  for (Isa isa : kBestFirst) {
    if (wanted != isa_name(isa)) continue;
    if (!isa_available(isa)) {
      throw ConfigError(std::string(kEnv) + "=" + wanted + ": optim_hybrid_adam's " + wanted +
                        " kernel cannot run here (this CPU or build lacks the instructions); "
                        "unset " +
                        kEnv + " to use the best available kernel");
    }
    return isa;
  }
  throw ConfigError(std::string(kEnv) + "=" + wanted +
                    " is not a kernel of optim_hybrid_adam; use avx512, avx2, portable or auto");
}

AdamRangeKernel range_kernel(Isa isa) {
  switch (isa) {
#if defined(ZT_ADAM_X86)
    case Isa::kAvx512: return adam_range_avx512;
    case Isa::kAvx2: return adam_range_avx2;
#else
    case Isa::kAvx512:
    case Isa::kAvx2:
#endif
    case Isa::kPortable: return adam_range_portable;
  }
  return adam_range_portable;
}

}  // namespace zt::hybrid_adam
