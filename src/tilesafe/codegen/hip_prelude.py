"""The few lines of C++ every HIP module starts with: the platform names the kernel uses
(thread and block indices, the workgroup barrier, a trap) and the scalar operations with
the interpreter's exact meaning (semantics/expr/fp.py).

Why a prelude of our own instead of the ROCm headers: the module must compile in three
places that share no header -- with ROCm (hipcc: `<hip/hip_runtime.h>`), with a bare `clang
-x hip --offload-arch=gfx942 -nogpulib -nogpuinc` (CI: Debian's clang, no ROCm), and with
nvcc for the H100 (HIP on CUDA: the same source runs differentially against the interpreter
there). The names the kernel body uses are `TS_*` macros defined once per platform
(`TS_LDS` puts a shared-memory access in the LDS address space on AMD: the accesses are
volatile -- one instruction each, as the bank proof counts them -- and clang does not infer
the address space of a volatile access); everything with a numerical meaning -- f16/bf16
rounding, `i32()` saturation, `min`/`max` on NaN and signed zeros, floor division -- is
written once, in portable integer C++, so the H100 run exercises the very code an AMD GPU
would run. Only the IEEE f32 operations themselves are the platform's: `__fadd_rn` & co. on
CUDA (never contracted into an fma), plain operators under `#pragma clang fp contract(off)`
with clang (AMDGPU keeps f32 subnormals and divides correctly rounded by default;
tests/test_hip_amd.py checks the code object). The same functions also compile as host C++
(g++), where tests/test_hip_prelude.py compares them with semantics/expr/fp.py bit for bit.
"""

from __future__ import annotations

