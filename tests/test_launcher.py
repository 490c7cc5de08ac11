"""The GPU launcher's host side without a GPU: a fake device records what would be sent to
the driver, so the marshalling of arguments (order, types, tensor maps encoded at the real
address with its real alignment, the shared-memory attribute, the grid) is tested in CI."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from tilesafe.codegen.compile import compile_kernel
from tilesafe.codegen.launch_spec import LaunchSpec
from tilesafe.codegen.plan import bind
from tilesafe.frontend.load import load_program
from tilesafe.gpu import cases, compare, driver, launcher
from tilesafe.semantics.interpreter.interp import run_kernel
from tilesafe.semantics.interpreter.interp_io import random_inputs, tensor_shapes
from tilesafe.semantics.value import spec_eval

ROOT = Path(__file__).resolve().parent.parent


class FakeDevice:
    """Records calls; "runs" the kernel by copying what the test tells it to."""

    def __init__(self, effect: Any = None) -> None:
        self.calls: list[tuple] = []
        self.memory: dict[int, np.ndarray] = {}
        self.next = 0x7F0000001000
        self.effect = effect

    def function(self, image: bytes, entry: str, smem: int) -> str:
        self.calls.append(("function", entry, smem))
        return entry

    def alloc(self, nbytes: int) -> int:
        addr = self.next
        self.next += (nbytes + 255) // 256 * 256 + 256
        return addr

    def upload(self, address: int, data: np.ndarray) -> None:
        self.memory[address] = np.array(data, copy=True)

    def download_into(self, out: np.ndarray, address: int) -> None:
        out[...] = self.memory[address]

    def free(self, address: int) -> None:
        self.memory.pop(address, None)

    def encode(self, spec: Any, address: int) -> str:
        self.calls.append(("encode", spec, address))
        return f"tmap@{address:x}"

    def launch(self, fn: str, grid: Any, block: int, smem: int, args: Any, types: Any) -> None:
        self.calls.append(("launch", fn, tuple(grid), block, smem, tuple(args), tuple(types)))
        if self.effect:
            self.effect(self, args)

    def synchronize(self) -> None:
        pass


def test_arguments_follow_the_kernel_signature(monkeypatch) -> None:
    kernel = load_program(ROOT / "corpus/good/pipeline2.tsk").kernels[0]
    spec = bind(kernel, compile_kernel(kernel), {"M": 128, "N": 192})
    spec = LaunchSpec.from_json(spec.to_json())  # it travels as JSON
    monkeypatch.setattr(launcher, "_image", lambda spec: (b"cubin", "report"))
    dev = FakeDevice()
    inputs = random_inputs(kernel, {"M": 128, "N": 192}, 0)
    res = launcher.run(spec, inputs, device=dev)  # type: ignore[arg-type]
    assert res.status == "ok", res.error
    (fn,) = [c for c in dev.calls if c[0] == "function"]
    assert fn[1] == "pipeline2" and fn[2] == spec.smem_bytes
    (enc,) = [c for c in dev.calls if c[0] == "encode"]
    tm_spec, address = enc[1], enc[2]
    assert tm_spec.global_dims == (192, 128) and tm_spec.box_dims == (64, 64)
    assert tm_spec.global_address_alignment == address & -address
    (launch,) = [c for c in dev.calls if c[0] == "launch"]
    _, _, grid, block, smem, args, types = launch
    assert grid == (2, 1, 1) and block == 160 and smem == spec.smem_bytes
    assert types == (driver.POINTER, driver.POINTER, driver.INT64, driver.INT64,
                     driver.BY_VALUE)
    assert args[2:4] == (128, 192) and args[4] == f"tmap@{enc[2]:x}"
    assert enc[2] == args[0]  # the map is encoded at src's real address
    assert np.array_equal(res.tensors["src"], inputs["src"])


def test_bit_exact_comparison_and_case_files(monkeypatch, tmp_path: Path) -> None:
    """A fake device that computes what the interpreter computes passes; one that flips a
    bit of one element is caught, with the element named."""
    kernel = load_program(ROOT / "corpus/good/elementwise.tsk").kernels[0]
    sizes = {"N": 300}
    spec = bind(kernel, compile_kernel(kernel), sizes)
    inputs = random_inputs(kernel, sizes, 1)
    want = run_kernel(kernel, sizes, inputs).tensors
    case = cases.Case("elementwise", spec, inputs, "interp", dict(want))
    cases.save_case(tmp_path, case)
    case = cases.load_case(tmp_path / "elementwise.json")
    monkeypatch.setattr(launcher, "_image", lambda spec: (b"cubin", ""))

    def compute(flip: bool):
        def effect(dev: FakeDevice, args: Any) -> None:
            z = want["z"].copy()
            if flip:
                z.view(np.uint32)[7] ^= 1
            dev.memory[args[3]] = z
        return effect

    ok = cases.run_case(case, device=FakeDevice(compute(False)))
    assert ok.verdict == "bit-exact"
    bad = cases.run_case(case, device=FakeDevice(compute(True)))
    assert bad.verdict == "DIFFERS" and "first at [7]" in bad.detail


def test_bad_kernel_cases_compare_with_the_spec_too(monkeypatch, tmp_path: Path) -> None:
    """A value bug computes the same wrong output on the GPU and in the interpreter ("no
    visible effect" against it); the case's `spec_` arrays still tell it violates the spec,
    and they survive the case file."""
    path = ROOT / "corpus/bad/ts802_saxpy_minus.tsk"
    kernel = load_program(path).kernels[0]
    sizes = {"N": 300}
    spec = bind(kernel, compile_kernel(kernel), sizes)
    inputs = random_inputs(kernel, sizes, 1)
    got = run_kernel(kernel, sizes, inputs).tensors
    (ens,) = kernel.ensures
    want = spec_eval.expected(kernel, ens, sizes, inputs, tensor_shapes(kernel, sizes))
    case = cases.Case("saxpy_minus", spec, inputs, "observe", dict(got), {},
                      {ens.tensor: want})
    cases.save_case(tmp_path, case)
    case = cases.load_case(tmp_path / "saxpy_minus.json")
    assert set(case.spec_expected) == {"z"} and set(case.inputs) == set(inputs)
    monkeypatch.setattr(launcher, "_image", lambda spec: (b"cubin", ""))

    def effect(dev: FakeDevice, args: Any) -> None:
        dev.memory[args[3]] = got["z"].copy()

    res = cases.run_case(case, device=FakeDevice(effect))
    assert res.verdict == "no visible effect"
    assert res.spec.startswith("violated: z:"), res.spec
    assert "[spec violated" in cases.table([res])


def test_f32_nans_compare_equal_whatever_their_payload() -> None:
    a = np.array([np.nan, 1.0], np.float32)
    b = a.copy()
    b.view(np.uint32)[0] = 0x7FC00001
    assert compare.compare({"t": a}, {"t": b}) == []
    h = np.array([np.nan], np.float16)
    h2 = h.copy()
    h2.view(np.uint16)[0] = 0x7E01
    assert len(compare.compare({"t": h}, {"t": h2})) == 1
