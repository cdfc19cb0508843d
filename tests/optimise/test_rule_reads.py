"""What a rule reads besides its numbers is part of every compiled step's key: a learning-rate schedule
that reads a global, a list or an object's field; the user's schedule inside an optax transformation; a
custom rule's `apply_` reading a global or a class constant, or a field changed in place. Changed between
steps, each is seen by every form of the step (eager `update_`, `train_`, `trainstep_`, a `fluxjax.jit`
step), as op by op: w <- w - lr * 4w here, for lr = 0.1, 0.01, 0.001."""

import jax.numpy as jnp
import numpy as np
import optax
import pytest

import fluxjax as Flux
from fluxjax.optimise import AbstractRule, ClipGrad, Descent, Momentum, OptimiserChain

X, Y = jnp.ones((2, 4)), jnp.zeros((1, 4))
LRS = (0.1, 0.01, 0.001)
LR = 0.1  # the global the schedules and rules below read
LR_LIST = [0.1]


def loss(m, x, y):
    return Flux.mse(m(x), y)


def lr_global(step):
    return LR


def lr_list(step):
    return LR_LIST[0]


class Schedule:
    """A callable schedule object whose field is set between steps."""

    def __init__(self):
        self.lr = 0.1

    def __call__(self, step):
        return self.lr


def _set_global(v):
    global LR
    LR = v


def _plain_update_reading_a_global():
    """The user's own optax transformation, whose `update` reads a global."""

    def update(g, state, params=None):
        return optax.tree_utils.tree_scale(-LR, g), state

    return optax.GradientTransformation(lambda p: optax.EmptyState(), update)


class GlobalScaled(AbstractRule):
    """A custom rule whose `apply_` reads a global."""

    def __init__(self):
        self.eta = 1.0

    def apply_(self, state, x, dx):
        return state, self.eta * LR * dx


class ClassScaled(AbstractRule):
    """A custom rule whose `apply_` reads a class constant through `self`."""

    K = 0.1

    def apply_(self, state, x, dx):
        return state, self.K * dx


class ListEta(AbstractRule):
    """A custom rule with a list field, changed in place."""

    def __init__(self):
        self.etas = [0.1]

    def apply_(self, state, x, dx):
        return state, self.etas[0] * dx


SCHEDULE = Schedule()
# name: (make the rule, set the knob to v)
CASES = {
    "Descent(schedule reading a global)": (lambda: Descent(lr_global), _set_global),
    "Descent(schedule reading a list)": (lambda: Descent(lr_list), lambda v: LR_LIST.__setitem__(0, v)),
    "Descent(callable object)": (lambda: Descent(SCHEDULE), lambda v: setattr(SCHEDULE, "lr", v)),
    "chain(ClipGrad, Descent(schedule))": (lambda: OptimiserChain(ClipGrad(1e9), Descent(lr_global)), _set_global),
    "optax.sgd(schedule)": (lambda: optax.sgd(lr_global), _set_global),
    "chain(optax.clip, optax.sgd(schedule))": (
        lambda: optax.chain(optax.clip(1e9), optax.sgd(lr_global)), _set_global),
    "user optax transformation": (_plain_update_reading_a_global, _set_global),
    "AbstractRule reading a global": (GlobalScaled, _set_global),
    "AbstractRule reading a class constant": (ClassScaled, lambda v: setattr(ClassScaled, "K", v)),
    "AbstractRule with a list field": (ListEta, None),
}


def _step(how, st, m):
    if how == "update_":
        Flux.update_(st, m, Flux.gradient(loss, m, X, Y)[0])
    elif how == "train_":
        Flux.train_(loss, m, [(X, Y)], st, progress=False)
    elif how == "trainstep_":
        Flux.trainstep_(loss, m, (X, Y), st)
    else:
        _JIT_STEP(st, m, X, Y)


_JIT_STEP = Flux.jit(lambda st, m, x, y: Flux.update_(st, m, Flux.gradient(loss, m, x, y)[0]))


def _run(name, how, eager):
    make, change = CASES[name]
    m = Flux.Dense(np.ones((1, 2), np.float32), False)
    rule = make()
    st = Flux.setup(rule, m)
    for v in LRS:
        if change is None:
            rule.etas[0] = v
        else:
            change(v)
        if eager:
            with Flux.eager():
                _step(how, st, m)
        else:
            _step(how, st, m)
    return np.asarray(m.weight)


@pytest.mark.parametrize("how", ["update_", "train_", "trainstep_", "fluxjax.jit step"])
@pytest.mark.parametrize("name", list(CASES))
def test_a_rule_sees_what_it_reads_change_between_steps(name, how):
    want = 1.0
    for lr in LRS:
        want *= 1 - 4 * lr
    try:
        eager = _run(name, how, True)
        np.testing.assert_allclose(eager, [[want, want]], rtol=1e-5)
        np.testing.assert_allclose(_run(name, how, False), eager, rtol=1e-6)
    finally:
        _set_global(0.1)
        LR_LIST[0] = 0.1
        SCHEDULE.lr = 0.1
        ClassScaled.K = 0.1


def test_an_unchanged_schedule_compiles_its_step_once():
    """Keying what a schedule reads costs no compilations while nothing changes."""
    m = Flux.Dense(np.ones((1, 2), np.float32), False)
    st = Flux.setup(Momentum(lr_global), m)
    step = Flux.jit(lambda st, m, x, y: Flux.update_(st, m, Flux.gradient(loss, m, x, y)[0]))
    for _ in range(4):
        step(st, m, X, Y)
    assert step.compilations == 1
