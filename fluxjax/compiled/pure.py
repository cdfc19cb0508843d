"""Pure functions of arrays run as one cached XLA program: what `update_`/`update` (and the implicit
`update_(rule, ps, gs)`) compute from the optimiser states, the parameters and the gradients.

An eager `update_` runs every rule op by op: for Adam on an MLP that is about a dozen small dispatches
per array, and on a CPU the dispatches cost far more than the maths. `cached_pure(key, fn, args)`
runs `fn(args)` as one `jax.jit` program instead, cached on `key` (what `fn` depends on besides its
arguments: the rules, by identity), the tree structure of `args`, which of its arrays are the same
object, and their shapes and dtypes. The numbers are those of the eager call (the same operations,
compiled; XLA may fuse them, so they agree to rounding, rtol 1e-6).

What stays the same as the eager call:
- arrays that are one object in `args` are one input, and `fn` runs inside `sharing()`, so values
  that the eager call shares between optimiser leaves (Adam's step counter) come back as one array;
- an output that is an input unchanged comes back as that very input object;
- the rule runs while tracing, so an error it raises (a shape mismatch) is raised before anything
  is written, as eagerly.

When it is not used (`cached_pure` returns `NOT_RUN`, and the caller runs `fn` eagerly):
- inside a trace (`fluxjax.jit`, `jax.jit`, `jax.grad`, a region is open or an argument is a tracer),
  where the caller's program already compiles it;
- an argument leaf that is not an array (a Python number: compiling would turn it into an array);
- inside `with fluxjax.eager():`, the opt-out;
- `fn` used a value to choose what to do in Python (`if x > 0` on an array: a
  `ConcretizationTypeError` while tracing). The key is then remembered and that computation always
  runs eagerly from then on.

Python side effects of `fn` (a custom rule that prints or appends to a list) happen once per
compilation, while tracing, as under `jax.jit`; use `fluxjax.eager()` to keep them per call. A draw
from the global key (a custom rule adding noise with `randn_like`) is not one: compiled here, the noise
would be a constant of the program; nor is a rule setting a field of its own (`self.t += 1`), which
would happen once. Such a computation runs op by op, from its first call on, so that each call draws
anew and advances the key, or sets the field, as Flux's does.
"""

from __future__ import annotations

import collections
import contextlib
import threading
from collections.abc import Callable, Iterator
from typing import Any

import jax
from jax._src.core import trace_state_clean  # no public API says whether a trace is under way

from ..core.layer import dict_order, restore_order
from ..core.region import current_region
from ..core.sharing import sharing
from ..core.static_writes import static_writes
from ..core.undo import TRACE_ERRORS
from ..core.walk import ARRAY_TYPES
from ..random import GlobalKeyUnderTrace, default_rng
from . import hostrandom
from .access import rebuilder
from .options import with_defaults

MAX_PROGRAMS = 128  # LRU bound on the cached programs
NOT_RUN = object()  # `cached_pure`'s answer when the caller must run `fn` eagerly itself

# compile/hit/eager counters, for tests and benchmarks: `stats["compiles"]` counts traces
stats: dict[str, int] = collections.Counter()



class _Impure(Exception):
    """Raised while tracing `fn` when it drew from the global key or set a field of a rule (see the
    module docstring)."""


class _Flags(threading.local):
    """This thread's flags; the class attributes are the defaults (a read needs no `getattr` default,
    which costs a failed lookup on every eager call)."""

    eager = False
    tracing = False


_tls = _Flags()
_lock = threading.Lock()
_programs: collections.OrderedDict = collections.OrderedDict()
_eager_only: dict[Any, tuple] = {}  # key -> the objects its ids name, kept alive so ids are not reused


class _flag:
    """Set this thread's flag `name` for the block, then put back what it was (a class, not a
    generator: it is entered on every eager compiled call, and costs a third of one)."""

    __slots__ = ("name", "before")

    def __init__(self, name: str):
        self.name = name

    def __enter__(self) -> None:
        self.before = getattr(_tls, self.name)
        setattr(_tls, self.name, True)

    def __exit__(self, *exc: Any) -> None:
        setattr(_tls, self.name, self.before)


@contextlib.contextmanager
def eager() -> Iterator[None]:
    """Run fluxjax's eager calls op by op, as written, instead of as cached compiled programs.

    Inside `with fluxjax.eager():`, `update_`/`update` run each rule operation by operation (the
    numbers are the same either way, to rounding); use it to debug a custom rule with `print`, or to
    keep its Python side effects once per call.

    ```python
    >>> with eager():      # `fluxjax.eager()`
    ...     is_eager()
    True
    >>> is_eager()
    False

    ```
    """
    with _flag("eager"):
        yield


def is_eager() -> bool:
    """True inside `fluxjax.eager()`."""
    return _tls.eager


def clear() -> None:
    """Forget every cached program and every computation marked to run eagerly."""
    with _lock:
        _programs.clear()
        _eager_only.clear()


