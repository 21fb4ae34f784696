# How zt's tests reach CTest, so that a test can only pass by checking something:
#  - zt_doctest_tests(): one CTest test per doctest case of an executable, each one failing when
#    it ran no case at all (CTest asks doctest for a case by name; a name CTest mangled, e.g.
#    split at a ';', matches none, and doctest exits 0 when nothing ran), and reported Skipped
#    (not Passed) when the case printed the skip marker of tests/skip.h.
#  - zt_skip_marker_properties(): the same skip marker for tests that are scripts.
#  - zt_skipped_test(): a test that cannot be built here, registered anyway as Skipped with its
#    reason, so it shows up in the summary instead of vanishing.
# scripts/test.sh lists every skipped test with the reason it printed.

# The line a skipped test prints (tests/skip.h prints it as "zt-skip: <reason>").
set(ZT_SKIP_MARKER "zt-skip: ")

# zt_doctest_tests(TARGET PREFIX "unit: " LABEL unit TIMEOUT 60 [SERIAL])
function(zt_doctest_tests target)
  cmake_parse_arguments(arg "SERIAL" "PREFIX;LABEL;TIMEOUT" "" ${ARGN})
  # doctest's summary with no case run reads "[doctest] test cases: 0 | 0 passed | ...".
  set(properties LABELS ${arg_LABEL} TIMEOUT ${arg_TIMEOUT}
    FAIL_REGULAR_EXPRESSION "\\[doctest\\] test cases: +0 [|]"
    SKIP_REGULAR_EXPRESSION "${ZT_SKIP_MARKER}")
  if(arg_SERIAL)
    list(APPEND properties RUN_SERIAL TRUE)
  endif()
  doctest_discover_tests(${target} TEST_PREFIX "${arg_PREFIX}" PROPERTIES ${properties})
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
