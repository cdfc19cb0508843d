"""The state thread: regions, `rebind`/`commit`, Flux's automatic mode, and the one region runner.

Arrays are never mutated; what looks like mutation in Flux (BatchNorm's running statistics, Dropout's
key, `update_`) is rebinding an attribute. Every rebinding goes through `rebind`. Outside any
transformation it happens at once. Inside a *region* (the body of `gradient`, `fluxjax.jit`,
`functional`'s `apply`) it is recorded: the region swaps the traced value in so later code sees it,
returns it as an auxiliary output, restores every original when the body ends (also when it raises),
and the caller commits the concrete values afterwards. No tracer is ever left in a model.
"""

from __future__ import annotations

import contextlib
import threading
import weakref
from collections.abc import Callable
from typing import Any

import jax
from jax._src import core as jax_core  # the trace now under way: no public API

from ..mode_warning import under_plain_trace, warn_plain_trace
from ..random import use_state_thread as random_use_state_thread
from .layer import bump
from .layer import use_state_thread as layer_use_state_thread
from .sharing import select, sharing
from .static_writes import static_writes
from .walk import Slot


class _Stack(threading.local):
    def __init__(self) -> None:  # runs once in each thread that reads it
        self.stack: list[Region] = []


_tls = _Stack()


def _stack() -> list[Region]:
    return _tls.stack


class Region:
    """One transformed region. `differentiating` drives Flux's automatic train mode; `train` (when not
    None) forces it; `rng` (when given) feeds random layers instead of their own keys."""

    __slots__ = ("originals", "written", "before", "differentiating", "train", "rng", "born", "trace", "stands_for",
                 "checks", "explicit")

    def __init__(self, differentiating: bool = False, train: bool | None = None, rng=None, explicit: bool = False):
        self.originals: dict[tuple, tuple[Slot, Any]] = {}
        self.written: dict[tuple, Slot] = {}
        self.before: dict[tuple, Any] = {}  # each written slot's value just before its first write
        self.differentiating = differentiating
        self.train = train
        self.rng = rng
        self.born: set[int] = set()  # ids of the layers built inside the region (their fields are their own)
        self.trace = None  # the JAX trace the region's body runs in (set on entry)
        self.stands_for: dict[int, Any] = {}  # id(a value swapped in) -> the object it replaced (see `original`)
        self.checks: list[tuple[Any, Any, str]] = []  # checks on traced values that could not raise (`note_check`)
        self.explicit = explicit  # the caller threads the state itself (functional's apply): its keys are its own

    def swap(self, slot: Slot, value) -> None:
        k = (id(slot.owner), slot.key)
        if k not in self.originals:
            self.originals[k] = (slot, base_or_absent(slot))
        slot.set(value)

    def write(self, slot: Slot, value) -> None:
        if isinstance(value, jax.core.Tracer):
            now = _trace_now()
            if now is not self.trace and getattr(value, "_trace", None) is now:
                # made inside a jax transformation the body opened (jax.vmap, lax.scan, lax.cond...):
                # it cannot leave that transformation, so the region could not return it
                raise RuntimeError(NESTED_ERROR.format(what=f"{type(slot.owner).__name__}.{slot.key}"))
        ident = slot.ident()
        if ident not in self.written:
            self.before[ident] = ABSENT if slot.attr is True and slot.key not in slot.owner.__dict__ else slot.get()
            self.written[ident] = slot
        self.swap(slot, value)

    def restore(self) -> None:
        for slot, value in reversed(self.originals.values()):
            put_back(slot, value)

    def __enter__(self):
        self.trace = _trace_now()
        _stack().append(self)
        return self

    def __exit__(self, *exc):
        _stack().pop()
        self.restore()
        return False

    def take_key(self):
        self.rng, sub = jax.random.split(self.rng)
        return sub


def _trace_now() -> Any:
    """The JAX trace now under way (no public API says; None if this JAX does not tell)."""
    ctx = getattr(jax_core, "trace_ctx", None)
    return None if ctx is None else ctx.trace


ABSENT = object()  # the value before a region's write of an attribute the object did not have


