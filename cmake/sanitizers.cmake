# RINGMASTER_SANITIZE: every target (libraries, tests, binaries) built with AddressSanitizer and
# UndefinedBehaviorSanitizer; any UB report aborts, so a test that triggers one fails.
# RINGMASTER_FUZZ: the same, plus libFuzzer's coverage instrumentation on all our code, so that
# the fuzz targets in fuzz/ (linked with -fsanitize=fuzzer) see coverage inside the parsers.
# Needs clang (libFuzzer ships with it: Debian's libclang-rt-14-dev).
if(RINGMASTER_FUZZ AND NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
  message(FATAL_ERROR "RINGMASTER_FUZZ needs clang (configure with -DCMAKE_CXX_COMPILER=clang++)")
endif()
if(RINGMASTER_SANITIZE OR RINGMASTER_FUZZ)
  set(ringmaster_sanitize_flags -fsanitize=address,undefined -fno-sanitize-recover=all
      -fno-omit-frame-pointer -Wno-pass-failed)  # -O1 leaves `omp simd` loops unvectorized
  if(RINGMASTER_FUZZ)
    list(APPEND ringmaster_sanitize_flags -fsanitize=fuzzer-no-link)
  endif()
  add_compile_options("$<$<COMPILE_LANGUAGE:CXX>:${ringmaster_sanitize_flags}>")
  add_link_options(-fsanitize=address,undefined)
  message(STATUS "ringmaster: sanitizers ON (${ringmaster_sanitize_flags})")
endif()
