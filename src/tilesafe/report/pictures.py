"""Pictures of a kernel and of its counterexamples, from the obligation records and the IR.

Why here and not in the checkers: the checkers return data (Obligation.counterexample,
evidence); only the report decides how to draw it. Each function returns SVG text or None
when the record has nothing to draw.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from tilesafe.checkers.obligation import Obligation
from tilesafe.frontend import ir
from tilesafe.report import svg
from tilesafe.report.svg import Cell, Step

MAX_ROWS, MAX_COLS = 64, 64
_STEP = re.compile(r"^\s*(\d+)\.\s+(.*?):\s+(.*?)(?:\s+\(line (\d+)\))?\s*$")


# ---- temporal counterexamples: swimlanes ----------------------------------------------------


def _lane_of(text: str, lanes: Sequence[str]) -> str | None:
    for name in sorted(lanes, key=len, reverse=True):
        if text.startswith(name):
            return name
    return None


def trace_steps(trace: Sequence[str]) -> list[Step]:
    steps = []
    for line in trace:
        m = _STEP.match(line)
        if not m:
            continue
        agents = tuple(a.strip() for a in m.group(2).split(" + "))
        steps.append(Step(int(m.group(1)), agents, m.group(3), int(m.group(4) or 0) or None))
    return steps


def swimlane_picture(o: Obligation) -> str | None:
    """A deadlock or race as a timeline: roles and the copy engine, the steps, the
    barriers' final phases, and in red where each role is stuck (or races)."""
    cex = o.counterexample or {}
    trace = cex.get("trace")
    if not isinstance(trace, (list, tuple)):
        return None
    steps = trace_steps([str(t) for t in trace])
    lanes: list[str] = []
    for s in steps:
        for a in s.lanes:
            if a not in lanes:
                lanes.append(a)
    final = [str(x) for x in (cex.get("blocked") or cex.get("at") or [])]
    for f in final:
        name = f.split(" (")[0].split(" waits")[0].split(" at ")[0].strip()
        if _lane_of(f, lanes) is None and name:
            lanes.append(name)
    copies: list[tuple[int, int | None, str]] = []
    for j, s in enumerate(steps):
        if "tma_load" in s.action or "tma_store" in s.action:
            copies.append((j, None, s.action))
        if any("copy" in a for a in s.lanes) or re.search(r"\b(lands|completes|landed)\b",
                                                          s.action):
            for k, (a, b, label) in enumerate(copies):
                if b is None:
                    copies[k] = (a, j, label)
                    break
    if copies and "copy engine" not in lanes:
        lanes.append("copy engine")
    offending = {}
    for f in final:
        lane = _lane_of(f, lanes)
        if lane is not None:
            offending[lane] = f[len(lane):].strip(" :") or f
    if not offending and lanes:
        region = cex.get("region")
        last = steps[-1].lanes[0] if steps else lanes[0]
        offending[last] = f"violation{f' on {region}' if region else ''}: {o.code or ''}"
    barriers = [str(b) for b in cex.get("barriers", []) or []]
    shown = steps[-60:]
    events = []
    for row, b in enumerate(barriers):
        label = b.split(":")[0].strip()
        base = label.split("[")[0]
        pat = re.compile(rf"(?<![\w\]]){re.escape(label)}(?![\w\[])|(?<![\w\]]){re.escape(base)}"
                         rf"(?=,|\s|$)")
        for j, s in enumerate(shown):
            if pat.search(s.action):
                events.append((j, row, f"{s.index}. {s.action}"))
    title = f"{o.code or ''} {o.name.split(': ', 1)[-1]}: {len(steps)} steps, then ✗"
    return svg.swimlanes(title, lanes, shown, offending, barriers, copies, events)


# ---- layouts --------------------------------------------------------------------------------


def _offsets(buf: ir.SharedBuffer) -> tuple[int, ...] | None:
    from tilesafe.semantics.interpreter.smem import realize_offsets

    try:
        return realize_offsets(buf)[0]
    except Exception:  # noqa: BLE001 - a layout that does not realise has no picture
        return None


def _tile(buf: ir.SharedBuffer) -> tuple[int, int]:
    rows = buf.shape[-2] if len(buf.shape) >= 2 else 1
    return rows, buf.shape[-1]


