// Which BLAS kernels this process runs, and the fix when they are slower than the CPU allows.
// OpenBLAS built with DYNAMIC_ARCH picks its kernels ("core") from the CPU model when it loads;
// a release older than the CPU falls back to an old core (Debian 12's 0.3.21 runs Prescott
// kernels on newer Intel Xeons and Haswell ones on AVX-512 AMD EPYCs: sgemm 2-4x slower).
// OPENBLAS_CORETYPE chooses the core, but only before the library loads, so the fix goes into
// the environment of processes zt starts; a user's own OPENBLAS_CORETYPE is never replaced.
// The BLAS is looked up at run time (dlsym), so nothing breaks when it is not OpenBLAS.
// Thread safety: every function may be called from any thread.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "zt/api.h"

namespace zt {

// The instruction sets that decide which OpenBLAS cores a CPU (and its OS) can run.
struct CpuFeatures {
  bool sse3 = false;
  bool ssse3 = false;
  bool sse4_2 = false;
  bool avx = false;
  bool avx2 = false;
  bool fma = false;
  bool avx512f = false;
  bool avx512bw = false;
  bool avx512vl = false;
  bool avx512dq = false;
};

// This CPU's features (cpuid, with the OS's support for the wide registers).
ZT_API CpuFeatures cpu_features();

// The best OpenBLAS core `cpu` runs, when it is stronger than `reported` (the core OpenBLAS
// picked, as openblas_get_corename() names it): "SkylakeX", "Haswell", "Sandybridge",
// "Nehalem", "Core2" or "Prescott". "" when nothing should change: `reported` is as strong,
// is a core this table does not rank (a newer OpenBLAS knows more), or is empty (not OpenBLAS).
ZT_API std::string recommended_openblas_core(const std::string& reported, const CpuFeatures& cpu);

// The environment variables zt sets for the processes it starts.
inline constexpr const char* kOpenblasCoretypeVar = "OPENBLAS_CORETYPE";
// Set next to it: the core OpenBLAS had picked on its own, so a rank can say zt changed it.
inline constexpr const char* kBlasDetectedVar = "ZT_OPENBLAS_DETECTED_CORE";

struct BlasInfo {
  std::string library;      // "OpenBLAS 0.3.21"; "" when the BLAS is not OpenBLAS
  std::string core;         // the core this process runs: "Haswell"
  std::string recommended;  // a stronger core this CPU runs; "" when `core` is the right one
  std::string user_core;    // OPENBLAS_CORETYPE as the user set it; "" when unset or set by zt
  std::string detected;     // when zt set OPENBLAS_CORETYPE here: the core OpenBLAS had picked
};

// What this process runs. Reads the environment, so call it before changing OPENBLAS_CORETYPE.
ZT_API BlasInfo probe_blas();

// The variables that give a child process `info.recommended` (kOpenblasCoretypeVar and
// kBlasDetectedVar); empty when nothing should change or the user chose a core.
ZT_API std::vector<std::pair<std::string, std::string>> blas_env_for_children(const BlasInfo& info);

// One line for a run header: "BLAS: OpenBLAS 0.3.21 core Haswell", "... core SkylakeX (set by
// zt; OpenBLAS 0.3.21 picks Haswell on this CPU)", or, when this process runs a weaker core
// than its CPU allows (ranks started by torchrun, mpirun or srun), the one-line fix:
// "... core Haswell, slower than this CPU allows: export OPENBLAS_CORETYPE=SkylakeX ...".
ZT_API std::string blas_header_line(const BlasInfo& info);

}  // namespace zt
