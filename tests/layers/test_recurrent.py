"""Recurrent cells and layers (fluxjax/layers/recurrent.py) against Flux 0.16's semantics.

Ported cases cite `Flux.jl/test/layers/recurrent.jl`. Reference values come from a float64 NumPy
step-by-step implementation of Flux's formulas (`src/layers/recurrent.jl`), gradients from central
finite differences of that implementation.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from backend import ON_CPU

import fluxjax
import fluxjax.nnlib as nn
from fluxjax.layers.basic import Chain, Dense
from fluxjax.layers.recurrent import (
    GRU,
    LSTM,
    RNN,
    GRUCell,
    GRUv3,
    GRUv3Cell,
    LSTMCell,
    Recurrence,
    RNNCell,
    initialstates,
)

# ---------------------------------------------------------------------------------------------
# float64 NumPy reference: Flux's formulas, one step at a time, on (features, batch) columns


def _sig(x):
    return 1 / (1 + np.exp(-x))


def _c(v):
    return v[:, None] if v.ndim == 1 else v


def np_step(kind, p, x, state):
    """One step of Flux's cell `kind` with float64 params `p`; x (in, B), state (out, B)."""
    x = _c(x)
    if kind == "rnn":
        h = np.tanh(p["Wi"] @ x + p["Wh"] @ _c(state) + p["b"][:, None])
        return h, h
    if kind == "lstm":
        h, c = _c(state[0]), _c(state[1])
        g = p["Wi"] @ x + p["Wh"] @ h + p["b"][:, None]
        n = h.shape[0]
        i, f, gg, o = g[:n], g[n : 2 * n], g[2 * n : 3 * n], g[3 * n :]  # rows [i; f; g; o]
        c = _sig(f) * c + _sig(i) * np.tanh(gg)
        h = _sig(o) * np.tanh(c)
        return h, (h, c)
    h = _c(state)
    n = h.shape[0]
    gx, gh, b = p["Wi"] @ x, p["Wh"] @ h, p["b"][:, None]
    r = _sig(gx[:n] + gh[:n] + b[:n])  # rows [r; z; h̃]
    z = _sig(gx[n : 2 * n] + gh[n : 2 * n] + b[n : 2 * n])
    if kind == "gru":
        hh = np.tanh(gx[2 * n :] + r * gh[2 * n :] + b[2 * n :])  # bias outside the r product
    else:  # gruv3, Flux's code: Wh_h̃ * (r .* h); the last rows of Wh are unused
        hh = np.tanh(gx[2 * n :] + p["Wh_h"] @ (r * h) + b[2 * n :])
    h = (1 - z) * hh + z * h
    return h, h


def np_seq(kind, p, x, state):
    """Run over axis 1 of x (in, len, B); returns (out, len, B) and the last state."""
    ys = []
    for t in range(x.shape[1]):
        y, state = np_step(kind, p, x[:, t, :], state)
        ys.append(y)
    return np.stack(ys, axis=1), state


def np_zero_state(kind, n, batch):
    z = np.zeros((n, batch))
    return (z, z) if kind == "lstm" else z


CELLS = {"rnn": RNNCell, "lstm": LSTMCell, "gru": GRUCell, "gruv3": GRUv3Cell}
LAYERS = {"rnn": RNN, "lstm": LSTM, "gru": GRU, "gruv3": GRUv3}
GATES = {"rnn": 1, "lstm": 4, "gru": 3, "gruv3": 3}
BIAS = {"rnn": "bias", "lstm": "bias", "gru": "b", "gruv3": "b"}


def fixed_params(kind, n_in, n_out, seed=0):
    """Small fixed float64 weights (and a nonzero bias) for `kind`."""
    rng = np.random.default_rng(seed)
    k = GATES[kind] * n_out
    p = {
        "Wi": rng.uniform(-0.8, 0.8, (k, n_in)),
        "Wh": rng.uniform(-0.8, 0.8, (k, n_out)),
        "b": rng.uniform(-0.3, 0.3, (k,)),
    }
    if kind == "gruv3":
        p["Wh_h"] = rng.uniform(-0.8, 0.8, (n_out, n_out))
    return p


