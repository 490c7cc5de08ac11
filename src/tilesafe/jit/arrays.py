"""What the contract checks need to know about one argument, whatever library it comes from.

Why one record for numpy arrays and torch tensors: the checks (shapes, dtypes, strides,
alignment, aliasing, devices; jit/contract.py) are the same for both, and a check written
once against `ArgInfo` is tested in CI, where torch is not installed. torch is never
imported here: a tensor is recognised by its type's module name, so importing tilesafe.jit
costs nothing for a numpy user.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

# tilesafe dtype -> numpy dtype of the arrays the interpreter and launcher use (bf16 travels
# as its uint16 bit patterns, as everywhere in tilesafe)
NUMPY = {"f16": np.dtype(np.float16), "bf16": np.dtype(np.uint16), "f32": np.dtype(np.float32),
         "i32": np.dtype(np.int32), "u8": np.dtype(np.uint8)}
ELEM_BYTES = {"f16": 2, "bf16": 2, "f32": 4, "i32": 4, "u8": 1}
_NUMPY_NAMES = {"float16": "f16", "float32": "f32", "int32": "i32", "uint8": "u8",
                "bfloat16": "bf16"}  # ml_dtypes' bfloat16 is accepted as bf16 too
_TORCH_NAMES = {"torch.float16": "f16", "torch.bfloat16": "bf16", "torch.float32": "f32",
                "torch.int32": "i32", "torch.uint8": "u8"}


@dataclass(frozen=True)
class ArgInfo:
    """One tensor argument as the checks see it.

    `dtype`: the tilesafe dtype it holds (None: none; `dtype_text` says what it is);
    `strides` in elements; `address`/`nbytes`: the memory it spans (for alignment and
    aliasing); `device`: "cpu" or "cuda:N"; `library`: "numpy" or "torch". A numpy uint16
    array is accepted for a bf16 parameter (`bits`: it holds bit patterns)."""

    library: str
    shape: tuple[int, ...]
    dtype: str | None
    dtype_text: str
    strides: tuple[int, ...]
    address: int
    nbytes: int
    device: str
    bits: bool = False

    @property
    def on_gpu(self) -> bool:
        return self.device.startswith("cuda")

    def dense(self) -> bool:
        """Row-major and densely packed (the kernel indexes a tensor by its shape alone;
        dimensions of extent 1 may have any stride, as numpy and torch allow)."""
        want = 1
        for extent, stride in zip(reversed(self.shape), reversed(self.strides), strict=True):
            if extent != 1 and stride != want:
                return False
            want *= extent
        return True


def is_torch(value: Any) -> bool:
    return type(value).__module__.startswith("torch") and hasattr(value, "data_ptr")


def is_array(value: Any) -> bool:
    return isinstance(value, np.ndarray) or is_torch(value)


def describe(value: Any) -> ArgInfo:
    """ArgInfo of a numpy array or a torch tensor (TypeError for anything else)."""
    if isinstance(value, np.ndarray):
        name = value.dtype.name
        dtype = _NUMPY_NAMES.get(name)
        bits = name == "uint16"
        if bits:
            dtype = "bf16"
        item = value.dtype.itemsize
        return ArgInfo("numpy", tuple(int(d) for d in value.shape), dtype, f"numpy {name}",
                       tuple(int(s) // item for s in value.strides),
                       int(value.ctypes.data), int(value.nbytes), "cpu", bits)
    if is_torch(value):
        name = str(value.dtype)
        return ArgInfo("torch", tuple(int(d) for d in value.shape), _TORCH_NAMES.get(name),
                       name, tuple(int(s) for s in value.stride()), int(value.data_ptr()),
                       int(value.numel()) * int(value.element_size()), str(value.device))
    raise TypeError(f"expected a numpy array or a torch tensor, got {type(value).__name__}")


# ---- conversions for the interpreter -----------------------------------------------------


def to_numpy(value: Any, dtype: str) -> np.ndarray:
    """The argument's contents as the interpreter's numpy array (a copy for torch; bf16 as
    uint16 patterns)."""
    if isinstance(value, np.ndarray):
        if value.dtype.name == "bfloat16":
            return np.ascontiguousarray(value).view(np.uint16)
        return np.ascontiguousarray(value, dtype=NUMPY[dtype])
    import torch

    t = value.detach().to("cpu").contiguous()
    if dtype == "bf16":
        return t.view(torch.int16).numpy().view(np.uint16).copy()
    return t.numpy().copy()


def write_back(target: Any, result: np.ndarray, dtype: str) -> None:
    """Copy a result into the caller's array or tensor, in place."""
    if isinstance(target, np.ndarray):
        if target.dtype.name == "bfloat16":
            np.copyto(target.view(np.uint16), result)
        else:
            np.copyto(target, result.astype(target.dtype, copy=False))
        return
    import torch

    src = torch.from_numpy(np.ascontiguousarray(result))
    if dtype == "bf16":
        src = src.view(torch.int16).view(torch.bfloat16)
    with torch.no_grad():
        target.copy_(src.to(target.device))


def empty_like_library(like: Any, shape: tuple[int, ...], dtype: str) -> Any:
    """A fresh output in the library (and on the device) of `like`."""
    if like is None or isinstance(like, np.ndarray):
        return np.empty(shape, NUMPY[dtype])
    import torch

    torch_dtype = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32,
                   "i32": torch.int32, "u8": torch.uint8}[dtype]
    return torch.empty(shape, dtype=torch_dtype, device=like.device)
