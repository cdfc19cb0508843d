"""The state thread: regions, train/test mode, `fluxjax.jit` and the pure `functional` view.

Arrays are never mutated; what looks like mutation in Flux (BatchNorm's running statistics, Dropout's
key, `update_`) is rebinding an attribute. Every rebinding goes through `rebind`. Outside any
transformation it happens at once. Inside a *region* (the body of `gradient`, `fluxjax.jit`,
`functional`'s `apply`) it is recorded: the region swaps the traced value in so later code sees it,
returns it as an auxiliary output, restores every original when the body ends (also when it raises),
and the caller commits the concrete values afterwards. No tracer is ever left in a model.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import jax
from jax.sharding import SingleDeviceSharding

from ._compile_options import with_defaults
from ._plan import Plan
from ._sharing import select, sharing
from ._slots import PARAM, STATE, Slot, set_many, walk
from .functors import all_layers, bump, is_float_array

_tls = threading.local()


def _stack() -> list[Region]:
    s = getattr(_tls, "stack", None)
    if s is None:
        s = _tls.stack = []
    return s


class Region:
    """One transformed region. `differentiating` drives Flux's automatic train mode; `train` (when not
    None) forces it; `rng` (when given) feeds random layers instead of their own keys."""

    __slots__ = ("originals", "written", "before", "differentiating", "train", "rng")

    def __init__(self, differentiating: bool = False, train: bool | None = None, rng=None):
        self.originals: dict[tuple, tuple[Slot, Any]] = {}
        self.written: dict[tuple, Slot] = {}
        self.before: dict[tuple, Any] = {}  # each written slot's value just before its first write
        self.differentiating = differentiating
        self.train = train
        self.rng = rng

    def swap(self, slot: Slot, value) -> None:
        k = (id(slot.owner), slot.key)
        if k not in self.originals:
            self.originals[k] = (slot, slot.get_base())
        slot.set(value)

    def write(self, slot: Slot, value) -> None:
        ident = slot.ident()
        if ident not in self.written:
            self.before[ident] = slot.get()
            self.written[ident] = slot
        self.swap(slot, value)

    def restore(self) -> None:
        for slot, value in reversed(self.originals.values()):
            slot.set_base(value)

    def __enter__(self):
        _stack().append(self)
        return self

    def __exit__(self, *exc):
        _stack().pop()
        self.restore()
        return False

    def take_key(self):
        self.rng, sub = jax.random.split(self.rng)
        return sub


_TRACER_ERROR = (
    "{what} tried to store a traced value outside fluxjax's transformations. This happens when a "
    "model in train mode runs under a plain jax transformation (jax.jit, jax.grad, ...). Use "
    "fluxjax.jit / fluxjax.gradient, the pure view fluxjax.functional(model), or testmode_(model)."
)


def rebind(obj: Any, name: str, value: Any) -> None:
    """Rebind `obj.name = value` through the state thread (see the module docstring)."""
    commit(Slot(obj, name, True), value, what=f"{type(obj).__name__}.{name}")


def commit(slot: Slot, value: Any, what: str = "a layer") -> None:
    s = _stack()
    if s:
        s[-1].write(slot, value)
    elif isinstance(value, jax.core.Tracer):
        raise RuntimeError(_TRACER_ERROR.format(what=what))
    else:
        slot.set(value)


def is_active(layer: Any) -> bool:
    """Flux's train/test decision: `layer.active` if set, else True inside a differentiated region."""
    a = getattr(layer, "active", None)
    if a is not None:
        return bool(a)
    for r in reversed(_stack()):
        if r.train is not None:
            return r.train
        if r.differentiating:
            return True
    return False


def within_gradient() -> bool:
    """True inside `gradient`/`pullback`/`withgradient`/`train_` (NNlib's `within_gradient`)."""
    return any(r.differentiating for r in _stack())


def layer_key(layer: Any, field: str = "rng"):
    """A fresh key for a random layer: from the region's `rng` when one was given, else split from
    the layer's own key field (which then moves on, through the state thread)."""
    for r in reversed(_stack()):
        if r.rng is not None:
            return r.take_key()
    key, sub = jax.random.split(getattr(layer, field))
    rebind(layer, field, key)
    return sub


def _set_mode(m: Any, mode) -> Any:
    for lay in all_layers(m):
        if "active" in lay.__dict__:
            lay.__dict__["active"] = mode
    bump()
    return m


def trainmode_(m: Any, mode: bool | str = True) -> Any:
    """Put every Dropout/BatchNorm/... in `m` in train mode (Flux's `trainmode!`)."""
    return testmode_(m, "auto" if mode == "auto" else not mode)


def testmode_(m: Any, mode: bool | str | None = True) -> Any:
    """Test mode (`True`), train mode (`False`) or automatic (`"auto"`/`None`), recursively."""
    if mode == "auto" or mode is None:
        return _set_mode(m, None)
    if not isinstance(mode, bool):
        raise ValueError(f"testmode_: mode must be True, False or 'auto', got {mode!r}")
    return _set_mode(m, not mode)


