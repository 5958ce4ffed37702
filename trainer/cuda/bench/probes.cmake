# gelu_epilogue_probe: asks cuBLASLt which GELU its GELU_AUX_BIAS / DGELU epilogues compute (erf or
# tanh) and how FAST_TF32 rounds (scripts/gpu-check.sh runs it on a GPU). Under the emulator it
# runs against the cuBLASLt stand-in, whose GELU form is a setting: the tests show the probe tells
# the two apart (tanh by default, erf under CUDA_EMU_CUBLASLT_GELU=erf).
add_executable(gelu_epilogue_probe bench/gelu_epilogue_probe.cc)
target_link_libraries(gelu_epilogue_probe PRIVATE ringmaster_cuda_engine)
if(RINGMASTER_CUDA_EMU)
  add_test(NAME gelu_epilogue_probe_tanh COMMAND gelu_epilogue_probe --expect tanh)
  add_test(NAME gelu_epilogue_probe_erf COMMAND gelu_epilogue_probe --expect erf)
  set_tests_properties(gelu_epilogue_probe_tanh PROPERTIES LABELS "gpu;emulated" TIMEOUT 60)
  set_tests_properties(gelu_epilogue_probe_erf PROPERTIES LABELS "gpu;emulated" TIMEOUT 60
    ENVIRONMENT "CUDA_EMU_CUBLASLT_GELU=erf")
endif()
