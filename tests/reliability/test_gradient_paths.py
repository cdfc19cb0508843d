"""Property tests (issue #9): for every layer and every loss, `gradient` against central finite
differences in float64, and the four ways of differentiating agree:

- explicit: `gradient(f, model, x...)`, a structural gradient;
- implicit: `gradient(lambda: f(model(x...)), params(model))`, `Grads`;
- jitted: `fluxjax.jit(lambda m, *x: gradient(f, m, *x))`;
- pure: `params, state, apply = fluxjax.functional(model)` under `jax.grad`.

Everything runs in float64 (`jax.enable_x64`, scoped to each example; models via `fluxjax.f64`), so
finite differences are exact to ~1e-9 and the four AD paths agree to ~1e-12. The finite differences
of all parameters and inputs are one `jax.vmap` of the pure function over perturbed copies of the
flattened parameter vector, so a case costs a few compilations, not one per entry. Shapes are drawn
by hypothesis from small ranges (derandomized, few examples): this group runs in the default CI.
"""

from __future__ import annotations

import operator

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jax.flatten_util import ravel_pytree

import fluxjax
from fluxjax import losses as L

pytestmark = pytest.mark.reliability

# Examples per case. Every new shape costs XLA compilations (eager op-by-op for the explicit path, one
# program for each of the jitted, pure and finite-difference paths), so the default run draws one
# example per case (QUICK_CASES, below, groups related layers) and per loss; the `slow` variants draw
# many more, one case per layer type.
QUICK, THOROUGH = 1, 12


def _settings(n):
    return settings(max_examples=n, deadline=None, derandomize=True, database=None)

FD_EPS = 1e-6
FD_TOL = dict(rtol=1e-5, atol=1e-6)  # AD against finite differences
AD_TOL = dict(rtol=1e-9, atol=1e-11)  # AD paths against each other (same float64 program, other fusion)

small = st.integers(1, 3)
seeds = st.integers(0, 2**31 - 1)


def _arr(rng, *shape, scale=0.7):
    return jnp.asarray(scale * rng.standard_normal(shape), jnp.float64)


def _copy(model):
    """A structurally equal copy with the same arrays: every path starts from the same state."""
    return jax.tree_util.tree_map(lambda a: a, model)


def _scalar(out):
    """A smooth, non-linear scalar of every float array in a layer's output (tuples included)."""
    total = 0.0
    for leaf in jax.tree_util.tree_leaves(out):
        total = total + jnp.sum(jnp.sin(1.3 * leaf + 0.2))
    return total


# ---------------------------------------------------------------------------------------------
# Layer cases: name -> (strategy of sizes, build(rng, sizes) -> (model, float inputs, const inputs))


def _dense(rng, s):
    n_in, n_out, b = s
    return fluxjax.Dense(n_in, n_out, jnp.tanh), [_arr(rng, n_in, b)], []


def _conv_like(kind):
    def build(rng, s):
        k, cin, cout, stride, pad = s
        n = k + 2
        if kind == "Conv":
            m = fluxjax.Conv((k, k), (cin, cout), jnp.tanh, stride=stride, pad=pad)
        elif kind == "ConvGroups":
            m = fluxjax.Conv((k, 1), (2 * cin, 2 * cout), stride=stride, pad=pad, groups=2)
            cin *= 2
        elif kind == "ConvTranspose":
            m = fluxjax.ConvTranspose((k, k), (cin, cout), jnp.tanh, stride=stride, pad=min(pad, k - 1))
        elif kind == "CrossCor":
            m = fluxjax.CrossCor((k, k), (cin, cout), stride=stride, pad=pad)
        else:  # DepthwiseConv: cout a multiple of cin
            m = fluxjax.DepthwiseConv((k, k), (cin, cin * cout), jnp.tanh, stride=stride, pad=pad)
        return m, [_arr(rng, n, n + 1, cin, 2)], []

    return st.tuples(small, small, small, st.integers(1, 2), st.integers(0, 1)), build


