"""TS720, the module interface: entry name, target, parameters, `.reqntid` and the shared
array are what the IR needs, and no register is read before it is written.

Why separate: every other obligation assumes this one (the thread range of `.reqntid`, the
`s_`/`p_`/`tm_` parameters that stand for sizes, tensors and tensor maps); it reads only the
module's declarations, never the solver.
"""

from __future__ import annotations

from tilesafe.checkers.obligation import Verdict
from tilesafe.codegen.validate.context import Context
from tilesafe.codegen.validate.reporting import STRUCTURE


def check_interface(cx: Context) -> None:
    mod, k = cx.mod, cx.kernel
    problems = []
    if mod.entry != k.name:
        problems.append(f"entry is '{mod.entry}', the kernel is '{k.name}'")
    if mod.target is None or "sm_90a" not in mod.target:
        problems.append(f"target is {mod.target}, expected sm_90a")
    if mod.address_size != 64:
        problems.append(f".address_size is {mod.address_size}, expected 64")
    want: dict[str, tuple[str, int | None, int | None]] = {}
    for t in k.params:
        want[f"p_{t.name}"] = ("u64", None, None)
    for s in k.sizes:
        want[f"s_{s}"] = ("s64", None, None)
    for tm in k.tensormaps:
        want[f"tm_{tm.name}"] = ("b8", 64, 128)
    have = {p.name: (p.type, p.align, p.array) for p in mod.params}
    for name, sig in want.items():
        if name not in have:
            problems.append(f"parameter {name} is missing")
        elif have[name] != sig:
            problems.append(f"parameter {name} is {have[name]}, expected {sig}")
    for name in have:
        if name not in want:
            problems.append(f"unexpected parameter {name}")
    if mod.reqntid is None or mod.reqntid[0] != k.block or any(d != 1 for d in
                                                                mod.reqntid[1:]):
        problems.append(f".reqntid is {mod.reqntid}, expected ({k.block}, 1, 1): the "
                        "thread range every proof assumes")
    shared = [d for d in mod.shared_decls if d[0] == "tsmem"]
    if len(mod.shared_decls) != 1 or not shared or not shared[0][3] \
            or (shared[0][1] or 0) < 16:
        problems.append(f"expected exactly '.extern .shared .align 16 .b8 tsmem[]', found "
                        f"{mod.shared_decls}")
    for ins, reg in cx.res.undefined:
        problems.append(f"line {ins.line}: {reg} is read before it is written")
    if problems:
        cx.rep.ob("module interface", Verdict.REFUTED, STRUCTURE, "; ".join(problems),
                  k.span, {"problems": problems}, method="structural")
    else:
        cx.rep.ob("module interface", Verdict.PROVED, STRUCTURE,
                  "entry, parameters, .reqntid and the shared array as the IR needs",
                  k.span, method="structural")
