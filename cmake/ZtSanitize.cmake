# ZT_SANITIZE: sanitizers for every zt target, e.g. -DZT_SANITIZE=address,undefined (empty: none).
# Compile and link flags apply to the whole project (core, trainer, plugins, tests, benches) so
# the dlopen'ed plugins run under the same runtime as the executables that load them; LibTorch and
# the other libraries stay uninstrumented. scripts/test-sanitize.sh builds and tests this way.
include_guard(GLOBAL)

set(ZT_SANITIZE "" CACHE STRING "Sanitizers for zt's code, e.g. address,undefined (empty: none)")
if(ZT_SANITIZE)
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
    message(FATAL_ERROR "ZT_SANITIZE=${ZT_SANITIZE} needs GCC or Clang, not ${CMAKE_CXX_COMPILER_ID}")
  endif()
  # Frame pointers make the sanitizers' stack traces whole. nvcc-compiled CUDA host code stays
  # uninstrumented (the executables that link it still get the runtime through the link flags).
  # -fno-sanitize-recover: a report ends the process (UBSan's default is to print and go on, so
  # a run whose environment lacks UBSAN_OPTIONS=halt_on_error=1 would pass).
  add_compile_options(
    "$<$<COMPILE_LANGUAGE:CXX>:-fsanitize=${ZT_SANITIZE};-fno-sanitize-recover=all;-fno-omit-frame-pointer>")
  add_link_options(-fsanitize=${ZT_SANITIZE})
  message(STATUS "zt: sanitizers ${ZT_SANITIZE} on every zt target")
endif()
