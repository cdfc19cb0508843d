"""One cache entry of `fluxjax.jit`: the compiled program for one structure of the arguments (jax
retraces it per input shapes), what it writes beside its inputs, and its output structures."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import jax

from ..core.layer import LAYER_TYPES
from ..core.region import Checked
from ..core.walk import Slot, node_children
from ..errors import NonFiniteNorm
from .options import with_defaults

_MANY = object()  # an entry whose programs (one per input shapes) return differently structured outputs


# zygote's dict type that keeps a dict's key order through jax (`_Ordered`), its `plain_order`, which
# gives a result that is not traced any more plain dicts back, and its `keep_order`, which makes a
# result's dicts (in tuples, lists, dicts and gradients) `_Ordered`
_ORDERED: list = []


def use_plain_order(dict_type: type, plain_order: Callable[[Any], Any], keep_order: Callable[[Any], Any]) -> None:
    """Called by fluxjax.zygote.plan: a result's dicts keep their key order (`shared_output`)."""
    _ORDERED[:] = [dict_type, plain_order, keep_order]


class SharedOutput:
    """The output structure of a program whose result holds one value or one layer at several places
    (a model with a tied array or a tied layer, or its optimiser state, returned): the program returns
    each array once, and `unflatten` puts it at each of its places and makes each tied layer one object
    again, so that the result is tied as the eager call's is (jax's unflatten makes one per place).
    Also the structure of a result holding zygote's order-keeping dicts, which `unflatten` gives back
    as plain dicts (`use_plain_order`)."""

    __slots__ = ("treedef", "at", "num_leaves", "layers", "ties", "ordered")

    def __init__(self, treedef: Any, at: tuple[int, ...], layers: tuple, ordered: bool = False):
        self.treedef, self.at = treedef, at  # at[i]: which of the program's outputs the i-th leaf is
        self.num_leaves = max(at, default=-1) + 1
        self.layers = layers  # see `_layer_ties`
        self.ties = {place: (first, size) for place, first, size in layers}
        self.ordered = ordered

    def unflatten(self, leaves: Sequence) -> Any:
        out = self.treedef.unflatten([leaves[i] for i in self.at])
        if self.ties:
            out = _retie(out, self.ties, [0], [])
        return _ORDERED[1](out) if self.ordered else out  # (a traced result keeps them)

    def __eq__(self, other: object) -> bool:
        return (type(other) is SharedOutput and other.treedef == self.treedef and other.at == self.at
                and other.layers == self.layers and other.ordered == self.ordered)

    def __hash__(self) -> int:
        return hash((self.treedef, self.at))


def shared_output(result: Any) -> tuple[list, Any]:
    """`(leaves, treedef)` of a traced result, each value once, its tied layers noted (`SharedOutput`),
    its dicts in their own key order: jax rebuilds a dict with sorted keys, so `{"loss": l, "acc": a}`
    would come back as `acc, loss` (`.values()` swapped), a gradient's dict as the sorted names."""
    if _ORDERED:
        result = _ORDERED[2](result)
    leaves, treedef = jax.tree_util.tree_flatten(result)
    at: dict[int, int] = {}
    where = tuple(at.setdefault(id(x), len(at)) for x in leaves)
    layers = _layer_ties(result)
    ordered = bool(_ORDERED) and _holds_ordered(result)
    if len(at) == len(leaves) and not layers and not ordered:
        return leaves, treedef
    return list({id(x): x for x in leaves}.values()), SharedOutput(treedef, where, layers, ordered)


def _holds_ordered(v: Any) -> bool:
    if type(v) is _ORDERED[0]:
        return True
    kids = _children(v) if type(v) not in LAYER_TYPES else None
    return kids is not None and any(_holds_ordered(e) for e in kids)