PRELUDE = r"""
// ---- tilesafe HIP prelude (codegen/hip_prelude.py) -------------------------------------
#if defined(__HIP__) && !defined(TILESAFE_BARE_AMDGPU) && __has_include(<hip/hip_runtime.h>)
#include <hip/hip_runtime.h>
#define TS_DEVICE __device__ static inline __attribute__((unused))
#define TS_KERNEL(block) extern "C" __global__ __launch_bounds__(block)
#define TS_SHARED extern __shared__
#define TS_LDS __attribute__((address_space(3)))
#define TS_TID_X() ((int)threadIdx.x)
#define TS_CTAID(axis) ((int)blockIdx.axis)
#define TS_SYNC() __syncthreads()
#define TS_TRAP() __builtin_trap()
#elif defined(__HIP__)  /* clang -x hip -nogpulib -nogpuinc: AMDGPU without ROCm */
#define TS_DEVICE __attribute__((device)) static inline __attribute__((unused))
#define TS_KERNEL(block) extern "C" __attribute__((global)) \
  __attribute__((amdgpu_flat_work_group_size(1, block)))
#define TS_SHARED extern __attribute__((shared))
#define TS_LDS __attribute__((address_space(3)))
#define TS_TID_X() ((int)__builtin_amdgcn_workitem_id_x())
#define TS_CTAID(axis) ((int)__builtin_amdgcn_workgroup_id_##axis())
#define TS_SYNC() do { __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup"); \
  __builtin_amdgcn_s_barrier(); __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup"); } \
  while (0)
#define TS_TRAP() __builtin_trap()
#elif defined(__CUDACC__)  /* HIP on CUDA: nvcc */
#define TS_DEVICE __device__ static inline __attribute__((unused))
#define TS_KERNEL(block) extern "C" __global__ __launch_bounds__(block)
#define TS_SHARED extern __shared__
#define TS_LDS
#define TS_TID_X() ((int)threadIdx.x)
#define TS_CTAID(axis) ((int)blockIdx.axis)
#define TS_SYNC() __syncthreads()
#define TS_TRAP() __trap()
#else  /* host C++: only the scalar functions (tests/test_hip_prelude.py) */
#define TS_DEVICE static inline __attribute__((unused))
#endif

#if defined(__CUDACC__) && !defined(__HIP__)
TS_DEVICE unsigned ts_bits(float x) { return __float_as_uint(x); }
TS_DEVICE float ts_float(unsigned u) { return __uint_as_float(u); }
TS_DEVICE float ts_fadd(float a, float b) { return __fadd_rn(a, b); }
TS_DEVICE float ts_fsub(float a, float b) { return __fsub_rn(a, b); }
TS_DEVICE float ts_fmul(float a, float b) { return __fmul_rn(a, b); }
TS_DEVICE float ts_fdiv(float a, float b) { return __fdiv_rn(a, b); }
#else
#if defined(__clang__)
#pragma clang fp contract(off)
#endif
TS_DEVICE unsigned ts_bits(float x) { return __builtin_bit_cast(unsigned, x); }
TS_DEVICE float ts_float(unsigned u) { return __builtin_bit_cast(float, u); }
TS_DEVICE float ts_fadd(float a, float b) { return a + b; }
TS_DEVICE float ts_fsub(float a, float b) { return a - b; }
TS_DEVICE float ts_fmul(float a, float b) { return a * b; }
TS_DEVICE float ts_fdiv(float a, float b) { return a / b; }
#endif

// |x|, min and max as semantics/expr/fp.py: a NaN operand yields the other, -0 below +0.
TS_DEVICE float ts_fabs(float x) { return ts_float(ts_bits(x) & 0x7fffffffu); }
TS_DEVICE float ts_fmin(float a, float b) {
  if (a != a) return b;
  if (b != b) return a;
  if (a == b) return (ts_bits(a) >> 31) ? a : b;
  return a < b ? a : b;
}
TS_DEVICE float ts_fmax(float a, float b) {
  if (a != a) return b;
  if (b != b) return a;
  if (a == b) return (ts_bits(a) >> 31) ? b : a;
  return a > b ? a : b;
}

// i32(x): truncate toward zero, NaN -> 0, saturating (PTX cvt.rzi.s32.f32).
TS_DEVICE int ts_f2i(float x) {
  if (x != x) return 0;
  if (x >= 2147483648.0f) return 2147483647;
  if (x <= -2147483648.0f) return -2147483647 - 1;
  return (int)x;
}

// f32 -> f16 / bf16 bits, nearest even; NaN -> 0x7fff (fp.f32_to_f16_bits, f32_to_bf16_bits).
TS_DEVICE unsigned short ts_f32_to_f16(float x) {
  unsigned u = ts_bits(x), sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return 0x7fff;
  if (a >= 0x477ff000u) return (unsigned short)(sign | 0x7c00u);
  if (a >= 0x38800000u) {
    unsigned r = a - 0x38000000u;
    r += 0xfffu + ((r >> 13) & 1u);
    return (unsigned short)(sign | (r >> 13));
  }
  if (a <= 0x33000000u) return (unsigned short)sign;
  unsigned m = (a & 0x7fffffu) | 0x800000u, s = 126u - (a >> 23);
  unsigned q = m >> s, rem = m & ((1u << s) - 1u), half = 1u << (s - 1u);
  if (rem > half || (rem == half && (q & 1u))) q += 1u;
  return (unsigned short)(sign | q);
}
TS_DEVICE float ts_f16_to_f32(unsigned short h) {
  unsigned sign = ((unsigned)h & 0x8000u) << 16, e = ((unsigned)h >> 10) & 31u,
           m = (unsigned)h & 0x3ffu;
  if (e == 0u) {
    float v = ts_fmul((float)(int)m, 5.9604644775390625e-8f);  /* m * 2^-24, exact */
    return ts_float(ts_bits(v) | sign);
  }
  if (e == 31u) return ts_float(sign | 0x7f800000u | (m << 13));
  return ts_float(sign | ((e + 112u) << 23) | (m << 13));
}
TS_DEVICE unsigned short ts_f32_to_bf16(float x) {
  unsigned u = ts_bits(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fff;
  return (unsigned short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
TS_DEVICE float ts_bf16_to_f32(unsigned short h) { return ts_float((unsigned)h << 16); }

// Floor division and modulo (the language's / and %); the divisor is never 0 here (a
// possibly-zero divisor traps first, as the interpreter reports TS203).
TS_DEVICE int ts_div32(int a, int b) {
  int q = a / b, r = a % b;
  return (r != 0 && ((r ^ b) < 0)) ? q - 1 : q;
}
TS_DEVICE int ts_mod32(int a, int b) {
  int r = a % b;
  return (r != 0 && ((r ^ b) < 0)) ? r + b : r;
}
TS_DEVICE long long ts_div64(long long a, long long b) {
  long long q = a / b, r = a % b;
  return (r != 0 && ((r ^ b) < 0)) ? q - 1 : q;
}
TS_DEVICE long long ts_mod64(long long a, long long b) {
  long long r = a % b;
  return (r != 0 && ((r ^ b) < 0)) ? r + b : r;
}

// Element access through byte addresses: one type per buffer, but the buffers share one
// byte array, so the accesses say they may alias it.
typedef float __attribute__((may_alias)) ts_f32m;
typedef int __attribute__((may_alias)) ts_i32m;
typedef unsigned short __attribute__((may_alias)) ts_u16m;
// ---- end of prelude --------------------------------------------------------------------
"""
