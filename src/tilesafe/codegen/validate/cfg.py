"""Control-flow graph of one kernel: basic blocks, edges with their branch conditions,
dominators, natural loops and the acyclic order the symbolic executor walks.

Why generic graph analysis rather than matching the printer's loop and wait shapes: the
validator must keep working (or say `unknown`) when the printer changes how it spells a
loop, so loops are whatever natural loops the graph has, and an irreducible graph is
reported rather than guessed at.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tilesafe.codegen.validate.ptx_parse import Instr, Label, Module, Reg, Sym


class CfgError(ValueError):
    """A control-flow shape the validator does not handle (reported as unknown)."""


@dataclass
class Block:
    id: int
    label: str | None
    instrs: list[Instr] = field(default_factory=list)
    # successors: (target block, guard register or None, guard negated?)
    succs: list[tuple[int, Reg | None, bool]] = field(default_factory=list)
    preds: list[int] = field(default_factory=list)
    terminates: bool = False  # ends in ret/exit/trap (unpredicated)


@dataclass
class Loop:
    id: int
    header: int
    body: set[int]
    latches: list[int]
    exits: list[tuple[int, int]]  # (block in loop, target outside)
    parent: int | None = None
    depth: int = 0


@dataclass
class Cfg:
    blocks: list[Block]
    rpo: list[int]  # topological order of the forward (back-edge free) graph
    idom: dict[int, int]
    back_edges: set[tuple[int, int]]
    loops: list[Loop]
    loop_of: dict[int, list[int]]  # block -> enclosing loop ids, outermost first

    def dominates(self, a: int, b: int) -> bool:
        while True:
            if a == b:
                return True
            if b not in self.idom or self.idom[b] == b:
                return False
            b = self.idom[b]


_BRANCH = ("bra", "bra.uni")
_END = ("ret", "exit", "trap")


def build(mod: Module) -> Cfg:
    blocks: list[Block] = []
    label_block: dict[str, int] = {}
    cur = Block(0, None)
    blocks.append(cur)
    for s in mod.body:
        if isinstance(s, Label):
            if cur.instrs or cur.label is not None:
                cur = Block(len(blocks), s.name)
                blocks.append(cur)
            else:
                cur.label = s.name
            if s.name in label_block:
                raise CfgError(f"label {s.name} defined twice")
            label_block[s.name] = cur.id
            continue
        cur.instrs.append(s)
        if s.opcode in _BRANCH or s.opcode in _END:
            cur = Block(len(blocks), None)
            blocks.append(cur)
    # edges
    for b in blocks:
        nxt = b.id + 1 if b.id + 1 < len(blocks) else None
        last = b.instrs[-1] if b.instrs else None
        if last is not None and last.opcode in _BRANCH:
            if len(last.operands) != 1 or not isinstance(last.operands[0], Sym) \
                    or last.operands[0].name not in label_block:
                raise CfgError(f"branch without a known label: {last.text}")
            target = label_block[last.operands[0].name]
            b.succs.append((target, last.guard, last.guard_negated))
            if last.guard is not None and nxt is not None:
                b.succs.append((nxt, last.guard, not last.guard_negated))
        elif last is not None and last.opcode in _END:
            if last.guard is None:
                b.terminates = True
            elif nxt is not None:
                b.succs.append((nxt, last.guard, not last.guard_negated))
        elif nxt is not None:
            b.succs.append((nxt, None, False))
        else:
            b.terminates = True
    for b in blocks:
        for t, _, _ in b.succs:
            blocks[t].preds.append(b.id)
    reach = _reachable(blocks)
    idom = _dominators(blocks, reach)
    back: set[tuple[int, int]] = set()
    for b in blocks:
        if b.id not in reach:
            continue
        for t, _, _ in b.succs:
            if _dom(idom, t, b.id):
                back.add((b.id, t))
    rpo = _topo(blocks, reach, back)
    loops = _loops(blocks, back, reach)
    loop_of: dict[int, list[int]] = {b.id: [] for b in blocks}
    for lp in sorted(loops, key=lambda x: x.depth):
        for bid in lp.body:
            loop_of[bid].append(lp.id)
    return Cfg(blocks, rpo, idom, back, loops, loop_of)


def _reachable(blocks: list[Block]) -> set[int]:
    seen = {0}
    stack = [0]
    while stack:
        b = stack.pop()
        for t, _, _ in blocks[b].succs:
            if t not in seen:
                seen.add(t)
                stack.append(t)
    return seen


def _dom(idom: dict[int, int], a: int, b: int) -> bool:
    while True:
        if a == b:
            return True
        if idom.get(b, b) == b:
            return False
        b = idom[b]


def _dominators(blocks: list[Block], reach: set[int]) -> dict[int, int]:
    """Cooper-Harvey-Kennedy iterative dominators over the reachable blocks."""
    order: list[int] = []
    seen: set[int] = set()

    def dfs(root: int) -> None:
        stack: list[tuple[int, int]] = [(root, 0)]
        seen.add(root)
        while stack:
            b, i = stack.pop()
            succs = blocks[b].succs
            if i < len(succs):
                stack.append((b, i + 1))
                t = succs[i][0]
                if t not in seen:
                    seen.add(t)
                    stack.append((t, 0))
            else:
                order.append(b)

    dfs(0)
    rpo = list(reversed(order))
    index = {b: i for i, b in enumerate(rpo)}
    idom: dict[int, int] = {0: 0}
    changed = True
    while changed:
        changed = False
        for b in rpo[1:]:
            preds = [p for p in blocks[b].preds if p in idom and p in reach]
            if not preds:
                continue
            new = preds[0]
            for p in preds[1:]:
                a, c = p, new
                while a != c:
                    while index[a] > index[c]:
                        a = idom[a]
                    while index[c] > index[a]:
                        c = idom[c]
                new = a
            if idom.get(b) != new:
                idom[b] = new
                changed = True
    return idom


def _topo(blocks: list[Block], reach: set[int], back: set[tuple[int, int]]) -> list[int]:
    indeg = {b: 0 for b in reach}
    for b in reach:
        for t, _, _ in blocks[b].succs:
            if (b, t) not in back and t in reach:
                indeg[t] += 1
    ready = sorted(b for b, d in indeg.items() if d == 0)
    out: list[int] = []
    while ready:
        b = ready.pop(0)
        out.append(b)
        for t, _, _ in blocks[b].succs:
            if (b, t) in back or t not in reach:
                continue
            indeg[t] -= 1
            if indeg[t] == 0:
                ready.append(t)
                ready.sort()
    if len(out) != len(reach):
        raise CfgError("irreducible control flow (a cycle that is not a natural loop)")
    return out


def _loops(blocks: list[Block], back: set[tuple[int, int]], reach: set[int]) -> list[Loop]:
    by_header: dict[int, Loop] = {}
    for u, h in sorted(back):
        lp = by_header.get(h)
        if lp is None:
            lp = by_header[h] = Loop(len(by_header), h, {h}, [], [])
        lp.latches.append(u)
        stack = [u]
        while stack:
            x = stack.pop()
            if x in lp.body:
                continue
            lp.body.add(x)
            stack.extend(p for p in blocks[x].preds if p in reach)
    loops = sorted(by_header.values(), key=lambda x: x.header)
    for i, lp in enumerate(loops):
        lp.id = i
    for lp in loops:
        for b in sorted(lp.body):
            for t, _, _ in blocks[b].succs:
                if t not in lp.body:
                    lp.exits.append((b, t))
        outer = [o for o in loops if o is not lp and lp.body < o.body]
        if outer:
            lp.parent = min(outer, key=lambda o: len(o.body)).id
            lp.depth = len(outer)
    return loops