def _children(v: Any) -> list | None:
    """What `_layer_ties` and `_retie` enter: a layer's fields, a list's, tuple's or dict's items (a
    dict's in key order, as jax rebuilds it), another pytree node's children (a gradient's `Tangent`,
    an optimiser state's); None for an array or another leaf."""
    t = type(v)
    if t in LAYER_TYPES:
        return list(v.__dict__.values())
    if t is list or isinstance(v, tuple):
        return list(v)
    if t is dict:
        return [v[k] for k in sorted(v)]
    if v is None or isinstance(v, jax.Array):
        return None
    sub, treedef = node_children(v)
    return None if treedef.num_leaves == 1 and treedef.num_nodes == 1 and sub and sub[0] is v else list(sub)


def _layer_ties(result: Any) -> tuple:
    """Every layer in `result`, each place it is reached at numbered in order (a layer inside a tied one
    once per place): `((place, its first place, places in its subtree), ...)` for the places of layers
    already reached, empty when no layer is reached twice."""
    first: dict[int, int] = {}
    ties: list = []
    n = [0]

    def go(v: Any) -> None:
        kids = _children(v)
        if kids is None:
            return
        if type(v) in LAYER_TYPES:
            place = n[0]
            n[0] += 1
            j = first.setdefault(id(v), place)
            for e in kids:
                go(e)
            if j != place:
                ties.append((place, j, n[0] - place - 1))
            return
        for e in kids:
            go(e)

    go(result)
    return tuple(sorted(ties))


def _retie(v: Any, ties: dict, n: list, made: list) -> Any:
    """`v` (a result jax unflattened) with each tied layer one object: the layer made at its first place."""
    kids = _children(v)
    if kids is None:
        return v
    t = type(v)
    if t in LAYER_TYPES:
        place = n[0]
        n[0] += 1
        made.append(v)
        tie = ties.get(place)
        if tie is not None:
            n[0] += tie[1]  # its subtree is the first place's
            return made[tie[0]]
        for k, e in list(v.__dict__.items()):
            new = _retie(e, ties, n, made)
            if new is not e:
                v.__dict__[k] = new
        return v
    new_kids = [_retie(e, ties, n, made) for e in kids]
    if all(a is b for a, b in zip(new_kids, kids)):
        return v
    if t is list:
        v[:] = new_kids
        return v
    if t is dict:
        return {k: dict(zip(sorted(v), new_kids))[k] for k in v}
    if isinstance(v, tuple):
        return t(*new_kids) if hasattr(v, "_fields") else t(new_kids)
    return node_children(v)[1].unflatten(new_kids)


