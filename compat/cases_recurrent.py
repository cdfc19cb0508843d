"""Recurrent, attention and upsampling layer cases (Flux.jl test/layers/recurrent.jl, attention.jl,
upsample.jl, and the parameter counts in the docstrings of src/layers/recurrent.jl)."""

import jax.numpy as jnp
import numpy as np

import fluxjax
from compat._case import case, close
from fluxjax import (
    GRU,
    LSTM,
    RNN,
    GRUCell,
    GRUv3,
    GRUv3Cell,
    LSTMCell,
    MultiHeadAttention,
    PixelShuffle,
    Recurrence,
    RNNCell,
    Upsample,
)

REC = "Flux.jl test/layers/recurrent.jl"


def nparams(m):
    return sum(int(np.size(p)) for p in fluxjax.params(m))


@case(
    names=("RNNCell", "initialstates", "params"),
    source=REC,
    julia="""
    r = RNNCell(3 => 5)
    @test length(Flux.trainables(r)) == 3
    x = [rand(Float32, 3, 4) for _ in 1:6]
    # initial states are zero
    @test Flux.initialstates(r) ≈ zeros(Float32, 5)
    # no initial state same as zero initial state
    out, state = r(x[1])
    @test out === state
    @test out ≈ r(x[1], zeros(Float32, 5))[1]
    r = RNNCell(3 => 5, bias=false)
    @test length(Flux.trainables(r)) == 2
    """,
)
def case_rnncell():
    r = RNNCell(3, 5)
    assert len(fluxjax.params(r)) == 3
    x = fluxjax.rand32(3, 4)
    close(fluxjax.initialstates(r), np.zeros(5))
    out, state = r(x)
    assert out is state
    close(out, r(x, jnp.zeros(5))[0])
    assert len(fluxjax.params(RNNCell(3, 5, bias=False))) == 2


@case(
    names=("RNN", "initialstates"),
    source=REC,
    julia="""
    model = ModelRNN(RNN(2 => 4), zeros(Float32, 4))   # (m::ModelRNN)(x) = m.rnn(x, m.h0)
    x = rand(Float32, 2, 3, 1)
    y = model(x)
    @test size(y) == (4, 3, 1)
    rnn = model.rnn
    @test Flux.initialstates(rnn) ≈ zeros(Float32, 4)
    @test rnn(x) ≈ rnn(x, zeros(Float32, 4))
    x = rand(Float32, 2, 3)
    y = model(x)
    @test size(y) == (4, 3)
    model = ModelRNN(RNN(2 => 4; return_state = true), zeros(Float32, 4))
    x = rand(Float32, 2, 3, 1)
    y, last_state = model(x)
    @test size(y) == (4, 3, 1)
    @test size(last_state) == (4, 1)
    """,
)
def case_rnn():
    rnn = RNN(2, 4)
    h0 = jnp.zeros(4, jnp.float32)
    x = fluxjax.rand32(2, 3, 1)
    assert rnn(x, h0).shape == (4, 3, 1)
    close(fluxjax.initialstates(rnn), np.zeros(4))
    close(rnn(x), rnn(x, h0))
    assert rnn(fluxjax.rand32(2, 3), h0).shape == (4, 3)
    y, last = RNN(2, 4, return_state=True)(x, h0)
    assert y.shape == (4, 3, 1)
    assert last.shape == (4, 1)


@case(
    names=("LSTMCell", "initialstates"),
    source=REC,
    julia="""
    cell = LSTMCell(3 => 5)
    @test length(Flux.trainables(cell)) == 3
    x = [rand(Float32, 3, 4) for _ in 1:6]
    out, (hnew, cnew) = cell(x[1])
    @test out === hnew
    @test size(hnew) == (5, 4)
    @test size(cnew) == (5, 4)
    h0, c0 = Flux.initialstates(cell)
    @test h0 ≈ zeros(Float32, 5)
    @test c0 ≈ zeros(Float32, 5)
    hnew1, cnew1 = cell(x[1], (h0, c0))[2]
    hnew2, cnew2 = cell(x[1])[2]
    @test hnew1 ≈ hnew2
    @test cnew1 ≈ cnew2
    cell = LSTMCell(3 => 5, bias=false)
    @test length(Flux.trainables(cell)) == 2
    """,
)
def case_lstmcell():
    cell = LSTMCell(3, 5)
    assert len(fluxjax.params(cell)) == 3
    x = fluxjax.rand32(3, 4)
    out, (h, c) = cell(x)
    assert out is h
    assert h.shape == (5, 4) and c.shape == (5, 4)
    h0, c0 = fluxjax.initialstates(cell)
    close(h0, np.zeros(5))
    close(c0, np.zeros(5))
    h1, c1 = cell(x, (h0, c0))[1]
    close(h1, h)
    close(c1, c)
    assert len(fluxjax.params(LSTMCell(3, 5, bias=False))) == 2


