"""The eager `gradient`/`withgradient` run as cached compiled programs (fluxjax/zygote/api.py): the same
numbers as the op-by-op call (`jit=False`), one compilation for a loop over batches of one shape, the
op-by-op fallback where tracing fails, and the `fluxjax.eager()` opt-out."""

import copy

import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fluxjax as F
from fluxjax.optimise import eagerstep
from fluxjax.random import seed_
from fluxjax.zygote import Grads, api

RTOL = 1e-6


def _close(a, b):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=RTOL, atol=1e-7)


def _weights(m):
    return [np.asarray(p) for p in F.params(m)]


def _loop(model, batches, jit, opt=None):
    """An eager model-zoo loop; returns the losses."""
    st = F.setup(opt or F.Adam(0.01), model)
    losses = []
    for x, y in batches:
        loss, g = F.withgradient(lambda m: F.mse(m(x), y), model, jit=jit)  # noqa: B023 (the model-zoo loop: a fresh closure per step)
        F.update_(st, model, g[0])
        losses.append(float(loss))
    return losses


def _batches(n, din=4, dout=3, b=5):
    rng = np.random.default_rng(0)
    return [(jnp.asarray(rng.normal(size=(din, b)), jnp.float32), jnp.asarray(rng.normal(size=(dout, b)), jnp.float32))
            for _ in range(n)]


def test_mlp_loop_matches_op_by_op_and_compiles_once():
    m1 = F.Chain(F.Dense(4, 8, F.relu), F.Dense(8, 3))
    m2 = copy.deepcopy(m1)
    x, y = _batches(1)[0]
    batches = [(jnp.array(x), jnp.array(y)) for _ in range(4)]  # new array objects each step
    before = api.compilations() + eagerstep.compilations()
    l1 = _loop(m1, batches, True)
    # a fresh lambda over each step's batch: one program (the gradient fused with the step, as `_loop`'s
    # `setup` linked them)
    assert api.compilations() + eagerstep.compilations() - before == 1
    l2 = _loop(m2, batches, False)
    _close(l1, l2)
    for a, b in zip(_weights(m1), _weights(m2)):
        _close(a, b)
    assert l1[-1] < l1[0]


def test_gradient_values_and_none():
    m = F.Dense(2, 2)
    x = jnp.array([[1.0], [2.0]])
    g1 = F.gradient(lambda m, k: jnp.sum(m(x)) * 3.0, m, 2.0)
    g2 = F.gradient(lambda m, k: jnp.sum(m(x)) * 3.0, m, 2.0, jit=False)
    _close(g1[0].weight, np.array([[3.0, 6.0], [3.0, 6.0]]))  # d/dW sum(Wx+b)*3 = 3 x'
    _close(g1[0].weight, g2[0].weight)
    assert g1[1] is None and g2[1] is None or float(g1[1]) == float(g2[1]) == 0.0


def test_implicit_params_loop_matches_op_by_op():
    m1 = F.Chain(F.Dense(4, 8, F.tanh), F.Dense(8, 3))
    m2 = copy.deepcopy(m1)
    batches = _batches(3)
    for m, jit in ((m1, True), (m2, False)):
        ps, opt = F.params(m), F.Momentum(0.05)
        for x, y in batches:
            gs = F.gradient(lambda: F.mse(m(x), y), ps, jit=jit)  # noqa: B023 (the model-zoo loop: a fresh closure per step)
            assert isinstance(gs, Grads)
            F.update_(opt, ps, gs)
    for a, b in zip(_weights(m1), _weights(m2)):
        _close(a, b)


