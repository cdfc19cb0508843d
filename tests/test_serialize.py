"""state / loadmodel_ (ported from Flux's test/loading.jl), orbax checkpoints, .npz / .safetensors export."""

import json
import os
import struct
import zipfile

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import fluxjax
from fluxjax import (
    Adam,
    BatchNorm,
    Chain,
    CheckpointError,
    Conv,
    Dense,
    DimensionMismatch,
    Dropout,
    MaxPool,
    Parallel,
    StructureMismatch,
    loadmodel_,
    ones32,
    relu,
    softmax,
    zeros32,
)
from fluxjax.serialize import flat_state, read_safetensors, write_safetensors

state = fluxjax.state  # Flux.state


def host_leaves(tree):
    """Every array in `tree` as host numpy arrays (typed keys as key data), for bit-exact comparisons."""
    out = []
    for a in jax.tree_util.tree_leaves(tree):
        if isinstance(a, jax.Array) and jnp.issubdtype(a.dtype, jax.dtypes.prng_key):
            a = jax.random.key_data(a)
        if isinstance(a, (jax.Array, np.ndarray)):
            out.append(np.asarray(a))
    return out


def assert_bit_equal(a, b):
    la, lb = host_leaves(a), host_leaves(b)
    assert len(la) == len(lb)
    for x, y in zip(la, lb):
        assert x.dtype == y.dtype and x.shape == y.shape
        assert x.tobytes() == y.tobytes()


def ls(*dims):
    """Flux's test helper `ls`: 1, 2, 3, ... filled column-major (Julia's reshape), Float32."""
    return jnp.asarray(np.arange(1, np.prod(dims) + 1, dtype=np.float32).reshape(dims, order="F"))


# ------------------------------------------------------------------------------------------------
# state (Flux's @testset "state")


def test_state_structure_and_identity():
    m1 = Chain(Dense(10, 5), Parallel(jnp.add, Dense(ones32(2, 5), False), Dense(5, 2)))
    m2 = Chain(Dense(10, 5), Parallel(jnp.add, Dense(zeros32(2, 5), ones32(2)), Dense(5, 2)))
    s = state(m1)
    assert isinstance(s, dict) and list(s) == ["layers"]
    assert isinstance(s["layers"], tuple) and len(s["layers"]) == 2
    assert s["layers"][0]["weight"] is m1[0].weight
    assert s["layers"][0]["sigma"] == ()
    assert s["layers"][1]["layers"][0]["weight"] is m1[1].layers[0].weight
    assert s["layers"][1]["connection"] == ()
    assert s["layers"][1]["layers"][0]["bias"] is False

    loadmodel_(m2, s)
    assert np.array_equal(m2[0].weight, m1[0].weight)
    # Flux: all(m2[2].layers[1].bias .== m1[2].layers[1].bias): a `false` source zeroes the array
    assert np.array_equal(m2[1].layers[0].bias, np.zeros(2, np.float32))


def test_state_replaces_non_state_leaves_with_empty_tuple():
    assert state((1, jnp.tanh)) == (1, ())
    assert state({"a": 1, "b": jnp.tanh}) == {"a": 1, "b": ()}
    X, Y = ones32(3, 2), zeros32(2, 2)
    tree = {"a": 1, "b": {"c": X, "d": (Y, 1, (jnp.tanh,)), "e": np.sin}}
    s = state(tree)
    assert s["a"] == 1 and s["b"]["c"] is X and s["b"]["d"][0] is Y
    assert s["b"]["d"][1:] == (1, ((),)) and s["b"]["e"] == ()


def test_state_tracks_active_and_batchnorm_fields():
    m3 = Chain(Dense(10, 5), Dropout(0.2), Dense(5, 2), BatchNorm(2))
    fluxjax.trainmode_(m3)
    s = state(m3)
    assert s["layers"][1]["active"] is True
    assert s["layers"][1]["p"] == 0.2
    assert s["layers"][3]["sigma"] == ()
    for k in ("beta", "gamma", "mu", "sigma2", "eps", "momentum", "affine", "track_stats", "active", "chs"):
        assert s["layers"][3][k] is getattr(m3[3], k)
    # fluxjax's Dropout keeps its RNG key as an array, so unlike Flux (rng = ()) it is part of the state
    assert s["layers"][1]["rng"] is m3[1].rng and m3[1].rng.dtype == jnp.uint32


