"""The jit compile cache (docs/jit.md): a second process neither re-verifies nor recompiles;
a corrupted, tampered or stale entry is detected, rebuilt and reported, never trusted."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import numpy as np
import pytest

import tilesafe
from tilesafe.jit import JitWarning
from tilesafe.jit.cache import ENV, CacheKey, CompileCache, default_dir

ROOT = Path(__file__).resolve().parent.parent
SAXPY = ROOT / "corpus" / "good" / "elementwise.tsk"

# Run in a fresh interpreter: build (or load) the kernel, call it, and say whether any
# verification or code generation module was imported in this process at all.
CHILD = textwrap.dedent("""
    import json, sys
    import numpy as np
    import tilesafe
    k = tilesafe.jit(sys.argv[1], device="interp")
    z = k(np.array([2.0], np.float32), np.arange(40, dtype=np.float32),
          np.ones(40, np.float32))
    print(json.dumps({
        "cache": k.cache, "ok": bool(np.array_equal(z, 2 * np.arange(40) + 1)),
        "verified": k.verified,
        # the api imports the Obligation record; any checker proper means verification ran
        "checkers": sorted(m for m in sys.modules if m.startswith("tilesafe.checkers.")
                           and m != "tilesafe.checkers.obligation"),
        "codegen": sorted(m for m in sys.modules if m.startswith("tilesafe.codegen.lower")
                          or m.startswith("tilesafe.codegen.validate")),
    }))
""")


def _child(cache: Path) -> dict:
    r = subprocess.run([sys.executable, "-c", CHILD, str(SAXPY)], capture_output=True,
                       text=True, timeout=600, env={**_env(), ENV: str(cache)}, check=False)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def _env() -> dict:
    import os

    return dict(os.environ)


def _entries(cache: Path) -> list[Path]:
    return sorted(cache.rglob("*.json"))


def test_a_second_process_hits_the_cache_and_does_not_verify(tmp_path):
    first = _child(tmp_path)
    assert first["cache"] == {"general": "built"} and first["ok"] and first["verified"]
    assert first["checkers"] and first["codegen"]  # the first one did verify and compile
    second = _child(tmp_path)
    assert second["cache"] == {"general": "cache"} and second["ok"] and second["verified"]
    assert second["checkers"] == [] and second["codegen"] == []


def test_entry_holds_ptx_and_proof_with_a_payload_digest(tmp_path):
    k = tilesafe.jit(SAXPY, device="interp", cache=tmp_path)
    (entry,) = _entries(tmp_path)
    doc = json.loads(entry.read_text())
    assert doc["key"]["kernel"] == "elementwise" and doc["key"]["facts"] == []
    assert doc["payload"]["compiled"]["ptx"] == k.ptx
    assert doc["payload"]["proof"]["counts"] == dict(k.proof.counts)
    assert len(doc["sha256"]) == 64


@pytest.mark.parametrize("damage", ["truncate", "flip_ptx", "other_key", "not_json"])
def test_a_damaged_entry_is_rebuilt_and_reported(tmp_path, damage):
    original = tilesafe.jit(SAXPY, device="interp", cache=tmp_path).ptx
    (entry,) = _entries(tmp_path)
    text = entry.read_text()
    doc = json.loads(text)
    if damage == "truncate":
        entry.write_text(text[: len(text) // 2])
    elif damage == "flip_ptx":  # tampered PTX: the digest no longer matches
        doc["payload"]["compiled"]["ptx"] = doc["payload"]["compiled"]["ptx"].replace(
            "add", "sub", 1)
        entry.write_text(json.dumps(doc))
    elif damage == "other_key":  # an entry for another source under this name
        doc["key"]["source_sha"] = "0" * 64
        entry.write_text(json.dumps(doc))
    else:
        entry.write_text("\0\0garbage")
    with pytest.warns(JitWarning, match="rebuilt"):
        k = tilesafe.jit(SAXPY, device="interp", cache=tmp_path)
    assert k.cache["general"].startswith("built (cached entry rejected:")
    assert k.ptx == original  # rebuilt from the source, not taken from the damaged entry
    fresh = json.loads(entry.read_text())  # rewritten whole
    assert fresh["payload"]["compiled"]["ptx"] == k.ptx
    again = tilesafe.jit(SAXPY, device="interp", cache=tmp_path)
    assert again.cache == {"general": "cache"}


def test_the_key_separates_sources_facts_gate_and_code():
    base = CacheKey("s" * 64, "k", (), False, "None", "0.1.0", "c" * 32)
    others = [CacheKey("t" * 64, "k", (), False, "None", "0.1.0", "c" * 32),
              CacheKey("s" * 64, "k2", (), False, "None", "0.1.0", "c" * 32),
              CacheKey("s" * 64, "k", ("N <= 64",), False, "None", "0.1.0", "c" * 32),
              CacheKey("s" * 64, "k", (), True, "None", "0.1.0", "c" * 32),
              CacheKey("s" * 64, "k", (), False, "Opts(1)", "0.1.0", "c" * 32),
              CacheKey("s" * 64, "k", (), False, "None", "0.2.0", "c" * 32),
              CacheKey("s" * 64, "k", (), False, "None", "0.1.0", "d" * 32)]
    digests = {base.digest()} | {o.digest() for o in others}
    assert len(digests) == 1 + len(others)


def test_an_edited_source_is_a_miss(tmp_path):
    text = SAXPY.read_text()
    tilesafe.jit(text, device="interp", cache=tmp_path)
    k = tilesafe.jit(text + "\n// edited\n", device="interp", cache=tmp_path)
    assert k.cache == {"general": "built"} and len(_entries(tmp_path)) == 2


def test_refusals_are_cached_too(tmp_path):
    from tilesafe.jit import JitError

    bad = ROOT / "corpus" / "bad" / "ts201_tail_read_oob.tsk"
    for _ in range(2):
        with pytest.raises(JitError, match="TS909"):
            tilesafe.jit(bad, device="interp", cache=tmp_path)
    (entry,) = _entries(tmp_path)
    assert json.loads(entry.read_text())["payload"]["compiled"] is None


def test_default_dir_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv(ENV, str(tmp_path / "c"))
    assert default_dir() == tmp_path / "c"
    monkeypatch.delenv(ENV)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    if sys.platform.startswith("linux"):
        assert default_dir() == tmp_path / "xdg" / "tilesafe" / "jit"


def test_an_unwritable_cache_only_costs_time(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    cache = CompileCache(blocker / "sub")
    key = CacheKey("s", "k", (), False, "None", "v", "c")
    assert cache.store(key, {"x": 1}) is None and cache.load(key).payload is None
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a cache that cannot exist is a miss, not damage
        k = tilesafe.jit(SAXPY, device="interp", cache=blocker / "sub")
    z = k(np.ones(1, np.float32), np.ones(4, np.float32), np.ones(4, np.float32))
    assert np.all(z == 2)
