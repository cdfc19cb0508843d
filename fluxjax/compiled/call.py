"""`fluxjax.jit`: a function of models, optimiser states and arrays, compiled with `jax.jit`.

A call walks its arguments (`fluxjax.core.walk.walk(..., functions=True)`): every array in them, in the
closure cells and globals the user's functions read, and the global RNG key, becomes an input of the
program; everything else the trace can read (the structure, static fields, closure and global values
that are not arrays, dict order, Flux's automatic mode) is in the cache key. Inside, the program runs
the function in a `Region` that swaps the traced inputs into the live objects, and returns, besides the
function's output, every array the function rebound (`update_`, BatchNorm statistics, Dropout keys, the
global key): the call writes those back into the caller's objects. A warm call reuses its last walk
(`plan.py`) while nothing it depends on has changed.
"""

from __future__ import annotations

import collections
import functools
import threading
import types
import warnings
from collections.abc import Callable
from typing import Any

import jax
from jax._src.core import trace_state_clean  # no public API says whether a trace is under way
from jax.sharding import SingleDeviceSharding

from .. import callsite
from ..core.keys import static_key
from ..core.layer import structure_version
from ..core.region import TRACER_ERROR, checked_notes, commit, current_region, guard_writes, mode_context, run_in_region
from ..core.undo import Contents, runs_again
from ..core.walk import Slot, Walk, set_many, walk
from ..random import default_key, default_rng
from . import hostrandom
from .entry import Entry, act_on_checks, shared_output
from .plan import Containers, Plan, is_data, reads_set, refresh_reads
from .pure import tracing

PLAN_MISSES = 3  # see Entry.unused_plans
PLAN_RETRY = 64  # ... and then a plan is made again every PLAN_RETRY walks, in case the calls settled
SPARE_PLANS = 3  # earlier calls' plans kept beside the latest (two models stepped in turn, as in a GAN)
SPARE_AGE = 64  # calls after which an earlier plan that no call used is dropped, with the models it holds
MAX_PROGRAMS = 32  # compiled programs one `fluxjax.jit` function keeps (least recently used dropped)
_REFUSED = ("in_shardings", "out_shardings", "donate_argnames")
NO_STATICS: tuple[dict, dict] = ({}, {})  # a call without static arguments (never written to)


def _no_leaked_reads(w: Walk) -> None:
    """After a trace: a closure variable or global that the function read and then rebound to a traced
    value (`total = total + x`) would hold an invalid tracer from now on. It is put back, and the call
    raises, as `gradient` does for the same code."""
    for slot, before in w.watched:
        now = slot.get_base()
        if isinstance(now, jax.core.Tracer):
            slot.set_base(before)
            where = f"global {slot.key!r}" if slot.attr is False else "a closure variable"
            raise RuntimeError(
                f"fluxjax.jit: the function stored a traced value in {where}; after the call it would be "
                "invalid (the eager call would have updated it, the compiled one cannot). Return the value "
                "instead, or keep it in a field of a layer (fluxjax.rebind), which the program writes back."
            )


_warned_sets: set = set()
_last = threading.local()  # .set_reads: what the last call of this thread set that it reads (`last_set_reads`)


def last_set_reads() -> tuple | list[str]:
    """What the trace of this thread's last `fluxjax.jit` call set that its function reads (`global STEP;
    STEP += 1`, see `plan.reads_set`), empty when it did not trace or set nothing: that call's program
    is used once, and a caller that compiles on the user's behalf runs the later calls op by op."""
    return getattr(_last, "set_reads", ())


def _warn_sets_reads(fn: Callable, what: list[str]) -> None:
    """Once per function: its trace set what it reads, so each call that does so is compiled anew."""
    code = getattr(fn, "__code__", type(fn))
    if code in _warned_sets:
        return
    _warned_sets.add(code)
    name = getattr(fn, "__qualname__", type(fn).__name__)
    warnings.warn(
        f"fluxjax.jit: {name} set {', '.join(what)} while being traced, and reads it: so that each call "
        "sees the value the last one left, as the eager call does, a call that sets it is traced and "
        "compiled again. Pass the value as an argument (or keep a counter in a layer's field, which the "
        "program takes and writes back) to compile once.", stacklevel=callsite.stacklevel())


