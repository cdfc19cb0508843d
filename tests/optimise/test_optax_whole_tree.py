"""A plain optax transformation sees the whole tree of trainable arrays at once (fluxjax/optimise/wholetree.py).

Each test runs the same transformation with optax directly on a plain pytree (a list) of the same arrays
and gradients, or against a NumPy reference, and compares; fluxjax's own Optimisers.jl rules keep their
per-array meaning (`ClipNorm` clips each array, as Optimisers.jl's `ClipNorm`).
"""

import contextlib

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import fluxjax as Flux
from fluxjax.optimise import (
    Adam,
    ClipNorm,
    Descent,
    OptimiserChain,
    Part,
    TreeState,
    adjust,
    adjust_,
    freeze_,
    setup,
    thaw_,
    train_,
    update,
    update_,
)

X = jnp.asarray(np.random.default_rng(0).normal(size=(3, 8)), jnp.float32)
Y = jnp.asarray(np.random.default_rng(1).normal(size=(2, 8)), jnp.float32)


def model():
    Flux.seed_(1)
    return Flux.Chain(Flux.Dense(3, 4, Flux.tanh), Flux.Dense(4, 2))


def arrays(m):
    """The trainable arrays in the order optax sees them (the gradient's `jax.tree` order)."""
    return [m[0].weight, m[0].bias, m[1].weight, m[1].bias]


def loss(m, x=X, y=Y):
    return jnp.mean((m(x) - y) ** 2)


def plain_loss(ps, x=X, y=Y):
    W1, b1, W2, b2 = ps
    return jnp.mean((W2 @ jnp.tanh(W1 @ x + b1[:, None]) + b2[:, None] - y) ** 2)


def optax_run(tx, ps, batches):
    """`tx` with optax directly on the list `ps`, one step per batch."""
    st = tx.init(ps)
    for x, y in batches:
        g = jax.grad(plain_loss)(ps, x, y)
        u, st = tx.update(g, st, ps)
        ps = optax.apply_updates(ps, u)
    return ps


def fluxjax_run(tx, m, batches, how="update_"):
    st = setup(tx, m)
    if how == "train_":
        train_(loss, m, batches, st)
        return arrays(m)
    for x, y in batches:
        (g,) = Flux.gradient(lambda m, x=x, y=y: loss(m, x, y), m)
        if how == "update_":
            update_(st, m, g)
        else:
            st, m = update(st, m, g)
    return arrays(m)


def assert_trees_close(got, want, rtol=2e-5, atol=1e-6):
    for a, b in zip(got, want, strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=rtol, atol=atol)


BATCHES = [(X * (1 + 0.3 * k), Y - 0.2 * k) for k in range(6)]


def test_clip_by_global_norm_bounds_the_global_norm():
    m = model()
    before = [np.asarray(a) for a in arrays(m)]
    (g,) = Flux.gradient(loss, m)
    gs = [np.asarray(a) for a in (g.layers[0].weight, g.layers[0].bias, g.layers[1].weight, g.layers[1].bias)]
    norm = np.sqrt(sum(float(np.sum(a.astype(np.float64) ** 2)) for a in gs))
    c = 0.3
    per_array = [np.sqrt(np.sum(gg.astype(np.float64) ** 2)) for gg in gs]
    assert norm > c and sorted(per_array)[-2] > c  # the clip acts, and per array it would act differently
    update_(setup(optax.chain(optax.clip_by_global_norm(c), optax.sgd(0.1)), m), m, g)
    after = [np.asarray(a) for a in arrays(m)]
    for a, b, gg in zip(after, before, gs):  # x - η·g·c/‖g‖, one factor for every array
        np.testing.assert_allclose(a, b - 0.1 * gg * c / norm, rtol=1e-5, atol=1e-7)
    step = np.sqrt(sum(float(np.sum((a - b).astype(np.float64) ** 2)) for a, b in zip(after, before)))
    np.testing.assert_allclose(step, 0.1 * c, rtol=1e-5)  # per array, it would be up to 0.1·c·√4


