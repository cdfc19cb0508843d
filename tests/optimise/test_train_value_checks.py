"""`ClipNorm(throw=True)` inside `train_` and `trainstep_`: a batch whose loss is finite but whose
gradient norm is not stops at that step with ClipNorm's error (Optimisers.jl's `DomainError`) naming
the data index, and the model, its BatchNorm statistics and the optimiser state are those after the
good steps before it, in every mode of `train_` (fused `lax.scan` chunks, one call per step, a
generator's unheld steps, eager)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import fluxjax as Flux
from fluxjax.optimise import train as train_module
from tests.optimise.models import arrays

EVERY = 4  # CHECK_EVERY in these tests: two fused chunks, then two steps one by one
N = 2 * EVERY + 2
RNG = np.random.default_rng(3)
XS = [jnp.asarray(RNG.normal(size=(2, 4)), jnp.float32) for _ in range(N)]
YS = [jnp.asarray(RNG.normal(size=(1, 4)), jnp.float32) for _ in range(N)]


def loss(m, x, y, e):
    """mse, plus a term whose value is finite but whose gradient on `weight[0, 0]` is infinite when the
    batch's `e` is 0 (it is `sqrt(|e|)`, of gradient `1 / (2 sqrt(|e|))`)."""
    w = m.layers[0].weight[0, 0]
    return jnp.mean((m(x) - y) ** 2) + jnp.sqrt(jnp.abs(w - jax.lax.stop_gradient(w) + e))


def _data(bad):
    return [(x, y, jnp.float32(0.0 if i == bad else 1.0)) for i, (x, y) in enumerate(zip(XS, YS))]


def _fresh(throw=True):
    m = Flux.Chain(Flux.Dense(jnp.asarray(np.arange(6.0).reshape(3, 2) / 7, jnp.float32), False), Flux.BatchNorm(3),
                   Flux.Dense(jnp.ones((1, 3), jnp.float32) / 3))
    return m, Flux.setup(Flux.OptimiserChain(Flux.ClipNorm(1.0, throw=throw), Flux.Adam(0.05)), m)


def _eager(data, throw=True):
    """An independent eager loop: `withgradient` then `update_`, op by op."""
    m, s = _fresh(throw)
    Flux.trainmode_(m)
    with Flux.eager():
        for d in data:
            g = Flux.withgradient(loss, m, *d).grad[0]
            Flux.update_(s, m, g)
    return m, s


def _same(a, b):
    for x, y in zip(arrays(a), arrays(b), strict=True):
        np.testing.assert_allclose(x, y, rtol=2e-5, atol=1e-6)


MODES = {
    "fused": dict(),
    "per-step": dict(fuse=False),
    "generator": dict(),  # data that runs user code: one unheld call per step
    "eager": dict(jit=False),
}


@pytest.fixture
def chunks(monkeypatch):
    monkeypatch.setattr(train_module, "CHECK_EVERY", EVERY)
    calls = []
    real = train_module._compiled_chunk

    def counting(*args):
        calls.append(1)
        return real(*args)

    monkeypatch.setattr(train_module, "_compiled_chunk", counting)
    return calls


@pytest.mark.parametrize("bad", [0, 2, EVERY + 1, N - 1])
@pytest.mark.parametrize("mode", list(MODES))
def test_train_stops_at_the_step_clipnorm_refuses(mode, bad, chunks):
    data = _data(bad)
    m, s = _fresh()
    with pytest.raises(ValueError, match=rf"^train_: ClipNorm: gradient has 2(\.0)?-norm inf, for array "
                                         rf"float32\[3, 2\], at data index {bad} \(0-based\)"):
        Flux.train_(loss, m, (d for d in data) if mode == "generator" else data, s, **MODES[mode])
    _same((m, s), _eager(data[:bad]))  # the model, BatchNorm statistics and Adam's state of `bad` good steps
    if mode == "fused":
        assert len(chunks) == 2  # it did fuse (the host reads `ok` one piece late)
    if bad != N - 1:
        return
    # the same data without the bad batch: every step, as the eager loop
    m, s = _fresh()
    good = _data(None)
    h = Flux.train_(loss, m, (d for d in good) if mode == "generator" else good, s, **MODES[mode])
    assert h.steps == N
    _same((m, s), _eager(good))


@pytest.mark.parametrize("mode", ["fused", "per-step", "eager"])
def test_clipnorm_without_throw_keeps_optimisers_arithmetic(mode, chunks):
    """`throw=False`: no error; the infinite entry becomes NaN (inf * 0), the rest is clipped to 0 that
    step, as Optimisers.jl's arithmetic. With `throw=True` the same data raises."""
    data = _data(N - 1)
    m, s = _fresh(throw=False)
    Flux.train_(loss, m, data, s, **MODES[mode])
    ref = _eager(data, throw=False)
    for x, y in zip(arrays((m, s)), arrays(ref), strict=True):
        np.testing.assert_allclose(x, y, rtol=2e-5, atol=1e-6, equal_nan=True)
    assert np.isnan(np.asarray(m.layers[0].weight)).tolist() == [[True, False], [False, False], [False, False]]
    m, s = _fresh(throw=True)
    with pytest.raises(ValueError, match=f"data index {N - 1} "):
        Flux.train_(loss, m, data, s, **MODES[mode])
    assert not np.isnan(np.asarray(m.layers[0].weight)).any()


