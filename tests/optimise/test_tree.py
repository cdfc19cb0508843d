"""setup / update_ / update / adjust_ / freeze_ / thaw_ and train_ (explicit and implicit)."""

import copy
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import fluxjax as Flux
from fluxjax.optimise import (
    Adam,
    Descent,
    Momentum,
    NonFiniteLoss,
    OptimiserChain,
    WeightDecay,
    adjust_,
    freeze_,
    setup,
    thaw_,
    train_,
    trainstep_,
    update,
    update_,
)
from tests.optimise.regression import X, Y, mse
from tests.optimise.regression import mlp as _mlp


def test_setup_mirrors_model_and_ties_share_a_leaf():
    m = _mlp()
    st = setup(Adam(0.01), m)
    assert st.layers[0].weight.rule == Adam(0.01)
    assert st.layers[0].sigma is None and st.layers[1].bias is not None
    d = Flux.Dense(3, 3)
    tied = Flux.Chain(d, d)
    st2 = setup(Descent(0.1), tied)
    assert st2.layers[0].weight is st2.layers[1].weight


def test_update_matches_descent_formula_and_skips_none():
    m = _mlp()
    W0, b0 = m[0].weight, m[1].bias
    (g,) = Flux.gradient(lambda m: mse(m, X, Y), m)
    st = setup(Descent(0.1), m)
    g.layers[1].bias = None  # a `nothing` gradient skips the array
    update_(st, m, g)
    np.testing.assert_allclose(m[0].weight, W0 - 0.1 * g.layers[0].weight, rtol=1e-6)
    assert m[1].bias is b0


def test_tied_weights_get_summed_gradient():
    # Optimisers.jl: tied arrays share one Leaf and their gradients add
    W = jnp.eye(2)
    a, b = Flux.Dense(W, False), Flux.Dense(W, False)
    m = Flux.Chain(a, b)
    x = jnp.array([[1.0], [2.0]])
    (g,) = Flux.gradient(lambda m: jnp.sum(m(x) ** 2), m)
    update_(setup(Descent(1.0), m), m, g)
    assert m[0].weight is m[1].weight
    np.testing.assert_allclose(m[0].weight, W - g.layers[0].weight - g.layers[1].weight, rtol=1e-6)


def test_pure_update_leaves_inputs_alone():
    m = _mlp()
    st = setup(Momentum(0.1), m)
    (g,) = Flux.gradient(lambda m: mse(m, X, Y), m)
    W0 = m[0].weight
    st2, m2 = update(st, m, g)
    assert m[0].weight is W0 and m2[0].weight is not W0
    assert st2.layers[0].weight is not st.layers[0].weight


def test_pure_update_under_plain_jax_jit_matches_eager_update_():
    """DESIGN: `jax.jit` of a pure function of a model works; `update` is the pure form of `update_`."""

    def step(m, st, x, y):
        loss, (g,) = Flux.withgradient(lambda m: mse(m, x, y), m)
        st, m = update(st, m, g)
        return m, st, loss

    jitted = jax.jit(step)
    m, eager = _mlp(), _mlp()
    st, st_eager = setup(Adam(0.05), m), setup(Adam(0.05), eager)
    W0 = m[0].weight
    losses = []
    for _ in range(3):
        m2, st2, loss = jitted(m, st, X, Y)
        assert m[0].weight is W0  # the inputs stay as they were
        m, st = m2, st2
        W0 = m[0].weight
        losses.append(float(loss))
        (g,) = Flux.gradient(lambda e: mse(e, X, Y), eager)
        update_(st_eager, eager, g)
        np.testing.assert_allclose(m[0].weight, eager[0].weight, rtol=1e-5, atol=1e-7)
        np.testing.assert_allclose(m[1].bias, eager[1].bias, rtol=1e-5, atol=1e-7)
    assert losses[2] < losses[0]
    assert float(st.layers[0].weight.state.beta_t[0]) == pytest.approx(0.9**4, rel=1e-6)  # βt after 3 steps


def test_update_in_place_under_plain_jax_jit_says_what_to_use():
    m = _mlp()
    st = setup(Adam(0.05), m)
    W0 = m[0].weight

    def step(m, st, x, y):
        (g,) = Flux.gradient(lambda m: mse(m, x, y), m)
        update_(st, m, g)

    with pytest.raises(RuntimeError, match=r"update_ rebinds.*update\(opt_state, model, grads\).*fluxjax\.jit"):
        jax.jit(step)(m, st, X, Y)
    assert m[0].weight is W0  # nothing was rebound
    assert not isinstance(st.layers[0].weight.state[0], jax.core.Tracer)