TRANSFORMS = {
    "clip_adam": optax.chain(optax.clip_by_global_norm(0.5), optax.adam(0.05)),
    "multisteps": optax.MultiSteps(optax.adam(0.1), every_k_schedule=3),
    "masked": optax.chain(optax.masked(optax.adam(0.1), lambda p: jax.tree.map(lambda x: x.ndim == 2, p)), optax.sgd(0.01)),
    "multi_transform": optax.multi_transform(
        {"w": optax.adam(0.05), "b": optax.sgd(0.5)},
        lambda p: jax.tree.map(lambda x: "w" if x.ndim == 2 else "b", p),
    ),
    "optax_chain_mixed": optax.chain(optax.clip_by_global_norm(0.5), Adam(0.05)),  # a fluxjax rule inside optax.chain
    "optimiserchain_mixed": OptimiserChain(optax.clip_by_global_norm(0.5), Descent(0.1)),  # optax inside a fluxjax chain
    "schedule": optax.adamw(optax.linear_schedule(0.1, 0.01, 4), weight_decay=0.1),
}


def _transform_cases():
    """Every transform through `update_`; `update` and `train_` too for the global-norm clip and
    MultiSteps (the whole-tree state each path must carry), the rest of those `slow`."""
    for name, tx in TRANSFORMS.items():
        for how in ("update_", "update", "train_"):
            fast = how == "update_" or name in ("clip_adam", "multisteps")
            yield pytest.param(tx, how, id=f"{name}-{how}", marks=() if fast else pytest.mark.slow)


@pytest.mark.parametrize("tx, how", list(_transform_cases()))
def test_whole_tree_transforms_equal_optax_on_a_plain_pytree(tx, how):
    want = optax_run(tx, [jnp.asarray(a) for a in arrays(model())], BATCHES)
    got = fluxjax_run(tx, model(), BATCHES, how)
    assert_trees_close(got, want)
    assert not all(np.allclose(a, b) for a, b in zip(want, arrays(model())))  # something moved


def test_multisteps_steps_every_k():
    m = model()
    W0 = m[0].weight
    st = setup(optax.MultiSteps(optax.sgd(0.1), every_k_schedule=2), m)
    (g,) = Flux.gradient(loss, m)
    update_(st, m, g)
    np.testing.assert_array_equal(m[0].weight, W0)  # accumulating
    update_(st, m, g)
    np.testing.assert_allclose(m[0].weight, W0 - 0.1 * g.layers[0].weight, rtol=1e-6)  # mean of two equal grads


def test_the_view_is_shaped_like_the_gradient():
    seen = []

    def labels(p):
        seen.append(p)
        return jax.tree.map(lambda x: "a", p)

    m = model()
    setup(optax.multi_transform({"a": optax.sgd(0.1)}, labels), m)
    (view,) = seen
    assert view.layers[0].weight is m[0].weight and view.layers[1].bias is m[1].bias
    assert view.layers[0].sigma is None  # not trainable: absent from the view
    paths = [jax.tree_util.keystr(k) for k, _ in jax.tree_util.tree_leaves_with_path(view)]
    assert paths == [".layers[0].weight", ".layers[0].bias", ".layers[1].weight", ".layers[1].bias"]


