"""`JitKernel`: a proved kernel as a Python callable on numpy arrays and torch tensors.

A call matches its arguments to the kernel's parameters and checks them (jit/contract.py),
picks the first specialised variant whose facts hold at the call's sizes (the general
kernel last), and runs it where the tensors live: torch CUDA tensors in place on torch's
current stream (no synchronisation), host arrays through copies on the GPU when there is
one, and on the reference interpreter otherwise or when `device="interp"` is asked for.

Why the general kernel is built when the JitKernel is made and variants on first use: the
gate must answer before anything runs (an unproved kernel is refused at `jit(...)`, not at
some later call), while a variant that no call selects should cost nothing.
"""

from __future__ import annotations

import functools
import hashlib
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tilesafe.frontend import ir
from tilesafe.frontend.diagnostics import Diagnostic, DiagnosticError
from tilesafe.frontend.specialize import Variant, variants
from tilesafe.jit import arrays as ar
from tilesafe.jit import contract
from tilesafe.jit.build import Build, build
from tilesafe.jit.cache import CacheKey, CompileCache, code_fingerprint
from tilesafe.jit.contract import DEVICE, LAUNCH, WHERE, JitError

DEVICES = ("auto", "gpu", "interp")
SPEC_CACHE = 256  # launches kept per JitKernel (oldest dropped first)


class JitWarning(UserWarning):
    """Something a caller must hear about but that does not stop the call: an unverified
    kernel in use, a variant that did not verify, a cache entry that was not trusted."""


@dataclass(frozen=True)
class Source:
    """The kernel's text and where it came from (`path` names it in diagnostics)."""

    path: str
    text: str

    @property
    def sha(self) -> str:
        return hashlib.sha256(self.text.encode()).hexdigest()

    @staticmethod
    def of(path_or_source: str | Path) -> Source:
        """A path, or the source text itself (anything with a newline or a brace)."""
        if isinstance(path_or_source, str) and ("\n" in path_or_source
                                                or "{" in path_or_source):
            text = path_or_source
            return Source(f"<jit:{hashlib.sha256(text.encode()).hexdigest()[:8]}>", text)
        path = Path(path_or_source)
        try:
            return Source(str(path), path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError) as err:
            from tilesafe.frontend import diagnostics as dg
            from tilesafe.frontend.span import Span

            raise JitError([Diagnostic(dg.IO_ERROR, f"cannot read {path}: {err}",
                                       Span(str(path), 1, 1, 1, 1))]) from None


@functools.lru_cache(maxsize=1)
def _gpu_unavailable() -> str | None:
    """Why no GPU can be used (None: one can), asked of the driver once per process."""
    from tilesafe.gpu.driver import unavailable_reason

    return unavailable_reason()


