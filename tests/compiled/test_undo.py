"""`core.undo.Contents`: what a failed trace changed in the user's lists, dicts, sets and objects is put
back, and nothing else is touched (property test: random nested state, random changes, then restore)."""

from __future__ import annotations

import copy
import types

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from fluxjax.core.undo import Contents


class _Slotted:
    __slots__ = ("a", "b")


def _state(draw) -> object:
    """Nested lists, dicts, sets, tuples, namespaces and a slotted object over small ints."""
    leaf = st.integers(-3, 3)
    tree = st.recursive(
        leaf,
        lambda inner: st.one_of(
            st.lists(inner, max_size=3),
            st.dictionaries(st.sampled_from("xyz"), inner, max_size=3),
            st.tuples(inner, inner),
            st.builds(lambda d: types.SimpleNamespace(**d), st.dictionaries(st.sampled_from("pq"), inner, max_size=2)),
        ),
        max_leaves=12,
    )
    return draw(tree)


def _containers(v, out):
    """Every mutable container or object inside `v`, in a fixed order."""
    if isinstance(v, (list, dict, types.SimpleNamespace)):
        out.append(v)
    inner = v if isinstance(v, (list, tuple)) else v.values() if isinstance(v, dict) else \
        vars(v).values() if isinstance(v, types.SimpleNamespace) else ()
    for e in inner:
        _containers(e, out)
    return out


def _mutate(target, how: int, value: int) -> None:
    if isinstance(target, list):
        (target.append(value) if how % 3 == 0 else target.clear() if how % 3 == 1 else target.insert(0, [value]))
    elif isinstance(target, dict):
        target["w" if how % 2 else "x"] = value
    else:
        setattr(target, "r" if how % 2 else "p", value)


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_restore_puts_back_every_change_and_keeps_identity(data):
    root = _state(data.draw)
    root = [root, {"again": root}]  # the same object reached twice
    want = copy.deepcopy(root)
    inner = _containers(root, [])
    ids_before = [id(c) for c in inner]
    c = Contents([root])
    for how, value in data.draw(st.lists(st.tuples(st.integers(0, 5), st.integers(10, 20)), max_size=4)):
        _mutate(inner[how % len(inner)], how, value)
    c.restore()
    assert _plain(root) == _plain(want)
    assert [id(x) for x in _containers(root, [])] == ids_before  # the same objects, not copies


def _plain(v):
    if isinstance(v, types.SimpleNamespace):
        return ("ns", {k: _plain(e) for k, e in vars(v).items()})
    if isinstance(v, dict):
        return {k: _plain(e) for k, e in v.items()}
    if isinstance(v, (list, tuple)):
        return (type(v).__name__, [_plain(e) for e in v])
    return v


def test_sets_slots_cycles_and_what_is_left_alone():
    s = _Slotted()
    s.a = 1  # `b` unset
    tags = {1, 2}
    cyc: list = [tags]
    cyc.append(cyc)
    arr = np.zeros(3)
    holder = types.SimpleNamespace(arr=arr, f=len)
    c = Contents([s, cyc, holder])
    s.a, s.b = 5, 6
    tags.add(3)
    cyc.append(0)
    arr[0] = 9.0  # a NumPy array's data is not recorded
    holder.extra = 1
    c.restore()
    assert s.a == 1 and not hasattr(s, "b")
    assert tags == {1, 2} and len(cyc) == 2 and cyc[1] is cyc
    assert holder.arr is arr and arr[0] == 9.0 and not hasattr(holder, "extra")
