"""Class 5: no tracer is ever left in a model, under plain jax transformations, new attributes set
inside a region, `checkpointed`, and `fluxjax.jit` called inside another trace."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import fluxjax as Flux

X = jnp.arange(8.0).reshape(2, 4)


def _no_tracers(m):
    assert not any(isinstance(a, jax.core.Tracer) for a in jax.tree_util.tree_leaves(m))
    for lay in Flux.modules(m):
        assert not any(isinstance(v, jax.core.Tracer) for v in jax.tree_util.tree_leaves(getattr(lay, "__dict__", {})))


def test_train_mode_batchnorm_under_jax_grad_of_the_input_writes_concrete_statistics():
    bn = Flux.trainmode_(Flux.BatchNorm(2))
    f = Flux.jit(lambda m, x: m(x))
    jax.grad(lambda x: jnp.sum(f(bn, x) * jnp.arange(8.0).reshape(2, 4)))(X)  # the statistics have no tangent
    _no_tracers(bn)
    np.testing.assert_allclose(bn.mu, 0.1 * np.mean(np.asarray(X), axis=1), rtol=1e-6)


@pytest.mark.parametrize("outer", ["vmap", "jax.jit"])
def test_train_mode_batchnorm_under_a_plain_transformation_raises_and_is_untouched(outer):
    bn = Flux.trainmode_(Flux.BatchNorm(2))
    mu = np.asarray(bn.mu)
    f = Flux.jit(lambda m, x: m(x))
    xs = jnp.ones((3, 2, 4)) * jnp.arange(3.0)[:, None, None]
    run = {"vmap": lambda: jax.vmap(lambda x: f(bn, x))(xs),
           "jax.jit": lambda: jax.jit(lambda x: f(bn, x))(X)}[outer]
    with pytest.raises(RuntimeError, match="fluxjax.jit"):
        run()
    _no_tracers(bn)
    np.testing.assert_array_equal(bn.mu, mu)


def test_test_mode_model_under_vmap_and_jax_jit_works():
    m = Flux.Chain(Flux.Dense(2, 3), Flux.BatchNorm(3))
    f = Flux.jit(lambda m, x: m(x))
    xs = jnp.ones((3, 2, 4))
    np.testing.assert_allclose(jax.vmap(lambda x: f(m, x))(xs), jax.vmap(m)(xs), rtol=1e-6)
    np.testing.assert_allclose(jax.jit(lambda x: f(m, x))(X), m(X), rtol=1e-6)
    g = jax.grad(lambda x: jnp.sum(f(m, x)))(X)
    np.testing.assert_allclose(g, jax.grad(lambda x: jnp.sum(m(x)))(X), rtol=1e-6)


def _sets_attributes(d):
    d.extra = d.weight * 2  # a new attribute
    d.weight = d.weight + 0.0  # an existing one
    return jnp.sum(d(X))


@pytest.mark.parametrize("how", ["gradient", "withgradient", "jit", "jit of gradient"])
def test_setting_attributes_inside_a_region_leaves_no_tracer(how):
    d = Flux.Dense(2, 2)
    w = np.asarray(d.weight)
    run = {"gradient": lambda: Flux.gradient(_sets_attributes, d),
           "withgradient": lambda: Flux.withgradient(_sets_attributes, d),
           "jit": lambda: Flux.jit(_sets_attributes)(d),
           "jit of gradient": lambda: Flux.jit(lambda d: Flux.gradient(_sets_attributes, d))(d)}[how]
    run()
    _no_tracers(d)
    np.testing.assert_allclose(d.extra, 2 * w, rtol=1e-6)  # the write lands, as in Flux
    np.testing.assert_allclose(d.weight, w, rtol=1e-6)


@Flux.layer(trainable=("d",))
class KeepsState:
    """Flux 0.14's `Recur` idiom: the state kept in a field as a container of arrays, set at each call."""

    def __init__(self, state):
        self.d = Flux.Dense(jnp.ones((2, 2)), False)
        self.state = state

    def __call__(self, x):
        h = self.d(x) + _hc(self.state)[0]
        self.state = _like(self.state, h, 2 * h)
        return h


def _hc(state):
    """`(h, c)` of a state made by `_like`."""
    if isinstance(state, dict):
        return state["h"], state["c"]
    return tuple(state[0]) if isinstance(state[0], tuple) else tuple(state)


def _like(state, a, b):
    if isinstance(state, dict):
        return {"h": a, "c": b}
    if isinstance(state, list) and isinstance(state[0], tuple):
        return [(a, b)]
    return type(state)([a, b])


STATES = {"tuple": lambda: (jnp.zeros(2), jnp.zeros(2)), "list": lambda: [jnp.zeros(2), jnp.zeros(2)],
          "dict": lambda: {"h": jnp.zeros(2), "c": jnp.zeros(2)}, "tuple in list": lambda: [(jnp.zeros(2), jnp.zeros(2))]}


