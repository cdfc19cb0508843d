"""trainables / destructure / Restructure (Optimisers.jl test/trainables.jl, test/destructure.jl)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import fluxjax as Flux
from fluxjax import Chain, Dense, destructure, trainables


def test_trainables_order_dedup_and_non_trainables():
    d = Dense(3, 2)
    bn = Flux.BatchNorm(2)
    m = Chain(d, bn, d)
    ps = trainables(m)
    assert [p.shape for p in ps] == [(2, 3), (2,), (2,), (2,)]  # BatchNorm's beta, gamma; not mu/sigma2
    assert ps[0] is d.weight and ps[2] is bn.beta
    assert trainables({"i": jnp.arange(3), "s": jnp.sin}) == []  # integer arrays are not trainable


def test_trainables_custom_trainable_fields():
    @Flux.layer(trainable=("W",))
    class Half:
        def __init__(self):
            self.W = jnp.ones((2, 2))
            self.b = jnp.zeros(2)

        def __call__(self, x):
            return self.W @ x + self.b

    h = Half()
    assert [p is h.W for p in trainables(h)] == [True]


def test_destructure_column_major_and_roundtrip():
    m = Chain(Dense(2, 3, Flux.relu), Dense(3, 1))
    flat, re = destructure(m)
    assert flat.shape == (13,)
    np.testing.assert_array_equal(flat[:6], np.ravel(np.asarray(m[0].weight), order="F"))
    m2 = re(flat)
    assert m2 is not m and m2[0] is not m[0]
    x = jnp.asarray(np.random.rand(2, 4), jnp.float32)
    np.testing.assert_allclose(m2(x), m(x), rtol=1e-6)
    z = re(jnp.zeros(13))
    np.testing.assert_array_equal(z(x), np.zeros((1, 4)))
    np.testing.assert_array_equal(m(x), m2(x))  # the original is unchanged


def test_restructure_keeps_structure_from_destructure_time():
    d = Dense(2, 2)
    flat, re = destructure(d)
    Flux.loadmodel_(d, Dense(2, 2))  # rebinding the live model afterwards does not matter
    np.testing.assert_array_equal(re(flat).weight, np.asarray(flat[:4]).reshape(2, 2, order="F"))


@pytest.mark.parametrize("jit", [True, False])
def test_restructure_shares_the_models_state_as_optimisers_jl(jit):
    """Optimisers.jl's `re` holds the model: `re(p)` shares its non-trainable arrays, which BatchNorm
    updates in place. A flat-parameter loop moved nothing: the model and every later `re(p)` kept the
    initial statistics (mu = 0, sigma2 = 1), and `testmode_(m)` did not reach `re(p)`."""
    x = jnp.asarray(np.random.default_rng(0).standard_normal((2, 8)), jnp.float32)

    def fresh():
        Flux.seed_(0)
        return Chain(Dense(2, 3), Flux.BatchNorm(3))

    m, ref = fresh(), fresh()
    p, re = destructure(m)
    for _ in range(3):
        g = Flux.gradient(lambda v: jnp.sum(re(v)(x) ** 2), p, jit=jit)[0]
        gr = Flux.gradient(lambda mm: jnp.sum(mm(x) ** 2), ref)[0]  # the model itself, the same steps
    np.testing.assert_allclose(m[1].mu, ref[1].mu, rtol=1e-5)
    np.testing.assert_allclose(m[1].sigma2, ref[1].sigma2, rtol=1e-5)
    assert float(jnp.abs(m[1].mu).max()) > 1e-3  # moved
    np.testing.assert_allclose(re(p)[1].mu, ref[1].mu, rtol=1e-5)
    np.testing.assert_allclose(g, destructure(gr)[0], rtol=1e-4, atol=1e-4)  # (a bias into BatchNorm: 0 + rounding)
    Flux.testmode_(m)
    assert re(p)[1].active is False  # the mode the model has when re(p) is called
    Flux.testmode_(ref)
    np.testing.assert_allclose(re(p)(x), ref(x), rtol=1e-5)
    m.layers = (m[0], Dense(3, 3))
    with pytest.raises(ValueError, match="changed its structure"):
        re(p)


def test_restructure_errors_and_dtypes():
    m = {"a": jnp.ones(3, jnp.float32), "b": jnp.ones(2, jnp.float16)}
    flat, re = destructure(m)
    assert flat.shape == (5,)
    r = re(jnp.arange(5.0))
    assert r["a"].dtype == jnp.float32 and r["b"].dtype == jnp.float16
    with pytest.raises(Flux.DimensionMismatch, match="length 5"):
        re(jnp.ones(4))


def test_gradient_through_restructure_matches_structural_gradient():
    m = Chain(Dense(3, 4, jnp.tanh), Dense(4, 2))
    x = jnp.asarray(np.random.rand(3, 5), jnp.float32)
    flat, re = destructure(m)
    gflat = Flux.gradient(lambda v: jnp.sum(re(v)(x) ** 2), flat)[0]
    gm = Flux.gradient(lambda m: jnp.sum(m(x) ** 2), m)[0]
    want = jnp.concatenate([jnp.ravel(t, order="F") for t in (gm.layers[0].weight, gm.layers[0].bias,
                                                              gm.layers[1].weight, gm.layers[1].bias)])
    np.testing.assert_allclose(gflat, want, rtol=1e-5, atol=1e-6)
    # and under jax.jit / jax.grad directly
    np.testing.assert_allclose(jax.jit(jax.grad(lambda v: jnp.sum(re(v)(x) ** 2)))(flat), want, rtol=1e-5, atol=1e-6)


def test_modules_lists_containers_like_flux():
    d1, d2 = Dense(2, 3), Dense(3, 1)
    m = Chain(d1, d2)
    mods = Flux.modules(m)
    assert mods[0] is m and mods[1] is m.layers and mods[2] is d1 and mods[3] is d2 and len(mods) == 4
    # the layers-only walk used internally (trainmode_ etc.) is unchanged
    from fluxjax.functors import all_layers

    assert all_layers(m) == [m, d1, d2]
    assert len(Flux.modules(Dense(2, 2))) == 1  # tuples of numbers / arrays are leaves, not modules
    shared = Chain(d1, d1)
    assert [type(v).__name__ for v in Flux.modules(shared)] == ["Chain", "tuple", "Dense"]


def test_restructure_is_the_walks_rebuild():
    # `re` rebuilds through fluxjax.core.walk.rebuild, replacing arrays only at trainable places: an
    # array that a trainable field shares with a non-trainable one is new in the trainable field and
    # the old one in the other, as Optimisers.jl's `_rebuild` (its `_trainmap` keeps a non-trainable
    # field's child `c` as it is); the destructure of a gradient rebuilds a gradient
    @Flux.layer(trainable=("W",))
    class Shared:
        def __init__(self):
            self.W = jnp.ones((2, 2))
            self.V = self.W

        def __call__(self, x):
            return self.W @ x + self.V @ x

    s = Shared()
    flat, re = destructure(s)
    assert flat.shape == (4,)
    s0 = re(jnp.zeros(4))
    np.testing.assert_array_equal(s0.W, np.zeros((2, 2)))
    np.testing.assert_array_equal(s0.V, np.ones((2, 2)))
    # the same below a frozen (non-trainable) field that holds a layer: its arrays are kept
    @Flux.layer(trainable=("a",))
    class Frozen:
        def __init__(self, a, inner):
            self.a, self.inner = a, inner

        def __call__(self, x):
            return self.a @ x + self.inner(x)

    W = jnp.ones((2, 2))
    f = Frozen(W, Dense(W, False))
    flat, re = destructure(f)
    assert flat.shape == (4,)
    f0 = re(jnp.arange(4.0))
    np.testing.assert_array_equal(f0.a, np.array([[0.0, 2.0], [1.0, 3.0]]))  # column-major
    np.testing.assert_array_equal(f0.inner.weight, np.ones((2, 2)))
    d = Dense(2, 2)
    m = Chain(d, d)
    x = jnp.ones((2, 3))
    g = Flux.gradient(lambda m: jnp.sum(m(x)), m)[0]
    gflat, gre = destructure(g)
    assert gflat.shape == (12,)  # Zygote: each path of a tied layer has its own gradient
    g2 = gre(2 * gflat)
    assert type(g2) is type(g)
    np.testing.assert_allclose(g2.layers[0].weight, 2 * g.layers[0].weight, rtol=1e-6)
    np.testing.assert_allclose(g2.layers[1].weight, 2 * g.layers[1].weight, rtol=1e-6)


# Inside `gradient` each place of a tied array gets its own tracer and each place of a tied layer its own
# copy (Zygote's per-path gradients); the functions that take each array or layer once still see one.
M1 = jnp.array([1.0, 2.0, 3.0])
MAT = jnp.array([[4.0, 6.0], [5.0, 7.0]])


def _tied_dict():
    return {"x": M1, "y": M1, "z": jnp.array([4.0, 5.0, 6.0])}  # Optimisers.jl's m4


def _tied_chain():
    d = Dense(jnp.array([[1.0, 2.0], [3.0, 4.0]]), jnp.array([0.5, -1.0]))
    return Chain(d, d)


def _penalties():
    return {
        "trainables": lambda m: sum(jnp.sum(p ** 2) for p in trainables(m)),
        "params": lambda m: sum(jnp.sum(p ** 2) for p in Flux.params(m)),
        "destructure": lambda m: jnp.sum(destructure(m)[0] ** 2),
        "modules": lambda m: sum(jnp.sum(l.weight ** 2) for l in Flux.modules(m) if isinstance(l, Dense)),
    }


@pytest.mark.parametrize("how", ["compiled", "op-by-op", "jit-step"])
@pytest.mark.parametrize("name", ["trainables", "params", "destructure", "modules"])
def test_tied_arrays_and_layers_count_once_inside_gradient(name, how):
    loss = _penalties()[name]
    models = [_tied_chain()] + ([] if name == "modules" else [_tied_dict()])
    for m in models:
        want = float(loss(m))  # outside gradient: every tied array once
        assert want == (91.0 if isinstance(m, dict) else 1 + 4 + 9 + 16 + (0 if name == "modules" else 1.25))
        if how == "jit-step":
            val = Flux.jit(lambda m: Flux.withgradient(loss, m)[0])(m)
        else:
            val = Flux.withgradient(loss, m, jit=how == "compiled")[0]
        assert float(val) == want


@pytest.mark.parametrize("jit", [True, False])
def test_destructure_of_tied_arrays_inside_gradient_is_upstreams(jit):
    # Optimisers.jl test/destructure.jl: `destructure(m4)[1] == 1:6`, and for m9 the gradient reaches the
    # tied array through its first place only (`g9.c === nothing`), so an update moves it once
    m4 = _tied_dict()
    seen = []
    Flux.gradient(lambda m: (seen.append(destructure(m)[0].shape), jnp.sum(destructure(m)[0]))[1], m4, jit=jit)
    assert seen[-1] == (6,)
    m9 = {"a": M1, "b": MAT, "c": [MAT, M1]}
    g9 = Flux.gradient(lambda m: jnp.sum(jnp.sqrt(destructure(m)[0])), m9, jit=jit)[0]
    assert g9["c"] is None
    np.testing.assert_allclose(g9["a"], 0.5 / np.sqrt(np.asarray(M1)), rtol=1e-6)
    np.testing.assert_allclose(g9["b"], 0.5 / np.sqrt(np.asarray(MAT)), rtol=1e-6)
    _, new = Flux.update(Flux.setup(Flux.Descent(1.0), m9), m9, g9)
    np.testing.assert_allclose(M1 - new["a"], 0.5 / np.sqrt(np.asarray(M1)), rtol=1e-6)
    assert new["c"][1] is new["a"]
    # and `re` rebuilds both places of a tied array from the one stretch of the vector
    flat, re = destructure(m4)
    g = Flux.gradient(lambda v: jnp.sum(re(v)["x"] * re(v)["y"]), flat, jit=jit)[0]
    np.testing.assert_allclose(g, [2.0, 4.0, 6.0, 0.0, 0.0, 0.0], rtol=1e-6)
    inner = Flux.gradient(lambda m: jnp.sum(destructure(m)[1](destructure(m)[0])["y"]), m4, jit=jit)[0]
    np.testing.assert_allclose(inner["x"], [1.0, 1.0, 1.0])
    assert inner["y"] is None


@Flux.layer(trainable=("y", "x"))
class _YFirst:
    """`trainable=` in another order than the fields (Optimisers.jl's test/destructure.jl `Foo`)."""

    def __init__(self, x, y):
        self.x, self.y = x, y


def test_trainable_fields_are_walked_in_field_order_whatever_the_order_of_trainable():
    """Optimisers.jl merges `trainable`'s result back into field order (src/interface.jl `_trainable`):
    `destructure`, `trainables` and `re` went by the tuple's order, so a flat vector from Julia was
    loaded into the wrong fields (`re([10, 20, 30, 40]).x` was [30, 40])."""
    m = _YFirst(jnp.array([1.0, 2.0]), jnp.array([3.0, 4.0]))
    flat, re = Flux.destructure(m)
    np.testing.assert_array_equal(flat, [1.0, 2.0, 3.0, 4.0])
    assert [np.asarray(a).tolist() for a in Flux.trainables(m)] == [[1.0, 2.0], [3.0, 4.0]]
    r = re(jnp.array([10.0, 20.0, 30.0, 40.0]))
    np.testing.assert_array_equal(r.x, [10.0, 20.0])
    np.testing.assert_array_equal(r.y, [30.0, 40.0])
    assert list(Flux.trainable(m)) == ["x", "y"]
    m1 = jnp.array([1.0, 2.0, 3.0])  # tied (upstream: g8[1].x == [2, 4, 6], the first place by field)
    g = Flux.gradient(lambda mm: jnp.sum(Flux.destructure(mm)[0] ** 2), _YFirst(m1, m1))[0]
    np.testing.assert_allclose(g.x, [2.0, 4.0, 6.0])
    assert g.y is None
    s = Flux.setup(Flux.Descent(0.1), m)
    Flux.update_(s, m, Flux.gradient(lambda mm: jnp.sum(mm.x) + 2 * jnp.sum(mm.y), m)[0])
    np.testing.assert_allclose(m.x, [0.9, 1.9], rtol=1e-6)
    np.testing.assert_allclose(m.y, [2.8, 3.8], rtol=1e-6)
