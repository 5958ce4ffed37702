// How much slower a kernel runs under the emulator than the trainer's CPU reference, so tests
// keep their shapes small: LayerNorm forward and masked softmax forward at a BERT-base shape.
// Validates first (max |emulated − reference|), then times each side (median of 5 runs).
// Usage: cuda_emu_benchmark   (CUDA_EMU_SCHEDULE / CUDA_EMU_WORKERS apply)
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <random>
#include <vector>

#include "trainer/cuda/kernels/kernels.h"
#include "trainer/model/cpu_ops.h"

namespace {

using ringmaster::trainer::cpu::LayerNormForward;
using ringmaster::trainer::cpu::MaskedSoftmaxForward;
namespace cuda = ringmaster::trainer::cuda;

double MedianSeconds(const std::function<void()>& f) {
  std::vector<double> t;
  for (int i = 0; i < 5; ++i) {
    const auto a = std::chrono::steady_clock::now();
    f();
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - a).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

std::vector<float> Random(size_t n, unsigned seed) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> u(-2.0f, 2.0f);
  std::vector<float> v(n);
  for (float& x : v) x = u(g);
  return v;
}

float* Upload(const std::vector<float>& h) {
  float* d = nullptr;
  if (cudaMalloc(&d, h.size() * 4) != cudaSuccess ||
      cudaMemcpy(d, h.data(), h.size() * 4, cudaMemcpyHostToDevice) != cudaSuccess) {
    fprintf(stderr, "upload failed\n");
    std::exit(1);
  }
  return d;
}

std::vector<float> Download(const float* d, size_t n) {
  std::vector<float> h(n);
  if (cudaMemcpy(h.data(), d, n * 4, cudaMemcpyDeviceToHost) != cudaSuccess) std::exit(1);
  return h;
}

float MaxError(const std::vector<float>& a, const std::vector<float>& b) {
  float e = 0.0f;
  for (size_t i = 0; i < a.size(); ++i) e = std::max(e, std::fabs(a[i] - b[i]));
  return e;
}

void Report(const char* what, double emulated, double reference, float error) {
  printf("%-38s emulated %8.1f ms  CPU reference %7.2f ms  %6.1fx slower  max error %.1e\n", what,
         emulated * 1e3, reference * 1e3, emulated / reference, error);
}

}  // namespace

int main() {
  {
    const int N = 2048, H = 768;
    const std::vector<float> x = Random(size_t{N} * H, 1), g = Random(H, 2), b = Random(H, 3);
    std::vector<float> y(x.size()), mean(N), rstd(N);
    float *dx = Upload(x), *dg = Upload(g), *db = Upload(b), *dy = Upload(y), *dm = Upload(mean),
          *dr = Upload(rstd);
    auto emulated = [&] {
      if (cuda::LayerNormForward(dx, dg, db, dy, dm, dr, N, H, 1e-12f, nullptr) != cudaSuccess) {
        std::exit(1);
      }
    };
    auto reference = [&] {
      LayerNormForward<float>(x.data(), g.data(), b.data(), y.data(), mean.data(), rstd.data(), N,
                              H, 1e-12f);
    };
    emulated();
    reference();
    const float error = MaxError(Download(dy, y.size()), y);
    Report("LayerNorm forward 2048x768", MedianSeconds(emulated), MedianSeconds(reference), error);
    for (float* p : {dx, dg, db, dy, dm, dr}) cudaFree(p);
  }
  {
    const int B = 8, NH = 12, S = 128;
    const size_t n = size_t{B} * NH * S * S;
    const std::vector<float> scores = Random(n, 4), bias(size_t{B} * S, 0.0f);
    const float scale = 0.125f;
    float *ds = Upload(scores), *dbias = Upload(bias);
    std::vector<float> probs = scores;
    auto emulated = [&] {
      // In place: each run normalises the previous run's output, the same work every time.
      if (cuda::MaskedSoftmaxForward(ds, dbias, B, NH, S, scale, nullptr) != cudaSuccess) {
        std::exit(1);
      }
    };
    auto reference = [&] {
      for (int bh = 0; bh < B * NH; ++bh) {
        MaskedSoftmaxForward<float>(probs.data() + size_t{bh} * S * S, bias.data() + (bh / NH) * S,
                                    S, scale);
      }
    };
    emulated();
    reference();
    const float error = MaxError(Download(ds, n), probs);
    Report("masked softmax forward 8x12x128x128", MedianSeconds(emulated), MedianSeconds(reference),
           error);
    cudaFree(ds);
    cudaFree(dbias);
  }
  return 0;
}