def test_rule_instead_of_state_is_a_clear_error():
    m = _mlp()
    (g,) = Flux.gradient(lambda m: mse(m, X, Y), m)
    with pytest.raises(TypeError, match="setup"):
        update_(Adam(), m, g)
    with pytest.raises(TypeError, match=r"grads\[0\]"):
        update_(setup(Adam(), m), m, (g,))
    with pytest.raises(TypeError, match=r"^update\(opt_state, model, grads\): got a rule"):
        update(Adam(), m, g)


def test_adjust_freeze_thaw():
    m = _mlp()
    st = setup(Adam(0.01), m)
    adjust_(st, 0.5)
    assert st.layers[0].weight.rule.eta == 0.5
    adjust_(st.layers[1], beta=(0.8, 0.99))
    assert st.layers[1].weight.rule.beta == (0.8, 0.99) and st.layers[0].weight.rule.beta == (0.9, 0.999)
    freeze_(st.layers[0])
    W0, W1 = m[0].weight, m[1].weight
    (g,) = Flux.gradient(lambda m: mse(m, X, Y), m)
    update_(st, m, g)
    assert m[0].weight is W0 and m[1].weight is not W1
    thaw_(st)
    update_(st, m, g)
    assert m[0].weight is not W0
    with pytest.raises(TypeError, match="optimiser state"):
        adjust_(m, 0.1)


def test_any_optax_transformation_is_a_rule():
    m1, m2 = _mlp(), _mlp()
    (g,) = Flux.gradient(lambda m: mse(m, X, Y), m1)
    update_(setup(optax.sgd(0.1), m1), m1, g)
    update_(setup(Descent(0.1), m2), m2, g)
    np.testing.assert_allclose(m1[0].weight, m2[0].weight, rtol=1e-6)


def test_chain_weightdecay_then_adam():
    m = _mlp()
    st = setup(OptimiserChain(WeightDecay(0.01), Adam(0.01)), m)
    l0 = mse(m, X, Y)
    train_(mse, m, [(X, Y)] * 20, st)
    assert mse(m, X, Y) < l0


def test_implicit_update_matches_explicit():
    m1, m2 = _mlp(), _mlp()
    ps = Flux.params(m1)
    gs = Flux.gradient(lambda: mse(m1, X, Y), ps)
    update_(Descent(0.1), ps, gs)
    (g,) = Flux.gradient(lambda m: mse(m, X, Y), m2)
    update_(setup(Descent(0.1), m2), m2, g)
    for a, b in zip(jax.tree_util.tree_leaves(m1), jax.tree_util.tree_leaves(m2)):
        np.testing.assert_allclose(a, b, rtol=1e-6)


@pytest.mark.parametrize("jit", [True, False])
def test_train_converges_explicit(jit):
    m = _mlp()
    st = setup(Adam(0.05), m)
    l0 = float(mse(m, X, Y))
    train_(mse, m, [(X, Y)] * 150, st, jit=jit)
    assert float(mse(m, X, Y)) < 0.3 * l0


@pytest.mark.parametrize("jit", [True, False])
def test_train_converges_implicit(jit):
    m = _mlp()
    ps = Flux.params(m)
    loss = lambda x, y: mse(m, x, y)
    l0 = float(loss(X, Y))
    train_(loss, ps, [(X, Y)] * 150, Adam(0.05), jit=jit)
    assert float(loss(X, Y)) < 0.3 * l0


def test_train_jit_and_eager_agree():
    m1, m2 = _mlp(), _mlp()
    s1, s2 = setup(Adam(0.01), m1), setup(Adam(0.01), m2)
    train_(mse, m1, [(X, Y)] * 5, s1, jit=True)
    train_(mse, m2, [(X, Y)] * 5, s2, jit=False)
    for a, b in zip(jax.tree_util.tree_leaves((m1, s1)), jax.tree_util.tree_leaves((m2, s2))):
        np.testing.assert_allclose(a, b, rtol=2e-5, atol=1e-7)


