"""Zygote semantics of what gets a gradient (issue #23, "Gradients"): Python numbers inside containers
(traced with the dtype promotion they have outside, never trainable), fields left out by `trainable=`
(differentiated, not optimised), `jacobian` with an int axis, `Buffer` of arrays and `del buf[i]`,
`trainables`/`destructure` of a gradient and `trainables(m, path=True)`."""

import jax.numpy as jnp
import numpy as np
import pytest
from numgrad import fd_grad

import fluxjax
from fluxjax import Chain, Dense, destructure, gradient, jacobian, trainables
from fluxjax.keypath import KeyPath
from fluxjax.zygote import Buffer, Tangent


def close(a, b, rtol=1e-5, atol=1e-6):
    np.testing.assert_allclose(np.asarray(a, np.float64), np.asarray(b, np.float64), rtol=rtol, atol=atol)


# ----------------------------------------------------------------------------------------------
# 3. Python numbers inside dict/tuple models


def test_numbers_in_containers_promote_inside_as_outside():
    """A Python number keeps JAX's weak typing inside `gradient`: `float16 * 0.5 * 3` is float16 inside as
    outside (it was float32 inside), and its gradient is still Zygote's (numbers are differentiated)."""
    w = jnp.array([1.0, 2.0], jnp.float16)
    m = {"w": w, "s": 0.5, "k": 3}
    outside = (m["w"] * m["s"] * m["k"]).dtype
    inside = []

    def f(m):
        y = m["w"] * m["s"] * m["k"]
        inside.append(y.dtype)
        return jnp.sum(y.astype(jnp.float32))

    (g,) = gradient(f, m)
    assert outside == jnp.float16 and inside[0] == outside
    close(g["w"], [1.5, 1.5])
    close(g["s"], 3 * 3.0)  # Zygote: d/ds sum(w * s * k) = k * sum(w)
    close(g["k"], 0.5 * 3.0)
    assert m["s"] == 0.5 and m["k"] == 3  # the model is left as it was


def test_numbers_in_containers_are_not_trainable():
    """Optimisers.jl test/destructure.jl: `destructure((3, 4))` has no trainable part; numbers inside a
    dict are neither in `trainables` nor in `setup`, nor changed by `update_`."""
    flat, re = destructure((3, 4))
    assert flat.shape == (0,)
    assert re(flat) == (3, 4)
    m = {"w": jnp.array([1.0, 2.0]), "s": 0.5}
    assert len(trainables(m)) == 1 and len(fluxjax.params(m)) == 1
    st = fluxjax.setup(fluxjax.Descent(0.1), m)
    assert st["s"] is None
    (g,) = gradient(lambda m: jnp.sum(m["w"]) * m["s"], m)
    close(g["s"], 3.0)
    fluxjax.update_(st, m, g)
    assert m["s"] == 0.5
    close(m["w"], [1 - 0.05, 2 - 0.05])


def test_int_used_as_an_axis_in_a_container():
    """An int that `f` needs as an int (an axis) gets `None`; the value inside is the int outside."""
    x = jnp.array([[1.0, 2.0], [3.0, 4.0]])
    (g,) = gradient(lambda t: jnp.sum(jnp.cumsum(t[0], axis=t[1]) ** 2), (x, 1))
    assert g[1] is None
    xn = np.asarray(x, np.float64)
    close(g[0], fd_grad(lambda a: np.sum(np.cumsum(a, axis=1) ** 2), xn), rtol=1e-4)


# ----------------------------------------------------------------------------------------------
# 5. trainable= restricts optimisers, not gradients


@fluxjax.layer(trainable=("W",))
class _Affine:
    def __init__(self, W, b):
        self.W, self.b = W, b

    def __call__(self, x):
        return self.W @ x + self.b