class _Program:
    __slots__ = ("jitted", "out", "keep")

    def __init__(self, jitted: Callable, keep: tuple):
        self.jitted = jitted
        self.out: Any = None  # (rebuild, [("in", j) | ("out", k) | ("const", v)]) once traced
        self.keep = keep


def tracing() -> bool:
    """Whether an eager call that fluxjax compiles on its own (`cached_pure`'s eager `update_`, the eager
    `gradient`) is being traced now. A rule that must raise on a value (ClipNorm's non-finite norm) asks
    this, and then needs the concrete value (`bool(x)`), which sends the call op by op: it raises as
    the eager call does."""
    return _tls.tracing


def tracing_eager_call() -> _flag:
    """Mark the trace of an eager call compiled on the caller's behalf (see `tracing`)."""
    return _flag("tracing")


def concrete(*xs: Any) -> bool:
    """Whether every one of `xs` has a value now, so a check on values (an index in range) can run. In
    the trace of an eager call that fluxjax compiles on its own, a traced value raises JAX's
    concretization error instead, so that the call runs op by op, where the check runs as written."""
    tracer = next((x for x in xs if isinstance(x, jax.core.Tracer)), None)
    if tracer is None:
        return True
    if tracing():
        raise jax.errors.ConcretizationTypeError(tracer, "a check on the values of this array (fluxjax runs the "
                                                 "call op by op)")
    return False


_CONCRETE: set[type] = set()  # the types of concrete arrays met so far (not tracers)


def cached_pure(key: tuple, keep: tuple, fn: Callable[[Any], Any], args: Any) -> Any:
    """`fn(args)` as a cached compiled program, or `NOT_RUN` (see the module docstring).

    `key` must name everything `fn` depends on besides `args` (hashable; objects by `id`), and `keep`
    the objects whose ids are in it (kept alive with the program). `args` is a pytree of arrays;
    `fn` returns a pytree of arrays.
    """
    if is_eager() or current_region() is not None or not trace_state_clean():
        return NOT_RUN
    leaves, treedef = jax.tree_util.tree_flatten(args)
    uniq: list = []
    where: dict[int, int] = {}
    index = []
    for a in leaves:
        if type(a) not in _CONCRETE:
            if not isinstance(a, ARRAY_TYPES) or isinstance(a, jax.core.Tracer):
                return NOT_RUN
            _CONCRETE.add(type(a))
        j = where.get(id(a))
        if j is None:
            j = where[id(a)] = len(uniq)
            uniq.append(a)
        index.append(j)
    if key in _eager_only:
        stats["eager"] += 1
        return NOT_RUN
    full = (key, treedef, tuple(index), tuple((a.shape, a.dtype, getattr(a, "weak_type", False)) for a in uniq))
    with _lock:
        prog = _programs.get(full)
        if prog is not None:
            _programs.move_to_end(full)
    if prog is None:
        prog = _compile(fn, treedef, index, keep, dict_order(args))
        try:
            with tracing_eager_call():
                outs = prog.jitted(uniq)  # traces now
        except (*TRACE_ERRORS, _Impure):
            with _lock:
                _eager_only[key] = keep
            stats["eager"] += 1
            return NOT_RUN
        with _lock:
            _programs[full] = prog
            while len(_programs) > MAX_PROGRAMS:
                _programs.popitem(last=False)
    else:
        stats["hits"] += 1
        outs = prog.jitted(uniq)
    build, out_index = prog.out
    return build([uniq[j] if src == "in" else outs[j] if src == "out" else j for src, j in out_index])


def _compile(fn: Callable, treedef: Any, index: list, keep: tuple, in_order: Any) -> _Program:
    prog = _Program(None, keep)

    def program(uniq: list) -> list:
        stats["compiles"] += 1
        tracers = [uniq[j] for j in index]
        key = default_rng.key
        host = hostrandom.Snapshot()
        with sharing(), static_writes() as log:
            try:
                res = fn(restore_order(treedef.unflatten(tracers), in_order))
            except GlobalKeyUnderTrace:  # a draw (a rule adding noise): per call, op by op
                raise _Impure from None
            if log.changed():  # a rule that sets a field of its own: done once, at the trace
                raise _Impure
        if host.changed():  # a custom rule drawing with np.random: per call, op by op
            host.restore()
            raise _Impure
        if default_rng.key is not key:  # drawn at trace time: a constant of the program
            default_rng.key = key
            raise _Impure
        outs, out_def = jax.tree_util.tree_flatten(res)
        ins = {id(t): j for j, t in enumerate(uniq)}
        mine: dict[int, int] = {}
        out_index: list = []
        returned: list = []
        for o in outs:
            if not isinstance(o, jax.core.Tracer):  # made from no input: the same every call
                out_index.append(("const", o))
                continue
            if id(o) in ins:
                out_index.append(("in", ins[id(o)]))
                continue
            k = mine.get(id(o))
            if k is None:
                k = mine[id(o)] = len(returned)
                returned.append(o)
            out_index.append(("out", k))
        order = dict_order(res)
        prog.out = (out_def.unflatten if order is None else rebuilder(out_def, order), out_index)
        return returned

    prog.jitted = jax.jit(program, **with_defaults({}))
    return prog
