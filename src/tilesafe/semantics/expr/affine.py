"""IR integer terms and conditions -> ISL piecewise affine functions and sets.

Every index, loop bound and guard the frontend accepts is quasi-affine (Presburger), so it has
an exact ISL form over a named space: parameters are the kernel's size variables, set dims are
the coordinates of one statement instance (block coordinates, thread, enclosing loop
variables). Conditions that are not Presburger (a guard that reads memory, a float compare, a
mutable variable) cannot be expressed exactly; `condition` then returns an over- and an
under-approximation of the set, so a caller can stay sound in both directions: bounds and
"at most once" are proved on the over-approximation, coverage on the under-approximation.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import islpy as isl

from tilesafe.frontend import ir
from tilesafe.frontend.fold import Algebra, fold
from tilesafe.semantics.access.gather_keys import canonical
from tilesafe.semantics.expr import evaluate

SET = isl.dim_type.set
PARAM = isl.dim_type.param


class NotAffine(Exception):
    """The term has no quasi-affine form (reads memory, uses a float or a mutable local)."""

    def __init__(self, reason: str, expr: ir.Expr):
        super().__init__(reason)
        self.reason = reason
        self.expr = expr


@dataclass(frozen=True)
class AffineEnv:
    """What the leaves of a term denote in one ISL set space.

    `space` is a set space (params = sizes); `loops` maps a loop uid to its set dim;
    `blocks` are the dims of block.x/y/z (as many as the grid has); `lets` maps the uid of an
    immutable `let` to its bound term, substituted where it is used.
    """

    space: isl.Space
    loops: Mapping[int, int] = field(default_factory=dict)
    blocks: tuple[int, ...] = ()
    thread: int | None = None
    lets: Mapping[int, ir.Expr] = field(default_factory=dict)
    # A read of an index tensor (semantics/gather_keys.canonical) -> the set dim holding the
    # value read: a gathered value is an unknown of the space (semantics/access/gather.py)
    gathers: Mapping[ir.Load, int] = field(default_factory=dict)

    @property
    def ctx(self) -> isl.Context:
        return self.space.get_ctx()

    def local_space(self) -> isl.LocalSpace:
        return isl.LocalSpace.from_space(self.space)

    def universe(self) -> isl.Set:
        return isl.Set.universe(self.space)

    def empty(self) -> isl.Set:
        return isl.Set.empty(self.space)


def make_space(ctx: isl.Context, params: tuple[str, ...], dims: tuple[str, ...],
               name: str | None = None) -> isl.Space:
    """A set space with named params and dims (and an optional tuple name)."""
    space = isl.Space.create_from_names(ctx, set=list(dims), params=list(params))
    return space.set_tuple_name(SET, name) if name else space


def val(ctx: isl.Context, value: int) -> isl.Val:
    return isl.Val.read_from_str(ctx, str(value))


def bounds(pa: isl.PwAff) -> tuple[isl.Val, isl.Val]:
    """(min, max) of an integer term over its domain. Under an equation among the sizes
    (`TK == 2 * T`) ISL may write an integer term with a rational coefficient (TK/2) and
    then refuses min_val/max_val; the term is integral where it is defined, so its floor is
    the same function and has them."""
    pa = pa.floor()
    return pa.min_val(), pa.max_val()


def constant(env: AffineEnv, value: int) -> isl.PwAff:
    aff = isl.Aff.zero_on_domain(env.local_space()).set_constant_val(val(env.ctx, value))
    return isl.PwAff.from_aff(aff)


def dim(env: AffineEnv, pos: int) -> isl.PwAff:
    return isl.PwAff.var_on_domain(env.local_space(), SET, pos)


def param(env: AffineEnv, name: str, expr: ir.Expr) -> isl.PwAff:
    pos = env.space.find_dim_by_name(PARAM, name)
    if pos < 0:
        raise NotAffine(f"size '{name}' is not a parameter of this space", expr)
    return isl.PwAff.var_on_domain(env.local_space(), PARAM, pos)


def term(expr: ir.Expr, env: AffineEnv) -> isl.PwAff:
    """The exact ISL form of a quasi-affine integer term, or NotAffine."""
    if expr.type is not ir.ScalarType.INT:
        raise NotAffine(f"a {expr.type.value} value is not an integer term", expr)
    return fold(expr, IslTerms(env))


class IslTerms(Algebra[isl.PwAff]):
    """Integer IR terms as ISL piecewise quasi-affine functions over an AffineEnv's space:
    + - by anything, * when one side is constant, floor / and % by positive constants (ISL's
    floor and mod are the language's), min, max, abs."""

    def __init__(self, env: AffineEnv) -> None:
        self.env = env

    def leaf(self, e: ir.Expr) -> isl.PwAff:
        env = self.env
        if e.type is not ir.ScalarType.INT:
            raise NotAffine(f"a {e.type.value} value is not an integer term", e)
        if isinstance(e, ir.IntConst):
            return constant(env, e.value)
        if isinstance(e, ir.SizeVar):
            return param(env, e.name, e)
        if isinstance(e, ir.LoopVar):
            if e.uid not in env.loops:
                raise NotAffine(f"loop variable '{e.name}' is not in scope", e)
            return dim(env, env.loops[e.uid])
        if isinstance(e, ir.Builtin):
            return _builtin(e, env)
        if isinstance(e, ir.LocalRef):
            if e.mutable:
                raise NotAffine(f"'{e.name}' is a mutable variable", e)
            if e.uid not in env.lets:
                raise NotAffine(f"'{e.name}' is not bound to an integer term", e)
            return fold(env.lets[e.uid], self)
        if isinstance(e, ir.Load):
            if env.gathers:
                pos = env.gathers.get(canonical(e, env.lets))
                if pos is not None:
                    return dim(env, pos)
            raise NotAffine(f"it reads memory ('{e.tensor}[...]')", e)
        raise NotAffine(f"'{type(e).__name__}' is not a quasi-affine term", e)

    def op(self, name: str, e: ir.Expr, args: list[isl.PwAff]) -> isl.PwAff:
        impl = self.OPS.get(name)
        if impl is not None:
            return impl(self, e, *args)
        if e.type is not ir.ScalarType.INT:
            raise NotAffine(f"a {e.type.value} value is not an integer term", e)
        if isinstance(e, ir.BinOp):
            raise NotAffine(f"operator '{e.op}' does not give an integer term", e)
        raise NotAffine(f"'{type(e).__name__}' is not a quasi-affine term", e)

    def to_float(self, x: isl.PwAff, e: ir.Expr) -> isl.PwAff:
        raise NotAffine("a float value is not an integer term", e)

    def _mul(self, e: ir.Expr, a: isl.PwAff, b: isl.PwAff) -> isl.PwAff:
        assert isinstance(e, ir.BinOp)
        if isinstance(e.rhs, ir.IntConst):
            return a.scale_val(val(self.env.ctx, e.rhs.value))
        if isinstance(e.lhs, ir.IntConst):
            return b.scale_val(val(self.env.ctx, e.lhs.value))
        if a.is_cst() or b.is_cst():
            return a.mul(b)
        raise NotAffine("a product of two non-constant terms", e)

    def _divmod(self, e: ir.Expr, a: isl.PwAff, b: isl.PwAff) -> isl.PwAff:
        assert isinstance(e, ir.BinOp)
        if not isinstance(e.rhs, ir.IntConst) or e.rhs.value <= 0:
            raise NotAffine(f"'{e.op}' by something other than a positive constant", e)
        d = val(self.env.ctx, e.rhs.value)
        return a.scale_down_val(d).floor() if e.op == "/" else a.mod_val(d)

    OPS = {
        "int.add": lambda s, e, a, b: a.add(b),
        "int.sub": lambda s, e, a, b: a.sub(b),
        "int.neg": lambda s, e, a: a.neg(),
        "int.mul": _mul,
        "int.div": _divmod,
        "int.mod": _divmod,
        "int.min": lambda s, e, a, b: a.min(b),
        "int.max": lambda s, e, a, b: a.max(b),
        "int.abs": lambda s, e, a: a.max(a.neg()),
    }


def _builtin(expr: ir.Builtin, env: AffineEnv) -> isl.PwAff:
    kind = expr.kind
    if kind in (ir.BuiltinKind.BLOCK_X, ir.BuiltinKind.BLOCK_Y, ir.BuiltinKind.BLOCK_Z):
        axis = "xyz".index(kind.value[-1])
        if axis >= len(env.blocks):
            raise NotAffine(f"{kind.value} is not a coordinate of this grid", expr)
        return dim(env, env.blocks[axis])
    if env.thread is None:
        raise NotAffine(f"'{kind.value}' used outside a thread context", expr)
    thread = dim(env, env.thread)
    if kind is ir.BuiltinKind.THREAD:
        return thread
    if kind is ir.BuiltinKind.LANE:
        return thread.mod_val(val(env.ctx, 32))
    return thread.scale_down_val(val(env.ctx, 32)).floor()  # warp_id


# ---- conditions ---------------------------------------------------------------------------

_COMPARE = {"==": "eq_set", "!=": "ne_set", "<": "lt_set", "<=": "le_set", ">": "gt_set",
            ">=": "ge_set"}


@dataclass(frozen=True)
class CondSets:
    """A condition as two sets: `under` <= true set <= `over` (equal when nothing was
    dropped). `dropped` names the atoms that had no Presburger form."""

    over: isl.Set
    under: isl.Set
    dropped: tuple[str, ...] = ()

    @property
    def exact(self) -> bool:
        return not self.dropped

    def __and__(self, other: CondSets) -> CondSets:
        return CondSets(self.over.intersect(other.over), self.under.intersect(other.under),
                        self.dropped + other.dropped)

    def __or__(self, other: CondSets) -> CondSets:
        return CondSets(self.over.union(other.over), self.under.union(other.under),
                        self.dropped + other.dropped)

    def negate(self) -> CondSets:
        universe = isl.Set.universe(self.over.get_space())
        return CondSets(universe.subtract(self.under), universe.subtract(self.over),
                        self.dropped)


def exact_set(s: isl.Set) -> CondSets:
    return CondSets(s, s)


def condition(expr: ir.Expr, env: AffineEnv) -> CondSets:
    """A BOOL expression as (over, under) sets; non-Presburger atoms are dropped (over:
    true, under: false) and named in `dropped`."""
    if isinstance(expr, ir.BinOp) and expr.op in ("&&", "||"):
        lhs, rhs = condition(expr.lhs, env), condition(expr.rhs, env)
        return lhs & rhs if expr.op == "&&" else lhs | rhs
    if isinstance(expr, ir.UnOp) and expr.op == "!":
        return condition(expr.operand, env).negate()
    if isinstance(expr, ir.BinOp) and expr.op in _COMPARE:
        try:
            lhs, rhs = term(expr.lhs, env), term(expr.rhs, env)
        except NotAffine as why:
            return _dropped(expr, env, why.reason)
        return exact_set(getattr(lhs, _COMPARE[expr.op])(rhs))
    return _dropped(expr, env, "not a comparison of integer terms")


def _dropped(expr: ir.Expr, env: AffineEnv, reason: str) -> CondSets:
    where = f"{expr.span.line}:{expr.span.col}"
    return CondSets(env.universe(), env.empty(), (f"guard at {where}: {reason}",))


# ---- concrete evaluation (counterexample reporting) ---------------------------------------


def eval_sizes(expr: ir.Expr, sizes: Mapping[str, int]) -> int:
    """Value of an integer term over sizes only (shapes, grid) at concrete sizes."""
    try:
        return evaluate.eval_sizes(expr, sizes)
    except (evaluate.NoValue, evaluate.EvalError):
        raise NotAffine("not a size expression", expr) from None
