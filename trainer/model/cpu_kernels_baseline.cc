// The elementwise loops (cpu_kernels.h) for the x86-64 baseline (SSE2) or the build's default
// target.
#define RM_KERNEL_TABLE kBaselineKernels
#include "trainer/model/cpu_kernels_impl.inc"