def _pool(rng, s):
    kind, k, n = s
    m = [
        fluxjax.MaxPool((k, k)),
        fluxjax.MeanPool((k, k), stride=1, pad=1),
        fluxjax.GlobalMaxPool(),
        fluxjax.GlobalMeanPool(),
        fluxjax.AdaptiveMaxPool((2, 1)),
        fluxjax.AdaptiveMeanPool((1, 2)),
    ][kind]
    # a Chain with a Scale in front, so that the model has parameters too
    return fluxjax.Chain(fluxjax.Scale(n + 2, 1, 2), m), [_arr(rng, n + 2, n + 2, 2, 2)], []


def _upsample(rng, s):
    kind, r, n = s
    m = [
        fluxjax.Upsample(scale=(r, r + 1)),
        fluxjax.Upsample("bilinear", scale=r + 1),
        fluxjax.Upsample("bilinear", size=(n + 2, n + 3)),
        fluxjax.PixelShuffle(r),
    ][kind]
    c = r * r if kind == 3 else 2
    return fluxjax.Chain(fluxjax.Conv((1, 1), (c, c)), m), [_arr(rng, n + 1, n, c, 2)], []


def _norm(rng, s):
    kind, c, b = s
    if kind == 0:
        m, x = fluxjax.BatchNorm(c, jnp.tanh), _arr(rng, c, b + 1)
    elif kind == 1:
        m, x = fluxjax.BatchNorm(c), _arr(rng, 3, 2, c, b + 1)
    elif kind == 2:
        m, x = fluxjax.LayerNorm(c, 2), _arr(rng, c, 2, b)
    elif kind == 3:
        m, x = fluxjax.InstanceNorm(c, affine=True, track_stats=True), _arr(rng, 3, 2, c, b)
    else:
        m, x = fluxjax.GroupNorm(2 * c, 2, jnp.tanh), _arr(rng, 3, 2 * c, b)
    if hasattr(m, "gamma"):  # a non-trivial affine part
        m.beta, m.gamma = _arr(rng, c * (2 if kind == 4 else 1)), 1 + _arr(rng, c * (2 if kind == 4 else 1), scale=0.3)
    else:  # LayerNorm: Flux's diag Scale
        m.diag.scale, m.diag.bias = 1 + _arr(rng, *m.diag.scale.shape, scale=0.3), _arr(rng, *m.diag.bias.shape)
    return m, [x], []


def _dropout(rng, s):
    kind, n, b = s
    drop = fluxjax.Dropout(0.4, rng=n) if kind == 0 else fluxjax.AlphaDropout(0.3, rng=n)
    return fluxjax.Chain(fluxjax.Dense(n, n + 1, jnp.tanh), drop), [_arr(rng, n, b + 1)], []


def _embedding(rng, s):
    kind, n, b = s
    m = fluxjax.Embedding(n + 2, 3, padding_idx=(0 if kind == 2 else None))
    m.weight = _arr(rng, 3, n + 2)
    if kind == 1:  # one-hot input (bool, as `onehotbatch` gives; Flux's Embedding takes no floats)
        return m, [], [jnp.asarray(rng.integers(0, n + 2, b)[None, :] == np.arange(n + 2)[:, None])]
    return m, [], [jnp.asarray(rng.integers(0, n + 2, (b, 2)))]


def _recurrent(rng, s):
    kind, n_in, n_out, t = s
    m = [fluxjax.RNN(n_in, n_out), fluxjax.LSTM(n_in, n_out), fluxjax.GRU(n_in, n_out), fluxjax.GRUv3(n_in, n_out)][kind]
    bias = m.cell.bias if hasattr(m.cell, "bias") else m.cell.b
    bias = _arr(rng, *bias.shape, scale=0.3)
    if hasattr(m.cell, "bias"):
        m.cell.bias = bias
    else:
        m.cell.b = bias
    return m, [_arr(rng, n_in, t + 1, 2)], []


def _mha(rng, s):
    nheads, dh, lq, lk = s
    d = nheads * dh
    m = fluxjax.MultiHeadAttention((d, 2 * d, d + 1), nheads=nheads, bias=True)
    return m, [_arr(rng, d, lq, 2), _arr(rng, d, lk, 2)], []