def test_state_preserves_plain_types():
    m = {"num": 1, "cnum": complex(1.2, 2), "str": "hello", "arr": np.array([1, 2, 3]), "bool": True,
         "dict": {"a": 1, "b": 2}, "tup": (1, 2, 3), "sym": "a", "nth": None}
    s = state(m)
    assert s.keys() == m.keys()
    for k in m:
        if k == "arr":
            assert s[k] is m[k]
        else:
            assert s[k] == m[k] and type(s[k]) is type(m[k])


def test_state_holds_no_functions_and_covers_optimiser_state():
    m = Chain(Conv((3, 3), (1, 2), relu), BatchNorm(2, relu), MaxPool((2, 2)), fluxjax.flatten, Dense(2, 3), softmax)
    s = state(m)
    assert not any(callable(x) for x in jax.tree_util.tree_leaves(s))
    assert s["layers"][2] == {"k": (2, 2), "pad": (0, 0, 0, 0), "stride": (2, 2)}
    assert s["layers"][3] == () and s["layers"][5] == ()
    o = fluxjax.setup(Adam(), m)
    so = state(o)
    leaf = so["layers"][4]["weight"]
    assert leaf["rule"] == () and leaf["frozen"] is False
    assert set(leaf["state"]) == {"mt", "vt", "beta_t", "hyper"}
    assert leaf["state"]["mt"].shape == (3, 2)
    assert not any(callable(x) for x in jax.tree_util.tree_leaves(so))


# ------------------------------------------------------------------------------------------------
# loadmodel_ (Flux's @testset "loadmodel!(dst, src)")


def test_loadmodel_copies_and_errors():
    m1 = Chain(Dense(10, 5), Dense(5, 2, relu))
    m2 = Chain(Dense(10, 5), Dense(5, 2))
    m3 = Chain(Conv((3, 3), (3, 16)), Dense(5, 2))
    m4 = Chain(Dense(10, 6), Dense(6, 2))
    m5 = Chain(Dense(10, 5), Parallel(jnp.add, Dense(ones32(2, 5), False), Dense(5, 2)))
    m6 = Chain(Dense(10, 5), Parallel(jnp.add, Dense(5, 2), Dense(5, 2)))

    assert loadmodel_(m1, m2) is m1
    assert np.array_equal(m1[0].weight, m2[0].weight) and np.array_equal(m1[0].bias, m2[0].bias)
    assert m1[1].sigma is relu  # non-array leaves are untouched

    loadmodel_(m5, m6)
    assert np.array_equal(m5[0].weight, m6[0].weight)
    assert np.array_equal(m5[1].layers[0].weight, m6[1].layers[0].weight)
    assert m5[1].layers[0].bias is False  # false bias is not overwritten

    with pytest.raises(StructureMismatch):
        loadmodel_(m1, m3)
    with pytest.raises(StructureMismatch):
        loadmodel_(m1, m5)
    with pytest.raises(DimensionMismatch) as e:
        loadmodel_(m1, m4)
    assert "layers[0].weight" in str(e.value) and "(6, 10)" in str(e.value) and "(5, 10)" in str(e.value)
    assert isinstance(e.value, ValueError)


def test_loadmodel_batchnorm_dropout_and_functions():
    m1 = Chain(Conv((3, 3), (3, 16)), BatchNorm(16), fluxjax.flatten, Dropout(0.2))
    m2 = Chain(Conv((3, 3), (3, 16)), BatchNorm(16), lambda x: x.reshape(-1, x.shape[-1]), Dropout(0.1))
    m2[1].mu = jax.random.uniform(jax.random.PRNGKey(1), (16,))
    loadmodel_(m1, m2)
    assert np.array_equal(m1[1].mu, m2[1].mu)  # non-trainable arrays are copied as well
    assert m1[2] is fluxjax.flatten  # functions are not copied
    assert m1[3].p == 0.2  # the dropout rate is not copied
    assert np.array_equal(m1[3].rng, m2[3].rng)  # fluxjax's Dropout key is an array, so it is copied


def _legolas(p, k, as_list):
    layers = [Dropout(p), Conv((3, 3), (1, 32), relu), BatchNorm(32, relu), MaxPool((k, k)), Dropout(p),
              Conv((3, 3), (32, 16), relu), Dropout(p), MaxPool((k, k)), Dropout(p), Conv((3, 3), (16, 10), relu),
              Dropout(p), lambda x: x.reshape(-1, x.shape[3]), Dropout(p), Dense(90, 10), softmax]
    return Chain(layers) if as_list else Chain(*layers)


