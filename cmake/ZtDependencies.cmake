# Finds every dependency of zt in one place. Version differences between Debian's LibTorch 1.13
# and the LibTorch inside a PyTorch 2.x installation are guarded in core/src/util/torch_compat.h.
# LibTorch inside a PyTorch wheel looks for NVTX3's headers only in its own source tree and
# otherwise links CUDA::nvToolsExt, a library CUDA 12.9+ no longer ships. NVTX3 is header-only
# and comes with every recent toolkit: finding it there first (the cache variable LibTorch's
# lookup reads) keeps a CUDA LibTorch configurable with CUDA 13.
if(NOT ZT_WITH_CUDA STREQUAL "OFF" AND NOT nvtx3_dir)
  find_package(CUDAToolkit QUIET)
  if(CUDAToolkit_FOUND)
    find_path(nvtx3_dir NAMES nvtx3 PATHS ${CUDAToolkit_INCLUDE_DIRS} NO_DEFAULT_PATH)
  endif()
endif()
find_package(Torch REQUIRED)
find_package(ucx REQUIRED)
find_package(tomlplusplus REQUIRED)
# We compile toml++ header-only (TOML_HEADER_ONLY=1) rather than link Debian's shared build, so
# the same sources work where the C++ ABI differs (PyTorch wheels) and only headers travel.
get_target_property(ZT_TOMLPP_INCLUDE_DIR tomlplusplus::tomlplusplus INTERFACE_INCLUDE_DIRECTORIES)
find_package(nlohmann_json 3.2 REQUIRED)  # checkpoint manifests, safetensors headers
find_package(ZLIB REQUIRED)                # crc32 of checkpoint files
find_package(Boost 1.70 REQUIRED)   # Boost.DLL is header-only; we use std::filesystem with it
find_package(Threads REQUIRED)
if(ZT_BUILD_TESTS)
  find_package(doctest REQUIRED)
endif()

# TORCH_CXX_FLAGS carries -D_GLIBCXX_USE_CXX11_ABI=...; everything we compile must agree with it.
separate_arguments(ZT_TORCH_CXX_FLAGS UNIX_COMMAND "${TORCH_CXX_FLAGS}")

set(ZT_CUDA_FOUND OFF)
if(NOT ZT_WITH_CUDA STREQUAL "OFF")
  include(CheckLanguage)
  check_language(CUDA)
  find_package(CUDAToolkit QUIET)
  if(CMAKE_CUDA_COMPILER AND CUDAToolkit_FOUND)
    set(ZT_CUDA_FOUND ON)
    # nvcc compiles the host side of .cu files with the C++ compiler everything else uses.
    if(NOT DEFINED CMAKE_CUDA_HOST_COMPILER)
      set(CMAKE_CUDA_HOST_COMPILER ${CMAKE_CXX_COMPILER})
    endif()
    # The CUDA language only when there is a toolkit, so CPU-only machines never need nvcc.
    enable_language(CUDA)
  elseif(ZT_WITH_CUDA STREQUAL "ON")
    message(FATAL_ERROR "ZT_WITH_CUDA=ON but no CUDA toolkit was found; install it or pass -DZT_WITH_CUDA=OFF")
  else()
    message(STATUS "zt: CUDA toolkit not found: skipping CUDA kernels")
  endif()
endif()

# The GPUs zt's kernels are compiled for (the CUDA_ARCHITECTURES of each CUDA target). Two keep
# nvcc's time small: sm_80 machine code (A100; by binary compatibility also the other 8.x GPUs)
# and sm_90 (H100/H200) with compute_90 PTX, which newer GPUs compile when the kernel loads.
# On a GPU machine, -DZT_CUDA_ARCHITECTURES=native builds for the GPUs present instead.
set(ZT_CUDA_ARCHITECTURES "80-real;90" CACHE STRING "CUDA architectures of zt's CUDA kernels")

# Whether the LibTorch we build against was itself built with CUDA; a CPU-only LibTorch cannot
# run CUDA tensors even if nvcc is installed, so the fingerprint records the LibTorch side.
if(TORCH_LIBRARIES MATCHES "cuda" OR TORCH_CUDA_LIBRARIES OR CUDA_FOUND)
  set(ZT_TORCH_HAS_CUDA 1)
else()
  set(ZT_TORCH_HAS_CUDA 0)
endif()

if(ZT_CUDA_FOUND AND ZT_TORCH_HAS_CUDA)
  set(ZT_WITH_CUDA_VALUE 1)
else()
  set(ZT_WITH_CUDA_VALUE 0)
endif()

# zt_find_library_pkg(TARGET_VAR MODULE HEADER LIBRARY WAY_OUT): a library pkg-config finds as
# MODULE, else by a plain search for HEADER and LIBRARY (a system without pkg-config or the .pc
# file: the GPU machine's unpacked Debian packages). Sets TARGET_VAR to the target to link;
# configure stops with WAY_OUT when neither finds it.
function(zt_find_library_pkg target_var module header library way_out)
  string(MAKE_C_IDENTIFIER "zt_${module}" name)
  find_package(PkgConfig QUIET)
  if(PkgConfig_FOUND)
    pkg_check_modules(${name} QUIET IMPORTED_TARGET GLOBAL ${module})
  endif()
  if(TARGET PkgConfig::${name})
    set(${target_var} PkgConfig::${name} PARENT_SCOPE)
    return()
  endif()
  find_path(${name}_INCLUDE ${header})
  find_library(${name}_LIBRARY ${library})
  if(NOT ${name}_INCLUDE OR NOT ${name}_LIBRARY)
    message(FATAL_ERROR "${way_out}")
  endif()
  if(NOT TARGET ${name})
    add_library(${name} INTERFACE)
    target_include_directories(${name} SYSTEM INTERFACE ${${name}_INCLUDE})
    target_link_libraries(${name} INTERFACE ${${name}_LIBRARY})
  endif()
  set(${target_var} ${name} PARENT_SCOPE)
endfunction()