def test_field_left_out_of_trainable_gets_its_gradient():
    """Flux docs ("trainable"): Zygote differentiates every field; `trainable` only restricts what
    `setup`/`update_`/`params`/`destructure` change. Compared with finite differences."""
    m = _Affine(jnp.array([[1.0, 2.0]]), jnp.array([0.5]))
    x = jnp.array([3.0, 4.0])
    (g,) = gradient(lambda m: jnp.sum(m(x) ** 2), m)
    W, b, xn = np.array([[1.0, 2.0]]), np.array([0.5]), np.array([3.0, 4.0])
    close(g.W, fd_grad(lambda w: np.sum((w @ xn + b) ** 2), W), rtol=1e-4)
    close(g.b, fd_grad(lambda bb: np.sum((W @ xn + bb) ** 2), b), rtol=1e-4)
    st = fluxjax.setup(fluxjax.Descent(0.1), m)
    assert st.b is None
    b0 = m.b
    fluxjax.update_(st, m, g)
    assert m.b is b0
    close(m.W, W - 0.1 * np.asarray(g.W))
    assert len(fluxjax.params(m)) == 1 and destructure(m)[0].shape == (2,)


# ----------------------------------------------------------------------------------------------
# 6. jacobian with an int, Buffer, trainables/destructure of gradients


def test_jacobian_with_an_int_axis():
    """Zygote: `jacobian((x, d) -> cumsum(x; dims=d), x, 1)` gives the matrix and `nothing` for the int."""
    x = jnp.array([1.0, 2.0, 3.0])
    J, n = jacobian(lambda x, d: jnp.cumsum(x, axis=d), x, 0)
    assert n is None
    close(J, np.tril(np.ones((3, 3))))


def test_buffer_of_arrays():
    """Zygote's Buffer holding arrays (a `Vector` of matrices): entries of any shape, `copy` gives them."""

    def f(x):
        buf = Buffer([], 2)
        buf[0] = x
        buf[1] = 2 * x[:2]
        return sum(jnp.sum(v**2) for v in buf.copy())

    x = jnp.array([1.0, 2.0, 3.0])
    (g,) = gradient(f, x)
    close(g, [2 + 8, 4 + 16, 6])
    b = Buffer([jnp.zeros(2), jnp.zeros(3)])
    assert len(b) == 2 and b[0] is None
    b.append(jnp.ones(1))
    del b[0]
    assert len(b) == 2 and b[0] is None and b.copy()[1].shape == (1,)
    with pytest.raises(RuntimeError, match="frozen"):
        del b[0]


def test_buffer_delete():
    """Zygote's `deleteat!(buf, i)` on an array buffer: the entry is removed, its gradient is zero."""

    def f(x):
        b = Buffer(x)
        b[:] = x * jnp.array([1.0, 2.0, 3.0])
        del b[1]
        return jnp.sum(b.copy() ** 2)

    x = jnp.array([1.0, 1.0, 1.0])
    (g,) = gradient(f, x)
    close(g, [2.0, 0.0, 18.0])  # b = [x0, 3 x2] remains
    b = Buffer(jnp.zeros(4))
    b[:] = jnp.arange(4.0)
    del b[1:3]
    close(b.copy(), [0.0, 3.0])


def test_trainables_and_destructure_of_a_gradient():
    """Optimisers.jl: `trainables` and `destructure` accept a gradient (a `Tangent`), giving its arrays in
    the model's order, and `re` rebuilds a gradient."""
    m = Chain(Dense(jnp.array([[1.0, 2.0]]), jnp.array([0.5])))
    x = jnp.array([[3.0], [4.0]])
    (g,) = gradient(lambda m: jnp.sum(m(x)), m)
    ts = trainables(g)
    assert [t.shape for t in ts] == [(1, 2), (1,)]
    close(ts[0], [[3.0, 4.0]])
    flat, re = destructure(g)
    close(flat, [3.0, 4.0, 1.0])
    g2 = re(flat * 2)
    assert isinstance(g2, Tangent) and g2.primal_type is Chain
    close(g2.layers[0].weight, [[6.0, 8.0]])


def test_trainables_with_path():
    """Optimisers.jl test/trainables.jl: `trainables(m; path=true)` gives (KeyPath, array) pairs, tied
    arrays once at their first path."""
    W = jnp.array([[1.0, 2.0]])
    m = Chain(Dense(W, jnp.array([0.5])), Dense(W, False))
    ps = trainables(m, path=True)
    assert [kp for kp, _ in ps] == [KeyPath("layers", 0, "weight"), KeyPath("layers", 0, "bias")]
    assert ps[0][1] is W
    d = {"a": jnp.ones(2), "b": (3, jnp.zeros(1))}
    assert [kp for kp, _ in trainables(d, path=True)] == [KeyPath("a"), KeyPath("b", 1)]


# ----------------------------------------------------------------------------------------------
# 4. plain Python objects and other libraries' modules are refused, never silently frozen


