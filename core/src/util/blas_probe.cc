#include <dlfcn.h>
#include <strings.h>

#include <cstdlib>
#include <sstream>

#include "zt/host/blas.h"

namespace zt {

namespace {

// OpenBLAS cores (names as openblas_get_corename() spells them, 0.3.21 and later) ranked by the
// widest vector instructions their kernels use: 1 SSE2, 2 SSE3, 3 SSSE3, 4 SSE4.2, 5 AVX,
// 6 AVX2 + FMA, 7 AVX-512. A name missing here is never overridden.
struct CoreLevel {
  const char* name;
  int level;
};
constexpr CoreLevel kCoreLevels[] = {
    {"Unknown", 0},      {"Katmai", 0},      {"Coppermine", 0},     {"Athlon", 0},
    {"Northwood", 1},    {"Banias", 1},      {"Opteron", 1},        {"Prescott", 2},
    {"Opteron_SSE3", 2}, {"Atom", 2},        {"Nano", 2},           {"Barcelona", 2},
    {"Bobcat", 2},       {"Core2", 3},       {"Penryn", 3},         {"Dunnington", 3},
    {"Nehalem", 4},      {"Sandybridge", 5}, {"Bulldozer", 5},      {"Piledriver", 5},
    {"Steamroller", 5},  {"Excavator", 5},   {"Haswell", 6},        {"Zen", 6},
    {"SkylakeX", 7},     {"Cooperlake", 7},  {"SapphireRapids", 7},
};
// The core to ask for at each level (index = level); level 1 and below have no better choice.
constexpr const char* kCoreForLevel[] = {
    "", "", "Prescott", "Core2", "Nehalem", "Sandybridge", "Haswell", "SkylakeX"};

int level_of_core(const std::string& name) {
  for (const auto& c : kCoreLevels) {
    if (strcasecmp(c.name, name.c_str()) == 0) return c.level;
  }
  return -1;
}

int level_of_cpu(const CpuFeatures& f) {
  if (f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq) return 7;
  if (f.avx2 && f.fma) return 6;
  if (f.avx) return 5;
  if (f.sse4_2) return 4;
  if (f.ssse3) return 3;
  if (f.sse3) return 2;
  return 1;
}

std::string env_or_empty(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

}  // namespace

CpuFeatures cpu_features() {
  CpuFeatures f;
#if defined(__x86_64__) || defined(__i386__)
  // libgcc's checks include the OS's support for the AVX and AVX-512 registers (XCR0).
  __builtin_cpu_init();
  f.sse3 = __builtin_cpu_supports("sse3");
  f.ssse3 = __builtin_cpu_supports("ssse3");
  f.sse4_2 = __builtin_cpu_supports("sse4.2");
  f.avx = __builtin_cpu_supports("avx");
  f.avx2 = __builtin_cpu_supports("avx2");
  f.fma = __builtin_cpu_supports("fma");
  f.avx512f = __builtin_cpu_supports("avx512f");
  f.avx512bw = __builtin_cpu_supports("avx512bw");
  f.avx512vl = __builtin_cpu_supports("avx512vl");
  f.avx512dq = __builtin_cpu_supports("avx512dq");
#endif
  return f;
}

std::string recommended_openblas_core(const std::string& reported, const CpuFeatures& cpu) {
  const int have = level_of_core(reported);
  if (reported.empty() || have < 0) return "";
  const int can = level_of_cpu(cpu);
  return can > have ? kCoreForLevel[can] : "";
}

BlasInfo probe_blas() {
  using NameFn = char* (*)();
  BlasInfo info;
  // Looked up, not linked: the BLAS LibTorch loaded may be another one.
  auto corename = reinterpret_cast<NameFn>(dlsym(RTLD_DEFAULT, "openblas_get_corename"));
  if (!corename || !corename()) return info;
  info.core = corename();
  info.library = "OpenBLAS";
  if (auto config = reinterpret_cast<NameFn>(dlsym(RTLD_DEFAULT, "openblas_get_config"))) {
    // "OpenBLAS 0.3.21 NO_LAPACKE DYNAMIC_ARCH ...": the first two words.
    std::istringstream words(config() ? config() : "");
    std::string name, version;
    if (words >> name >> version) info.library = name + " " + version;
  }
  const std::string chosen = env_or_empty(kOpenblasCoretypeVar);
  if (!chosen.empty()) {
    const std::string detected = env_or_empty(kBlasDetectedVar);
    if (detected.empty()) info.user_core = chosen;
    else info.detected = detected;
  }
  info.recommended = recommended_openblas_core(info.core, cpu_features());
  return info;
}

std::vector<std::pair<std::string, std::string>> blas_env_for_children(const BlasInfo& info) {
  if (info.recommended.empty() || !info.user_core.empty() || !info.detected.empty()) return {};
  return {{kOpenblasCoretypeVar, info.recommended}, {kBlasDetectedVar, info.core}};
}

std::string blas_header_line(const BlasInfo& info) {
  if (info.library.empty()) return "BLAS: not OpenBLAS (its kernels were not checked)";
  std::string line = "BLAS: " + info.library + " core " + info.core;
  if (!info.user_core.empty()) {
    line += " (" + std::string(kOpenblasCoretypeVar) + " from your environment";
    if (!info.recommended.empty()) line += "; this CPU runs " + info.recommended;
    return line + ")";
  }
  if (!info.recommended.empty()) {
    return line + ", slower than this CPU allows: export " + kOpenblasCoretypeVar + "=" +
           info.recommended + " before starting the ranks";
  }
  if (!info.detected.empty()) {
    line += " (set by zt; " + info.library + " picks " + info.detected + " on this CPU)";
  }
  return line;
}

}  // namespace zt
