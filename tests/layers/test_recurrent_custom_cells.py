"""Recurrent layers over custom cells (fluxjax/layers/recurrent_scan.py): a `Recurrence` (or `RNN`)
computes what its cell unrolled op by op in a Python loop computes, as Flux's `Recurrence`, whose
`scan` is such a loop. Also `guard_writes` for a field that changes shape during a `trainstep_`
(Flux 0.14's `Recur` state), and NNlib's `within_gradient(x)`.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import fluxjax as Flux

SCALE = 1.0  # read by `GlobalCell` at every step


def unrolled(cell, x, state):
    """Flux's `scan`: the cell step by step in a Python loop, outputs stacked on axis 1."""
    ys = []
    for t in range(x.shape[1]):
        y, state = cell(x[:, t], state)
        ys.append(y)
    return jnp.stack(ys, axis=1), state


def close(a, b, tol=1e-6):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=tol, atol=tol)


@Flux.layer
class GlobalCell:
    """Reads a module global and a config dict at every step."""

    def __init__(self):
        self.d = Flux.Dense(5, 3, Flux.tanh)
        self.cfg = {"alpha": 1.0}

    def initialstates(self):
        return jnp.zeros(3)

    def __call__(self, x, h):
        h = self.d(jnp.concatenate([x, h])) * SCALE * self.cfg["alpha"]
        return h, h


@Flux.layer
class _DenseCell:
    """A cell of one Dense over `[x; h]`, 2 inputs and 3 outputs; its subclasses say what a step does."""

    def __init__(self):
        self.d = Flux.Dense(5, 3, Flux.tanh)

    def initialstates(self):
        return jnp.zeros(3)


class NoisyCell(_DenseCell):
    """Draws from the global key at every step."""

    def __call__(self, x, h):
        h = self.d(jnp.concatenate([x, h])) + 0.1 * Flux.randn32(3)
        return h, h


class GradAwareCell(_DenseCell):
    def __call__(self, x, h):
        h = self.d(jnp.concatenate([x, h]))
        if Flux.within_gradient(h):
            h = 2 * h
        return h, h


class ClippedRNNCell(Flux.RNNCell):
    def __call__(self, x, h=None):
        _, h = super().__call__(x, h)
        h = jnp.clip(h, -0.1, 0.1)
        return h, h


X = jnp.arange(8.0).reshape(2, 4) / 8 - 0.3
H0 = jnp.zeros(3)


@pytest.fixture
def scale():
    global SCALE
    yield
    SCALE = 1.0


def test_globals_and_config_are_read_at_every_call(scale):
    global SCALE
    Flux.seed_(0)
    m = Flux.Recurrence(GlobalCell())
    f = Flux.jit(lambda m, x: m(x))
    for change in (None, "global", "dict"):
        if change == "global":
            SCALE = 0.5
        elif change == "dict":
            m.cell.cfg["alpha"] = 3.0  # mutated in place
        want = unrolled(m.cell, X, H0)[0]
        close(m(X), want)
        close(f(m, X), want)
        with Flux.eager():
            close(m(X), want)
            close(unrolled(m.cell, X, H0)[0], want)


def test_random_draws_match_the_unrolled_loop():
    m = Flux.Recurrence(NoisyCell())
    f = Flux.jit(lambda m, x: m(x))
    Flux.seed_(1)
    want = unrolled(m.cell, X, H0)[0]
    after = Flux.randn32(2)  # the global key moved on as far as the loop moved it
    for run in (lambda: m(X), lambda: f(m, X)):
        Flux.seed_(1)
        close(run(), want)
        close(Flux.randn32(2), after)
    with Flux.eager():
        Flux.seed_(1)
        close(m(X), want)
        close(Flux.randn32(2), after)
    a, b = m(X), m(X)  # every call draws anew
    assert not np.allclose(a, b)
    pure = Flux.Recurrence(NoisyCell())
    pure.cell.d.weight = jnp.zeros_like(pure.cell.d.weight)
    pure.cell.d.bias = jnp.zeros_like(pure.cell.d.bias)
    y = pure(X)  # the noise alone: different at every step
    assert len({tuple(np.asarray(y[:, t])) for t in range(y.shape[1])}) == y.shape[1]