@pytest.mark.parametrize("jit", [True, False])
@pytest.mark.parametrize("with_grad", [False, True])
def test_trainstep_raises_and_leaves_everything_as_it_was(jit, with_grad):
    step = Flux.optimise.train.trainstep_withgradient_ if with_grad else Flux.optimise.train.trainstep_
    data = _data(1)
    m, s = _fresh()
    Flux.trainmode_(m)
    step(loss, m, data[0], s, jit=jit)
    before = [np.asarray(a) for a in arrays((m, s))]
    with pytest.raises(ValueError, match=r"ClipNorm: gradient has 2(\.0)?-norm inf, for array float32\[3, 2\]"):
        step(loss, m, data[1], s, jit=jit)
    _same((m, s), before)  # BatchNorm's statistics too
    _same((m, s), _eager(data[:1]))
    step(loss, m, data[2], s, jit=jit)  # the next good batch trains on
    _same((m, s), _eager([data[0], data[2]]))


# ---- the same check in a step the user compiles with fluxjax.jit (README's first pattern) ----

@Flux.jit
def _jit_step(m, s, x, y, e):
    val, g = Flux.withgradient(loss, m, x, y, e)
    Flux.update_(s, m, g[0])
    return val


@Flux.jit
def _jit_outer(m, s, x, y, e):  # the step reached through another compiled function
    return _jit_step(m, s, x, y, e) * 1.0


@Flux.jit
def _jit_pure(m, s, x, y, e):  # the pure form, written back by the caller
    g = Flux.gradient(loss, m, x, y, e)[0]
    return Flux.update(s, m, g)


@pytest.mark.parametrize("step", ["in place", "nested", "pure"])
@pytest.mark.parametrize("bad", [0, 3])
def test_a_fluxjax_jit_step_raises_where_clipnorm_refuses_and_applies_nothing(step, bad):
    """Optimisers.jl throws DomainError; the step compiled with `fluxjax.jit` did not raise, and its
    weights became NaN for good. Now it raises after the call, with every write of that call (the
    model, BatchNorm's statistics, Adam's moments and step count) put back; steps before and after it
    are the eager loop's (also through the plan a repeated call reuses)."""
    data = _data(bad)
    m, s = _fresh()
    Flux.trainmode_(m)
    for i, d in enumerate(data[:5]):
        before = [np.asarray(a) for a in arrays((m, s))]
        if i == bad:
            with pytest.raises(Flux.NonFiniteNorm, match=r"^fluxjax.jit: ClipNorm: gradient has 2(\.0)?-norm inf, "
                                                         r"for array float32\[3, 2\]; this call was not applied"):
                if step == "pure":
                    _jit_pure(m, s, *d)
                else:
                    (_jit_step if step == "in place" else _jit_outer)(m, s, *d)
            _same((m, s), before)
            continue
        if step == "pure":
            s, m = _jit_pure(m, s, *d)
        else:
            (_jit_step if step == "in place" else _jit_outer)(m, s, *d)
    assert not np.isnan(np.asarray(m.layers[0].weight)).any()
    _same((m, s), _eager([d for i, d in enumerate(data[:5]) if i != bad]))


def test_a_fluxjax_jit_step_with_donated_arguments_keeps_a_usable_model():
    step = Flux.jit(_jit_step.__wrapped__, donate_argnums=(0, 1))
    data = _data(1)
    m, s = _fresh()
    Flux.trainmode_(m)
    step(m, s, *data[0])
    with pytest.raises(Flux.NonFiniteNorm):
        step(m, s, *data[1])
    _same((m, s), _eager(data[:1]))  # the donated inputs' values came back
    step(m, s, *data[2])
    _same((m, s), _eager([data[0], data[2]]))


def test_clipnorm_without_throw_in_a_fluxjax_jit_step_keeps_optimisers_arithmetic():
    data = _data(1)
    m, s = _fresh(throw=False)
    Flux.trainmode_(m)
    for d in data[:3]:
        _jit_step(m, s, *d)
    ref = _eager(data[:3], throw=False)
    for x, y in zip(arrays((m, s)), arrays(ref), strict=True):
        np.testing.assert_allclose(x, y, rtol=2e-5, atol=1e-6, equal_nan=True)
    assert np.isnan(np.asarray(m.layers[0].weight)).any()


def test_under_a_plain_jax_jit_the_pure_update_cannot_raise():
    """Documented: a plain `jax.jit` has no host step after the call, so ClipNorm gives the all-NaN step
    (the finiteness of the result is the user's check there)."""
    m, s = _fresh()
    x, y, e = _data(0)[0]
    g = Flux.gradient(loss, m, x, y, e)[0]
    s2, m2 = jax.jit(Flux.update)(s, m, g)
    assert np.isnan(np.asarray(m2.layers[0].weight)).all()
