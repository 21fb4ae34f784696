# How zt's tests reach CTest, so that a test can only pass by checking something:
#  - zt_doctest_tests(): one CTest test per doctest case of an executable, each one failing when
#    it ran no case at all (CTest asks doctest for a case by name; a name CTest mangled, e.g.
#    split at a ';', matches none, and doctest exits 0 when nothing ran), and reported Skipped
#    (not Passed) when the case printed the skip marker of tests/skip.h. With BY_FILE, one CTest
#    test per source file instead, whose cases run in one process: a process that loads LibTorch
#    costs about 1 s of CPU before main(), most of a unit case's time. A file with a case that may
#    skip (ZT_SKIP) keeps one test per case, so that its skip marker hides no other case's result.
#  - zt_skip_marker_properties(): the same skip marker for tests that are scripts.
#  - zt_skipped_test(): a test that cannot be built here, registered anyway as Skipped with its
#    reason, so it shows up in the summary instead of vanishing.
# scripts/test.sh lists every skipped test with the reason it printed.

# The line a skipped test prints (tests/skip.h prints it as "zt-skip: <reason>").
set(ZT_SKIP_MARKER "zt-skip: ")

# zt_doctest_tests(TARGET PREFIX "unit: " LABEL unit TIMEOUT 60 [SERIAL] [BY_FILE])
# TIMEOUT is per case: a BY_FILE test gets it once, plus 10 s for each case of its file.
function(zt_doctest_tests target)
  cmake_parse_arguments(arg "SERIAL;BY_FILE" "PREFIX;LABEL;TIMEOUT" "" ${ARGN})
  # doctest's summary with no case run reads "[doctest] test cases: 0 | 0 passed | ...".
  set(properties LABELS ${arg_LABEL}
    FAIL_REGULAR_EXPRESSION "\\[doctest\\] test cases: +0 [|]"
    SKIP_REGULAR_EXPRESSION "${ZT_SKIP_MARKER}")
  if(arg_SERIAL)
    list(APPEND properties RUN_SERIAL TRUE)
  endif()
  if(NOT arg_BY_FILE)
    doctest_discover_tests(${target} TEST_PREFIX "${arg_PREFIX}"
      PROPERTIES ${properties} TIMEOUT ${arg_TIMEOUT})
    return()
  endif()
  get_target_property(sources ${target} SOURCES)
  get_target_property(source_dir ${target} SOURCE_DIR)
  foreach(source IN LISTS sources)
    get_filename_component(path "${source}" ABSOLUTE BASE_DIR "${source_dir}")
    if(NOT path MATCHES "\\.cc$")
      continue()
    endif()
    file(STRINGS "${path}" cases REGEX "^[ ]*TEST_CASE[ ]*\\(")
    list(LENGTH cases count)
    if(count EQUAL 0)
      continue()
    endif()
    file(RELATIVE_PATH name "${PROJECT_SOURCE_DIR}" "${path}")
    # doctest's --source-file matches the case's __FILE__, the absolute path CMake compiles.
    set(filter "--source-file=*/${name}")
    file(READ "${path}" text)
    string(FIND "${text}" "ZT_SKIP" skips)
    if(NOT skips EQUAL -1)
      # doctest's discovery passes TEST_SPEC as --test-case=<spec>; its second item lists only
      # this file's cases.
      doctest_discover_tests(${target} TEST_PREFIX "${arg_PREFIX}" TEST_SPEC "*;${filter}"
        PROPERTIES ${properties} TIMEOUT ${arg_TIMEOUT})
      continue()
    endif()
    set(test "${arg_PREFIX}${name} (${count} cases)")
    add_test(NAME "${test}" COMMAND ${target} "${filter}")
    math(EXPR timeout "${arg_TIMEOUT} + 10 * ${count}")
    # A skip marker here comes from a ZT_SKIP added since CMake last ran: it fails (run cmake
    # again) rather than report the whole file Skipped.
    set_tests_properties("${test}" PROPERTIES LABELS ${arg_LABEL} TIMEOUT ${timeout}
      FAIL_REGULAR_EXPRESSION "\\[doctest\\] test cases: +0 [|];${ZT_SKIP_MARKER}")
    if(arg_SERIAL)
      set_tests_properties("${test}" PROPERTIES RUN_SERIAL TRUE)
    endif()
  endforeach()
endfunction()

# zt_skip_marker_properties(TEST_NAME): a script test that prints the marker is Skipped.
function(zt_skip_marker_properties name)
  set_tests_properties("${name}" PROPERTIES SKIP_REGULAR_EXPRESSION "${ZT_SKIP_MARKER}")
endfunction()

# zt_skipped_test(NAME LABEL REASON): a test that only says why it cannot run in this build.
function(zt_skipped_test name label reason)
  add_test(NAME "${name}" COMMAND ${CMAKE_COMMAND} -E echo "${ZT_SKIP_MARKER}${reason}")
  set_tests_properties("${name}" PROPERTIES LABELS ${label}
    SKIP_REGULAR_EXPRESSION "${ZT_SKIP_MARKER}")
endfunction()
