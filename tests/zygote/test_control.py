"""hook, ignore, dropgrad, forwarddiff, checkpointed and gradient accumulation (Zygote.jl sources
cited per case; `nothing` is `None`)."""

import types

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from structure import same

import fluxjax
from fluxjax import checkpointed, dropgrad, gradient, hook, ignore, pullback
from fluxjax.zygote import forwarddiff

# ----------------------------------------------------------------------------------------------
# I4. hook, ignore, dropgrad, forwarddiff


def test_hook():
    # Zygote.jl/test/features.jl:333  gradient((a, b) -> Zygote.hook(-, a)*b, 2, 3) == (-3, 2)
    same(gradient(lambda a, b: hook(lambda d: -d, a) * b, 2, 3), (-3.0, 2.0))


def test_ignore():
    # Zygote.jl/test/deprecated.jl:8  gradient(x -> Zygote.ignore(() -> x*x), 1) == (nothing,)
    assert gradient(lambda x: ignore(lambda: x * x), 1) == (None,)

    # Zygote.jl/test/deprecated.jl:10-13  gradient(1) do x; y = Zygote.@ignore x; x * y end == (1,)
    def f(x):
        y = ignore(x)
        return x * y

    same(gradient(f, 1), (1.0,))


LOG: list = []


def test_ignore_storing_a_traced_value_raises_and_keeps_the_log_clean():
    # Zygote's `ignore() do; push!(log, l); end` logs a number; inside fluxjax's gradient `l` is traced, and
    # a traced value left in a list is invalid after the call: a clear error, the append taken back
    import pytest

    m = fluxjax.Dense(jnp.ones((1, 2)))
    x = jnp.ones((2, 3))
    closed: list = []
    seen: dict = {}
    stores = {"global": (LOG, lambda l: LOG.append(l)), "closure": (closed, lambda l: closed.append(l)),
              "dict": (seen, lambda l: seen.__setitem__("l", l))}
    for where, (log, store) in stores.items():
        def loss(m, store=store):
            l = jnp.sum(m(x) ** 2)
            ignore(lambda: store(l))
            return l

        for jit in (True, False):
            with pytest.raises(RuntimeError, match="ignore: the function stored a traced value"):
                gradient(loss, m, jit=jit)
            assert where == "dict" or log == []
    # a concrete value logged, and logging outside gradient, are fine
    logged = []
    g = gradient(lambda m: ignore(lambda: logged.append(1.0)) or jnp.sum(m(x)), m)[0]
    same(g.weight, jnp.full((1, 2), 3.0))
    assert logged and all(v == 1.0 for v in logged)


def test_unused_inputs_read_from_either_layout_of_the_linear_program():
    # `nothing` comes from which tangent inputs jax.vjp's linear program reads. Up to jax 0.10 its inputs
    # are the tangents alone; from 0.11 the residuals come first. Both layouts, as jaxprs:
    from types import SimpleNamespace

    from fluxjax.zygote.plan import _used_inputs

    tangents_only = jax.make_jaxpr(lambda t1, t2, t3: 2.0 * t1 + t3)(1.0, 2.0, 3.0)
    residuals_first = jax.make_jaxpr(lambda r1, r2, t1, t2, t3: r1 * t1 + r2 * t3)(1.0, 2.0, 3.0, 4.0, 5.0)
    for program in (tangents_only, residuals_first):
        assert _used_inputs(SimpleNamespace(jaxpr=program), 3) == [True, False, True]
    assert _used_inputs(SimpleNamespace(jaxpr=tangents_only), 4) == [True] * 4  # not understood: dense


def test_dropgrad():
    # Zygote.jl/src/deprecated.jl:6-9  gradient(2, 3) do a, b; dropgrad(a)*b end == (nothing, 2)
    same(gradient(lambda a, b: dropgrad(a) * b, 2, 3), (None, 2.0))


def test_forwarddiff():
    # Zygote.jl/test/features.jl:335-338  gradient(5) do x; forwarddiff(x -> x^2, x) end == (10,)
    same(gradient(lambda x: forwarddiff(lambda x: x**2, x), 5), (10.0,))


