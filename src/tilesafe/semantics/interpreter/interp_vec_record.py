"""The schedule a vector run followed, in the scalar engine's terms, built only on demand.

Why lazily: a vector run of 10^7 elements takes 10^7 scalar steps; keeping the choices as
a tuple of Python ints would cost more memory and time than the run. The record keeps what
each group step moved (a lane array, a range of lanes, or one copy) and spells out the
scalar schedule -- thread ids and copy agents per block, blocks concatenated in launch
order (semantics/interpreter/interp.py's format) -- when `RunResult.schedule` or an error asks for
it.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

_LANES, _RANGE, _COPY = 0, 1, 2


class Record:
    """Group steps of a vector run, in the order they were executed."""

    def __init__(self, nthreads: int) -> None:
        self.nthreads = nthreads
        self.parts: list[tuple[int, int, object]] = []  # (first block of batch, tag, what)

    def lanes(self, first: int, lanes: np.ndarray) -> None:
        lo = int(lanes[0])
        if int(lanes[-1]) - lo + 1 == len(lanes):
            self.parts.append((first, _RANGE, (lo, lo + len(lanes))))
        else:
            self.parts.append((first, _LANES, lanes.astype(np.int32)))

    def copy(self, first: int, row: int, agent: int) -> None:
        self.parts.append((first, _COPY, (row, agent)))

    def schedule(self) -> tuple[int, ...]:
        """The agent of every scalar step: per block, its threads' steps and its copies'
        in the order they happened; blocks in launch order."""
        out: list[int] = []
        nt = self.nthreads
        batch: dict[int, list[np.ndarray]] = defaultdict(list)
        current = None
        for first, tag, what in self.parts:
            if first != current:
                out.extend(_flush(batch))
                current = first
            if tag == _COPY:
                row, agent = what  # type: ignore[misc]
                batch[row].append(np.array([agent], np.int64))
                continue
            lanes = (np.arange(*what, dtype=np.int64) if tag == _RANGE  # type: ignore[misc]
                     else what.astype(np.int64))  # type: ignore[union-attr]
            rows = lanes // nt  # type: ignore[operator]
            cuts = np.flatnonzero(rows[1:] != rows[:-1]) + 1
            for chunk in np.split(lanes, cuts):  # type: ignore[arg-type]
                batch[int(chunk[0]) // nt].append(chunk % nt)
        out.extend(_flush(batch))
        return tuple(out)


def _flush(batch: dict[int, list[np.ndarray]]) -> list[int]:
    out: list[int] = []
    for row in sorted(batch):
        out.extend(np.concatenate(batch[row]).tolist())
    batch.clear()
    return out