class _Plain:
    """Not a @fluxjax.layer."""

    def __init__(self):
        self.W = jnp.array([1.0, 2.0])

    def __call__(self, x):
        return self.W * x


@pytest.mark.parametrize(
    "call",
    [
        lambda p, x: gradient(lambda p: jnp.sum(p(x)), p),
        lambda p, x: gradient(lambda c: jnp.sum(c(x)), Chain(p)),
        lambda p, x: fluxjax.params(Chain(p)),
        lambda p, x: fluxjax.setup(fluxjax.Descent(0.1), Chain(p)),
        lambda p, x: trainables(Chain(p)),
        lambda p, x: trainables({"a": p}),
    ],
    ids=["gradient", "gradient-in-chain", "params", "setup", "trainables", "trainables-dict"],
)
def test_plain_object_holding_arrays_is_refused(call):
    """Flux 0.16 walks any struct; fluxjax walks layers, so a plain object holding arrays raises an error
    naming @fluxjax.layer instead of a silent `None` gradient or a silently frozen part."""
    with pytest.raises(TypeError, match=r"_Plain object, which is not a fluxjax layer.*@fluxjax\.layer"):
        call(_Plain(), jnp.array([3.0, 4.0]))


def test_plain_object_without_arrays_is_static():
    """A plain object holding only configuration (no arrays, no layers) stays static, as before."""

    class Config:
        def __init__(self):
            self.scale = 2.0

    @fluxjax.layer
    class Scaled:
        def __init__(self):
            self.W = jnp.array([1.0, 2.0])
            self.cfg = Config()

        def __call__(self, x):
            return self.cfg.scale * self.W * x

    m = Scaled()
    (g,) = gradient(lambda m: jnp.sum(m(jnp.array([3.0, 4.0]))), m)
    close(g.W, [6.0, 8.0])
    assert g.cfg is None and len(trainables(m)) == 1


@pytest.mark.slow
def test_flax_nnx_module_in_a_chain():
    """A `flax.nnx.Linear` inside a Chain: `gradient` differentiates it (it is a jax pytree; its gradient
    matches flax's own `nnx.grad`), and `setup`/`trainables`, which would silently skip it, raise."""
    nnx = pytest.importorskip("flax.nnx")
    lin = nnx.Linear(2, 1, rngs=nnx.Rngs(0))
    x = jnp.array([[1.0, 2.0]])
    (g,) = gradient(lambda c: jnp.sum(c(x) ** 2), Chain(lin))
    want = nnx.grad(lambda m: jnp.sum(m(x) ** 2))(lin)
    close(g.layers[0].kernel[...], want["kernel"][...])
    close(g.layers[0].bias[...], want["bias"][...])
    with pytest.raises(TypeError, match="Linear object, which is not a fluxjax layer"):
        fluxjax.setup(fluxjax.Adam(), Chain(lin))
    with pytest.raises(TypeError, match="Linear object, which is not a fluxjax layer"):
        trainables(Chain(lin))


def test_equinox_module_in_a_chain():
    """An `equinox.nn.Linear` inside a Chain: `gradient` differentiates it (its gradient matches
    equinox's own `filter_grad`), implicit `params` trains it, and `setup`/`trainables` raise."""
    eqx = pytest.importorskip("equinox")
    import jax

    lin = eqx.nn.Linear(2, 1, key=jax.random.PRNGKey(0))
    x = jnp.array([1.0, 2.0])
    (g,) = gradient(lambda c: jnp.sum(c(x) ** 2), Chain(lin))
    want = eqx.filter_grad(lambda m: jnp.sum(m(x) ** 2))(lin)
    close(g.layers[0].weight, want.weight)
    close(g.layers[0].bias, want.bias)
    m = Chain(lin)
    ps = fluxjax.params(m)
    w0 = m[0].weight
    gs = gradient(lambda: jnp.sum(m(x) ** 2), ps)
    fluxjax.update_(fluxjax.Descent(0.1), ps, gs)
    close(m[0].weight, w0 - 0.1 * want.weight)
    with pytest.raises(TypeError, match="Linear object, which is not a fluxjax layer"):
        fluxjax.setup(fluxjax.Adam(), Chain(lin))
    with pytest.raises(TypeError, match="Linear object, which is not a fluxjax layer"):
        trainables(Chain(lin))