def test_implicit_withgradient_loop_is_compiled_and_matches_op_by_op():
    """`withgradient(() -> loss, ps)` (with a BatchNorm, and an auxiliary output) compiles once for the
    loop, as the implicit `gradient`, and gives the op-by-op values, Grads and statistics."""
    m1 = F.Chain(F.Dense(4, 8), F.BatchNorm(8, F.tanh), F.Dense(8, 3))
    m2 = copy.deepcopy(m1)
    batches = _batches(3)
    before, fallbacks = api.compilations(), api.stats["fallbacks"]
    compiled = api.stats["compiled"] + eagerstep.stats["fused"]
    fused = eagerstep.stats["fused"] - eagerstep.stats["committed"]
    results = []
    for m, jit in ((m1, True), (m2, False)):
        # (not Adam: the first bias feeds a BatchNorm, so its gradient is rounding noise, which Adam amplifies)
        ps, opt, vals = F.params(m), F.Momentum(0.05), []
        for x, y in batches:
            (loss, aux), gs = F.withgradient(lambda: (F.mse(m(x), y), {"n": jnp.sum(x)}), ps, jit=jit)  # noqa: B023
            assert isinstance(gs, Grads) and list(gs.params) == list(ps)
            F.update_(opt, ps, gs)
            vals.append((float(loss), float(aux["n"])))
        results.append(vals)
        if jit:  # every step ran the one compiled program, none fell back to op by op
            # (the first step compiles the gradient; `update_` then links the two, and the next steps run
            # the gradient fused with the update: fluxjax/optimise/eagerstep.py)
            assert api.compilations() - before == 1
            assert eagerstep.stats["fused"] - eagerstep.stats["committed"] == fused  # each fused step committed
            assert (api.stats["compiled"] + eagerstep.stats["fused"] - compiled,
                    api.stats["fallbacks"] - fallbacks) == (len(batches), 0)
    _close(results[0], results[1])
    for a, b in zip(_weights(m1), _weights(m2)):
        _close(a, b)
    _close(m1[1].mu, m2[1].mu)
    _close(m1[1].sigma2, m2[1].sigma2)


def test_dropout_fresh_noise_each_step_as_op_by_op():
    def run(jit):
        seed_(3)
        m = F.Chain(F.Dense(4, 6), F.Dropout(0.5))
        F.trainmode_(m)
        x = jnp.ones((4, 2))
        return [np.asarray(F.withgradient(lambda m: jnp.sum(m(x)), m, jit=jit)[0]) for _ in range(3)]

    a, b = run(True), run(False)
    _close(a, b)
    assert len({float(v) for v in a}) == 3  # a new mask each step


def test_batchnorm_statistics_move_as_op_by_op():
    m1 = F.Chain(F.Conv((3, 3), (1, 2)), F.BatchNorm(2), F.flatten, F.Dense(32, 2))
    F.trainmode_(m1)
    m2 = copy.deepcopy(m1)
    rng = np.random.default_rng(1)
    xs = [jnp.asarray(rng.normal(size=(6, 6, 1, 2)), jnp.float32) for _ in range(2)]
    for m, jit in ((m1, True), (m2, False)):
        st = F.setup(F.Descent(0.1), m)
        for x in xs:
            _, g = F.withgradient(lambda m: jnp.mean(m(x) ** 2), m, jit=jit)  # noqa: B023 (the model-zoo loop: a fresh closure per step)
            F.update_(st, m, g[0])
    _close(m1.layers[1].mu, m2.layers[1].mu)
    _close(m1.layers[1].sigma2, m2.layers[1].sigma2)
    assert float(jnp.abs(m1.layers[1].mu).sum()) > 0
    for a, b in zip(_weights(m1), _weights(m2)):
        _close(a, b)


SCALE = 1.0


def test_closure_over_changing_global_and_edited_model():
    m = F.Chain(F.Dense(3, 4), F.Dense(4, 2))
    x = jnp.ones((3, 2))
    global SCALE
    for s in (1.0, 2.0):
        SCALE = s
        g1 = F.gradient(lambda m: SCALE * jnp.sum(m(x)), m)[0]  # noqa: B023 (the model-zoo loop: a fresh closure per step)
        g2 = F.gradient(lambda m: SCALE * jnp.sum(m(x)), m, jit=False)[0]  # noqa: B023 (the model-zoo loop: a fresh closure per step)
        _close(g1.layers[1].bias, g2.layers[1].bias)
        _close(g1.layers[1].bias, np.full(2, 2 * s))  # d/db sum over 2 columns, times SCALE
    m.layers = (m.layers[0], F.Dense(4, 5))  # a layer replaced
    g1 = F.gradient(lambda m: jnp.sum(m(x)), m)[0]
    assert g1.layers[1].weight.shape == (5, 4)
    m.layers[0].weight = jnp.ones((4, 3))  # an array rebound
    g1 = F.gradient(lambda m: jnp.sum(m(x)), m)[0]
    g2 = F.gradient(lambda m: jnp.sum(m(x)), m, jit=False)[0]
    _close(g1.layers[0].weight, g2.layers[0].weight)


