"""A complex gradient for a real parameter raises `InexactError` (Optimisers.jl's `subtract!` into a Float32
array throws it) in every form of the step, eager and compiled, before any rule runs: the model and the
optimiser state are left as they were. A complex parameter takes complex gradients as before."""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import fluxjax as Flux
from fluxjax.loading import InexactError
from fluxjax.optimise import (
    AbstractRule,
    Adam,
    AdamW,
    ClipGrad,
    Descent,
    Momentum,
    OptimiserChain,
    WeightDecay,
    eagerstep,
    setup,
    update,
    update_,
)

X = jnp.asarray(np.random.default_rng(0).normal(size=(2, 5)), jnp.float32)
AT = r"^update_: the gradient at \.layers\[1\]\.weight is complex64, but the array it updates is float32: "
FIX = r"nothing was updated\. To go on, pass jnp\.real\(g\) if only the real part is meant"


def _model():
    Flux.seed_(5)
    return Flux.Chain(Flux.Dense(2, 3, Flux.tanh), Flux.Dense(3, 1))


def _loss(m):
    return jnp.sum(m(X) ** 2)


def _complex_grad(m):
    g = Flux.gradient(_loss, m)[0]
    g.layers[1].weight = g.layers[1].weight * (1 + 5j)
    return g


def _hooked(m, x):
    """A loss whose gradient for `m[1].weight` is complex: `hook` multiplies its cotangent by 1 + i."""
    w = Flux.hook(lambda d: d * (1 + 1j), m[1].weight)
    return jnp.sum((w @ m[0](x)) ** 2)


def _arrays(tree):
    return [np.asarray(a) for a in jax.tree_util.tree_leaves(tree)]


def _untouched(m, st, m0, st0):
    for a, b in zip(_arrays(m), m0, strict=True):
        np.testing.assert_array_equal(a, b)
    for a, b in zip(_arrays(st), st0, strict=True):
        np.testing.assert_array_equal(a, b)


RULES = [
    lambda: Descent(0.1),
    lambda: Adam(0.01),
    lambda: Momentum(0.01),
    lambda: AdamW(0.01, lambda_=0.1),
    lambda: OptimiserChain(ClipGrad(1.0), WeightDecay(1e-3), Adam(0.01)),
    lambda: optax.adam(0.01),  # whole tree
    lambda: OptimiserChain(optax.clip_by_global_norm(1.0), Adam(0.01)),  # whole tree
]


@pytest.mark.parametrize("make", RULES, ids=[f"rule{i}" for i in range(len(RULES))])
@pytest.mark.parametrize("how", ["eager", "pure", "fluxjax.jit", "jax.jit pure"])
def test_a_complex_gradient_for_a_real_parameter_raises_and_changes_nothing(make, how):
    m = _model()
    st = setup(make(), m)
    update_(st, m, Flux.gradient(_loss, m)[0])  # a real step first: moments that must stay
    m0, st0 = _arrays(m), _arrays(st)
    g = _complex_grad(m)
    step = {
        "eager": update_,
        "pure": update,
        "fluxjax.jit": Flux.jit(lambda s, m, g: update_(s, m, g)),
        "jax.jit pure": jax.jit(update),
    }[how]
    with warnings.catch_warnings():
        warnings.simplefilter("error", np.exceptions.ComplexWarning)  # (old: only this warning)
        with pytest.raises(InexactError, match=AT + r"a real array cannot take a complex step exactly .*" + FIX):
            step(st, m, g)
    _untouched(m, st, m0, st0)
    update_(st, m, Flux.gradient(_loss, m)[0])  # and it steps on
    assert not np.array_equal(np.asarray(m[1].weight), m0[2])


@pytest.mark.parametrize("make", [lambda: Adam(0.01), lambda: optax.sgd(0.1)], ids=["rule", "optax"])
def test_the_implicit_form_names_the_parameter(make):
    m = _model()
    ps = Flux.params(m)
    gs = Flux.gradient(lambda: _loss(m), ps)
    gs[m[1].weight] = gs[m[1].weight] * 1j
    m0 = _arrays(m)
    with pytest.raises(InexactError, match=r"^update_: the gradient of params\(\.\.\.\)\[2\] \(shape \(1, 3\)\) is complex64, "
                       r"but the array it updates is float32"):
        update_(make(), ps, gs)
    for a, b in zip(_arrays(m), m0):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("call", ["train_", "train_ jit=False", "trainstep_", "trainstep_ jit=False",
                                  "trainstep_withgradient_", "fluxjax.jit step"])