@pytest.mark.parametrize("how", ["eager gradient", "gradient", "jit", "jit of gradient"])
@pytest.mark.parametrize("kind", sorted(STATES))
def test_a_field_set_to_a_container_of_traced_arrays(kind, how):
    """The write lands with concrete arrays (no tracer left in the model, none dropped), and each call
    reads the previous call's state, as eagerly."""
    make = STATES[kind]
    init = make()
    m = KeepsState(init)
    loss = (lambda m, x: jnp.sum(m(x)))
    jitted = Flux.jit(loss if how == "jit" else lambda m, x: Flux.gradient(loss, m, x))
    run = {"eager gradient": lambda x: Flux.gradient(loss, m, x, jit=False),
           "gradient": lambda x: Flux.gradient(loss, m, x)}.get(how, lambda x: jitted(m, x))
    x = jnp.ones(2)
    h = np.zeros(2)
    for _ in range(3):
        run(x)
        _no_tracers(m)
        h = 2.0 + h  # ones((2, 2)) @ ones(2) + previous h
        now = _hc(m.state)
        np.testing.assert_allclose(now[0], h)
        np.testing.assert_allclose(now[1], 2 * h)
        assert type(m.state) is type(init)


def test_checkpointed_with_batchnorm_inside_gradient():
    Flux.seed_(0)
    m = Flux.Chain(Flux.Dense(2, 3), Flux.BatchNorm(3))
    ref = Flux.fmap(lambda v: v, m)
    g = Flux.gradient(lambda m: jnp.sum(Flux.checkpointed(lambda z: z(X), m) ** 2), m)[0]
    gref = Flux.gradient(lambda m: jnp.sum(m(X) ** 2), ref)[0]
    np.testing.assert_allclose(g.layers[0].weight, gref.layers[0].weight, rtol=1e-5)
    np.testing.assert_allclose(m[1].mu, ref[1].mu, rtol=1e-6)
    _no_tracers(m)
    np.testing.assert_allclose(Flux.checkpointed(lambda a, b: a * b, 2.0, jnp.ones(2)), [2.0, 2.0])


def test_jit_inside_jit_and_inside_gradient():
    m = Flux.Dense(2, 3)
    inner = Flux.jit(lambda m, x: m(x))
    outer = Flux.jit(lambda m, x: jnp.sum(inner(m, x)))
    np.testing.assert_allclose(outer(m, X), jnp.sum(m(X)), rtol=1e-6)
    g = Flux.gradient(lambda m: outer(m, X), m)[0]
    np.testing.assert_allclose(g.weight, Flux.gradient(lambda m: jnp.sum(m(X)), m)[0].weight, rtol=1e-6)


@pytest.mark.parametrize("wrap", [Flux.jit, jax.jit], ids=["fluxjax.jit", "jax.jit"])
def test_a_compiled_function_read_by_another_is_keyed_by_what_it_wraps(wrap):
    """`outer` reads `inner`, a compiled function: its key is what `inner`'s function reads (`scale`),
    not `inner`'s own caches, so `outer` compiles once while nothing changes, and again when `scale` does
    (and then gives what `inner` called op by op gives: jax.jit's own cache keeps its first `scale`)."""
    m, scale = Flux.Dense(2, 3), [1.0]
    inner = wrap(lambda m, x: m(x) * scale[0])
    outer = Flux.jit(lambda m, x: jnp.sum(inner(m, x)))
    want = float(jnp.sum(m(X)))
    for _ in range(3):
        np.testing.assert_allclose(outer(m, X), want, rtol=1e-6)
    assert outer.compilations == 1
    scale[0] = 2.0
    for _ in range(2):
        np.testing.assert_allclose(outer(m, X), jnp.sum(inner(m, X)), rtol=1e-6)
    assert outer.compilations == 2
    if wrap is Flux.jit:
        np.testing.assert_allclose(outer(m, X), 2 * want, rtol=1e-6)


_TOTAL = jnp.zeros(())


def _accumulate(x):
    global _TOTAL
    _TOTAL = _TOTAL + x
    return _TOTAL


def _counter():
    c = jnp.zeros(())

    def bump(x):
        nonlocal c
        c = c + x
        return c

    return bump


@pytest.mark.parametrize("make", [lambda: _accumulate, _counter], ids=["global", "nonlocal"])
def test_a_global_or_closure_variable_rebound_to_a_traced_value_raises(make):
    """Op by op, `total = total + x` accumulates; compiled, the variable would keep a leaked tracer and
    the program the first value. The call raises (at every call), and the variable keeps its value."""
    global _TOTAL
    _TOTAL = jnp.zeros(())
    fn = make()
    f = Flux.jit(fn)
    for _ in range(2):
        with pytest.raises(RuntimeError, match="stored a traced value"):
            f(jnp.ones(()))
    assert float(_TOTAL) == 0.0
    with Flux.eager():
        assert float(fn(jnp.ones(()))) == 1.0  # the variable is whole: the eager call goes on from it