def test_python_if_on_a_value_falls_back_and_is_remembered():
    x = jnp.array([1.0, -2.0])

    def loss(v):
        if jnp.sum(v) > 0:  # Python control flow on a value: cannot be traced
            return jnp.sum(v**2)
        return jnp.sum(-v)

    before = dict(api.stats)
    g = F.gradient(loss, x)[0]
    _close(g, -np.ones(2))
    assert api.stats["fallbacks"] == before["fallbacks"] + 1
    g = F.gradient(loss, -x)[0]
    _close(g, np.array([-2.0, 4.0]))
    assert api.stats["fallbacks"] == before["fallbacks"] + 1  # remembered: op by op at once
    assert api.stats["eager"] == before["eager"] + 1


def test_opt_out_and_errors():
    m = F.Dense(2, 2)
    before = dict(api.stats)
    with F.eager():
        F.gradient(lambda m: jnp.sum(m(jnp.ones((2, 1)))), m)
    assert api.stats["eager"] == before["eager"] + 1 and api.stats["compiled"] == before["compiled"]
    with pytest.raises(Exception) as e1:
        F.gradient(lambda m: jnp.sum(m(jnp.ones((3, 1)))), m)
    with pytest.raises(Exception) as e2:
        F.gradient(lambda m: jnp.sum(m(jnp.ones((3, 1)))), m, jit=False)
    assert type(e1.value) is type(e2.value) and "Dense" in str(e1.value)


@pytest.mark.slow
def test_rnn_sequence_loss_as_op_by_op():
    m1 = F.RNN(3, 4)
    m2 = copy.deepcopy(m1)
    x = jnp.asarray(np.random.default_rng(2).normal(size=(3, 5, 2)), jnp.float32)  # features, time, batch
    for m, jit in ((m1, True), (m2, False)):
        st = F.setup(F.Adam(0.01), m)
        for _ in range(2):
            _, g = F.withgradient(lambda m: jnp.sum(m(x) ** 2), m, jit=jit)
            F.update_(st, m, g[0])
    for a, b in zip(_weights(m1), _weights(m2)):
        _close(a, b)


@settings(max_examples=15, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.integers(0, 2)), min_size=1, max_size=4))
def test_random_step_sequences_match_op_by_op(steps):
    """Random short loops mixing the compiled and the op-by-op step on one model and batches that are new
    arrays each step: the weights are those of the op-by-op loop (one program for all examples)."""
    m1 = F.Dense(3, 2)
    m1.weight, m1.bias = jnp.full((2, 3), 0.1), jnp.zeros(2)
    m2 = copy.deepcopy(m1)
    s1, s2 = F.setup(F.Momentum(0.1), m1), F.setup(F.Momentum(0.1), m2)
    for jit, k in steps:
        x = jnp.full((3, 2), float(k)) + jnp.arange(2.0)
        _, g1 = F.withgradient(lambda m: jnp.sum(jnp.tanh(m(x))), m1, jit=jit)  # noqa: B023
        _, g2 = F.withgradient(lambda m: jnp.sum(jnp.tanh(m(x))), m2, jit=False)  # noqa: B023
        F.update_(s1, m1, g1[0])
        F.update_(s2, m2, g2[0])
    _close(m1.weight, m2.weight)
    _close(m1.bias, m2.bias)