def guard_writes(keep) -> None:
    """In the innermost region, make every write so far conditional: where `keep` is False the
    slots get their original values back (used by `train_` to skip a non-finite step inside jit)."""
    region = _stack()[-1]
    with sharing():  # values the slots shared stay shared
        for ident, slot in region.written.items():
            slot.set(select(keep, slot.get(), region.before[ident]))


# ----------------------------------------------------------------------------------------------
# fluxjax.jit


class _Entry:
    __slots__ = ("compiled", "extra_slots", "extra_index", "out_tree", "current", "effects", "shared")

    def __init__(self, shared: tuple | None):
        self.extra_slots: list[Slot] = []
        self.extra_index: dict[tuple, int] = {}
        self.out_tree = None
        self.current = None
        self.effects: bool | None = None  # whether the program has side effects (known once traced)
        self.shared = shared  # see _sharing_pattern


def _commit_beside(w) -> None:
    """Commit the uncommitted arrays of a call that has committed ones on a single device to that
    device, rebinding them where they are (the model's arrays too; the values do not change).

    jax compiles a call apart for each pattern of committed arguments, and a program that takes one
    committed array returns committed ones. A model made on the default device, stepped on
    `device_put` data, would have its step compiled twice: for the first call, and again for every
    later one, whose model arrays are the first call's committed outputs."""
    device = None
    for v in w.leaves:
        if isinstance(v, jax.core.Tracer):
            return
        if isinstance(v, jax.Array) and v.committed:
            if not isinstance(v.sharding, SingleDeviceSharding) or device not in (None, v.sharding):
                return  # several devices: placement is the caller's (see fluxjax.parallel)
            device = v.sharding
    if device is None:
        return
    placed: dict[int, jax.Array] = {}  # arrays held in several places stay one array
    for i, v in enumerate(w.leaves):
        if isinstance(v, jax.Array) and not v.committed:
            new = placed.get(id(v))
            if new is None:
                new = placed[id(v)] = jax.device_put(v, device)
            w.slots[i].set(new)
            w.leaves[i] = new


def _sharing_pattern(leaves: list) -> tuple | None:
    """Which leaves are the very same jax array (optimiser leaves share their `βt` and
    hyperparameters, see fluxjax/_sharing.py): for each leaf, its position among the distinct ones,
    or None when no two are the same. The compiled program takes each distinct array once and returns
    one output where several slots are rebound to one new array, so it is cached by this too."""
    first: dict[int, int] = {}
    pos = [first.setdefault(id(v), len(first)) if isinstance(v, jax.Array) else first.setdefault(("slot", i), len(first))
           for i, v in enumerate(leaves)]
    return tuple(pos) if len(first) < len(leaves) else None


def _distinct(leaves: list, shared: tuple | None) -> list:
    """The compiled program's inputs: each distinct array of `leaves` once (see `_sharing_pattern`)."""
    if shared is None:
        return leaves
    out = [None] * (max(shared) + 1)
    for v, p in zip(leaves, shared):
        out[p] = v
    return out


def _covered(slot: Slot, before: Any, walked: set) -> bool:
    """Whether a write of a whole field (`update_` rebinding `Leaf.state`) is already carried by the
    walked slots: the new value has the old structure and each of its arrays is in a walked slot."""
    leaves, treedef = jax.tree_util.tree_flatten(slot.get())
    return treedef == jax.tree_util.tree_structure(before) and all(id(v) in walked for v in leaves)


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