def _commit_beside(w: Walk) -> None:
    """Commit the uncommitted arrays of a call that has committed ones on a single device to that
    device, rebinding them where they are (the model's arrays too; the values do not change).

    jax compiles a call apart for each pattern of committed arguments, and a program that takes one
    committed array returns committed ones. A model made on the default device, stepped on
    `device_put` data, would have its step compiled twice: for the first call, and again for every
    later one, whose model arrays are the first call's committed outputs."""
    device = None
    leaves = w.leaves[:w.starts[-1]]  # not the global key (the box's last item): it stays where it is
    for v in leaves:
        if isinstance(v, jax.core.Tracer):
            return
        if isinstance(v, jax.Array) and v.committed:
            if not isinstance(v.sharding, SingleDeviceSharding) or device not in (None, v.sharding):
                return  # several devices: placement is the caller's (see fluxjax.parallel)
            device = v.sharding
    if device is None:
        return
    placed: dict[int, jax.Array] = {}  # arrays held in several places stay one array
    for i, v in enumerate(leaves):
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


def _argnums(v: Any) -> tuple:
    if v is None:
        return ()
    return (v,) if isinstance(v, (int, str)) else tuple(v)


def _no_tracers(changed: dict, extra: dict) -> None:
    """At top level a traced new value means the call ran under a plain jax transformation (`jax.vmap`
    of a `fluxjax.jit` function with BatchNorm in train mode): writing it would leave a tracer in a
    model, so refuse before anything is written."""
    for v in (*changed.values(), *extra.values()):
        if any(isinstance(x, jax.core.Tracer) for x in jax.tree_util.tree_leaves(v)):
            raise RuntimeError(TRACER_ERROR.format(what="a fluxjax.jit function"))