def test_loadmodel_legolas_chain_vs_vector_chain():
    chain1 = _legolas(0.2, 2, False)
    chain2 = _legolas(0.1, 3, True)
    chain2[2].mu = jnp.full((32,), 5.0, jnp.float32)
    chain2[2].sigma2 = jnp.full((32,), 2.0, jnp.float32)
    fluxjax.testmode_(chain2)
    loadmodel_(chain1, chain2)
    for dst, src in zip(chain1, chain2):
        if isinstance(dst, Dropout):
            assert dst.p == 0.2
        elif isinstance(dst, (Conv, Dense)):
            assert np.array_equal(dst.weight, src.weight) and np.array_equal(dst.bias, src.bias)
        elif isinstance(dst, MaxPool):
            assert dst.k == (2, 2)
        elif isinstance(dst, BatchNorm):
            assert np.array_equal(dst.mu, src.mu) and np.array_equal(dst.sigma2, src.sigma2)
            assert dst.active is None
    # copy only a subset of the model
    chain1[-2].weight = jnp.ones_like(chain1[-2].weight)
    chain1[2].mu = jnp.full((32,), 3.0, jnp.float32)
    chain1[1].bias = jnp.full((32,), 5.0, jnp.float32)
    loadmodel_(chain2[-2], chain1[-2])
    loadmodel_(chain2[2], chain1[2])
    assert np.array_equal(chain2[-2].weight, chain1[-2].weight)
    assert np.array_equal(chain2[2].mu, chain1[2].mu)
    assert not np.array_equal(chain2[1].bias, chain1[1].bias)


def test_loadmodel_shared_weights():
    shared_dst, shared_src = Dense(10, 10), Dense(10, 10)
    m1 = Chain(shared_dst, Dense(shared_dst.weight))
    m2 = Chain(shared_src, Dense(shared_src.weight))
    loadmodel_(m1, m2)
    assert m1[0].weight is m1[1].weight  # ties survive
    assert np.array_equal(m1[0].weight, m2[1].weight)
    before = [np.asarray(a) for a in jax.tree_util.tree_leaves(m1)]
    with pytest.raises(StructureMismatch, match="tied"):
        loadmodel_(m1, Chain(Dense(10, 10), Dense(10, 10)))
    assert all(np.array_equal(a, b) for a, b in zip(jax.tree_util.tree_leaves(m1), before))
    # loading into tied weights from an absent parameter is fine when the other source is zero
    b = zeros32(5)
    m1 = Chain(Dense(10, 5, bias=b), Dense(5, 5, bias=b))
    m2 = Chain(Dense(10, 5, bias=zeros32(5)), Dense(5, 5, bias=False))
    loadmodel_(m1, m2)
    assert m1[0].bias is m1[1].bias and not np.any(m1[0].bias)
    m2[0].bias = jnp.ones(5, jnp.float32)
    with pytest.raises(StructureMismatch, match="boolean"):
        loadmodel_(m1, m2)


def test_loadmodel_filter():
    m1 = Chain(Dense(10, 5), Dense(5, 2, relu))
    m2 = Chain(Dense(10, 5), Dropout(0.2), Dense(5, 2))
    m3 = Chain(Dense(10, 5), Dense(5, 2, relu))
    keep = lambda x: not isinstance(x, Dropout)
    loadmodel_(m1, m2, filter=keep)
    assert np.array_equal(m1[0].weight, m2[0].weight) and np.array_equal(m1[1].weight, m2[2].weight)
    loadmodel_(m2, m3, filter=keep)
    assert np.array_equal(m3[0].weight, m2[0].weight) and np.array_equal(m3[1].weight, m2[2].weight)
    with pytest.raises(StructureMismatch):
        loadmodel_(m1, m2)