def test_random_draws_under_gradient():
    m = Flux.Recurrence(NoisyCell())
    Flux.seed_(2)
    l1, g1 = Flux.withgradient(lambda m: m(X).sum(), m)
    k1 = Flux.randn32(2)
    Flux.seed_(2)
    l2, g2 = Flux.withgradient(lambda m: unrolled(m.cell, X, H0)[0].sum(), m)
    close(l1, l2)
    close(g1[0].cell.d.weight, g2[0].cell.d.weight, 1e-5)
    close(k1, Flux.randn32(2))


def test_within_gradient_branch_and_gradients():
    m = Flux.Recurrence(GradAwareCell())
    m(X)  # a call outside the gradient first
    loss = lambda m: (m(X) ** 2).sum()
    manual = lambda m: (unrolled(m.cell, X, H0)[0] ** 2).sum()
    l1, g1 = Flux.withgradient(loss, m)
    l2, g2 = Flux.withgradient(manual, m)
    close(l1, l2)
    close(g1[0].cell.d.weight, g2[0].cell.d.weight, 1e-5)
    close(g1[0].cell.d.bias, g2[0].cell.d.bias, 1e-5)
    with Flux.eager():
        l3, g3 = Flux.withgradient(loss, m)
    close(l3, l2)
    close(g3[0].cell.d.weight, g2[0].cell.d.weight, 1e-5)
    close(m(X), unrolled(m.cell, X, H0)[0])  # outside the gradient: the other branch


def test_subclass_of_builtin_cell_uses_its_call():
    Flux.seed_(0)
    c = ClippedRNNCell(2, 3)
    x = jnp.arange(24.0).reshape(2, 4, 3) - 10
    want, last = unrolled(c, x, jnp.zeros(3))
    assert float(jnp.abs(want).max()) <= 0.1 + 1e-7
    for layer in (Flux.Recurrence(c, return_state=True), Flux.RNN(c, return_state=True)):
        y, h = layer(x)
        close(y, want)
        close(h, last)
        with Flux.eager():
            close(layer(x)[0], want)
        close(Flux.jit(lambda m, x: m(x)[0])(layer, x), want)
        g1 = Flux.gradient(lambda m: (m(x)[0] ** 2).sum(), layer)[0]
        g2 = Flux.gradient(lambda m: (unrolled(m.cell, x, jnp.zeros(3))[0] ** 2).sum(), layer)[0]
        close(g1.cell.Wi, g2.cell.Wi, 1e-5)


def test_builtin_cell_with_a_user_activation(scale):
    global SCALE
    act = lambda v: jnp.tanh(v) * SCALE
    Flux.seed_(0)
    m = Flux.RNN(2, 3, act)
    close(m(X), unrolled(m.cell, X, H0)[0])
    SCALE = 0.5
    close(m(X), unrolled(m.cell, X, H0)[0])


def test_cell_that_sets_a_field_or_needs_values():
    @Flux.layer
    class Counting:
        def __init__(self):
            self.d = Flux.Dense(5, 3)
            self.calls = 0

        def initialstates(self):
            return jnp.zeros(3)

        def __call__(self, x, h):
            self.calls += 1
            h = self.d(jnp.concatenate([x, h]))
            if float(h.sum()) > 0:  # Python control flow on values
                h = -h
            return h, h

    c = Counting()
    m = Flux.Recurrence(c)
    y = m(X)
    assert c.calls == 4
    close(y, unrolled(c, X, H0)[0])
    m(X)
    assert c.calls == 12


def test_function_cell_reads_its_closure_afresh():
    d = Flux.Dense(5, 3)
    cell = lambda x, h: (lambda h: (h, h))(d(jnp.concatenate([x, h])))
    m = Flux.Recurrence(cell)
    close(m(X, H0), unrolled(cell, X, H0)[0])
    d.weight = 2 * d.weight
    close(m(X, H0), unrolled(cell, X, H0)[0])