class Jitted:
    """A function of models and arrays compiled with `jax.jit`; see `jit`."""

    def __init__(self, fn: Callable, **jit_kwargs: Any):
        for k in _REFUSED:
            if k in jit_kwargs:
                raise TypeError(f"fluxjax.jit does not take {k}=: place arrays with jax.device_put or "
                                "fluxjax.parallel.shard_ (the program follows its inputs' shardings), and donate "
                                "by position with donate_argnums=")
        self.fn = fn
        self.static_argnums = _argnums(jit_kwargs.pop("static_argnums", None))
        self.static_argnames = _argnums(jit_kwargs.pop("static_argnames", None))
        self.donate_argnums = _argnums(jit_kwargs.pop("donate_argnums", None))
        # arrays the function reads from closures/globals: inputs rather than constants (see `walk`)
        self.read_arrays = bool(jit_kwargs.pop("read_arrays", False))
        self.jit_kwargs = jit_kwargs
        self._cache: collections.OrderedDict[Any, Entry] = collections.OrderedDict()
        self._plan: Plan | None = None  # the last call's walk, reused while it still fits
        self._spare: list[Plan] = []  # the plans of calls before it, most recent first
        self.last_plan: Plan | None = None  # the plan the last call used or made (None: it walked, made none)
        self._calls = 0  # calls so far: a plan's `used` is the last one that used it
        self._lock = threading.RLock()  # one call at a time: a call swaps tracers into live objects
        self.compilations = 0  # cache entries ever made (the cache keeps the latest MAX_PROGRAMS)
        functools.update_wrapper(self, fn)

    def __get__(self, obj: Any, objtype: type | None = None) -> Any:
        """`@fluxjax.jit` on a method: the object is the first argument (walked like any model)."""
        return self if obj is None else types.MethodType(self, obj)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        with self._lock:
            leaves, tree = self._call(args, kwargs)
        return tree.unflatten(leaves)

    def call_flat(self, *args: Any) -> tuple[list, Any]:
        """The call, its result left flat: `(leaves, treedef)` (for a caller that builds the result
        itself, faster than the treedef's `unflatten`: the fused eager step)."""
        with self._lock:
            return self._call(args, {})

    def _statics(self, args: tuple, kwargs: dict) -> tuple[dict, dict]:
        n = len(args)
        pos = {}
        for i in self.static_argnums:
            if not -n <= i < n:
                raise TypeError(f"fluxjax.jit: static_argnums names argument {i}, but the call has {n} positional arguments")
            pos[i % n] = args[i]
        return pos, {k: kwargs[k] for k in self.static_argnames if k in kwargs}

    def _call(self, args: tuple, kwargs: dict) -> Any:
        _last.set_reads = ()
        region = current_region()
        mode = False if region is None else mode_context()
        if default_rng.key is None:
            default_key()  # the global key exists before the walk, so that it is an input
        plan = self._plan
        leaves = None
        self._calls += 1
        if self._spare and self._calls % SPARE_AGE == 0:  # a model dropped since is not kept alive by its plan
            self._spare = [p for p in self._spare if self._calls - p.used <= SPARE_AGE]
        if not kwargs:
            if plan is None or not plan.matches(args, mode):
                plan = next((p for p in self._spare if p.matches(args, mode)), None)
                if plan is not None:  # an earlier call's plan fits: it becomes the latest
                    self._spare.remove(plan)
                    if self._plan is not None:
                        self._spare.insert(0, self._plan)
                    self._plan = plan
            if plan is not None:
                leaves = plan.load(args)  # None when arrays the program takes as one are no longer one
                if leaves is None:
                    plan.release()
        if leaves is not None:
            box, w, entry, statics = plan.box, plan.walk, plan.entry, NO_STATICS
            entry.unused_plans = 0
            plan.used = self._calls
        else:
            plan = None
            statics = self._statics(args, kwargs) if self.static_argnums or self.static_argnames else NO_STATICS
            pos, kw = statics
            dyn_kwargs = {k: v for k, v in kwargs.items() if k not in kw}
            box = [*(None if i in pos else a for i, a in enumerate(args)), dyn_kwargs, self.fn, default_rng]
            w = walk(box, functions=True, read_arrays=self.read_arrays)
            if w.host_rngs and hostrandom.reads_iterator(w.host_rngs, self.fn, tracing()):
                w.reusable = False  # no plan: its check would find the same iterator and run the old program
            if region is None:
                _commit_beside(w)
            shared = _sharing_pattern(w.leaves)
            key = (w.signature, shared, mode, len(args), static_key(tuple(sorted(pos.items()))),
                   static_key(tuple(sorted(kw.items()))))
            entry = self._cache.get(key)
            if entry is None:
                entry = self._cache[key] = self._make(len(args), shared, self._donated(w, shared, pos))
                while len(self._cache) > MAX_PROGRAMS:
                    self._cache.popitem(last=False)
            else:
                self._cache.move_to_end(key)
            leaves = _distinct(w.leaves, shared)
        top = trace_state_clean()
        entry.current = (box, w, statics, top)
        traces = entry.traces
        try:
            out_leaves, changed, extra, tree, checked = entry.call(leaves, top)
        except BaseException:
            if plan is None and traces == 0 and entry.traces == 0:
                self._cache.pop(key, None)  # a failed first trace leaves no entry behind
            raise
        finally:
            entry.current = None
        if not top and region is None:
            _no_tracers(changed, extra)
        traced = entry.traces != traces
        if traced:  # before the writes land
            try:
                _no_leaked_reads(w)
            except RuntimeError:
                self._forget(entry)  # its program reads the global as a constant: never run again
                raise
            sets = reads_set(w)
            if sets:  # a counter it advances itself: the next call runs the code again
                entry.wrote_fields.append(f"{', '.join(sets)}, which it reads")
                if not (tracing() or hostrandom.refusing()):  # (those callers go op by op from now on)
                    _warn_sets_reads(self.fn, sets)
            refresh_reads(w)
        _last.set_reads = sets if traced else ()  # (after the calls its trace made)
        version = structure_version()  # before the writes: one that changes the structure voids the plan
        if plan is not None:
            plan.store(changed, None if region is None else commit)
        elif region is not None:
            for where, v in changed.items():
                for i in where:
                    commit(w.slots[i], v)
        else:
            set_many(w.slots, [(i, v) for where, v in changed.items() for i in where])
        for k, v in extra.items():
            commit(entry.extra_slot(k, w), v)
        if entry.wrote_fields:  # the next call runs the Python code again, as the eager call does
            self._forget(entry)
        elif plan is None and not kwargs and not statics[0] and w.reusable and self._worth_a_plan(entry, args):
            if self._plan is not None:
                self._spare.insert(0, self._plan)
                del self._spare[SPARE_PLANS:]
            plan = self._plan = Plan(box, w, entry, len(args), mode, version)
            plan.used = self._calls
        if plan is not None:
            if traced:  # what the trace's own Python code changed is not a change (`refresh_reads` above)
                plan.recheck()
            plan.release()
        self.last_plan = plan
        act_on_checks(checked, top)
        return out_leaves, tree

    def _worth_a_plan(self, entry: Entry, args: tuple) -> bool:
        """Whether to make a plan of this call's walk. Making one costs more than a walk; plans of one
        structure that no call reused (a new model, or a closure over new objects, at every call of
        the eager `withgradient`) stop being made after PLAN_MISSES, but for every PLAN_RETRY-th walk,
        and for a call with the same models (and function code) as the walk before it."""
        same = tuple(a.__code__ if type(a) is types.FunctionType else id(a) for a in args
                     if not (is_data(a) or isinstance(a, tuple)))
        repeat, entry.last_walked = same == entry.last_walked, same
        entry.unused_plans += 1
        return (not self.read_arrays or repeat or entry.unused_plans <= PLAN_MISSES
                or entry.unused_plans % PLAN_RETRY == 0)

    def _donated(self, w: Walk, shared: tuple | None, statics: dict) -> tuple | None:
        """`(donated inputs, kept inputs)` of the program for `donate_argnums`: the distinct inputs
        every one of whose slots lies in a donated argument."""
        if not self.donate_argnums:
            return None
        n = len(w.starts) - 3  # the box's items after the arguments: keywords, the function, the key
        ends = [*w.starts[1:], len(w.leaves)]
        donated_leaf = [False] * len(w.leaves)
        for i in self.donate_argnums:
            if not -n <= i < n or i % n in statics:
                raise TypeError(f"fluxjax.jit: donate_argnums names argument {i}, which is not a traced "
                                f"argument of this call ({n} positional)")
            for j in range(w.starts[i % n], ends[i % n]):
                donated_leaf[j] = True
        at = list(range(len(w.leaves))) if shared is None else list(shared)
        n_inputs = max(at, default=-1) + 1
        ok = [True] * n_inputs
        for j, p in enumerate(at):
            ok[p] = ok[p] and donated_leaf[j]
        return (tuple(p for p in range(n_inputs) if ok[p]), tuple(p for p in range(n_inputs) if not ok[p]))

    def _make(self, n_args: int, shared: tuple | None, split: tuple | None) -> Entry:
        entry: Entry
        self.compilations += 1
        donated = None if split is None else frozenset(split[0])

        def pure(*parts):
            if split is None:
                (leaves,) = parts
            else:
                leaves = [None] * (len(split[0]) + len(split[1]))
                for part, values in zip(split, parts):
                    for p, v in zip(part, values):
                        leaves[p] = v
            box, w, (pos, kw), top = entry.current
            xs = leaves if shared is None else [leaves[p] for p in shared]

            result: list = []

            def run():  # the arguments are read from the box once the traced values are in it
                args = box[:n_args]
                for i, v in pos.items():
                    args[i] = v
                result.append(box[n_args + 1](*args, **box[n_args], **kw))
                return result[0]

            def collect(region):
                # a list or dict the walk reached that the code shrank (`q.pop(0)`): its slots are gone
                if contents.shrunk(w.containers):
                    contents.restore()  # the containers as they were, so that the region puts every slot back
                    raise hostrandom.ContainerShrunk(getattr(box[n_args + 1], "__qualname__", "the function"))
                # checks noted in this trace (ClipNorm's finite norm): a top-level call raises after it
                # when one failed, so every write of the call is put back then (`act_on_checks`)
                checked = checked_notes(region.checks) if region.checks else None
                if checked is not None and top:
                    guard_writes(checked.failed == 0)
                # one output for each new value, keyed by the slots it goes to
                new: dict[int, tuple[Any, list[int]]] = {}
                now = set()
                for i, slot in enumerate(w.slots):
                    v = slot.get()
                    now.add(id(v))
                    # a donated input is gone after the call: one the code left in place comes back too
                    if v is not xs[i] or (donated is not None and (i if shared is None else shared[i]) in donated):
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
                        li = w.layers.get(id(slot.owner))
                        entry.extra_slots.append(slot if li is None else (li, slot.key, slot.attr, slot.path))
                    extra[k] = slot.get()
                # the result read before the region puts the inputs back: a model the function returns
                # comes back with what the call wrote into it, as the eager call's does
                return changed, extra, shared_output(result[0]), checked

            containers = Containers(w.containers)
            rngs = hostrandom.Snapshot(w.host_rngs)
            contents = Contents([*w.containers, *(o for o, _ in w.watch)], w.watched)  # (`collect` reads it too)
            try:
                _, (changed, extra, (out_leaves, tree), checked) = run_in_region(
                    run, zip(w.slots, xs), collect, fields_set=entry.wrote_fields.extend)
            except BaseException as e:
                if runs_again(e):  # the code runs again (op by op): the failed trace's side effects are undone
                    rngs.restore()
                    contents.restore()
                raise
            if rngs.changed():
                hostrandom.drew(box[n_args + 1], tracing(), rngs)
            if not containers.holds():
                entry.wrote_fields.append("a list or dict of the arguments (an item set, added or removed)")
            entry.note_output(leaves, tree)
            return out_leaves, changed, extra, checked

        kwargs = dict(self.jit_kwargs)
        if split is not None:
            kwargs["donate_argnums"] = (0,)
        entry = Entry(pure, kwargs, shared, split)
        return entry

    def _forget(self, entry: Entry) -> None:
        """Drop `entry` and the plans that lead to it."""
        for k in [k for k, e in self._cache.items() if e is entry]:
            del self._cache[k]
        if self._plan is not None and self._plan.entry is entry:
            self._plan = None
        self._spare = [p for p in self._spare if p.entry is not entry]

    def cache_size(self) -> int:
        """Number of distinct argument structures compiled (not counting jax's own shape retraces)."""
        return len(self._cache)