def set_params(cell, kind, p):
    cell.Wi = jnp.asarray(p["Wi"], jnp.float32)
    cell.Wh = jnp.asarray(p["Wh"], jnp.float32)
    setattr(cell, BIAS[kind], jnp.asarray(p["b"], jnp.float32))
    if kind == "gruv3":
        cell.Wh_h = jnp.asarray(p["Wh_h"], jnp.float32)
    return cell


def make_layer(kind, n_in, n_out, seed=0, **kw):
    p = fixed_params(kind, n_in, n_out, seed)
    m = LAYERS[kind](n_in, n_out, **kw)
    set_params(m.cell, kind, p)
    return m, p


def tree_close(a, b, **kw):
    la, lb = jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)
    assert len(la) == len(lb)
    for u, v in zip(la, lb, strict=True):
        np.testing.assert_allclose(np.asarray(u), np.asarray(v), **kw)


# ---------------------------------------------------------------------------------------------
# construction, parameter counts, printing (Flux.jl/test/layers/recurrent.jl, docstrings)


def test_parameter_counts_and_trainables():
    # Flux.jl/test/layers/recurrent.jl: length(Flux.trainables(r)) == 3, == 2 with bias=false
    assert [p.shape for p in fluxjax.params(RNNCell(3, 5))] == [(5, 3), (5, 5), (5,)]
    assert [p.shape for p in fluxjax.params(RNN(3, 5))] == [(5, 3), (5, 5), (5,)]
    assert len(fluxjax.params(RNNCell(3, 5, bias=False))) == 2
    assert len(fluxjax.params(LSTMCell(3, 5))) == 3
    assert len(fluxjax.params(LSTMCell(3, 5, bias=False))) == 2
    assert len(fluxjax.params(GRUCell(3, 5))) == 3
    assert len(fluxjax.params(GRU(2, 4, bias=False))) == 2
    assert len(fluxjax.params(GRUv3Cell(3, 5))) == 4

    def count(m):
        return sum(int(p.size) for p in fluxjax.params(m))

    assert count(LSTMCell((3, 5))) == 180
    assert count(GRUCell((3, 5))) == 135
    assert count(RNN((4, 6))) == 66
    assert count(GRUv3Cell(3, 5)) == 135 + 25
    c = GRUv3Cell(3, 5)
    assert c.Wi.shape == (15, 3) and c.Wh.shape == (15, 5) and c.b.shape == (15,) and c.Wh_h.shape == (5, 5)
    c = LSTMCell(3, 5)
    assert c.Wi.shape == (20, 3) and c.Wh.shape == (20, 5) and c.bias.shape == (20,)
    assert c.Wi.dtype == jnp.float32


def test_printing():
    assert repr(LSTMCell(3, 5)).split("#")[0].strip() == "LSTMCell(3 => 5)"
    assert repr(LSTMCell(3, 5)).endswith("# 180 parameters")
    assert repr(GRUCell(3, 5)).endswith("# 135 parameters")
    assert repr(RNNCell(3, 5)).startswith("RNNCell(3 => 5, tanh)")
    assert repr(RNNCell((3, 5), fluxjax.nnlib.relu)).startswith("RNNCell(3 => 5, relu)")
    assert repr(RNN(4, 6)).startswith("RNN(4 => 6, tanh)") and repr(RNN(4, 6)).endswith("# 66 parameters")
    assert repr(LSTM(3, 5)).startswith("LSTM(3 => 5)")
    assert repr(GRU(3, 5)).startswith("GRU(3 => 5)")
    assert repr(GRUv3(3, 5)).startswith("GRUv3(3 => 5)")
    assert "\n" not in repr(LSTM(3, 5))  # Flux's @layer :noexpand
    rec = repr(Recurrence(RNNCell(2, 3)))  # Flux's docstring: expanded, 18 parameters
    assert rec.splitlines()[0] == "Recurrence(" and "RNNCell(2 => 3, tanh)," in rec and "18 parameters" in rec
    ch = repr(Chain(LSTM(3, 5), Dense(5, 2)))
    assert "LSTM(3 => 5)," in ch and "# 180 parameters" in ch


