// One thread per element of C; each sums its K products in order in fp32 (see gemm_fallback.h).
#include "trainer/cuda/kernels/cuda_common.cuh"
#include "trainer/cuda/kernels/gemm_fallback.h"

namespace ringmaster::trainer::cuda {
namespace {

constexpr int kTile = 16;

template <typename T>
__global__ void PlainGemmKernel(PlainGemmArgs p) {
  const int64_t n = static_cast<int64_t>(blockIdx.x) * kTile + threadIdx.x;
  const int64_t m = static_cast<int64_t>(blockIdx.y) * kTile + threadIdx.y;
  if (m >= p.M || n >= p.N) return;
  const int64_t batch = blockIdx.z;
  const T* a = static_cast<const T*>(p.a) + batch * p.sa;
  const T* b = static_cast<const T*>(p.b) + batch * p.sb;
  float* c = p.c + batch * p.sc;
  float acc = 0.0f;
  for (int64_t k = 0; k < p.K; ++k) {
    const float x = ToFloat(p.ta ? a[k * p.lda + m] : a[m * p.lda + k]);
    const float y = ToFloat(p.tb ? b[n * p.ldb + k] : b[k * p.ldb + n]);
    acc += x * y;
  }
  float out = p.alpha * acc;
  if (p.beta != 0.0f) out += p.beta * c[m * p.ldc + n];
  if (p.bias != nullptr) out += p.bias[n];
  c[m * p.ldc + n] = out;
}

}  // namespace

cudaError_t PlainGemm(const PlainGemmArgs& p, cudaStream_t stream) {
  if (p.M < 0 || p.N < 0 || p.K < 0 || p.batch < 1 || p.batch > 65535) {
    return cudaErrorInvalidValue;
  }
  if (p.M == 0 || p.N == 0) return cudaSuccess;
  const int64_t gx = CeilDiv<int64_t>(p.N, kTile), gy = CeilDiv<int64_t>(p.M, kTile);
  if (gx > 0x7fffffff || gy > 65535) return cudaErrorInvalidValue;
  const dim3 grid(static_cast<unsigned>(gx), static_cast<unsigned>(gy),
                  static_cast<unsigned>(p.batch));
  const dim3 block(kTile, kTile);
  switch (p.type) {
    case CUDA_R_32F:
      PlainGemmKernel<float><<<grid, block, 0, stream>>>(p);
      break;
    case CUDA_R_16BF:
      PlainGemmKernel<__nv_bfloat16><<<grid, block, 0, stream>>>(p);
      break;
    case CUDA_R_16F:
      PlainGemmKernel<__half><<<grid, block, 0, stream>>>(p);
      break;
    default:
      return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

}  // namespace ringmaster::trainer::cuda
