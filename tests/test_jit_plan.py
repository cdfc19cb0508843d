"""`fluxjax.jit` reuses its walk of the arguments between calls (fluxjax/compiled/plan.py): it must notice every
change that matters (layers replaced, containers edited, mode switched, arrays rebound outside) and
never write into the wrong object."""

import contextlib
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fluxjax as Flux
import fluxjax.compiled.call as state_mod
from fluxjax.losses import mse


@pytest.fixture
def walks(monkeypatch):
    """Counts the full walks `fluxjax.jit` makes (the reuse path makes none)."""
    n = [0]
    real = state_mod.walk

    def counting(box, *a, **k):
        n[0] += 1
        return real(box, *a, **k)

    monkeypatch.setattr(state_mod, "walk", counting)
    return n


@Flux.jit
def _step(model, opt_state, x, y):
    loss, (g,) = Flux.withgradient(lambda m: mse(m(x), y), model)
    Flux.update_(opt_state, model, g)
    return loss


@Flux.jit
def _forward(model, x):
    return model(x)


def _data(seed=0, n=4):
    k1, k2 = jax.random.split(jax.random.PRNGKey(seed))
    return jax.random.normal(k1, (3, n)), jax.random.normal(k2, (2, n))


def _eager_step(model, opt_state, x, y):
    loss, (g,) = Flux.withgradient(lambda m: mse(m(x), y), model)
    Flux.update_(opt_state, model, g)
    return loss


def _pair():
    Flux.seed_(1)
    a = Flux.Chain(Flux.Dense(3, 5, Flux.relu), Flux.Dense(5, 2))
    b = Flux.fmap(lambda v: v, a)
    return a, b


def _assert_same(m1, m2):
    for u, v in zip(jax.tree_util.tree_leaves(m1), jax.tree_util.tree_leaves(m2)):
        np.testing.assert_allclose(np.asarray(u), np.asarray(v), rtol=1e-6, atol=1e-7)


def test_warm_calls_reuse_the_walk_and_match_eager(walks):
    m, ref = _pair()
    o, oref = Flux.setup(Flux.Adam(0.01), m), Flux.setup(Flux.Adam(0.01), ref)
    losses = [_step(m, o, *_data(i)) for i in range(5)]
    assert walks[0] == 1  # new batches every call, one walk in all
    for i, loss in enumerate(losses):
        np.testing.assert_allclose(float(loss), float(_eager_step(ref, oref, *_data(i))), rtol=1e-6)
    _assert_same(m, ref)
    _assert_same(o, oref)


def test_replacing_a_layer_is_seen(walks):
    m, _ = _pair()
    x, _ = _data()
    _forward(m, x)
    Flux.seed_(5)
    m.layers = (m.layers[0], Flux.Dense(5, 2, bias=False))
    np.testing.assert_allclose(np.asarray(_forward(m, x)), np.asarray(m(x)), rtol=1e-6)
    m[1].weight = jnp.zeros((2, 5))
    assert float(jnp.abs(_forward(m, x)).max()) == 0.0
    assert walks[0] == 3


def test_editing_a_named_chain_is_seen():
    Flux.seed_(0)
    m = Flux.Chain(enc=Flux.Dense(3, 5), dec=Flux.Dense(5, 2))
    x, _ = _data()
    _forward(m, x)
    m.layers["dec"] = Flux.Dense(5, 2, Flux.sigmoid)
    out = _forward(m, x)
    assert float(out.min()) > 0  # the new sigmoid layer ran
    np.testing.assert_allclose(np.asarray(out), np.asarray(m(x)), rtol=1e-6)


def test_appending_to_a_list_field_is_seen():
    @Flux.layer
    class Stack:
        def __init__(self):
            self.blocks = [Flux.Dense(3, 3)]

        def __call__(self, x):
            for b in self.blocks:
                x = b(x)
            return x

    Flux.seed_(0)
    s = Stack()
    x, _ = _data()
    _forward(s, x)
    s.blocks.append(Flux.Dense(3, 3, Flux.relu))
    out = _forward(s, x)
    assert float(out.min()) >= 0
    np.testing.assert_allclose(np.asarray(out), np.asarray(s(x)), rtol=1e-6)


def test_arrays_rebound_outside_are_read_afresh():
    m, ref = _pair()
    o, oref = Flux.setup(Flux.Descent(0.1), m), Flux.setup(Flux.Descent(0.1), ref)
    x, y = _data()
    _step(m, o, x, y)
    _eager_step(ref, oref, x, y)
    # an eager update between compiled steps rebinds arrays through the state thread
    _eager_step(m, o, x, y)
    _eager_step(ref, oref, x, y)
    _step(m, o, x, y)
    _eager_step(ref, oref, x, y)
    _assert_same(m, ref)