def test_train_and_compiled_steps_raise_at_trace_time(call):
    m = _model()
    st = setup(Adam(0.01), m)
    m0, st0 = _arrays(m), _arrays(st)
    d = (X,)

    def step(m, s):
        _, g = Flux.withgradient(_hooked, m, X)
        update_(s, m, g[0])

    run = {
        "train_": lambda: Flux.train_(_hooked, m, [d, d], st),
        "train_ jit=False": lambda: Flux.train_(_hooked, m, [d, d], st, jit=False),
        "trainstep_": lambda: Flux.trainstep_(_hooked, m, d, st),
        "trainstep_ jit=False": lambda: Flux.trainstep_(_hooked, m, d, st, jit=False),
        "trainstep_withgradient_": lambda: Flux.trainstep_withgradient_(_hooked, m, d, st),
        "fluxjax.jit step": lambda: Flux.jit(step)(m, st),
    }[call]
    with pytest.raises(InexactError, match=AT):
        run()
    _untouched(m, st, m0, st0)


def test_the_fused_eager_step_is_not_committed_and_raises():
    m = _model()
    st = setup(Adam(0.01), m)  # links the model: its gradient runs fused with the update
    for _ in range(2):
        _, g = Flux.withgradient(_loss, m)
        update_(st, m, g[0])
    _, g = Flux.withgradient(_loss, m)  # a fused step, pending
    m0, st0 = _arrays(m), _arrays(st)
    g[0].layers[1].weight = g[0].layers[1].weight * 1j
    committed = eagerstep.stats["committed"]
    with pytest.raises(InexactError, match=AT):
        update_(st, m, g[0])
    assert eagerstep.stats["committed"] == committed
    _untouched(m, st, m0, st0)
    # a gradient that is complex from the start (a hook): the fused trace refuses it, so does update_
    m2 = _model()
    st2 = setup(Adam(0.01), m2)
    _, g2 = Flux.withgradient(_hooked, m2, X)
    assert g2[0].layers[1].weight.dtype == jnp.complex64
    m0, st0 = _arrays(m2), _arrays(st2)
    with pytest.raises(InexactError, match=AT):
        update_(st2, m2, g2[0])
    _untouched(m2, st2, m0, st0)


def test_a_bare_real_array_refuses_a_python_complex_gradient_and_a_complex_one_takes_it():
    x = jnp.asarray(1.0, jnp.float32)
    s = setup(Descent(0.5), x)
    with pytest.raises(InexactError, match=r"^update_: the gradient at the top is complex, but the array it updates is float32"):
        update(s, x, 1 + 2j)
    # complex parameters: a complex gradient (and a real one) step as before, eager and compiled
    z = Flux.Dense(jnp.asarray([[1 + 1j, 2 - 1j]], jnp.complex64), False)
    st = setup(Descent(0.5), z)
    g = Flux.gradient(lambda m: jnp.real(jnp.sum(m(jnp.asarray([1.0, 2j], jnp.complex64)))), z)[0]
    assert g.weight.dtype == jnp.complex64
    w = z.weight
    update_(st, z, g)
    np.testing.assert_allclose(z.weight, w - 0.5 * g.weight)
    Flux.jit(lambda s, m, g: update_(s, m, g))(st, z, g)
    np.testing.assert_allclose(z.weight, w - 1.0 * g.weight, rtol=1e-6)
    _, z2 = update(st, z, {"weight": jnp.ones((1, 2)), "bias": None, "sigma": None})
    np.testing.assert_allclose(z2.weight, z.weight - 0.5, rtol=1e-6)


class _ComplexStep(AbstractRule):
    def apply_(self, state, x, dx):
        return state, dx * (1 + 1j)


@pytest.mark.parametrize("how", ["eager", "train_", "optax in a chain"])
def test_a_rule_whose_step_is_complex_for_a_real_parameter_raises(how):
    m = _model()
    rule = OptimiserChain(optax.scale(1j)) if how == "optax in a chain" else _ComplexStep()
    st = setup(rule, m)
    m0 = _arrays(m)
    what = r"the update of OptimiserChain" if how == "optax in a chain" else r"the step of _ComplexStep\(\)"
    with pytest.raises(InexactError, match=rf"^update_: {what} is complex64, but the array it updates is float32"):
        if how == "train_":
            Flux.train_(lambda m, x: _loss(m), m, [(X,)], st)
        else:
            update_(st, m, Flux.gradient(_loss, m)[0])
    for a, b in zip(_arrays(m), m0):
        np.testing.assert_array_equal(a, b)
