"""What a report shows, gathered from the obligation records (and the kernels' IR for the
layout pictures): one KernelView per kernel, in input order."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tilesafe.checkers import followon
from tilesafe.checkers.obligation import Verdict
from tilesafe.frontend import ir
from tilesafe.frontend.diagnostics import Diagnostic
from tilesafe.proofs.report import Entry, exploration_groups, nest
from tilesafe.report import pictures


@dataclass
class Row:
    """One line of the obligations table: an obligation, or the proved properties of one
    temporal exploration (`members` > 1)."""

    anchor: str
    line: int | None
    name: str
    verdict: str
    method: str
    seconds: float
    code: str | None
    severity: str
    message: str
    members: list[str] = field(default_factory=list)
    counterexample: list[tuple[str, str]] = field(default_factory=list)
    pictures: list[str] = field(default_factory=list)
    follows: str | None = None  # a follow-on: the code of the refutation it is shown under


@dataclass
class KernelView:
    path: str
    kernel: str
    source: str
    rows: list[Row]
    layouts: list[str]

    @property
    def counts(self) -> dict[str, int]:
        """Obligations per verdict; follow-ons apart (`follow-ons`): they ride with the
        refutation they are shown under."""
        out = {v.value: 0 for v in Verdict}
        out["follow-ons"] = 0
        for r in self.rows:
            out["follow-ons" if r.follows else r.verdict] += max(1, len(r.members))
        return out


def _kernel_ir(path: str) -> dict[str, ir.Kernel]:
    from tilesafe import api

    try:
        return {k.name: k for k in api.load(path).kernels}
    except Exception:  # noqa: BLE001 - a file that no longer loads: no layout pictures
        return {}


def _source(path: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return ""


def gather(entries: Sequence[Entry], sources: dict[str, str] | None = None
           ) -> list[KernelView]:
    """Group entries by (file, kernel); draw counterexamples and each shared buffer."""
    sources = dict(sources or {})
    views: dict[tuple[str, str], KernelView] = {}
    irs: dict[str, dict[str, ir.Kernel]] = {}
    by_kernel: dict[tuple[str, str], list[Entry]] = {}
    for e in entries:
        by_kernel.setdefault((e.path, e.kernel), []).append(e)
    for (path, name), group in by_kernel.items():
        if path not in irs:
            irs[path] = _kernel_ir(path) if path != "<stdin>" else {}
        kernel = irs[path].get(name)
        rows: list[Row] = []
        for members in exploration_groups(nest(group)):
            proved = [m for m in members if m.obligation.verdict is Verdict.PROVED]
            for m in members:
                if m.obligation.verdict is not Verdict.PROVED or len(proved) == 1:
                    rows.append(_row(m, len(rows) + 1, kernel))
                for f in m.follow_ons:  # under their refutation
                    rows.append(_row(f, len(rows) + 1, kernel, m.obligation.code))
            if len(proved) > 1:
                first = proved[0].obligation
                rows.append(Row(f"{name}-{len(rows) + 1}", first.span.line if first.span
                                else None, f"{len(proved)} temporal properties (one "
                                "exploration)", "proved", first.method, first.seconds, None,
                                "error", "", [_short(m) for m in proved]))
        layouts = []
        if kernel is not None:
            for buf in kernel.shared[:4]:
                pic = pictures.swizzle_picture(buf)
                if pic:
                    layouts.append(pic)
        src = sources.get(path) if path in sources else _source(path)
        views[(path, name)] = KernelView(path, name, src or "", rows, layouts)
    return list(views.values())


def _short(e: Entry) -> str:
    name = e.obligation.name
    return name.split(": ", 1)[1] if name.startswith(e.kernel + ": ") else name


def _row(e: Entry, n: int, kernel: ir.Kernel | None, follows: str | None = None) -> Row:
    o = e.obligation
    cex = pictures.sizes_table(o.counterexample) if o.counterexample else []
    code = followon.own_code(o) if follows else o.code
    return Row(f"{e.kernel}-{n}", o.span.line if o.span else None, _short(e),
               o.verdict.value, o.method, o.seconds, code, o.severity.value, o.message,
               counterexample=cex, pictures=pictures.pictures_for(o, kernel), follows=follows)


def diagnostics_rows(diags: Sequence[Diagnostic]) -> list[tuple[str, int, str, str]]:
    return [(d.span.path, d.span.line, d.code, d.message) for d in diags]