def base_or_absent(slot: Slot) -> Any:
    """What `slot` holds, or `ABSENT` for an attribute its object does not have (see `put_back`)."""
    if slot.attr is True and slot.key not in slot.owner.__dict__:
        return ABSENT
    return slot.get_base()


def put_back(slot: Slot, value: Any) -> None:
    """Put `value`, read by `base_or_absent`, back into `slot` (`ABSENT`: remove the attribute)."""
    if value is ABSENT:  # an attribute added since
        slot.owner.__dict__.pop(slot.key, None)
        bump()
    else:
        slot.set_base(value)


def current_region() -> Region | None:
    """The innermost region (`gradient`, `fluxjax.jit`, `functional`'s `apply`, ...) of this thread, if any."""
    s = _stack()
    return s[-1] if s else None


def mode_context() -> bool:
    """What Flux's automatic mode means here: True inside a differentiated region (or one forcing
    train mode), False otherwise. A compiled program depends on it, so its cache key holds it."""
    for r in reversed(_stack()):
        if r.train is not None:
            return r.train
        if r.differentiating:
            return True
    return False


def set_traced_attribute(obj: Any, name: str, value: Any) -> bool:
    """Route `obj.name = value` of a traced value (or a list, tuple or dict holding one: a recurrent
    layer's `(h, c)`) inside a region through the region (so the field is restored, or removed if it is
    new, when the region ends, and its value is returned to the caller like any state write). Returns
    False when that does not apply (no region, or a concrete value)."""
    s = _stack()
    if not s or any(id(obj) in r.born for r in s):
        return False
    if not isinstance(value, jax.core.Tracer) and not any(
            isinstance(x, jax.core.Tracer) for x in jax.tree_util.tree_leaves(value)):
        return False
    s[-1].write(Slot(obj, name, True), value)
    return True


def run_in_region(call: Callable[[], Any], swaps=(), collect: Callable[[Region], Any] | None = None,
                  fields_set: Callable[[list[str]], Any] | None = None, **region: Any) -> tuple[Any, Any]:
    """The one region runner, under every transformation of live models (`gradient`, `fluxjax.jit`,
    `functional`'s `apply`, `checkpointed`, finite differences, `train_`'s step, `outputsize`): open a
    `Region(**region)`, swap each `(slot, value)` of `swaps` into the live objects, run `call()`, and
    before everything is put back (also when it raises) let `collect(region)` read what was written.
    Returns `(call's result, collect's result)`.

    A tracer of a program passes `fields_set`: the fields of existing layers and rules that `call` set
    are logged (`fluxjax.core.static_writes`), and `fields_set(["Type.field", ...])` is called when
    there are any. If it raises, the fields are put back (the trace did not happen); if it returns,
    they stay set, as the eager call sets them."""
    log_writes = static_writes() if fields_set is not None else contextlib.nullcontext()
    with log_writes as log:
        with Region(**region) as r:
            if r.differentiating:
                for slot, value in swaps:
                    old = slot.get()
                    if value is not old:
                        r.stands_for.setdefault(id(value), old)
                    r.swap(slot, value)
            else:
                for slot, value in swaps:
                    r.swap(slot, value)
            out = call()
            got = None if collect is None else collect(r)
        if log is not None and (fields := log.changed()):
            fields_set(fields)
    return out, got


def original(x: Any) -> Any:
    """The object `x` stands for outside the differentiated regions open now: `gradient` gives each
    place of a tied array its own tracer, and each place of a tied layer its own copy (Zygote's
    per-path gradients), so the functions that take each array or layer once (`trainables`, `params`,
    `modules`, `destructure`) ask this for what is the same object outside."""
    for r in reversed(_stack()):
        o = r.stands_for.get(id(x))
        if o is not None:
            x = o
    return x


def written(region: Region) -> list[tuple[Slot, Any]]:
    """`collect` for `run_in_region`: each written slot with its new value."""
    return [(slot, slot.get()) for slot in region.written.values()]


NESTED_ERROR = (
    "{what} was written inside a jax transformation (jax.vmap, lax.scan, lax.cond, ...) opened inside "
    "fluxjax's own (fluxjax.jit, gradient, functional's apply): the new state cannot leave it, and Flux has "
    "no such per-call state. Call the layer outside that transformation (BatchNorm normalises over the batch "
    "axis of the whole batch), put it in test mode there (testmode_(layer)), or thread its state yourself "
    "with the pure view fluxjax.functional(layer). Nothing was written to the model."
)