def test_constructors():
    for kind in ("lstm", "gru", "gruv3"):
        a, b = CELLS[kind](3, 5), CELLS[kind]((3, 5))
        assert a.Wi.shape == b.Wi.shape
        with pytest.raises(TypeError):
            CELLS[kind](3, 5, jnp.tanh)
    assert RNNCell(3, 5, fluxjax.nnlib.relu).sigma is fluxjax.nnlib.relu
    assert RNN((3, 5), fluxjax.nnlib.relu).cell.sigma is fluxjax.nnlib.relu
    cell = LSTMCell(2, 3)
    assert LSTM(cell).cell is cell and LSTM(cell, return_state=True).return_state
    with pytest.raises(TypeError):
        RNN(LSTMCell(2, 3))
    # from arrays
    p = fixed_params("gruv3", 2, 3)
    g = GRUv3Cell(p["Wi"], p["Wh"], p["b"], p["Wh_h"])
    assert g.Wi.shape == (9, 2) and g.Wh_h.shape == (3, 3)
    np.testing.assert_allclose(g.Wi, p["Wi"], rtol=1e-6)
    r = RNNCell(np.ones((3, 2), np.float32), np.ones((3, 3), np.float32), False, fluxjax.nnlib.relu)
    assert r.bias is False and r.sigma is fluxjax.nnlib.relu
    with pytest.raises(ValueError):
        LSTMCell(np.ones((8, 2)), np.ones((8, 3)))
    with pytest.raises(ValueError):
        RNNCell(0, 3)
    # rng= makes construction reproducible
    tree_close(LSTMCell(2, 3, rng=1), LSTMCell(2, 3, rng=1))
    assert not np.allclose(LSTMCell(2, 3, rng=1).Wi, LSTMCell(2, 3, rng=2).Wi)


def test_initialstates():
    # Flux.jl/test/layers/recurrent.jl: initial states are zero
    np.testing.assert_array_equal(initialstates(RNNCell(3, 5)), np.zeros(5))
    h0, c0 = initialstates(LSTMCell(3, 5))
    assert h0.shape == c0.shape == (5,) and not np.any(h0) and not np.any(c0)
    assert initialstates(GRU(2, 4)).shape == (4,)
    assert initialstates(GRUv3(2, 4)).shape == (4,)
    h0, c0 = initialstates(LSTM(2, 4))
    assert h0.shape == (4,) and h0.dtype == jnp.float32
    assert initialstates(Recurrence(GRUCell(2, 4))).shape == (4,)


# ---------------------------------------------------------------------------------------------
# cell values against the NumPy reference