@case(
    names=("LSTM",),
    source=REC,
    julia="""
    x = rand(Float32, 2, 3, 1)
    model = ModelLSTM(LSTM(2 => 4), zeros(Float32, 4), zeros(Float32, 4))
    h = model(x)
    @test size(h) == (4, 3, 1)
    lstm = model.lstm
    h0, c0 = Flux.initialstates(lstm)
    @test h0 ≈ zeros(Float32, 4)
    @test c0 ≈ zeros(Float32, 4)
    h1 = lstm(x, (zeros(Float32, 4), zeros(Float32, 4)))
    @test h ≈ h1
    lstm = LSTM(2 => 4; return_state = true)
    y, last_state = lstm(x)
    @test size(y) == (4, 3, 1)
    @test size(last_state[1]) == (4, 1)
    @test size(last_state[2]) == (4, 1)
    """,
)
def case_lstm():
    lstm = LSTM(2, 4)
    x = fluxjax.rand32(2, 3, 1)
    z = jnp.zeros(4, jnp.float32)
    h = lstm(x, (z, z))
    assert h.shape == (4, 3, 1)
    h0, c0 = fluxjax.initialstates(lstm)
    close(h0, np.zeros(4))
    close(c0, np.zeros(4))
    close(lstm(x), h)
    y, last = LSTM(2, 4, return_state=True)(x)
    assert y.shape == (4, 3, 1)
    assert last[0].shape == (4, 1) and last[1].shape == (4, 1)


@case(
    names=("GRUCell", "GRU", "initialstates"),
    source=REC,
    julia="""
    r = GRUCell(3 => 5)
    @test length(Flux.trainables(r)) == 3
    x = [rand(Float32, 3, 4) for _ in 1:6]
    out, state = r(x[1])
    @test out === state
    @test Flux.initialstates(r) ≈ zeros(Float32, 5)
    @test r(x[1])[1] ≈ r(x[1], zeros(Float32, 5))[1]
    r = GRUCell(3 => 5, bias=false)
    @test length(Flux.trainables(r)) == 2
    gru = GRU(2 => 4)
    x = rand(Float32, 2, 3, 1)
    @test size(gru(x)) == (4, 3, 1)
    @test Flux.initialstates(gru) ≈ zeros(Float32, 4)
    @test gru(x) ≈ gru(x, zeros(Float32, 4))
    """,
)
def case_gru():
    r = GRUCell(3, 5)
    assert len(fluxjax.params(r)) == 3
    x = fluxjax.rand32(3, 4)
    out, state = r(x)
    assert out is state
    close(fluxjax.initialstates(r), np.zeros(5))
    close(r(x)[0], r(x, jnp.zeros(5))[0])
    assert len(fluxjax.params(GRUCell(3, 5, bias=False))) == 2
    gru = GRU(2, 4)
    x = fluxjax.rand32(2, 3, 1)
    assert gru(x).shape == (4, 3, 1)
    close(fluxjax.initialstates(gru), np.zeros(4))
    close(gru(x), gru(x, jnp.zeros(4)))