TRACER_ERROR = (
    "{what} tried to store a traced value outside fluxjax's transformations. This happens when a "
    "model in train mode runs under a plain jax transformation (jax.jit, jax.grad, ...). Use "
    "fluxjax.jit / fluxjax.gradient, the pure view fluxjax.functional(model), or testmode_(model)."
)


def rebind(obj: Any, name: str, value: Any) -> None:
    """Rebind `obj.name = value` through the state thread (see the module docstring); also in the
    layer whose state `obj` shares (`share_state`)."""
    commit(Slot(obj, name, True), value, what=f"{type(obj).__name__}.{name}")
    if _sharing:
        live = _sharing.get(id(obj))
        if live is not None:
            rebind(live, name, value)


_sharing: dict[int, Any] = {}  # id of a layer copy -> the layer whose state it shares (`share_state`)


def share_state(copy: Any, live: Any) -> None:
    """From now on, the state `copy` rebinds (`rebind`: BatchNorm's statistics, a Dropout key) is
    rebound in `live` too, as long as `copy` lives: `destructure`'s `re(v)` builds copies that share the
    model's non-trainable arrays, which Flux's BatchNorm updates in place."""
    _sharing[id(copy)] = live
    weakref.finalize(copy, _sharing.pop, id(copy), None)


def commit(slot: Slot, value: Any, what: str = "a layer") -> None:
    s = _stack()
    if s:
        s[-1].write(slot, value)
    elif isinstance(value, jax.core.Tracer):
        raise RuntimeError(TRACER_ERROR.format(what=what))
    else:
        slot.set(value)


def is_active(layer: Any) -> bool:
    """Flux's train/test decision: `layer.active` if set, else True inside a differentiated region."""
    a = getattr(layer, "active", None)
    if a is not None:
        return bool(a)
    if not _stack() and under_plain_trace():  # a plain jax.grad/jax.jit: automatic mode cannot tell
        warn_plain_trace(layer)
    return mode_context()


def within_gradient(x: Any = None) -> bool:
    """True inside `gradient`/`pullback`/`withgradient`/`train_` (NNlib's `within_gradient(x)`; the
    argument, which NNlib takes and ignores, may be left out).

    ```python
    >>> within_gradient()
    False
    >>> gradient(lambda x: x * within_gradient(), 3.0)   # True (1) inside the gradient
    (Array(1., dtype=float32, weak_type=True),)
    >>> gradient(lambda x: x * within_gradient(x), 3.0)  # NNlib's spelling, with an argument
    (Array(1., dtype=float32, weak_type=True),)

    ```
    """
    return any(r.differentiating for r in _stack())


def explicit_state() -> bool:
    """Whether the layers run inside `functional`'s `apply`, whose caller passes their state (keys
    included) and may map it with `jax.vmap` as it chooses."""
    return any(r.explicit for r in _stack())


def layer_key(layer: Any, field: str = "rng"):
    """A fresh key for a random layer: from the region's `rng` when one was given, else split from
    the layer's own key field (which then moves on, through the state thread)."""
    for r in reversed(_stack()):
        if r.rng is not None:
            return r.take_key()
    key, sub = jax.random.split(getattr(layer, field))
    rebind(layer, field, key)
    return sub


def guard_writes(keep) -> None:
    """In the innermost region, make every write so far conditional: where `keep` is False the
    slots get their original values back (used by `train_` to skip a non-finite step inside jit). An
    attribute the region added cannot be absent on a condition: it keeps its new value. Nor can a
    value have one shape on a condition and another otherwise: a field whose new value differs from
    the old in structure or in the shape of an array (Flux 0.14's `Recur` state, `(out,)` before the
    first call and `(out, batch)` after it) also keeps its new value, also when the step is skipped.
    An array whose dtype changed gets its old value back in the new dtype."""
    region = _stack()[-1]
    jnp = jax.numpy
    with sharing():  # values the slots shared stay shared
        for ident, slot in region.written.items():
            before = region.before[ident]
            if before is ABSENT:
                continue
            new = slot.get()
            old_leaves, old_tree = jax.tree_util.tree_flatten(before)
            new_leaves, new_tree = jax.tree_util.tree_flatten(new)
            if old_tree != new_tree or any(jnp.shape(a) != jnp.shape(b) for a, b in zip(new_leaves, old_leaves)):
                continue  # not selectable elementwise (a `where` would broadcast, or fail): keep the new value
            old_leaves = [b if a is b or jnp.result_type(a) == jnp.result_type(b) else jnp.asarray(b, jnp.result_type(a))
                          for a, b in zip(new_leaves, old_leaves)]
            slot.set(select(keep, new, jax.tree_util.tree_unflatten(old_tree, old_leaves)))