@pytest.mark.parametrize("kind", ["rnn", "lstm", "gru", "gruv3"])
def test_cell_values(kind):
    n_in, n_out, B = 3, 4, 2
    p = fixed_params(kind, n_in, n_out)
    cell = set_params(CELLS[kind](n_in, n_out), kind, p)
    rng = np.random.default_rng(1)
    x = rng.normal(size=(n_in, B))
    if kind == "lstm":
        st = (rng.normal(size=(n_out, B)), rng.normal(size=(n_out, B)))
    else:
        st = rng.normal(size=(n_out, B))
    st32 = jax.tree_util.tree_map(lambda a: jnp.asarray(a, jnp.float32), st)
    y, new = cell(jnp.asarray(x, jnp.float32), st32)
    y_ref, new_ref = np_step(kind, p, x, st)
    np.testing.assert_allclose(y, y_ref, rtol=1e-5, atol=1e-5)
    tree_close(new, new_ref, rtol=1e-5, atol=1e-5)
    # Flux: out === state (RNN/GRU) or out === h (LSTM)
    assert (new[0] if kind == "lstm" else new) is y

    # vector input, vector state
    xv = x[:, 0]
    stv = jax.tree_util.tree_map(lambda a: a[:, 0], st)
    y, new = cell(jnp.asarray(xv, jnp.float32), stv)
    assert y.shape == (n_out,)
    np.testing.assert_allclose(y, np_step(kind, p, xv, stv)[0][:, 0], rtol=1e-5, atol=1e-5)

    # no state == zero state (Flux.jl/test/layers/recurrent.jl)
    tree_close(cell(jnp.asarray(x, jnp.float32)), cell(jnp.asarray(x, jnp.float32), initialstates(cell)))
    np.testing.assert_allclose(
        cell(jnp.asarray(x, jnp.float32))[0], np_step(kind, p, x, np_zero_state(kind, n_out, B))[0], atol=1e-5
    )


@pytest.mark.parametrize("kind", ["rnn", "lstm", "gru", "gruv3"])
def test_vector_state_broadcasts_over_batch(kind):
    n_in, n_out, B = 3, 4, 5
    p = fixed_params(kind, n_in, n_out)
    cell = set_params(CELLS[kind](n_in, n_out), kind, p)
    rng = np.random.default_rng(2)
    x = rng.normal(size=(n_in, B)).astype(np.float32)
    hv = rng.normal(size=(n_out,)).astype(np.float32)
    st = (hv, hv * 0.5) if kind == "lstm" else hv
    st_full = jax.tree_util.tree_map(lambda a: np.repeat(a[:, None], B, axis=1), st)
    y, new = cell(x, st)
    y2, new2 = cell(x, st_full)
    assert y.shape == (n_out, B)
    np.testing.assert_allclose(y, y2, rtol=1e-5)
    tree_close(new, new2, rtol=1e-6)
    # GRUv3Cell in Flux's test: vector x with a batched state
    y3, _ = cell(x[:, 0], st_full)
    assert y3.shape == (n_out, B)
    # and through a layer: (in, len, B) input with a vector state
    m = LAYERS[kind](n_in, n_out)
    set_params(m.cell, kind, p)
    xs = rng.normal(size=(n_in, 3, B)).astype(np.float32)
    tree_close(m(xs, st), m(xs, st_full), rtol=1e-6)


