# ZT_FUZZ: builds tests/fuzz's targets as libFuzzer binaries (scripts/fuzz.sh). Clang only. Every
# zt target gets libFuzzer's coverage instrumentation (-fsanitize=fuzzer-no-link), so the parsers
# in the core and the trainer's libraries guide the fuzzer, not only the target's own file;
# scripts/fuzz.sh adds ZT_SANITIZE=address,undefined. LibTorch stays uninstrumented.
include_guard(GLOBAL)

option(ZT_FUZZ "Build tests/fuzz as libFuzzer binaries (Clang; scripts/fuzz.sh)" OFF)
if(ZT_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "ZT_FUZZ needs Clang (libFuzzer), not ${CMAKE_CXX_COMPILER_ID}: "
                        "configure with CXX=clang++-14, as scripts/fuzz.sh does")
  endif()
  add_compile_options("$<$<COMPILE_LANGUAGE:CXX>:-fsanitize=fuzzer-no-link>")
  message(STATUS "zt: libFuzzer coverage on every zt target (ZT_FUZZ)")
endif()
