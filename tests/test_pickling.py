"""`pickle`, `copy.deepcopy` and `cloudpickle` (when installed) of models, optimiser states from `setup`,
`Tangent` gradients and `Grads`, and a 'spawn' `multiprocessing` pool that sends each to a fresh
interpreter and back: same values, bit for bit, and they still work (a training step in the worker gives
what the same step gives here)."""

from __future__ import annotations

import copy
import multiprocessing
import pickle

import jax
import numpy as np
import optax
import pytest

import fluxjax
from fluxjax import LSTM, Adam, AdamW, BatchNorm, Chain, ClipNorm, Conv, Dense, Dropout, MaxPool, Momentum, OptimiserChain
from fluxjax.zygote import Tangent

try:
    import cloudpickle
except ImportError:  # optional: not a dependency
    cloudpickle = None

X = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)


def host(tree):
    out = []
    for a in jax.tree_util.tree_leaves(tree):
        if isinstance(a, jax.Array) and jax.numpy.issubdtype(a.dtype, jax.dtypes.prng_key):
            a = jax.random.key_data(a)
        out.append(np.asarray(a).copy())
    return out


def assert_bit_equal(a, b, same_structure=True):
    if same_structure:  # static parts (activations, rules, sizes) compare equal too
        assert jax.tree_util.tree_structure(a) == jax.tree_util.tree_structure(b)
    la, lb = host(a), host(b)
    assert len(la) == len(lb) > 0
    for x, y in zip(la, lb):
        assert x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes()


def mlp(seed=0):
    fluxjax.seed_(seed)
    return Chain(Dense(3, 4, fluxjax.relu), BatchNorm(4), Dropout(0.3), Dense(4, 2))


def loss(m):
    return (m(X) ** 2).sum()


def objects():
    """name -> object, covering each kind the issue names."""
    m = mlp()
    fluxjax.seed_(1)
    out = {
        "model": m,
        "named chain": Chain(enc=Dense(3, 4), dec=Dense(4, 2)),
        "conv": Chain(Conv((2, 2), (1, 2), fluxjax.relu), MaxPool((2, 2))),
        "lstm": Chain(LSTM(3, 4)),
        "typed key": Chain(Dropout(0.5, rng=jax.random.key(7))),
        "opt_state adam": fluxjax.setup(Adam(0.01), m),
        "opt_state chain": fluxjax.setup(OptimiserChain(ClipNorm(1.0), AdamW(0.01)), m),
        "opt_state momentum": fluxjax.setup(Momentum(), m),
        "tangent": fluxjax.gradient(loss, m)[0],
    }
    ps = fluxjax.params(m)
    out["grads"] = fluxjax.gradient(lambda: loss(m), ps)
    return out


WAYS = {"pickle": lambda x: pickle.loads(pickle.dumps(x)), "deepcopy": copy.deepcopy}
if cloudpickle is not None:
    WAYS["cloudpickle"] = lambda x: cloudpickle.loads(cloudpickle.dumps(x))


@pytest.mark.parametrize("way", sorted(WAYS))
def test_round_trip_equal(way):
    for name, x in objects().items():
        y = WAYS[way](x)
        assert type(y) is type(x), name
        if isinstance(x, fluxjax.Grads):
            assert [np.asarray(g).tobytes() for g in y] == [np.asarray(g).tobytes() for g in x]
            assert len(y.params) == len(x.params)
        else:
            assert_bit_equal(y, x)
        if isinstance(x, Tangent):
            assert y == x and y.primal_type is x.primal_type and repr(y) == repr(x)


@pytest.mark.parametrize("way", sorted(WAYS))
def test_copies_keep_working(way):
    """A copied model + optimiser state + gradient, stepped, gives what the originals give, and the copies
    are independent of the originals."""
    m = mlp()
    opt = fluxjax.setup(Adam(0.01), m)
    g = fluxjax.gradient(loss, m)[0]
    m2, opt2, g2 = WAYS[way]((m, opt, g))
    fluxjax.update_(opt, m, g)
    before = host(m2)
    assert not all(np.array_equal(a, b) for a, b in zip(before, host(m)))  # the copy did not move with m
    fluxjax.update_(opt2, m2, g2)
    assert_bit_equal(m2, m)
    assert_bit_equal(opt2, opt)