def test_mode_switch_between_calls():
    Flux.seed_(0)
    m = Flux.Chain(Flux.Dense(3, 4), Flux.BatchNorm(4))
    x, _ = _data(n=6)
    Flux.trainmode_(m)
    y_train = _forward(m, x)
    np.testing.assert_allclose(np.asarray(jnp.mean(y_train, axis=1)), 0, atol=1e-5)  # batch statistics
    Flux.testmode_(m)
    y_test = _forward(m, x)
    np.testing.assert_allclose(np.asarray(y_test), np.asarray(m(x)), rtol=1e-6)  # running statistics
    assert not np.allclose(np.asarray(y_train), np.asarray(y_test))


def test_two_models_of_one_structure_each_get_their_own_update():
    m1, ref1 = _pair()
    Flux.seed_(2)
    m2 = Flux.Chain(Flux.Dense(3, 5, Flux.relu), Flux.Dense(5, 2))
    ref2 = Flux.fmap(lambda v: v, m2)
    o1, o2 = Flux.setup(Flux.Adam(0.01), m1), Flux.setup(Flux.Adam(0.01), m2)
    r1, r2 = Flux.setup(Flux.Adam(0.01), ref1), Flux.setup(Flux.Adam(0.01), ref2)
    for i in range(3):
        x, y = _data(i)
        _step(m1, o1, x, y)
        _eager_step(ref1, r1, x, y)
        _step(m2, o2, x, y)
        _eager_step(ref2, r2, x, y)
    _assert_same(m1, ref1)
    _assert_same(m2, ref2)
    _assert_same(o1, r1)
    _assert_same(o2, r2)


def test_adjust_between_calls_changes_the_step():
    m, ref = _pair()
    o, oref = Flux.setup(Flux.Adam(0.01), m), Flux.setup(Flux.Adam(0.01), ref)
    x, y = _data()
    _step(m, o, x, y)
    _eager_step(ref, oref, x, y)
    Flux.adjust_(o, 0.5)
    Flux.adjust_(oref, 0.5)
    _step(m, o, x, y)
    _eager_step(ref, oref, x, y)
    _assert_same(m, ref)


def test_unknown_pytree_node_is_walked_every_call(walks):
    from dataclasses import dataclass

    @jax.tree_util.register_dataclass
    @dataclass
    class Holder:
        w: jax.Array

    @Flux.jit
    def f(h, x):
        return h.w @ x

    h = Holder(jnp.ones((2, 3)))
    x, _ = _data()
    f(h, x)
    h.w = 2 * jnp.ones((2, 3))  # a plain attribute set that fluxjax cannot see
    np.testing.assert_allclose(np.asarray(f(h, x)), np.asarray(h.w @ x), rtol=1e-6)
    assert walks[0] == 2


def test_equal_rules_share_one_compilation():
    m1, m2 = _pair()
    x, y = _data()
    before = _step.compilations
    _step(m1, Flux.setup(Flux.Adam(0.01), m1), x, y)
    _step(m2, Flux.setup(Flux.Adam(0.01), m2), x, y)  # another Adam(0.01) object: the same program
    assert _step.compilations - before <= 1
    _step(m2, Flux.setup(Flux.Adam(0.02), m2), x, y)  # eta lives in the state, so still the same
    assert _step.compilations - before <= 1
    _step(m2, Flux.setup(Flux.Momentum(0.01), m2), x, y)
    assert _step.compilations - before <= 2


def test_a_lambda_written_in_a_loop_compiles_once():
    m, ref = _pair()
    o, oref = Flux.setup(Flux.Descent(0.1), m), Flux.setup(Flux.Descent(0.1), ref)
    from fluxjax.optimise.train import _compiled

    x, y = _data()
    before = _compiled.compilations
    for _epoch in range(3):
        Flux.train_(lambda m, x, y: mse(m(x), y), m, [(x, y)], o)
    assert _compiled.compilations - before == 1
    for scale in (1.0, 3.0):  # a captured value is baked in, so a new value is a new program
        Flux.train_(lambda m, x, y: scale * mse(m(x), y), m, [(x, y)], o)  # noqa: B023
    assert _compiled.compilations - before == 3
    for _ in range(3):
        _eager_step(ref, oref, x, y)
    for scale in (1.0, 3.0):
        loss, (g,) = Flux.withgradient(lambda m: scale * mse(m(x), y), ref)  # noqa: B023
        Flux.update_(oref, ref, g)
    _assert_same(m, ref)


