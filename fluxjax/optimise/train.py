"""`train_`: Flux's training loop, compiled by default. As Flux's `Train` module, it also has `setup`,
`trainstep_` and `trainstep_withgradient_` (trainstep.py)."""

from __future__ import annotations

import contextlib
import functools
import itertools
import math
import warnings
from collections.abc import Callable, Iterable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.sharding import NamedSharding, PartitionSpec, SingleDeviceSharding

from ..compiled import hostrandom
from ..compiled.call import jit as _jit
from ..compiled.call import last_set_reads
from ..compiled.held import HeldSteps
from ..compiled.scan import NotFusable, scan_steps
from ..data import DataLoader
from ..errors import NonFiniteNorm
from ..modes import trainmode_
from ..parallel.batches import ShardedBatches, place_for_training
from ..random import default_key, default_rng
from ..zygote import Params
from ..zygote.plan import first_output
from ._rule_base import LeafState
from .implicit import _implicit_holder
from .progress import progress as _display
from .rooted import boxed, copy_back, unowned_arrays
from .trainstep import (  # noqa: F401  (trainstep_ & co.: Flux's Train module has them too)
    Checked,
    _guarded_step,
    _split_adtype,
    _step,
    trainstep_,
    trainstep_withgradient_,
)
from .tree import setup
from .wholetree import as_transform


def _stateless(rule: optax.GradientTransformation) -> bool:
    """A rule whose state holds nothing that a step changes (Descent, WeightDecay, ClipGrad, chains of
    them, optax.sgd without momentum): only hyperparameters, or nothing. Discarding it loses nothing."""
    try:
        state = rule.init(jnp.zeros((1,), jnp.float32))
    except Exception:  # a rule that cannot say: assume it keeps something
        return False
    found = jax.tree_util.tree_leaves(state, is_leaf=lambda z: isinstance(z, LeafState))
    return all(isinstance(z, LeafState) for z in found)


class NonFiniteLoss(FloatingPointError):
    """The loss was NaN or Inf (Flux's `DomainError`); the step was not applied.

    ```python
    >>> m = Dense(1, 1)
    >>> opt = setup(Descent(0.1), m)
    >>> data = [(jnp.ones((1, 1)),)]
    >>> train_(lambda m, x: jnp.log(-jnp.sum(m(x) ** 2)), m, data, opt, jit=False)   # log of a negative number
    Traceback (most recent call last):
        ...
    fluxjax.optimise.train.NonFiniteLoss: train_: the loss is nan at data index 0 (0-based); ...
    >>> issubclass(NonFiniteLoss, FloatingPointError)
    True

    ```
    """


@_jit
def _compiled(loss, model, sources, opt, d, ok):
    """`train_`'s step as one XLA program, kept only when its loss is finite, its rules' checks passed
    (ClipNorm's finite norm) and `ok` (every earlier step was kept). `sources` are the models behind a
    `Params`, passed so that their arrays are traced inputs, not constants. Returns `((loss,
    checked), ok)`: `checked` (a `Checked`, or None when the rules noted no check) says which failed."""
    val, _, ok, checked = _guarded_step(loss, model, opt, d, ok)
    return (first_output(val), checked), ok


@_jit
def _compiled_chunk(loss, model, opt, ds, ok):
    """`len(ds)` steps of `_compiled` in one program: `ds` holds the batches stacked along a new leading
    axis (stacked before the call: a list of batches as input costs more in the walk than the stack).
    Returns `((losses, checked), ok)`, the loss of every step (before its update), its checks
    (stacked) and `ok` after the last."""

    def step(d, ok):
        val, _, ok, checked = _guarded_step(loss, model, opt, d, ok)
        return (first_output(val), checked), ok

    return scan_steps(step, [loss, model, opt, default_rng], ds, ok)


