"""Leaves set up and stepped together share one array for their step counters and hyperparameters
(fluxjax/core/sharing.py), and `fluxjax.jit` takes such an array as one input (fluxjax/compiled/call.py). The
numbers stay Optimisers.jl's: a leaf that is not stepped keeps its own count."""

import jax
import jax.numpy as jnp
import numpy as np

import fluxjax as Flux
from fluxjax.losses import mse
from fluxjax.optimise import AccumGrad, Adam, OptimiserChain, RAdam, adjust_, freeze_, setup, thaw_, update_

B1, B2 = 0.9, 0.999


def _model():
    Flux.seed_(3)
    return Flux.Chain(Flux.Dense(2, 3, jnp.tanh), Flux.Dense(3, 1))


X = jax.random.normal(jax.random.PRNGKey(1), (2, 8))
Y = jnp.sin(X[:1])


def _leaves(st):
    return [st.layers[0].weight, st.layers[0].bias, st.layers[1].weight, st.layers[1].bias]


def _grads(m):
    return Flux.gradient(lambda m: mse(m(X), Y), m)[0]


@Flux.jit
def _step(model, opt_state, x, y):
    loss, (g,) = Flux.withgradient(lambda m: mse(m(x), y), model)
    update_(opt_state, model, g)
    return loss


@Flux.jit
def _step_but_last_bias(model, opt_state, x, y):
    loss, (g,) = Flux.withgradient(lambda m: mse(m(x), y), model)
    g.layers[1].bias = None  # Zygote's `nothing`: Optimisers.jl leaves that array and its state alone
    update_(opt_state, model, g)
    return loss


def test_setup_shares_counters_and_hyperparameters_not_moments():
    st = setup(Adam(0.01), _model())
    states = [leaf.state for leaf in _leaves(st)]
    assert all(s.beta_t is states[0].beta_t for s in states)
    assert all(s.hyper["eta"] is states[0].hyper["eta"] and s.hyper["beta"][1] is states[0].hyper["beta"][1] for s in states)
    assert len({id(s.mt) for s in states}) == 4
    assert len({id(s.hyper) for s in states}) == 4  # each leaf's dict is its own; only the arrays are shared
    a, b = Adam().init(jnp.ones(2)), Adam().init(jnp.ones(2))  # plain optax use: nothing shared
    assert a.beta_t is not b.beta_t


def _numpy_adam_bt(steps):
    return np.array([B1**steps, B2**steps], np.float32)


def test_a_leaf_not_stepped_keeps_its_own_count_eager_and_jit():
    runs = {}
    for how in ("eager", "jit"):
        m = _model()
        st = setup(Adam(0.01), m)
        for k in range(4):
            if how == "jit":
                (_step_but_last_bias if k == 1 else _step)(m, st, X, Y)
            else:
                g = _grads(m)
                if k == 1:
                    g.layers[1].bias = None
                update_(st, m, g)
        leaves = _leaves(st)
        for leaf in leaves[:3]:
            np.testing.assert_allclose(leaf.state.beta_t, _numpy_adam_bt(5), rtol=1e-6)
            assert leaf.state.beta_t is leaves[0].state.beta_t
        np.testing.assert_allclose(leaves[3].state.beta_t, _numpy_adam_bt(4), rtol=1e-6)
        assert leaves[3].state.beta_t is not leaves[0].state.beta_t
        runs[how] = (m, st)
    for u, v in zip(jax.tree_util.tree_leaves(runs["eager"]), jax.tree_util.tree_leaves(runs["jit"])):
        np.testing.assert_allclose(u, v, rtol=2e-6, atol=1e-7)


def test_sharing_does_not_change_the_numbers():
    """The same steps with states made one by one (nothing shared) give the same model."""
    m, ref = _model(), _model()
    st = setup(Adam(0.01), m)
    rule = Adam(0.01)
    names = [(i, name) for i in (0, 1) for name in ("weight", "bias")]
    ref_states = {(i, name): rule.init(getattr(ref[i], name)) for i, name in names}
    assert ref_states[0, "weight"].beta_t is not ref_states[0, "bias"].beta_t
    for _ in range(3):
        _step(m, st, X, Y)
        g = _grads(ref)
        for i, name in names:
            x = getattr(ref[i], name)
            upd, ref_states[i, name] = rule.update(getattr(g.layers[i], name), ref_states[i, name], x)
            setattr(ref[i], name, x + upd)
    for u, v in zip(jax.tree_util.tree_leaves(m), jax.tree_util.tree_leaves(ref)):
        np.testing.assert_allclose(u, v, rtol=2e-6, atol=1e-7)


def _program(step, *args):
    """The jaxpr of the program `step` last compiled for `args`."""
    plan = step._plan
    entry = plan.entry
    leaves = plan.load(args)
    plan.release()
    entry.current = (plan.box, plan.walk, ({}, {}))
    try:
        return entry.top.trace(leaves).jaxpr
    finally:
        entry.current = None


