"""Generated code on a real Hopper GPU, bit for bit against the reference interpreter.

Cases come from `TILESAFE_GPU_CASES` (a folder written by tests/gpu/build_cases.py on a
host with the full install, as the lent H100 has no ISL/z3/lark) or, when it is unset and
the full install is here, are built on the fly (one seed, every good and codegen-coverage
kernel at every listed size). Every good case must be bit-exact; a bad kernel's case is an
observation (docs/hardware-runs.md tabulates them). Skips cleanly without a GPU;
TILESAFE_REQUIRE_GPU=1 turns the skip into a failure.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

from tilesafe.gpu import cases, driver

pytestmark = pytest.mark.gpu
REQUIRE = os.environ.get("TILESAFE_REQUIRE_GPU") == "1"


def _folder() -> Path:
    given = os.environ.get("TILESAFE_GPU_CASES")
    if given:
        return Path(given)
    try:
        import build_cases
    except ImportError as exc:  # no ISL / z3 / lark here: the cases must be given
        pytest.skip(f"TILESAFE_GPU_CASES unset and cases cannot be built here ({exc})")
    out = Path(tempfile.mkdtemp(prefix="tilesafe-cases-"))
    for case in [*build_cases.good_cases(1), *build_cases.codegen_cases(1)]:
        cases.save_case(out, case)
    return out


@pytest.fixture(scope="module")
def folder() -> Path:
    why = driver.unavailable_reason()
    if why is not None:
        if REQUIRE:
            pytest.fail(f"TILESAFE_REQUIRE_GPU=1 but {why}")
        pytest.skip(why)
    return _folder()


def test_generated_code_is_bit_exact_with_the_interpreter(folder: Path) -> None:
    results = cases.run_folder(folder, only="good-") + cases.run_folder(folder,
                                                                        only="codegen-")
    assert results, f"no cases in {folder}"
    wrong = [r for r in results if not r.passed]
    assert not wrong, "\n".join(f"{r.name}: {r.verdict} {r.detail}" for r in wrong)


def test_copy_past_four_gibibytes(folder: Path) -> None:
    """Byte offsets beyond 2^32 (5 GiB tensors): checked with numpy, not the interpreter."""
    big = [p for p in cases.case_files(folder) if p.stem.startswith("big-")]
    if not big:
        pytest.skip("no big case in this folder (build_cases.py --only big)")
    for path in big:
        res = cases.run_case(cases.load_case(path))
        assert res.passed, f"{res.name}: {res.verdict} {res.detail}"