def jit(fn: Callable | None = None, **jit_kwargs: Any) -> Any:
    """Compile a function of models, optimiser states and arrays (`fluxjax.jit(step)`).

    Models travel as their array leaves. Everything the function rebinds on its arguments (`update_`,
    BatchNorm statistics, Dropout keys) and on what its code reads (models and arrays in closure cells
    and globals, the global RNG key) comes out of the compiled program and is written back into the
    caller's objects. A call computes what the eager call computes: whatever the trace reads that is
    not an array (structure, static fields, closure and global values, dict order, the train/test mode
    Flux would pick) is part of the cache key, so a change retraces. Python side effects run while
    tracing, as under `jax.jit`, except those on the models: a call whose code set a field of a layer
    or of a custom rule (`self.initialized = True`), or an item of a list or dict in the arguments,
    is not reused, so that the next call runs the code again, as the eager call does. One call runs
    at a time (a lock); the last `MAX_PROGRAMS` structures are kept compiled.

    Keywords go to `jax.jit`. `static_argnums`/`static_argnames` and `donate_argnums` refer to the
    function's own arguments; on a CPU the program is scheduled by XLA's memory-optimised scheduler
    (faster for Flux's layers there, see fluxjax/compiled/options.py) unless `compiler_options` names
    another `xla_cpu_scheduler_type`. A call whose arrays include some committed to one device
    (`jax.device_put(x, device)`) commits the others there too, the model's included, so that the step
    compiles once. On a method (`@fluxjax.jit def __call__(self, x)`), the object is the first argument.

    ```python
    >>> import fluxjax as Flux, jax.numpy as jnp
    >>> model = Flux.Dense(2, 1)
    >>> opt_state = Flux.setup(Flux.Descent(0.1), model)
    >>> @Flux.jit
    ... def step(model, opt_state, x, y):
    ...     loss, (g,) = Flux.withgradient(lambda m: Flux.losses.mse(m(x), y), model)
    ...     Flux.update_(opt_state, model, g)
    ...     return loss
    >>> x, y = jnp.ones((2, 4)), jnp.zeros((1, 4))
    >>> bool(step(model, opt_state, x, y) > step(model, opt_state, x, y))
    True

    ```
    """
    if fn is None:
        return lambda f: Jitted(f, **jit_kwargs)
    return Jitted(fn, **jit_kwargs)
