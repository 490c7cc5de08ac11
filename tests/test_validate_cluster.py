"""The translation validator reads the cluster instructions (docs/codegen.md, "Clusters"):
`mapa` + ld/st.shared::cluster, remote and scoped mbarrier arrives, scoped waits, multicast
TMA loads and barrier.cluster. The PTX of every corpus/cluster kernel is proved against its
IR, ptxas assembles it, and each planted mistake in one of these instructions -- the wrong
peer, the wrong scope, the wrong mask, a missing half of the cluster barrier -- is refuted
with its code."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tilesafe.checkers.obligation import Verdict
from tilesafe.codegen.compile import compile_kernel
from tilesafe.codegen.validate import validate_ptx
from tilesafe.frontend.load import load_program

ROOT = Path(__file__).resolve().parent.parent
KERNELS = ("multicast_copy", "cluster_row_sum", "multicast_ring", "mma_multicast",
           "multicast_halves", "dsmem_exchange", "cluster4_row_sum", "gemm_multicast")


def compiled(name: str):
    folder = ROOT / "bench" / "kernels" if name == "gemm_multicast" else (
        ROOT / "corpus" / "cluster")  # the multicast GEMM: a benchmark, its proof unknown
    k = load_program(folder / f"{name}.tsk").kernels[0]
    return k, compile_kernel(k).ptx


@pytest.mark.parametrize("name", KERNELS)
def test_cluster_ptx_is_proved_and_assembles(name: str, tmp_path: Path):
    k, ptx = compiled(name)
    obs = validate_ptx(k, ptx)
    assert obs and all(o.verdict is Verdict.PROVED for o in obs), [
        (o.name, o.message) for o in obs if o.verdict is not Verdict.PROVED]
    dims = ", ".join(str(d) for d in k.cluster)
    assert f".reqnctapercluster {dims}" in ptx
    if shutil.which("ptxas") is None:
        pytest.skip("ptxas not installed")
    src = tmp_path / f"{name}.ptx"
    src.write_text(ptx)
    done = subprocess.run(["ptxas", "-arch=sm_90a", str(src), "-o", str(tmp_path / "k.cubin")],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def refuted(name: str, old: str, new: str, count: int = 1) -> set[str]:
    k, ptx = compiled(name)
    assert old in ptx, old
    bad = ptx.replace(old, new, count)
    return {o.code for o in validate_ptx(k, bad)
            if o.verdict is Verdict.REFUTED and o.code}


def test_wrong_scope_of_a_remote_arrive():
    """The IR's arrive is at cluster scope; a .cta release is what CUTLASS #3643 shipped."""
    assert refuted("multicast_ring", "mbarrier.arrive.release.cluster.shared::cluster",
                   "mbarrier.arrive.release.cta.shared::cluster") == {"TS720"}


def test_wrong_scope_of_a_wait():
    assert refuted("multicast_ring", "try_wait.parity.acquire.cluster.",
                   "try_wait.parity.") == {"TS720"}


def test_arrive_on_the_wrong_peer():
    """mapa to the executing CTA's own rank instead of the stage's owner."""
    k, ptx = compiled("multicast_ring")
    lines = ptx.splitlines()
    at = next(i for i, t in enumerate(lines) if "mbarrier.arrive.release.cluster.shared::cluster"
              in t)
    mapa = next(i for i in range(at, 0, -1) if "mapa.shared::cluster.u32" in lines[i])
    head, _, tail = lines[mapa].rpartition(",")
    lines[mapa] = head + ", 0;"
    codes = {o.code for o in validate_ptx(k, "\n".join(lines) + "\n")
             if o.verdict is Verdict.REFUTED and o.code}
    assert codes == {"TS724"}


def test_read_of_the_wrong_peer():
    k, ptx = compiled("cluster_row_sum")
    lines = ptx.splitlines()
    mapa = next(i for i, t in enumerate(lines) if "mapa.shared::cluster.u32" in t)
    head, _, _ = lines[mapa].rpartition(",")
    lines[mapa] = head + ", 0;"  # CTA 0 reads its own partial twice
    codes = {o.code for o in validate_ptx(k, "\n".join(lines) + "\n")
             if o.verdict is Verdict.REFUTED and o.code}
    assert codes == {"TS721"}


def test_wrong_multicast_mask():
    k, ptx = compiled("multicast_copy")
    lines = ptx.splitlines()
    cvt = next(i for i, t in enumerate(lines) if t.strip().startswith("cvt.u16.u32"))
    head, _, _ = lines[cvt].rpartition(",")
    lines[cvt] = head + ", 1;"  # only CTA 0: CTA 1 waits forever for its tile
    codes = {o.code for o in validate_ptx(k, "\n".join(lines) + "\n")
             if o.verdict is Verdict.REFUTED and o.code}
    assert codes == {"TS725"}


def test_missing_multicast():
    """A plain load where the IR multicasts: CTA 1's tile never comes."""
    import re

    k, ptx = compiled("multicast_copy")
    bad = re.sub(r"\.multicast::cluster (\[.*\]), %h\d+;", r" \1;", ptx)
    assert bad != ptx
    codes = {o.code for o in validate_ptx(k, bad) if o.verdict is Verdict.REFUTED and o.code}
    assert codes == {"TS720"}


def test_relaxed_cluster_arrive_for_a_release():
    """SGLang #38829's class in the translation: the IR releases, the PTX does not."""
    assert refuted("cluster_row_sum", "barrier.cluster.arrive.release;",
                   "barrier.cluster.arrive.relaxed;") == {"TS720"}


def test_missing_cluster_wait():
    assert refuted("cluster_row_sum", "\tbarrier.cluster.wait.acquire;", "\t//") == {"TS720"}
