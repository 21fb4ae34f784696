# Compiler warnings for zt's own code. Third-party headers (LibTorch, Boost, TOML++, UCX,
# doctest) reach our targets as SYSTEM include directories, so only warnings in our code count.
#
#   zt_target_warnings(<target>)       the warnings on one target (zt_add_plugin calls it)
#   zt_warnings_in_directory(<dir>)    the same on every target defined under <dir>
#
# ZT_WARNINGS_AS_ERRORS (default OFF) adds -Werror; scripts/build.sh turns it on under CI. This
# file is installed with the SDK (next to ZtPlugin.cmake), so a third-party plugin built with
# zt_add_plugin gets the same warnings, and -Werror only if its own project sets the option.
include_guard(GLOBAL)

option(ZT_WARNINGS_AS_ERRORS "Treat warnings in zt's own code as errors (on in CI)" OFF)

# -Wnon-virtual-dtor: our interfaces are deleted through base pointers. -Wold-style-cast is
# left out of nvcc's host pass only: its generated code writes `int64_t{1}` as a C cast.
set(ZT_CXX_WARNING_FLAGS -Wall -Wextra -Wshadow -Wnon-virtual-dtor -Wold-style-cast)
set(ZT_CUDA_HOST_WARNING_FLAGS -Wall -Wextra -Wshadow -Wnon-virtual-dtor)

function(zt_target_warnings target)
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
    return()
  endif()
  get_target_property(type ${target} TYPE)
  if(type STREQUAL "INTERFACE_LIBRARY" OR type STREQUAL "UTILITY")
    return()
  endif()
  get_target_property(imported ${target} IMPORTED)
  get_target_property(done ${target} ZT_WARNINGS)
  if(imported OR done)
    return()
  endif()
  set_property(TARGET ${target} PROPERTY ZT_WARNINGS ON)

  set(cxx ${ZT_CXX_WARNING_FLAGS})
  set(cuda_host ${ZT_CUDA_HOST_WARNING_FLAGS})
  if(ZT_WARNINGS_AS_ERRORS)
    list(APPEND cxx -Werror)
    list(APPEND cuda_host -Werror)
  endif()
  string(REPLACE ";" "," cuda_host "${cuda_host}")
  target_compile_options(${target} PRIVATE
    "$<$<COMPILE_LANGUAGE:CXX>:${cxx}>"
    "$<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=${cuda_host}>")
endfunction()

function(zt_warnings_in_directory dir)
  get_property(targets DIRECTORY ${dir} PROPERTY BUILDSYSTEM_TARGETS)
  foreach(target ${targets})
    zt_target_warnings(${target})
  endforeach()
  get_property(subdirs DIRECTORY ${dir} PROPERTY SUBDIRECTORIES)
  foreach(subdir ${subdirs})
    zt_warnings_in_directory(${subdir})
  endforeach()
endfunction()
