// The elementwise loops (cpu_kernels.h) for AVX-512 F/BW/DQ/VL with 512-bit vectors
// (trainer/CMakeLists.txt).
#if defined(__x86_64__)
#define RM_KERNEL_TABLE kAvx512Kernels
#include "trainer/model/cpu_kernels_impl.inc"
#endif