class JitKernel:
    """The callable `tilesafe.jit` returns. `k(*tensors, **sizes_or_tensors)`; see
    docs/jit.md. Attributes: `kernel` (the IR), `variants`, `verified`, `proof` (the
    general kernel's ProofSummary), `ptx`, `cache` (what the cache did per build) and
    `last_variant` (the Variant the last call ran, None for the general kernel)."""

    def __init__(self, source: Source, kernel: str | None = None, *, device: str = "auto",
                 unverified: bool = False, cache: bool | str | Path = True,
                 options: Any = None) -> None:
        from tilesafe import api

        if device not in DEVICES:
            raise ValueError(f"device must be one of {', '.join(DEVICES)}, got {device!r}")
        self.source = source
        self.device = device
        self.unverified = unverified
        self.options = options
        if cache is False:
            self._cache: CompileCache | None = None
        else:
            self._cache = CompileCache(None if cache is True else cache)
        program = api.checked_program(source.path, source.text)
        self.kernel: ir.Kernel = api.select_kernel(program, kernel)
        self.variants: tuple[Variant, ...] = variants(self.kernel)
        self.cache: dict[str, str] = {}
        self._builds: dict[int | None, Build | None] = {}
        self._specs: dict[tuple[int, tuple[tuple[str, int], ...]], Any] = {}
        self._forms: tuple[dict[str, Any], ...] | None = None  # the requires, as data
        self.last_variant: Variant | None = None
        self._runner: Any = None
        self._op: Any = None
        general = self._build(None)
        assert general is not None
        self.general = general

    # ---- builds -----------------------------------------------------------------------------

    def _key(self, variant: Variant | None) -> CacheKey:
        import tilesafe
        from tilesafe.frontend.ir_text import expr_text

        facts = tuple(expr_text(f) for f in variant.facts) if variant is not None else ()
        return CacheKey(self.source.sha, self.kernel.name, facts, self.unverified,
                        repr(self.options), tilesafe.__version__, code_fingerprint())

    def _build(self, variant: Variant | None) -> Build | None:
        """The build of the general kernel (None) or of a variant, once; a variant that
        cannot be built is remembered as None, with a JitWarning, and never tried again."""
        slot = None if variant is None else variant.index
        if slot in self._builds:
            return self._builds[slot]
        kernel = self.kernel if variant is None else variant.kernel
        label = "general" if variant is None else f"specialize {variant.describe()}"
        try:
            b = build(kernel, self.source.path, self._key(variant), self._cache,
                      self.unverified, self.options)
        except JitError as err:
            if variant is None:
                raise
            warnings.warn(JitWarning(f"kernel '{self.kernel.name}', variant `{label}` is not "
                                     f"used: {err}"), stacklevel=3)
            self._builds[slot] = None
            return None
        self.cache[label] = b.origin + (f" (cached entry rejected: {b.rejected})"
                                        if b.rejected else "")
        if b.rejected:
            warnings.warn(JitWarning(f"kernel '{self.kernel.name}' ({label}): the cached build "
                                     f"was {b.rejected}; rebuilt"), stacklevel=3)
        if not b.proof.verified:
            warnings.warn(JitWarning(f"kernel '{self.kernel.name}' ({label}) is UNVERIFIED "
                                     f"(unverified=True): not proved: "
                                     f"{'; '.join(b.proof.failing + b.proof.untranslated)}"),
                          stacklevel=3)
        self._builds[slot] = b
        return b

    @property
    def verified(self) -> bool:
        return self.general.proof.verified

    @property
    def proof(self) -> Any:
        return self.general.proof

    @property
    def ptx(self) -> str:
        return str(self.general.compiled.ptx)

    def select(self, sizes: Mapping[str, int]) -> tuple[Variant | None, Build]:
        """The first variant whose facts hold at `sizes` and that built, else the general
        kernel (the caller has checked `where`)."""
        for v in self.variants:
            if v.holds(sizes):
                b = self._build(v)
                if b is not None:
                    return v, b
        return None, self.general

    # ---- calls -----------------------------------------------------------------------------

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.call_with_proved(frozenset(), *args, **kwargs)

    def call_with_proved(self, proved: frozenset[int], *args: Any, **kwargs: Any) -> Any:
        """A call whose `requires` clauses numbered in `proved` are known to hold of its
        data by a proof (tilesafe compose, for an inspector's output the caller produced):
        those are not checked again; every other check of a call is made."""
        given, size_args = contract.assign(self.kernel, args, kwargs)
        mode, index = self._mode(given)
        binding = contract.bind(self.kernel, given, size_args, zero_copy=mode == "direct")
        if self.kernel.requires and self._forms is None:
            from tilesafe.semantics.access import requires_form

            self._forms = requires_form.encode(self.kernel)
        contract.check_requires(self.kernel, binding, proved, self._forms)
        variant, b = self.select(binding.sizes)
        self.last_variant = variant
        like = next(iter(given.values()), None)
        outputs = {}
        for t in self.kernel.params:
            if t.role.written:
                outputs[t.name] = given.get(t.name)
                if outputs[t.name] is None:
                    outputs[t.name] = ar.empty_like_library(like, binding.shapes[t.name],
                                                            t.dtype.value)
        if mode == "interp":
            self._run_interp(b, binding, outputs)
        else:
            self._run_cuda(b, binding, outputs, mode, index)
        result = tuple(outputs[n] for n in contract.written(self.kernel))
        return result[0] if len(result) == 1 else result

    def _mode(self, given: Mapping[str, Any]) -> tuple[str, int]:
        """"interp", "host" (copies through the GPU) or "direct" (torch CUDA tensors in
        place), and the CUDA device index."""
        infos = {n: ar.describe(v) for n, v in given.items()}
        cuda = sorted(n for n, i in infos.items() if i.library == "torch" and i.on_gpu)
        host = sorted(n for n in infos if n not in cuda)
        if cuda and host:
            raise JitError([Diagnostic(DEVICE, f"CUDA tensors ({', '.join(cuda)}) mixed with host "
                                       f"arrays ({', '.join(host)}) in one call",
                                       self.kernel.span)])
        if self.device == "interp":
            return "interp", 0
        if cuda:
            device = infos[cuda[0]].device
            return "direct", int(device.split(":")[1]) if ":" in device else 0
        why = _gpu_unavailable()
        if why is None:
            return "host", 0
        if self.device == "gpu":
            raise JitError([Diagnostic(DEVICE, f"device='gpu' but no GPU can be used: {why}",
                                       self.kernel.span)])
        return "interp", 0

    def _run_interp(self, b: Build, binding: contract.Binding, outputs: dict[str, Any]) -> None:
        from tilesafe.jit import interp_run

        arrays = {n: ar.to_numpy(v, self.kernel.tensor(n).dtype.value)
                  for n, v in binding.given.items()}
        results = interp_run.run(b.kernel, binding.sizes, binding.shapes, binding.grid, arrays)
        for name, value in results.items():
            ar.write_back(outputs[name], value, self.kernel.tensor(name).dtype.value)

    def _spec(self, b: Build, binding: contract.Binding) -> Any:
        from tilesafe.codegen.plan import ContractError
        from tilesafe.codegen.plan import bind as plan_bind

        # a launch is a function of the build and the sizes: kept, so that repeated shapes
        # (a serving loop) do not re-derive it (0.6 ms a call on the MoE layer's GEMM)
        key = (id(b), tuple(sorted(binding.sizes.items())))
        spec = self._specs.get(key)
        if spec is not None:
            return spec
        try:
            spec = plan_bind(b.kernel, b.compiled, binding.sizes)
        except ContractError as err:
            raise JitError([Diagnostic(WHERE, str(err), self.kernel.span)]) from None
        if len(self._specs) >= SPEC_CACHE:
            self._specs.pop(next(iter(self._specs)))
        self._specs[key] = spec
        return spec

    def _run_cuda(self, b: Build, binding: contract.Binding, outputs: dict[str, Any],
                  mode: str, index: int) -> None:
        from tilesafe.gpu.driver import DriverError
        from tilesafe.jit.cuda_run import CudaRunner

        spec = self._spec(b, binding)
        if self._runner is None:
            self._runner = CudaRunner()
        try:
            if mode == "direct":
                import torch

                tensors = {**binding.given, **outputs}
                pointers = {n: int(t.data_ptr()) for n, t in tensors.items()}
                stream = torch.cuda.current_stream(tensors[next(iter(tensors))].device)
                self._runner.launch(spec, pointers, index, int(stream.cuda_stream))
                return
            arrays = {n: ar.to_numpy(v, self.kernel.tensor(n).dtype.value)
                      for n, v in binding.given.items()}
            for t in self.kernel.params:
                if t.name not in arrays:
                    arrays[t.name] = ar.to_numpy(outputs[t.name], t.dtype.value)
            upload = {t.name for t in self.kernel.params if t.role is not ir.ParamRole.OUT}
            results = self._runner.run_host(spec, arrays, upload, index)
        except (DriverError, RuntimeError) as err:
            raise JitError([Diagnostic(LAUNCH, f"kernel '{self.kernel.name}' on the GPU: {err}",
                                       self.kernel.span)]) from None
        for name, value in results.items():
            ar.write_back(outputs[name], value, self.kernel.tensor(name).dtype.value)

    # ---- torch ------------------------------------------------------------------------------

    def torch_op(self, name: str | None = None) -> Any:
        """This kernel as a torch.library custom op `tilesafe::NAME` (registered once), with
        a fake implementation for shapes so that torch.compile traces through it."""
        if self._op is None:
            from tilesafe.jit.torch_op import register

            self._op = register(self, name)
        return self._op

    def __repr__(self) -> str:
        state = "verified" if self.verified else "UNVERIFIED"
        return (f"<tilesafe.jit kernel '{self.kernel.name}' from {self.source.path} ({state}, "
                f"{len(self.variants)} variant(s), device={self.device})>")


def jit(path_or_source: str | Path, kernel: str | None = None, *, device: str = "auto",
        unverified: bool = False, cache: bool | str | Path = True, options: Any = None
        ) -> JitKernel:
    """A proved kernel as a callable (docs/jit.md).

    `path_or_source`: a .tsk file, or its text. `kernel`: which kernel of the file (needed
    when it has several). `device`: "auto" (torch CUDA tensors in place; host arrays on the
    GPU when one is usable, else the reference interpreter), "gpu" or "interp". Raises
    DiagnosticError when the file does not load, JitError TS909 when the verification gate
    refuses the kernel -- unless `unverified=True`, which builds it anyway and warns
    (JitWarning). `cache`: True (TILESAFE_CACHE_DIR or the user's cache directory), a
    directory, or False. `options`: the checkers' CheckOptions (budgets)."""
    try:
        return JitKernel(Source.of(path_or_source), kernel, device=device,
                         unverified=unverified, cache=cache, options=options)
    except DiagnosticError as err:
        if isinstance(err, JitError):
            raise
        raise JitError(list(err.diagnostics)) from None