@pytest.mark.parametrize("way", sorted(WAYS))
def test_grads_index_by_the_copied_parameters(way):
    m = mlp()
    ps = fluxjax.params(m)
    gs = fluxjax.gradient(lambda: loss(m), ps)
    m2, gs2 = WAYS[way]((m, gs))
    for w, w2 in zip(ps, fluxjax.params(m2)):
        assert np.asarray(gs2[w2]).tobytes() == np.asarray(gs[w]).tobytes()
        assert w2 in gs2 and w not in gs2
    assert [np.asarray(v).tobytes() for v in (gs2 + gs2).values()] == [np.asarray(2 * v).tobytes() for v in gs.values()]


def test_tangent_copies_are_independent():
    g = fluxjax.gradient(loss, mlp())[0]
    g2 = copy.deepcopy(g)
    g2.layers[0].weight = g2.layers[0].weight * 0
    assert np.any(np.asarray(g.layers[0].weight) != 0)


def test_optax_rules_need_cloudpickle():
    """optax's own transformations are closures: plain pickle cannot send them (optax's limitation),
    deepcopy and cloudpickle can; fluxjax's rules pickle everywhere."""
    opt = fluxjax.setup(optax.adam(1e-3), mlp())
    with pytest.raises((AttributeError, pickle.PicklingError), match="local object"):
        pickle.dumps(opt)
    # optax's closures are new function objects in a copy, so only the arrays can compare equal
    assert_bit_equal(copy.deepcopy(opt), opt, same_structure=False)
    if cloudpickle is not None:
        assert_bit_equal(cloudpickle.loads(cloudpickle.dumps(opt)), opt, same_structure=False)


@pytest.fixture(scope="module")
def pool():
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(1) as p:
        yield p
        p.terminate()


TIMEOUT = 180  # a fresh interpreter imports jax and fluxjax first; never hang the suite


def test_spawn_pool_round_trip(pool):
    import pickle_worker

    objs = objects()
    sent = {k: v for k, v in objs.items() if k != "grads"}
    back = pool.apply_async(pickle_worker.echo, (sent,)).get(timeout=TIMEOUT)
    assert set(back) == set(sent)
    for k in sent:
        assert type(back[k]) is type(sent[k]), k
        assert_bit_equal(back[k], sent[k])

    m = mlp()
    ps_grads = fluxjax.gradient(lambda: loss(m), fluxjax.params(m))
    got = pool.apply_async(pickle_worker.grads_lookup, (m, ps_grads)).get(timeout=TIMEOUT)
    assert [a.tobytes() for a in got] == [np.asarray(ps_grads[w]).tobytes() for w in fluxjax.params(m)]
    gs_back = pool.apply_async(pickle_worker.echo, (ps_grads,)).get(timeout=TIMEOUT)
    assert [np.asarray(v).tobytes() for v in gs_back] == [np.asarray(v).tobytes() for v in ps_grads]


def test_spawn_pool_training_step(pool):
    import pickle_worker

    m = mlp()
    opt = fluxjax.setup(OptimiserChain(ClipNorm(1.0), Adam(0.01)), m)
    g = fluxjax.gradient(loss, m)[0]
    m2, opt2, y2 = pool.apply_async(pickle_worker.train_step, (m, opt, g, X)).get(timeout=TIMEOUT)
    fluxjax.update_(opt, m, g)
    assert_bit_equal(m2, m)
    assert_bit_equal(opt2, opt)
    # the parameters are bit-equal; the worker's forward pass may round differently (another process's
    # XLA:CPU kernels), so its output is compared to float32 precision
    np.testing.assert_allclose(y2, np.asarray(m(X)), rtol=1e-6, atol=1e-7)
