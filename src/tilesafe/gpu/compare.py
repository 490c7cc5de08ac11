"""Bit-for-bit comparison of a GPU run with the reference interpreter's.

The rule: every element's bit pattern must be equal, except that two f32 NaNs are equal
whatever their payloads (the interpreter does not model NaN payloads of f32 arithmetic;
docs/semantics.md). f16/bf16 stores write the canonical NaN in both, so their bits must
match exactly. numpy only: this runs on the GPU machine.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

_BITS = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


@dataclass(frozen=True)
class Mismatch:
    tensor: str
    count: int
    first_index: tuple[int, ...]
    expected: str
    got: str

    def describe(self) -> str:
        return (f"{self.tensor}: {self.count} element(s) differ; first at "
                f"{list(self.first_index)}: expected {self.expected}, got {self.got}")


def _show(a: np.ndarray, idx: tuple[int, ...], bits: np.ndarray) -> str:
    return f"{a[idx]!r} (0x{int(bits[idx]):0{a.itemsize * 2}x})"


def compare(expected: Mapping[str, np.ndarray], got: Mapping[str, np.ndarray]
            ) -> list[Mismatch]:
    """Every tensor of `expected` against `got` (same names, shapes, dtypes)."""
    out = []
    for name, want in expected.items():
        have = got.get(name)
        if have is None or have.shape != want.shape or have.dtype != want.dtype:
            shape = None if have is None else f"{have.dtype}{list(have.shape)}"
            out.append(Mismatch(name, int(want.size), (), f"{want.dtype}{list(want.shape)}",
                                str(shape)))
            continue
        wb = want.view(_BITS[want.itemsize])
        hb = have.view(_BITS[have.itemsize])
        differ = wb != hb
        if want.dtype == np.float32:
            differ &= ~(np.isnan(want) & np.isnan(have))
        n = int(differ.sum())
        if n:
            idx = tuple(int(i) for i in np.argwhere(differ)[0])
            out.append(Mismatch(name, n, idx, _show(want, idx, wb), _show(have, idx, hb)))
    return out
