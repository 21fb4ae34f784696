// Which library this process's std::filesystem functions are bound to. PyTorch's wheels export
// from libtorch_cpu.so copies of them that they link statically (pytorch/pytorch#133437); where
// LibTorch comes before libstdc++ in the process's library list, zt's calls run those copies,
// built against another libstdc++'s layout of std::filesystem::path, and crash (seen on a GPU
// machine with PyTorch 2.11). The build names libstdc++ first in every link (CMakeLists.txt);
// this checks that the dynamic linker's search finds libstdc++'s definitions first. Debian's
// LibTorch 1.13 exports no such copies, so here it passes whatever the link; on a GPU machine's
// PyTorch it fails when another library comes first.
#include <dlfcn.h>
#include <doctest/doctest.h>

#include <string>

TEST_CASE("std::filesystem calls reach libstdc++, not the copies LibTorch may export") {
  // The names the crashing tests called (path parsing, making and removing folders), in the
  // string ABI this build uses.
#if _GLIBCXX_USE_CXX11_ABI
  const char* const names[] = {
      "_ZNSt10filesystem7__cxx114path14_M_split_cmptsEv",
      "_ZNSt10filesystem18create_directoriesERKNS_7__cxx114pathERSt10error_code",
      "_ZNSt10filesystem10remove_allERKNS_7__cxx114pathERSt10error_code",
  };
#else
  const char* const names[] = {
      "_ZNSt10filesystem4path14_M_split_cmptsEv",
      "_ZNSt10filesystem18create_directoriesERKNS_4pathERSt10error_code",
      "_ZNSt10filesystem10remove_allERKNS_4pathERSt10error_code",
  };
#endif
  for (const char* name : names) {
    // RTLD_DEFAULT searches the libraries in the order the dynamic linker binds symbols.
    void* function = dlsym(RTLD_DEFAULT, name);
    REQUIRE_MESSAGE(function != nullptr, (std::string(name) + " is defined by no loaded library"));
    Dl_info info{};
    REQUIRE(dladdr(function, &info) != 0);
    const std::string library = info.dli_fname != nullptr ? info.dli_fname : "";
    CHECK_MESSAGE(library.find("libstdc++.so") != std::string::npos,
                  (std::string(name) + " is bound to " + library +
                   ": libstdc++ must come before it in the link (CMakeLists.txt)"));
  }
}
