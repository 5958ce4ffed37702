# The cuBLAS(Lt) and NCCL stand-ins of the CUDA emulator (docs/cuda-stand-ins.md): libraries
# that define the functions of the toolkit's <cublasLt.h>, <cublas_v2.h> and <nccl.h> on top of
# the emulated runtime (target cuda_emu), so code written for the real libraries links against
# them instead. Included once the cuda_emu target exists.
set(CUDA_EMU_STAND_INS_DIR ${CMAKE_CURRENT_LIST_DIR})

# What both stand-ins share: the check that a buffer lies inside one cudaMalloc allocation, and
# a weak cudaPointerGetAttributes the runtime lacks (NcclCommunicator calls it).
add_library(cuda_emu_stand_in_common STATIC ${CUDA_EMU_STAND_INS_DIR}/emu_device_range.cc
  ${CUDA_EMU_STAND_INS_DIR}/emu_pointer_attributes.cc)
target_link_libraries(cuda_emu_stand_in_common PUBLIC cuda_emu PRIVATE absl::str_format)

add_library(cuda_emu_cublas STATIC
  ${CUDA_EMU_STAND_INS_DIR}/emu_gemm.cc
  ${CUDA_EMU_STAND_INS_DIR}/cublaslt_emu.cc
  ${CUDA_EMU_STAND_INS_DIR}/cublaslt_emu_control.cc
  ${CUDA_EMU_STAND_INS_DIR}/cublas_emu.cc)
target_link_libraries(cuda_emu_cublas PUBLIC cuda_emu PRIVATE cuda_emu_stand_in_common
  absl::str_format)

find_path(CUDA_EMU_NCCL_INCLUDE nccl.h
  HINTS ${CUDA_EMU_TOOLKIT_INCLUDE} ENV CUDA_HOME PATH_SUFFIXES include
  PATHS /usr/local/cuda/include /usr/include)
if(CUDA_EMU_NCCL_INCLUDE)
  add_library(cuda_emu_nccl STATIC
    ${CUDA_EMU_STAND_INS_DIR}/nccl_emu.cc
    ${CUDA_EMU_STAND_INS_DIR}/nccl_emu_comm.cc
    ${CUDA_EMU_STAND_INS_DIR}/nccl_emu_lazy.cc
    ${CUDA_EMU_STAND_INS_DIR}/nccl_emu_segment.cc)
  target_include_directories(cuda_emu_nccl SYSTEM PUBLIC ${CUDA_EMU_NCCL_INCLUDE})
  target_link_libraries(cuda_emu_nccl PUBLIC cuda_emu PRIVATE cuda_emu_stand_in_common
    absl::str_format absl::strings rt)
else()
  message(STATUS "ringmaster: nccl.h not found (CUDA toolkit, /usr/include): the emulator's "
    "NCCL stand-in is not built")
endif()

# Tests: plain gtest on the CPU, labelled as CUDA tests that ran emulated.
add_executable(cublaslt_emu_test ${CUDA_EMU_STAND_INS_DIR}/cublaslt_emu_test.cc)
target_link_libraries(cublaslt_emu_test PRIVATE cuda_emu_cublas GTest::gtest GTest::gtest_main)
add_test(NAME cublaslt_emu_test COMMAND cublaslt_emu_test)
set_tests_properties(cublaslt_emu_test PROPERTIES LABELS "gpu;emulated" TIMEOUT 120)

if(TARGET cuda_emu_nccl)
  add_executable(nccl_emu_test ${CUDA_EMU_STAND_INS_DIR}/nccl_emu_test.cc)
  target_link_libraries(nccl_emu_test PRIVATE cuda_emu_nccl GTest::gtest GTest::gtest_main)
  add_test(NAME nccl_emu_test COMMAND nccl_emu_test)
  set_tests_properties(nccl_emu_test PROPERTIES LABELS "gpu;emulated" TIMEOUT 120)
endif()
