"""Small inline-SVG drawings: grids of cells, a heat strip, swimlanes.

Why hand-written SVG: the report must be one self-contained file that opens offline, so no
plotting or JavaScript library is fetched; these few shapes are all it draws. Every
picture is an `<svg class="pic" data-kind=...>`, and whatever is the refuted element is
drawn with class `refuted` (red), so tests (and readers) can find it.
"""

from __future__ import annotations

import colorsys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from html import escape

REFUTED = "#d62728"


def hue(k: int, n: int) -> str:
    """A distinguishable pastel colour for class k of n."""
    r, g, b = colorsys.hsv_to_rgb((k % max(n, 1)) / max(n, 1), 0.45, 0.95)
    return f"#{int(r * 255):02x}{int(g * 255):02x}{int(b * 255):02x}"


def heat(x: float) -> str:
    """White (0) to red (1)."""
    x = min(max(x, 0.0), 1.0)
    return f"#ff{int(255 * (1 - x)):02x}{int(255 * (1 - x)):02x}"


def _t(x: float, y: float, text: str, size: int = 10, anchor: str = "start",
       cls: str = "") -> str:
    c = f' class="{cls}"' if cls else ""
    return (f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size}" text-anchor="{anchor}"{c}>'
            f"{escape(text)}</text>")


def svg(kind: str, width: float, height: float, body: Sequence[str], title: str) -> str:
    return (f'<svg class="pic" data-kind="{kind}" xmlns="http://www.w3.org/2000/svg" '
            f'width="{width:.0f}" height="{height:.0f}" viewBox="0 0 {width:.0f} {height:.0f}" '
            f'font-family="sans-serif" role="img" aria-label="{escape(title)}">'
            f"<title>{escape(title)}</title>"
            + "".join(body) + "</svg>")


@dataclass(frozen=True)
class Cell:
    """One cell of a grid picture."""

    fill: str
    label: str = ""
    tip: str = ""
    refuted: bool = False


def grid(kind: str, title: str, rows: int, cols: int, cell: Callable[[int, int], Cell | None],
         size: int = 14, row_label: str = "row", col_label: str = "col",
         extra: Sequence[tuple[int, int, Cell]] = ()) -> str:
    """A rows x cols grid; `extra` cells may lie outside it (an index out of bounds)."""
    max_r = max([rows - 1, *[r for r, _, _ in extra]])
    max_c = max([cols - 1, *[c for _, c, _ in extra]])
    left, top = 34, 30
    w, h = left + (max_c + 1) * size + 10, top + (max_r + 1) * size + 10
    body = [_t(2, 12, title, 11), _t(left, 24, f"{col_label} →", 9),
            _t(2, top + 10, f"{row_label}↓", 9)]
    body.append(f'<rect x="{left}" y="{top}" width="{cols * size}" height="{rows * size}" '
                'fill="none" stroke="#333" stroke-width="1.5"/>')

    def draw(r: int, c: int, k: Cell) -> None:
        x, y = left + c * size, top + r * size
        stroke = f'stroke="{REFUTED}" stroke-width="2.5"' if k.refuted else \
            'stroke="#fff" stroke-width="0.5"'
        cls = ' class="refuted"' if k.refuted else ""
        fill = REFUTED if k.refuted and k.fill == "" else (k.fill or "#eee")
        tip = f"<title>{escape(k.tip)}</title>" if k.tip else ""
        body.append(f'<rect{cls} x="{x}" y="{y}" width="{size}" height="{size}" '
                    f'fill="{fill}" {stroke}>{tip}</rect>')
        if k.label and size >= 12:
            body.append(_t(x + size / 2, y + size * 0.72, k.label, max(6, size // 2 - 1),
                           "middle"))

    for r in range(rows):
        for c in range(cols):
            k = cell(r, c)
            if k is not None:
                draw(r, c, k)
    for r, c, k in extra:
        draw(r, c, k)
    return svg(kind, w, h, body, title)


def heat_strip(kind: str, title: str, values: Sequence[int], worst: int | None,
               label: str = "bank") -> str:
    """One cell per value (e.g. distinct words per bank), shaded by value; `worst` red."""
    size, left, top = 22, 4, 28
    peak = max(values) if values else 1
    body = [_t(2, 12, title, 11)]
    for i, v in enumerate(values):
        x = left + i * size
        refuted = worst is not None and i == worst
        cls = ' class="refuted"' if refuted else ""
        stroke = f'stroke="{REFUTED}" stroke-width="3"' if refuted else 'stroke="#999"'
        body.append(f'<rect{cls} x="{x}" y="{top}" width="{size}" height="{size}" '
                    f'fill="{heat(v / peak if peak else 0)}" {stroke}>'
                    f"<title>{label} {i}: {v}</title></rect>")
        body.append(_t(x + size / 2, top + 15, str(v), 9, "middle"))
        if i % 4 == 0:
            body.append(_t(x + 2, top + size + 11, str(i), 8))
    body.append(_t(left, top + size + 22, f"{label} →", 9))
    return svg(kind, left + len(values) * size + 8, top + size + 28, body, title)


@dataclass(frozen=True)
class Step:
    """One step of a trace: who moved, what it did, the source line."""

    index: int
    lanes: tuple[str, ...]
    action: str
    line: int | None


def text_width(text: str, size: float) -> float:
    """A generous estimate of `text`'s width in sans-serif at `size` px (no font metrics
    offline): what the drawings size their columns and margins by, so no label is cut."""
    return len(text) * size * 0.62


def _label(x: float, y: float, text: str, size: int, limit: int, cls: str = "") -> str:
    """`text` at (x, y); past `limit` characters shortened with "…", the whole of it in a
    tooltip (<title>)."""
    if len(text) <= limit:
        return _t(x, y, text, size, cls=cls)
    c = f' class="{cls}"' if cls else ""
    return (f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size}"{c}><title>{escape(text)}</title>'
            f"{escape(text[:limit - 1])}…</text>")


