"""`trainstep_` and `trainstep_withgradient_`: Flux's `trainstep!`/`trainstep_withgradient!`
(Flux.jl src/train.jl, test/train.jl), compiled by default and eagerly with `jit=False`."""

import contextlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import fluxjax as Flux
from fluxjax.optimise import Adam, Descent, Momentum, setup, trainstep_, trainstep_withgradient_, update_
from fluxjax.optimise.trainstep import _compiled_step
from tests.optimise.regression import X, Y, mse
from tests.optimise.regression import mlp as _mlp


@pytest.mark.parametrize("jit", [True, False])
def test_steps_match_gradient_and_update_and_return_the_loss_before_the_step(jit):
    m, ref = _mlp(), _mlp()
    st, st_ref = setup(Adam(0.05), m), setup(Adam(0.05), ref)
    for _ in range(3):
        before = float(mse(ref, X, Y))
        loss = trainstep_(mse, m, (X, Y), st, jit=jit)
        (g,) = Flux.gradient(lambda r: mse(r, X, Y), ref)
        update_(st_ref, ref, g)
        assert float(loss) == pytest.approx(before, rel=1e-6)
        np.testing.assert_allclose(m[0].weight, ref[0].weight, rtol=1e-5, atol=1e-7)
        np.testing.assert_allclose(m[1].bias, ref[1].bias, rtol=1e-5, atol=1e-7)
    assert float(mse(m, X, Y)) < before


@pytest.mark.parametrize("jit", [True, False])
def test_withgradient_returns_the_gradient_before_the_step(jit):
    m = _mlp()
    (expected,) = Flux.gradient(lambda m: mse(m, X, Y), m)
    val, g = trainstep_withgradient_(mse, m, (X, Y), setup(Momentum(0.1), m), jit=jit)
    np.testing.assert_allclose(g.layers[0].weight, expected.layers[0].weight, rtol=1e-5, atol=1e-7)
    assert g.layers[0].sigma is None
    assert float(val) == pytest.approx(float(mse(_mlp(), X, Y)), rel=1e-6)