def test_loadmodel_absent_bias():
    m0 = Chain(Dense(2, 3, bias=False, init=ones32), Dense(3, 1))
    m1 = Chain(Dense(2, 3, bias=fluxjax.randn32(3)), Dense(3, 1))
    m2 = Chain(Dense(jnp.array([[1, 2], [3, 4], [5, 6]], jnp.float32), jnp.array([7, 8, 9], jnp.float32)), Dense(3, 1))
    loadmodel_(m1, m2)
    assert m1[0].bias.tolist() == [7, 8, 9]
    assert float(jnp.sum(m1[0].weight)) == 21
    m1 = loadmodel_(m1, m0)
    assert not np.any(m1[0].bias) and m1[0].bias.shape == (3,)
    assert float(jnp.sum(m1[0].weight)) == 6
    m0 = loadmodel_(m0, m2)
    assert m0[0].bias is False
    assert float(jnp.sum(m0[0].weight)) == 21
    with pytest.raises(StructureMismatch, match="boolean parameter == true"):
        loadmodel_(Chain(Dense(2, 3)), {"layers": ({"weight": ones32(3, 2), "bias": True, "sigma": ()},)})


def test_loadmodel_validates_everything_before_writing(untouched):
    dst = Chain(Dense(3, 4), BatchNorm(4), Dense(4, 2))
    src = Chain(Dense(3, 4), BatchNorm(4), Dense(5, 2))
    check = untouched(dst)
    ids = [id(a) for a in jax.tree_util.tree_leaves(dst)]
    with pytest.raises(DimensionMismatch, match=r"layers\[2\]\.weight.*\(2, 5\).*\(2, 4\)"):
        loadmodel_(dst, src)
    check()
    assert ids == [id(a) for a in jax.tree_util.tree_leaves(dst)]
    s = state(src)
    del s["layers"][1]["mu"]
    with pytest.raises(StructureMismatch, match=r"layers\[1\].*missing in source: \['mu'\]"):
        loadmodel_(Chain(Dense(3, 4), BatchNorm(4), Dense(5, 2)), s)
    with pytest.raises(StructureMismatch, match="length 2 into a tuple of length 3"):
        loadmodel_(dst, {"layers": (state(dst)["layers"][0], state(dst)["layers"][1])})
    with pytest.raises(StructureMismatch, match=r"layers\[0\]\.weight.*into an array destination"):
        loadmodel_(Chain(Dense(1, 1)), {"layers": ({"weight": 0.5, "bias": zeros32(1), "sigma": ()},)})
    with pytest.raises(StructureMismatch, match=r"layers\[0\]\.sigma.*array"):
        loadmodel_(Chain(Dense(1, 1)), {"layers": ({"weight": ones32(1, 1), "bias": zeros32(1), "sigma": ones32(1)},)})
    check()


def test_loadmodel_converts_dtype_and_works_inside_jit():
    dst = Chain(Dense(2, 3))
    w = np.arange(6, dtype=np.float64).reshape(3, 2)
    loadmodel_(dst, {"layers": ({"weight": w, "bias": np.ones(3), "sigma": ()},)})
    assert dst[0].weight.dtype == jnp.float32 and dst[0].weight.tolist() == w.tolist()

    @fluxjax.jit
    def f(m, s):
        loadmodel_(m, s)
        return m(jnp.ones(2))

    src = Chain(Dense(2, 3))
    out = f(dst, state(src))
    assert np.array_equal(dst[0].weight, src[0].weight)
    assert np.allclose(out, src(jnp.ones(2)))
    assert not isinstance(dst[0].weight, jax.core.Tracer)


def test_loadmodel_typed_keys_and_dicts():
    @fluxjax.layer(state=("key", "count"))
    class Noisy:
        def __init__(self, seed):
            self.w = jnp.full((2,), float(seed))
            self.key = jax.random.key(seed)
            self.count = jnp.array(seed, jnp.int32)

    a, b = Noisy(1), Noisy(7)
    loadmodel_(a, b)
    assert jnp.issubdtype(a.key.dtype, jax.dtypes.prng_key)
    assert np.array_equal(jax.random.key_data(a.key), jax.random.key_data(b.key)) and int(a.count) == 7
    c = Noisy(3)
    loadmodel_(c, {"w": np.zeros(2, np.float32), "key": jax.random.key_data(jax.random.key(9)), "count": np.int32(9)})
    assert np.array_equal(jax.random.key_data(c.key), jax.random.key_data(jax.random.key(9))) and int(c.count) == 9
    with pytest.raises(DimensionMismatch, match="key"):
        loadmodel_(c, {"w": np.zeros(2, np.float32), "key": np.zeros(3, np.uint32), "count": np.int32(9)})
    named = Chain(enc=Dense(2, 3), dec=Dense(3, 1))
    other = Chain(enc=Dense(2, 3), dec=Dense(3, 1))
    loadmodel_(named, other)
    assert np.array_equal(named.enc.weight, other.enc.weight)
    with pytest.raises(TypeError, match="destination is an array"):
        loadmodel_(named.enc.weight, other.enc.weight)


