"""Class 2: the output structure belongs to each trace, not to the cache entry."""

import collections

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fluxjax as Flux
from fluxjax.compiled.access import rebuilder
from fluxjax.core.layer import dict_order


def test_output_structure_follows_the_input_shape():
    m = Flux.Dense(2, 3)
    f = Flux.jit(lambda m, x: {"a": m(x)} if x.shape[1] == 4 else {"b": m(x), "c": (m(x), 1.0)})
    xs = [jnp.ones((2, 4)), jnp.ones((2, 5)), jnp.ones((2, 4)), jnp.ones((2, 5))]
    for x in xs:
        out = f(m, x)
        if x.shape[1] == 4:
            assert set(out) == {"a"}
            np.testing.assert_allclose(out["a"], m(x), rtol=1e-6)
        else:
            assert set(out) == {"b", "c"} and isinstance(out["c"], tuple)
            np.testing.assert_allclose(out["c"][0], m(x), rtol=1e-6)


def test_output_length_follows_the_dtype():
    f = Flux.jit(lambda x: (x,) if x.dtype == jnp.float32 else (x, x + 1))
    a, b = jnp.ones(3), jnp.ones(3, jnp.int32)
    assert len(f(a)) == 1 and len(f(b)) == 2 and len(f(a)) == 1 and len(f(b)) == 2


def test_writes_beside_the_inputs_go_to_this_calls_models():
    """A field the program sets that is not among its inputs (a new attribute) is set on the layer of
    the call at hand, not on the one the program was traced with."""

    def note(m, x):
        y = m(x)
        m.seen = y.sum()
        return y

    f = Flux.jit(note)
    x = jnp.arange(4.0).reshape(2, 2)
    models = [Flux.Dense(2, 2) for _ in range(3)]
    for m in models:
        f(m, x)
        np.testing.assert_allclose(m.seen, m(x).sum(), rtol=1e-5, atol=1e-6)
    assert f.cache_size() == 1
    np.testing.assert_allclose(models[0].seen, models[0](x).sum(), rtol=1e-5, atol=1e-6)  # not overwritten since

    def loss(m, x, y):
        out = m(x)
        m.layers[-1].seen = out.sum()
        return Flux.mse(out, y)

    for data in ([(x, x)] * 2, ((x, x) for _ in range(2))):  # held steps and one call per step
        m = Flux.Chain(Flux.Dense(2, 2))
        Flux.train_(loss, m, data, Flux.setup(Flux.Descent(0.1), m), fuse=False)
        assert "seen" in vars(m.layers[-1])


# `compiled.access.rebuilder`: a program's outputs rebuilt by generated code, dicts in insertion order.

_Pair = collections.namedtuple("_Pair", "first second")


def _trees(leaf):
    keys = st.sampled_from(["eta", "beta", "a", "z", "m"])
    return st.recursive(
        leaf,
        lambda inner: st.one_of(
            st.lists(inner, max_size=3),
            st.lists(inner, max_size=3).map(tuple),
            st.builds(_Pair, inner, inner),
            st.dictionaries(keys, inner, max_size=4),
            st.just(None),
            st.builds(lambda w: Flux.Dense(jnp.full((1, 1), float(w))), st.integers(0, 9)),
        ),
        max_leaves=12,
    )


def _same(a, b):
    """Equal trees, containers of the same types, dicts in the same key order."""
    assert type(a) is type(b)
    if isinstance(a, dict):
        assert list(a) == list(b)
        for k in a:
            _same(a[k], b[k])
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            _same(x, y)
    elif isinstance(a, Flux.Dense):
        np.testing.assert_array_equal(a.weight, b.weight)
    else:
        assert a == b


@settings(max_examples=150, deadline=None)
@given(_trees(st.integers(0, 99)))
def test_rebuilder_is_unflatten_in_insertion_order(tree):
    leaves, treedef = jax.tree_util.tree_flatten(tree)
    _same(rebuilder(treedef, dict_order(tree))(leaves), tree)


def test_rebuilder_of_deep_trees_and_odd_keys():
    deep: object = 1.0
    for i in range(120):  # deeper than one Python expression may nest: the deep part is unflattened
        deep = [deep, {"b": i, "a": (i,)}]
    odd = [{(1, 2): 1, (0, 5): 2}, {"x": {}, "w": [], "v": ()}, {2: "a", 1: "b"}, {True: 1, False: 0}]
    for tree in (deep, odd):
        leaves, treedef = jax.tree_util.tree_flatten(tree)
        _same(rebuilder(treedef, dict_order(tree))(leaves), tree)