def train_(loss: Callable, model: Any, data: Iterable, opt_state: Any, *rest: Any, jit: bool = True,
           progress: bool | None = None, mesh: Any = None, cb: Any = None, fuse: bool = True) -> TrainHistory:
    """Flux's `train!`: one optimiser step per element of `data`; returns a `TrainHistory`.

    `train_(loss, model, data, opt_state)` calls `loss(model, *d)` for tuple batches `d` (else
    `loss(model, d)`), differentiates it with respect to `model` (the loss may return `(loss, aux...)`),
    and applies `update_`. As Flux 0.16.11's `train!`, it first calls `trainmode_(model)`, so Dropout and
    BatchNorm stay in train mode afterwards: call `testmode_(model)` before evaluating. The implicit Flux
    0.13 form `train_(loss, params(m), data, rule)` calls `loss(*d)` and leaves the modes alone, as Flux
    0.13's `train!`. Steps are compiled with `fluxjax.jit` (`jit=False` runs them eagerly). A NaN or Inf loss
    raises `NonFiniteLoss` naming the data index, with the model as it was before that step (compiled, the
    host reads the losses once every `CHECK_EVERY` steps, so up to that many more batches may have been
    drawn from `data`, and skipped, before it raises). So does a rule that meets a value it refuses:
    `ClipNorm` (`throw=True`) raises its `ValueError` for a non-finite gradient norm, naming the data
    index, with the model as it was before that step. `mesh=` (a `jax.sharding.Mesh`) runs every
    step on all its devices: see `fluxjax.parallel` (model and state replicated unless `shard_` placed
    them, each batch split along its last axis over the mesh's "data" axis). `cb=` is an error, as in
    Flux: write the loop with `trainstep_` (or `withgradient` and `update_`) to run code between steps.

    `train_(loss, adtype, model, data, opt_state)` is Flux 0.16's form with a backend choice:
    `AutoZygote()`, `AutoEnzyme()` and `AutoMooncake()` all mean JAX's reverse mode, and
    `AutoFiniteDifferences()` takes central finite differences of the loss (the steps then run eagerly).

    It returns a `TrainHistory`: `losses`, the loss of each step as a float, computed before that
    step's update, and `steps`, their number. Compiled, the losses stay on the device until the loop
    ends, so collecting them costs no wait between steps.

    ```python
    >>> model = Flux.Chain(Flux.Dense(2, 1))
    >>> opt_state = Flux.setup(Flux.Descent(0.1), model)
    >>> x, y = jnp.ones((2, 4)), jnp.zeros((1, 4))
    >>> h = Flux.train_(lambda m, x, y: Flux.losses.mse(m(x), y), model, [(x, y)] * 3, opt_state)
    >>> h.steps, h.losses[0] > h.losses[1] > h.losses[2]
    (3, True)

    ```

    Compiled, over a list or tuple of batches or a `DataLoader` (data whose iteration runs none of your
    code), `train_` runs `CHECK_EVERY` steps of small batches (up to `FUSE_MAX_BATCH_BYTES` each) of one
    shape per XLA call, as a `jax.lax.scan` (`fuse=False`: one call per step). The numbers are those of
    the steps one by one; Python code in the loss runs while tracing, as under `jax.jit`, except where that
    would freeze what Flux's loop computes anew at each step: a loss that draws from NumPy's or Python's
    random generators (`np.random.randn`), reads an iterator (`next(it)`), takes items out of a list it
    reads, or advances a value it reads (`global step; step += 1`) runs op by op from that step on (a
    fused chunk cannot carry such a step: its steps go one call each). A step the scan
    cannot carry (one that writes beside the model, its optimiser state and the global key, or sets a
    field, as a layer's data-dependent initialisation `self.initialized = True` does) runs one call
    per step.

    Progress (`tqdm.auto`, the `progress` extra): `progress=None` (the default) shows a bar with the
    latest loss for data with a length of 100 or more at a terminal or in Jupyter; `progress=True`
    always shows one (also for generators without a length), and when standard error is a file (a
    log), or tqdm is not installed, writes a plain line every 30 seconds and one at the end instead;
    `progress=False` shows nothing. Compiled, the loss shown is read once every `CHECK_EVERY` steps.
    """
    if cb is not None:
        raise TypeError("train_ does not support callback functions (cb=), as Flux's train!. For more control "
                        "write the loop: `for d in data: trainstep_(loss, model, d, opt_state)`, then your code.")
    adtype, model, data, opt_state = _split_adtype("train_", model, data, opt_state, rest, "data")
    if not isinstance(model, Params) and (found := unowned_arrays(model, "train_")):
        box = [model]  # a bare NumPy array (or a tuple of them): trained in a list, then written in place
        state = opt_state if isinstance(opt_state, optax.GradientTransformation) else [opt_state]
        try:
            return train_(boxed(loss), *(() if adtype is None else (adtype,)), box, data, state, jit=jit,
                          progress=progress, mesh=mesh, fuse=fuse)
        finally:
            copy_back(model, box, found)
    jit = jit and (adtype is None or adtype.traceable)  # every traceable adtype is JAX's reverse mode
    sources = None
    opt_state = as_transform(opt_state)  # optax.MultiSteps, a class of its own
    if isinstance(model, Params):
        if not isinstance(opt_state, optax.GradientTransformation):
            raise TypeError("train_(loss, ps, data, rule): implicit mode takes a rule, e.g. Adam()")
        opt_state = _implicit_holder(opt_state, model)
        sources = model._sources
        if not sources:
            jit = False  # bare-array Params: nothing to pass into a compiled step
    else:
        if isinstance(opt_state, optax.GradientTransformation):
            if not _stateless(opt_state):  # Descent & co. have nothing to lose
                warnings.warn(
                    "train_ was given a rule, not a state: the optimiser state is discarded afterwards. "
                    "Use opt_state = setup(rule, model) and pass opt_state.",
                    stacklevel=2,
                )
            opt_state = setup(opt_state, model)
        trainmode_(model)
    if mesh is not None:
        data = place_for_training(mesh, model, sources, opt_state, data)
    shown = _display(data, progress)
    try:
        with hostrandom.refused():  # a loss that draws from np.random (or reads an iterator): op by op
            if jit and fuse and sources is None and _runs_no_user_code(data) and not isinstance(data, ShardedBatches):
                losses = _run_fused(loss, model, data, opt_state, shown)
            else:
                losses = _run(loss, model, data, opt_state, sources, adtype, jit, shown)
    finally:
        if shown is not None:
            shown.close()
    return TrainHistory(losses)


