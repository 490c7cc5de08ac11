"""F2 linear layouts (Triton's "Linear Layouts", arXiv 2505.23819).

Every named input dimension has a power-of-two size 2**k and one basis vector per input
bit; a basis vector holds one int per named output dimension (each also of power-of-two
size). The layout maps an input to the XOR of the basis vectors of its set bits, i.e. it
is a matrix over GF(2) acting on the concatenated bit vectors. Flattening puts the first
dimension in the least significant bits (as Triton's LinearLayout does).

The semantics follow triton-lang/triton lib/Tools/LinearLayout.cpp; the elimination code is
our own small GF(2) solver.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

Basis = tuple[int, ...]


def _log2_exact(n: int, what: str) -> int:
    if n < 1 or n & (n - 1):
        raise ValueError(f"{what} must be a power of two, got {n}")
    return n.bit_length() - 1


@dataclass(frozen=True)
class _Pivots:
    """Echelon form of a set of F2 vectors, keyed by leading bit, with the input combination
    (a bit mask over the original vectors) that produces each pivot."""

    rows: tuple[tuple[int, int, int], ...]  # (leading bit, value, combination)

    @staticmethod
    def build(columns: Sequence[int]) -> tuple[_Pivots, list[int]]:
        """Reduce `columns`; return the pivots and the combinations that reduce to zero
        (the kernel of the matrix, one vector per dependent column)."""
        piv: dict[int, tuple[int, int]] = {}
        kernel: list[int] = []
        for i, col in enumerate(columns):
            v, c = col, 1 << i
            while v:
                b = v.bit_length() - 1
                if b in piv:
                    pv, pc = piv[b]
                    v ^= pv
                    c ^= pc
                else:
                    piv[b] = (v, c)
                    break
            if not v:
                kernel.append(c)
        rows = tuple(sorted(((b, v, c) for b, (v, c) in piv.items()), reverse=True))
        return _Pivots(rows), kernel

    def solve(self, target: int) -> int | None:
        """A combination of the original columns whose XOR is `target`, or None."""
        by_bit = {b: (v, c) for b, v, c in self.rows}
        comb = 0
        while target:
            b = target.bit_length() - 1
            if b not in by_bit:
                return None
            v, c = by_bit[b]
            target ^= v
            comb ^= c
        return comb

    def max_value(self) -> int:
        """Largest element of the span (greedy from the top bit)."""
        m = 0
        for b, v, _ in self.rows:
            if not (m >> b) & 1:
                m ^= v
        return m


def gf2_rank(columns: Sequence[int]) -> int:
    """Rank over GF(2) of vectors given as int bit masks."""
    return len(_Pivots.build(columns)[0].rows)


@dataclass(frozen=True)
class LinearLayout:
    """An F2-linear map between named, power-of-two-sized dimensions.

    in_dims: ((name, (basis for bit 0, basis for bit 1, ...)), ...), each basis a tuple with
    one int per output dimension. out_dims: ((name, size), ...).
    """

    in_dims: tuple[tuple[str, tuple[Basis, ...]], ...]
    out_dims: tuple[tuple[str, int], ...]

    def __post_init__(self) -> None:
        ins = tuple((str(n), tuple(tuple(int(x) for x in b) for b in bs)) for n, bs in self.in_dims)
        outs = tuple((str(n), int(s)) for n, s in self.out_dims)
        object.__setattr__(self, "in_dims", ins)
        object.__setattr__(self, "out_dims", outs)
        names = [n for n, _ in ins]
        if len(set(names)) != len(names):
            raise ValueError(f"duplicate input dimension names {names}")
        onames = [n for n, _ in outs]
        if len(set(onames)) != len(onames):
            raise ValueError(f"duplicate output dimension names {onames}")
        for n, s in outs:
            _log2_exact(s, f"output dimension {n!r} size")
        for n, bases in ins:
            for b in bases:
                if len(b) != len(outs):
                    raise ValueError(
                        f"basis {b} of input {n!r} has {len(b)} entries, expected {len(outs)}"
                    )
                for v, (on, os) in zip(b, outs, strict=False):
                    if not 0 <= v < os:
                        raise ValueError(f"basis {b} of input {n!r}: {v} outside {on!r} [0,{os})")

    # --- constructors --------------------------------------------------------------------
    @staticmethod
    def from_bases(
        bases: Mapping[str, Sequence[Sequence[int]]],
        out_dims: Mapping[str, int] | Sequence[str],
    ) -> LinearLayout:
        """Build from {in_name: [basis, ...]}; out_dims is {name: size} or names only (sizes
        are then the smallest powers of two holding every basis value)."""
        if isinstance(out_dims, Mapping):
            outs = tuple(out_dims.items())
        else:
            names = list(out_dims)
            sizes = [1] * len(names)
            for bs in bases.values():
                for b in bs:
                    for j, v in enumerate(b):
                        while sizes[j] <= v:
                            sizes[j] *= 2
            outs = tuple(zip(names, sizes, strict=False))
        return LinearLayout(tuple((n, tuple(map(tuple, bs))) for n, bs in bases.items()), outs)

    @staticmethod
    def identity(size: int, in_name: str = "x", out_name: str | None = None) -> LinearLayout:
        k = _log2_exact(size, "size")
        return LinearLayout(((in_name, tuple((1 << i,) for i in range(k))),),
                            ((out_name or in_name, size),))

    @staticmethod
    def from_callable(
        in_sizes: Mapping[str, int],
        out_sizes: Mapping[str, int],
        fn: Callable[[dict[str, int]], Sequence[int]],
    ) -> LinearLayout:
        """Read the bases off `fn` at the unit inputs. Only meaningful when `fn` is
        F2-linear; callers check that (e.g. by comparing on all inputs)."""
        in_dims = []
        for name, size in in_sizes.items():
            k = _log2_exact(size, f"input {name!r} size")
            bases = []
            for i in range(k):
                arg = {n: 0 for n in in_sizes}
                arg[name] = 1 << i
                bases.append(tuple(int(v) for v in fn(arg)))
            in_dims.append((name, tuple(bases)))
        return LinearLayout(tuple(in_dims), tuple(out_sizes.items()))

    # --- shape queries -------------------------------------------------------------------
    @property
    def in_names(self) -> tuple[str, ...]:
        return tuple(n for n, _ in self.in_dims)

    @property
    def out_names(self) -> tuple[str, ...]:
        return tuple(n for n, _ in self.out_dims)

    def in_size(self, name: str) -> int:
        return 1 << len(dict(self.in_dims)[name])

    def out_size(self, name: str) -> int:
        return dict(self.out_dims)[name]

    def in_bits(self) -> int:
        return sum(len(bs) for _, bs in self.in_dims)

    def out_bits(self) -> int:
        return sum(s.bit_length() - 1 for _, s in self.out_dims)

    def total_in_size(self) -> int:
        return 1 << self.in_bits()

    def total_out_size(self) -> int:
        return 1 << self.out_bits()

    # --- evaluation ----------------------------------------------------------------------
    def _norm_inputs(self, inputs: Mapping[str, int] | Sequence[int] | int) -> list[int]:
        if isinstance(inputs, int):
            inputs = (inputs,)
        if isinstance(inputs, Mapping):
            vals = [int(inputs.get(n, 0)) for n in self.in_names]
            extra = set(inputs) - set(self.in_names)
            if extra:
                raise ValueError(f"unknown input dimensions {sorted(extra)}")
        else:
            vals = [int(v) for v in inputs]
            if len(vals) != len(self.in_dims):
                raise ValueError(f"expected {len(self.in_dims)} inputs, got {len(vals)}")
        for v, (n, bs) in zip(vals, self.in_dims, strict=False):
            if not 0 <= v < (1 << len(bs)):
                raise ValueError(f"input {n!r}={v} outside [0, {1 << len(bs)})")
        return vals

    def apply(self, inputs: Mapping[str, int] | Sequence[int] | int) -> tuple[int, ...]:
        """XOR of the bases of the set input bits, one value per output dimension."""
        return self.combine(self._norm_inputs(inputs))

    def combine(self, values: Sequence) -> tuple:
        """`apply` without input checks, written with operators only (>>, &, *, ^), so the
        same definition evaluates ints, numpy arrays of inputs, or symbolic terms (code
        generation builds the address arithmetic from it)."""
        out: list = [0] * len(self.out_dims)
        for v, (_, bases) in zip(values, self.in_dims, strict=False):
            for i, b in enumerate(bases):
                bit = (v >> i) & 1
                for j, x in enumerate(b):
                    if x:
                        out[j] = out[j] ^ (bit * x)
        return tuple(out)

    def __call__(self, *inputs: int) -> tuple[int, ...]:
        return self.apply(inputs)

    # --- matrix view ---------------------------------------------------------------------
    def _flatten_out(self, vec: Sequence[int]) -> int:
        acc, shift = 0, 0
        for v, (_, s) in zip(vec, self.out_dims, strict=False):
            acc |= v << shift
            shift += s.bit_length() - 1
        return acc

    def _unflatten_out(self, x: int) -> tuple[int, ...]:
        out = []
        for _, s in self.out_dims:
            k = s.bit_length() - 1
            out.append(x & (s - 1))
            x >>= k
        return tuple(out)

    def columns(self) -> list[int]:
        """One int per flattened input bit: the flattened output bits of its basis."""
        return [self._flatten_out(b) for _, bases in self.in_dims for b in bases]

    def rank(self) -> int:
        return gf2_rank(self.columns())

    def is_injective(self) -> bool:
        return self.rank() == self.in_bits()

    def is_surjective(self) -> bool:
        return self.rank() == self.out_bits()

    def is_bijective(self) -> bool:
        return self.is_injective() and self.is_surjective()

    def kernel(self) -> list[tuple[int, ...]]:
        """Non-zero inputs (one per dependent column) that map to zero: collision witnesses."""
        _, ker = _Pivots.build(self.columns())
        return [self._unflatten_in(c) for c in ker]

    def _unflatten_in(self, x: int) -> tuple[int, ...]:
        out = []
        for _, bs in self.in_dims:
            out.append(x & ((1 << len(bs)) - 1))
            x >>= len(bs)
        return tuple(out)

    def max_output(self) -> int:
        """Largest flattened output value attained (for cosize of 1-output layouts)."""
        piv, _ = _Pivots.build(self.columns())
        return piv.max_value()

    # --- algebra -------------------------------------------------------------------------
    def compose(self, inner: LinearLayout) -> LinearLayout:
        """self o inner: inner's outputs must be exactly self's inputs (names and sizes)."""
        expected = tuple((n, 1 << len(bs)) for n, bs in self.in_dims)
        if inner.out_dims != expected:
            raise ValueError(
                f"cannot compose: inner outputs {inner.out_dims} != outer inputs {expected}"
            )
        in_dims = tuple(
            (n, tuple(self.apply(b) for b in bases)) for n, bases in inner.in_dims
        )
        return LinearLayout(in_dims, self.out_dims)

    def invert(self) -> LinearLayout:
        """The inverse map (outputs become inputs); ValueError unless bijective."""
        cols = self.columns()
        if len(cols) != self.out_bits() or gf2_rank(cols) != len(cols):
            raise ValueError(
                f"layout is not bijective (rank {gf2_rank(cols)}, {len(cols)} input bits, "
                f"{self.out_bits()} output bits)"
            )
        piv, _ = _Pivots.build(cols)
        in_dims = []
        shift = 0
        for name, size in self.out_dims:
            k = size.bit_length() - 1
            bases = []
            for i in range(k):
                comb = piv.solve(1 << (shift + i))
                assert comb is not None  # full rank
                bases.append(self._unflatten_in(comb))
            in_dims.append((name, tuple(bases)))
            shift += k
        out_dims = tuple((n, 1 << len(bs)) for n, bs in self.in_dims)
        return LinearLayout(tuple(in_dims), out_dims)

    def __str__(self) -> str:
        ins = "; ".join(f"{n}: {list(bs)}" for n, bs in self.in_dims)
        outs = ", ".join(f"{n}:{s}" for n, s in self.out_dims)
        return f"LL[{ins} -> {outs}]"