def _inner_ways():
    """A train-mode layer called inside a jax transformation opened inside fluxjax's own."""
    xs = jnp.ones((3, 2, 4)) * jnp.arange(3.0)[:, None, None]
    return {
        "vmap": lambda m: jnp.sum(jax.vmap(m)(xs)),
        "scan": lambda m: jnp.sum(jax.lax.scan(lambda c, x: (c, m(x)), 0.0, xs)[1]),
        "cond": lambda m: jnp.sum(jax.lax.cond(True, m, lambda x: x, X)),
        "fori": lambda m: jnp.sum(jax.lax.fori_loop(0, 2, lambda i, x: m(x), X)),
    }


@pytest.mark.parametrize("way", ["vmap", "scan", "cond", "fori"])
@pytest.mark.parametrize("outer", ["jit", "gradient", "functional"])
def test_a_state_write_inside_a_transformation_of_the_body_is_a_clear_error(way, outer):
    """Flux has no vmap: BatchNorm's running statistics cannot come out of one (nor out of a scan,
    cond or loop body the function opens). The error names the field; the model is untouched."""
    f = _inner_ways()[way]
    m = Flux.Chain(Flux.Dense(2, 2), Flux.trainmode_(Flux.BatchNorm(2)))
    before = [np.asarray(a) for a in jax.tree_util.tree_leaves(m)]
    run = {"jit": lambda: Flux.jit(f)(m),
           "gradient": lambda: Flux.gradient(f, m),
           "functional": lambda: (lambda p, s, apply: apply(p, s, None))(*_functional_of(m, f))}[outer]
    with pytest.raises(RuntimeError, match=r"BatchNorm\.mu was written inside a jax transformation"):
        run()
    _no_tracers(m)
    for a, b in zip(before, jax.tree_util.tree_leaves(m)):
        np.testing.assert_array_equal(a, b)


def _functional_of(m, f):
    """`functional(model)` of a wrapper whose forward is `f(model)`: `apply(params, state, x)`."""

    @Flux.layer
    class Wrap:
        def __init__(self, m):
            self.m = m

        def __call__(self, _):
            return f(self.m)

    return Flux.functional(Wrap(m))


@pytest.mark.parametrize("layer", [lambda: Flux.Dropout(0.5), lambda: Flux.AlphaDropout(0.5)])
@pytest.mark.parametrize("where", ["gradient", "jit", "jit of vmap", "trainmode", "vmap of grad"])
def test_dropout_in_train_mode_under_vmap_raises_rather_than_share_one_mask(layer, where):
    """The key is not mapped: every mapped sample got the same mask (all gradient columns equal),
    where Flux's Dropout on the batch draws one per entry. Nothing is written, no tracer is left."""
    xs = jnp.ones((8, 6))
    m = Flux.Chain(Flux.Dense(jnp.eye(8)), layer())
    per_sample = lambda mm, x: jnp.sum(jax.vmap(mm, in_axes=1, out_axes=1)(x))  # noqa: E731
    run = {"gradient": lambda: Flux.gradient(lambda x: per_sample(m, x), xs),
           "jit": lambda: Flux.jit(lambda mm, x: Flux.gradient(per_sample, mm, x))(m, xs),
           "jit of vmap": lambda: Flux.jit(per_sample)(Flux.trainmode_(m), xs),
           "trainmode": lambda: per_sample(Flux.trainmode_(m), xs),
           "vmap of grad": lambda: jax.vmap(jax.grad(lambda x: jnp.sum(Flux.trainmode_(m)(x))), in_axes=1)(xs)}[where]
    key = np.asarray(m.layers[1].rng)
    with pytest.raises(ValueError, match=r"Dropout\(0.5.*in train mode under jax.vmap: its key is not mapped"):
        run()
    np.testing.assert_array_equal(m.layers[1].rng, key)
    _no_tracers(m)


def test_dropout_under_vmap_in_test_mode_or_with_mapped_keys_works():
    xs = jnp.ones((8, 6))
    m = Flux.testmode_(Flux.Chain(Flux.Dropout(0.5)))
    np.testing.assert_array_equal(jax.vmap(m, in_axes=1, out_axes=1)(xs), xs)
    keys = jax.random.split(jax.random.PRNGKey(0), 6)
    out = jax.vmap(lambda k, x: Flux.nnlib.dropout(k, x, 0.5), in_axes=(0, 1), out_axes=1)(keys, xs)
    assert len({tuple(np.asarray(out[:, j])) for j in range(6)}) > 1  # a mask per sample
    for j in range(6):
        np.testing.assert_array_equal(out[:, j], Flux.nnlib.dropout(keys[j], xs[:, j], 0.5))
    with pytest.raises(ValueError, match=r"dropout\(x, p\) with the global key is in train mode under jax.vmap"):
        jax.vmap(lambda x: Flux.nnlib.dropout(x, 0.5), in_axes=1)(xs)
