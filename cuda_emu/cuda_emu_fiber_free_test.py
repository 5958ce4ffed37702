#!/usr/bin/env python3
"""The rewrite step's fiber-free classification (cuda_emu_fiber_free.py) and the launches it
rewrites (cuda_emu_rewrite.py), on small sources: what is fiber-free, and every way a barrier,
a warp collective or shared memory can hide from a kernel's own body."""
import os
import subprocess
import sys
import tempfile
import textwrap
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import cuda_emu_fiber_free  # noqa: E402


class FiberFreeTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.root = self.dir.name

    def tearDown(self):
        self.dir.cleanup()

    def write(self, name, text):
        path = os.path.join(self.root, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(textwrap.dedent(text))
        return path

    def classify(self, text, **headers):
        for name, body in headers.items():
            self.write(name.replace("__", "/").replace("_h", ".h").replace("_cuh", ".cuh"), body)
        src = self.write("k.cu", text)
        verdicts, _ = cuda_emu_fiber_free.classify(src, [self.root])
        return verdicts

    def test_elementwise_kernels_are_fiber_free(self):
        v = self.classify("""
            #include <cmath>
            #include <cuda_fp16.h>
            namespace ns { namespace {
            template <typename T> __device__ inline float Load(const T* p, size_t i) {
              return static_cast<float>(p[i]);  // __syncthreads in a comment does not count
            }
            __global__ void __launch_bounds__(256) Gelu(const float* x, float* y, size_t n) {
              const char* s = "__syncthreads()";  // nor in a string
              for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n;
                   i += gridDim.x * blockDim.x) {
                y[i] = 0.5f * Load(x, i) * (1.0f + erff(x[i]));
                atomicAdd(y, 1.0f);
              }
            }
            template <typename T> __global__ void Cast(const float* x, T* y, int n) {
              const int i = threadIdx.x;
              if (i < n) y[i] = static_cast<T>(x[i]);
            }
            } }
            """)
        self.assertEqual(v, {"Gelu": None, "Cast": None})

    def test_barriers_collectives_and_shared_memory_keep_fibers(self):
        v = self.classify("""
            __global__ void A(float* x) { x[0] = 1; __syncthreads(); }
            __global__ void B(float* x) { x[0] = __shfl_down_sync(0xffffffff, x[0], 1); }
            __global__ void C(float* x) { __shared__ float s[32]; s[0] = x[0]; }
            __global__ void D(float* x) { extern __shared__ float s[]; s[0] = x[0]; }
            __global__ void E(float* x) { if (__any_sync(~0u, x[0] > 0)) x[0] = 0; }
            __global__ void F(float* x) { __syncwarp(); }
            __global__ void G(float* x) { auto g = cooperative_groups::this_thread_block(); }
            __global__ void H(float* x) { asm volatile("bar.sync 0;"); }
            """)
        self.assertEqual(v["A"], "uses __syncthreads")
        self.assertEqual(v["B"], "uses __shfl_down_sync")
        self.assertEqual(v["C"], "uses __shared__")
        self.assertEqual(v["D"], "uses __shared__")
        self.assertEqual(v["E"], "uses __any_sync")
        self.assertEqual(v["F"], "uses __syncwarp")
        self.assertIsNotNone(v["G"])
        self.assertEqual(v["H"], "uses asm")

    def test_a_barrier_in_a_helper_of_an_included_header_keeps_fibers(self):
        v = self.classify("""
            #include "lib/common.cuh"
            __global__ void UsesSum(float* x) { x[threadIdx.x] = Sum(x[threadIdx.x]); }
            __global__ void UsesScale(float* x) { x[threadIdx.x] = Scale(x[threadIdx.x]); }
            """, lib__common_cuh="""
            #pragma once
            __device__ inline float Inner(float v) {
              for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
              return v;
            }
            __device__ inline float Sum(float v) { return Inner(v); }
            __device__ inline float Scale(float v) { return 2 * v; }
            """)
        self.assertEqual(v["UsesSum"], "uses Sum, which uses Inner, which uses __shfl_xor_sync")
        self.assertIsNone(v["UsesScale"])

    def test_a_barrier_behind_a_macro_a_lambda_or_a_functor_keeps_fibers(self):
        v = self.classify("""
            #define SYNC() __syncthreads()
            struct Reducer {
              __device__ float operator()(float v) const { __syncwarp(); return v; }
            };
            __global__ void Macro(float* x) { SYNC(); }
            __global__ void Lambda(float* x) {
              auto f = [&](int i) { __syncthreads(); x[i] = 0; };
              f(threadIdx.x);
            }
            __global__ void Functor(float* x) { x[0] = Reducer{}(x[0]); }
            """)
        self.assertEqual(v["Macro"], "uses SYNC, which uses __syncthreads")
        self.assertEqual(v["Lambda"], "uses __syncthreads")
        self.assertEqual(v["Functor"], "uses Reducer, which uses __syncwarp")

    def test_what_cannot_be_resolved_keeps_fibers(self):
        v = self.classify("""
            __device__ float Elsewhere(float v);  // defined in another source (-rdc)
            __device__ float (*g_fn)(float);
            __global__ void Declared(float* x) { x[0] = Elsewhere(x[0]); }
            __global__ void DeviceVariable(float* x) { x[0] = g_fn(x[0]); }
            __global__ void Pointer(float* x, float (*f)(float)) { x[0] = f(x[0]); }
            template <typename F> __global__ void Through(float* x, F f) { x[0] = f(x[0]); }
            template <typename Op> __global__ void Static(float* x) { x[0] = Op::Apply(x[0]); }
            template <typename T> __global__ void Member(float* x, T t) { x[0] = t.reduce(); }
            """)
        self.assertIn("declared but not defined", v["Declared"])
        self.assertIn("declared but not defined", v["DeviceVariable"])
        self.assertEqual(v["Pointer"], "calls through its parameter f")
        self.assertEqual(v["Through"], "calls through its parameter f")
        self.assertEqual(v["Static"], "calls through its type template parameter Op")
        self.assertIn("calls the member reduce", v["Member"])

    def test_headers_the_rewriter_does_not_read_keep_every_kernel_on_fibers(self):
        for include in ("<cooperative_groups.h>", "<cub/cub.cuh>", '"third_party/lib.cuh"'):
            v = self.classify("""
                #include %s
                __global__ void K(float* x) { x[0] = 1; }
                """ % include)
            self.assertIn("includes", v["K"], include)
        # Host-only libraries and the standard headers are fine.
        v = self.classify("""
            #include <vector>
            #include "absl/status/status.h"
            __global__ void K(float* x) { x[0] = 1; }
            """)
        self.assertIsNone(v["K"])

    def test_recursion_does_not_hide_a_barrier(self):
        v = self.classify("""
            __device__ float B(float v, int d);
            __device__ float C(float v) { __syncthreads(); return v; }
            __device__ float A(float v, int d) { return d ? B(v, d - 1) : v; }
            __device__ float B(float v, int d) { return d ? A(v, d - 1) : C(v); }
            __global__ void K(float* x) { x[0] = A(x[0], 3); }
            """)
        self.assertIn("__syncthreads", v["K"])

    def test_the_rewrite_launches_only_fiber_free_kernels_of_this_source_on_the_fast_path(self):
        src = self.write("r.cu", """
            __global__ void Fast(float* x) { x[threadIdx.x] = 1; }
            __global__ void Slow(float* x) { __syncthreads(); }
            template <int N> __global__ void FastT(float* x) { x[threadIdx.x] = N; }
            void Run(float* x, cudaStream_t s) {
              Fast<<<1, 32, 0, s>>>(x);
              Slow<<<1, 32>>>(x);
              FastT<3><<<dim3(2), 32>>>(x);
              OtherSource<<<1, 32>>>(x);
            }
            """)
        out = os.path.join(self.root, "r.emu.cc")
        subprocess.run([sys.executable, os.path.join(HERE, "cuda_emu_rewrite.py"), src, out,
                        "--include-root", self.root, "--depfile", out + ".d"], check=True)
        with open(out) as f:
            text = f.read()
        self.assertIn('::cuda_emu::LaunchFiberFree("Fast", Fast, 1, 32, 0, s)(x)', text)
        self.assertIn('::cuda_emu::Launch("Slow", Slow, 1, 32)(x)', text)
        self.assertIn('::cuda_emu::LaunchFiberFree("FastT<3>", FastT<3>, dim3(2), 32)(x)', text)
        self.assertIn('::cuda_emu::Launch("OtherSource", OtherSource, 1, 32)(x)', text)
        self.assertIn("// cuda_emu: Slow keeps fibers: uses __syncthreads", text)
        # No line moved: the launches keep their source lines.
        self.assertEqual(text.split("\n")[6].strip(), '::cuda_emu::LaunchFiberFree("Fast", Fast, 1, 32, 0, s)(x);')
        with open(out + ".d") as f:
            self.assertIn(src, f.read())


if __name__ == "__main__":
    unittest.main()