def test_a_returned_model_carries_what_the_call_wrote_into_it():
    """A function that steps a model (and its BatchNorm statistics) and returns it gives back the model
    as it is after the call, as the eager call does (a copy holding the new arrays)."""

    def step(m, o, x):
        val, g = Flux.withgradient(lambda m: jnp.sum(m(x) ** 2), m)
        Flux.update_(o, m, g[0])
        return m, val

    x = jnp.asarray(np.random.default_rng(1).normal(size=(3, 4)), jnp.float32)
    Flux.seed_(0)
    m = Flux.Chain(Flux.Dense(3, 2), Flux.BatchNorm(2), Flux.Dense(2, 1))
    o = Flux.setup(Flux.Descent(0.1), m)
    f = Flux.jit(step)
    for _ in range(2):
        back, _ = f(m, o, x)
        for a, b in zip(jax.tree_util.tree_leaves(back), jax.tree_util.tree_leaves(m), strict=True):
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def _tied(kind):
    W = jnp.asarray([[1.0, 0.5], [0.2, 1.0]])
    if kind == "array":
        return Flux.Chain(Flux.Dense(W, False, Flux.tanh), Flux.Dense(W, jnp.zeros(2)))
    d = Flux.Dense(W, False, Flux.tanh)
    return Flux.Chain(d, d)


def _pure_step(m, opt, x):
    g = Flux.gradient(lambda m: jnp.sum(m(x) ** 2), m)[0]
    opt, m = Flux.update(opt, m, g)
    return m, opt


@pytest.mark.parametrize("rule", [Flux.Descent(0.1), Flux.Adam(0.05)], ids=["Descent", "Adam"])
@pytest.mark.parametrize("kind", ["array", "layer"])
def test_a_returned_model_and_state_keep_their_ties(kind, rule):
    """The pure `opt, m = update(opt, m, g)` loop under `Flux.jit`: the model and the optimiser state it
    returns are tied as the eager call's are (one array, one layer, one `Leaf` at both places), so the
    next step steps the tied weight once with the summed gradient (jax's unflatten made one of each per
    place: from the second step on, the two copies trained apart)."""
    x = jnp.asarray([[1.0, 2.0], [3.0, 4.0]])
    runs = []
    for step in (_pure_step, Flux.jit(_pure_step)):
        m = _tied(kind)
        opt = Flux.setup(rule, m)
        for _ in range(3):
            m, opt = step(m, opt, x)
        assert m.layers[0].weight is m.layers[1].weight
        assert opt.layers[0].weight is opt.layers[1].weight
        if kind == "layer":
            assert m.layers[0] is m.layers[1]
        runs.append(m.layers[0].weight)
    np.testing.assert_allclose(runs[1], runs[0], rtol=1e-5)
    same = Flux.jit(lambda m: m)(_tied(kind))
    assert same.layers[0].weight is same.layers[1].weight


def test_withgradient_values_come_back_as_plain_dicts_in_their_order():
    """`withgradient`'s value keeps a dict's key order through the trace with a dict type of its own;
    what `Flux.jit` returns gives plain dicts back (it gave that type), in the order written."""
    m, x = Flux.Dense(2, 1), jnp.ones((2, 3))

    @Flux.jit
    def step(m, x):
        val, _ = Flux.withgradient(lambda m: {"z": jnp.sum(m(x)), "acc": jnp.mean(m(x))}, m)
        return val, [val], (1.0, {"inner": val})

    val, in_list, (_, nested) = step(m, x)
    for d in (val, in_list[0], nested["inner"]):
        assert type(d) is dict and list(d) == ["z", "acc"]
    np.testing.assert_allclose(val["z"], jnp.sum(m(x)), rtol=1e-6)
    outer = Flux.jit(lambda m, x: list(step(m, x)[0].values()))  # inside another trace: still in order
    np.testing.assert_allclose(outer(m, x), [jnp.sum(m(x)), jnp.mean(m(x))], rtol=1e-6)


def test_a_result_keeps_its_dicts_key_order_as_the_eager_call():
    """jax rebuilds a dict with sorted keys: `fluxjax.jit` of `lambda ..: {"loss": l, "acc": a}` returned
    `acc, loss`, so `loss, acc = out.values()` swapped them (a gradient's dict likewise). The compiled
    call gives each dict in the order the eager call made it, at the first call and the warm ones."""
    d = {"b": jnp.array([1.0, 2.0]), "a": jnp.array([3.0])}

    def f(d):
        inner = {"z": d["a"] * 2, "y": (d["b"], {"q": d["a"], "p": 1.0})}
        return {"loss": jnp.sum(d["b"]), "acc": d["a"][0], "nested": inner}, [{"k2": d["b"], "k1": 0}]

    want = f(d)
    jf = Flux.jit(f)
    for _ in range(3):
        got = jf(d)
        assert list(got[0]) == ["loss", "acc", "nested"] and list(got[0]["nested"]) == ["z", "y"]
        assert list(got[0]["nested"]["y"][1]) == ["q", "p"] and list(got[1][0]) == ["k2", "k1"]
        assert type(got[0]) is dict and type(got[0]["nested"]["y"][1]) is dict
        loss, acc, _ = got[0].values()
        np.testing.assert_allclose(loss, want[0]["loss"])
        np.testing.assert_allclose(acc, want[0]["acc"])