def test_a_layer_used_twice_gets_one_gradient_per_path_compiled_as_op_by_op():
    """Zygote's per-path answer for `Chain(d, d)` (Flux issue 1767) from the compiled call too: the
    program's output is not merged back into one Tangent."""
    d = F.Dense(2, 2, F.tanh)
    m = F.Chain(d, d)
    x = jnp.arange(6.0).reshape(2, 3) / 6
    f = lambda m: m(x).sum()  # noqa: E731
    compiled, eager = F.gradient(f, m)[0], F.gradient(f, m, jit=False)[0]
    assert compiled.layers[0] is not compiled.layers[1]
    for a, b in zip(compiled.layers, eager.layers):
        np.testing.assert_allclose(a.weight, b.weight, rtol=1e-5, atol=1e-7)
    assert not np.allclose(compiled.layers[0].weight, compiled.layers[1].weight)


@pytest.mark.parametrize("jit", [True, False])
def test_dict_gradients_keep_the_arguments_key_order(jit):
    """The compiled program's output sorted a dict's keys (JAX's pytree order): the gradient of
    `{"b": .., "a": ..}` came back `a, b`, a named `Chain(enc=.., dec=..)`'s `layers` came back `dec, enc`,
    so zipping the model's layers with the gradient's paired `enc` with `dec`'s gradient. Zygote keeps
    a NamedTuple's field order; op by op kept it too."""
    d = {"b": jnp.array(1.0), "z": {"y": jnp.array(3.0), "x": jnp.array(4.0)}, "a": jnp.array(2.0)}
    f = lambda d: d["b"] * 10 + d["a"] + d["z"]["y"] * d["z"]["x"]  # noqa: E731
    for g in (F.gradient(f, d, jit=jit)[0], F.withgradient(f, d, jit=jit).grad[0]):
        assert type(g) is dict and list(g) == ["b", "z", "a"] and list(g["z"]) == ["y", "x"]
        assert [float(v) for v in (g["b"], g["a"], g["z"]["y"], g["z"]["x"])] == [10.0, 1.0, 4.0, 3.0]
    x = jnp.ones((2, 3))
    c = F.Chain(enc=F.Dense(2, 2), dec=F.Dense(2, 1))
    for _ in range(2):  # the second call reuses the program
        gc = F.gradient(lambda c: jnp.sum(c(x)), c, jit=jit)[0]
        assert type(gc.layers) is dict and list(gc.layers) == ["enc", "dec"]
        for layer, grad in zip(c.layers.values(), gc.layers.values()):
            assert grad.weight.shape == layer.weight.shape
    want = F.gradient(lambda c: jnp.sum(c(x)), c, jit=False)[0]
    np.testing.assert_allclose(gc.layers["dec"].weight, want.layers["dec"].weight, rtol=1e-6)


def test_the_fused_eager_loop_keeps_a_named_chains_order():
    """`withgradient` then `update_` runs as one fused program from the second step: its gradient kept
    the sorted order (`dec, enc`) after the plain compiled call was fixed. Numbers as op by op."""
    from fluxjax.optimise import eagerstep

    def run(jit):
        F.seed_(0)
        c = F.Chain(enc=F.Dense(2, 3, F.tanh), dec=F.Dense(3, 1))
        opt = F.setup(F.Adam(0.01), c)
        x = jnp.arange(6.0).reshape(2, 3) / 6
        orders, losses = [], []
        for _ in range(4):
            loss, g = F.withgradient(lambda m: jnp.sum(m(x) ** 2), c, jit=jit)
            orders.append((list(g[0].layers), type(g[0].layers)))
            losses.append(float(loss))
            F.update_(opt, c, g[0])
        return orders, losses, np.asarray(c.layers["enc"].weight)

    before = eagerstep.stats["fused"]
    got = run(True)
    assert eagerstep.stats["fused"] > before  # the fused program ran
    want = run(False)
    assert got[0] == [(["enc", "dec"], dict)] * 4 == want[0]
    np.testing.assert_allclose(got[1], want[1], rtol=1e-5)
    np.testing.assert_allclose(got[2], want[2], rtol=1e-5)