def test_implicit_train_reuses_the_walk(walks):
    m, _ = _pair()
    ps, rule = Flux.params(m), Flux.Adam(0.01)
    x, y = _data()

    def loss(x, y):
        return mse(m(x), y)

    Flux.train_(loss, ps, [(x, y)] * 2, rule)
    Flux.train_(loss, ps, [(x, y)] * 2, rule)
    assert walks[0] == 1


def test_an_optimiser_dict_edited_in_place_is_seen(walks):
    """The generated checks and reads notice a hyperparameter dict changed in place: a new array
    (which also ends its sharing with the other leaves), and a new tuple in it (not an array)."""
    m, ref = _pair()
    o, oref = Flux.setup(Flux.Adam(0.01), m), Flux.setup(Flux.Adam(0.01), ref)
    x, y = _data()

    def run(step, model, opt):
        step(model, opt, x, y)
        opt.layers[0].weight.state.hyper["eta"] = jnp.asarray(0.5, jnp.float32)
        step(model, opt, x, y)
        step(model, opt, x, y)
        n = walks[0]
        hyper = opt.layers[1].bias.state.hyper
        hyper["beta"] = (jnp.asarray(0.8, jnp.float32), hyper["beta"][1])
        step(model, opt, x, y)
        return n

    assert run(_step, m, o) == 2  # the first call, then the call after the array was replaced
    assert walks[0] == 3
    run(_eager_step, ref, oref)
    _assert_same(m, ref)
    _assert_same(o, oref)


_COMPILES: list[list] = []


def _on_event(name: str, *_args, **_kw) -> None:
    if name == "/jax/core/compile/backend_compile_duration":
        for sink in _COMPILES:
            sink.append(name)


jax.monitoring.register_event_duration_secs_listener(_on_event)


@contextlib.contextmanager
def _counting_compiles():
    """The XLA compiles that happen inside the block (jax.monitoring's compile events)."""
    sink: list = []
    _COMPILES.append(sink)
    try:
        yield sink
    finally:
        _COMPILES.remove(sink)


def test_committed_data_commits_the_model_so_the_step_compiles_once():
    # jax compiles a call apart per pattern of committed arguments, and a program that takes a committed
    # array returns committed ones: without committing the model beside the data, the first call and
    # every later one would compile separately (plain jax.jit does compile twice here).
    @Flux.jit
    def step(model, opt_state, x, y):
        loss, (g,) = Flux.withgradient(lambda m: mse(m(x), y), model)
        Flux.update_(opt_state, model, g)
        return loss

    Flux.seed_(0)
    m = Flux.Chain(Flux.Dense(3, 4, Flux.relu), Flux.BatchNorm(4), Flux.Dense(4, 2))
    opt = Flux.setup(Flux.Adam(0.01), m)
    twin = Flux.Chain(Flux.Dense(3, 4, Flux.relu), Flux.BatchNorm(4), Flux.Dense(4, 2))
    Flux.loadmodel_(twin, m)
    twin_opt = Flux.setup(Flux.Adam(0.01), twin)
    assert not any(a.committed for a in jax.tree_util.tree_leaves((m, opt)))
    dev = jax.devices()[0]
    x = jax.device_put(jax.random.normal(jax.random.PRNGKey(1), (3, 8)), dev)
    y = jax.device_put(jax.random.normal(jax.random.PRNGKey(2), (2, 8)), dev)
    losses = [float(step(m, opt, x, y))]
    with _counting_compiles() as compiles:
        losses += [float(step(m, opt, x, y)) for _ in range(2)]
    assert compiles == []  # the calls after the first reuse its program
    leaves = jax.tree_util.tree_leaves((m, opt))
    assert all(a.committed and a.devices() == {dev} for a in leaves)
    assert len({id(a) for a in leaves}) < len(leaves)  # Adam's shared βt is still one array
    # the same steps on uncommitted data: the same numbers, and the model left uncommitted
    twin_losses = [float(step(twin, twin_opt, np.asarray(x), np.asarray(y))) for _ in range(3)]
    np.testing.assert_allclose(twin_losses, losses, rtol=1e-6)
    assert not any(a.committed for a in jax.tree_util.tree_leaves((twin, twin_opt)))


@Flux.jit
def _apply(f, model, x):
    return f(model, x)


def _scaled(scale):
    return lambda m, x: m(x) * scale  # a new cell per call of _scaled