def swizzle_picture(buf: ir.SharedBuffer, highlight: tuple[int, int] | None = None) -> str | None:
    """The buffer's first tile as 16-byte chunks, coloured by the chunk of the 128-byte row
    they land in: stripes for row-major, the XOR pattern for a swizzle."""
    offs = _offsets(buf)
    if offs is None:
        return None
    rows, cols = _tile(buf)
    eb = buf.dtype.nbytes
    per = max(1, 16 // eb)  # elements per 16-byte chunk
    chunks = math.ceil(cols / per)
    r_show, c_show = min(rows, MAX_ROWS), min(chunks, MAX_COLS)

    def cell(r: int, c: int) -> Cell:
        k = r * cols + c * per
        phys = offs[k] * eb // 16
        hit = highlight is not None and highlight[0] == r and highlight[1] // per == c
        return Cell(svg.hue(phys % 8, 8), str(phys % 8), f"elements ({r}, {c * per}.."
                    f"{c * per + per - 1}) -> byte {offs[k] * eb} (chunk {phys % 8} of its "
                    "128-byte row)", refuted=hit)

    title = f"{buf.name}: {buf.layout} — 16-byte chunk of each row segment"
    return svg.grid("swizzle-map", title, r_show, c_show, cell, col_label="16B chunk")


def tma_arrangement_picture(o: Obligation, kernel: ir.Kernel) -> str | None:
    """For a TMA copy whose arrangement differs from the layout: the box as the copy writes
    it beside the buffer's layout, the first differing element in red in both."""
    from tilesafe.semantics.hw import tma_rules as tr

    cex = o.counterexample or {}
    m = re.search(r"(tma_load into|tma_store from) (\w+) at", o.name)
    if "coord" not in cex or m is None:
        return None
    from tilesafe.frontend.walk import statements

    buf = kernel.buffer(m.group(2))
    stmt = next((s for s in statements(kernel.body) if isinstance(s, (ir.TmaLoad, ir.TmaStore))
                 and o.span is not None and s.span.line == o.span.line), None)
    if stmt is None:
        return None
    tmap = kernel.tensormap(stmt.tensormap)
    if len(tmap.box) < 2:
        return None
    coord = tuple(int(x) for x in cex["coord"])
    eb = buf.dtype.nbytes
    box = tuple(tmap.box)
    arr = tr.box_arrangement_array(box, eb, tmap.swizzle)
    per = max(1, 16 // eb)
    rows, cols = box[-2], box[-1]
    chunks = math.ceil(cols / per)
    hl = (coord[-2], coord[-1] // per) if len(coord) >= 2 else None

    def tma_cell(r: int, c: int) -> Cell:
        phys = int(arr[r * cols + c * per]) // 16
        return Cell(svg.hue(phys % 8, 8), str(phys % 8),
                    f"box ({r}, {c * per}..) -> byte {int(arr[r * cols + c * per])}",
                    refuted=hl == (r, c))

    left = svg.grid("tma-box", f"TMA {tmap.name}: box {list(box)}, swizzle {tmap.swizzle}",
                    min(rows, MAX_ROWS), min(chunks, MAX_COLS), tma_cell,
                    col_label="16B chunk")
    right = swizzle_picture(buf, (coord[-2], coord[-1])) or ""
    return f'<div class="pair">{left}{right}</div>'


def thread_map_picture(o: Obligation, kernel: ir.Kernel) -> str | None:
    """A warp access drawn on its buffer: which lane touches which element (the worst
    access of a bank-conflict counterexample), the conflicting bank's elements in red."""
    cex = o.counterexample or {}
    idx, lanes = cex.get("indices"), cex.get("lanes")
    words = cex.get("words")
    m = re.search(r"of (\w+) at", o.name)
    if not idx or not lanes or m is None:
        return None
    try:
        buf = kernel.buffer(m.group(1))
    except (KeyError, ValueError, StopIteration):
        return None
    rows, cols = _tile(buf)
    bank = cex.get("bank")
    owner: dict[tuple[int, int], tuple[int, bool]] = {}
    for k, (lane, ix) in enumerate(zip(lanes, idx, strict=False)):
        ix = tuple(ix) if isinstance(ix, (list, tuple)) else (ix,)
        rc = (ix[-2], ix[-1]) if len(ix) >= 2 else (0, ix[-1])
        in_bank = words is not None and bank is not None and k < len(words) and \
            int(words[k]) % 32 == int(bank)
        owner[rc] = (int(lane), in_bank)
    r_show, c_show = min(rows, MAX_ROWS), min(cols, MAX_COLS)

    def cell(r: int, c: int) -> Cell | None:
        hit = owner.get((r, c))
        if hit is None:
            return Cell("#f2f2f2")
        return Cell(svg.hue(hit[0], 32), str(hit[0]), f"lane {hit[0]} reads ({r}, {c})",
                    refuted=hit[1])

    title = f"{buf.name}: lanes of warp {cex.get('warp', 0)} → elements (bank {bank} in red)"
    return svg.grid("thread-map", title, r_show, c_show, cell, size=12)


def bank_heatmap(o: Obligation) -> str | None:
    """Distinct 32-bit words per bank in the worst warp access (a conflict: > 1)."""
    cex = o.counterexample or {}
    words = cex.get("words")
    if not words:
        return None
    per_bank = [set() for _ in range(32)]
    for w in words:
        per_bank[int(w) % 32].add(int(w))
    counts = [len(s) for s in per_bank]
    worst = max(range(32), key=lambda b: counts[b])
    return svg.heat_strip("bank-heatmap", f"distinct words per bank: {max(counts)}-way "
                          f"conflict on bank {worst}", counts, worst)


def _size_value(e: ir.Expr, sizes: Mapping[str, int]) -> int:
    """A tensor extent at concrete sizes (shapes are affine in the sizes)."""
    if isinstance(e, ir.IntConst):
        return e.value
    if isinstance(e, ir.SizeVar):
        return int(sizes[e.name])
    if isinstance(e, ir.BinOp):
        a, b = _size_value(e.lhs, sizes), _size_value(e.rhs, sizes)
        ops = {"+": a + b, "-": a - b, "*": a * b}
        if e.op in ops:
            return ops[e.op]
        if e.op in ("/", "%") and b:
            return a // b if e.op == "/" else a % b
    raise ValueError(f"no value for {e}")


def _tensor_shape(o: Obligation, kernel: ir.Kernel, sizes: Mapping[str, int]) -> list[int] | None:
    """The shape at `sizes` of the tensor an obligation names (`... <tensor> written ...`)."""
    for t in kernel.params:
        if re.search(rf"\b{re.escape(t.name)}\b", o.name.split(": ", 1)[-1]):
            try:
                return [_size_value(d, sizes) for d in t.shape]
            except (ValueError, KeyError):
                return None
    return None


def index_picture(o: Obligation, kernel: ir.Kernel) -> str | None:
    """An access counterexample on its tensor: the tensor's extent at the counterexample's
    sizes and, in red, the element it names (outside the box when out of bounds; written
    twice; never written)."""
    cex = o.counterexample or {}
    index = cex.get("index", cex.get("element"))
    shape = cex.get("shape")
    if shape is None and isinstance(cex.get("sizes"), Mapping):
        shape = _tensor_shape(o, kernel, cex["sizes"])
    if not isinstance(index, (list, tuple)) or not isinstance(shape, (list, tuple)):
        return None
    if not index or len(index) != len(shape):
        return None
    r, c = (int(index[-2]), int(index[-1])) if len(index) >= 2 else (0, int(index[-1]))
    rows = int(shape[-2]) if len(shape) >= 2 else 1
    cols = int(shape[-1])
    r_show, c_show = min(rows, MAX_ROWS), min(cols, MAX_COLS)
    if r < 0 or c < 0 or r >= r_show + 8 or c >= c_show + 8:
        # far outside: draw it just past the edge, the tip says where
        r, c = min(max(r, 0), r_show + 1), min(max(c, 0), c_show + 1)
    size = 14 if max(r_show, c_show) <= 32 else 7
    tip = f"index {list(index)} of a tensor of shape {list(shape)}"
    name = re.search(r"(read|write|store|load) of (\w+)", o.name)
    title = f"{name.group(2) if name else 'tensor'}{list(shape)}: {o.code} at index " \
            f"{list(index)}"
    return svg.grid("index", title, r_show, c_show, lambda i, j: Cell("#dfe8f3"), size=size,
                    extra=[(r, c, Cell("", "✗", tip, refuted=True))])


def pictures_for(o: Obligation, kernel: ir.Kernel | None) -> list[str]:
    """Every picture an obligation's counterexample has."""
    out: list[str] = []
    if o.counterexample is None:
        return out
    pic = swimlane_picture(o)
    if pic:
        out.append(pic)
    if kernel is not None:
        for fn in (tma_arrangement_picture, thread_map_picture, index_picture):
            try:
                pic = fn(o, kernel)
            except Exception:  # noqa: BLE001 - a picture that cannot be drawn is left out
                pic = None
            if pic:
                out.append(pic)
    pic = bank_heatmap(o)
    if pic:
        out.append(pic)
    return out


def sizes_table(cex: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The counterexample's sizes, block, thread and loop values, for a table."""
    keep = ("sizes", "block", "thread", "threads", "warp", "loops", "iteration", "trip count",
            "index", "element", "shape", "coord", "stage", "region", "statement", "bytes",
            "writer1", "writer2", "instance", "layout_byte", "tma_byte")
    rows = []
    for k in keep:
        if k in cex:
            v = cex[k]
            if isinstance(v, Mapping):
                v = ", ".join(f"{a}={b}" for a, b in v.items())
            rows.append((k, str(v)))
    return rows
