# The tests' own sources (*_test.cc, the gpu tests' main) at a lower optimization level than the
# code they test, which keeps its own (it is compiled in the libraries the tests link): most of a
# test file's compile time goes into optimizing the expanded gtest macros.
#  - Release: -O1. Test sources were 703 of the 1436 compile-seconds of a fresh CI build
#    (2026-12-02); -O1 compiles a sample of them (train_loop_test, planner_test, job_spec_test)
#    in 18% less time than -O3.
#  - scripts/sanitize-and-fuzz.sh passes -O0: with clang, ASan and UBSan it halves their compile
#    time against the tree's -O1 (planner_test 16 -> 7 CPU-s, job_spec_test 10 -> 5.4).
# Other build types: as the code. RINGMASTER_TEST_OPT_LEVEL="" keeps the code's flags.
if(CMAKE_BUILD_TYPE STREQUAL "Release")
  set(ringmaster_test_opt_default -O1)
else()
  set(ringmaster_test_opt_default "")
endif()
set(RINGMASTER_TEST_OPT_LEVEL "${ringmaster_test_opt_default}" CACHE STRING
  "Optimization flag for the tests' own sources (empty: as the code)")

function(ringmaster_collect_targets dir out)
  get_property(targets DIRECTORY ${dir} PROPERTY BUILDSYSTEM_TARGETS)
  get_property(subdirs DIRECTORY ${dir} PROPERTY SUBDIRECTORIES)
  foreach(sub ${subdirs})
    ringmaster_collect_targets(${sub} sub_targets)
    list(APPEND targets ${sub_targets})
  endforeach()
  set(${out} ${targets} PARENT_SCOPE)
endfunction()

# Called once at the end of the top-level CMakeLists.txt, when every target exists.
function(ringmaster_optimize_tests_less)
  if(RINGMASTER_TEST_OPT_LEVEL STREQUAL "")
    return()
  endif()
  ringmaster_collect_targets(${CMAKE_SOURCE_DIR} targets)
  foreach(target ${targets})
    get_target_property(type ${target} TYPE)
    if(NOT type STREQUAL "EXECUTABLE")
      continue()
    endif()
    get_target_property(sources ${target} SOURCES)
    get_target_property(source_dir ${target} SOURCE_DIR)
    foreach(src ${sources})
      if(NOT src MATCHES "(_test\\.cc|/gpu_test_main\\.cc|^gpu_test_main\\.cc)$")
        continue()
      endif()
      cmake_path(ABSOLUTE_PATH src BASE_DIRECTORY ${source_dir} OUTPUT_VARIABLE path)
      # A source shared by two targets of a folder (a test and its racecheck build) gets it once.
      get_property(options SOURCE ${path} TARGET_DIRECTORY ${target} PROPERTY COMPILE_OPTIONS)
      if(NOT RINGMASTER_TEST_OPT_LEVEL IN_LIST options)
        set_property(SOURCE ${path} TARGET_DIRECTORY ${target} APPEND PROPERTY COMPILE_OPTIONS
          ${RINGMASTER_TEST_OPT_LEVEL})
      endif()
    endforeach()
  endforeach()
endfunction()