def test_loadmodel_numbers_as_0d_arrays():
    # `tree_map(np.asarray, state(m))` turns the int fields (Conv's stride, pad, ...) and bools into 0-d
    # arrays. Those are numbers to Flux: `loadleaf!(dst, src) = dst` keeps the destination's value.
    fluxjax.seed_(0)
    m = Chain(Conv((3, 3), (1, 2), stride=2, pad=1), BatchNorm(2), fluxjax.flatten, Dense(8, 3))
    s = jax.tree_util.tree_map(np.asarray, state(m))
    assert isinstance(s["layers"][0]["stride"][0], np.ndarray) and s["layers"][0]["stride"][0].shape == ()
    dst = Chain(Conv((3, 3), (1, 2), stride=2, pad=1), BatchNorm(2), fluxjax.flatten, Dense(8, 3))
    loadmodel_(dst, s)
    assert all(np.array_equal(a, b) for a, b in zip(host_leaves(dst), host_leaves(m)))
    assert dst[0].stride == m[0].stride and all(type(v) is int for v in dst[0].stride)
    x = jax.random.normal(jax.random.PRNGKey(1), (4, 4, 1, 2))
    assert np.allclose(dst(x), m(x))
    # a different number is ignored, as for a plain number source (Flux keeps dst's non-array leaves)
    other = Chain(Conv((3, 3), (1, 2), stride=1, pad=1), BatchNorm(2), fluxjax.flatten, Dense(8, 3))
    s1 = state(m)
    s1["layers"][0]["stride"] = (np.asarray(1), np.asarray(1))
    loadmodel_(other, s1)
    assert other[0].stride == (1, 1) and np.array_equal(other[0].weight, m[0].weight)
    s1["layers"][0]["stride"] = (1, 1)
    loadmodel_(dst, s1)
    assert dst[0].stride == (2, 2)
    # a 1-element array is a number too; a longer array into a number is still an error (Flux:
    # "Tried to copy an array to 2; this is not allowed")
    s1["layers"][0]["stride"] = (np.array([2]), np.array([2]))
    loadmodel_(dst, s1)
    assert dst[0].stride == (2, 2)
    s1["layers"][0]["stride"] = (np.array([2, 2]), 2)
    with pytest.raises(StructureMismatch, match=r"layers\[0\]\.stride\[0\].*array of size \(2,\)"):
        loadmodel_(dst, s1)
    # booleans: np.asarray(True) into True is fine; an array parameter into `true` is Flux's error
    loadmodel_({"flag": True, "w": np.zeros(2)}, {"flag": np.asarray(True), "w": np.ones(2)})
    with pytest.raises(StructureMismatch, match="boolean parameter == true"):
        loadmodel_({"flag": True, "w": np.zeros(2)}, {"flag": np.ones(1), "w": np.ones(2)})


# ------------------------------------------------------------------------------------------------
# save / load


RULE = Adam(0.01)  # one rule object: fluxjax.jit keys its cache on it, so both models share one compiled step


def _trained(seed):
    fluxjax.seed_(seed)
    m = Chain(Dense(3, 2, relu), BatchNorm(2), fluxjax.flatten, Dropout(0.3), Dense(2, 3))
    opt = fluxjax.setup(RULE, m)
    x = jax.random.normal(jax.random.PRNGKey(seed), (3, 4))
    y = jax.random.normal(jax.random.PRNGKey(seed + 1), (3, 4))
    return m, opt, x, y


@fluxjax.jit
def _step(m, opt, x, y):
    loss, (g,) = fluxjax.withgradient(lambda mm: jnp.mean((mm(x) - y) ** 2), m)
    fluxjax.update_(opt, m, g)
    return loss


