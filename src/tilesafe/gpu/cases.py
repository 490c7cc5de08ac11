"""Differential-test cases as files: a launch, its inputs, and what the interpreter says.

Why files: the interpreter and the code generator need ISL and z3, which the lent H100 does
not have; the GPU needs the H100. A case is therefore built on the host (tests/gpu/
build_cases.py: compile, bind, draw inputs, interpret) and run where the GPU is, with numpy
and cuda-python only (`python -m tilesafe.gpu.cases run DIR`), comparing bit for bit.

A case is `NAME.json` (the LaunchSpec and what to expect) and `NAME.npz` (`in_T` inputs,
`want_T` expected outputs). Expectation kinds:
  "interp"   bit-exact with the interpreter's tensors (good kernels);
  "observe"  a bad kernel: record what the GPU does (hang, trap, wrong output against the
             interpreter's run when it finished, or nothing visible) and, for a kernel with
             `ensures`, whether its output is what the spec says (`spec_T` arrays: a value
             bug computes the same wrong value on both, so only the spec tells);
  "copy"     dst must equal src bit for bit, checked with numpy, inputs synthesised on the
             GPU machine (sizes far beyond what the interpreter or a case file can hold).
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from tilesafe.codegen.launch_spec import LaunchSpec
from tilesafe.gpu import launcher
from tilesafe.gpu.compare import compare


@dataclass
class Case:
    name: str
    spec: LaunchSpec
    inputs: dict[str, np.ndarray]
    expect: str  # "interp" | "observe" | "copy"
    expected: dict[str, np.ndarray] = field(default_factory=dict)
    meta: dict[str, Any] = field(default_factory=dict)
    spec_expected: dict[str, np.ndarray] = field(default_factory=dict)


@dataclass
class CaseResult:
    name: str
    status: str  # the GPU run's status
    verdict: str  # "bit-exact" | "DIFFERS" | "hang" | "trap" | "error" | bad kernels:
    # "wrong output" | "no visible effect" | "ran" (no reference output to compare with)
    detail: str
    seconds: float
    meta: dict[str, Any]
    expect: str = "interp"
    spec: str = ""  # bad kernels with `ensures`: "holds" or "violated: ..." ("" untested)

    @property
    def passed(self) -> bool:
        """Good kernels must be bit-exact; a bad kernel's run is an observation."""
        return self.verdict == "bit-exact" or self.expect == "observe"


def save_case(folder: Path, case: Case) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{case.name}.json").write_text(json.dumps(
        {"spec": case.spec.to_json(), "expect": case.expect, "meta": case.meta}))
    arrays = {f"in_{k}": v for k, v in case.inputs.items()}
    arrays.update({f"want_{k}": v for k, v in case.expected.items()})
    arrays.update({f"spec_{k}": v for k, v in case.spec_expected.items()})
    np.savez_compressed(folder / f"{case.name}.npz", **arrays)


def load_case(path: Path) -> Case:
    data = json.loads(path.read_text())
    parts: dict[str, dict[str, np.ndarray]] = {"in": {}, "want": {}, "spec": {}}
    npz = path.with_suffix(".npz")
    if npz.exists():
        with np.load(npz) as z:
            for k in z.files:
                kind, name = k.split("_", 1)
                parts[kind][name] = z[k]
    return Case(path.stem, LaunchSpec.from_json(data["spec"]), parts["in"], data["expect"],
                parts["want"], data.get("meta", {}), parts["spec"])


def case_files(folder: Path) -> list[Path]:
    return sorted(folder.glob("*.json"))


def synthesize(spec: LaunchSpec) -> dict[str, np.ndarray]:
    """Inputs made on the GPU machine for "copy" cases: written tensors poisoned with NaN
    bits, the others a cheap finite pattern (every element different modulo 2^14)."""
    out = {}
    for p in spec.params:
        if p["kind"] != "tensor":
            continue
        n = int(np.prod(p["shape"], dtype=np.int64))
        if p["name"] in spec.written:
            bits = np.full(n, 0x7FFF, dtype=np.uint16)
        else:
            bits = (np.arange(n, dtype=np.uint32) * np.uint32(40503) >> np.uint32(9))
            bits = (bits & np.uint32(0x3BFF)).astype(np.uint16)  # finite, |x| < 1
        out[p["name"]] = bits.view(launcher.NUMPY[p["dtype"]]).reshape(p["shape"])
    return out


