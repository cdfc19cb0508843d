"""A layer in automatic mode traced by a plain `jax.grad`/`jax.jit` warns (once per layer class) that it
runs in test mode, naming the fix; fluxjax's own transformations (gradient, withgradient, jit,
functional's apply, train_) and explicit modes do not warn."""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import fluxjax as Flux
from fluxjax import mode_warning
from fluxjax.mode_warning import AutoModeWarning

X = jax.random.normal(jax.random.PRNGKey(0), (3, 8))


@pytest.fixture(autouse=True)
def fresh(monkeypatch):
    monkeypatch.setattr(mode_warning, "_warned", set())


def bn_model():
    Flux.seed_(0)
    return Flux.Chain(Flux.Dense(3, 4), Flux.BatchNorm(4), Flux.Dense(4, 1))


def loss(m, x):
    return jnp.sum(m(x) ** 2)


def _auto_warnings(fn):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        out = fn()
    return out, [x for x in w if issubclass(x.category, AutoModeWarning)]


def test_plain_jax_grad_of_batchnorm_in_auto_mode_warns_with_the_fix():
    m = bn_model()
    mu = m[1].mu
    g, got = _auto_warnings(lambda: jax.grad(loss)(m, X))
    assert len(got) == 1
    msg = str(got[0].message)
    assert msg.startswith("BatchNorm is in automatic mode (active=None)")
    assert "running statistics, which never move" in msg
    for fix in ("fluxjax.withgradient", "fluxjax.jit", "fluxjax.functional(model)", "testmode_"):
        assert fix in msg
    # what it warns about: test mode, the statistics did not move
    assert m[1].mu is mu
    (expected,) = Flux.gradient(loss, Flux.testmode_(bn_model()), X)[:1]
    np.testing.assert_allclose(g.layers[0].weight, expected.layers[0].weight, rtol=1e-5, atol=1e-7)


def test_the_warning_comes_once_per_layer_class():
    m = bn_model()
    _, first = _auto_warnings(lambda: jax.grad(loss)(m, X))
    _, again = _auto_warnings(lambda: (jax.grad(loss)(m, X), jax.jit(loss)(bn_model(), X)))
    assert len(first) == 1 and again == []
    Flux.seed_(1)
    drop = Flux.Chain(Flux.Dense(3, 4), Flux.Dropout(0.5))
    _, got = _auto_warnings(lambda: jax.jit(lambda m, x: m(x))(drop, X))
    assert len(got) == 1 and str(got[0].message).startswith("Dropout is in automatic mode") and "drops nothing" in str(
        got[0].message)


def test_plain_jax_jit_warns_too():
    _, got = _auto_warnings(lambda: jax.jit(lambda m, x: m(x))(bn_model(), X))  # (warned when traced)
    assert len(got) == 1 and "BatchNorm" in str(got[0].message)


def _no_warning(fn):
    with warnings.catch_warnings():
        warnings.simplefilter("error", AutoModeWarning)
        return fn()


def test_fluxjax_gradient_withgradient_and_jit_do_not_warn_and_train():
    m = bn_model()
    mu = m[1].mu
    _no_warning(lambda: Flux.gradient(loss, m, X))
    assert not np.allclose(m[1].mu, mu)  # train mode: the statistics moved
    _no_warning(lambda: Flux.withgradient(loss, m, X))
    _no_warning(lambda: Flux.jit(loss)(m, X))
    _no_warning(lambda: Flux.jit(lambda m, x: Flux.gradient(loss, m, x))(m, X))
    _no_warning(lambda: m(X))  # eager: no trace


def test_functional_apply_under_plain_jax_does_not_warn():
    m = bn_model()
    params, state, apply = Flux.functional(m)
    f = lambda p, s, x: jnp.sum(apply(p, s, x, train=True)[0] ** 2)
    g = _no_warning(lambda: jax.jit(jax.grad(f))(params, state, X))
    assert g["layers[0].weight"].shape == (4, 3)
    _no_warning(lambda: jax.jit(apply)(params, state, X))  # auto: test mode, as documented


def test_train_and_explicit_modes_do_not_warn():
    m = bn_model()
    _no_warning(lambda: Flux.train_(loss, m, [(X,)] * 2, Flux.setup(Flux.Descent(0.1), m)))
    _no_warning(lambda: jax.grad(loss)(Flux.testmode_(bn_model()), X))
    _no_warning(lambda: jax.jit(lambda m, x: m(x))(Flux.testmode_(Flux.Chain(Flux.Dense(3, 4), Flux.Dropout(0.5))), X))
    # an InstanceNorm without running statistics computes the same in both modes: nothing to warn about
    inorm = Flux.InstanceNorm(3)
    _no_warning(lambda: jax.jit(lambda m, x: m(x))(inorm, jnp.ones((5, 3, 2))))