def test_tied_arrays_share_one_state_and_sum_their_gradients():
    rng = np.random.default_rng(3)
    W = jnp.asarray(rng.normal(size=(3, 3)), jnp.float32)
    b1, b2 = jnp.asarray(rng.normal(size=3), jnp.float32), jnp.asarray(rng.normal(size=3), jnp.float32)
    m = Flux.Chain(Flux.Dense(W, b1, Flux.tanh), Flux.Dense(W, b2))
    x = jnp.asarray(rng.normal(size=(3, 5)), jnp.float32)
    tx = optax.chain(optax.clip_by_global_norm(0.3), optax.adam(0.1))
    st = setup(tx, m)
    assert isinstance(st, TreeState) and st.layout.n == 3 and st.layers[0].weight == st.layers[1].weight

    def plain(ps):
        W, b1, b2 = ps
        return jnp.sum((W @ jnp.tanh(W @ x + b1[:, None]) + b2[:, None]) ** 2)

    ps = [W, b1, b2]
    ost = tx.init(ps)
    for _ in range(3):
        (g,) = Flux.gradient(lambda m: jnp.sum(m(x) ** 2), m)
        update_(st, m, g)
        u, ost = tx.update(jax.grad(plain)(ps), ost, ps)
        ps = optax.apply_updates(ps, u)
    assert m[0].weight is m[1].weight  # still tied
    assert_trees_close([m[0].weight, m[0].bias, m[1].bias], ps)


def test_a_missing_gradient_is_zero_for_optax():
    m = model()
    st = setup(optax.adam(0.1), m)
    (g,) = Flux.gradient(loss, m)
    g.layers[1].bias = None  # no gradient for this array (Zygote's nothing)
    ps = [jnp.asarray(a) for a in arrays(m)]
    gs = [g.layers[0].weight, g.layers[0].bias, g.layers[1].weight, jnp.zeros_like(ps[3])]
    tx = optax.adam(0.1)
    u, _ = tx.update(gs, tx.init(ps), ps)
    update_(st, m, g)
    assert_trees_close(arrays(m), optax.apply_updates(ps, u))
    b = m[1].bias
    update_(st, m, None)  # no gradient at all: nothing changes, as Optimisers.jl
    assert m[1].bias is b


@pytest.mark.parametrize("whole", [False, True])
def test_clipnorm_stays_per_array(whole):
    # Optimisers.jl ClipNorm: each array is scaled to norm ≤ ω on its own (its rules.jl), also inside
    # a chain that holds an optax transformation (and so sees the whole tree).
    m = model()
    before = [np.asarray(a) for a in arrays(m)]
    (g,) = Flux.gradient(lambda m: 100 * loss(m), m)
    gs = [np.asarray(a) for a in (g.layers[0].weight, g.layers[0].bias, g.layers[1].weight, g.layers[1].bias)]
    st = setup(OptimiserChain(ClipNorm(1.0), optax.sgd(1.0) if whole else Descent(1.0)), m)
    assert isinstance(st.layers[0].weight, Part if whole else Flux.Leaf)
    update_(st, m, g)
    for a, b, gg in zip(arrays(m), before, gs):
        n = np.sqrt(np.sum(gg.astype(np.float64) ** 2))
        assert n > 1
        np.testing.assert_allclose(np.asarray(a), b - gg / n, rtol=1e-5, atol=1e-6)


def test_jax_jit_of_the_pure_update():
    m = model()
    tx = optax.chain(optax.clip_by_global_norm(0.5), optax.adam(0.05))
    st = setup(tx, m)
    step = jax.jit(lambda st, m, g: update(st, m, g))
    want = optax_run(tx, [jnp.asarray(a) for a in arrays(model())], BATCHES[:3])
    for x, y in BATCHES[:3]:
        (g,) = Flux.gradient(lambda m, x=x, y=y: loss(m, x, y), m)
        st, m = step(st, m, g)
    assert_trees_close(arrays(m), want)


def test_freeze_thaw_and_adjust():
    m = model()
    tx = optax.inject_hyperparams(optax.sgd)(learning_rate=0.1)
    st = setup(tx, m)
    (g,) = Flux.gradient(loss, m)
    W0 = m[0].weight
    freeze_(st)
    update_(st, m, g)
    assert m[0].weight is W0
    thaw_(st)
    adjust_(st, 0.01)
    update_(st, m, g)
    np.testing.assert_allclose(m[0].weight, W0 - 0.01 * g.layers[0].weight, rtol=1e-6)
    st2 = adjust(st, 0.5)  # the copying form
    assert float(st.state.hyperparams["learning_rate"]) == pytest.approx(0.01)
    assert float(st2.state.hyperparams["learning_rate"]) == pytest.approx(0.5)
    with pytest.raises(TypeError, match="whole opt_state"):
        freeze_(st.layers[0])
    with pytest.raises(TypeError, match="no hyperparameters"):
        adjust_(setup(optax.adam(0.1), m), 0.01)
    with pytest.raises(TypeError, match="not \\['b1'\\]"):
        adjust_(st, b1=0.5)


