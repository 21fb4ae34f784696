# zt_add_plugin(<id> SOURCES <files...> [LINK <targets...>] [OUTPUT_DIR <dir>] [NO_INSTALL])
#
# Builds a zt plugin: a MODULE library named libzt_<id>.so with hidden visibility, compiled with
# LibTorch's flags (so its fingerprint matches the core) and linked to zt::core. Used by zt's own
# plugins and, through find_package(zt), by third-party plugin authors. It compiles with zt's
# warnings (ZtWarnings.cmake, installed beside this file); -Werror only with ZT_WARNINGS_AS_ERRORS.
include(${CMAKE_CURRENT_LIST_DIR}/ZtWarnings.cmake)

function(zt_add_plugin id)
  cmake_parse_arguments(ARG "NO_INSTALL" "OUTPUT_DIR" "SOURCES;LINK" ${ARGN})
  if(NOT ARG_SOURCES)
    message(FATAL_ERROR "zt_add_plugin(${id}): SOURCES is required")
  endif()
  # Out of tree (find_package(zt)): the compiler's family and major version must be zt's, or the
  # loader refuses the plugin by its fingerprint after a build that went through.
  if(DEFINED ZT_CXX_COMPILER_ID AND NOT TARGET zt_core)
    string(REGEX MATCH "^[0-9]+" ours "${ZT_CXX_COMPILER_VERSION}")
    string(REGEX MATCH "^[0-9]+" theirs "${CMAKE_CXX_COMPILER_VERSION}")
    if(NOT CMAKE_CXX_COMPILER_ID STREQUAL ZT_CXX_COMPILER_ID OR NOT ours STREQUAL theirs)
      message(FATAL_ERROR "zt_add_plugin(${id}): this project compiles with "
        "${CMAKE_CXX_COMPILER_ID} ${CMAKE_CXX_COMPILER_VERSION} (${CMAKE_CXX_COMPILER}), zt was "
        "built with ${ZT_CXX_COMPILER_ID} ${ZT_CXX_COMPILER_VERSION}, and zt loads only plugins "
        "of its compiler's family and major version (its build fingerprint); configure a fresh "
        "build folder with -DCMAKE_CXX_COMPILER=${ZT_CXX_COMPILER}")
    endif()
  endif()
  set(target zt_${id})
  add_library(${target} MODULE ${ARG_SOURCES})
  set_target_properties(${target} PROPERTIES
    PREFIX "lib" OUTPUT_NAME "zt_${id}"
    CXX_VISIBILITY_PRESET hidden VISIBILITY_INLINES_HIDDEN ON
    CXX_STANDARD 17 CXX_STANDARD_REQUIRED ON
    # An installed plugin keeps a RUNPATH to the libraries it links outside its project (LINK
    # /opt/foo/lib/libfoo.so): the install strips the build tree's, and the plugin then failed
    # to load where it had built and run.
    INSTALL_RPATH_USE_LINK_PATH ON)
  if(TARGET zt_core)
    target_link_libraries(${target} PRIVATE zt_core ${ARG_LINK})
  else()
    target_link_libraries(${target} PRIVATE zt::core ${ARG_LINK})
  endif()
  target_compile_definitions(${target} PRIVATE ZT_PLUGIN_ID="${id}")
  zt_target_warnings(${target})
  if(ARG_OUTPUT_DIR)
    set_target_properties(${target} PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${ARG_OUTPUT_DIR})
  elseif(DEFINED ZT_PLUGIN_OUTPUT_DIR)
    set_target_properties(${target} PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${ZT_PLUGIN_OUTPUT_DIR})
  endif()
  if(NOT ARG_NO_INSTALL AND DEFINED ZT_INSTALL_PLUGIN_DIR)
    install(TARGETS ${target} LIBRARY DESTINATION ${ZT_INSTALL_PLUGIN_DIR})
    # zt's own build: the plugins a job may load (its zt_job target builds them all).
    set_property(GLOBAL APPEND PROPERTY ZT_INSTALLED_PLUGINS ${target})
  endif()
endfunction()