def test_rnn_cell_activation_and_no_bias():
    p = fixed_params("rnn", 2, 3)
    r = RNNCell(p["Wi"].astype(np.float32), p["Wh"].astype(np.float32), False, fluxjax.nnlib.relu)
    x, h = np.array([0.5, -1.0], np.float32), np.array([0.1, 0.2, -0.3], np.float32)
    np.testing.assert_allclose(r(x, h)[0], np.maximum(p["Wi"] @ x + p["Wh"] @ h, 0), rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------------------------------------
# layers: shapes, values, manual loop, return_state


@pytest.mark.parametrize("kind", ["rnn", "lstm", "gru", "gruv3"])
def test_layer_shapes(kind):
    # Flux.jl/test/layers/recurrent.jl: RNN(2 => 4) on (2,3,1) gives (4,3,1), on (2,3) gives (4,3)
    m = LAYERS[kind](2, 4)
    x3 = np.random.default_rng(0).random((2, 3, 1), dtype=np.float32)
    assert m(x3).shape == (4, 3, 1) and m(x3).dtype == jnp.float32
    assert m(x3[:, :, 0]).shape == (4, 3)
    assert m(np.ones((2, 7, 5), np.float32)).shape == (4, 7, 5)
    # (in, len) with a batched state gives (out, len, batch), as Flux's scan does
    st = initialstates(m)
    stb = jax.tree_util.tree_map(lambda a: jnp.zeros((4, 6)), st)
    assert m(np.ones((2, 3), np.float32), stb).shape == (4, 3, 6)
    # no initial state == zero initial state
    tree_close(m(x3), m(x3, initialstates(m)))
    # return_state
    mr = LAYERS[kind](m.cell, return_state=True)
    y, last = mr(x3)
    assert y.shape == (4, 3, 1)
    for a in jax.tree_util.tree_leaves(last):
        assert a.shape == (4, 1) and a.dtype == jnp.float32
    if kind == "lstm":
        assert isinstance(last, tuple) and len(last) == 2
        np.testing.assert_allclose(y[:, -1], last[0])
    else:
        np.testing.assert_allclose(y[:, -1], last)
    y, last = mr(x3[:, :, 0])
    assert y.shape == (4, 3) and jax.tree_util.tree_leaves(last)[0].shape == (4,)


@pytest.mark.parametrize("kind", ["rnn", "lstm", "gru", "gruv3"])
def test_layer_values_and_manual_loop(kind):
    n_in, n_out, L, B = 3, 4, 5, 2
    m, p = make_layer(kind, n_in, n_out, return_state=True)
    rng = np.random.default_rng(3)
    x = rng.normal(size=(n_in, L, B))
    y, last = m(jnp.asarray(x, jnp.float32))
    y_ref, last_ref = np_seq(kind, p, x, np_zero_state(kind, n_out, B))
    np.testing.assert_allclose(y, y_ref, rtol=1e-5, atol=1e-5)
    tree_close(last, last_ref, rtol=1e-5, atol=1e-5)

    # the layer equals a manual loop of its cell (Flux's `scan`)
    state = initialstates(m.cell)
    ys = []
    xf = jnp.asarray(x, jnp.float32)
    for t in range(L):
        yt, state = m.cell(xf[:, t], state)
        ys.append(yt)
    np.testing.assert_allclose(y, jnp.stack(ys, axis=1), rtol=1e-5, atol=1e-6)
    tree_close(last, state, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("kind", ["rnn", "lstm", "gru", "gruv3"])
def test_layer_without_bias_equals_manual_loop(kind):
    m = LAYERS[kind](3, 4, bias=False)
    x = np.random.default_rng(5).normal(size=(3, 6, 2)).astype(np.float32)
    state, ys = initialstates(m.cell), []
    for t in range(x.shape[1]):
        yt, state = m.cell(x[:, t], state)
        ys.append(yt)
    np.testing.assert_allclose(m(x), jnp.stack(ys, axis=1), rtol=1e-5, atol=1e-6)


def test_recurrence_matches_layers():
    # Flux.jl/test/layers/recurrent.jl, testset "Recurrence"
    x = np.random.default_rng(4).random((2, 3, 4), dtype=np.float32)
    for rnn in [RNN(2, 3), LSTM(2, 3), GRU(2, 3), GRUv3(2, 3)]:
        np.testing.assert_allclose(Recurrence(rnn.cell)(x), rnn(x), rtol=1e-6)
    for rnn in [
        RNN(2, 3, return_state=True),
        LSTM(2, 3, return_state=True),
        GRU(2, 3, return_state=True),
        GRUv3(2, 3, return_state=True),
    ]:
        tree_close(Recurrence(rnn.cell, return_state=True)(x), rnn(x), rtol=1e-6)


def test_recurrence_custom_cell():
    """Any cell with `initialstates` and `cell(x, state) -> (y, state)` runs under Recurrence."""

    @fluxjax.layer
    class Accumulate:
        def __init__(self, n):
            self.scale = jnp.full((n,), 2.0)

        def initialstates(self):
            return jnp.zeros(self.scale.shape)

        def __call__(self, x, s):
            s = s + x
            return self.scale * s, s  # a different output and state

    x = np.arange(12, dtype=np.float32).reshape(2, 3, 2)
    y, last = Recurrence(Accumulate(2), return_state=True)(x)
    np.testing.assert_allclose(y, 2 * np.cumsum(x, axis=1))
    np.testing.assert_allclose(last, x.sum(axis=1))


# ---------------------------------------------------------------------------------------------
# gradients against float64 finite differences


def _fd_grads(f, p, eps=1e-6):
    out = {}
    for k, v in p.items():
        g = np.zeros_like(v)
        for idx in np.ndindex(v.shape):
            old = v[idx]
            v[idx] = old + eps
            up = f(p)
            v[idx] = old - eps
            dn = f(p)
            v[idx] = old
            g[idx] = (up - dn) / (2 * eps)
        out[k] = g
    return out


@pytest.mark.parametrize("kind", ["rnn", "lstm", "gru", "gruv3"])
def test_layer_gradients_vs_finite_differences(kind):
    n_in, n_out, L, B = 2, 3, 4, 2
    m, p = make_layer(kind, n_in, n_out)
    rng = np.random.default_rng(5)
    x = rng.normal(size=(n_in, L, B))
    w = rng.normal(size=(n_out, L, B))

    def np_loss(q, xx=x):
        return float(np.sum(np_seq(kind, q, xx, np_zero_state(kind, n_out, B))[0] * w))

    xf, wf = jnp.asarray(x, jnp.float32), jnp.asarray(w, jnp.float32)
    gm, gx = fluxjax.gradient(lambda mm, xx: jnp.sum(mm(xx) * wf), m, xf)
    fd = _fd_grads(np_loss, {k: v.copy() for k, v in p.items()})
    got = {"Wi": gm.cell.Wi, "Wh": gm.cell.Wh, "b": getattr(gm.cell, BIAS[kind])}
    if kind == "gruv3":
        got["Wh_h"] = gm.cell.Wh_h
        np.testing.assert_array_equal(np.asarray(gm.cell.Wh)[2 * n_out :], 0)  # unused rows
    for k in fd:
        np.testing.assert_allclose(got[k], fd[k], rtol=2e-4, atol=2e-5, err_msg=k)
    # and w.r.t. the input
    fdx = _fd_grads(lambda d: np_loss(p, d["x"]), {"x": x.copy()})["x"]
    np.testing.assert_allclose(gx, fdx, rtol=2e-4, atol=2e-5)


def test_trainable_initial_state_model():
    # Flux.jl/test/layers/recurrent.jl: ModelLSTM wraps an LSTM with trainable h0, c0
    @fluxjax.layer
    class ModelLSTM:
        def __init__(self, lstm, h0, c0):
            self.lstm, self.h0, self.c0 = lstm, h0, c0

        def __call__(self, x):
            return self.lstm(x, (self.h0, self.c0))

    n_in, n_out, L, B = 2, 3, 4, 2
    lstm, p = make_layer("lstm", n_in, n_out)
    rng = np.random.default_rng(6)
    h0, c0 = rng.normal(size=n_out), rng.normal(size=n_out)
    model = ModelLSTM(lstm, jnp.asarray(h0, jnp.float32), jnp.asarray(c0, jnp.float32))
    x = rng.normal(size=(n_in, L, B))
    assert model(jnp.asarray(x, jnp.float32)).shape == (n_out, L, B)
    assert len(fluxjax.params(model)) == 5

    def np_loss(q):
        st = (np.repeat(q["h0"][:, None], B, 1), np.repeat(q["c0"][:, None], B, 1))
        return float(np.mean(np_seq("lstm", p, x, st)[0] ** 2))

    (g,) = fluxjax.gradient(lambda m: jnp.mean(m(jnp.asarray(x, jnp.float32)) ** 2), model)
    fd = _fd_grads(np_loss, {"h0": h0.copy(), "c0": c0.copy()})
    np.testing.assert_allclose(g.h0, fd["h0"], rtol=2e-4, atol=1e-6)
    np.testing.assert_allclose(g.c0, fd["c0"], rtol=2e-4, atol=1e-6)
    assert g.lstm.cell.Wi.shape == (12, 2)


def test_implicit_params_gradient():
    m = GRU(2, 3)
    x = jnp.ones((2, 4, 2))
    ps = fluxjax.params(m)
    gs = fluxjax.gradient(lambda: jnp.sum(m(x) ** 2), ps)
    (g,) = fluxjax.gradient(lambda mm: jnp.sum(mm(x) ** 2), m)
    np.testing.assert_allclose(gs[m.cell.Wi], g.cell.Wi, rtol=1e-6)
    np.testing.assert_allclose(gs[m.cell.b], g.cell.b, rtol=1e-6)
    assert isinstance(m.cell.Wi, jax.Array) and not isinstance(m.cell.Wi, jax.core.Tracer)


# ---------------------------------------------------------------------------------------------
# errors


def test_dimension_mismatch_names_the_layer():
    with pytest.raises(fluxjax.DimensionMismatch, match=r"LSTM\(3 => 5\).*size\(input, 1\) == 3"):
        LSTM(3, 5)(jnp.ones((4, 2, 2)))
    with pytest.raises(fluxjax.DimensionMismatch, match=r"GRUCell\(3 => 5\)"):
        GRUCell(3, 5)(jnp.ones((2, 7)))
    with pytest.raises(fluxjax.DimensionMismatch, match=r"RNN\(3 => 5, tanh\)"):
        RNN(3, 5)(jnp.ones(3))  # a single vector is not a sequence
    with pytest.raises(ValueError):  # DimensionMismatch is a ValueError
        GRUv3(3, 5)(jnp.ones((3, 2, 2, 2)))


# ---------------------------------------------------------------------------------------------
# a small LSTM language model (model-zoo char-rnn style) and fluxjax.jit


def _embedding():
    try:
        from fluxjax.layers.dense_like import Embedding
    except ImportError:
        return None
    return Embedding


@pytest.mark.slow  # (long; the default run keeps its smaller siblings)
def test_lstm_language_model_and_jit():
    vocab, emb, hidden, L, B = 11, 6, 8, 5, 3
    rng = np.random.default_rng(7)
    tokens = rng.integers(0, vocab, size=(L + 1, B))
    inputs, targets = tokens[:-1], tokens[1:]  # (len, batch) indices
    y = jnp.asarray(np.eye(vocab, dtype=np.float32)[targets].transpose(2, 0, 1))  # (vocab, len, batch)
    Embedding = _embedding()
    if Embedding is not None:
        model = Chain(Embedding(vocab, emb), LSTM(emb, hidden), Dense(hidden, vocab))
        x = jnp.asarray(inputs)  # Embedding maps (len, batch) -> (emb, len, batch)
    else:
        model = Chain(LSTM(vocab, hidden), Dense(hidden, vocab))
        x = jnp.asarray(np.eye(vocab, dtype=np.float32)[inputs].transpose(2, 0, 1))
    assert model(x).shape == (vocab, L, B)

    def loss(m, x, y):
        logits = m(x)
        return -jnp.mean(jnp.sum(y * jax.nn.log_softmax(logits, axis=0), axis=0))

    val, (g, _, _) = fluxjax.withgradient(loss, model, x, y)
    assert np.isfinite(val) and abs(float(val) - np.log(vocab)) < 1.0
    lstm_g = g.layers[-2].cell
    assert lstm_g.Wi.shape == model[-2].cell.Wi.shape and np.all(np.isfinite(lstm_g.Wh))
    assert float(jnp.abs(lstm_g.Wh).sum()) > 0

    @fluxjax.jit
    def step(m, x, y):
        return fluxjax.withgradient(loss, m, x, y)

    val_j, (g_j, _, _) = step(model, x, y)
    np.testing.assert_allclose(val_j, val, rtol=1e-5)
    np.testing.assert_allclose(g_j.layers[-2].cell.Wh, lstm_g.Wh, rtol=1e-4, atol=1e-6)
    # one manual gradient-descent step (rebinding fields, as update_ does) lowers the loss, and the
    # compiled step (same structure, new leaves: a cache hit) agrees with eager on the new model
    cell, dense = model[-2].cell, model[-1]
    for lay, gl, names in ((cell, lstm_g, ("Wi", "Wh", "bias")), (dense, g.layers[-1], ("weight", "bias"))):
        for k in names:
            setattr(lay, k, getattr(lay, k) - 0.5 * getattr(gl, k))
    new_val = loss(model, x, y)
    assert float(new_val) < float(val)
    np.testing.assert_allclose(step(model, x, y)[0], new_val, rtol=1e-5)
    assert step.cache_size() == 1
    assert not isinstance(model[-2].cell.Wi, jax.core.Tracer)


def test_gates_use_xlas_tanh_and_logistic():
    # Flux's cells swap in NNlib's tanh_fast/sigmoid_fast (fast_act). On XLA the native tanh and logistic
    # are the fast ones and as accurate as NNlib's rational function, so the cells use them.
    cell = LSTMCell(3, 4)
    text = str(jax.make_jaxpr(lambda c, x: c(x))(cell, jnp.ones((3, 2))))
    assert text.count("tanh") == 2 and text.count("logistic") == 3 and "div" not in text
    rnn = str(jax.make_jaxpr(lambda c, x: c(x))(RNNCell(3, 4, np.tanh), jnp.ones((3, 2))))
    assert rnn.count("tanh") == 1 and "div" not in rnn
    x = jnp.linspace(-12, 12, 20001, dtype=jnp.float32)
    exact = np.tanh(np.asarray(x, np.float64))
    for y in (nn.tanh_fast(x), jnp.tanh(x)):
        assert np.max(np.abs(np.asarray(y, np.float64) - exact) / np.maximum(np.abs(exact), 1e-30)) < 3e-7
    if ON_CPU:
        np.testing.assert_array_max_ulp(nn.tanh_fast(x), jnp.tanh(x), maxulp=6)


@pytest.mark.parametrize("kind", ["RNN", "LSTM", *(pytest.param(k, marks=pytest.mark.slow) for k in ("GRU", "GRUv3"))])
def test_sequence_gradient_equals_the_unrolled_cells(kind):
    """The layer (one scan, batch-major inside) against its cell stepped in Python (Flux's layout), in
    reverse and forward mode; and a vector state broadcast over the batch."""
    fluxjax.seed_(2)
    m = getattr(fluxjax, kind)(3, 4)
    x = jax.random.normal(jax.random.PRNGKey(3), (3, 6, 2))

    def unrolled(m, x, state=None):
        cell, ys = m.cell, []
        for t in range(x.shape[1]):
            y, state = cell(x[:, t, :], state)
            ys.append(y)
        return jnp.stack(ys, axis=1)

    np.testing.assert_allclose(m(x), unrolled(m, x), rtol=1e-5, atol=1e-6)
    (g,) = fluxjax.gradient(lambda m: jnp.sum(m(x) ** 2), m)
    (ref,) = fluxjax.gradient(lambda m: jnp.sum(unrolled(m, x) ** 2), m)
    for name in ("Wi", "Wh"):
        np.testing.assert_allclose(getattr(g.cell, name), getattr(ref.cell, name), rtol=2e-5, atol=1e-6)
    jf = jax.jacfwd(lambda x: jnp.sum(m(x) ** 2))(x)
    np.testing.assert_allclose(jf, jax.grad(lambda x: jnp.sum(m(x) ** 2))(x), rtol=2e-5, atol=1e-6)
    state = jax.tree_util.tree_map(lambda a: a + 0.5, initialstates(m.cell))  # vectors, (out,)
    np.testing.assert_allclose(m(x, state), unrolled(m, x, state), rtol=1e-5, atol=1e-6)
