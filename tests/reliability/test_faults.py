"""Fault injection (issue #9): an exception raised inside `gradient`, `withgradient`, `pullback`,
`fluxjax.jit` or `train_` -- an ordinary error, a KeyboardInterrupt, or another `BaseException` --
leaves the model and the optimiser state exactly as they were before the failing call (bit-equal),
with no tracer in any layer, no transformed region left open, and every entry point still working
afterwards (same numbers as an undisturbed twin).

The models carry state (BatchNorm statistics, Dropout keys), so that a fault after the state was
written inside the failing call is what is being tested.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from jax.experimental import io_callback

import fluxjax
from fluxjax import losses as L
from fluxjax.core.region import current_region

pytestmark = pytest.mark.reliability

F = fluxjax


class Interrupt(BaseException):
    """KeyboardInterrupt-like: not an `Exception`, so `except Exception` cleanup would miss it."""


EXCEPTIONS = [ValueError, Interrupt, KeyboardInterrupt]
WHERE = ["before_forward", "after_state_write", "after_forward"]


def _model(seed=0):
    fluxjax.seed_(seed)
    return F.Chain(F.Dense(3, 4, jnp.tanh), F.BatchNorm(4), F.Dropout(0.3, rng=seed), F.Dense(4, 2))


X = jnp.asarray(np.random.default_rng(0).standard_normal((3, 5)), jnp.float32)
Y = jnp.asarray(np.random.default_rng(1).standard_normal((2, 5)), jnp.float32)


def _snap(tree):
    return [np.array(a) for a in jax.tree_util.tree_leaves(tree)]


def _assert_same(tree, snap, what=""):
    leaves = jax.tree_util.tree_leaves(tree)
    assert not any(isinstance(a, jax.core.Tracer) for a in leaves), f"tracer left behind {what}"
    assert len(leaves) == len(snap)
    for a, b in zip(leaves, snap):
        assert np.array(a).dtype == b.dtype
        np.testing.assert_array_equal(np.array(a), b, err_msg=what)


def _grad_leaves(g):
    return list(g) if isinstance(g, F.Grads) else jax.tree_util.tree_leaves(g)


def _assert_clean(m, active=None):
    """No region left open, and every layer's mode as it should be: automatic (None), or True after
    `train_`, which calls `trainmode_` first as Flux's `train!`."""
    assert current_region() is None, "a transformed region was left open"
    assert all(lay.active is active for lay in F.modules(m) if "active" in getattr(lay, "__dict__", {}))


class Faulty:
    """A loss `f(m, x, y)` that, once `arm()`ed, raises `exc` on its `on`-th call (1-based) at `where`.
    Unarmed it is an ordinary loss, so a twin can share it (and so its compiled programs)."""

    def __init__(self, exc, on, where, armed=True):
        self.exc, self.on, self.where, self.calls, self.armed = exc, on, where, 0, armed

    def arm(self):
        self.armed, self.calls = True, 0
        return self

    def __call__(self, m, x, y):
        # Once it has raised it disarms and stops counting: its fields are what a compiled trace reads
        # of it (fluxjax.jit keys on them), so a settled loss shares one program.
        if not self.armed:
            return L.mse(m[3](m[2](m[1](m[0](x)))), y)
        self.calls += 1
        boom = self.calls == self.on
        if boom:
            self.armed = False
        if boom and self.where == "before_forward":
            raise self.exc("injected fault")
        h = m[1](m[0](x))  # BatchNorm has written its statistics (in train mode) here
        if boom and self.where == "after_state_write":
            raise self.exc("injected fault")
        loss = L.mse(m[3](m[2](h)), y)
        if boom:
            raise self.exc("injected fault")
        return loss


# ---------------------------------------------------------------------------------------------
# gradient / withgradient / implicit gradient / pullback


def _explicit(f, m):
    return F.gradient(lambda m: f(m, X, Y), m)


def _withgradient(f, m):
    return F.withgradient(lambda m: f(m, X, Y), m)


def _implicit(f, m):
    ps = F.params(m)
    return F.gradient(lambda: f(m, X, Y), ps)


def _pullback(f, m):
    y, back = F.pullback(lambda m: f(m, X, Y), m)
    return back(jnp.float32(1.0))


ENTRY = {"gradient": _explicit, "withgradient": _withgradient, "implicit": _implicit, "pullback": _pullback}


def _fault_cases():
    """Every entry point x exception x place. Each case compiles its programs a few times (the loss's
    call counter is part of what the trace reads), so the default run keeps a cover: every entry point
    and exception after the state write (the hardest place), every place for a ValueError; the rest
    are `slow`."""
    for entry in ENTRY:
        for exc in EXCEPTIONS:
            for where in WHERE:
                fast = where == "after_state_write" or exc is ValueError
                yield pytest.param(entry, exc, where, id=f"{entry}-{exc.__name__}-{where}",
                                   marks=() if fast else pytest.mark.slow)


