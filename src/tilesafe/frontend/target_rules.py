"""What a kernel may use on a target: the constructs a machine does not have are refused
before anything is verified or compiled (TS036), each named with where it is.

Why refuse at load time rather than in the code generator: on gfx942 there is no Tensor
Memory Accelerator, no mbarrier, no named barrier, no async proxy and no wgmma, so a kernel
that uses them is not an AMD program at all -- verifying it "for gfx942" would prove
properties of hardware that does not exist (an `arrive ..., one per warp` would count
64-lane wavefronts arriving on a barrier AMD cannot build). `tilesafe lint/verify/run/
compile --target gfx942` all stop here with the list, and the HIP printer checks again on
the LIR it is given (codegen/hip.py).
"""

from __future__ import annotations

from tilesafe.frontend import ir, walk
from tilesafe.frontend.diagnostics import Diagnostic
from tilesafe.frontend.target import Target

NOT_ON_TARGET = "TS036"  # a construct the target's hardware does not have

# Statement kinds of Hopper's asynchronous machinery, with what the hardware lacks.
_ASYNC_STMTS: dict[type, str] = {
    ir.Init: "mbarrier init (no mbarriers)",
    ir.Arrive: "mbarrier arrive (no mbarriers)",
    ir.Wait: "mbarrier wait (no mbarriers)",
    ir.ExpectTx: "expect_tx (no mbarrier transaction counts)",
    ir.Fence: "fence (no mbarrier init fence, no async proxy)",
    ir.TmaLoad: "tma_load (no Tensor Memory Accelerator)",
    ir.TmaStore: "tma_store (no Tensor Memory Accelerator)",
    ir.CommitGroup: "commit_group (no bulk async-groups)",
    ir.WaitGroup: "wait_group (no bulk async-groups)",
    ir.NamedBar: "named barrier bar_sync/bar_arrive (only the workgroup barrier, `sync`)",
    ir.Wgmma: "wgmma (no warpgroup MMA)",
    ir.WgmmaFence: "wgmma_fence (no warpgroup MMA)",
    ir.WgmmaCommit: "wgmma_commit (no warpgroup MMA)",
    ir.WgmmaWait: "wgmma_wait (no warpgroup MMA)",
    ir.SetMaxNReg: "setmaxnreg (no per-warpgroup register reallocation)",
    ir.FragStore: "a fragment register write (no wgmma fragments)",
    ir.ClusterBarrier: "the cluster barrier (no thread-block clusters)",
}


def unsupported(kernel: ir.Kernel, target: Target) -> list[Diagnostic]:
    """One TS036 error per declaration and statement `target` cannot run (empty on a target
    that has Hopper's asynchronous machinery)."""
    if target.has_async:
        return []
    where = f"{target.name} ({target.vendor.upper()})"
    out: list[Diagnostic] = []

    def refuse(what: str, span: object) -> None:
        out.append(Diagnostic(NOT_ON_TARGET, f"{what}: not available on {where}",
                              span, hint="the AMD subset is global and shared loads and "
                              "stores, `sync`, loops, roles and scalars (docs/codegen.md)"))

    if kernel.cluster is not None:
        refuse("a thread-block cluster (no clusters, no distributed shared memory)",
               kernel.span)
    for tm in kernel.tensormaps:
        refuse(f"tensormap '{tm.name}' (no Tensor Memory Accelerator)", tm.span)
    for bar in kernel.barriers:
        refuse(f"mbarrier '{bar.name}' (no mbarriers)", bar.span)
    for frag in kernel.fragments:
        refuse(f"fragment '{frag.name}' (no wgmma fragments)", frag.span)
    for s in walk.statements(kernel.body):
        what = _ASYNC_STMTS.get(type(s))
        if what is not None:
            refuse(what, s.span)
        elif isinstance(s, ir.Store) and s.cta is not None:
            refuse("a store into a peer CTA's shared memory (no distributed shared memory)",
                   s.span)
        if isinstance(s, ir.Store) or what is None:
            for e in walk.own_exprs(s):
                if any(ld.cta is not None for ld in walk.loads(e)):
                    refuse("a read of a peer CTA's shared memory (no distributed shared "
                           "memory)", s.span)
                    break
    return out