class Jitted:
    """A function of models and arrays compiled with `jax.jit`; see `jit`."""

    def __init__(self, fn: Callable, **jit_kwargs):
        self.fn = fn
        self.jit_kwargs = jit_kwargs
        self._cache: dict[Any, _Entry] = {}
        self._plan: Plan | None = None  # the last call's walk, reused while it still fits
        self.__wrapped__ = fn
        self.__doc__ = getattr(fn, "__doc__", None)

    def _make(self, fn, n_args, shared) -> _Entry:
        entry = _Entry(shared)

        def pure(leaves):
            box, w = entry.current
            xs = leaves if shared is None else [leaves[p] for p in shared]
            with Region() as region:
                for slot, x in zip(w.slots, xs):
                    region.swap(slot, x)
                out = fn(*box[:n_args], **box[n_args])
                # one output for each new value, keyed by the slots it goes to
                new: dict[int, tuple[Any, list[int]]] = {}
                now = set()
                for i, slot in enumerate(w.slots):
                    v = slot.get()
                    now.add(id(v))
                    if v is not xs[i]:
                        new.setdefault(id(v), (v, []))[1].append(i)
                changed = {tuple(where): v for v, where in new.values()}
                idents = {s.ident() for s in w.slots}
                extra = {}
                for ident, slot in region.written.items():
                    if ident in idents or _covered(slot, region.before[ident], now):
                        continue
                    k = entry.extra_index.get(ident)
                    if k is None:
                        k = entry.extra_index[ident] = len(entry.extra_slots)
                        entry.extra_slots.append(slot)
                    extra[k] = slot.get()
                out_leaves, entry.out_tree = jax.tree_util.tree_flatten(out)
            return out_leaves, changed, extra

        entry.compiled = jax.jit(pure, **with_defaults(self.jit_kwargs))
        return entry

    def __call__(self, *args, **kwargs):
        plan = self._plan
        leaves = None
        if plan is not None and not kwargs and plan.matches(args):
            leaves = plan.load(args)  # None when arrays the program takes as one are no longer one
            if leaves is None:
                plan.release()
        if leaves is not None:
            box, w, entry = plan.box, plan.walk, plan.entry
        else:
            plan = None
            box = [*args, kwargs]
            w = walk(box)
            if not _stack():
                _commit_beside(w)
            shared = _sharing_pattern(w.leaves)
            key = (w.signature, shared)
            entry = self._cache.get(key)
            if entry is None:
                entry = self._cache[key] = self._make(self.fn, len(args), shared)
            leaves = _distinct(w.leaves, shared)
        entry.current = (box, w)
        try:
            if entry.effects is None:  # jax caches this trace: the call below does not trace again
                entry.effects = bool(entry.compiled.trace(leaves).jaxpr.effects)
            out_leaves, changed, extra = entry.compiled(leaves)
            if entry.effects:
                # a host callback can fail after dispatch returns: its error must surface before
                # anything is written back, not on some later read of the model
                try:
                    jax.block_until_ready((out_leaves, changed, extra))
                except Exception:
                    _forget_failed_tokens()
                    raise
        finally:
            entry.current = None
        if plan is not None:
            plan.store(changed, commit if _stack() else None)
        elif _stack():
            for where, v in changed.items():
                for i in where:
                    commit(w.slots[i], v)
        else:
            set_many(w.slots, [(i, v) for where, v in changed.items() for i in where])
        for k, v in extra.items():
            commit(entry.extra_slots[k], v)
        if plan is not None:
            plan.release()
        elif not kwargs and w.reusable:
            self._plan = Plan(box, w, entry)
        return jax.tree_util.tree_unflatten(entry.out_tree, out_leaves)

    def cache_size(self) -> int:
        """Number of distinct model structures compiled (not counting jax's own shape retraces)."""
        return len(self._cache)


def jit(fn: Callable | None = None, **jit_kwargs) -> Any:
    """Compile a function of models, optimiser states and arrays (`fluxjax.jit(step)`).

    Models travel as their array leaves; static configuration is part of the cache key. Everything
    the function rebinds on its arguments (`update_`, BatchNorm statistics, Dropout keys) comes out
    of the compiled program and is written back into the caller's objects. Rebinding objects reached
    only through a closure works too, but their arrays are baked in as constants: pass models as
    arguments. Keywords go to `jax.jit`; on a CPU the program is scheduled by XLA's memory-optimised
    scheduler (faster for Flux's layers there, see fluxjax/_compile_options.py) unless
    `compiler_options` names another `xla_cpu_scheduler_type`. A call whose arrays include some
    committed to one device (`jax.device_put(x, device)`) commits the others there too, the model's
    included, so that the step compiles once (jax would compile it again for the second call).

    ```python
    @fluxjax.jit
    def step(model, opt_state, x, y):
        loss, (g,) = fluxjax.withgradient(lambda m: mse(m(x), y), model)
        fluxjax.update_(opt_state, model, g)
        return loss
    ```
    """
    if fn is None:
        return lambda f: Jitted(f, **jit_kwargs)
    return Jitted(fn, **jit_kwargs)


# ----------------------------------------------------------------------------------------------
# The pure view


def functional(model: Any) -> tuple[dict, dict, Callable]:
    """`params, state, apply = functional(model)`: the model as pure data and a pure function.

    `params` holds the trainable float arrays and `state` the state arrays (running statistics, RNG
    keys), both as flat dicts keyed by path (`"layers[0].weight"`). `apply(params, state, *inputs,
    train=None, rng=None) -> (output, new_state)` is pure: use it under `jax.jit`, `jax.vmap`,
    `jax.grad`, `jax.lax.scan`, with optax and orbax. `train=True/False` forces the mode of every
    layer (None keeps each layer's own `active` setting, automatic meaning test mode); `rng` (a key)
    feeds Dropout instead of the layers' own keys. `model` itself is never changed by `apply`.
    """
    w = walk([model], paths=True)
    names = [p[2:] if p.startswith("0.") else p[1:] for p in w.paths]
    p_idx = [i for i, r in enumerate(w.roles) if r == PARAM and is_float_array(w.leaves[i])]
    s_idx = [i for i, r in enumerate(w.roles) if r == STATE]
    params = {names[i]: w.leaves[i] for i in p_idx}
    state = {names[i]: w.leaves[i] for i in s_idx}
    slots = w.slots

    def apply(params: dict, state: dict, *inputs, train: bool | None = None, rng=None):
        region = Region(train=train, rng=rng)
        with region:
            for i in p_idx:
                region.swap(slots[i], params[names[i]])
            for i in s_idx:
                region.swap(slots[i], state[names[i]])
            if train is not None:
                for lay in all_layers(model):
                    if "active" in lay.__dict__:
                        region.swap(Slot(lay, "active", True), None)
            out = model(*inputs)
            new_state = {names[i]: slots[i].get() for i in s_idx}
        return out, new_state

    return params, state, apply
