"""`state(model)` and `loadmodel_(dst, src)`: Flux's `src/loading.jl`, mutation-free.

`state` mirrors `Flux.state`: the model as plain nested data. `loadmodel_` mirrors `Flux.loadmodel!`,
with one strengthening: it validates the whole source against the whole destination first and only
then rebinds, so a load that fails leaves the destination exactly as it was.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax

from .copyto import InexactError, convert, show_path
from .core.layer import is_array, is_layer
from .core.region import commit, current_region
from .core.walk import Slot
from .errors import StructureMismatch
from .random import is_typed_key
from .zygote import Tangent

__all__ = ["CheckpointError", "InexactError", "StructureMismatch", "state", "loadmodel_", "array_paths"]


class CheckpointError(ValueError):
    """A file or checkpoint directory that is not a readable fluxjax checkpoint / `.npz` / `.safetensors`
    file: truncated, corrupted, written by something else. A `ValueError`; the message names the file.
    (A path that does not exist raises `FileNotFoundError`, an `OSError`.)

    ```python
    >>> import os, tempfile
    >>> bad = os.path.join(tempfile.mkdtemp(), "model.ckpt")
    >>> _ = open(bad, "w").write("not a checkpoint")
    >>> fluxjax.load(bad, Dense(2, 3))
    Traceback (most recent call last):
        ...
    fluxjax.loading.CheckpointError: load: '...model.ckpt' is a file, not a fluxjax checkpoint directory ...
    >>> issubclass(CheckpointError, ValueError)
    True

    ```
    """


_SCALARS = (bool, int, float, complex, str, bytes, type(None), np.generic)


def _is_namedtuple(x: Any) -> bool:
    """A namedtuple holding data; optimisation rules (optax transformations are namedtuples of functions)
    are not, they are leaves like functions."""
    return isinstance(x, tuple) and hasattr(x, "_fields") and not isinstance(x, optax.GradientTransformation)


def _is_opaque_node(x: Any) -> bool:
    """A registered pytree node that is none of the containers handled by name (e.g. an optax state)."""
    if isinstance(x, (list, tuple, dict, Tangent, optax.GradientTransformation, *_SCALARS)) or is_layer(x) or is_array(x):
        return False
    leaves, treedef = jax.tree_util.tree_flatten(x, is_leaf=is_layer)
    return not (treedef.num_nodes == 1 and treedef.num_leaves == 1 and leaves and leaves[0] is x)


def _opaque_children(x: Any) -> tuple[list, Any]:
    return jax.tree_util.tree_flatten(x, is_leaf=is_layer)


def _fields(x: Any) -> dict | None:
    """The named children of a layer, a `Tangent` (optimiser state) or a dict; None for anything else."""
    if is_layer(x):
        return x.__dict__
    if isinstance(x, Tangent):
        return x.fields
    if isinstance(x, dict):
        return x
    return None


def state(x: Any) -> Any:
    """The state of `x` as plain nested data (Flux's `Flux.state`).

    A layer becomes a dict of all its fields (trainable parameters *and* state: BatchNorm's `mu`/`sigma2`,
    Dropout's RNG key, counters), tuples stay tuples, lists lists, dicts dicts, namedtuples become dicts.
    Arrays are returned as they are (the same objects), and so are numbers, strings, booleans and `None`
    (Flux keeps `Number`, `AbstractString`, `Symbol` and `nothing`); every other leaf (activation
    functions, optimisation rules, arbitrary objects) becomes `()`, as in Flux. The result holds no
    functions, so it can go to `numpy`, `orbax` or `json`, and `loadmodel_(model, s)` loads it back.
    Also works on the optimiser state from `setup`.

    ```python
    >>> m = Chain(Dense(1, 2, tanh), Dense(2, 1))
    >>> s = state(m)
    >>> s["layers"][0]["sigma"]
    ()
    >>> s["layers"][0]["weight"] is m[0].weight
    True

    ```
    """
    # iterative (an explicit stack, no recursion), so a model hundreds of layers deep works
    done: list[Any] = []  # finished values; a container's children are the last len(keys) of them
    todo: list[tuple[bool, Any]] = [(False, x)]
    while todo:
        closing, v = todo.pop()
        if closing:
            kind, keys = v
            vals = done[len(done) - len(keys):]
            del done[len(done) - len(keys):]
            done.append(dict(zip(keys, vals)) if kind is dict else kind(vals))
            continue
        kids = _state_children(v)
        if kids is None:
            done.append(v if is_array(v) or isinstance(v, _SCALARS) else ())
            continue
        kind, keys, values = kids
        todo.append((True, (kind, keys)))
        todo.extend((False, e) for e in reversed(values))
    return done[0]


def _state_children(x: Any) -> tuple[type, list, list] | None:
    """`(container type, keys, children)` of `x` as `state` sees it; None for a leaf."""
    if is_array(x) or isinstance(x, _SCALARS):
        return None
    f = _fields(x)
    if f is not None:
        return dict, list(f), list(f.values())
    if _is_namedtuple(x):
        return dict, list(x._fields), list(x)
    if isinstance(x, optax.GradientTransformation):
        return None
    if isinstance(x, (tuple, list)):
        return (tuple if isinstance(x, tuple) else list), list(range(len(x))), list(x)
    if _is_opaque_node(x):
        ch = _opaque_children(x)[0]
        return tuple, list(range(len(ch))), ch
    return None


def array_paths(tree: Any, keep: Callable[[Any], bool] = is_array) -> list[tuple[tuple, Any]]:
    """`[(path, array)]` for every array in a `state(...)` tree, in order; a path is a tuple of dict keys
    and integer positions (`("layers", 0, "weight")`). `keep` picks other leaves instead."""
    out: list[tuple[tuple, Any]] = []
    stack: list[tuple[Any, tuple]] = [(state(tree), ())]
    while stack:  # iterative, for models hundreds of layers deep
        v, p = stack.pop()
        if keep(v):
            out.append((p, v))
        elif isinstance(v, dict):
            stack.extend((e, p + (k,)) for k, e in reversed(list(v.items())))
        elif isinstance(v, (list, tuple)):
            stack.extend((e, p + (i,)) for i, e in reversed(list(enumerate(v))))
    return out


# ----------------------------------------------------------------------------------------------
# loadmodel_


class _Plan:
    """Everything a load will write, collected before anything is written."""

    def __init__(self, keep: Callable[[Any], bool] | None = None):
        self.keep = keep
        self.values: dict[Any, tuple[Any, tuple, Any]] = {}  # id(dst array) -> (new value, path, dst)
        self.sources: dict[Any, Any] = {}  # id(dst array) -> the source array its new value came from
        self.writes: list[tuple[Slot, Any]] = []
        self.untied = 0  # > 0 inside a field whose arrays are shared for speed, not tied (`Leaf.state`)
        self.rules: list[tuple[Any, Any]] = []  # (optimiser Leaf, its new rule): loaded hyperparameters
        self.adjusted: dict[tuple, Any] = {}  # (id(rule), hyperparameters) -> that rule adjusted
        self.frozen: list[tuple[Any, bool]] = []  # (optimiser Leaf, the source's frozen flag)

    def commit(self) -> None:
        self._reshare()
        if current_region() is None:
            for v, path, _ in self.values.values():
                if isinstance(v, jax.core.Tracer):
                    raise RuntimeError(f"loadmodel_: {show_path(path)}: a traced value can only be loaded inside "
                                       "fluxjax.jit / fluxjax.gradient, not under a plain jax transformation")
        for slot, ident in self.writes:
            commit(slot, self.values[ident][0], what="loadmodel_")
        for leaf, rule in self.rules:
            commit(Slot(leaf, "rule", True), rule, what="loadmodel_")
        for leaf, flag in self.frozen:
            commit(Slot(leaf, "frozen", True), flag, what="loadmodel_")

    def _reshare(self) -> None:
        """Arrays an optimiser state shared (fluxjax/_sharing.py) are loaded one path at a time; where
        the loaded values agree, they share one array again, so a compiled step keeps its shape."""
        groups: dict[int, list] = {}
        for ident in self.values:
            if isinstance(ident, tuple):
                groups.setdefault(ident[0], []).append(ident)
        for idents in groups.values():
            first = self.values[idents[0]][0]
            for k in idents[1:]:
                new, path, dst = self.values[k]
                if not isinstance(new, jax.core.Tracer) and not isinstance(first, jax.core.Tracer) and _same(first, new):
                    self.values[k] = (first, path, dst)


def _child_slot(slot: Slot | None, container: Any, key: Any, kind: str) -> Slot | None:
    if kind == "attr":
        return Slot(container, key, True)
    if kind == "item":  # list, dict, Tangent.fields
        return Slot(container, key, False)
    if slot is None:  # a position inside a top-level tuple: nowhere to rebind
        return None
    return Slot(slot.owner, slot.key, slot.attr, slot.path + (key,))


def _same(a: Any, b: Any, a_src: Any = None, b_src: Any = None) -> bool:
    """Whether two loaded values agree (`a_src`, `b_src`: the source arrays they came from, if known)."""
    if isinstance(a, jax.core.Tracer) or isinstance(b, jax.core.Tracer):
        if a_src is not None and a_src is b_src:
            return True  # one source at both places
        raise TypeError("loadmodel_: a tied destination array gets two different sources, whose values cannot be "
                        "compared while tracing; load outside fluxjax.jit / gradient, or tie the source too")
    if is_typed_key(a):
        a, b = jax.random.key_data(a), jax.random.key_data(b)
    return bool(np.array_equal(np.asarray(a), np.asarray(b)))


def _all_zero(a: Any) -> bool:
    if isinstance(a, jax.core.Tracer):
        return True
    if is_typed_key(a):
        a = jax.random.key_data(a)
    return not np.any(np.asarray(a))


# The fields where fluxjax's `False` is Flux's `false` (`bias=false`: no bias, interchangeable with a zero
# bias). Everywhere else a `False` stands for Flux's `nothing` (BatchNorm's `affine=false` beta/gamma,
# `track_stats=false` mu/sigma2), which never loads into or from an array.
BIAS_FIELDS = frozenset({"bias", "b"})


def is_bias_path(path: tuple) -> bool:
    """Whether the field at `path` is a bias (`bias`, GRU's `b`), where `False` means Flux's `bias=false`."""
    return bool(path) and path[-1] in BIAS_FIELDS


def _leaf(plan: _Plan, dst: Any, src: Any, path: tuple, slot: Slot | None) -> None:
    ident = (id(dst), path) if plan.untied else id(dst)
    here = show_path(path)
    if isinstance(src, (bool, np.bool_)):
        if src:
            raise StructureMismatch(f"loadmodel_: {here}: cannot copy boolean parameter == true to non-zero parameter")
        if not is_bias_path(path):
            raise StructureMismatch(
                f"loadmodel_: {here}: the source has no array here (False, Flux's `nothing`: e.g. a norm layer built "
                f"with affine=False or track_stats=False) but the destination holds an array of size "
                f"{tuple(np.shape(dst))}; only a bias accepts False (as zeros). Build the destination with the "
                "source's options (affine=, track_stats=), or load a source that has this array")
        new = jnp.zeros_like(dst) if not isinstance(dst, np.ndarray) else np.zeros_like(dst)
        if is_typed_key(dst):
            raise StructureMismatch(f"loadmodel_: {here}: cannot load `false` into an RNG key")
        is_bool = True
    elif is_array(src) or isinstance(src, np.generic):
        new = convert(dst, src, path)
        is_bool = False
    else:
        raise StructureMismatch(f"loadmodel_: {here}: tried to copy {src!r} into an array destination; this is not allowed")
    if ident in plan.values:  # a tied array, already loaded from another path
        first, first_path, _ = plan.values[ident]
        if is_bool:
            if not _all_zero(first):
                raise StructureMismatch(f"loadmodel_: encountered tied parameter with boolean source at {here} and a "
                                        f"non-zero array source at {show_path(first_path)}")
        elif not _same(first, new, plan.sources.get(ident), src):
            raise StructureMismatch(f"loadmodel_: encountered tied destination parameters with untied and mismatched "
                                    f"sources at {show_path(first_path)} and {here}")
    else:
        plan.values[ident] = (new, path, dst)
        plan.sources[ident] = src
    if slot is None:
        raise TypeError(f"loadmodel_: {here}: this array sits directly in a top-level tuple (or is the top level) and "
                        "cannot be rebound; pass the layer, list or dict that holds it")
    plan.writes.append((slot, ident))


def _plan_rule(plan: _Plan, leaf: Any, src_state: Any, path: tuple) -> None:
    """An optimiser `Leaf`: its rule reads its hyperparameters from the state (`state.hyper`), which the
    load replaces with the checkpoint's; where they differ from the destination's, the leaf's rule becomes
    the rule with the loaded values (`rule.adjust(...)`; in an `OptimiserChain`, each member's), so
    `leaf.rule` shows what the next step uses. Where no rule can show them (a wrapper), differing
    hyperparameters are an error."""
    dst_h = [(p, a) for p, a in array_paths(leaf.state) if "hyper" in p]
    src_h = dict(array_paths(src_state, keep=lambda v: is_array(v) or isinstance(v, (int, float, np.generic))))
    changed: list[tuple] = []
    for p, a in dst_h:
        b = src_h.get(p)
        if b is None or b is a:
            continue
        if isinstance(a, jax.core.Tracer) or isinstance(b, jax.core.Tracer):
            raise TypeError(f"loadmodel_: {show_path(path + ('state',) + p)}: an optimiser hyperparameter cannot be "
                            "loaded while tracing (its rule must show it); load optimiser state outside fluxjax.jit")
        if not np.array_equal(np.asarray(a), np.asarray(b)):
            changed.append(p)
    if not changed:
        return
    new = _showing(leaf.rule, leaf.state, src_state, changed)
    if new is None:
        here = show_path(path + ("state",) + changed[0])
        raise StructureMismatch(f"loadmodel_: {here}: the source's hyperparameter differs from the destination's, "
                                f"and the destination's rule {leaf.rule!r} cannot show it; set up the optimiser state "
                                "with the rule the source was saved with, then load")
    if new is not leaf.rule:  # leaves that shared a rule and load the same values share the new one (one program)
        key = (id(leaf.rule), repr(new))
        plan.rules.append((leaf, plan.adjusted.setdefault(key, new)))


def _showing(rule: Any, st: Any, sst: Any, changed: list[tuple]) -> Any:
    """`rule` adjusted to the hyperparameters of the source state `sst` at the paths `changed` (of the
    destination state `st`), or None when it cannot show them."""
    if _is_namedtuple(st) and st._fields == ("count", "state"):  # a scheduled learning rate
        if not all(p[0] == "state" for p in changed):
            return None
        return _showing(rule, st.state, _get(sst, "state", 1), [p[1:] for p in changed])
    opts = getattr(rule, "opts", None)
    if type(st) is tuple and isinstance(opts, tuple) and len(opts) == len(st) and hasattr(rule, "adjust"):
        members = list(opts)  # an `OptimiserChain`: each member's state in its place
        for i in sorted({p[0] for p in changed}):
            if not isinstance(i, int):
                return None
            m = _showing(opts[i], st[i], sst[i] if not isinstance(sst, dict) else sst.get(i, sst.get(str(i))),
                         [p[1:] for p in changed if p[0] == i])
            if m is None:
                return None
            members[i] = m
        return type(rule)(*members)
    if not (_is_namedtuple(st) and "hyper" in st._fields and isinstance(st.hyper, dict) and hasattr(rule, "adjust")
            and all(len(p) > 1 and p[0] == "hyper" for p in changed)):
        return None
    hyper = _get(sst, "hyper", st._fields.index("hyper"))
    eta_scheduled = callable(getattr(rule, "hyperparameters", {}).get("eta"))
    kw = {}
    for k in sorted({p[1] for p in changed}):
        if k == "eta" and eta_scheduled:
            continue  # a schedule sets the learning rate; the stored one stands in for it
        v = hyper[k]
        kw[k] = tuple(_number(x) for x in v) if isinstance(v, (tuple, list)) else _number(v)
    return rule.adjust(**kw) if kw else rule


def _plan_frozen(plan: _Plan, leaf: Any, src: Any, path: tuple) -> None:
    """An optimiser `Leaf` (or `TreeState`): the source's record of `freeze_` is the truth, so a resumed
    fine-tune keeps its frozen layers frozen. A bool, or a 0-d bool array (`tree_map(np.asarray, state(s))`)."""
    if isinstance(src, jax.core.Tracer):
        raise TypeError(f"loadmodel_: {show_path(path + ('frozen',))}: the frozen flag cannot be loaded while tracing; "
                        "load optimiser state outside fluxjax.jit")
    if is_array(src) and not is_typed_key(src) and np.ndim(src) == 0 and np.asarray(src).dtype == np.bool_:
        src = np.asarray(src)[()]
    if not isinstance(src, (bool, np.bool_)):
        raise StructureMismatch(f"loadmodel_: {show_path(path + ('frozen',))}: expected the optimiser leaf's frozen flag "
                                f"(True or False), got {type(src).__name__} {src!r:.60}")
    if bool(src) != bool(leaf.frozen):
        plan.frozen.append((leaf, bool(src)))


def _get(x: Any, k: str, i: int) -> Any:
    if isinstance(x, dict):
        return x[k]
    if _is_namedtuple(x):
        return getattr(x, k)
    return x[i]


def _number(v: Any) -> float | int:
    """A stored hyperparameter as the number a rule holds (float32's 0.1 as 0.1, its shortest form)."""
    v = np.asarray(v)[()]
    if v.dtype.kind in "iub":
        return int(v)
    return float(str(v))


def _keys_msg(dst_keys, src_keys) -> str:
    missing = [k for k in dst_keys if k not in src_keys]
    extra = [k for k in src_keys if k not in dst_keys]
    parts = []
    if missing:
        parts.append(f"missing in source: {missing}")
    if extra:
        parts.append(f"not in destination: {extra}")
    return "; ".join(parts)


def _plan(plan: _Plan, dst: Any, src: Any, path: tuple, slot: Slot | None) -> None:
    here = show_path(path)
    if is_array(dst):
        _leaf(plan, dst, src, path, slot)
        return
    df = _fields(dst)
    if df is None and _is_namedtuple(dst):
        df = dict(zip(dst._fields, dst))
    if df is not None:
        sf = _fields(src)
        if sf is None and _is_namedtuple(src):
            sf = dict(zip(src._fields, src))
        if sf is None and _is_namedtuple(dst) and isinstance(src, (tuple, list)) and len(src) == len(dst):
            sf = dict(zip(dst._fields, src))
        if sf is None:
            raise StructureMismatch(f"loadmodel_: {here}: tried to load a {type(src).__name__} into a "
                                    f"{type(dst).__name__} with fields {list(df)}; the structures do not match")
        if plan.keep is not None:
            df = {k: v for k, v in df.items() if plan.keep(v)}
            sf = {k: v for k, v in sf.items() if plan.keep(v)}
        opt_leaf = is_layer(dst) and "rule" in dst.__dict__ and "frozen" in dst.__dict__
        if opt_leaf and "frozen" in df and "frozen" not in sf:  # a record without the flag keeps the current one
            df = {k: v for k, v in df.items() if k != "frozen"}
        if set(df) != set(sf):
            raise StructureMismatch(f"loadmodel_: {here}: tried to load fields {list(sf)} into {type(dst).__name__} with "
                                    f"fields {list(df)}; the structures do not match ({_keys_msg(list(df), list(sf))})")
        if is_layer(dst):
            kind, owner = "attr", dst
        elif isinstance(dst, Tangent):
            kind, owner = "item", dst.fields
        elif isinstance(dst, dict):
            kind, owner = "item", dst
        else:  # namedtuple: positions
            for i, k in enumerate(dst._fields):
                _plan(plan, dst[i], sf[k], path + (k,), _child_slot(slot, dst, i, "pos"))
            return
        untied = getattr(type(dst), "__fluxjax_untied__", ())
        for k, v in df.items():
            plan.untied += k in untied
            _plan(plan, v, sf[k], path + (k,), _child_slot(slot, owner, k, kind))
            plan.untied -= k in untied
        if opt_leaf and "state" in df:
            _plan_rule(plan, dst, sf["state"], path)
        if opt_leaf and "frozen" in sf:
            _plan_frozen(plan, dst, sf["frozen"], path)
        return
    if isinstance(dst, (list, tuple)) and not isinstance(dst, optax.GradientTransformation) or _is_opaque_node(dst):
        items = list(enumerate(dst if isinstance(dst, (list, tuple)) else _opaque_children(dst)[0]))
        if isinstance(src, dict) or not isinstance(src, (list, tuple)):
            raise StructureMismatch(f"loadmodel_: {here}: tried to load a {type(src).__name__} into a {type(dst).__name__} "
                                    f"of length {len(items)}; the structures do not match")
        srcs = list(src)
        if plan.keep is not None:
            items = [(i, v) for i, v in items if plan.keep(v)]
            srcs = [v for v in srcs if plan.keep(v)]
        if len(srcs) != len(items):
            raise StructureMismatch(f"loadmodel_: {here}: tried to load a {type(src).__name__} of length {len(srcs)} into "
                                    f"a {type(dst).__name__} of length {len(items)}; the structures do not match")
        for (i, d), s in zip(items, srcs):
            if isinstance(dst, list):
                sub = _child_slot(slot, dst, i, "item")
            elif isinstance(dst, tuple):
                sub = _child_slot(slot, dst, i, "pos")
            else:
                sub = _child_slot(slot, dst, ("tree", None, i), "pos")
            _plan(plan, d, s, path + (i,), sub)
        return
    # a non-array leaf of the destination (function, number, None, bool, string): never copied
    if _scalar_array(src) and isinstance(dst, _SCALARS) and dst is not None:
        if np.ndim(src) == 0 or not isinstance(dst, (bool, np.bool_)):
            # a number that became a 0-d (or 1-element) array, e.g. `tree_map(np.asarray, state(m))`: a number
            # source, which Flux's `loadleaf!(dst, src) = dst` ignores whatever its value, as a plain number
            return
    if is_array(src) and not (isinstance(dst, (bool, np.bool_)) and not dst and is_bias_path(path)):
        if isinstance(dst, (bool, np.bool_)) and dst:
            raise StructureMismatch(f"loadmodel_: {here}: cannot copy an array parameter to boolean parameter == true")
        if isinstance(dst, (bool, np.bool_)):
            raise StructureMismatch(
                f"loadmodel_: {here}: tried to copy an array of size {tuple(np.shape(src))} into a field that holds no "
                "array (False, Flux's `nothing`: e.g. a norm layer built with affine=False or track_stats=False); only "
                "a bias=False ignores a source array. Build the destination with the source's options (affine=, "
                "track_stats=), or drop this array from the source")
        raise StructureMismatch(f"loadmodel_: {here}: tried to copy an array of size {tuple(src.shape)} to {dst!r}; "
                                "this is not allowed")


def _scalar_array(x: Any) -> bool:
    """A 0-d or 1-element array holding a number, bool or string (not an RNG key)."""
    if not is_array(x) or is_typed_key(x) or int(np.size(x)) != 1:
        return False
    return x.dtype.kind in "biufcUS" or jnp.issubdtype(x.dtype, jnp.floating)


def plan_load(dst: Any, src: Any, filter: Callable[[Any], bool] | None = None) -> _Plan:
    """Validate loading `src` into `dst` and return the plan (nothing is written)."""
    plan = _Plan(filter)
    if is_array(dst):
        raise TypeError("loadmodel_: the destination is an array; pass the layer (or list/dict) that holds it")
    _plan(plan, dst, src, (), None)
    return plan


def loadmodel_(dst: Any, src: Any, *, filter: Callable[[Any], bool] | None = None) -> Any:
    """Copy every array (trainable parameters and state) from `src` into `dst` (Flux's `loadmodel!`).

    `src` is a model of the same structure or a `state(...)` tree (also one read back from disk).
    Arrays are rebound, never mutated, through the state thread (so it also works inside `fluxjax.jit`);
    values are converted to the destination's dtype and placed on its device/sharding. Non-array
    fields (activations, sizes, `p`, `active`) are not copied and need not match, also when the source
    holds them as 0-d (or 1-element) arrays, as `tree_map(np.asarray, state(m))` makes. As in Flux,
    `bias=False` and an all-zero bias are interchangeable: on a bias field (`bias`, GRU's `b`) a `False`
    source zeroes the destination array and a `False` destination ignores the source. Elsewhere `False`
    is Flux's `nothing` (a norm layer's `beta`/`gamma` with `affine=False`, `mu`/`sigma2` with
    `track_stats=False`): loading it into an array, or an array into it, raises `StructureMismatch`.

    Like Flux's `copyto!`, values are copied into the destination: every destination array gets a new
    array of its own, never the source's object, so loading a model whose arrays are shared (tied) does
    not tie the destination, and `loadmodel_(target_net, online_net)` leaves the two independent. Tied
    destination arrays stay tied (one new array, written at each place); loading them from different
    sources is an error. Converting to the destination's dtype may lower a float's precision (float64
    into float32, as Flux), but a value the dtype cannot hold (a complex number with an imaginary part
    into a real array, 1.5 or NaN or 2**40 into int32, an int64 out of int32's range) raises
    `InexactError` (a `ValueError`) naming the path, both dtypes and the value.

    Optimiser state (from `setup`) loads its moments, counters and the rules' hyperparameters (`eta`,
    `beta`, ... which fluxjax keeps in the state, `state.hyper`), so a checkpoint resumes with the saved
    learning rate; where they differ from the destination's, each `Leaf.rule` becomes the rule with the
    loaded values (`Momentum(eta=0.1)`), so the rule shown is the rule that steps. Where no rule can show
    them (differing values inside an `OptimiserChain` or wrapper) the load raises `StructureMismatch`:
    set up the state with the saved rule first. (Optimisers.jl keeps the destination's numbers; fluxjax
    restores them because its checkpoints promise a bit-exact optimiser state.)

    Raises `DimensionMismatch` (a `ValueError`) on an array of the wrong size, naming the path and both
    sizes (`layers[0].weight: tried to load size (6, 10) array into size (5, 10)`); `StructureMismatch`
    (a `ValueError`) on missing or extra fields, other container lengths, an array loaded into a
    non-array or vice versa; `InexactError` on a value the destination's dtype cannot hold. Everything is
    checked before anything is written: on an error `dst` is unchanged. Returns `dst`.

    `filter(x) -> bool`, as Flux's `filter` keyword, drops the children (of `dst` and `src` alike, at
    every level) for which it is False before matching them: `filter=lambda x: not isinstance(x, Dropout)`
    loads `Chain(Dense, Dropout, Dense)` into `Chain(Dense, Dense)`.

    ```python
    >>> dst = Chain(Dense(5, 2, tanh), Dense(2, 1))
    >>> loadmodel_(dst, Chain(Dense(5, 2, relu), Dense(2, 1, bias=False)))  # copies weights; zero bias
    Chain(
      Dense(5 => 2, tanh),                  # 12 parameters
      Dense(2 => 1),                        # 3 parameters
    )                   # Total: 4 arrays, 15 parameters, 60 bytes.

    ```
    """
    plan_load(dst, src, filter).commit()
    return dst