def test_forwarddiff_vector():
    # Zygote.jl/test/features.jl:341-348  gradient(x -> forwarddiff(x -> x' * x, x), [1:100;]) == (2x,)
    x = jnp.arange(1.0, 101.0)
    same(gradient(lambda x: forwarddiff(lambda x: x @ x, x), x), (2 * np.arange(1.0, 101.0),))


def test_forwarddiff_drops_closure_gradients():
    # Zygote.jl/src/lib/forward.jl:113-118  gradient(2, 3) do a, b; forwarddiff(a) do a; a*b end end
    #   == (3, nothing)
    same(gradient(lambda a, b: forwarddiff(lambda a: a * b, a), 2, 3), (3.0, None))


# ----------------------------------------------------------------------------------------------
# I5. checkpointed. Python code runs once when traced; a `jax.debug.callback` inside `f` counts how
# often the compiled forward computation itself runs, which is what Zygote's call counter observes.


def _counter():
    count = {"n": 0}

    def bump(_):
        count["n"] += 1

    return count, bump


def test_checkpointed_value_unchanged():
    # Zygote.jl/test/features.jl:7-19  pullback(checkpointed, f, args...) has the same value and pullback
    for f, args, dy in [
        (lambda x: x, (1.0,), 1.0),
        (lambda a, b, c: jnp.maximum(jnp.maximum(a, b), c), (1.0, 2.0, 3.0), 1.0),
        (lambda x: jnp.sum(jnp.cos(x)), (jnp.array([1.0, 2.0]),), 1.0),
        (lambda a, b: a @ b, (jnp.array([[1.0, 2.0], [3.0, 4.0]]), jnp.array([[0.5, -1.0], [2.0, 0.0]])),
         jnp.array([[1.0, -2.0], [0.5, 3.0]])),
    ]:
        y_ref, pb_ref = pullback(f, *args)
        y_cp, pb_cp = pullback(lambda *xs, f=f: checkpointed(f, *xs), *args)
        same(y_cp, y_ref)
        same(pb_cp(dy), pb_ref(dy))


def test_checkpointed_reruns_forward_on_back():
    # Zygote.jl/test/features.jl:34-50  plain pullback: counts stay 1; pullback(checkpointed, h∘g∘f, 4.0):
    #   1 after the forward, pb(1.0) === (nothing, 1.0) and counts 2, then 3 after a second pb(1.0)
    count, bump = _counter()

    def f(x):
        jax.debug.callback(bump, x)
        return x

    y, pb = pullback(f, 4.0)
    assert count["n"] == 1
    same(pb(1.0), (1.0,))
    assert count["n"] == 1

    count["n"] = 0
    y, pb = pullback(lambda x: checkpointed(f, x), 4.0)
    same(y, 4.0)
    assert count["n"] == 1
    same(pb(1.0), (1.0,))
    assert count["n"] == 2
    same(pb(1.0), (1.0,))
    assert count["n"] == 3


def test_checkpointed_only_some():
    # Zygote.jl/test/features.jl:51-62  x2 = f(x); checkpointed(h∘g, x2): g, h rerun on pb, f does not
    cf, bf = _counter()
    cg, bg = _counter()

    def f(x):
        jax.debug.callback(bf, x)
        return 2 * x

    def g(x):
        jax.debug.callback(bg, x)
        return jnp.sin(x)

    y, pb = pullback(lambda x: checkpointed(g, f(x)), 4.0)
    assert cf["n"] == cg["n"] == 1
    same(pb(1.0), (2 * np.cos(8.0),), rtol=1e-5)
    assert cg["n"] == 2
    assert cf["n"] == 1