def test_a_cell_that_draws_under_a_plain_jax_jit_raises_and_under_fluxjax_jit_draws_anew():
    """Under a plain `jax.jit` the scan's key, split off the global one while tracing, was a constant of
    the program: the steps differed, but every call drew the same noise. That raises now; `fluxjax.jit`
    threads the global key, so steps and calls differ, as Flux's draws."""
    pure = Flux.Recurrence(NoisyCell())
    pure.cell.d.weight = jnp.zeros_like(pure.cell.d.weight)
    with pytest.raises(RuntimeError, match="NoisyCell's random draw drew from the global key under a JAX"):
        jax.jit(lambda x: pure(x))(X)
    f = Flux.jit(lambda x: pure(x))
    y, y2 = f(X), f(X)
    assert not np.allclose(y[:, 0], y[:, 1]) and not np.allclose(y, y2)


# --- a field that changes shape in a compiled training step (core/region.py guard_writes) ---


@Flux.layer(trainable=("cell",))
class Recur:
    """Flux 0.14's `Recur`: the state starts `(out,)` and becomes `(out, batch)`."""

    def __init__(self, cell):
        self.cell = cell
        self.state = Flux.initialstates(cell)

    def __call__(self, x):
        y, self.state = self.cell(x, self.state)
        return y


def _recur_model():
    Flux.seed_(1)
    return Flux.Chain(Recur(Flux.RNNCell(3, 4)), Flux.Dense(4, 2))


def test_trainstep_with_a_state_that_changes_shape():
    x, y = jnp.arange(15.0).reshape(3, 5) / 10, jnp.zeros((2, 5))
    loss = lambda m, x, y: Flux.losses.mse(m(x), y)
    m1 = _recur_model()
    s1 = Flux.setup(Flux.Descent(0.1), m1)
    want = []
    for _ in range(3):
        l, g = Flux.withgradient(loss, m1, x, y)
        Flux.update_(s1, m1, g[0])
        want.append(float(l))
    m2 = _recur_model()
    s2 = Flux.setup(Flux.Descent(0.1), m2)
    close([float(Flux.trainstep_(loss, m2, (x, y), s2)) for _ in range(3)], want)
    m3 = _recur_model()
    s3 = Flux.setup(Flux.Descent(0.1), m3)
    Flux.train_(loss, m3, [(x, y)] * 3, s3)
    for m in (m2, m3):
        close(m[0].cell.Wi, m1[0].cell.Wi)
        close(m[0].state, m1[0].state)
    # a skipped (non-finite) step leaves the weights, and the new-shaped state keeps its new value
    m4 = _recur_model()
    s4 = Flux.setup(Flux.Descent(0.1), m4)
    W = m4[0].cell.Wi
    assert not np.isfinite(float(Flux.trainstep_(loss, m4, (x, y * jnp.nan), s4)))
    assert bool((m4[0].cell.Wi == W).all())
    assert m4[0].state.shape == (4, 5)


def test_within_gradient_takes_an_argument():
    assert Flux.within_gradient() is False
    assert Flux.within_gradient(jnp.ones(2)) is False
    g = Flux.gradient(lambda x: x * Flux.within_gradient(x), 3.0)[0]
    assert float(g) == 1.0


@pytest.mark.parametrize("with_state_field", [True, False])
def test_a_cell_that_must_be_unrolled_over_an_empty_sequence_is_a_clear_error(with_state_field):
    @Flux.layer
    class Valued:
        """Unrolled: a Dropout inside (a state field), or Python control flow on values."""

        def __init__(self):
            self.d = Flux.Dense(5, 3)
            self.drop = Flux.Dropout(0.5) if with_state_field else None

        def initialstates(self):
            return jnp.zeros(3)

        def __call__(self, x, h):
            h = self.d(jnp.concatenate([x, h]))
            if self.drop is None and float(h.sum()) > 0:
                h = -h
            return h, h

    m = Flux.Recurrence(Valued())
    assert m(X).shape == (3, 4)
    with pytest.raises(Flux.DimensionMismatch, match=r"Valued: cannot unroll over an empty sequence .*\(2, 0\)"):
        m(X[:, :0])