class Entry:
    """One cache entry: the program for one structure of the arguments (jax retraces it per shapes)."""

    __slots__ = ("top", "_nested", "_pure", "_jit_kwargs", "extra_slots", "extra_index", "out_trees", "out_tree",
                 "current", "effects", "shared", "split", "traces", "unused_plans", "last_walked", "wrote_fields")

    def __init__(self, pure: Callable, jit_kwargs: dict, shared: tuple | None, split: tuple | None):
        self._pure, self._jit_kwargs = pure, jit_kwargs
        self.top = jax.jit(pure, **with_defaults(jit_kwargs))
        self._nested = None
        # what the function rebinds that is not among its inputs: a slot of a layer of the walk as
        # (layer's index, key, attr, path), resolved in each call's walk; any other as its `Slot`
        self.extra_slots: list[Slot | tuple] = []
        self.extra_index: dict[tuple, int] = {}
        self.out_trees: dict[tuple, Any] = {}  # input avals -> output structure
        self.out_tree: Any = None  # the one output structure, or _MANY
        self.current: tuple | None = None  # (box, walk, statics) of the call being traced
        self.effects: bool | None = None  # whether the program has side effects (known once traced)
        self.shared = shared  # see _sharing_pattern
        self.split = split  # (donated inputs, kept inputs) when the caller donates arguments
        self.traces = 0  # how many times the function has been traced for this entry
        self.unused_plans = 0  # plans of this entry made since one was last reused (see Jitted._worth_a_plan)
        self.last_walked: tuple = ()  # the models and function code of the entry's last call that walked
        # fields of the models the trace set (`self.initialized = True`): the program, which runs none
        # of that code, is used for the call that traced it only (fluxjax.core.static_writes)
        self.wrote_fields: list[str] = []

    def program(self, top: bool) -> Callable:
        """The compiled program: with fluxjax's compiler options at top level; without them under
        another trace (`jax.jit` takes compiler options only at top level)."""
        if top:
            return self.top
        if self._nested is None:
            self._nested = jax.jit(self._pure, **self._jit_kwargs)
        return self._nested

    def note_output(self, leaves: Sequence, tree: Any) -> None:
        """At trace time: the output structure for these (traced) inputs."""
        self.traces += 1
        self.out_trees[_avals(leaves)] = tree
        self.out_tree = tree if self.out_tree is None or (self.out_tree is not _MANY and self.out_tree == tree) else _MANY

    def extra_slot(self, k: int, w: Any) -> Slot:
        """Where the program's `k`-th extra output goes in the call whose walk is `w`."""
        s = self.extra_slots[k]
        if type(s) is tuple:
            i, key, attr, path = s
            return Slot(w.layer_list[i], key, attr, path)
        return s

    def call(self, leaves: list, top: bool = True) -> tuple[list, dict, dict, Any]:
        """Run the program on its inputs (`top`: no trace is under way): `(output leaves, changed,
        extra, output structure, checked)`, `checked` the `Checked` of the checks its trace noted, or
        None (see `act_on_checks`)."""
        program = self.top if top else self.program(top)
        if self.split is None and self.effects is False:  # the common case, kept short
            out_leaves, changed, extra, checked = program(leaves)
            tree = self.out_tree
            return out_leaves, changed, extra, (self.out_trees[_avals(leaves)] if tree is _MANY else tree), checked
        args = (leaves,) if self.split is None else tuple([leaves[i] for i in part] for part in self.split)
        if self.effects is None:  # jax caches this trace: the call below does not trace again
            self.effects = bool(program.trace(*args).jaxpr.effects)
        out_leaves, changed, extra, checked = program(*args)
        if self.effects:
            # a host callback can fail after dispatch returns: its error must surface before
            # anything is written back, not on some later read of the model
            try:
                jax.block_until_ready((out_leaves, changed, extra))
            except Exception:
                _forget_failed_tokens()
                raise
        tree = self.out_tree
        if tree is _MANY:
            tree = self.out_trees[_avals(leaves)]
        return out_leaves, changed, extra, tree, checked


def act_on_checks(checked: Checked | None, top: bool) -> None:
    """After a call whose trace noted checks on traced values (`Checked`; ClipNorm's finite norm): at
    top level, raise the first failed one's error (the program put back every write of the call, so
    the model and its state are as they were); under an enclosing trace, note them in its region,
    whose runner acts on them (`train_`'s step, an enclosing `fluxjax.jit`)."""
    if checked is None:
        return
    if not top:
        checked.note()
    elif (message := checked.error()) is not None:
        raise NonFiniteNorm(f"fluxjax.jit: {message}; this call was not applied: the model and its state are "
                            "as they were before it")


def _avals(leaves: Sequence) -> tuple:
    out = []
    for x in leaves:
        a = jax.typeof(x)
        out.append((a.shape, jax.dtypes.canonicalize_dtype(a.dtype, allow_extended_dtype=True), a.weak_type))
    return tuple(out)


def _forget_failed_tokens() -> None:
    """Drop the effect tokens of a program that failed after dispatch. jax keeps the failed token as
    the input of the next program with the same ordered effect, which would then fail with the old
    error forever; a failure raised during dispatch leaves the previous token, so this restores that."""
    from jax._src import dispatch  # no public API resets one effect's token

    tokens = dispatch.runtime_tokens
    for table in (tokens.current_tokens, tokens.output_runtime_tokens):
        for k, tok in list(table.items()):
            try:
                tok.block_until_ready()
            except Exception:
                del table[k]


__all__ = ["Entry", "act_on_checks"]