STEP_FONT, LANE_FONT, NOTE_FONT = 7, 10, 9
NOTE_LIMIT = 90  # characters of a lane's offending state beside the ✗ (all of it as tooltip)


def step_label(action: str) -> str:
    """What a step's box says: the operation, whole (`arrive`, `tma_load`, `fence_init`,
    `sync`, `load lands`); the rest of the step is its tooltip."""
    words = action.split()
    if not words:
        return ""
    if words[:2] == ["all", "threads"]:  # "all threads meet at sync"
        return words[-1]
    if words[0] == "TMA" and len(words) > 1:  # the copy engine: "TMA load lands: ..."
        return words[1] + (" lands" if "lands:" in words else
                           " done" if "finishes" in words else "")
    return words[0]


def swimlanes(title: str, lanes: Sequence[str], steps: Sequence[Step],
              offending: dict[str, str], barriers: Sequence[str],
              copies: Sequence[tuple[int, int | None, str]],
              barrier_events: Sequence[tuple[int, int, str]] = ()) -> str:
    """Roles (and the copy engine) as horizontal lanes, steps as columns; joint steps span
    their lanes; `copies` are (issue step, completion step or None, label) bars in the copy
    engine lane; the last column holds each lane's offending state in red; below, one row
    per barrier: a tick at each step that operates on it (arrive, wait, init, a copy's
    bytes), then its final phase. Each column is as wide as its step's label and the left
    margin as wide as the longest lane or barrier name, so no label is cut."""
    lane_h, top, min_col = 34, 40, 26
    names = [*lanes, *(b.split(":")[0] for b in barriers)]
    left = max([170.0, *(text_width(n, LANE_FONT) + 12 for n in names)])
    widths = [max(min_col, text_width(step_label(s.action), STEP_FONT) + 8) for s in steps]
    xs = [left]
    for w_ in widths:
        xs.append(xs[-1] + w_)
    end = xs[-1]  # the ✗ column starts here

    def mid(j: int) -> float:  # centre of column j (the ✗ column for j == len(steps))
        return xs[j] + (widths[j] if j < len(steps) else min_col) / 2

    notes = [offending[n] for n in lanes if n in offending]
    notes += [b.split(":", 1)[-1].strip() for b in barriers]
    right = max([250.0, *(text_width(n[:NOTE_LIMIT], NOTE_FONT) + 12 for n in notes)])
    w = end + min_col + 4 + right
    h = top + len(lanes) * lane_h + 18 * len(barriers) + 30
    body = [_t(2, 14, title, 12)]
    for i, name in enumerate(lanes):
        y = top + i * lane_h
        body.append(f'<rect x="0" y="{y}" width="{w:.0f}" height="{lane_h - 2}" '
                    f'fill="{"#f7f7f7" if i % 2 else "#fff"}"/>')
        body.append(_t(4, y + lane_h / 2 + 3, name, LANE_FONT, cls="lane"))
    for j, s in enumerate(steps):
        x, cw = xs[j], widths[j]
        body.append(_t(x + cw / 2, top - 6, str(s.index), 8, "middle"))
        rows = [lanes.index(a) for a in s.lanes if a in lanes]
        if not rows:
            continue
        y0, y1 = top + min(rows) * lane_h + 4, top + (max(rows) + 1) * lane_h - 6
        joint = len(rows) > 1
        fill = "#c7d9f0" if not joint else "#e3d3f2"
        text = f"{s.index}. {s.action}" + (f" (line {s.line})" if s.line else "")
        body.append(f'<rect class="step" x="{x + 2:.1f}" y="{y0}" width="{cw - 4:.1f}" '
                    f'height="{y1 - y0}" rx="3" fill="{fill}" stroke="#6b8cb8">'
                    f"<title>{escape(text)}</title></rect>")
        body.append(f'<text class="step-label" x="{x + cw / 2:.1f}" y="{(y0 + y1) / 2 + 3:.1f}" '
                    f'font-size="{STEP_FONT}" text-anchor="middle"><title>{escape(text)}</title>'
                    f"{escape(step_label(s.action))}</text>")
    if "copy engine" in lanes:
        y = top + lanes.index("copy engine") * lane_h
        for k, (a, b, label) in enumerate(copies):
            x0, x1 = mid(a), mid(b if b is not None else len(steps))
            dash = "" if b is not None else ' stroke-dasharray="4 3"'
            yy = y + 8 + (k % 3) * 7
            body.append(f'<line class="copy" x1="{x0:.1f}" y1="{yy}" x2="{x1:.1f}" y2="{yy}" '
                        f'stroke="#2a7f62" stroke-width="4"{dash}><title>{escape(label)}'
                        f"{'' if b is not None else ' (still in flight)'}</title></line>")
    x = end
    for i, name in enumerate(lanes):
        why = offending.get(name)
        if why is None:
            continue
        y = top + i * lane_h
        body.append(f'<rect class="refuted" x="{x + 2:.1f}" y="{y + 4}" width="{min_col - 4}" '
                    f'height="{lane_h - 10}" fill="{REFUTED}"><title>{escape(why)}</title>'
                    "</rect>")
        body.append(_label(x + min_col + 4, y + lane_h / 2 + 3, why, NOTE_FONT, NOTE_LIMIT,
                           "why"))
    body.append(_t(x + min_col / 2, top - 6, "✗", 10, "middle"))
    yb = top + len(lanes) * lane_h + 14
    for i, b in enumerate(barriers):
        name = b.split(":")[0]
        body.append(_t(4, yb + i * 18, name, NOTE_FONT, cls="barrier"))
        body.append(f'<line x1="{left:.1f}" y1="{yb + i * 18 - 3}" x2="{end:.1f}" '
                    f'y2="{yb + i * 18 - 3}" stroke="#ccc"/>')
        body.append(_label(x + min_col + 4, yb + i * 18, b.split(":", 1)[-1].strip(),
                           NOTE_FONT, NOTE_LIMIT))
    for j, row, op in barrier_events:
        cx, cy = mid(j), yb + row * 18 - 3
        body.append(f'<circle class="phase" cx="{cx:.1f}" cy="{cy}" r="4" fill="#8250df">'
                    f"<title>{escape(op)}</title></circle>")
    return svg("swimlanes", w, h, body, title)
