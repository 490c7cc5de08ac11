"""Exact scalar arithmetic of the kernel language: f32 rounding, f16/bf16 stores, int wrap.

Why a module of its own: the reference interpreter is the oracle for differential testing on a
GPU, so every conversion must be bit-exact, and each rule is written once here (and tested
against hand-checked cases) instead of being scattered through the interpreter.

- f32 values are numpy float32 scalars: numpy performs float32 + - * / as single IEEE
  binary32 operations (round to nearest even, subnormals kept), which is what PTX `add.rn.f32`
  etc. do without `.ftz`.
- Integers are Python ints (unbounded); `int_to_f32` rounds an int of any size correctly
  (no double rounding through binary64).
- f16 stores use numpy's float32 -> float16 conversion (round to nearest even); bf16 stores
  use our own round-to-nearest-even on the f32 bit pattern. A NaN stored into f16/bf16 becomes
  the canonical NaN 0x7FFF (what `cvt.rn.f16.f32` / `cvt.rn.bf16.f32` produce). NaN payloads
  of f32 arithmetic are not modelled: compare NaN positions, not NaN bits.
"""

from __future__ import annotations

import math

import numpy as np

F16_NAN_BITS = 0x7FFF
BF16_NAN_BITS = 0x7FFF
F32_NAN_BITS = 0x7FFFFFFF
I32_MIN = -(2**31)
I32_MAX = 2**31 - 1

_F32 = np.float32


def int_to_f32(value: int) -> np.float32:
    """The f32 nearest to an unbounded integer (ties to even), overflowing to +-inf."""
    mag = -value if value < 0 else value
    if mag < (1 << 24):
        return _F32(value)
    shift = mag.bit_length() - 24
    q, r = divmod(mag, 1 << shift)
    half = 1 << (shift - 1)
    if r > half or (r == half and q & 1):
        q += 1
    try:
        out = math.ldexp(float(q), shift)  # exact: q has at most 25 significant bits
    except OverflowError:
        out = math.inf
    if out > 3.4028234663852886e38:
        out = math.inf
    return _F32(-out if value < 0 else out)


def f32_bits(x: np.float32) -> int:
    return int(np.asarray(x, dtype=np.float32).view(np.uint32))


def f32_from_bits(bits: int) -> np.float32:
    return np.asarray(bits & 0xFFFFFFFF, dtype=np.uint32).view(np.float32)[()]


def f32_to_bf16_bits(x: np.float32) -> int:
    """Round an f32 to bf16 (nearest, ties to even) and return the 16-bit pattern."""
    bits = f32_bits(x)
    if (bits & 0x7F800000) == 0x7F800000 and (bits & 0x007FFFFF):
        return BF16_NAN_BITS
    rounded = bits + 0x7FFF + ((bits >> 16) & 1)
    return (rounded >> 16) & 0xFFFF


def bf16_bits_to_f32(bits: int) -> np.float32:
    """Widen a bf16 pattern to f32 (exact: bf16 is the top half of an f32)."""
    return f32_from_bits((bits & 0xFFFF) << 16)


def f32_to_f16_bits(x: np.float32) -> int:
    """Round an f32 to f16 (nearest, ties to even; overflow to inf) and return the pattern."""
    if x != x:
        return F16_NAN_BITS
    if abs(x) >= 65520.0:  # at or past the tie above the largest f16 (65504): overflow
        return 0xFC00 if x < 0 else 0x7C00
    return int(np.float16(x).view(np.uint16))


def f16_bits_to_f32(bits: int) -> np.float32:
    return _F32(np.asarray(bits & 0xFFFF, dtype=np.uint16).view(np.float16)[()])


def round_to_f16(x: np.float32) -> np.float32:
    """The f32 value of x after a store into f16 (round, then widen exactly)."""
    return f16_bits_to_f32(f32_to_f16_bits(x))


def round_to_bf16(x: np.float32) -> np.float32:
    return bf16_bits_to_f32(f32_to_bf16_bits(x))


def wrap_i32(value: int) -> int:
    """Two's-complement wrap of an unbounded int into i32."""
    return ((value + 2**31) & 0xFFFFFFFF) - 2**31


def wrap_u8(value: int) -> int:
    return value & 0xFF


def f32_to_i32(x: np.float32) -> int:
    """`i32(x)`: truncate toward zero like PTX `cvt.rzi.s32.f32` (NaN -> 0, saturating)."""
    if x != x:
        return 0
    if x >= 2147483648.0:
        return I32_MAX
    if x <= -2147483648.0:
        return I32_MIN
    return int(x)  # float32 -> Python int truncates toward zero, exactly


def fmin(a: np.float32, b: np.float32) -> np.float32:
    """PTX `min.f32`: a NaN operand yields the other operand; -0 counts as below +0."""
    if a != a:
        return b
    if b != b:
        return a
    if a == b:
        return a if np.signbit(a) else b
    return a if a < b else b


def fmax(a: np.float32, b: np.float32) -> np.float32:
    if a != a:
        return b
    if b != b:
        return a
    if a == b:
        return b if np.signbit(a) else a
    return a if a > b else b


def fabs(a: np.float32) -> np.float32:
    return _F32(abs(a))


# ---- whole arrays (inputs, outputs, summaries) -------------------------------------------


def bf16_array_to_f32(bits: np.ndarray) -> np.ndarray:
    """Widen an array of bf16 patterns (uint16) to float32, exactly."""
    return (bits.astype(np.uint32) << 16).view(np.float32)


def f32_array_to_bf16(values: np.ndarray) -> np.ndarray:
    """Round a float32 array to bf16 patterns (uint16), ties to even, canonical NaN."""
    bits = np.ascontiguousarray(values, dtype=np.float32).view(np.uint32).astype(np.uint64)
    out = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
    return np.where(np.isnan(values), np.uint16(BF16_NAN_BITS), out).astype(np.uint16)
