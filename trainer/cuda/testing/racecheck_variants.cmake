# Race-checked variants of the engine's gpu tests (issue #35 item 2; docs/cuda.md, detectors
# `race` and `global-race`): the CUDA engine's objects (compiled once) linked against the kernels
# built with the racecheck instrumentation, and tests that run small-shape filters of the
# engine's test binaries on it under the random schedule, so a kernel race that only the engine's
# shapes reach (a non-atomic accumulation across blocks into one scratch row of
# kernels/bias_grad.cu, say) is reported.
# Filters keep each to seconds (byte shadows per access: keep shapes small).
add_library(ringmaster_cuda_engine_racecheck STATIC
  $<TARGET_OBJECTS:ringmaster_cuda_engine_objects>)
target_include_directories(ringmaster_cuda_engine_racecheck PUBLIC ${CMAKE_SOURCE_DIR})
target_link_libraries(ringmaster_cuda_engine_racecheck PUBLIC ringmaster_cuda_kernels_racecheck
  ${ringmaster_cuda_engine_deps})

# Each binary built once more against it, run whole where that takes seconds (gemm 1.1 s,
# bert_cuda 2.2 s, powersgd 3.2 s on the shared 2-core machine), otherwise filtered.
set(ringmaster_racecheck_filter_gemm_gpu_test "*")
set(ringmaster_racecheck_filter_bert_cuda_gpu_test "*")
# ThreeAdamWStepsMatchCpuEngine takes 8.6 s under racecheck: only the 0.4 s case.
set(ringmaster_racecheck_filter_cuda_trainer_state_gpu_test
  CudaTrainerState.NonFiniteGradientsAreReportedNotApplied)
set(ringmaster_racecheck_filter_powersgd_gpu_test "*")
foreach(test gemm_gpu_test bert_cuda_gpu_test cuda_trainer_state_gpu_test powersgd_gpu_test)
  add_executable(${test}_racecheck ${ringmaster_gpu_test_source_${test}}
    testing/gpu_test_main.cc)
  target_link_libraries(${test}_racecheck PRIVATE ringmaster_cuda_engine_racecheck GTest::gtest)
  add_test(NAME ${test}_racecheck COMMAND ${test}_racecheck
    --gtest_filter=${ringmaster_racecheck_filter_${test}})
  set_tests_properties(${test}_racecheck PROPERTIES LABELS "gpu;emulated"
    ENVIRONMENT "CUDA_EMU_SCHEDULE=random;CUDA_EMU_SEED=41" SKIP_RETURN_CODE 77 TIMEOUT 120)
endforeach()