def test_save_load_round_trip_and_continue_training(tmp_path):
    m, opt, x, y = _trained(0)
    for _ in range(3):
        _step(m, opt, x, y)
    assert not np.array_equal(m[1].mu, np.zeros(2))  # running stats moved
    assert fluxjax.save(tmp_path / "ck", m, opt, step=3) == 3

    m2, opt2, _, _ = _trained(5)  # different initial weights and keys
    res = fluxjax.load(tmp_path / "ck", m2, opt2)
    assert res.model is m2 and res.opt_state is opt2 and res.step == 3
    assert_bit_equal(state(m2), state(m))
    assert_bit_equal(state(opt2), state(opt))
    losses = [float(_step(m, opt, x, y)) for _ in range(3)]
    losses2 = [float(_step(m2, opt2, x, y)) for _ in range(3)]
    assert losses == losses2
    assert_bit_equal(state(m2), state(m))


def test_load_raw_and_numbering(tmp_path):
    m, opt, _, _ = _trained(1)
    path = tmp_path / "ck"
    assert fluxjax.save(path, m) == 0
    m[4].bias = jnp.ones(3, jnp.float32)
    assert fluxjax.save(path, m, opt) == 1
    raw, o, step = fluxjax.load(path)
    assert step == 1 and o is not None
    assert raw["layers"][4]["bias"].tolist() == [1, 1, 1] and isinstance(raw["layers"][4]["bias"], jax.Array)
    assert raw["layers"][3]["p"] == 0.3 and raw["layers"][0]["sigma"] == () and raw["layers"][2] == ()
    assert raw["layers"][3]["rng"].dtype == jnp.uint32
    raw0, o0, step0 = fluxjax.load(path, step=0)
    assert step0 == 0 and o0 is None and not np.any(raw0["layers"][4]["bias"])
    with pytest.raises(ValueError, match="already exists"):
        fluxjax.save(path, m, step=1)
    assert fluxjax.save(path, m, keep=2) == 2
    assert sorted(n for n in os.listdir(path) if not n.startswith(".")) == ["1", "2"]
    with pytest.raises(CheckpointError, match="has no step 0"):
        fluxjax.load(path, step=0)


def test_save_load_typed_keys_bf16_and_ties(tmp_path):
    @fluxjax.layer(state=("key",))
    class Keyed:
        def __init__(self, seed):
            self.key = jax.random.key(seed)
            self.w = jnp.arange(4, dtype=jnp.bfloat16) * seed

        def __call__(self, x):
            return x

    shared = Dense(2, 2)
    m = Chain(Keyed(3), shared, Dense(shared.weight, False))
    fluxjax.save(tmp_path / "ck", m)
    d = Dense(2, 2)
    m2 = Chain(Keyed(0), d, Dense(d.weight, False))
    fluxjax.load(tmp_path / "ck", m2)
    assert jnp.issubdtype(m2[0].key.dtype, jax.dtypes.prng_key) and m2[0].w.dtype == jnp.bfloat16
    assert_bit_equal(state(m2), state(m))
    assert m2[1].weight is m2[2].weight
    raw = fluxjax.load(tmp_path / "ck").model
    assert raw["layers"][1]["weight"] is raw["layers"][2]["weight"]  # saved once, one object again
    assert jnp.issubdtype(raw["layers"][0]["key"].dtype, jax.dtypes.prng_key)