@pytest.mark.parametrize("entry, exc, where", list(_fault_cases()))
def test_fault_inside_differentiation_leaves_model_untouched(entry, exc, where):
    run = ENTRY[entry]
    m, twin = _model(), _model()
    f = Faulty(exc, 0, where)  # armed, but not yet to raise
    good = Faulty(ValueError, 0, where)  # never raises: the twin's loss
    for _ in range(2):  # two good calls move BatchNorm's statistics and Dropout's key
        run(f, m)
        run(good, twin)
    snap = _snap(m)
    _assert_same(twin, snap, "twin and model agree before the fault")
    # the caller sets the loss to raise on its next call: a change of what the compiled call reads, so
    # it traces again and the loss's Python runs (its own counting while traced is a trace-time side
    # effect, which a compiled call does not repeat)
    f.on = f.calls + 1
    with pytest.raises(exc, match="injected fault"):
        run(f, m)
    _assert_same(m, snap, f"{entry}: after a {exc.__name__} {where}")
    _assert_clean(m)
    # and everything still works: the next call gives the twin's gradient and state
    g, g_twin = run(f, m), run(good, twin)
    for a, b in zip(_grad_leaves(g), _grad_leaves(g_twin)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    _assert_same(m, _snap(twin), "after recovering")


@pytest.mark.parametrize("entry", ["gradient", "withgradient"])
def test_fault_in_backward_pass_leaves_model_untouched(entry):
    m = _model()
    snap = _snap(m)

    def bad(dy):
        raise RuntimeError("injected backward fault")

    f = lambda m: L.mse(F.hook(bad, m(X)), Y)
    with pytest.raises(RuntimeError, match="injected backward fault"):
        (F.gradient if entry == "gradient" else F.withgradient)(f, m)
    _assert_clean(m)
    _assert_same(m, snap, "after a fault in the backward pass")


def test_fault_in_pullback_back_leaves_the_forward_state():
    """`pullback` runs (and commits) the forward pass, as Zygote; a fault in `back` changes nothing more."""
    m, twin = _model(), _model()

    def bad(dy):
        raise Interrupt("injected backward fault")

    _, back = F.pullback(lambda m: L.mse(F.hook(bad, m(X)), Y), m)
    F.pullback(lambda m: L.mse(m(X), Y), twin)
    snap = _snap(twin)
    _assert_same(m, snap)
    with pytest.raises(Interrupt):
        back(jnp.float32(1.0))
    _assert_same(m, snap, "after a fault in back()")
    _assert_clean(m)


# ---------------------------------------------------------------------------------------------
# fluxjax.jit: faults while tracing, and at run time inside the compiled program


def _jit_step(f):
    @F.jit
    def step(m, opt, x, y):
        loss, (g,) = F.withgradient(lambda m: f(m, x, y), m)
        F.update_(opt, m, g)
        return loss

    return step


# Each fault under jit costs a compilation, so the compiled paths take every exception type at one
# place (after BatchNorm wrote its statistics) and every place with one exception type.
JIT_FAULTS = [(e, "after_state_write") for e in EXCEPTIONS] + [(Interrupt, w) for w in WHERE if w != "after_state_write"]


@pytest.mark.parametrize("exc,where", JIT_FAULTS, ids=[f"{e.__name__}-{w}" for e, w in JIT_FAULTS])
def test_fault_while_tracing_jit_leaves_model_and_optimiser_untouched(exc, where):
    m, twin = _model(), _model()
    opt, opt_twin = F.setup(F.Adam(0.01), m), F.setup(F.Adam(0.01), twin)
    f = Faulty(exc, 1, where)  # the first trace raises
    step = step_twin = _jit_step(f)  # the twin shares the step (and its compiled program) once it works
    snap = _snap([m, opt])
    with pytest.raises(exc, match="injected fault"):
        step(m, opt, X, Y)
    _assert_same([m, opt], snap, f"jit: after a {exc.__name__} {where} while tracing")
    _assert_clean(m)
    # the failed trace did not poison the cache: the retrace succeeds and matches the twin, step after step
    for _ in range(3):
        np.testing.assert_array_equal(step(m, opt, X, Y), step_twin(twin, opt_twin, X, Y))
    _assert_same([m, opt], _snap([twin, opt_twin]), "after recovering")
    assert step.cache_size() == 1


@pytest.mark.slow
def test_fault_at_run_time_inside_compiled_program(caplog):
    """A host callback in the compiled step raises on its 3rd execution: that step's outputs never
    come back, so nothing is written; the following steps continue from the state before it."""
    calls = {"n": 0}

    def cb(v):
        calls["n"] += 1
        if calls["n"] == 3:
            raise ValueError("injected run-time fault")
        return np.asarray(v)

    def make(fail):
        @F.jit
        def step(m, opt, x, y):
            loss, (g,) = F.withgradient(lambda m: L.mse(m(x), y), m)
            if fail:
                loss = io_callback(cb, jax.ShapeDtypeStruct(loss.shape, loss.dtype), loss, ordered=True)
            F.update_(opt, m, g)
            return loss

        return step

    m, twin = _model(), _model()
    opt, opt_twin = F.setup(F.Adam(0.01), m), F.setup(F.Adam(0.01), twin)
    step, step_twin = make(True), make(False)
    for _ in range(2):
        step(m, opt, X, Y)
        step_twin(twin, opt_twin, X, Y)
    snap = _snap([m, opt])
    with pytest.raises(Exception, match="injected run-time fault"):
        step(m, opt, X, Y)
    _assert_same([m, opt], snap, "after a run-time fault")
    _assert_clean(m)
    for _ in range(2):
        np.testing.assert_array_equal(step(m, opt, X, Y), step_twin(twin, opt_twin, X, Y))
    _assert_same([m, opt], _snap([twin, opt_twin]), "after recovering")


# ---------------------------------------------------------------------------------------------
# train_


def _data(n, bad_size_at=None):
    rng = np.random.default_rng(2)
    out = []
    for i in range(n):
        b = 3 if i == bad_size_at else 5
        out.append((rng.standard_normal((3, b)).astype(np.float32), rng.standard_normal((2, b)).astype(np.float32)))
    return out


TRAIN_FAULTS = [(True, e, "after_state_write") for e in EXCEPTIONS] + [(False, e, w) for e in EXCEPTIONS for w in WHERE]
TRAIN_IDS = [f"{'jit' if j else 'eager'}-{e.__name__}-{w}" for j, e, w in TRAIN_FAULTS]


@pytest.mark.parametrize("jit,exc,where", TRAIN_FAULTS, ids=TRAIN_IDS)
def test_fault_in_train_leaves_the_state_after_the_last_good_step(jit, exc, where):
    """The loss raises on the 3rd batch (under jit: while tracing it, a new batch size forces a retrace).
    The model and the optimiser state are bit-equal to a twin that trained on the first two batches."""
    data = _data(4, bad_size_at=2 if jit else None)
    m, twin = _model(), _model()
    opt, opt_twin = F.setup(F.Adam(0.01), m), F.setup(F.Adam(0.01), twin)
    # Armed, the loss counts its calls in a field it reads: under jit its first trace (batch 1) sets it,
    # so train_ runs the later steps op by op, each a call, as without jit: batch 3 is call 3. The twin's
    # loss counts too (and never raises), so that its two good steps run the same way, bit for bit.
    F.train_(Faulty(exc, 99, where), twin, data[:2], opt_twin, jit=jit)
    f = Faulty(exc, 3, where)
    with pytest.raises(exc, match="injected fault"):
        F.train_(f, m, data, opt, jit=jit)
    _assert_same([m, opt], _snap([twin, opt_twin]), f"train_(jit={jit}) after a {exc.__name__} {where}")
    _assert_clean(m, active=True)
    # training resumes where it stopped
    f.armed = False
    F.train_(f, m, data[3:], opt, jit=jit)
    F.train_(f, twin, data[3:], opt_twin, jit=jit)
    _assert_same([m, opt], _snap([twin, opt_twin]), "after resuming")


def _failing_rule(on):
    """An optax rule whose update raises when it reaches its `on`-th array (a plain optax
    transformation sees the whole tree in one call, so it raises part-way through that call)."""
    n = {"arrays": 0}

    def update(g, state, params=None):
        def step(a):
            n["arrays"] += 1
            if n["arrays"] == on:
                raise Interrupt("injected optimiser fault")
            return -0.1 * a

        return jax.tree_util.tree_map(step, g), state

    return optax.GradientTransformation(lambda p: optax.EmptyState(), update)


def test_fault_in_optimiser_under_jit_is_atomic():
    m = _model()
    opt = F.setup(_failing_rule(2), m)
    snap = _snap([m, opt])
    with pytest.raises(Interrupt):
        F.train_(lambda m, x, y: L.mse(m(x), y), m, _data(1), opt)
    _assert_same([m, opt], snap, "train_ (jit) after the rule raised on the 2nd array")
    _assert_clean(m, active=True)


def test_fault_in_optimiser_eager_update_is_atomic():
    m = _model()
    opt = F.setup(_failing_rule(2), m)
    snap = _snap([m, opt])
    # `setup` linked the two, so the eager gradient computes the step with it (optimise/eagerstep.py):
    # the rule's fault surfaces in that call, and nothing of it was written
    with pytest.raises(Interrupt):
        F.gradient(lambda m: L.mse(m(X), Y), m)
    _assert_same([m, opt], snap, "gradient fused with a step whose rule raised on the 2nd array")
    _assert_clean(m)
    m = _model()
    opt = F.setup(_failing_rule(2), m)  # (a fresh rule: the first one counted its arrays on)
    (g,) = F.gradient(lambda m: L.mse(m(X), Y), m, jit=False)  # unfused: the rule runs in update_
    snap = _snap([m, opt])
    with pytest.raises(Interrupt):
        F.update_(opt, m, g)
    _assert_same([m, opt], snap, "update_ after the rule raised on the 2nd array")
