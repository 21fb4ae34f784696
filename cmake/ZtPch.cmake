# Precompiled LibTorch headers for zt's own libraries. A file that includes <ATen/ATen.h> (or
# <torch/torch.h>, <torch/script.h>) spends most of its compile time parsing it; measured on the
# core and trainer (2-core EPYC, ccache off), those 30 files took 233 s plain and 113 s with the
# header precompiled, while the 52 files that include only lighter LibTorch headers got slower
# with it (109 -> 151 s: loading the large precompiled header costs more than their own
# includes). So only the heavy files use it. Building the header takes ~12 s, so one is shared by
# every target of a family whose flags agree: GCC uses a precompiled header only under the flags
# and -D macros it was made with (the plugins differ in ZT_PLUGIN_ID, so they have none).
#
#   zt_precompile_torch(<target> <family>)   the first target of a family builds the header, the
#                                            others reuse it (target_precompile_headers REUSE_FROM)
#
# Sources with flags of their own (OpenMP, ISA options) are marked SKIP_PRECOMPILE_HEADERS where
# they are declared. The installed SDK does not use this.
include_guard(GLOBAL)

option(ZT_PCH "Precompile LibTorch's ATen header for zt's own libraries" ON)

function(zt_precompile_torch target family)
  if(NOT ZT_PCH OR NOT CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
    return()
  endif()
  get_target_property(sources ${target} SOURCES)
  get_target_property(dir ${target} SOURCE_DIR)
  set(light)
  set(any_heavy OFF)
  foreach(source ${sources})
    if(NOT source MATCHES "\\.cc$")
      continue()
    endif()
    cmake_path(ABSOLUTE_PATH source BASE_DIRECTORY ${dir} OUTPUT_VARIABLE path)
    file(STRINGS ${path} heavy REGEX "^#include <(ATen/ATen|torch/torch|torch/script)\\.h>")
    if(heavy)
      set(any_heavy ON)
    else()
      list(APPEND light ${source})
    endif()
  endforeach()
  # A target of light files only gets no precompiled header; the family's header is built by its
  # first target with a heavy file (one that uses it, or CMake would not build it).
  if(NOT any_heavy)
    return()
  endif()
  get_property(donor GLOBAL PROPERTY ZT_PCH_DONOR_${family})
  if(donor)
    target_precompile_headers(${target} REUSE_FROM ${donor})
  else()
    target_precompile_headers(${target} PRIVATE <ATen/ATen.h>)
    set_property(GLOBAL PROPERTY ZT_PCH_DONOR_${family} ${target})
  endif()
  if(light)
    set_source_files_properties(${light} TARGET_DIRECTORY ${target} PROPERTIES
      SKIP_PRECOMPILE_HEADERS ON)
  endif()
endfunction()