@pytest.mark.parametrize("jit", [True, False])
def test_train_stops_on_nan_without_corrupting(jit):
    # Flux.jl/test/train.jl: NaN at i == 51 stops train! with DomainError, m1.weight[1] ≈ -5
    m = Flux.Dense(jnp.zeros((1, 1)), False)
    loss = lambda m, i: jnp.where(i == 50, jnp.nan, 1.0) * jnp.sum(m(jnp.ones(1)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(NonFiniteLoss, match="data index 50"):
            train_(loss, m, [(jnp.asarray(i),) for i in range(100)], Descent(0.1), jit=jit)
    np.testing.assert_allclose(m.weight[0, 0], -5.0, rtol=1e-5)


@pytest.mark.parametrize("bad", [0, 31, 32, 70, 99])
def test_compiled_train_reads_losses_per_window_and_names_the_first_bad_one(bad):
    """Compiled, `train_` reads `ok` once every CHECK_EVERY steps; the error still names the first
    non-finite loss, the steps after it are skipped, and at most a window of extra batches is drawn."""
    from fluxjax.optimise import train as train_module

    n = train_module.CHECK_EVERY
    m = Flux.Dense(jnp.zeros((1, 1)), False)
    loss = lambda m, i: jnp.where(i >= bad, jnp.nan, 1.0) * jnp.sum(m(jnp.ones(1)))
    drawn = []

    def data():
        for i in range(100):
            drawn.append(i)
            yield (jnp.asarray(i),)

    with pytest.raises(NonFiniteLoss, match=f"data index {bad} "):
        train_(loss, m, data(), setup(Descent(0.1), m))
    np.testing.assert_allclose(m.weight[0, 0], -0.1 * bad, rtol=1e-5, atol=1e-6)
    assert bad < len(drawn) <= min(100, (bad // n + 1) * n)


def test_train_with_aux_output():
    m = _mlp()
    st = setup(Descent(0.1), m)
    train_(lambda m, x, y: (mse(m, x, y), m(x)), m, [(X, Y)] * 3, st)
    assert np.isfinite(float(mse(m, X, Y)))


@pytest.mark.parametrize("jit", [True, False])
def test_train_puts_the_model_in_train_mode_and_leaves_it_there(jit):
    # Flux.jl/src/train.jl (0.16.11, PR #2697): `train!` calls `Flux.trainmode!(model)` first, so after it
    # BatchNorm normalises with batch statistics and Dropout drops until `testmode!`
    bn, drop = Flux.BatchNorm(3), Flux.Dropout(0.5)
    m = Flux.Chain(Flux.Dense(2, 3), bn, drop, Flux.Dense(3, 1))
    train_(mse, m, [(X, Y)], setup(Descent(0.01), m), jit=jit)
    assert bn.active is True and drop.active is True
    h = m[0](X)
    mu, var = np.mean(np.asarray(h), axis=1, keepdims=True), np.var(np.asarray(h), axis=1, keepdims=True)
    want = bn.gamma[:, None] * (h - mu) / np.sqrt(var + bn.eps) + bn.beta[:, None]
    np.testing.assert_allclose(bn(h), want, rtol=1e-4, atol=1e-5)  # batch statistics, outside any gradient
    Flux.testmode_(m)
    np.testing.assert_array_equal(drop(h), h)


@pytest.mark.parametrize("jit", [True, False])
def test_implicit_train_and_trainstep_leave_the_modes_alone(jit):
    # Flux 0.13's implicit `train!` and Flux's `trainstep!` do not call `trainmode!`
    bn = Flux.BatchNorm(3)
    m = Flux.Chain(Flux.Dense(2, 3), bn, Flux.Dense(3, 1))
    train_(lambda x, y: mse(m, x, y), Flux.params(m), [(X, Y)], Descent(0.01), jit=jit)
    assert bn.active is None
    trainstep_(mse, m, (X, Y), setup(Descent(0.01), m))
    assert bn.active is None


def test_train_with_an_adtype():
    # Flux 0.16's train!(loss, adtype, model, data, opt_state): reverse-mode backends are the plain step,
    # AutoFiniteDifferences steps eagerly with finite-difference gradients
    runs = {}
    for name, ad in (("plain", None), ("zygote", Flux.AutoZygote()), ("fd", Flux.AutoFiniteDifferences())):
        m = _mlp()
        st = setup(Descent(0.1), m)
        train_(*((mse,) if ad is None else (mse, ad)), m, [(X, Y)] * 3, st)
        runs[name] = jax.tree_util.tree_leaves(m)
    for a, b, c in zip(runs["plain"], runs["zygote"], runs["fd"]):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_allclose(a, c, rtol=1e-4, atol=1e-5)
    with pytest.raises(TypeError, match="not with implicit Params"):
        train_(mse, Flux.AutoZygote(), Flux.params(m), [(X, Y)], Adam())


def test_train_callback_is_an_error():
    # Flux.jl/test/train.jl "callbacks give helpful error": @test_throws ErrorException train!(...; cb)
    m = Flux.Dense(1, 1)
    w = m.weight
    with pytest.raises(TypeError, match=r"does not support callback functions .*trainstep_"):
        train_(lambda *a: 1.0, m, [(1, 2)], setup(Descent(0.1), m), cb=lambda: print("not printed"))
    assert m.weight is w


@Flux.layer(trainable=("W",))
class _Decoder:
    """`W` trainable; the same array also held in a non-trainable field (`V`, a frozen inner layer)."""

    def __init__(self):
        self.W = jnp.arange(6.0).reshape(2, 3) / 6
        self.V = self.W
        self.inner = Flux.Dense(self.W, False)
        self.pair = (self.W, jnp.ones(2))

    def __call__(self, x):
        return self.W @ x + 2 * (self.V @ x) + self.inner(x) + self.pair[0] @ x


@pytest.mark.parametrize("how", ["update_", "update", "jit", "eager loop"])
@pytest.mark.parametrize("rule", [Flux.Descent(0.1), Flux.Adam(0.01)])
def test_an_array_also_held_in_a_non_trainable_field_moves_with_its_parameter(how, rule):
    """Optimisers.jl steps a parameter in place, so every field holding that array sees it move. Only
    the trainable field's gradient counts (Zygote gives each field its own): the step is the one of
    `W` alone, as a NumPy reference of the rule computes."""
    m = _Decoder()
    st = Flux.setup(rule, m)
    x = jnp.array([1.0, -2.0, 0.5])
    loss = lambda m: jnp.sum(m(x) ** 2)
    W, ref_rule = np.asarray(m.W, np.float64), Flux.setup(rule, jnp.asarray(m.W))
    for _ in range(3):
        gW = Flux.gradient(loss, m)[0].W
        ref_rule, ref = Flux.update(ref_rule, jnp.asarray(W, jnp.float32), gW)
        if how == "update_":
            Flux.update_(st, m, Flux.gradient(loss, m)[0])
        elif how == "update":
            st, m = Flux.update(st, m, Flux.gradient(loss, m)[0])
        elif how == "jit":
            Flux.jit(lambda m, st: Flux.update_(st, m, Flux.gradient(loss, m)[0]))(m, st)
        else:
            _, g = Flux.withgradient(loss, m)
            Flux.update_(st, m, g[0])
        W = np.asarray(ref, np.float64)
        np.testing.assert_allclose(m.W, W, rtol=1e-5, atol=1e-6)
        assert m.V is m.W and m.inner.weight is m.W and m.pair[0] is m.W
        np.testing.assert_array_equal(m.pair[1], np.ones(2))


def test_an_embedding_index_out_of_range_stops_train_with_what_to_check():
    """A token id >= the vocabulary size (Julia's 1-based ids, ported as they are) is NaN in compiled
    code (jax's gather cannot raise there): `train_` stops at that batch, says where to look, and leaves
    the model as it was; op by op the same loss raises at the bad index."""
    Flux.seed_(0)
    m = Flux.Chain(Flux.Embedding(5, 3), Flux.Dense(3, 5))
    st = Flux.setup(Flux.Adam(0.01), m)
    loss = lambda m, x, y: Flux.logitcrossentropy(m(x), y)  # noqa: E731
    good, bad = jnp.asarray([0, 1, 2, 3]), jnp.asarray([1, 2, 5, 3])
    y = Flux.onehotbatch([1, 2, 4, 3], range(5))
    ref, ref_st = copy.deepcopy(m), copy.deepcopy(st)
    Flux.train_(loss, ref, [(good, y)], ref_st)  # what the batch before the bad one does
    with pytest.raises(NonFiniteLoss, match="data index 1 .*Embedding"):
        Flux.train_(loss, m, [(good, y), (bad, y)], st)
    for a, b in zip(jax.tree_util.tree_leaves(m), jax.tree_util.tree_leaves(ref), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    with pytest.raises(IndexError, match="index 5 is out of range"), Flux.eager():
        loss(m, bad, y)
