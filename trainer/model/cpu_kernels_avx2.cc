// The elementwise loops (cpu_kernels.h) for AVX2 + FMA (-mavx2 -mfma, trainer/CMakeLists.txt).
#if defined(__x86_64__)
#define RM_KERNEL_TABLE kAvx2Kernels
#include "trainer/model/cpu_kernels_impl.inc"
#endif
