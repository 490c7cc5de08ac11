"""A call's arguments against the kernel's contract: which tensor is which parameter, the
sizes read from their shapes, `where`, dtypes, strides, TMA alignment, devices, aliasing.

Why every check before any launch: a proof holds for the launches `where` allows, over
row-major dense tensors that do not overlap; a call outside that is not covered by it and,
on the GPU, may read or write out of bounds. Each problem is a TSnnn diagnostic that names
the tensor and the violated clause (its span is the parameter's or the clause's in the
kernel's source), all of them at once, as the frontend reports a file.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tilesafe.frontend import ir
from tilesafe.frontend.diagnostics import Diagnostic, DiagnosticError
from tilesafe.frontend.ir_text import expr_text
from tilesafe.jit.arrays import ELEM_BYTES, ArgInfo, describe, is_array
from tilesafe.semantics.expr import evaluate

ARGUMENTS = "TS901"
SHAPE = "TS902"
WHERE = "TS903"
DTYPE = "TS904"
STRIDES = "TS905"
ALIGNMENT = "TS906"
DEVICE = "TS907"
ALIAS = "TS908"
GATE = "TS909"
LAUNCH = "TS910"
REQUIRES = "TS911"

TMA_ALIGN = 16  # bytes: cuTensorMapEncodeTiled's base address and stride rule (TS505/TS506)


class JitError(DiagnosticError):
    """A call or a build that cannot be served; `diagnostics` says every reason."""


@dataclass(frozen=True)
class Binding:
    """A call matched to the kernel: the sizes, every tensor's shape, the arguments given
    (parameter name -> the caller's object) and the outputs to allocate."""

    sizes: Mapping[str, int]
    shapes: Mapping[str, tuple[int, ...]]
    grid: tuple[int, ...]
    given: Mapping[str, Any]
    infos: Mapping[str, ArgInfo]
    allocate: tuple[str, ...]


def written(kernel: ir.Kernel) -> tuple[str, ...]:
    """The parameters a call returns: `out` and `inout`, in declaration order."""
    return tuple(t.name for t in kernel.params if t.role.written)


def assign(kernel: ir.Kernel, args: Sequence[Any], kwargs: Mapping[str, Any]
           ) -> tuple[dict[str, Any], dict[str, int]]:
    """Positional arguments fill the parameters in order; keywords name a parameter or a
    size; `out=` names the only written parameter when none is called `out`. Returns
    (parameter -> object, size -> value); JitError TS901 for anything else."""
    names = [t.name for t in kernel.params]
    diags: list[Diagnostic] = []
    given: dict[str, Any] = {}
    sizes: dict[str, int] = {}
    if len(args) > len(names):
        diags.append(Diagnostic(ARGUMENTS, f"kernel '{kernel.name}' takes {len(names)} tensors "
                                f"({', '.join(names)}), {len(args)} were given", kernel.span))
    for name, value in zip(names, args, strict=False):
        given[name] = value
    outs = written(kernel)
    for key, value in kwargs.items():
        target = key
        if key == "out" and "out" not in names and len(outs) == 1:
            target = outs[0]
        if target in names:
            if target in given:
                diags.append(Diagnostic(ARGUMENTS, f"tensor '{target}' given twice (by position "
                                        "and by keyword)", kernel.tensor(target).span))
            given[target] = value
        elif key in kernel.sizes:
            if isinstance(value, bool) or not isinstance(value, int):
                diags.append(Diagnostic(ARGUMENTS, f"size {key} must be an int, got "
                                        f"{type(value).__name__}", kernel.span))
            else:
                sizes[key] = int(value)
        else:
            diags.append(Diagnostic(ARGUMENTS, f"kernel '{kernel.name}' has no parameter or size "
                                    f"'{key}' (tensors: {', '.join(names)}; sizes: "
                                    f"{', '.join(kernel.sizes) or 'none'})", kernel.span))
    for t in kernel.params:
        value = given.get(t.name)
        if value is None:
            given.pop(t.name, None)
            if t.role is not ir.ParamRole.OUT:
                diags.append(Diagnostic(ARGUMENTS, f"no tensor for '{t.name}' ({t.role.value} "
                                        f"{t.dtype.value}[{_shape_text(t)}]): only `out` "
                                        "tensors are allocated when not given", t.span))
        elif not is_array(value):
            diags.append(Diagnostic(ARGUMENTS, f"'{t.name}' must be a numpy array or a torch "
                                    f"tensor, got {type(value).__name__}", t.span))
    if diags:
        raise JitError(diags)
    return given, sizes


def bind(kernel: ir.Kernel, given: Mapping[str, Any], size_args: Mapping[str, int], *,
         zero_copy: bool) -> Binding:
    """Check the call and read its sizes. `zero_copy`: the kernel will use the tensors'
    memory itself (torch CUDA tensors), so TMA alignment is a property of the call."""
    infos = {name: describe(value) for name, value in given.items()}
    diags: list[Diagnostic] = []
    for name, info in infos.items():
        diags.extend(_tensor_problems(kernel.tensor(name), info))
    sizes, size_diags = _read_sizes(kernel, infos, size_args)
    diags.extend(size_diags)
    if diags:
        raise JitError(diags)
    grid = _check_where(kernel, sizes)
    shapes = _check_shapes(kernel, infos, sizes)
    diags = _memory_problems(kernel, infos, zero_copy)
    if diags:
        raise JitError(diags)
    allocate = tuple(t.name for t in kernel.params if t.name not in given)
    return Binding(dict(sizes), shapes, grid, dict(given), infos, allocate)


def check_requires(kernel: ir.Kernel, binding: Binding,
                   proved: frozenset[int] = frozenset(),
                   forms: tuple[dict[str, Any], ...] | None = None) -> None:
    """The index tensors against the kernel's `requires` clauses, where they are (torch CUDA
    tensors on their GPU, one synchronisation), before the launch: JitError TS911 naming
    the clause, the element and its value (semantics/access/requires_eval.py). A proof of a
    kernel with gathers covers only the data its clauses allow, and the data arrives now.
    `proved`: clauses (by index) a proof already established of this data -- the ones
    `tilesafe compose` proved of the inspector's output, when the caller ran the inspector
    (tilesafe.moe.pipeline) -- which are not evaluated again."""
    if not kernel.requires:
        return
    from tilesafe.semantics.access import requires_eval, requires_form

    order = [i for i in range(len(kernel.requires)) if i not in proved]
    if not order:
        return
    forms = requires_form.encode(kernel) if forms is None else forms
    arrays = {}
    for name, value in binding.given.items():
        info = binding.infos[name]
        arrays[name] = value if info.library == "torch" else np.asarray(value)
    try:
        v = requires_eval.first_violation([forms[i] for i in order], binding.sizes, arrays)
    except requires_eval.TooLarge as err:
        raise JitError([Diagnostic(REQUIRES, str(err), kernel.requires[order[err.index]].span,
                                   hint="launch it with smaller index tensors")]) from None
    if v is not None:
        raise JitError([Diagnostic(REQUIRES, f"refusing the launch: {v.message()}",
                                   kernel.requires[order[v.index]].span)])


# ---- one tensor ----------------------------------------------------------------------------


def _shape_text(t: ir.GlobalTensor) -> str:
    return ", ".join(expr_text(d, brief=True) for d in t.shape)


def _tensor_problems(t: ir.GlobalTensor, info: ArgInfo) -> list[Diagnostic]:
    out = []
    want = f"{t.dtype.value}[{_shape_text(t)}]"
    if len(info.shape) != len(t.shape):
        out.append(Diagnostic(SHAPE, f"tensor '{t.name}' has rank {len(info.shape)} (shape "
                              f"{list(info.shape)}); parameter {t.name} is {want}", t.span))
    if info.dtype != t.dtype.value:
        hint = ("bf16 travels as numpy uint16 bit patterns (or ml_dtypes.bfloat16)"
                if t.dtype is ir.DType.BF16 and info.library == "numpy" else None)
        out.append(Diagnostic(DTYPE, f"tensor '{t.name}' is {info.dtype_text}; parameter "
                              f"{t.name} is {want}", t.span, hint=hint))
    if not info.dense():
        out.append(Diagnostic(STRIDES, f"tensor '{t.name}' is not row-major and dense (strides "
                              f"{list(info.strides)} elements for shape {list(info.shape)}): "
                              "the kernel indexes it by its shape alone", t.span,
                              hint="pass np.ascontiguousarray(x) or x.contiguous()"))
    return out


# ---- sizes ---------------------------------------------------------------------------------


def _read_sizes(kernel: ir.Kernel, infos: Mapping[str, ArgInfo], size_args: Mapping[str, int]
                ) -> tuple[dict[str, int], list[Diagnostic]]:
    """Sizes from the shapes: a dimension that is a size names it; a dimension affine in one
    unknown size (`2 * N`, `N + 1`) determines it when exactly one value fits; every other
    dimension is checked once the sizes are known. Keywords count as given."""
    known: dict[str, tuple[int, str]] = {k: (v, f"{k}={v}") for k, v in size_args.items()}
    diags: list[Diagnostic] = []
    dims = [(t, k, info.shape[k]) for t in kernel.params if (info := infos.get(t.name))
            is not None and len(info.shape) == len(t.shape) for k in range(len(t.shape))]
    for t, k, extent in dims:
        d = t.shape[k]
        if isinstance(d, ir.SizeVar):
            origin = f"{t.name}.shape[{k}]"
            if d.name in known and known[d.name][0] != extent:
                value, where = known[d.name]
                diags.append(Diagnostic(SHAPE, f"size {d.name} is {value} from {where} but "
                                        f"{extent} from {origin}", t.span))
            else:
                known.setdefault(d.name, (extent, origin))
    progress = True
    while progress:
        progress = False
        for t, k, extent in dims:
            found = _solve(t.shape[k], extent, {n: v for n, (v, _) in known.items()})
            if found is not None:
                name, value = found
                known[name] = (value, f"{t.name}.shape[{k}]")
                progress = True
    missing = [s for s in kernel.sizes if s not in known]
    if missing and not diags:
        names = ", ".join(missing)
        diags.append(Diagnostic(ARGUMENTS, f"size{'s' if len(missing) > 1 else ''} {names} "
                                "not determined by the shapes of the tensors given; pass "
                                f"{'them' if len(missing) > 1 else 'it'} as keyword"
                                f"{'s' if len(missing) > 1 else ''}: "
                                f"k(..., {', '.join(f'{m}=...' for m in missing)})",
                                kernel.span))
    return {n: v for n, (v, _) in known.items()}, diags


def _solve(d: ir.Expr, extent: int, known: Mapping[str, int]) -> tuple[str, int] | None:
    """The one value of the one unknown size in `d` that makes it `extent`, if affine."""
    unknown = {n for n in _size_names(d) if n not in known}
    if len(unknown) != 1:
        return None
    (name,) = unknown

    def at(x: int) -> int | None:
        try:
            return int(evaluate.eval_sizes(d, {**known, name: x}))
        except (evaluate.NoValue, evaluate.EvalError, KeyError):
            return None

    b, a1 = at(0), at(1)
    if b is None or a1 is None or a1 == b:
        return None
    a = a1 - b
    if (extent - b) % a != 0:
        return None
    x = (extent - b) // a
    return (name, x) if at(x) == extent else None


def _size_names(e: ir.Expr) -> set[str]:
    if isinstance(e, ir.SizeVar):
        return {e.name}
    if isinstance(e, ir.BinOp):
        return _size_names(e.lhs) | _size_names(e.rhs)
    if isinstance(e, ir.UnOp):
        return _size_names(e.operand)
    if isinstance(e, ir.Call):
        return set().union(*(_size_names(a) for a in e.args))
    return set()


def _sizes_text(kernel: ir.Kernel, sizes: Mapping[str, int]) -> str:
    return ", ".join(f"{s}={sizes[s]}" for s in kernel.sizes)


def _check_where(kernel: ir.Kernel, sizes: Mapping[str, int]) -> tuple[int, ...]:
    diags = []
    for cond in kernel.where:
        if not evaluate.eval_sizes(cond, dict(sizes)):
            diags.append(Diagnostic(WHERE, f"sizes {_sizes_text(kernel, sizes)} violate the "
                                    f"kernel's `where {expr_text(cond, brief=True)}`",
                                    cond.span))
    if diags:
        raise JitError(diags)
    from tilesafe.semantics.interpreter.interp_error import InterpError
    from tilesafe.semantics.interpreter.interp_io import check_where

    try:
        return check_where(kernel, dict(sizes))
    except InterpError as err:  # an empty grid or one beyond the hardware's limits
        raise JitError([Diagnostic(WHERE, f"sizes {_sizes_text(kernel, sizes)}: {err.message}",
                                   err.span or kernel.span)]) from None


def _check_shapes(kernel: ir.Kernel, infos: Mapping[str, ArgInfo], sizes: Mapping[str, int]
                  ) -> dict[str, tuple[int, ...]]:
    from tilesafe.semantics.interpreter.interp_io import tensor_shapes

    shapes = tensor_shapes(kernel, dict(sizes))
    diags = []
    for t in kernel.params:
        info = infos.get(t.name)
        if info is not None and info.shape != shapes[t.name]:
            diags.append(Diagnostic(SHAPE, f"tensor '{t.name}' has shape {list(info.shape)}; at "
                                    f"{_sizes_text(kernel, sizes)} parameter {t.name} is "
                                    f"[{_shape_text(t)}] = {list(shapes[t.name])}", t.span))
    if diags:
        raise JitError(diags)
    return shapes


# ---- memory: alignment, devices, aliasing -------------------------------------------------


def _memory_problems(kernel: ir.Kernel, infos: Mapping[str, ArgInfo], zero_copy: bool
                     ) -> list[Diagnostic]:
    diags = []
    if zero_copy:
        tma = {tm.tensor for tm in kernel.tensormaps}
        for name, info in infos.items():
            t = kernel.tensor(name)
            if name in tma:
                diags.extend(_alignment(t, info))
        devices = sorted({info.device for info in infos.values()})
        if len(devices) > 1:
            where = ", ".join(f"{n} on {i.device}" for n, i in infos.items())
            diags.append(Diagnostic(DEVICE, f"the tensors are on {len(devices)} devices ({where}); "
                                    "one launch needs them all on one GPU", kernel.span))
    for t in kernel.params:
        if not t.role.written or t.name not in infos:
            continue
        mine = infos[t.name]
        for other, info in infos.items():
            if other == t.name or info.device != mine.device or not mine.nbytes:
                continue
            if (info.address < mine.address + mine.nbytes
                    and mine.address < info.address + info.nbytes):
                diags.append(Diagnostic(ALIAS, f"'{t.name}' ({t.role.value}) shares memory with "
                                        f"'{other}': the proofs assume distinct tensors",
                                        t.span, hint="pass a separate output (or a copy)"))
    return diags


def _alignment(t: ir.GlobalTensor, info: ArgInfo) -> list[Diagnostic]:
    out = []
    eb = ELEM_BYTES[t.dtype.value]
    if info.address % TMA_ALIGN:
        out.append(Diagnostic(ALIGNMENT, f"tensor '{t.name}' starts at an address that is not "
                              f"{TMA_ALIGN}-byte aligned (address % {TMA_ALIGN} = "
                              f"{info.address % TMA_ALIGN}); a TMA descriptor covers it "
                              "(cuTensorMapEncodeTiled: globalAddress)", t.span,
                              hint="allocate it fresh (a slice may start anywhere)"))
    for k, stride in enumerate(info.strides[:-1]):
        if (stride * eb) % TMA_ALIGN:
            out.append(Diagnostic(ALIGNMENT, f"tensor '{t.name}': stride of dimension {k} is "
                                  f"{stride * eb} bytes, not a multiple of {TMA_ALIGN} "
                                  "(cuTensorMapEncodeTiled: globalStrides)", t.span))
    return out