def test_a_new_function_of_the_same_code_reuses_the_walk_only_over_the_same_cells(walks):
    """A function argument may be a new function object at every call (a lambda written in a loop):
    the walk is reused when it is the same code over the same closure cells, and the values the cells
    hold now are what the call computes with; a function over other cells, or another code, walks."""
    m, _ = _pair()
    x, _y = _data()
    outs = []
    for scale in (1.0, 1.0, 2.0, 2.0):
        outs.append(_apply(lambda m, x: m(x) * scale, m, x))  # noqa: B023 (one cell, changing contents)
    for k, scale in enumerate((1.0, 1.0, 2.0, 2.0)):
        np.testing.assert_allclose(outs[k], m(x) * scale, rtol=1e-6)
    assert walks[0] == 2  # the first call, and the call after the cell's value changed
    for scale in (3.0, 4.0):  # same code, other cells: walked each time, each value seen
        np.testing.assert_allclose(_apply(_scaled(scale), m, x), m(x) * scale, rtol=1e-6)
    assert walks[0] == 4
    np.testing.assert_allclose(_apply(lambda m, x: m(x) - 1.0, m, x), m(x) - 1.0, rtol=1e-6)  # other code
    assert walks[0] == 5
    for d in (1.0, 2.0):  # a default argument is a value of the function object: not reused across objects
        np.testing.assert_allclose(_apply(lambda m, x, d=d: m(x) + d, m, x), m(x) + d, rtol=1e-6)
    assert walks[0] == 7


def test_an_eager_loop_keeps_its_walks_from_step_to_step(walks):
    """An eager `withgradient` + `update_` loop over a fresh lambda per step: the optimiser step rebinds
    its states to new arrays in the same containers, which is not a change of structure, so neither
    the gradient's walk nor the fused step's is redone."""

    m, ref = _pair()
    o, oref = Flux.setup(Flux.Adam(0.01), m), Flux.setup(Flux.Adam(0.01), ref)
    batches = [_data(seed) for seed in range(6)]
    with Flux.eager():
        for x, y in batches:
            _eager_step(ref, oref, x, y)
    before = walks[0]
    for x, y in batches:
        _eager_step(m, o, x, y)
    assert walks[0] - before <= 3  # the plain gradient's first call, the fused program's first, and one spare
    _assert_same((m, o), (ref, oref))


def test_the_concrete_array_types_are_concrete_even_when_first_asked_while_tracing():
    """`_concrete()` (the fast type check of generated reuse checks) may first be called inside a trace
    (a `Containers` made while tracing): it must still name the concrete array type, not a tracer's."""
    from fluxjax.compiled.plan import _concrete

    got = []
    jax.jit(lambda x: (got.append(_concrete.__wrapped__()), x)[1])(1.0)
    assert type(jnp.zeros(2)) in got[0] and np.ndarray in got[0]
    assert not any(issubclass(t, jax.core.Tracer) for t in got[0])


class _State(NamedTuple):
    mt: object
    vt: object
    hyper: object


class _Other(NamedTuple):
    mt: object
    vt: object
    hyper: object


def _variants(a):
    """Items to put where an optimiser state `_State(a, a, {"eta": a, "beta": (a, a)})` was."""
    b = jnp.ones_like(a)
    h = lambda **kw: {"eta": b, "beta": (b, b), **kw}
    return [
        _State(b, b, h()), _State(np.ones(2), b, h()), _State(b, b, {"beta": (b, b), "eta": b}),  # fit
        _State(b, None, h()), _State(b, b, h(extra=b)), _State(b, b, {"eta": b}), (b, b, h()),
        _Other(b, b, h()), _State(b, b, h(beta=(b,))), _State(b, b, h(beta=[b, b])),
        _State(b, b, h(eta=1.0)), _State(b, (b,), h()),  # do not
    ]


@given(st.lists(st.integers(0, 11), min_size=1, max_size=4))
@settings(max_examples=60, deadline=None)
def test_a_state_list_check_agrees_with_its_tree_structure(picks):
    """`Containers.holds()` inlines the check of a state tuple (tuples, namedtuples, dicts and None around
    arrays) and falls back to `tree_flatten` when that says no: either way it answers what comparing
    the tree structures and the leaves' being arrays answers."""
    from fluxjax.compiled.plan import Containers

    a = jnp.zeros(2)
    old = _State(a, a, {"eta": a, "beta": (a, a)})
    lst = [old] * 4
    c = Containers([lst])
    assert c.holds()
    for k, pick in enumerate(picks):
        new = _variants(a)[pick]
        lst[k] = new
        leaves, tree = jax.tree_util.tree_flatten(new)
        want = tree == jax.tree_util.tree_structure(old) and all(isinstance(x, (jax.Array, np.ndarray)) for x in leaves)
        assert bool(c.holds()) is want
        lst[k] = old
