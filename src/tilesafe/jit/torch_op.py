"""A JitKernel as a torch.library custom op, with a fake implementation for shapes.

Why a custom op and not the plain callable under torch.compile: Dynamo would trace into
the contract checks and the launch (numpy, ctypes, cuda-python) and break the graph. As an
op it is one opaque node: the fake implementation tells the compiler the outputs' shapes
and dtypes from the inputs' (symbolic) shapes, and the real one is the JitKernel call.

The op is functional, as torch.compile wants: inputs (`in` and `inout` tensors, then the
sizes no input shape determines, as SymInts) -> the written tensors, `out` ones fresh and
each `inout` one a fresh copy the kernel updates (the caller's tensor is not mutated).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tilesafe.frontend import ir

_LIBRARIES: list[Any] = []  # a Library object unregisters its ops when collected
_OPS: dict[str, Any] = {}  # name -> op: a second JitKernel of the same build reuses it


def signature(kernel: ir.Kernel) -> tuple[list[str], list[str], list[str]]:
    """(tensor inputs, size arguments, outputs) of the op, in order."""
    inputs = [t.name for t in kernel.params if t.role is not ir.ParamRole.OUT]
    named = {d.name for t in kernel.params if t.name in inputs for d in t.shape
             if isinstance(d, ir.SizeVar)}
    sizes = [s for s in kernel.sizes if s not in named]
    outputs = [t.name for t in kernel.params if t.role.written]
    return inputs, sizes, outputs


def schema(name: str, kernel: ir.Kernel) -> str:
    inputs, sizes, outputs = signature(kernel)
    args = [f"Tensor {n}" for n in inputs] + [f"SymInt {s}" for s in sizes]
    ret = "Tensor" if len(outputs) == 1 else "(" + ", ".join(["Tensor"] * len(outputs)) + ")"
    return f"{name}({', '.join(args)}) -> {ret}"


def _sym(e: ir.Expr, sizes: Mapping[str, Any]) -> Any:
    """An integer size expression over ints or SymInts (floor division and modulo)."""
    import torch

    if isinstance(e, ir.IntConst):
        return e.value
    if isinstance(e, ir.SizeVar):
        return sizes[e.name]
    if isinstance(e, ir.UnOp) and e.op == "-":
        return -_sym(e.operand, sizes)
    if isinstance(e, ir.BinOp):
        a, b = _sym(e.lhs, sizes), _sym(e.rhs, sizes)
        ops = {"+": lambda: a + b, "-": lambda: a - b, "*": lambda: a * b,
               "/": lambda: a // b, "%": lambda: a % b}
        return ops[e.op]()
    if isinstance(e, ir.Call) and e.func in ("min", "max"):
        a, b = (_sym(x, sizes) for x in e.args)
        return torch.sym_min(a, b) if e.func == "min" else torch.sym_max(a, b)
    raise ValueError(f"a shape term tilesafe.jit cannot evaluate symbolically: {e}")


def register(k: Any, name: str | None = None) -> Any:
    """Register `k` (a JitKernel) as `torch.ops.tilesafe.NAME` and return the op.
    Default NAME: the kernel's name and 8 hex digits of a hash of its source, device and
    gate (two files may hold kernels of one name); a JitKernel made again from the same
    source with the same settings gets the op already registered (it computes the same)."""
    import hashlib

    import torch

    kernel: ir.Kernel = k.kernel
    salt = f"{k.source.sha}:{kernel.name}:{k.device}:{k.unverified}".encode()
    opname = name or f"{kernel.name}_{hashlib.sha256(salt).hexdigest()[:8]}"
    if opname in _OPS:
        return _OPS[opname]
    inputs, sizes, outputs = signature(kernel)
    dtypes = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32,
              "i32": torch.int32, "u8": torch.uint8}

    def split(args: tuple[Any, ...]) -> tuple[dict[str, Any], dict[str, Any]]:
        return (dict(zip(inputs, args[:len(inputs)], strict=True)),
                dict(zip(sizes, args[len(inputs):], strict=True)))

    def real(*args: Any) -> Any:
        tensors, size_args = split(args)
        call = {n: (t.clone() if kernel.tensor(n).role is ir.ParamRole.INOUT else t)
                for n, t in tensors.items()}
        return k(**call, **size_args)

    def fake(*args: Any) -> Any:
        tensors, size_args = split(args)
        known = dict(size_args)
        for n, t in tensors.items():
            for d, extent in zip(kernel.tensor(n).shape, t.shape, strict=True):
                if isinstance(d, ir.SizeVar):
                    known.setdefault(d.name, extent)
        like = next(iter(tensors.values()))
        outs = []
        for n in outputs:
            t = kernel.tensor(n)
            shape = [_sym(d, known) for d in t.shape]
            outs.append(like.new_empty(shape, dtype=dtypes[t.dtype.value]))
        return outs[0] if len(outs) == 1 else tuple(outs)

    lib = torch.library.Library("tilesafe", "FRAGMENT")
    lib.define(schema(opname, kernel))
    lib.impl(opname, real, "CompositeExplicitAutograd")
    torch.library.register_fake(f"tilesafe::{opname}", fake, lib=lib)
    _LIBRARIES.append(lib)
    _OPS[opname] = getattr(torch.ops.tilesafe, opname).default
    return _OPS[opname]