def note_check(ok: Any, value: Any, message: str) -> bool:
    """A check on traced values that cannot raise while tracing (ClipNorm's non-finite norm): note it
    in the innermost region, when the trace under way is that region's own, as `(ok, value, message)`
    (`ok` a boolean scalar, `value` a scalar, `message.format(float(value))` the error). The caller that
    runs the region acts on it: `train_`'s step skips the step and raises on the host, `fluxjax.jit`
    puts back the call's writes and raises after the call (see `checked_notes`). Returns whether it was
    noted; a trace that is not the region's own (a plain `jax.jit` inside it) cannot note it."""
    s = _stack()
    if not s or s[-1].trace is None or _trace_now() is not s[-1].trace:
        return False
    s[-1].checks.append((ok, value, message))
    return True


@jax.tree_util.register_pytree_node_class
class Checked:
    """What the checks noted in a region (`note_check`: ClipNorm's finite norm) found: `failed`, 0 when
    every check passed, else 1 + the index of the first that failed, and `value`, that check's value (for
    its message); stacked along a leading axis for the steps of a scan. The messages are static: part of
    the tree's structure, not arrays."""

    __slots__ = ("failed", "value", "messages")

    def __init__(self, failed: Any, value: Any, messages: tuple[str, ...]):
        self.failed, self.value, self.messages = failed, value, messages

    def tree_flatten(self) -> tuple:
        return (self.failed, self.value), self.messages

    @classmethod
    def tree_unflatten(cls, messages: tuple[str, ...], children: Any) -> Checked:
        return cls(*children, messages)

    def error(self, k: int | None = None) -> str | None:
        """The message of the first failed check (of the `k`-th step of a scan), or None: reads the device."""
        failed, value = jax.device_get((self.failed, self.value))
        if k is not None:
            failed, value = failed[k], value[k]
        return None if int(failed) == 0 else self.messages[int(failed) - 1].format(float(value))

    def note(self) -> None:
        """Note each of these (traced) checks again, in the region whose trace is under way (see `note_check`)."""
        for j, message in enumerate(self.messages):
            note_check(self.failed != j + 1, self.value, message)


def checked_notes(noted: list) -> Checked:
    """The `Checked` of the notes `noted` (`Region.checks`, `(ok, value, message)` each)."""
    jnp = jax.numpy
    failed, value = jnp.int32(0), jnp.float32(0)
    for j in reversed(range(len(noted))):  # the first failed check wins
        ok, v, _ = noted[j]
        failed = jnp.where(ok, failed, jnp.int32(j + 1))
        value = jnp.where(ok, value, jnp.asarray(v).astype(jnp.float32))
    return Checked(failed, value, tuple(message for _, _, message in noted))


def region_key():
    """For a draw from the global key in the innermost region: a key from the `rng` it was given
    (`functional`'s `apply(..., rng=key)`), else None (the global key, through the state thread). In
    `apply` without `rng` such a draw raises: `apply` is pure, and the global key is not among its inputs."""
    stack = _stack()
    if not stack:
        return None
    r = stack[-1]
    if r.rng is not None:
        return r.take_key()
    if r.explicit:
        raise ValueError(
            "functional's apply: a random draw from the global key (dropout(x, p), rrelu, rand_like, a cell "
            "that draws) inside apply would be the same at every call: apply is pure, and the global key is "
            "not among its inputs. Pass rng=key to apply, which feeds such draws (a new key each step)")
    return None


random_use_state_thread(current_region, rebind, region_key)
layer_use_state_thread(current_region, set_traced_attribute)
