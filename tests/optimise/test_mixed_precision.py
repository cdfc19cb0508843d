"""`MixedPrecision`: a rule stepping a high-precision copy of low-precision parameters
(Optimisers.jl's own case is compat/cases_optimisers.py `case_mixed_precision`)."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import fluxjax as Flux
from fluxjax import optimise as O


def _adam_numpy(x32, gs, eta, b1=0.9, b2=0.999, eps=1e-8):
    m = v = np.zeros_like(x32)
    for t, g in enumerate(gs, 1):
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        x32 = x32 - eta * (m / (1 - b1**t)) / (np.sqrt(v / (1 - b2**t)) + eps)
    return x32


def test_steps_the_float32_copy_and_rounds_it_into_the_parameters():
    r = np.random.default_rng(0)
    x0 = x = jnp.asarray(r.standard_normal(5), jnp.float16)
    gs = [jnp.asarray(r.standard_normal(5), jnp.float16) for _ in range(3)]
    state = O.setup(O.MixedPrecision(O.Adam(0.01)), x)
    for g in gs:
        state, x = O.update(state, x, g)
    want = _adam_numpy(np.asarray(x0, np.float32), [np.asarray(g, np.float32) for g in gs], 0.01)
    np.testing.assert_allclose(state.state.xT, want, rtol=1e-6)
    assert x.dtype == jnp.float16 and state.state.xT.dtype == jnp.float32
    np.testing.assert_array_equal(x, state.state.xT.astype(jnp.float16))


def test_small_steps_add_up_where_float16_alone_would_not_move():
    x = jnp.ones(3, jnp.float16)
    g = jnp.ones(3, jnp.float16)
    plain = O.setup(O.Descent(1e-4), x)
    mixed = O.setup(O.MixedPrecision(O.Descent(1e-4)), x)
    xp = xm = x
    for _ in range(10):
        plain, xp = O.update(plain, xp, g)
        mixed, xm = O.update(mixed, xm, g)
    np.testing.assert_array_equal(xp, np.ones(3, np.float16))  # 1 - 1e-4 rounds back to 1 in float16
    np.testing.assert_allclose(mixed.state.xT, 1 - 10 * 1e-4, rtol=1e-6)
    np.testing.assert_array_equal(xm, np.float16(1 - 1e-3))


def test_a_bfloat16_model_trains_compiled_and_adjust_reaches_the_wrapped_rule():
    Flux.seed_(1)
    m = Flux.bf16(Flux.Chain(Flux.Dense(3, 8, Flux.relu), Flux.Dense(8, 1)))
    x = jnp.asarray(np.random.default_rng(1).standard_normal((3, 16)), jnp.bfloat16)
    y = jnp.sum(x, axis=0, keepdims=True)
    opt_state = Flux.setup(O.MixedPrecision(O.Adam(0.01)), m)
    loss = lambda m, x, y: jnp.mean((m(x).astype(jnp.float32) - y.astype(jnp.float32)) ** 2)
    losses = [float(Flux.trainstep_(loss, m, (x, y), opt_state)) for _ in range(30)]
    assert losses[-1] < 0.5 * losses[0]
    leaf = opt_state.layers[0].weight
    assert m[0].weight.dtype == jnp.bfloat16 and leaf.state.xT.dtype == jnp.float32
    np.testing.assert_array_equal(m[0].weight, leaf.state.xT.astype(jnp.bfloat16))
    Flux.adjust_(opt_state, 0.5)
    assert float(leaf.state.state.hyper["eta"]) == 0.5


def test_an_optax_rule_inside_and_the_optax_interface():
    r = np.random.default_rng(2)
    x = jnp.asarray(r.standard_normal(4), jnp.float16)
    g = jnp.asarray(r.standard_normal(4), jnp.float16)
    ours, theirs = O.MixedPrecision(O.Descent(0.1)), O.MixedPrecision(optax.sgd(0.1))
    s1, x1 = O.update(O.setup(ours, x), x, g)
    s2, x2 = O.update(O.setup(theirs, x), x, g)
    np.testing.assert_array_equal(s1.state.xT, s2.state.xT)
    np.testing.assert_array_equal(x1, x2)
    # As an optax transformation, u = x - copy rounded to float16, so x + u is the copy to within the
    # rounding of u and of the sum (update_ sets the parameters to the rounded copy itself).
    u, s = ours.update(g, ours.init(x), x)
    x32, xT = np.asarray(x, np.float32), np.asarray(s.xT)
    err = np.abs(np.asarray(optax.apply_updates(x, u), np.float32) - xT)
    assert np.all(err <= 2.0**-10 * (np.abs(x32) + np.abs(xT))), err


def test_implicit_params():
    m = Flux.f16(Flux.Dense(2, 1))
    ps = Flux.params(m)
    x = jnp.ones((2, 4), jnp.float16)
    rule = O.MixedPrecision(O.Descent(1e-4))
    for _ in range(10):
        gs = Flux.gradient(lambda: jnp.sum(m(x).astype(jnp.float32)), ps)
        Flux.update_(rule, ps, gs)
    np.testing.assert_allclose(m.bias.astype(jnp.float32), -10 * 4 * 1e-4, rtol=1e-3)


def test_errors():
    with pytest.raises(TypeError, match="T must be a float type"):
        O.MixedPrecision(jnp.int32, O.Adam())
    with pytest.raises(TypeError, match=r"MixedPrecision\(\[T,\] rule\) takes one or two arguments, got 0"):
        O.MixedPrecision()
    with pytest.raises(TypeError, match="neither a rule nor an optax GradientTransformation"):
        O.MixedPrecision(jnp.float32, 0.1)
    with pytest.raises(ValueError, match="should wrap the entire OptimiserChain"):
        O.OptimiserChain(O.ClipGrad(1.0), O.MixedPrecision(O.Adam()))
    rule = O.MixedPrecision(O.Adam())
    with pytest.raises(ValueError, match="needs the parameters"):
        rule.update(jnp.ones(2), rule.init(jnp.ones(2)))
    if not jax.config.jax_enable_x64:
        with pytest.raises(ValueError, match="64-bit copy.*jax_enable_x64"):
            O.setup(O.MixedPrecision(jnp.float64, O.Adam()), jnp.ones(2, jnp.float16))