def run_case(case: Case, *, isolated: bool = False, timeout: float = 60.0,
             device: Any = None, repeat: int = 0) -> CaseResult:
    inputs = case.inputs or synthesize(case.spec)
    start = time.perf_counter()
    if isolated:
        res = launcher.run_isolated(case.spec, inputs, timeout=timeout, repeat=repeat)
    else:
        res = launcher.run(case.spec, inputs, device=device, repeat=repeat)
    seconds = time.perf_counter() - start
    meta = dict(case.meta)
    if res.ms is not None:
        meta["ms"] = res.ms
    if res.status != "ok":
        return CaseResult(case.name, res.status, res.status, res.error, seconds, meta, case.expect)
    if case.expect == "interp":
        bad = compare(case.expected, res.tensors)
        if bad:
            return CaseResult(case.name, "ok", "DIFFERS", "; ".join(m.describe() for m in bad),
                              seconds, meta, case.expect)
        return CaseResult(case.name, "ok", "bit-exact", "", seconds, meta, case.expect)
    if case.expect == "copy":
        src, dst = meta["copy"]
        same = np.array_equal(res.tensors[dst].view(np.uint16), inputs[src].view(np.uint16))
        return CaseResult(case.name, "ok", "bit-exact" if same else "DIFFERS",
                          "" if same else f"{dst} != {src}", seconds, meta, case.expect)
    spec = ""
    if case.spec_expected:
        off = compare(case.spec_expected, res.tensors)
        spec = ("violated: " + off[0].describe()) if off else "holds"
    if not case.expected:
        return CaseResult(case.name, "ok", "ran", "the interpreter stopped with "
                          f"{meta.get('interp', 'an error')}", seconds, meta, case.expect,
                          spec)
    bad = compare(case.expected, res.tensors)
    verdict = "wrong output" if bad else "no visible effect"
    return CaseResult(case.name, "ok", verdict, "; ".join(m.describe() for m in bad[:2]),
                      seconds, meta, case.expect, spec)


def run_folder(folder: Path, *, isolated: bool = False, timeout: float = 60.0,
               only: str = "") -> list[CaseResult]:
    """Run every case of a folder (in this process unless `isolated`)."""
    from tilesafe.gpu import driver

    dev = None if isolated else driver.Device()
    out = []
    try:
        for path in case_files(folder):
            if only and only not in path.stem:
                continue
            case = load_case(path)
            out.append(run_case(case, isolated=isolated, timeout=timeout, device=dev))
    finally:
        if dev is not None:
            dev.close()
    return out


def table(results: list[CaseResult]) -> str:
    lines = [f"{'case':44} {'verdict':10} {'s':>6}  detail"]
    for r in results:
        spec = f"  [spec {r.spec[:90]}]" if r.spec else ""
        lines.append(f"{r.name:44} {r.verdict:10} {r.seconds:6.2f}  {r.detail[:110]}{spec}")
    exact = sum(r.verdict == "bit-exact" for r in results)
    observed = sum(r.expect == "observe" for r in results)
    if observed:  # bad kernels: their runs are observations, not passes
        lines.append(f"{observed} bad-kernel runs observed; {exact} of all "
                     f"{len(results)} came out bit-exact")
    else:
        lines.append(f"{exact}/{len(results)} bit-exact")
    return "\n".join(lines)


def _main(argv: list[str]) -> int:
    import argparse

    p = argparse.ArgumentParser(prog="python -m tilesafe.gpu.cases")
    p.add_argument("command", choices=("run",))
    p.add_argument("folder")
    p.add_argument("--isolated", action="store_true", help="each case in a child process")
    p.add_argument("--timeout", type=float, default=60.0)
    p.add_argument("--only", default="")
    p.add_argument("--json", metavar="FILE", help="write the results here")
    a = p.parse_args(argv)
    results = run_folder(Path(a.folder), isolated=a.isolated, timeout=a.timeout, only=a.only)
    if a.json:
        Path(a.json).write_text(json.dumps([r.__dict__ for r in results], indent=1,
                                           default=str))
    print(table(results))
    return 0 if all(r.passed for r in results) else 1


def expected_from(tensors: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    return {k: np.asarray(v) for k, v in tensors.items()}


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