@case(
    names=("GRUv3Cell", "GRUv3", "initialstates"),
    source=REC,
    julia="""
    r = GRUv3Cell(3 => 5)
    @test length(Flux.trainables(r)) == 4
    x = rand(Float32, 3)
    out, state = r(x)
    @test out === state
    @test Flux.initialstates(r) ≈ zeros(Float32, 5)
    @test r(x)[1] ≈ r(x, zeros(Float32, 5))[1]
    gru = GRUv3(2 => 4)
    x = rand(Float32, 2, 3, 1)
    @test Flux.initialstates(gru) ≈ zeros(Float32, 4)
    @test gru(x) ≈ gru(x, zeros(Float32, 4))
    gru = GRUv3(2 => 4; return_state = true)
    y, last_state = gru(x)
    @test size(y) == (4, 3, 1)
    @test size(last_state) == (4, 1)
    """,
)
def case_gruv3():
    r = GRUv3Cell(3, 5)
    assert len(fluxjax.params(r)) == 4
    x = fluxjax.rand32(3)
    out, state = r(x)
    assert out is state
    close(fluxjax.initialstates(r), np.zeros(5))
    close(r(x)[0], r(x, jnp.zeros(5))[0])
    gru = GRUv3(2, 4)
    x = fluxjax.rand32(2, 3, 1)
    close(fluxjax.initialstates(gru), np.zeros(4))
    close(gru(x), gru(x, jnp.zeros(4)))
    y, last = GRUv3(2, 4, return_state=True)(x)
    assert y.shape == (4, 3, 1) and last.shape == (4, 1)


@case(
    names=("Recurrence", "RNN", "LSTM", "GRU", "GRUv3"),
    source=REC,
    julia="""
    x = rand(Float32, 2, 3, 4)
    for rnn in [RNN(2 => 3), LSTM(2 => 3), GRU(2 => 3), GRUv3(2 => 3)]
        cell = rnn.cell
        rec = Recurrence(cell)
        @test rec(x) ≈ rnn(x)
    end
    for rnn in [RNN(2 => 3; return_state = true), LSTM(2 => 3; return_state = true), ...]
        rec = Recurrence(rnn.cell; return_state = true)
        @test rec(x)[1] ≈ rnn(x)[1]
        @test rec(x)[2][1] ≈ rnn(x)[2][1]   # LSTM: (h, c)
    """,
)
def case_recurrence():
    x = fluxjax.rand32(2, 3, 4)
    for rnn in (RNN(2, 3), LSTM(2, 3), GRU(2, 3), GRUv3(2, 3)):
        close(Recurrence(rnn.cell)(x), rnn(x))
    rnn = LSTM(2, 3, return_state=True)
    got, want = Recurrence(rnn.cell, return_state=True)(x), rnn(x)
    close(got[0], want[0])
    close(got[1][0], want[1][0])
    close(got[1][1], want[1][1])


@case(
    names=("RNNCell", "LSTMCell", "GRUCell", "RNN"),
    source="Flux.jl src/layers/recurrent.jl (docstrings)",
    julia="""
    julia> RNN(4 => 6)          # 66 parameters
    julia> LSTMCell(3 => 5)     # 180 parameters
    julia> GRUCell(3 => 5)      # 135 parameters
    """,
)
def case_recurrent_param_counts():
    assert nparams(RNN(4, 6)) == 66
    assert nparams(LSTMCell(3, 5)) == 180
    assert nparams(GRUCell(3, 5)) == 135