def _eager_steps(loss, model, opt_state, data, start: int, adtype, shown) -> list:
    """`train_`'s steps op by op over `data`, whose first element is data index `start`."""
    losses = []
    for i, d in enumerate(data, start):
        try:
            lval = _step(loss, model, opt_state, d, lambda lval, i=i: _check(lval, i), adtype)
        except NonFiniteNorm as e:
            raise _refusal(str(e), i) from None
        losses.append(lval)
        if shown is not None:
            shown.set_loss(lval)
            shown.update()
    return losses


class _OpByOp(Exception):
    """In `_run_fused`: the loss advanced what it reads (a counter), so the steps from the next one on run
    op by op, as after a draw from a host generator."""


def _run_fused(loss, model, data, opt_state, shown) -> list:
    """`train_`'s compiled loop in pieces: each run of `CHECK_EVERY` batches of one structure and shape
    is one call of `_compiled_chunk`; other batches (a ragged last one, a change of shape, data that is
    not arrays) go one call each through `_compiled`, held (`HeldSteps`) between two chunks. As in
    `_run`, `ok` is read one piece late, so the host stacks the next batches while the device works; a
    non-finite loss turns it off, every later step then leaves the model alone, and the error names the
    first bad step."""
    default_key()  # the global key exists before the walk, so a draw inside the scan is a carried write
    ok, pieces, buf, sig, i = None, [], [], None, 0
    state = {"fused": True, "checked": 0, "settling": True, "eager": False}
    def check(piece) -> None:
        start, losses, checked, piece_ok = piece
        _check_window(list(losses), start, piece_ok, checked)
        if shown is not None:
            shown.set_loss(float(losses[-1]))

    def dispatch(batches: list, start: int) -> None:
        nonlocal ok
        if state["eager"]:
            pieces.append((start, _eager_steps(loss, model, opt_state, batches, start, None, shown), [], True))
            return
        if ok is None:
            ok = _flag(batches[0], model)
        losses = None
        try:
            if state["fused"] and len(batches) == CHECK_EVERY:
                held.close()  # the chunk's walk reads the models
                try:
                    (losses, checked), ok = _compiled_chunk(loss, model, opt_state, _stack(batches), ok)
                except NotFusable as e:  # nothing was applied: these steps go one by one
                    state["fused"] = e.settles and state["settling"]  # a second try, once they have run
                    state["settling"] = False
            if losses is None:
                losses, checked = [], []
                for d in batches:
                    (lval, c), ok = held(d, ok)
                    losses.append(lval)
                    checked.append(c)
                    if last_set_reads():  # the loss advances what it reads: the rest op by op
                        raise _OpByOp
        except (hostrandom.HostRandomDraw, _OpByOp):  # a draw from a host generator, a counter: op by op from here
            held.close()
            done = len(losses) if isinstance(losses, list) else 0  # steps of this piece that ran compiled
            if done:
                pieces.append((start, losses, checked, ok))
                if shown is not None:
                    shown.update(done)
            for piece in pieces[state["checked"]:]:  # every step so far is applied: check them now
                check(piece)
            pieces.append((start + done, _eager_steps(loss, model, opt_state, batches[done:], start + done, None,
                                                      shown), [], True))
            state["checked"], state["eager"] = len(pieces), True
            return
        pieces.append((start, losses, checked, ok))
        if shown is not None:
            shown.update(len(batches))
        while len(pieces) - state["checked"] > 1:  # every piece but the newest, which the device runs now
            check(pieces[state["checked"]])
            state["checked"] += 1

    with HeldSteps(_compiled, loss, model, None, opt_state) as held:  # the steps one by one
        for d in data:
            s = _fusable_signature(d)
            if buf and (s is None or s != sig):
                dispatch(buf, i - len(buf))
                buf = []
            sig = s
            buf.append(d)
            i += 1
            if s is None or len(buf) == CHECK_EVERY:
                dispatch(buf, i - len(buf))
                buf = []
        if buf:
            dispatch(buf, i - len(buf))
        for piece in pieces[state["checked"]:]:
            check(piece)
        return [v for _, losses, _, _ in pieces for v in ([losses] if isinstance(losses, jax.Array) else losses)]


