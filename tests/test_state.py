"""The state thread: BatchNorm/InstanceNorm/GroupNorm/LayerNorm/Dropout numbers and modes, and that
eager, `fluxjax.jit` and `functional` agree. Ports of Flux.jl/test/layers/normalisation.jl."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import fluxjax as Flux
from fluxjax.layers.normalise import AlphaDropout, BatchNorm, Dropout, GroupNorm, InstanceNorm, LayerNorm

X = jnp.array([[1.0, 3, 5], [2, 4, 6]])


def _no_tracers(m):
    return not any(isinstance(v, jax.core.Tracer) for v in jax.tree_util.tree_leaves(m))


def test_batchnorm_one_step_under_pullback():
    # Flux.jl/test/layers/normalisation.jl: y = pullback(m, x)[1] ≈ [-1.22474 0 1.22474; ...]; m.μ ≈ [0.3, 0.4]
    m = BatchNorm(2)
    y, _ = Flux.pullback(lambda m: m(X), m)
    np.testing.assert_allclose(y, [[-1.22474, 0, 1.22474], [-1.22474, 0, 1.22474]], atol=1e-5)
    np.testing.assert_allclose(m.mu, [0.3, 0.4], atol=1e-6)
    np.testing.assert_allclose(m.sigma2, [1.3, 1.3], atol=1e-6)  # 0.1 * var(x, corrected=false) * 3/2 + 0.9
    # a plain call afterwards is test mode: x′[1] ≈ (1 - 0.3) / sqrt(1.3)
    np.testing.assert_allclose(m(X)[0, 0], (1 - 0.3) / np.sqrt(1.3 + 1e-5), rtol=1e-5)
    assert _no_tracers(m)


def test_batchnorm_gradient_commits_stats_and_has_no_state_gradient():
    m = BatchNorm(2)
    (g,) = Flux.gradient(lambda m: jnp.sum(jnp.sin(m(X))), m)
    np.testing.assert_allclose(m.mu, [0.3, 0.4], atol=1e-6)
    assert g.mu is None and g.sigma2 is None and g.gamma.shape == (2,)
    assert len(Flux.params(m)) == 2  # Flux: length(trainables(BatchNorm(10))) == 2
    assert len(Flux.params(BatchNorm(3, affine=False))) == 0


def test_batchnorm_single_value_per_channel_errors():
    # Flux.jl/test/layers/normalisation.jl (#2716): training on one value per channel throws
    m = Flux.trainmode_(BatchNorm(1))
    with pytest.raises(ValueError, match="one element per channel"):
        m(jnp.zeros((1, 1)))
    m(jnp.arange(4.0).reshape(4, 1, 1))  # 4 values per channel is fine
    Flux.testmode_(m)
    np.testing.assert_allclose(m(jnp.zeros((1, 1))), [[(0 - m.mu[0]) / np.sqrt(m.sigma2[0] + 1e-5)]], rtol=1e-6)


def test_batchnorm_activation_test_mode():
    m = BatchNorm(2, jax.nn.sigmoid)
    np.testing.assert_allclose(m(X), jax.nn.sigmoid(X / np.sqrt(1 + 1e-5)), atol=1e-7)


def test_batchnorm_channel_is_second_to_last():
    # Flux.jl/test/layers/normalisation.jl: reshape(1:6, 3, 2, 1) is the permuted (2, 3) matrix
    x = jnp.arange(1.0, 7.0).reshape(1, 2, 3).T  # Julia reshape(1:6, 3, 2, 1)
    m1, m2 = Flux.trainmode_(BatchNorm(2)), Flux.trainmode_(BatchNorm(2))
    y = m1(x)
    x2 = jnp.transpose(x, (1, 0, 2)).reshape(2, 3)
    y2 = m2(x2)
    np.testing.assert_allclose(jnp.transpose(y, (1, 0, 2)).reshape(2, 3), y2, atol=1e-6)
    np.testing.assert_allclose(m1.sigma2, m2.sigma2, atol=1e-6)


def test_modes_and_bad_flags():
    assert BatchNorm(5, active=True).active is True
    with pytest.raises(ValueError, match="active"):
        BatchNorm(5, active="something_else")
    m = Flux.Chain(Flux.Dense(2, 2), BatchNorm(2), Dropout(0.5))
    Flux.trainmode_(m)
    assert m[1].active is True and m[2].active is True
    Flux.testmode_(m)
    assert m[1].active is False and m[2].active is False
    Flux.testmode_(m, "auto")
    assert m[1].active is None and m[2].active is None


def test_instancenorm_tracked_stats():
    # Flux.jl/test/layers/normalisation.jl: InstanceNorm(2; affine=true, track_stats=true), x = reshape(1:12, 3, 2, 2)
    x = jnp.arange(1.0, 13.0).reshape(2, 2, 3).T
    m = InstanceNorm(2, affine=True, track_stats=True)
    Flux.gradient(lambda m: jnp.sum(m(x)), m)
    np.testing.assert_allclose(m.mu, [0.5, 0.8], atol=1e-6)
    var = np.var(np.asarray(x), axis=0).mean(axis=-1)
    np.testing.assert_allclose(m.sigma2, 0.1 * 1.5 * var + 0.9, atol=1e-5)
    yt = m(x)
    np.testing.assert_allclose(yt, (x - m.mu[None, :, None]) / np.sqrt(m.sigma2[None, :, None] + 1e-5), atol=1e-5)
    x2 = np.asarray(x)
    ref = (x2 - x2.mean(0)) / np.sqrt(x2.var(0) + 1e-5)
    np.testing.assert_allclose(InstanceNorm(2, jax.nn.sigmoid)(x), jax.nn.sigmoid(ref), atol=1e-6)
    assert len(Flux.params(InstanceNorm(10))) == 0


def test_groupnorm_exact_output():
    # Flux.jl/test/layers/normalisation.jl: GroupNorm(4, 2) on reshape(1:24, 3, 4, 2)
    x = jnp.arange(1.0, 25.0).reshape(2, 4, 3).T
    y = GroupNorm(4, 2)(x)
    exp = np.array([[-1.4638476, 0.29276943, -1.4638476, 0.29276943],
                    [-0.87830865, 0.87830853, -0.8783088, 0.8783083],
                    [-0.29276967, 1.4638474, -0.2927699, 1.4638472]])
    np.testing.assert_allclose(y[:, :, 0], exp, atol=1e-5)
    np.testing.assert_allclose(y[:, :, 1], exp, atol=1e-5)
    with pytest.raises(ValueError, match="divisible"):
        GroupNorm(5, 2)


def test_layernorm_is_normalise_over_leading_dims():
    x = jax.random.uniform(jax.random.PRNGKey(0), (2, 3, 4, 5))
    xn = np.asarray(x)

    def normalise(a, axes):
        return (a - a.mean(axes, keepdims=True)) / np.sqrt(a.var(axes, keepdims=True) + 1e-5)

    np.testing.assert_allclose(LayerNorm(2)(x), normalise(xn, (0,)), atol=1e-5)
    np.testing.assert_allclose(LayerNorm((2, 3))(x), normalise(xn, (0, 1)), atol=1e-5)
    np.testing.assert_allclose(LayerNorm(2, jnp.tanh)(x), np.tanh(normalise(xn, (0,))), atol=1e-5)
    assert len(Flux.params(LayerNorm(2))) == 2 and len(Flux.params(LayerNorm(2, affine=False))) == 0
    with pytest.raises(Flux.DimensionMismatch, match="LayerNorm"):
        LayerNorm(3)(x)


def test_layernorm_holds_a_diag_scale_as_flux():
    # Flux.jl/src/layers/normalise.jl: diag = affine ? Scale(size..., λ) : λ; the layer is diag(normalise(x))
    m = LayerNorm(3, jnp.tanh)
    assert isinstance(m.diag, Flux.Scale) and m.diag.sigma is jnp.tanh and m.diag.scale.shape == (3,)
    assert LayerNorm(3, jnp.tanh, affine=False).diag is jnp.tanh and LayerNorm(3, affine=False).diag(2.0) == 2.0
    m.diag.scale, m.diag.bias = jnp.array([1.0, 2.0, -1.0]), jnp.array([0.5, 0.0, 1.0])
    x = jax.random.normal(jax.random.PRNGKey(1), (3, 4))
    xn = np.asarray(x)
    n = (xn - xn.mean(0)) / np.sqrt(xn.var(0) + 1e-5)
    np.testing.assert_allclose(m(x), np.tanh(n * [[1.0], [2.0], [-1.0]] + [[0.5], [0.0], [1.0]]), atol=1e-5)
    (g,) = Flux.gradient(lambda m: m(x).sum(), m)
    assert g.diag.scale.shape == (3,) and g.diag.bias.shape == (3,) and g.sigma is None and g.eps is None
    d = 1 - np.tanh(n * [[1.0], [2.0], [-1.0]] + [[0.5], [0.0], [1.0]]) ** 2
    np.testing.assert_allclose(g.diag.bias, d.sum(1), rtol=1e-5)
    np.testing.assert_allclose(g.diag.scale, (d * n).sum(1), rtol=1e-4, atol=1e-5)
    assert repr(LayerNorm(3, jnp.tanh)) == "LayerNorm(3, tanh)  # 6 parameters"  # not expanded (:noexpand)
    assert [type(l).__name__ for l in Flux.modules(LayerNorm(3))] == ["LayerNorm", "Scale"]


def test_dropout_modes():
    # Flux.jl/test/layers/normalisation.jl: Dropout is the identity outside AD, drops under AD
    x = jnp.array([1.0, 2, 3])
    assert bool(jnp.all(Dropout(0.1)(x) == x))
    assert bool(jnp.all(Flux.pullback(lambda x: Dropout(0.0)(x), x)[0] == x))
    assert bool(jnp.all(Flux.pullback(lambda x: Dropout(1.0)(x), x)[0] == 0))
    m = Dropout(0.9)
    xr = jnp.ones(100)
    y, _ = Flux.pullback(m, xr)
    assert int(jnp.sum(y == 0)) > 50
    Flux.testmode_(m)
    assert int(jnp.sum(Flux.pullback(m, xr)[0] == 0)) == 0
    Flux.trainmode_(m)
    assert int(jnp.sum(m(xr) == 0)) > 50
    assert int(jnp.sum(Dropout(0.9, active=False)(xr) == 0)) == 0
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        Dropout(1.5)


def test_dropout_dims_share_mask():
    # Dropout(0.5; dims=2) on 100×50 drops the same number per row: the mask varies along dim 2 only
    x = jnp.ones((100, 50))
    m = Flux.trainmode_(Dropout(0.5, dims=1))
    y = m(x)
    zeros_per_row = np.asarray(jnp.sum(y == 0, axis=1))
    assert len(set(zeros_per_row.tolist())) == 1
    col = np.asarray(y[0] == 0)
    assert np.all(np.asarray(y == 0) == col[None, :])


def test_dropout_key_moves_and_seed_reproduces():
    Flux.seed_(3)
    d1 = Flux.trainmode_(Dropout(0.5))
    a, b = d1(jnp.ones(32)), d1(jnp.ones(32))
    assert not bool(jnp.all(a == b))
    Flux.seed_(3)
    d2 = Flux.trainmode_(Dropout(0.5))
    assert bool(jnp.all(d2(jnp.ones(32)) == a)) and bool(jnp.all(d2(jnp.ones(32)) == b))


def test_alphadropout_statistics():
    x = jax.random.normal(jax.random.PRNGKey(1), (1000,))
    y, _ = Flux.pullback(AlphaDropout(0.5), x)
    assert abs(float(jnp.mean(y))) < 0.2 and abs(float(jnp.var(y)) - 1) < 0.2
    assert bool(jnp.all(Flux.pullback(AlphaDropout(0.0), x)[0] == x))
    assert bool(jnp.all(Flux.pullback(AlphaDropout(1.0), x)[0] == 0))
    # Flux asserts 40 < sum(m(ones(100))) < 130; the expected sum is 44.3 with std 12, so check the mean
    # on more samples instead: E[y] = (1-p)(A + B) + p(A·α′ + B)
    p, a = 0.5, -1.7580993408473766
    A = 1 / np.sqrt((1 - p) * (1 + p * a**2))
    B = -A * a * p
    y1 = Flux.pullback(AlphaDropout(p), jnp.ones(20000))[0]
    assert abs(float(jnp.mean(y1)) - ((1 - p) * (A + B) + p * (A * a + B))) < 0.03


def _model():
    Flux.seed_(0)
    return Flux.Chain(Flux.Dense(2, 4), BatchNorm(4, jax.nn.relu), Dropout(0.2), Flux.Dense(4, 1))


def _loss(m, x):
    return jnp.mean(m(x) ** 2)


@Flux.jit
def _jit_step(m, x):
    return Flux.withgradient(lambda m: _loss(m, x), m)


def test_eager_jit_functional_identical_stats_over_steps():
    xs = [jax.random.normal(jax.random.PRNGKey(i), (2, 8)) for i in range(3)]
    eager, jitted, pure = _model(), _model(), _model()
    for x in xs:
        Flux.withgradient(lambda m, x=x: _loss(m, x), eager)
        _jit_step(jitted, x)
    params, state, apply = Flux.functional(pure)
    step = jax.jit(lambda p, s, x: apply(p, s, x, train=True))
    for x in xs:
        _, state = step(params, state, x)
    # XLA fuses the compiled step, so statistics agree to float32 rounding; the RNG keys bit for bit
    np.testing.assert_allclose(eager[1].mu, jitted[1].mu, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(eager[1].sigma2, jitted[1].sigma2, rtol=1e-6)
    np.testing.assert_array_equal(eager[2].rng, jitted[2].rng)
    np.testing.assert_array_equal(eager[0].weight, jitted[0].weight)
    np.testing.assert_allclose(state["layers[1].mu"], eager[1].mu, rtol=1e-6)
    np.testing.assert_allclose(state["layers[1].sigma2"], eager[1].sigma2, rtol=1e-6)
    assert _jit_step.cache_size() == 1
    assert _no_tracers(eager) and _no_tracers(jitted)


def test_functional_is_pure_and_vmaps():
    m = _model()
    mu0 = m[1].mu
    params, state, apply = Flux.functional(m)
    xs = jax.random.normal(jax.random.PRNGKey(0), (5, 2, 3))  # 5 independent batches
    ys, new = jax.vmap(lambda x: apply(params, state, x, train=True))(xs)
    assert ys.shape == (5, 1, 3) and new["layers[1].mu"].shape == (5, 4)
    assert m[1].mu is mu0 and _no_tracers(m)
    y_test, s2 = apply(params, state, xs[0], train=False)
    np.testing.assert_array_equal(s2["layers[1].mu"], state["layers[1].mu"])
    g = jax.grad(lambda p: jnp.sum(apply(p, state, xs[0], train=True)[0]))(params)
    assert set(g) == set(params)


def test_exception_leaves_model_unchanged():
    m = _model()
    before = [np.asarray(v) for v in jax.tree_util.tree_leaves(m)]

    def bad(m):
        m(jnp.ones((2, 4)))
        raise KeyError("boom")

    for call in (lambda: Flux.gradient(bad, m), lambda: Flux.jit(lambda m: bad(m))(m)):
        with pytest.raises(KeyError):
            call()
        after = jax.tree_util.tree_leaves(m)
        assert all(np.array_equal(a, b) for a, b in zip(before, after)) and _no_tracers(m)


def test_train_mode_under_plain_jax_jit_is_a_clear_error():
    m = Flux.trainmode_(BatchNorm(2))
    with pytest.raises(RuntimeError, match="fluxjax.jit"):
        jax.jit(lambda x: m(x))(X)
    assert _no_tracers(m)


def test_within_gradient():
    # NNlib.within_gradient: false normally, true inside AD (and so inside train_)
    seen = []

    def f(x):
        seen.append(Flux.within_gradient())
        return jnp.sum(x**2)

    f(jnp.ones(2))
    Flux.gradient(f, jnp.ones(2))
    Flux.jit(f)(jnp.ones(2))
    assert seen == [False, True, False]


def test_functional_apply_refuses_a_model_edited_since():
    # A layer replaced after functional(model): apply used to swap `params` into the old layer, which
    # the model no longer calls, and ran the new layer's own weights, silently
    m = Flux.Chain(enc=Flux.Dense(2, 2), dec=Flux.Dense(2, 1))
    params, state, apply = Flux.functional(m)
    x = jnp.ones((2, 3))
    ones = {k: jnp.ones_like(v) for k, v in params.items()}
    np.testing.assert_allclose(apply(ones, state, x)[0], np.full((1, 3), 7.0))  # 1·(2·1 + 1)·2 + 1
    st = Flux.setup(Flux.Descent(0.1), m)  # new arrays in the same places are fine
    Flux.update_(st, m, Flux.gradient(lambda m: jnp.sum(m(x)), m)[0])
    np.testing.assert_allclose(apply(ones, state, x)[0], np.full((1, 3), 7.0))
    m.layers["dec"] = Flux.Dense(2, 1)
    with pytest.raises(RuntimeError, match="structure changed.*functional\\(model\\) again"):
        apply(ones, state, x)


@pytest.mark.parametrize("edit", ["field", "list item", "unrelated model"])
def test_functional_apply_sees_each_kind_of_edit(edit):
    """`apply` walks the model again only when something may have changed (the structure version, or
    an item of its lists and dicts): a field set on a layer and a list item replaced are seen, an edit
    of another model is not an error."""
    @Flux.layer
    class Stack:
        def __init__(self):
            self.ls = [Flux.Dense(2, 2), Flux.Dense(2, 1)]

        def __call__(self, x):
            return self.ls[1](self.ls[0](x))

    m, fresh = Stack(), Flux.Dense(2, 1)  # (built before: building a layer changes the structure version)
    params, state, apply = Flux.functional(m)
    x = jnp.ones((2, 3))
    ones = {k: jnp.ones_like(v) for k, v in params.items()}
    np.testing.assert_allclose(apply(ones, state, x)[0], np.full((1, 3), 7.0))
    if edit == "field":
        m.ls[1].bias = False  # an array field made static: one place fewer
    elif edit == "list item":
        m.ls[1] = fresh  # a list's item: no structure version, only the container check sees it
    else:
        other = Flux.Dense(2, 2)
        other.bias = False
    if edit == "unrelated model":
        np.testing.assert_allclose(apply(ones, state, x)[0], np.full((1, 3), 7.0))
    else:
        with pytest.raises(RuntimeError, match="structure changed"):
            apply(ones, state, x)


@pytest.mark.parametrize("tie", ["array", "layer"])
def test_functional_keeps_a_tied_array_one_entry(tie):
    """An array at two places (one weight in two layers, or one layer twice) is one entry of `params`:
    its gradient is the sum of its places', and a step of optax on `params` keeps it one array, as
    `train_` does (it was one entry per place, trained apart)."""
    W = jnp.asarray([[1.0, 0.5], [0.2, 1.0]])

    def model():
        if tie == "array":
            return Flux.Chain(Flux.Dense(W, False, Flux.tanh), Flux.Dense(W, jnp.zeros(2)))
        d = Flux.Dense(W, False, Flux.tanh)
        return Flux.Chain(d, d)

    x = jnp.asarray([[1.0, 2.0], [3.0, 4.0]])
    m = model()
    Flux.train_(lambda m, x: jnp.sum(m(x) ** 2), m, [(x,)], Flux.setup(Flux.Descent(0.1), m))
    params, state, apply = Flux.functional(model())
    assert [k for k in params if k.endswith("weight")] == ["layers[0].weight"]
    g = jax.grad(lambda p: jnp.sum(apply(p, state, x)[0] ** 2))(params)
    new = {k: params[k] - 0.1 * g[k] for k in params}
    np.testing.assert_allclose(new["layers[0].weight"], m.layers[0].weight, rtol=1e-5)
    np.testing.assert_allclose(new["layers[0].weight"], m.layers[1].weight, rtol=1e-5)
    y, _ = apply(new, state, x)
    np.testing.assert_allclose(y, m(x), rtol=1e-5)