def _optax_with_schedule(ps, lrs):
    """optax on the list `ps`, setting `hyperparams["learning_rate"]` in its state before each step."""
    tx = optax.inject_hyperparams(optax.adam)(learning_rate=0.1)
    st = tx.init(ps)
    for lr, (x, y) in zip(lrs, BATCHES, strict=False):
        st.hyperparams["learning_rate"] = lr
        u, st = tx.update(jax.grad(plain_loss)(ps, x, y), st, ps)
        ps = optax.apply_updates(ps, u)
    return ps


LRS = [0.1, 0.0, jnp.asarray(0.03), np.float32(0.2), 0.05]


@pytest.mark.parametrize("how", ["update_", "withgradient-fused", "op-by-op", "jit"])
def test_setting_a_hyperparameter_in_the_optax_state_is_seen(how):
    """optax's way to change a learning rate, `opt_state.hyperparams["learning_rate"] = lr`, on the
    optax state of a `TreeState` (`st.state`): it changes the state (it was a copy, and the step went
    on with the old rate), between the gradient and `update_` too, in every way of stepping."""
    want = _optax_with_schedule([jnp.asarray(a) for a in arrays(model())], LRS)
    m = model()
    st = setup(optax.inject_hyperparams(optax.adam)(learning_rate=0.1), m)
    jstep = Flux.jit(lambda m, st, x, y: update_(st, m, Flux.gradient(lambda m: loss(m, x, y), m)[0]))
    for lr, (x, y) in zip(LRS, BATCHES, strict=False):
        if how == "jit":
            st.state.hyperparams["learning_rate"] = lr
            jstep(m, st, x, y)
            continue
        with Flux.eager() if how == "op-by-op" else contextlib.nullcontext():
            _, (g,) = Flux.withgradient(lambda m: loss(m, x, y), m)  # noqa: B023
            st.state.hyperparams["learning_rate"] = lr  # after the gradient: a fused step is not the step
            update_(st, m, g)
    assert_trees_close(arrays(m), want)
    assert st.state.hyperparams["learning_rate"].dtype == jnp.float32  # the old item's dtype
    assert float(st.state.hyperparams["learning_rate"]) == pytest.approx(0.05)


def test_the_optax_state_view_refuses_what_it_cannot_do():
    m = model()
    st = setup(optax.inject_hyperparams(optax.adam)(learning_rate=0.1), m)
    hp = st.state.hyperparams
    with pytest.raises(TypeError, match="fixed keys"):
        del hp["b1"]
    with pytest.raises(TypeError, match="fixed keys"):
        hp.pop("b1")
    with pytest.raises(KeyError, match="no item 'lr'"):
        hp["lr"] = 0.1
    assert sorted(st.state.hyperparams) == ["b1", "b2", "eps", "eps_root", "learning_rate"]
    hp.update(b1=0.5)  # through the write
    assert float(st.state.hyperparams["b1"]) == 0.5
    # the view is a pytree of optax's structure: passing it back stores optax's own containers
    before = st.statedef
    st.state = jax.tree_util.tree_map(lambda a: a, st.state)
    assert st.statedef == before
    with pytest.raises(AttributeError, match="opt_state.state"):
        _ = st.hyperparams


def test_adjust_a_fluxjax_chain_holding_optax():
    m = model()
    st = setup(OptimiserChain(optax.clip_by_global_norm(1e6), Descent(0.1)), m)
    adjust_(st, 0.01)
    (g,) = Flux.gradient(loss, m)
    W0 = m[0].weight
    update_(st, m, g)
    np.testing.assert_allclose(m[0].weight, W0 - 0.01 * g.layers[0].weight, rtol=1e-6)