FUSE_MAX_BATCH_BYTES = 1 << 16  # larger batches run one call per step (see `_fusable_signature`)


def _fusable_signature(d) -> tuple | None:
    """What batches stacked together must share (structure, shapes, dtypes); None when `d` is not
    fused: it holds something other than arrays, or more than `FUSE_MAX_BATCH_BYTES` (fusing saves the
    dispatch of each step, which matters for small steps; stacking a large batch copies more than that
    saves: on a 2-core CPU the medium MLP of the benchmarks, 400 KB batches, ran 2% slower fused)."""
    leaves, treedef = jax.tree_util.tree_flatten(d)
    if not leaves or not all(isinstance(x, (jax.Array, np.ndarray)) for x in leaves):
        return None
    if sum(x.nbytes for x in leaves) > FUSE_MAX_BATCH_BYTES:
        return None
    return treedef, tuple((x.shape, x.dtype) for x in leaves)


def _stack(batches: list) -> Any:
    """The batches stacked along a new leading axis: on the host for NumPy batches (one transfer
    then), else as one compiled program (`jnp.stack` op by op converts every batch on its own: for 32
    small batches about ten times the cost of this one dispatch)."""
    if all(isinstance(x, np.ndarray) for x in jax.tree_util.tree_leaves(batches[0])):
        return jax.tree_util.tree_map(lambda *xs: np.stack(xs), *batches)
    return _stacked(batches)


_stacked = jax.jit(lambda batches: jax.tree_util.tree_map(lambda *xs: jnp.stack(xs), *batches))


def _run(loss, model, data, opt_state, sources, adtype, jit, shown) -> list:
    """The loop of `train_`; returns the loss of every step (floats, or device arrays when compiled).
    Compiled, a step whose trace drew from a host random generator (or read an iterator, or took items
    out of a list it reads) and every later one run op by op (`compiled/hostrandom.py`)."""
    if not jit:
        return _eager_steps(loss, model, opt_state, data, 0, adtype, shown)
    # The host does not wait for the device between steps: a non-finite loss turns `ok` off, and every
    # later step then leaves the model alone, so `ok` is read once per window of steps, and only when
    # it is off are the window's losses read to name the first bad one. The error comes at most a
    # window late, with the model as it was before the bad step. The losses stay on the device until
    # the loop ends (a display reads the last one of each window, which the read of `ok` waited for).
    ok, window, checked, start, held, rest = None, [], [], 0, [], None
    items = iter(data)
    with _steps(data, loss, model, sources, opt_state) as step:
        for i, d in enumerate(items):
            if ok is None:
                ok = _flag(d, model)
            try:
                (lval, c), ok = step(d, ok)
            except hostrandom.HostRandomDraw:  # nothing of this step ran: it and the rest go op by op
                rest = (i, itertools.chain([d], items))
                break
            window.append(lval)
            checked.append(c)
            if shown is not None:
                shown.update()
            if len(window) == CHECK_EVERY:
                _check_window(window, start, ok, checked)
                if shown is not None:
                    shown.set_loss(float(window[-1]))
                held += window
                window, checked, start = [], [], i + 1
            if last_set_reads():  # the loss advances what it reads (a counter): the rest op by op
                rest = (i + 1, items)
                break
    _check_window(window, start, ok, checked)
    if rest is not None:
        return held + window + _eager_steps(loss, model, opt_state, rest[1], rest[0], adtype, shown)
    return held + window  # device arrays: TrainHistory reads them when asked


