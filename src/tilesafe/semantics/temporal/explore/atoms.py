"""Atoms of shared memory (ownership) and the prepass that finds them.

Why atoms: permissions are tracked per region, and the coarsest partition of every buffer
that every footprint, TMA slice and guarded stage is a union of keeps the state small. One
pass over every evaluation of every instruction (`prepass`) collects those regions, and
which classes wait on which barrier instance (a completed phase is split among them).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from tilesafe.semantics.temporal.events import slice_mask
from tilesafe.semantics.temporal.explore.errors import ExploreError
from tilesafe.semantics.temporal.explore.ops.base import Scan

if TYPE_CHECKING:
    from tilesafe.semantics.temporal.explore.machine import Machine


@dataclass
class Atoms:
    """Atom ids per buffer; per atom its buffer and element bit mask; per barrier instance
    the atoms its `guards` cover."""

    by_buffer: dict[str, list[int]]
    buf: list[str]
    mask: list[int]
    guards: list[tuple[int, ...]]
    labels: dict[int, str]  # label cache (shared by the machines of one model)
    kernel: object

    def __len__(self) -> int:
        return len(self.mask)

    def of(self, buf: str, mask: int) -> tuple[int, ...]:
        """The atoms of `buf` that meet the element mask."""
        if mask == 0:
            return ()
        return tuple(i for i in self.by_buffer.get(buf, ()) if self.mask[i] & mask)

    def at(self, buf: str, element: int) -> int:
        """The atom holding one element of a buffer."""
        for x in self.by_buffer.get(buf, ()):
            if (self.mask[x] >> element) & 1:
                return x
        raise KeyError((buf, element))

    def elements(self, x: int) -> np.ndarray:
        """Atom x as a boolean array over its buffer's elements."""
        size = self.kernel.buffer(self.buf[x]).size
        raw = self.mask[x].to_bytes((size + 7) // 8, "little")
        bits = np.unpackbits(np.frombuffer(raw, dtype=np.uint8), bitorder="little")
        return bits[:size].astype(bool)

    def label(self, atom: int) -> str:
        """buf, buf[1], buf[0, 32..63, 0..63], or an element count when not a box."""
        hit = self.labels.get(atom)
        if hit is not None:
            return hit
        buf = self.kernel.buffer(self.buf[atom])
        mask = self.mask[atom]
        count = bin(mask).count("1")
        label = f"{buf.name}{{{count} elements}}"
        if mask == (1 << buf.size) - 1:
            label = buf.name
        else:
            coords = []
            for flat in ((mask & -mask).bit_length() - 1, mask.bit_length() - 1):
                c = []
                for d in reversed(buf.shape):
                    c.append(flat % d)
                    flat //= d
                coords.append(tuple(reversed(c)))
            lo, hi = coords
            box = 1
            for a, b in zip(lo, hi, strict=True):
                box *= b - a + 1
            if box == count and all(a <= b for a, b in zip(lo, hi, strict=True)):
                parts = [str(a) if a == b else f"{a}..{b}" for a, b in zip(lo, hi, strict=True)]
                while len(parts) > 1 and parts[-1] == f"0..{buf.shape[len(parts) - 1] - 1}":
                    parts.pop()
                label = f"{buf.name}[{', '.join(parts)}]"
        self.labels[atom] = label
        return label


def prepass(m: Machine) -> tuple[Atoms, list[tuple[int, ...]]]:
    """Enumerate every evaluation of the instructions once: regions that refine the
    buffers into atoms, and which classes wait on which barrier instance."""
    k = m.k
    found = Scan([set() for _ in range(m.ninst)], {b.name: set() for b in k.shared})
    for b in k.barriers:
        for g in b.all_guards:
            buf = k.buffer(g.buffer)
            for i in range(b.instances):
                if g.indexed:
                    for prefix in g.prefixes(i, buf):
                        mask = slice_mask(buf, prefix)
                        if mask:
                            found.regions[buf.name].add(mask)
    for a, ag in enumerate(m.agents):
        for ins in ag.code:
            op = m.hooks.ops.get(type(ins))
            if op is None or not op.scans(ins):
                continue
            for ctrs in m.envs(a, ins):
                try:
                    op.scan(a, ins, m.env(a, ins, ctrs), found)
                except ExploreError:
                    continue
    waiters = [tuple(sorted(w)) for w in found.waiters]
    labels = m.model.__dict__.setdefault("_label_cache", {})
    atoms = Atoms({}, [], [], [() for _ in range(m.ninst)], labels, k)
    if not m.ownership:
        return atoms, waiters
    for buf in k.shared:
        full = (1 << buf.size) - 1
        parts = [full]
        for r in sorted(found.regions[buf.name]):
            nxt = []
            for at in parts:
                x, y = at & r, at & ~r
                nxt.extend(v for v in (x, y) if v)
            parts = nxt
        ids = []
        for at in parts:
            ids.append(len(atoms.mask))
            atoms.mask.append(at)
            atoms.buf.append(buf.name)
        atoms.by_buffer[buf.name] = ids
    for b in k.barriers:
        for g in b.all_guards:
            buf = k.buffer(g.buffer)
            for i in range(b.instances):
                mask = 0
                for prefix in g.prefixes(i, buf):
                    mask |= slice_mask(buf, prefix)
                inst = m.model.inst_id(b.name, i)
                atoms.guards[inst] += atoms.of(buf.name, mask)
    return atoms, waiters