def test_load_errors(tmp_path, untouched):
    with pytest.raises(FileNotFoundError, match="nope"):
        fluxjax.load(tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    with pytest.raises(CheckpointError, match="no finished"):
        fluxjax.load(tmp_path / "empty")
    (tmp_path / "afile").write_text("x")
    with pytest.raises(CheckpointError, match="not a fluxjax checkpoint"):
        fluxjax.load(tmp_path / "afile")
    (tmp_path / "foreign" / "0").mkdir(parents=True)
    with pytest.raises(CheckpointError, match="not a fluxjax checkpoint"):
        fluxjax.load(tmp_path / "foreign")

    m = Chain(Dense(3, 4), Dense(4, 2))
    fluxjax.save(tmp_path / "ck", m, fluxjax.setup(Adam(), m))
    other = Chain(Dense(3, 4), Dense(5, 2))
    check = untouched(other)
    with pytest.raises(DimensionMismatch, match=r"model: layers\[1\]\.weight.*\(2, 4\).*\(2, 5\)"):
        fluxjax.load(tmp_path / "ck", other)
    check()
    # the model fits but the optimiser state does not: nothing at all is loaded
    m3 = Chain(Dense(3, 4), Dense(4, 2))
    opt3 = fluxjax.setup(fluxjax.Descent(), m3)
    check3 = untouched((m3, opt3))
    with pytest.raises(StructureMismatch, match="opt_state"):
        fluxjax.load(tmp_path / "ck", m3, opt3)
    check3()
    fluxjax.save(tmp_path / "ck2", m)
    with pytest.raises(StructureMismatch, match="no optimiser state"):
        fluxjax.load(tmp_path / "ck2", m3, fluxjax.setup(Adam(), m3))


# ------------------------------------------------------------------------------------------------
# .npz / .safetensors


def _julia_view(raw: bytes, dtype, shape):
    """What Julia's readers do with row-major bytes: read them column-major with the reversed shape,
    then permutedims(x, ndims:-1:1). Returns the resulting Julia array as numpy (same indices)."""
    col = np.frombuffer(raw, dtype=dtype).reshape(tuple(reversed(shape)), order="F")
    return np.transpose(col, tuple(reversed(range(len(shape)))))


def test_safetensors_layout_keys_and_orientation(tmp_path):
    W = ls(3, 2)  # Flux: Dense(ls(3, 2), b): 2 => 3, W[i, j] column-major 1..6
    m = Chain(Dense(W, jnp.array([7.0, 8.0, 9.0], jnp.float32)), BatchNorm(3), Dropout(0.5))
    p = tmp_path / "m.safetensors"
    fluxjax.export_safetensors(p, m, {"note": "hi"})
    raw = p.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    assert n % 8 == 0
    header = json.loads(raw[8:8 + n])
    assert header["__metadata__"]["note"] == "hi" and header["__metadata__"]["producer"] == "fluxjax"
    keys = [k for k in header if k != "__metadata__"]
    # the safetensors package lays tensors out by alignment, then name: the header lists them in that order
    assert keys == ["layers.0.bias", "layers.0.weight", "layers.1.beta", "layers.1.gamma", "layers.1.mu",
                    "layers.1.sigma2", "layers.2.rng"]
    e = header["layers.0.weight"]
    assert e == {"dtype": "F32", "shape": [3, 2], "data_offsets": [12, 36]}
    assert header["layers.2.rng"]["dtype"] == "U32" and header["layers.2.rng"]["shape"] == [2]
    data = raw[8 + n:]
    w = data[12:36]
    # row-major bytes: W[0, 0], W[0, 1], W[1, 0], ... = 1, 4, 2, 5, 3, 6
    assert np.frombuffer(w, np.float32).tolist() == [1, 4, 2, 5, 3, 6]
    assert np.frombuffer(data[0:12], np.float32).tolist() == [7, 8, 9]
    # and a Julia reader (SafeTensors.jl) sees the (out, in) = (3, 2) matrix Flux's m[1].weight holds
    assert np.array_equal(_julia_view(w, np.float32, (3, 2)), np.asarray(W))
    assert read_safetensors(p)["layers.0.weight"].tolist() == np.asarray(W).tolist()

    fresh = Chain(Dense(2, 3), BatchNorm(3), Dropout(0.1))
    fluxjax.import_safetensors_(fresh, p)
    assert_bit_equal(state(fresh), state(m))
    assert fresh[2].p == 0.1


def test_safetensors_reads_hand_made_file_and_bf16(tmp_path):
    # a file written by hand following the format spec (what any other writer produces)
    header = {"b": {"dtype": "I64", "shape": [2], "data_offsets": [8, 24]},
              "a": {"dtype": "F16", "shape": [2, 2], "data_offsets": [0, 8]}}
    text = json.dumps(header).encode()
    body = np.array([1, 2, 3, 4], np.float16).tobytes() + np.array([-1, 5], np.int64).tobytes()
    (tmp_path / "h.safetensors").write_bytes(struct.pack("<Q", len(text)) + text + body)
    d = read_safetensors(tmp_path / "h.safetensors")
    assert d["a"].dtype == np.float16 and d["a"].tolist() == [[1, 2], [3, 4]]
    assert d["b"].dtype == np.int64 and d["b"].tolist() == [-1, 5]

    m = fluxjax.f32(Chain(Dense(2, 2)))
    m[0].weight = m[0].weight.astype(jnp.bfloat16)
    fluxjax.export_safetensors(tmp_path / "b.safetensors", m)
    assert read_safetensors(tmp_path / "b.safetensors")["layers.0.weight"].dtype == jnp.bfloat16
    m2 = Chain(Dense(2, 2))
    m2[0].weight = m2[0].weight.astype(jnp.bfloat16)
    fluxjax.import_safetensors_(m2, tmp_path / "b.safetensors")
    assert_bit_equal(state(m2), state(m))
    with pytest.raises(TypeError, match="bfloat16"):
        fluxjax.export_npz(tmp_path / "b.npz", m)
    write_safetensors(tmp_path / "empty.safetensors", {})
    assert read_safetensors(tmp_path / "empty.safetensors") == {}


def test_npz_round_trip_and_julia_written_file(tmp_path):
    m = Chain(Conv((2, 2), (1, 2)), BatchNorm(2), fluxjax.flatten, Dense(8, 3, bias=False))
    fluxjax.export_npz(tmp_path / "m.npz", m)
    with np.load(tmp_path / "m.npz") as z:
        assert sorted(z.files) == sorted(["layers.0.weight", "layers.0.bias", "layers.1.beta", "layers.1.gamma",
                                          "layers.1.mu", "layers.1.sigma2", "layers.3.weight"])
        assert z["layers.0.weight"].shape == (2, 2, 1, 2) and z["layers.3.weight"].shape == (3, 8)
    m2 = Chain(Conv((2, 2), (1, 2)), BatchNorm(2), fluxjax.flatten, Dense(8, 3, bias=False))
    fluxjax.import_npz_(m2, tmp_path / "m.npz")
    assert_bit_equal(state(m2), state(m))

    # NPZ.jl's npzwrite stores fortran_order: True with the Julia shape; numpy reads the same shape
    W = np.asarray(ls(3, 2))
    with zipfile.ZipFile(tmp_path / "julia.npz", "w") as z:
        for k, v in {"layers.0.weight": W, "layers.0.bias": np.array([7, 8, 9], np.float32)}.items():
            with z.open(k + ".npy", "w") as f:
                np.lib.format.write_array(f, np.asfortranarray(v))
    with zipfile.ZipFile(tmp_path / "julia.npz") as z:
        assert b"'fortran_order': True" in z.read("layers.0.weight.npy")[:128]
    d = Chain(Dense(2, 3))
    fluxjax.import_npz_(d, tmp_path / "julia.npz")
    assert d[0].weight.tolist() == [[1, 4], [2, 5], [3, 6]] and d[0].bias.tolist() == [7, 8, 9]


def test_import_errors_name_file_and_key(tmp_path, untouched):
    src = Chain(Dense(2, 3), Dense(3, 1))
    fluxjax.export_safetensors(tmp_path / "m.safetensors", src)
    fluxjax.export_npz(tmp_path / "m.npz", src)
    for imp, f in ((fluxjax.import_safetensors_, "m.safetensors"), (fluxjax.import_npz_, "m.npz")):
        wrong = Chain(Dense(2, 3), Dense(4, 1))
        check = untouched(wrong)
        with pytest.raises(DimensionMismatch, match=rf"{f}.*layers\[1\]\.weight.*\(1, 3\).*\(1, 4\)"):
            imp(wrong, tmp_path / f)
        with pytest.raises(StructureMismatch, match=rf"{f}.*missing from the file: \['layers.2.weight', 'layers.2.bias'\]"):
            imp(Chain(Dense(2, 3), Dense(3, 1), Dense(1, 1)), tmp_path / f)
        # (a .safetensors file lists its tensors in the package's layout order: bias before weight)
        extra = "'layers.1.bias', 'layers.1.weight'" if f.endswith("safetensors") else "'layers.1.weight', 'layers.1.bias'"
        with pytest.raises(StructureMismatch, match=rf"{f}.*not in the model: \[{extra}\]"):
            imp(Chain(Dense(2, 3)), tmp_path / f)
        with pytest.raises(FileNotFoundError):
            imp(wrong, tmp_path / ("missing" + f))
        check()
        nob = Chain(Dense(2, 3), Dense(3, 1, bias=False))  # bias=False ignores the file's bias, as loadmodel_
        imp(nob, tmp_path / f)
        assert nob[1].bias is False and np.array_equal(nob[1].weight, src[1].weight)
    assert list(flat_state(src)) == ["layers.0.weight", "layers.0.bias", "layers.1.weight", "layers.1.bias"]


def test_fluxjax_state_is_flux_state():
    m = Chain(Dropout(0.5))
    fluxjax.trainmode_(m)
    assert m[0].active is True
    assert fluxjax.state(m)["layers"][0]["active"] is True