@pytest.mark.parametrize("jit", [True, False])
def test_aux_output_is_returned_and_only_the_loss_differentiated(jit):
    m, ref = _mlp(), _mlp()

    def loss(m, x, y):
        yhat = m(x)
        return mse(m, x, y), {"mean": jnp.mean(yhat)}

    val = trainstep_(loss, m, (X, Y), setup(Momentum(0.1), m), jit=jit)
    assert isinstance(val, tuple) and set(val[1]) == {"mean"}
    assert float(val[1]["mean"]) == pytest.approx(float(jnp.mean(ref(X))), rel=1e-5)
    update_(setup(Momentum(0.1), ref), ref, Flux.gradient(lambda r: mse(r, X, Y), ref)[0])
    np.testing.assert_allclose(m[0].weight, ref[0].weight, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("jit", [True, False])
def test_a_non_finite_loss_skips_the_step_and_leaves_everything_as_it_was(jit):
    Flux.seed_(1)
    m = Flux.Chain(Flux.Dense(2, 4), Flux.BatchNorm(4, jnp.tanh), Flux.Dense(4, 1))
    st = setup(Adam(0.05), m)
    trainstep_(mse, m, (X, Y), st, jit=jit)  # a finite step moves the weights and the statistics
    mu, w, mt = m[1].mu, m[0].weight, st.layers[0].weight.state.mt
    assert not np.allclose(mu, 0)
    bad = trainstep_(lambda m, x, y: mse(m, x, y) * jnp.nan, m, (X, Y), st, jit=jit)  # no error
    assert np.isnan(float(bad))
    np.testing.assert_array_equal(m[1].mu, mu)
    np.testing.assert_array_equal(m[0].weight, w)
    np.testing.assert_array_equal(st.layers[0].weight.state.mt, mt)


def test_a_single_batch_is_passed_whole_and_the_step_compiles_once():
    m = _mlp()
    st = setup(Adam(0.01), m)
    n0 = _compiled_step.compilations
    losses = [float(trainstep_(lambda m, d: mse(m, d[0], d[1]), m, [X, Y], st)) for _ in range(4)]
    assert _compiled_step.compilations == n0 + 1
    assert losses[-1] < losses[0]


def test_errors_name_what_to_pass():
    m = _mlp()
    with pytest.raises(TypeError, match=r"trainstep_\(loss, model, batch, opt_state\): got a rule.*setup"):
        trainstep_(mse, m, (X, Y), Adam())
    with pytest.raises(TypeError, match=r"trainstep_withgradient_ takes a model.*train_"):
        trainstep_withgradient_(lambda x, y: mse(m, x, y), Flux.params(m), (X, Y), setup(Adam(), m))


@pytest.mark.parametrize("adtype", [Flux.AutoZygote(), Flux.AutoEnzyme(), Flux.AutoMooncake()], ids=repr)
def test_a_reverse_mode_adtype_is_the_same_step_and_the_same_program(adtype):
    # Flux.jl test/ext_reactant/train_reactant.jl "AD backend resolution": an explicit backend that is the
    # default one reuses the compiled step instead of compiling a second one, and it trains
    m1, m2 = _mlp(), _mlp()
    s1, s2 = setup(Adam(0.01), m1), setup(Adam(0.01), m2)
    trainstep_(mse, m1, (X, Y), s1)
    n0 = _compiled_step.compilations
    l1 = trainstep_(mse, m1, (X, Y), s1)
    trainstep_(mse, m2, (X, Y), s2)
    l2 = trainstep_(mse, adtype, m2, (X, Y), s2)
    assert _compiled_step.compilations == n0
    np.testing.assert_array_equal(l1, l2)
    for a, b in zip(jax.tree_util.tree_leaves((m1, s1)), jax.tree_util.tree_leaves((m2, s2))):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("jit", [True, False])
def test_finite_differences_adtype_steps_like_reverse_mode(jit):
    m1, m2 = _mlp(), _mlp()
    s1, s2 = setup(Descent(0.1), m1), setup(Descent(0.1), m2)
    l1, g1 = trainstep_withgradient_(mse, m1, (X, Y), s1)
    l2, g2 = trainstep_withgradient_(mse, Flux.AutoFiniteDifferences(), m2, (X, Y), s2, jit=jit)
    np.testing.assert_allclose(l1, l2, rtol=1e-6)
    for a, b in zip(jax.tree_util.tree_leaves(g1), jax.tree_util.tree_leaves(g2)):
        np.testing.assert_allclose(a, b, rtol=1e-3, atol=2e-5)
    for a, b in zip(jax.tree_util.tree_leaves(m1), jax.tree_util.tree_leaves(m2)):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)


def test_adtype_errors_name_the_form():
    m = _mlp()
    st = setup(Adam(), m)
    with pytest.raises(TypeError, match=r"trainstep_\(loss, adtype, model, batch, opt_state\) takes 5 .* got 4"):
        trainstep_(mse, Flux.AutoZygote(), m, (X, Y))
    with pytest.raises(TypeError, match=r"takes 4 or 5 positional arguments, got 5; the second of 5 must be an adtype"):
        trainstep_(mse, m, (X, Y), st, st)


@pytest.mark.parametrize("inner_jit", [True, False])
def test_trainstep_inside_a_compiled_function(inner_jit):
    """`trainstep_(..., jit=False)` inside `Flux.jit` runs in the enclosing program (its non-finite
    check cannot read a traced loss in Python), with the numbers of the eager step."""
    x = jnp.ones((3, 4))

    def loss(m, x):
        return jnp.sum(m(x) ** 2)

    runs = []
    for compiled in (True, False):
        Flux.seed_(0)
        m = Flux.Dense(3, 2)
        o = Flux.setup(Flux.Descent(0.01), m)
        f = lambda m, o, x: Flux.trainstep_(loss, m, (x,), o, jit=inner_jit)  # noqa: E731
        with contextlib.nullcontext() if compiled else Flux.eager():
            g = Flux.jit(f) if compiled else f
            runs.append(([float(g(m, o, x)) for _ in range(2)], np.asarray(m.weight)))
    np.testing.assert_allclose(runs[0][0], runs[1][0], rtol=1e-5)
    np.testing.assert_allclose(runs[0][1], runs[1][1], rtol=1e-5)