def test_checkpointed_nested():
    # Zygote.jl/test/features.jl:64-96  nested checkpoints: after pb, f1, f2, f3 ran 2, 3, 4 times,
    #   and the gradient equals the unchecked one
    c1, b1 = _counter()
    c2, b2 = _counter()
    c3, b3 = _counter()

    def f1(x):
        jax.debug.callback(b1, x)
        return jnp.sin(x)

    def f2(x):
        jax.debug.callback(b2, x)
        return jnp.cos(x)

    def f3(a, b):
        jax.debug.callback(b3, a)
        return jnp.maximum(a, b)

    def nested(x):
        def outer():
            a = f1(x)

            def middle():
                b = f2(a)
                return checkpointed(lambda: f3(a, b))

            return checkpointed(middle)

        return checkpointed(outer)

    x = 0.3
    y, pb = pullback(nested, x)
    assert c1["n"] == c2["n"] == c3["n"] == 1
    g = pb(1.5)
    assert (c1["n"], c2["n"], c3["n"]) == (2, 3, 4)
    y_ref, pb_ref = pullback(lambda x: jnp.maximum(jnp.sin(x), jnp.cos(jnp.sin(x))), x)
    same(y, y_ref)
    same(g, pb_ref(1.5))


def test_checkpointed_python_counter():
    # Zygote.jl/test/features.jl:44-48  counts go 1 -> 2 after pb(1.0), with a mutable-struct counter
    count = {"n": 0}

    def f(x):
        count["n"] += 1
        return x

    y, pb = pullback(lambda x: checkpointed(f, x), 4.0)
    pb(1.0)
    assert count["n"] == 2


# ----------------------------------------------------------------------------------------------
# I6. Accumulation


def test_accumulation_131072():
    # Zygote.jl/test/features.jl:760-774  net(x) with x_k = x_1 + ... + x_{k-1};
    #   gradient(x -> sum(abs2, net(x)), ones(10,10))[1] == fill(131072, 10, 10)
    def net(x1):
        x2 = x1
        x3 = x1 + x2
        x4 = x1 + x2 + x3
        x5 = x1 + x2 + x3 + x4
        x6 = x1 + x2 + x3 + x4 + x5
        x7 = x1 + x2 + x3 + x4 + x5 + x6
        x8 = x1 + x2 + x3 + x4 + x5 + x6 + x7
        x9 = x1 + x2 + x3 + x4 + x5 + x6 + x7 + x8
        x10 = x1 + x2 + x3 + x4 + x5 + x6 + x7 + x8 + x9
        return x10

    (g,) = gradient(lambda x: jnp.sum(net(x) ** 2), jnp.ones((10, 10)))
    assert np.array_equal(np.asarray(g), np.full((10, 10), 131072.0))