def test_the_compiled_step_takes_shared_arrays_once_and_updates_bt_once():
    m = _model()
    st = setup(Adam(0.01), m)
    _step(m, st, X, Y)
    _step(m, st, X, Y)
    jaxpr = _program(_step, m, st, X, Y)
    # 4 parameters + 8 moments + one βt + eta, β₁, β₂, ϵ + x, y + the global key (unused: pruned when
    # compiled); not 4 βt and 16 hyperparameters
    assert len(jaxpr.in_avals) == 4 + 8 + 1 + 4 + 2 + 1
    bt_updates = [e for e in jaxpr.eqns if e.primitive.name == "mul" and e.outvars[0].aval.shape == (2,)]
    assert len(bt_updates) == 1
    assert len(jaxpr.out_avals) == 1 + 4 + 8 + 1  # loss, parameters, moments, one βt


def test_broken_sharing_compiles_once_more_and_stays_right():
    step = Flux.jit(_step.fn)
    m, ref = _model(), _model()
    st, st_ref = setup(Adam(0.01), m), setup(Adam(0.01), ref)
    step(m, st, X, Y)
    leaf = st.layers[1].bias
    leaf.state = leaf.state._replace(beta_t=leaf.state.beta_t + 0)  # equal values, another array
    for _ in range(3):
        step(m, st, X, Y)
    assert step.cache_size() == 2
    for _ in range(4):
        update_(st_ref, ref, _grads(ref))
    for u, v in zip(jax.tree_util.tree_leaves(m), jax.tree_util.tree_leaves(ref)):
        np.testing.assert_allclose(u, v, rtol=2e-6, atol=1e-7)


def test_adjust_of_the_whole_state_keeps_sharing_and_the_compiled_step():
    m = _model()
    st = setup(Adam(0.01), m)
    _step(m, st, X, Y)
    n = _step.cache_size()
    adjust_(st, 0.001)
    etas = [leaf.state.hyper["eta"] for leaf in _leaves(st)]
    assert all(e is etas[0] for e in etas) and float(etas[0]) == np.float32(0.001)
    _step(m, st, X, Y)
    adjust_(st, beta=(0.8, 0.99))
    _step(m, st, X, Y)
    assert _step.cache_size() == n


def test_freeze_and_thaw_keep_the_counts_apart():
    m = _model()
    st = setup(Adam(0.01), m)
    freeze_(st.layers[0])
    _step(m, st, X, Y)
    thaw_(st.layers[0])
    _step(m, st, X, Y)
    bts = [leaf.state.beta_t for leaf in _leaves(st)]
    np.testing.assert_allclose(bts[0], _numpy_adam_bt(2), rtol=1e-6)
    np.testing.assert_allclose(bts[2], _numpy_adam_bt(3), rtol=1e-6)
    assert bts[0] is bts[1] and bts[2] is bts[3]


def test_radam_step_and_accumgrad_counter_are_shared():
    for rule, field in ((RAdam(), "t"), (OptimiserChain(AccumGrad(2), Adam()), None)):
        m = _model()
        st = setup(rule, m)
        for _ in range(3):
            _step(m, st, X, Y)
        states = [leaf.state for leaf in _leaves(st)]
        if field == "t":
            assert all(s.t is states[0].t for s in states) and int(states[0].t) == 4
        else:
            assert all(s[0].counter is states[0][0].counter for s in states) and int(states[0][0].counter) == 2
            assert all(s[1].beta_t is states[0][1].beta_t for s in states)
            np.testing.assert_allclose(states[0][1].beta_t, _numpy_adam_bt(2), rtol=1e-6)  # Adam ran once, at step 2


def test_loading_a_state_keeps_counts_apart_and_shares_equal_ones(tmp_path):
    """A fresh `setup` shares its βt; a checkpoint where one leaf was not stepped loads into it (the
    shared arrays are not tied parameters), and the leaves whose loaded values agree share again."""
    m = _model()
    st = setup(Adam(0.01), m)
    g = _grads(m)
    g.layers[1].bias = None
    update_(st, m, g)
    Flux.save(tmp_path, m, st)
    for load in ("checkpoint", "loadmodel_"):
        m2 = _model()
        st2 = setup(Adam(0.01), m2)
        if load == "checkpoint":
            Flux.load(tmp_path, m2, st2)
        else:
            Flux.loadmodel_(st2, st)
        leaves = _leaves(st2)
        for leaf in leaves[:3]:
            np.testing.assert_allclose(leaf.state.beta_t, _numpy_adam_bt(2), rtol=1e-6)
            assert leaf.state.beta_t is leaves[0].state.beta_t
        np.testing.assert_allclose(leaves[3].state.beta_t, _numpy_adam_bt(1), rtol=1e-6)
        assert all(leaf.state.hyper["eta"] is leaves[0].state.hyper["eta"] for leaf in leaves)
        for u, v in zip(jax.tree_util.tree_leaves(st2), jax.tree_util.tree_leaves(st)):
            np.testing.assert_array_equal(u, v)


def test_once_keys_arrays_by_identity_numpy_too():
    from fluxjax.core.sharing import once, sharing

    a, b = np.ones(2, np.float32), np.ones(2, np.float32)
    with sharing():
        x, y, z = once(np.add, a, 1.0), once(np.add, a, 1.0), once(np.add, b, 1.0)
    assert x is y and x is not z
    np.testing.assert_array_equal(z, [2.0, 2.0])
