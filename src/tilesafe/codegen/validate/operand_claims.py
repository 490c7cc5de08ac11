"""The claim "this PTX instruction's operands equal its IR statement's", per statement kind:
addresses of loads and stores (TS721), mbarrier operands (TS724), TMA operands (TS725),
barrier ids, counts and warp masks (TS729).

Why separate: this is the one place that knows how each kind's operands correspond
(a global address as a base plus an offset compared through lift.py's integer view, an
mbarrier array's init against every element, `bar.sync` without a count as the whole
block); instance_checks.py only asks the prover whether the claim holds.
"""

from __future__ import annotations

from tilesafe.codegen.validate import lift, narrow, nia
from tilesafe.codegen.validate import terms as T
from tilesafe.codegen.validate.context import Context
from tilesafe.codegen.validate.spec import SpecEvent
from tilesafe.codegen.validate.symexec import Event
from tilesafe.codegen.validate.symexec_memory import MAPA
from tilesafe.codegen.validate.terms import Term

# A no-overflow question the integer solver has not settled by then is left to the
# bit-vector encoding (they take milliseconds when they hold).
NIA_MS = 2000


class OperandClaims:
    """`operands(e, ev, hyps)`: the claim and the terms its counterexample shows."""

    def __init__(self, cx: Context) -> None:
        self.k = cx.kernel
        self.p = cx.p
        self.budget = cx.budget

    def operands(self, e: SpecEvent, ev: Event, hyps: list[Term]
                 ) -> tuple[Term, dict[str, Term]]:
        """The claim 'the PTX operands equal the IR's' where `hyps` hold, and the terms a
        counterexample shows."""
        parts: list[Term] = []
        shown: dict[str, Term] = {}

        def same(label: str, ptx: Term, want: Term, signed: bool = False,
                 modulo: int | None = None) -> None:
            got = T.sint(self.p(ptx)) if signed else T.uint(self.p(ptx))
            target = T.ifmod(want, T.const_int(modulo)) if modulo else want
            parts.append(T.eq(got, target))
            shown[f"PTX {label}"] = got
            shown[f"IR {label}"] = target

        def mapped(label: str, ptx: Term, want: Term) -> None:
            """A peer CTA's address: the PTX operand must be `mapa` of the IR's address in
            the executing CTA and of the IR's CTA rank (every CTA places its buffers at the
            same offsets, so that is the peer's element)."""
            got = self.p(ptx)
            if got.op != "uf" or got.val != MAPA:
                parts.append(T.FALSE)
                shown[f"PTX {label}"] = T.uint(got)
                return
            same(f"{label} (in the executing CTA)", got.args[0], want)
            same("CTA rank", got.args[1], e.ops["cta"])  # type: ignore[arg-type]

        k = e.kind
        if k in ("ld", "st") and e.ops["space"] == "global":
            self._global_address(e, ev, hyps, parts, shown)
        elif k in ("ld", "st") and "cta" in e.ops:
            mapped("address", ev.ops["addr"], e.ops["addr"])  # type: ignore[arg-type]
        elif k == "mbar.arrive" and "cta" in e.ops:
            mapped("address", ev.ops["addr"], e.ops["addr"])  # type: ignore[arg-type]
            if "tx" in e.ops and "tx" in ev.ops:
                same("tx bytes", ev.ops["tx"], e.ops["tx"])  # type: ignore[arg-type]
        elif k in ("ld", "st"):
            same("address", ev.ops["addr"], e.ops["addr"])  # type: ignore[arg-type]
        elif k == "mbar.init":
            elem = e.ops.get("elem")
            if isinstance(elem, Term):
                bar = self.k.barrier(e.node.barrier.name)  # type: ignore[attr-defined]
                got = T.uint(self.p(ev.ops["addr"]))  # type: ignore[arg-type]
                alts = []
                for i in range(bar.instances):
                    want = T.substitute([e.ops["addr"]], {id(elem): T.bv(i, 32)})[0]
                    alts.append(T.eq(got, want))  # type: ignore[arg-type]
                parts.append(T.or_(*alts))
                shown["PTX address"] = got
            else:
                same("address", ev.ops["addr"], e.ops["addr"])  # type: ignore[arg-type]
            same("count", ev.ops["count"], T.const_int(e.ops["count"]))  # type: ignore
        elif k in ("mbar.arrive", "mbar.expect_tx"):
            same("address", ev.ops["addr"], e.ops["addr"])  # type: ignore[arg-type]
            if "tx" in e.ops and "tx" in ev.ops:
                same("tx bytes", ev.ops["tx"], e.ops["tx"])  # type: ignore[arg-type]
        elif k == "mbar.wait":
            same("address", ev.ops["addr"], e.ops["addr"])  # type: ignore[arg-type]
            same("parity", ev.ops["parity"], e.ops["parity"])  # type: ignore[arg-type]
        elif k in ("tma.load", "tma.store"):
            same("shared address", ev.ops["smem"], e.ops["smem"])  # type: ignore[arg-type]
            tm = T.leaf(f"tmap:{e.ops['tmap']}", 64)
            parts.append(T.eq(self.p(ev.ops["tmap"]), tm))  # type: ignore[arg-type]
            shown["PTX tensor map"] = T.uint(self.p(ev.ops["tmap"]))  # type: ignore
            shown[f"IR tensor map (generic address of {e.ops['tmap']})"] = T.uint(tm)
            pc, sc = ev.ops["coords"], e.ops["coords"]
            for i, (a, b) in enumerate(zip(pc, sc, strict=True)):  # type: ignore[arg-type]
                same(f"coordinate {i} (innermost first)", a, b, signed=True)
            if k == "tma.load":
                same("mbarrier", ev.ops["bar"], e.ops["bar"])  # type: ignore[arg-type]
            if "mask" in e.ops and "mask" in ev.ops:
                same("multicast CTA mask", ev.ops["mask"], e.ops["mask"])  # type: ignore
        elif k == "converge":
            same("lane mask", ev.ops["mask"], e.ops["mask"])  # type: ignore[arg-type]
        elif k == "wgmma":
            self._mma(e, ev, same, parts, shown)
        elif k == "setmaxnreg":
            for label in ("inc", "count"):
                got, want = int(ev.ops[label]), int(e.ops[label])  # type: ignore[call-overload]
                parts.append(T.boolean(got == want))
                shown[f"PTX {label}"] = T.const_int(got)
                shown[f"IR {label}"] = T.const_int(want)
        elif k in ("bar.sync", "bar.arrive"):
            # `sync` is bar.sync 0 over the block; a named barrier names its id and count.
            want_id = e.ops.get("id", 0)
            same("barrier id", ev.ops["id"], T.const_int(want_id))  # type: ignore[arg-type]
            want = e.ops.get("count")
            if "count" in ev.ops or want is not None:
                if "count" not in ev.ops:
                    parts.append(T.FALSE)  # bar.sync without a count: the whole block
                    shown["IR thread count"] = T.const_int(want)
                else:
                    same("thread count", ev.ops["count"],  # type: ignore[arg-type]
                         T.const_int(self.k.block if want is None else want))
        return T.and_(*parts), shown

    @staticmethod
    def undecidable(e: SpecEvent) -> str | None:
        """Why the claim cannot be stated (a wgmma operand without a descriptor)."""
        if e.kind != "wgmma":
            return None
        for which in ("a", "b"):
            if e.ops[f"desc_{which}"] is None:
                return (f"no matrix descriptor reads operand {which.upper()} as the layout "
                        f"places it (TS530): {e.ops[f'why_{which}'] or 'not decided'}")
        return None

    def _mma(self, e: SpecEvent, ev: Event, same, parts: list[Term],
             shown: dict[str, Term]) -> None:
        """Descriptors (the value semantics/wgmma_desc encodes for the IR's tile), the
        scale-d predicate, and the immediates: scale-a/b 1 and the transpose flags of the
        descriptors' majors (16-bit inputs; tf32 has no transpose flags, u8 no
        immediates)."""
        for which in ("a", "b"):
            same(f"descriptor {which.upper()}", ev.ops[f"desc_{which}"], e.ops[f"desc_{which}"])
        scale = self.p(ev.ops["scale"])  # type: ignore[arg-type]
        parts.append(T.eq(scale, e.ops["scale"]))  # type: ignore[arg-type]
        shown["PTX scale-d"] = T.ite(scale, T.const_int(1), T.const_int(0))
        shown["IR scale-d"] = T.ite(e.ops["scale"], T.const_int(1), T.const_int(0))  # type: ignore
        names = ("imm-scale-a", "imm-scale-b", "imm-trans-a", "imm-trans-b")
        want = {"bf16": (1, 1, e.ops["trans_a"], e.ops["trans_b"]), "f16": (
            1, 1, e.ops["trans_a"], e.ops["trans_b"]), "tf32": (1, 1)}.get(str(e.ops["atype"]), ())
        got = tuple(ev.ops["imm"])  # type: ignore[arg-type]
        if len(got) != len(want):
            parts.append(T.FALSE)
            shown["PTX immediates"] = T.const_int(len(got))
            shown["IR immediates"] = T.const_int(len(want))
            return
        for label, g, w in zip(names, got, want, strict=False):
            if g != w:
                parts.append(T.FALSE)
                shown[f"PTX {label}"] = T.const_int(g)
                shown[f"IR {label}"] = T.const_int(int(w))  # type: ignore[arg-type]

    def _global_address(self, e: SpecEvent, ev: Event, hyps: list[Term], parts: list[Term],
                        shown: dict[str, Term]) -> None:
        """base + offset, modulo 2^64: the address register is 64 bits (docs/codegen.md)."""
        base = T.leaf(f"gbase:p_{e.ops['tensor']}", 64)
        off: Term = e.ops["addr"]  # type: ignore[assignment]
        got = self.p(ev.ops["addr"])  # type: ignore[arg-type]
        rest = got.args[1 - got.args.index(base)] if got.op == "add" and base in \
            got.args else None
        lifted = self.integer_view(rest, hyps) if rest is not None else None
        if lifted is not None:
            # got = base + rest with rest = lifted (mod 2^64): compare the offsets as
            # integers modulo 2^64 (lift.py says why this is the same question)
            parts.append(T.eq(T.ifmod(T.isub(lifted, off), T.const_int(2**64)),
                              T.const_int(0)))
        else:
            parts.append(T.eq(got, T.add(base, T.tobv(off, 64))))
        shown["PTX address"] = T.uint(got)
        shown["IR address"] = T.iadd(T.uint(base), off)

    def integer_view(self, t: Term, hyps: list[Term]) -> Term | None:
        """lift.py's integer reading of `t` under the question's hypotheses, or None (the
        caller keeps bit-vectors). Where intervals cannot show it exact, its no-overflow
        conditions are proved first, as their own question in integer arithmetic (nia.py)."""
        bounds = narrow.bounds_from(hyps)
        lifted = lift.modular(t, bounds)
        if lifted is not None:
            return lifted
        lifted, fits = lift.modular_deferred(t, bounds)
        left = self.budget.left_ms()
        if lifted is None or left <= 0:
            return None
        self.budget.queries += 1
        timeout = min(self.budget.per_query_ms, NIA_MS, left)
        return lifted if nia.prove(hyps, fits, bounds, timeout) else None