def test_checkpointed_reruns_a_model_read_from_the_closure():
    # the eager backward pass calls f again with the model's arrays, BatchNorm's mode and Dropout's
    # key as in the forward pass: the gradient and the statistics equal the unchecked ones
    X = jnp.arange(8.0).reshape(2, 4)
    fluxjax.seed_(0)
    m = fluxjax.Chain(fluxjax.Dense(2, 3), fluxjax.BatchNorm(3), fluxjax.Dropout(0.5))
    ref = fluxjax.fmap(lambda v: v, m)
    calls = {"n": 0}

    def body(x):
        calls["n"] += 1
        return m(x)

    fluxjax.seed_(1)
    (g,) = gradient(lambda mm: jnp.sum(checkpointed(body, X) ** 2), m, jit=False)
    assert calls["n"] == 2
    fluxjax.seed_(1)
    (gref,) = gradient(lambda mm: jnp.sum(mm(X) ** 2), ref, jit=False)
    for k in (0, 1):
        for name in ("weight", "bias") if k == 0 else ("beta", "gamma"):
            np.testing.assert_allclose(getattr(g.layers[k], name), getattr(gref.layers[k], name), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(m[1].mu, ref[1].mu, rtol=1e-6)
    np.testing.assert_allclose(m[1].sigma2, ref[1].sigma2, rtol=1e-6)


def test_checkpointed_hidden_tracer_and_higher_order():
    # a traced value the walk cannot reach (inside a plain namespace): replayed as jax.checkpoint, the
    # gradient still flows to it; forward and reverse-over-reverse go through jax.checkpoint
    def f(a):
        h = types.SimpleNamespace(a=a)
        return checkpointed(lambda x: x * h.a, 2.0)

    y, pb = pullback(f, 3.0)
    same(y, 6.0)
    same(pb(1.0), (2.0,))
    H = fluxjax.hessian(lambda x: checkpointed(lambda z: jnp.sum(z**3), x), jnp.array([1.0, 2.0]))
    same(H, np.diag([6.0, 12.0]))
    same(gradient(lambda x: gradient(lambda z: checkpointed(jnp.sin, z), x)[0], 1.0), (-np.sin(1.0),), rtol=1e-6)


class _Record:
    pass


_LOG: dict = {}
_HISTORY: list = []
_REC = _Record()


def _logging_loss(m, x):
    y = jnp.sum(m(x) ** 2)
    _LOG["last"] = y  # keep the last loss for printing, as a training script does
    _HISTORY.append(y)
    _REC.value = y
    return y


@pytest.mark.parametrize("how", ["gradient", "gradient jit=False", "withgradient", "withgradient jit=False"])
def test_values_stored_into_a_list_dict_or_object_are_their_numbers(how):
    """Zygote leaves the number where the loss stored it (`log["last"] = y`, `history.append(y)`, a field);
    fluxjax left a dead tracer, which raised far from the cause when used. Op by op and compiled (the
    compiled call runs op by op for it), once per call, with the loss's value."""
    _LOG.clear()
    _HISTORY.clear()
    m, x = fluxjax.Dense(2, 3), jnp.arange(8.0).reshape(2, 4)
    fn = getattr(fluxjax, how.split()[0])
    for _ in range(2):
        out = fn(_logging_loss, m, x, jit="jit=False" not in how)
    want = float(jnp.sum(m(x) ** 2))
    assert len(_HISTORY) == 2
    for v in (_LOG["last"], *_HISTORY, _REC.value):
        assert not isinstance(v, jax.core.Tracer)
        np.testing.assert_allclose(float(v) + 1, want + 1, rtol=1e-6)
    if how.startswith("withgradient"):
        np.testing.assert_allclose(out.val, want, rtol=1e-6)


def test_a_value_stored_into_a_list_inside_a_compiled_function_raises_and_is_taken_out():
    """Inside `fluxjax.jit` the stored value has no number (and the program would not store it again at
    the next call): the call raises, saying what to do, and the list is as it was."""
    _HISTORY.clear()
    _HISTORY.append(1.0)
    m, x = fluxjax.Dense(2, 3), jnp.arange(8.0).reshape(2, 4)
    step = fluxjax.jit(lambda m, x: fluxjax.gradient(_logging_loss, m, x)[0])
    with pytest.raises(RuntimeError, match=r"stored a traced value into global '_\w+' .* Return the value instead"):
        step(m, x)
    assert _HISTORY == [1.0]


def test_a_nested_gradient_leaves_the_outer_ones_values_and_settles_its_own():
    """The inner `gradient` reads a layer whose weight is the outer differentiation's value: that stays (a
    gradient penalty's numbers), while the value the inner loss stores becomes a number."""
    _HISTORY.clear()
    dense = fluxjax.Dense(jnp.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]), jnp.zeros(2))
    x4 = jnp.ones((3, 4))

    def inner(x):
        y = jnp.sum(dense(x))
        _HISTORY.append(y)
        return y

    def penalty(m):
        return jnp.sum(gradient(inner, x4, jit=False)[0] ** 2)

    gp = gradient(penalty, dense, jit=False)[0]
    np.testing.assert_allclose(gp.weight, 2 * 4 * jnp.tile(jnp.sum(dense.weight, axis=0), (2, 1)), rtol=1e-6)
    assert len(_HISTORY) == 1 and not isinstance(_HISTORY[0], jax.core.Tracer)
    np.testing.assert_allclose(float(_HISTORY[0]), float(jnp.sum(dense(x4))), rtol=1e-6)
