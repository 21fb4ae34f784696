// The BLAS core check: which OpenBLAS core a CPU should run, what zt hands to the processes it
// starts, and the run header's line. The decision is pure, so CPUs OpenBLAS knows and CPUs it
// does not are both covered here whatever CPU runs the test.
#include <doctest/doctest.h>

#include <cstdlib>

#include "../skip.h"
#include "../test_util.h"
#include "zt/host/blas.h"

using zt::test::contains;

namespace {

zt::CpuFeatures up_to(int level) {
  zt::CpuFeatures f;
  f.sse3 = level >= 2;
  f.ssse3 = level >= 3;
  f.sse4_2 = level >= 4;
  f.avx = level >= 5;
  f.avx2 = f.fma = level >= 6;
  f.avx512f = f.avx512bw = f.avx512vl = f.avx512dq = level >= 7;
  return f;
}
const zt::CpuFeatures kAvx512 = up_to(7);
const zt::CpuFeatures kAvx2 = up_to(6);

using zt::test::EnvVar;

}  // namespace

TEST_CASE("a CPU OpenBLAS knows: the core it picked stays") {
  CHECK(zt::recommended_openblas_core("SkylakeX", kAvx512) == "");
  CHECK(zt::recommended_openblas_core("Cooperlake", kAvx512) == "");
  CHECK(zt::recommended_openblas_core("Haswell", kAvx2) == "");
  CHECK(zt::recommended_openblas_core("Zen", kAvx2) == "");
  CHECK(zt::recommended_openblas_core("Sandybridge", up_to(5)) == "");
  CHECK(zt::recommended_openblas_core("Prescott", up_to(2)) == "");
}

TEST_CASE("a CPU OpenBLAS does not know: the strongest core its features run") {
  // Newer Intel Xeons under OpenBLAS 0.3.21: Prescott kernels on an AVX-512 CPU.
  CHECK(zt::recommended_openblas_core("Prescott", kAvx512) == "SkylakeX");
  CHECK(zt::recommended_openblas_core("Core2", kAvx512) == "SkylakeX");
  // AVX-512 AMD EPYCs: the Zen (Haswell) kernels.
  CHECK(zt::recommended_openblas_core("Haswell", kAvx512) == "SkylakeX");
  CHECK(zt::recommended_openblas_core("Zen", kAvx512) == "SkylakeX");
  CHECK(zt::recommended_openblas_core("Nehalem", kAvx2) == "Haswell");
  CHECK(zt::recommended_openblas_core("Unknown", up_to(5)) == "Sandybridge");
  CHECK(zt::recommended_openblas_core("prescott", kAvx2) == "Haswell");  // spelling varies
}

TEST_CASE("AVX-512 counts only with all of F, BW, VL and DQ (what the SkylakeX kernels use)") {
  zt::CpuFeatures f = kAvx2;
  f.avx512f = true;  // e.g. Knights Landing: F without BW/VL/DQ
  CHECK(zt::recommended_openblas_core("Haswell", f) == "");
  CHECK(zt::recommended_openblas_core("Sandybridge", f) == "Haswell");
}

TEST_CASE("nothing changes for a core name zt does not rank or a BLAS that is not OpenBLAS") {
  CHECK(zt::recommended_openblas_core("", kAvx512) == "");
  CHECK(zt::recommended_openblas_core("NeoverseV2", kAvx512) == "");
  CHECK(zt::recommended_openblas_core("SomeFutureCore", kAvx512) == "");
}

TEST_CASE("children get OPENBLAS_CORETYPE only when the core is weak and the user chose none") {
  zt::BlasInfo weak{"OpenBLAS 0.3.21", "Prescott", "SkylakeX", "", ""};
  auto env = zt::blas_env_for_children(weak);
  REQUIRE(env.size() == 2);
  CHECK(env[0] == std::make_pair(std::string("OPENBLAS_CORETYPE"), std::string("SkylakeX")));
  CHECK(env[1] == std::make_pair(std::string(zt::kBlasDetectedVar), std::string("Prescott")));

  zt::BlasInfo fine{"OpenBLAS 0.3.21", "Haswell", "", "", ""};
  CHECK(zt::blas_env_for_children(fine).empty());
  zt::BlasInfo user = weak;
  user.user_core = "Prescott";
  CHECK(zt::blas_env_for_children(user).empty());
  CHECK(zt::blas_env_for_children(zt::BlasInfo{}).empty());
}

TEST_CASE("the run header says which core runs, who chose it, and the fix when it is weak") {
  CHECK(zt::blas_header_line({"OpenBLAS 0.3.21", "Haswell", "", "", ""}) ==
        "BLAS: OpenBLAS 0.3.21 core Haswell");
  CHECK(zt::blas_header_line({"OpenBLAS 0.3.21", "SkylakeX", "", "", "Prescott"}) ==
        "BLAS: OpenBLAS 0.3.21 core SkylakeX (set by zt; OpenBLAS 0.3.21 picks Prescott on this "
        "CPU)");
  std::string weak = zt::blas_header_line({"OpenBLAS 0.3.21", "Prescott", "SkylakeX", "", ""});
  CHECK(contains(weak, "core Prescott"));
  CHECK(contains(weak, "export OPENBLAS_CORETYPE=SkylakeX"));
  std::string user = zt::blas_header_line({"OpenBLAS 0.3.21", "Haswell", "", "Haswell", ""});
  CHECK(contains(user, "OPENBLAS_CORETYPE from your environment"));
  CHECK(!contains(user, "set by zt"));
  CHECK(contains(zt::blas_header_line(zt::BlasInfo{}), "not OpenBLAS"));
}

TEST_CASE("probing this process agrees with the decision for this CPU") {
  EnvVar no_user(zt::kOpenblasCoretypeVar, nullptr);
  EnvVar no_marker(zt::kBlasDetectedVar, nullptr);
  zt::BlasInfo info = zt::probe_blas();
  INFO(zt::blas_header_line(info));
  if (info.library.empty()) {
    ZT_SKIP_UNLESS_CI("this process's BLAS is not OpenBLAS, so there is no core to probe; "
                      "scripts/setup.sh installs libopenblas0-openmp");
  }
  CHECK(contains(info.library, "OpenBLAS"));
  CHECK(!info.core.empty());
  CHECK(info.user_core.empty());
  CHECK(info.recommended == zt::recommended_openblas_core(info.core, zt::cpu_features()));
  CHECK(zt::blas_env_for_children(info).empty() == info.recommended.empty());

  // The user's own choice is never replaced (OpenBLAS already loaded: only the record changes).
  EnvVar user(zt::kOpenblasCoretypeVar, "Prescott");
  zt::BlasInfo chosen = zt::probe_blas();
  CHECK(chosen.user_core == "Prescott");
  CHECK(zt::blas_env_for_children(chosen).empty());
}