class TrainHistory:
    """What `train_` did: `losses`, the loss of every step as a float (the first element when the
    loss returns `(loss, aux...)`), computed before that step's update, and `steps`, their number.
    A compiled loop hands over the losses as device arrays; they are read (one transfer each) the
    first time `losses` is asked for, so a loop whose history is not read never waits for them."""

    __slots__ = ("_values", "_losses")

    def __init__(self, values: list = ()):
        self._values, self._losses = list(values), None

    @property
    def losses(self) -> list[float]:
        if self._losses is None:  # a value is one step's loss, or a fused piece's losses
            self._losses = [float(x) for v in jax.device_get(self._values) for x in np.ravel(v)]
            self._values = []
        return self._losses

    @property
    def steps(self) -> int:
        return sum(int(np.size(v)) for v in self._values) if self._losses is None else len(self._losses)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TrainHistory) and self.losses == other.losses

    def __repr__(self) -> str:
        last = f", last loss {self.losses[-1]:.6g}" if self.losses else ""
        return f"TrainHistory({self.steps} steps{last})"


def _runs_no_user_code(data) -> bool:
    """Whether iterating `data` runs none of the user's code (a list or tuple of batches, a `DataLoader`
    without a `collate` function), so nothing can look at the model between two steps."""
    inner = data.data if isinstance(data, ShardedBatches) else data
    return type(inner) in (list, tuple) or (isinstance(inner, DataLoader) and not callable(inner.collate))


def _steps(data, *fixed) -> HeldSteps | contextlib.nullcontext:
    """The compiled step as `step(d, ok)`. When nothing can look at the model between two steps
    (`_runs_no_user_code`), the steps are chained: the model gets its new arrays when the loop ends."""
    if _runs_no_user_code(data):
        return HeldSteps(_compiled, *fixed)
    return contextlib.nullcontext(functools.partial(_compiled, *fixed))


def _flag(*trees) -> jax.Array:
    """`True` placed as the compiled step's `ok` output will be: committed to the devices of the first
    committed array among the batch and the model, so that the first step and the rest share one
    compiled program (jax compiles committed and uncommitted arguments separately)."""
    for x in jax.tree_util.tree_leaves(trees):
        if isinstance(x, jax.Array) and x.committed:
            s = x.sharding
            if isinstance(s, NamedSharding):
                return jax.device_put(True, NamedSharding(s.mesh, PartitionSpec()))
            if isinstance(s, SingleDeviceSharding):
                return jax.device_put(True, s)
            break
    return jnp.asarray(True)


CHECK_EVERY = 32  # compiled steps between two reads of `ok` (each read waits for the device)


def _check_window(losses: list, start: int, ok, checked: list | Checked | None = None) -> None:
    """When `ok` is off, raise for the first step of the window that failed: its loss (`NonFiniteLoss`),
    or a check of its rules (`checked`: one `Checked` or None per step, or one stacked for a scan)."""
    if losses and not bool(ok):
        for k, lval in enumerate(losses):
            _check(lval, start + k)
            c = checked if isinstance(checked, Checked) else None if checked is None else checked[k]
            if c is not None and (message := c.error(k if c is checked else None)) is not None:
                raise _refusal(message, start + k)


def _refusal(message: str, i: int) -> NonFiniteNorm:
    """The error of a rule that refused step `i`'s gradient (ClipNorm's non-finite norm)."""
    return NonFiniteNorm(f"train_: {message}, at data index {i} (0-based); this step was not applied, the model "
                      "is as it was before it.")


def _check(lval, i: int) -> float:
    """`lval` as a float, or `NonFiniteLoss` naming data index `i`."""
    v = float(lval)
    if not math.isfinite(v):
        raise NonFiniteLoss(
            f"train_: the loss is {v} at data index {i} (0-based); this step was not applied, "
            "the model is as it was before it." + (
                " In compiled code an index out of range (an Embedding token >= its vocabulary size, "
                "Julia's 1-based ids) gives NaN: check that batch's indices, or run the loss on it op by "
                "op (with Flux.eager():), which raises at the bad index." if math.isnan(v) else "")
        )
    return v
