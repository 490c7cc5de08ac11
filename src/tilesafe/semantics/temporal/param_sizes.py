"""Size assignments the explorations run at: allowed by `where`, small where possible (for
readable counterexamples), with a given trip count, and the least and largest trip count.

Why its own module: every exploration of the argument for every trip count -- the smallest
trip counts, the far system, one member of each residue class -- starts from a size
assignment z3 finds here, and so do the nested argument's representatives
(nest_argument.py). One solver with the `where` clause asserted is kept and pushed per
question.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import z3

from tilesafe.frontend import ir
from tilesafe.semantics.temporal.events import Model, compile_expr
from tilesafe.semantics.temporal.param_smt import Enc, Timeout, solver


class SizeSearch:
    """Allowed size assignments of one model; `ms()` is the time a query may take."""

    def __init__(self, model: Model, ms: Callable[[], int]) -> None:
        self.model = model
        self.k = model.kernel
        self.ms = ms
        self._base: z3.Solver | None = None
        self._enc0: Enc | None = None
        self._trips: dict[int, dict[str, int] | None] = {}

    def some(self, extra: list, small: bool = True) -> dict[str, int] | None:
        """A size assignment satisfying `where` and `extra`; with `small`, one whose sizes
        are small (for readable counterexamples): bounds on |size| doubled until sat."""
        if self._base is None:
            self._enc0 = Enc(self.k, self.model, "", {})
            self._base = solver(self.ms())
            self._base.add(*self._enc0.where())
        enc, s = self._enc0, self._base
        assert enc is not None
        s.push()
        try:
            for c in extra:
                s.add(c(enc))
            if not small or not enc.sizes:
                res = s.check()
                if res == z3.unknown:
                    raise Timeout("size search")
                return self.model_sizes(s, enc) if res == z3.sat else None
            bound = 256
            while bound <= (1 << 44):
                s.push()
                s.add(*[z3.And(v <= bound, v >= -bound) for v in enc.sizes.values()])
                res = s.check()
                if res == z3.sat:
                    out = self.model_sizes(s, enc)
                    s.pop()
                    return out
                s.pop()
                bound *= 16
            res = s.check()
            if res == z3.unknown:
                raise Timeout("size search")
            return self.model_sizes(s, enc) if res == z3.sat else None
        finally:
            s.pop()

    @staticmethod
    def model_sizes(s: z3.Solver, enc: Enc) -> dict[str, int]:
        mdl = s.model()
        return {n: mdl.eval(v, model_completion=True).as_long() for n, v in enc.sizes.items()}

    def for_trip(self, t_expr: ir.Expr, trip: int) -> dict[str, int] | None:
        """An allowed size assignment whose trip count T is `trip` (memoised)."""
        if trip not in self._trips:
            self._trips[trip] = self.some([lambda enc: enc.term(t_expr) == trip])
        return self._trips[trip]

    def eval_t(self, t_expr: ir.Expr, sizes: Mapping[str, int]) -> int:
        return int(compile_expr(t_expr, self.model.lets)(sizes))

    def min_trip(self, t_expr: ir.Expr) -> int | None:
        enc = Enc(self.k, self.model, "", {})
        s = z3.Optimize()
        s.set("timeout", self.ms())
        s.add(*enc.where())
        t = enc.term(t_expr)
        s.add(t >= -(1 << 20))
        h = s.minimize(t)
        res = s.check()
        if res == z3.unknown:
            raise Timeout("smallest trip count")
        if res != z3.sat:
            return None
        return s.lower(h).as_long()

    def max_trip(self, t_expr: ir.Expr) -> int | None:
        """The largest allowed trip count, or None when it is unbounded (above 2**40)."""
        enc = Enc(self.k, self.model, "", {})
        s = z3.Optimize()
        s.set("timeout", self.ms())
        s.add(*enc.where())
        t = enc.term(t_expr)
        s.add(t <= (1 << 40))
        h = s.maximize(t)
        if s.check() != z3.sat:
            return None
        value = s.upper(h).as_long()
        return None if value >= (1 << 40) else value
