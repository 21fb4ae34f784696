// zt_bench_adam's instruction sets (see isa.h).
#include "isa.h"

#include <algorithm>
#include <cstdlib>
#include <iterator>

#include "roofline.h"
#include "zt/error.h"

namespace zt::bench {

bool isa_runs(const std::string& isa) {
  if (isa == "portable") return true;
#if defined(ZT_BENCH_ADAM_X86)
  // libgcc's checks include the OS's support for the wider registers, as in adam_isa.cc.
  if (isa == "avx2") {
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
           __builtin_cpu_supports("f16c");
  }
  if (isa == "avx512") {
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw");
  }
#endif
  return false;
}

std::string best_isa() {
  for (const char* isa : kIsas) {
    if (isa_runs(isa)) return isa;
  }
  return "portable";
}

std::vector<std::string> parse_isas(const std::string& list, const std::string& flag,
                                    const char* usage) {
  std::vector<std::string> isas;
  size_t start = 0;
  while (true) {
    const size_t comma = list.find(',', start);
    std::string name = list.substr(start, comma == std::string::npos ? comma : comma - start);
    if (name == "auto") name = best_isa();
    if (std::find(std::begin(kIsas), std::end(kIsas), name) == std::end(kIsas)) {
      throw ConfigError(flag + ": '" + name + "' is not auto, avx512, avx2 or portable\n" + usage);
    }
    if (!isa_runs(name)) {
      throw ConfigError(flag + ": this CPU or build cannot run optim_hybrid_adam's " + name +
                        " kernel; the best it runs is " + best_isa());
    }
    if (std::find(isas.begin(), isas.end(), name) == isas.end()) isas.push_back(name);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return isas;
}

void use_zt_isa(const std::string& isa) { setenv("ZT_ADAM_ISA", isa.c_str(), 1); }

RooflinePass roofline_pass(const std::string& isa) {
#if defined(ZT_BENCH_ADAM_X86)
  if (isa == "avx512") return roofline_pass_avx512;
  if (isa == "avx2") return roofline_pass_avx2;
#endif
  if (isa == "portable") return roofline_pass_portable;
  throw InternalError("zt_bench_adam: no roofline pass for ISA " + isa);
}

}  // namespace zt::bench
