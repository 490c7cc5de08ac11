"""The compile cache on disk: a verified kernel's PTX and the summary of its proof, so that a
second process neither re-verifies nor recompiles.

Why the key holds what it holds: the PTX and the verdicts depend on the kernel's source,
the kernel chosen, the specialisation's facts, the gate (`unverified` changes the PTX's
banner), the checkers' budgets, and tilesafe itself -- its version and, since a version
number does not change while the code does, a fingerprint of its own source files. Any of
them changing is a different key: the old entry is never consulted (stale by construction).

Why a hash inside each entry: a file can be cut short by a crash or edited by hand; an
entry whose payload does not hash to its recorded digest, that does not parse, or whose
recorded key differs from the one asked for is reported and rebuilt, never trusted. Writes
go to a temporary file renamed into place, so a reader sees a whole entry or none.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

FORMAT = 1
ENV = "TILESAFE_CACHE_DIR"


def default_dir() -> Path:
    """TILESAFE_CACHE_DIR, else the platform's user cache directory + tilesafe/jit."""
    env = os.environ.get(ENV)
    if env:
        return Path(env)
    if sys.platform == "win32":
        base = Path(os.environ.get("LOCALAPPDATA") or Path.home() / "AppData" / "Local")
    elif sys.platform == "darwin":
        base = Path.home() / "Library" / "Caches"
    else:
        base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "tilesafe" / "jit"


@functools.lru_cache(maxsize=1)
def code_fingerprint() -> str:
    """A digest of tilesafe's own Python and grammar sources (every mapped package)."""
    import tilesafe

    h = hashlib.sha256()
    roots = sorted({Path(p).resolve() for name in _PACKAGES
                    for p in getattr(_import(name), "__path__", [])})
    for root in roots:
        for path in sorted(root.rglob("*")):
            if path.suffix in (".py", ".lark") and "__pycache__" not in path.parts:
                h.update(str(path.relative_to(root)).encode())
                h.update(path.read_bytes())
    h.update(tilesafe.__version__.encode())
    return h.hexdigest()[:32]


_PACKAGES = ("tilesafe", "tilesafe.frontend", "tilesafe.semantics", "tilesafe.checkers",
             "tilesafe.codegen", "tilesafe.proofs", "tilesafe.grammar", "tilesafe.jit",
             "tilesafe.gpu")


def _import(name: str) -> Any:
    import importlib

    return importlib.import_module(name)


@dataclass(frozen=True)
class CacheKey:
    """Everything a cached build depends on (see the module docstring)."""

    source_sha: str
    kernel: str
    facts: tuple[str, ...]  # the variant's facts as text; () for the general kernel
    unverified: bool
    options: str  # the checkers' budgets, as text
    version: str
    code: str

    def digest(self) -> str:
        return hashlib.sha256(json.dumps(self.record(), sort_keys=True).encode()).hexdigest()

    def record(self) -> dict[str, Any]:
        d = asdict(self)
        d["facts"] = list(self.facts)
        return d


def _payload_digest(payload: Mapping[str, Any]) -> str:
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


@dataclass(frozen=True)
class Lookup:
    """What the cache said: `payload` (None on a miss) and, for an entry that could not be
    trusted, why (`rejected`)."""

    payload: Mapping[str, Any] | None
    rejected: str = ""


class CompileCache:
    """One directory of entries, one JSON file per key digest."""

    def __init__(self, root: str | Path | None = None) -> None:
        self.root = Path(root) if root is not None else default_dir()

    def path(self, key: CacheKey) -> Path:
        digest = key.digest()
        return self.root / digest[:2] / f"{digest}.json"

    def load(self, key: CacheKey) -> Lookup:
        path = self.path(key)
        try:
            text = path.read_text(encoding="utf-8")
        except (FileNotFoundError, NotADirectoryError):
            return Lookup(None)
        except OSError as err:
            return Lookup(None, f"unreadable ({err})")
        why = _problem(text, key)
        if why:
            try:
                path.unlink()
            except OSError:
                pass
            return Lookup(None, why)
        return Lookup(json.loads(text)["payload"])

    def store(self, key: CacheKey, payload: Mapping[str, Any]) -> Path | None:
        """Write an entry atomically; None (and no exception) when the directory is not
        writable: a cache that cannot be written only costs time."""
        path = self.path(key)
        doc = {"format": FORMAT, "key": key.record(), "payload": dict(payload),
               "sha256": _payload_digest(payload)}
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".json")
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(doc, f, sort_keys=True)
            os.replace(tmp, path)
        except OSError:
            return None
        return path


def _problem(text: str, key: CacheKey) -> str:
    """Why an entry's text cannot be trusted for `key` ("" when it can)."""
    try:
        doc = json.loads(text)
    except ValueError:
        return "corrupt (not JSON)"
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        return "stale (another entry format)"
    if doc.get("key") != key.record():
        return "stale (written for another key)"
    payload = doc.get("payload")
    if not isinstance(payload, dict) or doc.get("sha256") != _payload_digest(payload):
        return "corrupt (the payload does not match its digest)"
    return ""
