"""One array for values that many optimiser leaves hold alike.

Optimisers.jl keeps a rule's state per array: Adam's `βt`, RAdam's step, AccumGrad's counter and every
hyperparameter exist once for each parameter. Leaves that are set up and stepped together hold equal
values, so inside a `sharing()` scope (`setup`, `update_`, `adjust_`) such values are made once and
the very same array goes to every leaf. The numbers are Optimisers.jl's, since a leaf that is not
stepped (a `None` gradient, a frozen leaf) keeps its own array. What the sharing buys is in
`fluxjax.jit`: it passes one array that several slots hold as one input and returns one output for
them, so a compiled step has one `βt` update, not one per parameter (on a CPU those small
computations cost more than the tiny model's maths).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from typing import Any

import jax
import numpy as np

_tls = threading.local()
_BY_IDENTITY = (jax.Array, np.ndarray)  # arrays are keyed by identity (a NumPy array is not hashable)


@contextlib.contextmanager
def sharing() -> Iterator[None]:
    """A scope in which `once` remembers its results; nested scopes share the outermost one."""
    if getattr(_tls, "memo", None) is not None:
        yield
        return
    _tls.memo = {}
    try:
        yield
    finally:
        _tls.memo = None


def once(fn: Callable, *args: Any) -> Any:
    """`fn(*args)`, made once per `sharing()` scope for the same arguments: arrays (and tracers) count
    as the same when they are the same object, anything else when equal. Outside a scope, `fn(*args)`."""
    memo = getattr(_tls, "memo", None)
    if memo is None:
        return fn(*args)
    key = (fn, *((id(a), None) if isinstance(a, _BY_IDENTITY) else (a, type(a)) for a in args))
    hit = memo.get(key)
    if hit is None:
        hit = memo[key] = (args, fn(*args))  # the arguments stay alive, so their ids are not reused
    return hit[1]


def select(pred: Any, on_true: Any, on_false: Any) -> Any:
    """`where(pred, on_true, on_false)` leaf by leaf over two trees of one structure; a leaf that is the
    same in both stays itself, and leaves that were shared stay shared (within a `sharing()` scope)."""
    out = jax.tree_util.tree_map(lambda a, b: a if a is b else once(jax.numpy.where, pred, a, b), on_true, on_false)
    return _in_order_of(on_true, out)


def _in_order_of(template: Any, tree: Any) -> Any:
    """`tree` with every dict in the key order of `template`'s (jax rebuilds dicts with sorted keys, which
    would change the structure a compiled program is keyed on, and a rule's state as Python sees it)."""
    if type(template) is dict and type(tree) is dict:
        return {k: _in_order_of(template[k], tree[k]) for k in template}
    if isinstance(template, (tuple, list)) and type(tree) is type(template) and len(tree) == len(template):
        items = [_in_order_of(a, b) for a, b in zip(template, tree)]
        if all(a is b for a, b in zip(items, tree)):
            return tree
        return type(tree)(*items) if hasattr(tree, "_fields") else type(tree)(items)
    return tree