def _dense_like(rng, s):
    kind, a, b = s
    if kind == 0:
        m = fluxjax.Bilinear((a, b + 1), 2, jnp.tanh)
        m.bias = _arr(rng, 2)
        return m, [_arr(rng, a, 3), _arr(rng, b + 1, 3)], []
    if kind == 1:
        m = fluxjax.Scale(a, b, jnp.tanh)
        m.scale, m.bias = _arr(rng, a, b), _arr(rng, a, b)
        return m, [_arr(rng, a, 1, 3)], []
    return fluxjax.Maxout(lambda: fluxjax.Dense(a, b, jnp.tanh), 3), [_arr(rng, a, 2)], []


def _containers(rng, s):
    kind, n, b = s
    if kind == 0:
        m = fluxjax.Parallel(operator.add, fluxjax.Dense(n, 2, jnp.tanh), fluxjax.Dense(n + 1, 2))
        return m, [_arr(rng, n, b), _arr(rng, n + 1, b)], []
    if kind == 1:
        m = fluxjax.SkipConnection(fluxjax.Chain(fluxjax.Dense(n, n, jnp.tanh), fluxjax.LayerNorm(n)), operator.add)
        return m, [_arr(rng, n, b)], []
    if kind == 2:
        m = fluxjax.PairwiseFusion(operator.add, fluxjax.Dense(n, n + 1, jnp.tanh), fluxjax.Dense(n + 1, 2))
        return m, [_arr(rng, n, b), _arr(rng, n + 1, b)], []
    # names in sorted order: functors rebuilds dict fields sorted (see test_named_chain_keeps_its_order)
    m = fluxjax.Chain(
        a_enc=fluxjax.Chain(fluxjax.Conv((2, 2), (1, 2), jnp.tanh, pad=1), fluxjax.BatchNorm(2), fluxjax.MaxPool((2, 2))),
        b_dec=fluxjax.Chain(fluxjax.flatten, fluxjax.Dense(2 * ((n + 3) // 2) ** 2, 2)),
    )
    return m, [_arr(rng, n + 2, n + 2, 1, 2)], []


def _tuple(*ys):
    return ys


def _convs(rng, s):
    k, cin, cout, stride, pad = s
    n = k + 2
    m = fluxjax.Parallel(
        _tuple,
        fluxjax.Conv((k, k), (cin, cout), jnp.tanh, stride=stride, pad=pad),
        fluxjax.ConvTranspose((k, k), (cin, cout), jnp.tanh, stride=stride, pad=min(pad, k - 1)),
        fluxjax.CrossCor((k, k), (cin, cout), stride=stride, pad=pad),
        fluxjax.DepthwiseConv((k, k), (cin, cin * cout), jnp.tanh, stride=stride, pad=pad),
    )
    return m, [_arr(rng, n, n + 1, cin, 2)], []


def _norms(rng, s):
    c, b = s
    layers = [fluxjax.BatchNorm(2 * c, jnp.tanh), fluxjax.InstanceNorm(2 * c, affine=True, track_stats=True),
              fluxjax.GroupNorm(2 * c, 2, jnp.tanh)]
    for lay in layers:
        lay.beta, lay.gamma = _arr(rng, 2 * c), 1 + _arr(rng, 2 * c, scale=0.3)
    return fluxjax.Parallel(_tuple, *layers), [_arr(rng, 3, 2, 2 * c, b + 1)], []


def _pools(rng, s):
    k, n = s
    m = fluxjax.Chain(fluxjax.Scale(n + 2, 1, 2), fluxjax.Parallel(
        _tuple, fluxjax.MaxPool((k, k)), fluxjax.MeanPool((k, k), stride=1, pad=1), fluxjax.GlobalMaxPool(),
        fluxjax.GlobalMeanPool(), fluxjax.AdaptiveMaxPool((2, 1)), fluxjax.AdaptiveMeanPool((1, 2)),
    ))
    return m, [_arr(rng, n + 2, n + 2, 2, 2)], []


def _upsamples(rng, s):
    r, n = s
    c = 2 * r * r
    m = fluxjax.Chain(fluxjax.Conv((1, 1), (c, c)), fluxjax.Parallel(
        _tuple, fluxjax.Upsample(scale=(r, r + 1)), fluxjax.Upsample("bilinear", scale=r + 1),
        fluxjax.Upsample("bilinear", size=(n + 2, n + 3)), fluxjax.PixelShuffle(r),
    ))
    return m, [_arr(rng, n + 1, n, c, 2)], []


def _recurrents(rng, s):
    layers = [_recurrent(rng, (k, *s))[0] for k in range(4)]
    n_in, _, t = s
    return fluxjax.Parallel(_tuple, *layers), [_arr(rng, n_in, t + 1, 2)], []


def _dropouts(rng, s):
    n, b = s
    drops = fluxjax.Parallel(_tuple, fluxjax.Dropout(0.4, rng=n), fluxjax.AlphaDropout(0.3, rng=n + 1))
    return fluxjax.Chain(fluxjax.Dense(n, n + 1, jnp.tanh), drops), [_arr(rng, n, b + 1)], []


def _scale_maxout(rng, s):
    a, b = s
    scale = fluxjax.Scale(b, jnp.tanh)
    scale.scale, scale.bias = _arr(rng, b), _arr(rng, b)
    return fluxjax.Chain(fluxjax.Maxout(lambda: fluxjax.Dense(a, b, jnp.tanh), 3), scale), [_arr(rng, a, 2)], []


def _fixed(build, kind):
    """A builder whose first size (the layer kind) is fixed: one case per layer type."""
    return lambda rng, s: build(rng, (kind, *s))


def _kinds(build, names, *rest):
    return {name: (st.tuples(*rest), _fixed(build, k)) for k, name in enumerate(names)}


LAYER_CASES = {
    "Dense": (st.tuples(small, small, small), _dense),
    **{k: _conv_like(k) for k in ("Conv", "ConvGroups", "ConvTranspose", "CrossCor", "DepthwiseConv")},
    **_kinds(_pool, ("MaxPool", "MeanPool", "GlobalMaxPool", "GlobalMeanPool", "AdaptiveMaxPool", "AdaptiveMeanPool"),
             st.integers(2, 3), small),
    **_kinds(_upsample, ("Upsample", "Upsample(bilinear)", "Upsample(bilinear, size)", "PixelShuffle"),
             st.integers(1, 2), small),
    **_kinds(_norm, ("BatchNorm", "BatchNorm(WHCN)", "LayerNorm", "InstanceNorm", "GroupNorm"), small, small),
    **_kinds(_dropout, ("Dropout", "AlphaDropout"), small, small),
    **_kinds(_embedding, ("Embedding(indices)", "Embedding(onehot)", "Embedding(padding_idx)"), small, small),
    **_kinds(_recurrent, ("RNN", "LSTM", "GRU", "GRUv3"), small, small, small),
    "MultiHeadAttention": (st.tuples(st.integers(1, 2), small, small, small), _mha),
    **_kinds(_dense_like, ("Bilinear", "Scale", "Maxout"), small, small),
    **_kinds(_containers, ("Parallel", "SkipConnection", "PairwiseFusion", "Chain(Conv, BatchNorm, MaxPool, Dense)"), small, small),
}


# The default run: every layer type at least once, related ones side by side in one model (a Parallel
# of all pools, of every upsampling, of the four recurrent layers, ...) so that they share compilations.
QUICK_CASES = {
    "Dense": LAYER_CASES["Dense"],
    "Conv/ConvTranspose/CrossCor/DepthwiseConv": (st.tuples(small, small, small, st.integers(1, 2), st.integers(0, 1)), _convs),
    "pools": (st.tuples(st.integers(2, 3), small), _pools),
    "Upsample/PixelShuffle": (st.tuples(st.integers(1, 2), small), _upsamples),
    "BatchNorm/InstanceNorm/GroupNorm": (st.tuples(small, small), _norms),
    "LayerNorm": LAYER_CASES["LayerNorm"],
    "Dropout/AlphaDropout": (st.tuples(small, small), _dropouts),
    **{k: LAYER_CASES[k] for k in ("Embedding(onehot)", "Embedding(padding_idx)")},
    "RNN/LSTM/GRU/GRUv3": (st.tuples(small, small, small), _recurrents),
    "MultiHeadAttention": LAYER_CASES["MultiHeadAttention"],
    "Bilinear": LAYER_CASES["Bilinear"],
    "Maxout/Scale": (st.tuples(small, small), _scale_maxout),
    **{k: LAYER_CASES[k] for k in ("Parallel", "SkipConnection", "PairwiseFusion", "Chain(Conv, BatchNorm, MaxPool, Dense)")},
}
# the slowest quick case, in the full run (`-m slow`); by default the recurrent layers' gradients are checked
# against their unrolled cells (tests/layers/test_recurrent.py)
SLOW_QUICK = {"RNN/LSTM/GRU/GRUv3", "MultiHeadAttention", "pools"}


def _pure(model, consts):
    params, state, apply = fluxjax.functional(model)

    def f(params, xs):
        out, _ = apply(params, state, *xs, *consts, train=True)
        return _scalar(out)

    return params, f


def _fd_and_grad(f, params, xs):
    """`jax.grad(f)` and central finite differences of `f` over every entry of (params, xs), both in
    one compiled program."""
    theta, unravel = ravel_pytree((params, xs))
    n = theta.shape[0]

    @jax.jit
    def run(theta):
        g = jax.grad(lambda t: f(*unravel(t)))(theta)
        e = FD_EPS * jnp.eye(n, dtype=theta.dtype)
        fv = jax.vmap(lambda t: f(*unravel(t)))
        return g, (fv(theta + e) - fv(theta - e)) / (2 * FD_EPS)

    g, fd = run(theta)
    return unravel(g), unravel(fd)


def _explicit_leaves(g_model, params):
    """The explicit structural gradient's arrays, in `functional`'s parameter order (both walk the
    model's fields in order); a `None` (no dependence) becomes zeros."""
    leaves = jax.tree_util.tree_leaves(g_model)
    assert len(leaves) == len(params), (len(leaves), list(params))
    return leaves


def _close(a, b, tol, what):
    np.testing.assert_allclose(np.asarray(a, np.float64), np.asarray(b, np.float64), err_msg=what, **tol)


def _layer_property(cases, case, data, seed):
    strategy, build = cases[case]
    sizes = data.draw(strategy, label="sizes")
    rng = np.random.default_rng(seed)
    with jax.enable_x64(True):
        fluxjax.seed_(seed % 1000)
        model, xs, consts = build(rng, sizes)
        model = fluxjax.f64(model)
        nx = len(xs)

        # pure (functional + jax.grad) and finite differences of the same pure function
        params, f = _pure(_copy(model), consts)
        (g_pure, gx_pure), (g_fd, gx_fd) = _fd_and_grad(f, params, xs)
        for k in params:
            _close(g_pure[k], g_fd[k], FD_TOL, f"{case} {sizes}: d/d {k}, jax.grad vs finite differences")
        for i in range(nx):
            _close(gx_pure[i], gx_fd[i], FD_TOL, f"{case} {sizes}: d/d input {i}, jax.grad vs finite differences")

        loss = lambda m, *a: _scalar(m(*a, *consts))

        # explicit
        m1 = _copy(model)
        g1 = fluxjax.gradient(loss, m1, *xs)
        for k, got in zip(params, _explicit_leaves(g1[0], params)):
            _close(got, g_pure[k], AD_TOL, f"{case} {sizes}: explicit d/d {k}")
        for i in range(nx):
            _close(g1[1 + i], gx_pure[i], AD_TOL, f"{case} {sizes}: explicit d/d input {i}")

        # implicit
        m2 = _copy(model)
        ps = fluxjax.params(m2)
        assert len(ps) == len(params)
        gs = fluxjax.gradient(lambda: loss(m2, *xs), ps)
        for k, p in zip(params, ps):
            _close(gs[p], g_pure[k], AD_TOL, f"{case} {sizes}: implicit d/d {k}")

        # jitted
        m3 = _copy(model)
        step = fluxjax.jit(lambda m, *a: fluxjax.gradient(loss, m, *a))
        g3 = step(m3, *xs)
        for k, got in zip(params, _explicit_leaves(g3[0], params)):
            _close(got, g_pure[k], AD_TOL, f"{case} {sizes}: jitted d/d {k}")
        for i in range(nx):
            _close(g3[1 + i], gx_pure[i], AD_TOL, f"{case} {sizes}: jitted d/d input {i}")

        # every path committed the same state (BatchNorm statistics, Dropout keys) and no tracer
        for m in (m2, m3):
            for a, b in zip(jax.tree_util.tree_leaves(m1), jax.tree_util.tree_leaves(m)):
                assert not isinstance(b, jax.core.Tracer)
                _close(a, b, AD_TOL, f"{case} {sizes}: state after the gradient")


@pytest.mark.parametrize("case", [pytest.param(c, marks=pytest.mark.slow) if c in SLOW_QUICK else c for c in QUICK_CASES])
@_settings(QUICK)
@given(data=st.data(), seed=seeds)
def test_layer_gradient_paths_agree_with_finite_differences(case, data, seed):
    _layer_property(QUICK_CASES, case, data, seed)


@pytest.mark.slow
@pytest.mark.parametrize("case", list(LAYER_CASES))
@_settings(THOROUGH)
@given(data=st.data(), seed=seeds)
def test_layer_gradient_paths_many_shapes(case, data, seed):
    _layer_property(LAYER_CASES, case, data, seed)


# ---------------------------------------------------------------------------------------------
# Losses: every function in fluxjax.losses, d/d ŷ (and d/d y where Flux differentiates it)


def _probs(rng, *shape):
    z = rng.standard_normal(shape)
    e = np.exp(z - z.max(axis=0, keepdims=True))
    return e / e.sum(axis=0, keepdims=True)


def _unit(rng, *shape):
    return rng.uniform(0.05, 0.95, shape)


def _pos(rng, *shape):
    return rng.uniform(0.2, 2.0, shape)


def _signs(rng, *shape):
    return rng.choice([-1.0, 1.0], shape)


def _bits(rng, *shape):
    return rng.integers(0, 2, shape).astype(np.float64)


def _normal(rng, *shape):
    return rng.standard_normal(shape)


def _pair(gen_yhat, gen_y=None, nd=2, extra=0):
    """make(rng, c, n): ŷ and y of size (c + extra, n), differentiating the first `nd` of them."""
    gen_y = gen_y or gen_yhat
    return lambda r, c, n: ([gen_yhat(r, c + extra, n), gen_y(r, c + extra, n)], nd)


# name -> (fn, make(rng, c, n) -> (args, number of leading args to differentiate))
LOSS_CASES = {
    "mae": (L.mae, _pair(_normal)),
    "mse": (L.mse, _pair(_normal)),
    "mse(agg=sum)": (lambda a, b: L.mse(a, b, agg=jnp.sum), _pair(_normal)),
    "msle": (L.msle, _pair(_pos)),
    "huber_loss": (lambda a, b: L.huber_loss(a, b, delta=0.8), _pair(_normal)),
    "crossentropy": (L.crossentropy, _pair(_probs, extra=1)),
    "logitcrossentropy": (L.logitcrossentropy, _pair(_normal, _probs, extra=1)),
    "binarycrossentropy": (L.binarycrossentropy, _pair(_unit)),
    "logitbinarycrossentropy": (L.logitbinarycrossentropy, _pair(_normal, _unit)),
    "kldivergence": (L.kldivergence, _pair(_probs, extra=1)),
    "poisson_loss": (L.poisson_loss, _pair(_pos)),
    "hinge_loss": (L.hinge_loss, _pair(_normal, _signs, nd=1)),
    "squared_hinge_loss": (L.squared_hinge_loss, _pair(_normal, _signs, nd=1)),
    "dice_coeff_loss": (L.dice_coeff_loss, _pair(_unit)),
    "tversky_loss": (L.tversky_loss, _pair(_unit)),
    "binary_focal_loss": (L.binary_focal_loss, _pair(_unit, _bits, nd=1)),
    "focal_loss": (lambda a, b: L.focal_loss(a, b, gamma=1.5), _pair(_probs, nd=1, extra=1)),
    "siamese_contrastive_loss": (L.siamese_contrastive_loss, lambda r, c, n: ([1.5 * _unit(r, 1, n), _bits(r, 1, n)], 1)),
    "ctc_loss": (L.ctc_loss, lambda r, c, n: ([_normal(r, c + 2, n + 3), r.integers(0, c + 1, (min(n, 2),))], 1)),
    "label_smoothing": (lambda y: jnp.sum(jnp.sin(L.label_smoothing(y, 0.2))), lambda r, c, n: ([_probs(r, c + 1, n)], 1)),
    "xlogy": (lambda x, y: jnp.sum(L.xlogy(x, y)), _pair(_pos)),
    "xlogx": (lambda x: jnp.sum(L.xlogx(x)), lambda r, c, n: ([_pos(r, c, n)], 1)),
}


def _fd_args(f, args, k):
    x = np.array(args[k], np.float64)
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        xp, xm = x.copy(), x.copy()
        xp[i] += FD_EPS
        xm[i] -= FD_EPS
        a_p, a_m = list(args), list(args)
        a_p[k], a_m[k] = xp, xm
        g[i] = (float(f(*a_p)) - float(f(*a_m))) / (2 * FD_EPS)
    return g


def _loss_property(case, c, n, seed):
    fn, make = LOSS_CASES[case]
    rng = np.random.default_rng(seed)
    with jax.enable_x64(True):
        raw, nd = make(rng, c, n)
        args = [jnp.asarray(a) for a in raw]
        diff, const = args[:nd], args[nd:]
        jf = jax.jit(fn)  # one compiled program serves the finite differences
        want = [_fd_args(jf, args, k) for k in range(nd)]

        g_explicit = fluxjax.gradient(lambda *d: fn(*d, *const), *diff)
        g_jit = fluxjax.jit(lambda *d: fluxjax.gradient(lambda *e: fn(*e, *const), *d))(*diff)
        g_pure = jax.grad(lambda *d: fn(*d, *const), argnums=tuple(range(nd)))(*diff)
        holder = list(diff)
        ps = fluxjax.Params(holder)
        gs = fluxjax.gradient(lambda: fn(*holder, *const), ps)
        g_implicit = [gs[p] for p in ps] if len(ps) == nd else None
        for k in range(nd):
            _close(g_explicit[k], want[k], FD_TOL, f"{case} (c={c}, n={n}): d/d arg {k} vs finite differences")
            _close(g_jit[k], g_explicit[k], AD_TOL, f"{case}: jitted d/d arg {k}")
            _close(g_pure[k], g_explicit[k], AD_TOL, f"{case}: jax.grad d/d arg {k}")
            if g_implicit is not None:
                _close(g_implicit[k], g_explicit[k], AD_TOL, f"{case}: implicit d/d arg {k}")


@pytest.mark.parametrize("case", list(LOSS_CASES))
@_settings(QUICK)
@given(c=small, n=small, seed=seeds)
def test_loss_gradient_paths_agree_with_finite_differences(case, c, n, seed):
    _loss_property(case, c, n, seed)


@pytest.mark.slow
@pytest.mark.parametrize("case", list(LOSS_CASES))
@_settings(THOROUGH)
@given(c=small, n=small, seed=seeds)
def test_loss_gradient_paths_many_shapes(case, c, n, seed):
    _loss_property(case, c, n, seed)


def test_named_chain_keeps_its_order_through_tree_map_and_jax_jit():
    m = fluxjax.Chain(enc=fluxjax.Dense(2, 3), dec=fluxjax.Dense(3, 1))
    x = jnp.ones((2, 4))
    assert list(jax.tree_util.tree_map(lambda a: a, m).layers) == ["enc", "dec"]
    np.testing.assert_allclose(jax.jit(lambda m, x: m(x))(m, x), m(x), rtol=1e-6)