def test_implicit_params_see_the_whole_tree():
    m = model()
    ps = Flux.params(m)
    before = [np.asarray(a) for a in ps]
    tx = optax.chain(optax.clip_by_global_norm(1.0), optax.sgd(0.1))
    for _ in range(2):
        gs = Flux.gradient(lambda: loss(m), ps)
        update_(tx, ps, gs)
    want = optax_run(tx, [jnp.asarray(a) for a in before], [(X, Y)] * 2)
    assert_trees_close(list(ps), want)


@pytest.mark.parametrize("eager_steps", [0, 1])
def test_implicit_optax_state_under_jit_is_refused(eager_steps):
    """`Flux.jit` of the implicit step with a plain optax transformation: its state lives with the
    `Params`, which a compiled program reads as a constant, so every call would step from the same
    state (the third step was wrong); it is refused with what to do instead, before anything moves."""
    m = model()
    ps = Flux.params(m)
    tx = optax.adam(0.1)

    def step():
        gs = Flux.gradient(lambda: loss(m), ps)
        update_(tx, ps, gs)

    for _ in range(eager_steps):
        step()
    before = [np.asarray(a) for a in ps]
    with pytest.raises(TypeError, match="plain optax transformation .* inside fluxjax.jit"):
        Flux.jit(step)()
    assert all(np.array_equal(a, np.asarray(b)) for a, b in zip(before, ps))


@pytest.mark.parametrize("implicit", [False, True])
def test_train_on_a_mesh(implicit):
    mesh = jax.make_mesh((1,), ("data",))
    tx = optax.chain(optax.clip_by_global_norm(0.5), optax.adam(0.05))
    want = optax_run(tx, [jnp.asarray(a) for a in arrays(model())], BATCHES[:3])
    m = model()
    if implicit:
        train_(lambda x, y: loss(m, x, y), Flux.params(m), BATCHES[:3], tx, mesh=mesh)
    else:
        train_(loss, m, BATCHES[:3], setup(tx, m), mesh=mesh)
    assert_trees_close(arrays(m), want)


def test_state_and_loadmodel_round_trip():
    m = model()
    tx = optax.chain(optax.clip_by_global_norm(0.5), optax.adam(0.05))
    st = setup(tx, m)
    (g,) = Flux.gradient(loss, m)
    update_(st, m, g)
    st2 = setup(tx, m)
    Flux.loadmodel_(st2, Flux.state(st))
    assert int(st2.state[1][0].count) == 1
    assert_trees_close(st2.leaves, st.leaves, rtol=0, atol=0)


def test_multisteps_given_where_the_state_belongs():
    m = model()
    (g,) = Flux.gradient(loss, m)
    with pytest.raises(TypeError, match="rule where the state belongs"):
        update_(optax.MultiSteps(optax.sgd(0.1), 2), m, g)


@pytest.mark.parametrize("jit", [True, False])
def test_implicit_train_with_multisteps_equals_explicit_updates(jit):
    Flux.seed_(2)
    m = Flux.Dense(2, 1)
    ref = Flux.fmap(lambda v: v, m)
    w0 = np.asarray(m.weight)
    x, y = jnp.arange(8.0).reshape(2, 4) / 8, jnp.zeros((1, 4))
    Flux.train_(lambda x, y: Flux.losses.mse(m(x), y), Flux.params(m), [(x, y)] * 5,
                optax.MultiSteps(optax.sgd(0.1), 2), jit=jit)
    st = Flux.setup(optax.MultiSteps(optax.sgd(0.1), 2), ref)
    for _ in range(5):
        g = Flux.gradient(lambda r: Flux.losses.mse(r(x), y), ref)[0]
        Flux.update_(st, ref, g)
    np.testing.assert_allclose(m.weight, ref.weight, rtol=1e-6)
    assert not np.allclose(m.weight, w0)  # two accumulated steps were applied