@case(
    names=("MultiHeadAttention", "make_causal_mask"),
    source="Flux.jl test/layers/attention.jl",
    julia="""
    dim = 4; nheads = 2; len = 3; batch_size = 5
    mha = MultiHeadAttention(dim; nheads)
    q = rand(Float32, (dim, len, batch_size)); k = ...; v = ...
    y, α = mha(q, k, v)
    @test size(y) == (dim, len, batch_size)
    @test size(α) == (len, len, nheads, batch_size)
    y1, α1 = mha(q); y2, α2 = mha(q, q, q)
    @test y1 ≈ y2
    y1, α1 = mha(q, k); y2, α2 = mha(q, k, k)
    @test y1 ≈ y2
    dims = 4 => 10 => 5
    mha2 = MultiHeadAttention(dims; nheads)
    y2, _ = mha2(q, k, v)
    @test size(y2) == (dims.second.second, len, batch_size)
    mask = NNlib.make_causal_mask(q)
    y, α = mha(q; mask)
    @test all(α[2, 1, :, :] .== 0)
    @test α[:, :, 1, 1] ≈ triu(α[:, :, 1, 1])
    """,
)
def case_attention():
    import jax

    from fluxjax.nnlib.attention import make_causal_mask

    mha = MultiHeadAttention(4, nheads=2)
    q, k, v = (fluxjax.rand32(4, 3, 5) for _ in range(3))

    @jax.jit  # one compilation for the block (mha has no state: Dropout(0.0) is the identity)
    def block(q, k, v):
        return mha(q, k, v), mha(q), mha(q, q, q), mha(q, k), mha(q, k, k), mha(q, mask=make_causal_mask(q))

    (y, a), self1, self3, kv1, kv2, (_, am) = block(q, k, v)
    assert y.shape == (4, 3, 5) and a.shape == (3, 3, 2, 5)
    close(self1[0], self3[0])
    close(kv1[0], kv2[0])
    y2, _ = MultiHeadAttention((4, 10, 5), nheads=2)(q, k, v)
    assert y2.shape == (5, 3, 5)
    a = am
    assert np.all(np.asarray(a)[1, 0] == 0)
    close(a[:, :, 0, 0], np.triu(np.asarray(a[:, :, 0, 0])))


@case(
    names=("Upsample",),
    source="Flux.jl test/layers/upsample.jl",
    julia="""
    m = Upsample(:bilinear, scale=(2, 3))
    x = rand(Float32, 3, 4, 2, 3)
    @test size(m(x)) == (6, 12, 2, 3)
    m = Upsample(:bilinear, scale=3)
    @test size(m(x)) == (9, 12, 2, 3)
    m = Upsample(:bilinear, size=(4, 6))
    @test size(m(x)) == (4, 6, 2, 3)
    m = Upsample(:nearest, scale=(2, 3))
    @test size(m(x)) == (6, 12, 2, 3)
    m = Upsample(:nearest, scale=2)
    y = m(x)
    @test size(y) == (6, 8, 2, 3)
    m = Upsample(2)
    y2 = m(x)
    @test y2 ≈ y
    m = Upsample(:nearest, size=(6,8))
    @test size(m(x)) == (6, 8, 2, 3)
    x = rand(Float32, 3, 2, 3)
    m = Upsample(:nearest, scale=(2,))
    @test size(m(x)) == (6, 2, 3)
    """,
)
def case_upsample():
    import jax

    shape = lambda layer, x: jax.eval_shape(layer, x).shape  # sizes only, as the Julia test: traced, not run
    x = fluxjax.rand32(3, 4, 2, 3)
    assert shape(Upsample("bilinear", scale=(2, 3)), x) == (6, 12, 2, 3)
    assert shape(Upsample("bilinear", scale=3), x) == (9, 12, 2, 3)
    assert shape(Upsample("bilinear", size=(4, 6)), x) == (4, 6, 2, 3)
    assert shape(Upsample("nearest", scale=(2, 3)), x) == (6, 12, 2, 3)
    y = Upsample("nearest", scale=2)(x)
    assert y.shape == (6, 8, 2, 3)
    close(Upsample(2)(x), y)
    assert shape(Upsample("nearest", size=(6, 8)), x) == (6, 8, 2, 3)
    assert shape(Upsample("nearest", scale=(2,)), fluxjax.rand32(3, 2, 3)) == (6, 2, 3)


@case(
    names=("PixelShuffle",),
    source="Flux.jl test/layers/upsample.jl",
    julia="""
    m = PixelShuffle(2)
    x = rand(Float32, 3, 18, 3)
    @test size(m(x)) == (6, 9, 3)
    m = PixelShuffle(3)
    x = rand(Float32, 3, 4, 18, 3)
    @test size(m(x)) == (9, 12, 2, 3)
    """,
)
def case_pixelshuffle():
    assert PixelShuffle(2)(fluxjax.rand32(3, 18, 3)).shape == (6, 9, 3)
    assert PixelShuffle(3)(fluxjax.rand32(3, 4, 18, 3)).shape == (9, 12, 2, 3)
