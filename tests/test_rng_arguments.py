"""`rng=` arguments: any integer seed (NumPy's too), a clear `TypeError` at construction for anything
else, and a NumPy Generator for `DataLoader` (MLUtils' `rng::AbstractRNG`), reproducible."""

import jax
import numpy as np
import pytest

import fluxjax as Flux
from fluxjax.data import DataLoader
from fluxjax.random import default_key, resolve_key, seed_


def eq(a, b):
    return np.array_equal(np.asarray(a), np.asarray(b))


@pytest.mark.parametrize("seed", [np.int64(3), np.int32(3), np.uint8(3), np.array(3)])
def test_numpy_integer_seeds(seed):
    k3 = jax.random.PRNGKey(3)
    assert eq(resolve_key(seed), k3)
    assert eq(Flux.Dropout(0.5, rng=seed).rng, k3)
    assert eq(Flux.AlphaDropout(0.5, rng=seed).rng, k3)
    seed_(seed)
    assert eq(default_key(), k3)
    X = np.arange(6)
    orders = [[b.tolist() for b in DataLoader(X, 6, shuffle=True, rng=r)] for r in (seed, 3)]
    assert orders[0] == orders[1]


BAD = [("x", "str 'x'"), (1.5, "float 1.5"), (True, "bool True"),
       (np.array([1, 2]), "numpy.ndarray of shape (2,) and dtype int64")]
MAKERS = {
    "Dropout": lambda r: Flux.Dropout(0.5, rng=r),
    "AlphaDropout": lambda r: Flux.AlphaDropout(0.5, rng=r),
    "DataLoader": lambda r: DataLoader(np.arange(4), 2, shuffle=True, rng=r),
}


@pytest.mark.parametrize("bad,shown", BAD)
@pytest.mark.parametrize("where", list(MAKERS))
def test_bad_rng_raises_at_construction(where, bad, shown):
    with pytest.raises(TypeError) as e:
        MAKERS[where](bad)
    msg = str(e.value)
    assert msg.startswith(f"{where}: got rng={shown}")
    assert "an int seed" in msg and "a JAX PRNG key" in msg and "NumPy Generator" in msg


def test_bad_rng_checked_without_shuffle_and_for_seed_():
    with pytest.raises(TypeError, match=r"^DataLoader: got rng=str 'x'"):
        DataLoader(np.arange(4), 2, rng="x")  # shuffle=False: still checked
    with pytest.raises(TypeError, match=r"^seed_: got bool True; expected an int seed"):
        seed_(True)
    with pytest.raises(TypeError, match=r"^seed_: got float 2.0"):
        seed_(2.0)
    with pytest.raises(TypeError, match=r"one key, not a batch of keys"):
        Flux.Dropout(0.5, rng=jax.random.split(jax.random.key(0), 3))


def test_dataloader_numpy_generator_reproducible():
    X = np.arange(6)
    d = DataLoader(X, 3, shuffle=True, rng=np.random.default_rng(0))
    epochs = [[b.tolist() for b in d] for _ in range(2)]
    ref = np.random.default_rng(0)
    expect = [ref.permutation(6).tolist() for _ in range(2)]
    assert epochs == [[e[:3], e[3:]] for e in expect]
    assert epochs == [[[3, 2, 5], [4, 0, 1]], [[4, 5, 1], [2, 0, 3]]]
    d2 = DataLoader(X, 3, shuffle=True, rng=np.random.default_rng(0))
    assert [[b.tolist() for b in d2] for _ in range(2)] == epochs


def test_generator_seeds_a_layer_key_reproducibly():
    a = Flux.Dropout(0.5, rng=np.random.default_rng(7)).rng
    b = Flux.Dropout(0.5, rng=np.random.default_rng(7)).rng
    assert a.dtype == np.uint32 and a.shape == (2,) and eq(a, b)


def test_dataloader_int64_beyond_int32_raises():
    if jax.config.jax_enable_x64:
        pytest.skip("with x64 JAX holds int64")
    ids = np.array([2**40 + 5, 7], np.int64)
    with pytest.raises(ValueError) as e:
        DataLoader(ids, batchsize=2)
    assert str(e.value) == (
        "DataLoader: data has dtype int64 and holds 1099511627781, which JAX (jax_enable_x64 is off) would "
        "convert to int32 as 5 (wrapped around); enable 64-bit JAX first with "
        'jax.config.update("jax_enable_x64", True), or convert the data to values that fit int32 '
        "(e.g. remap ids to 0:n-1)")
    with pytest.raises(ValueError, match=r"data\[1\] has dtype uint64 and holds 4294967296"):
        DataLoader((np.zeros(2), np.array([1, 2**32], np.uint64)))
    # what fits is kept exact; float64 rounds to float32 as JAX does
    assert [b.tolist() for b in DataLoader(np.array([2**31 - 1, -(2**31)], np.int64), 2)] == [[2**31 - 1, -(2**31)]]
    assert [b.dtype for b in DataLoader(np.array([0.1, 0.2]), 2)] == [np.float32]
