"""The explorer package's contracts: every instruction kind has its meaning registered
once, named states hash and compare exactly as the tuples they replaced (so state counts
and search orders are those of the tuple encoding), and the fixed order of tail roots is
the printed form of those tuples."""

from __future__ import annotations

import dataclasses
import inspect
from pathlib import Path

import pytest

from tilesafe.frontend.load import load_program
from tilesafe.semantics.hw import mbarrier as mb
from tilesafe.semantics.temporal import instrs
from tilesafe.semantics.temporal.events import build_model
from tilesafe.semantics.temporal.explore import Machine, search
from tilesafe.semantics.temporal.explore import state as state_mod
from tilesafe.semantics.temporal.explore.ops import FAMILIES, Family, Hooks
from tilesafe.semantics.temporal.explore.ops.base import Op
from tilesafe.semantics.temporal.explore.state import (
    BarRec,
    Perm,
    State,
    by_class,
    load_copy,
    order_key,
    store_copy,
    unfenced,
)

ROOT = Path(__file__).resolve().parent.parent


def _records() -> list[type]:
    """Every concrete instruction kind a program can hold (not the abstract bases)."""
    out = []
    for _, cls in inspect.getmembers(instrs, inspect.isclass):
        if (issubclass(cls, instrs.Instr) and dataclasses.is_dataclass(cls)
                and cls.op and not issubclass(cls, instrs.Control)):
            out.append(cls)
    return out


def test_every_event_record_has_exactly_one_op():
    registered = [r for fam in FAMILIES for r in fam.ops]
    assert len(registered) == len(set(registered))
    missing = [r.__name__ for r in _records() if r not in registered]
    assert not missing
    assert {r.op for r in registered} >= {"wait", "arrive", "tma_load", "access", "sync", "end"}


def test_a_record_registered_twice_is_refused():
    model = build_model(load_program(ROOT / "corpus/good/tma_copy_single.tsk").kernels[0],
                        False)
    m = Machine(model, {})
    twice = Family("twice", {instrs.Wait: Op})
    with pytest.raises(ValueError, match="Wait"):
        Hooks(m, FAMILIES + (twice,))


def _plain(x):
    """The value as nested plain tuples (MbarrierState kept: it was a named tuple before)."""
    if isinstance(x, mb.MbarrierState):
        return x
    if isinstance(x, tuple):
        return tuple(_plain(y) for y in x)
    if isinstance(x, frozenset):
        return frozenset(_plain(y) for y in x)
    return x


def _example() -> State:
    return State(((3, (1,)), (0, ())), (BarRec(mb.MbarrierState().init(2), 0, True, 1),),
                 (-1, 0), (load_copy(0, 128, True, (0, 1)), store_copy(1, 0, (2,), 8)),
                 (Perm(frozenset({(by_class(0), 5)}), (unfenced(1, False),)),), (0,), (1,),
                 ((), (0,)), ((0, 2, 0), (0, 0, 0)), (), ((((1, 1),), 0), ((), 1)))


def test_named_state_hashes_and_compares_as_its_tuples():
    st = _example()
    plain = _plain(st)
    assert type(plain) is tuple and st == plain and hash(st) == hash(plain)
    assert {st: 1}[plain] == 1


def _as_tuples(monkeypatch: pytest.MonkeyPatch) -> None:
    """Print every state record as the plain tuple it was (frozensets keep their own
    iteration order, so this is exactly how the tuple encoding printed)."""
    for cls in vars(state_mod).values():
        if isinstance(cls, type) and issubclass(cls, tuple) and hasattr(cls, "_fields") \
                and cls is not mb.MbarrierState:
            monkeypatch.setattr(cls, "__repr__", tuple.__repr__)


def test_order_key_is_the_printed_plain_state(monkeypatch: pytest.MonkeyPatch):
    st = _example()
    key = order_key(st)
    _as_tuples(monkeypatch)
    assert key == repr(st) == repr(_plain(st))


@pytest.mark.parametrize("name", ["tma_copy_ring.tsk", "tma_store_pipeline.tsk",
                                  "named_handoff.tsk"])
def test_reached_states_are_plain_comparable(name: str, monkeypatch: pytest.MonkeyPatch):
    """States a search reaches hash like their plain tuples and sort by order_key alone
    (the roots of a tail search), so no order depends on the record types."""
    kernel = load_program(ROOT / "corpus/good" / name).kernels[0]
    model = build_model(kernel, True)
    sizes = {s: 128 for s in kernel.sizes}
    m = Machine(model, sizes)
    res = search(m, [m.initial()], True, 5_000)
    assert res.stats.states > 1
    states = list(res.visited)[:200]
    keys = [order_key(st) for st in states]
    _as_tuples(monkeypatch)
    for st, key in zip(states, keys, strict=True):
        assert isinstance(st, State) and st == _plain(st) and hash(st) == hash(_plain(st))
        assert key == repr(st)
        # The parts a state holds many of are exact tuples: the cyclic collector stops
        # tracking those (never a tuple subclass), so big searches do not slow every
        # collection down (state.py).
        assert all(type(p) is tuple for p in st.agents + st.wins)
        assert all(type(k) is tuple for perm in st.perms for k, _ in perm.holders)
        assert all(type(u) is tuple for perm in st.perms for u in perm.unfenced)
