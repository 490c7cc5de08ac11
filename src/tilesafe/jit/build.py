"""One kernel (the general one or a variant) through the gate: verify, generate PTX, validate
the translation -- or the same result read back from the compile cache.

Why the gate is the CLI's: `tilesafe compile` refuses a kernel with an error obligation
not proved and withholds PTX the translation validator did not prove; a jit kernel is the
same artefact, so it is refused the same way (JitError TS909). `unverified=True` is
`--unverified`: the code is built anyway, the PTX carries the banner, and every JitKernel
built from it says so with a JitWarning and `verified = False` -- never silently.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tilesafe.frontend import ir
from tilesafe.frontend.diagnostics import Diagnostic, DiagnosticError
from tilesafe.jit.cache import CacheKey, CompileCache
from tilesafe.jit.contract import GATE, JitError


@dataclass(frozen=True)
class ProofSummary:
    """What verification and translation validation said, as the cache keeps it.

    `failing`: the error obligations not proved (`code name: verdict`), `untranslated`:
    the translation obligations not proved; `counts`: verdict -> obligations."""

    counts: Mapping[str, int]
    failing: tuple[str, ...]
    untranslated: tuple[str, ...]
    obligations: int
    seconds: float

    @property
    def verified(self) -> bool:
        return not self.failing and not self.untranslated

    def record(self) -> dict[str, Any]:
        return {"counts": dict(self.counts), "failing": list(self.failing),
                "untranslated": list(self.untranslated), "obligations": self.obligations,
                "seconds": round(self.seconds, 3)}

    @staticmethod
    def from_record(d: Mapping[str, Any]) -> ProofSummary:
        return ProofSummary(dict(d["counts"]), tuple(d["failing"]), tuple(d["untranslated"]),
                            int(d["obligations"]), float(d["seconds"]))

    def describe(self) -> str:
        parts = [f"{n} {v}" for v, n in sorted(self.counts.items())]
        return f"{self.obligations} obligations ({', '.join(parts) or 'none'})"


@dataclass(frozen=True)
class Build:
    """A kernel's PTX and launch signature (None when refused) with its proof summary;
    `origin` is "cache" or "built", `rejected` why a cached entry was not trusted."""

    kernel: ir.Kernel
    compiled: Any  # codegen.plan.CompiledKernel | None
    proof: ProofSummary
    origin: str
    rejected: str = ""


def _line(o: Any) -> str:
    return f"{o.code or '-'} {o.name}: {o.verdict.value}"


def compile_payload(kernel: ir.Kernel, path: str, unverified: bool, options: Any
                    ) -> dict[str, Any]:
    """Verify, generate and validate one kernel (the expensive part), as a cache payload."""
    from tilesafe import api

    start = time.monotonic()
    res = api.compile_kernel(ir.Program(path, (kernel,)), kernel.name, unverified=unverified,
                             options=options, validate=True)
    counts: dict[str, int] = {}
    for o in res.obligations + res.validation:
        counts[o.verdict.value] = counts.get(o.verdict.value, 0) + 1
    proof = ProofSummary(counts, tuple(_line(o) for o in res.failing),
                         tuple(_line(o) for o in res.validation if o.failed),
                         len(res.obligations) + len(res.validation), time.monotonic() - start)
    compiled = None
    if res.compiled is not None and (proof.verified or unverified):
        c = res.compiled
        compiled = {"name": c.name, "ptx": c.ptx, "block": c.block, "smem_bytes": c.smem_bytes,
                    "params": [[p.name, p.kind.value, p.source] for p in c.params]}
    return {"compiled": compiled, "proof": proof.record()}


def _compiled(record: Mapping[str, Any] | None) -> Any:
    if record is None:
        return None
    from tilesafe.codegen import lir
    from tilesafe.codegen.plan import CompiledKernel

    params = tuple(lir.KernelParam(n, lir.ParamKind(k), s) for n, k, s in record["params"])
    return CompiledKernel(record["name"], record["ptx"], params, int(record["block"]),
                          int(record["smem_bytes"]))


def build(kernel: ir.Kernel, path: str, key: CacheKey, cache: CompileCache | None,
          unverified: bool, options: Any) -> Build:
    """The cached build when one can be trusted, else a fresh one (stored). Raises JitError
    TS909 when the gate refuses (and `unverified` is off), DiagnosticError (TS7xx) when no
    exact code exists."""
    lookup = cache.load(key) if cache is not None else None
    origin, rejected = "cache", ""
    payload = lookup.payload if lookup is not None else None
    if lookup is not None:
        rejected = lookup.rejected
    if payload is None:
        origin = "built"
        try:
            payload = compile_payload(kernel, path, unverified, options)
        except DiagnosticError as err:
            raise JitError(list(err.diagnostics)) from None
        if cache is not None:
            cache.store(key, payload)
    proof = ProofSummary.from_record(payload["proof"])
    result = Build(kernel, _compiled(payload["compiled"]), proof, origin, rejected)
    if result.compiled is None:
        raise JitError([refusal(kernel, proof)])
    return result


def refusal(kernel: ir.Kernel, proof: ProofSummary) -> Diagnostic:
    what = list(proof.failing) + [f"translation {t}" for t in proof.untranslated]
    shown = "; ".join(what[:6]) + (f"; and {len(what) - 6} more" if len(what) > 6 else "")
    return Diagnostic(GATE, f"kernel '{kernel.name}' is not proved ({shown}); refusing to run "
                      "it -- pass unverified=True to run it anyway", kernel.span,
                      hint="`tilesafe verify` shows every obligation with its counterexample")
