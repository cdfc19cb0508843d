"""`train_` chains its compiled steps when iterating the data runs none of the user's code
(fluxjax/compiled/held.py): the arrays stay in the program's input list between steps and reach the model
when the loop ends. The results must be bit-equal to stepping through the model every time."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import fluxjax as Flux
from fluxjax.compiled.held import HeldSteps as Chain
from fluxjax.losses import mse
from fluxjax.optimise import train as train_mod


def _model():
    Flux.seed_(7)
    return Flux.Chain(Flux.Dense(3, 4), Flux.BatchNorm(4, Flux.relu), Flux.Dropout(0.5), Flux.Dense(4, 2))


def _batches(sizes=(5, 5, 5, 3)):
    rng = np.random.default_rng(0)
    return [(jnp.asarray(rng.standard_normal((3, b)), jnp.float32), jnp.asarray(rng.standard_normal((2, b)), jnp.float32))
            for b in sizes]


def _loss(m, x, y):
    return mse(m(x), y)


def _assert_same(a, b):
    la, lb = jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)
    assert len(la) == len(lb)
    for u, v in zip(la, lb):
        np.testing.assert_array_equal(np.asarray(u), np.asarray(v))


@pytest.fixture
def calls(monkeypatch):
    """Counts the calls that go through `fluxjax.jit` itself (a chained step does not)."""
    n = [0]
    real = train_mod._compiled

    class Counting:
        _plan = property(lambda self: real._plan, lambda self, v: setattr(real, "_plan", v))
        _lock = real._lock

        def __call__(self, *a, **k):
            n[0] += 1
            return real(*a, **k)

    monkeypatch.setattr(train_mod, "_compiled", Counting())
    return n


def test_chained_steps_equal_steps_through_the_model(calls):
    """A list of batches (the last one smaller: a new trace inside the chain) against the same
    batches from a generator, which steps through the model every time: bit-equal model, BatchNorm
    statistics, Dropout key and Adam state, and equal losses."""
    data = _batches()
    m, ref = _model(), _model()
    opt, opt_ref = Flux.setup(Flux.Adam(0.01), m), Flux.setup(Flux.Adam(0.01), ref)
    Flux.train_(_loss, m, data, opt)
    assert calls[0] == 1  # only the first step went through fluxjax.jit
    Flux.train_(_loss, ref, (d for d in data), opt_ref)
    assert calls[0] == 1 + len(data)
    _assert_same([m, opt], [ref, opt_ref])
    assert m.layers[1].mu.shape == (4,) and not np.array_equal(np.asarray(m.layers[1].mu), np.zeros(4))
    # and again: the next epoch starts from the arrays the chain wrote into the model
    Flux.train_(_loss, m, data, opt)
    Flux.train_(_loss, ref, iter(data), opt_ref)
    _assert_same([m, opt], [ref, opt_ref])


def test_a_generator_sees_the_model_after_every_step():
    m = _model()
    opt = Flux.setup(Flux.Adam(0.01), m)
    seen = []

    def batches():
        for d in _batches((4, 4, 4)):
            seen.append(np.asarray(m.layers[0].weight))
            yield d

    Flux.train_(_loss, m, batches(), opt)
    assert len(seen) == 3
    assert all(not np.array_equal(a, b) for a, b in zip(seen, seen[1:]))


def test_a_batch_of_another_kind_goes_through_the_model_and_the_chain_resumes(calls):
    """A batch with an extra element cannot be placed in the held inputs: the chain writes the model,
    that step goes through fluxjax.jit (another program), and the steps after it are chained again."""
    (x1, y1), (x2, y2), (x3, y3), (x4, y4) = _batches((4, 4, 4, 4))
    w = jnp.full((2, 4), 0.5, jnp.float32)

    def loss(m, x, y, w=1.0):
        return mse(m(x) * w, y)

    data = [(x1, y1), (x2, y2, w), (x3, y3), (x4, y4)]
    m, ref = _model(), _model()
    opt, opt_ref = Flux.setup(Flux.Adam(0.01), m), Flux.setup(Flux.Adam(0.01), ref)
    Flux.train_(loss, m, data, opt)
    assert calls[0] == 3  # the first step, the odd batch, the first step after it
    Flux.train_(loss, ref, iter(data), opt_ref)
    _assert_same([m, opt], [ref, opt_ref])


def test_a_dataloader_with_a_collate_function_is_not_chained(calls):
    x = np.random.default_rng(1).standard_normal((3, 8)).astype(np.float32)
    y = np.random.default_rng(2).standard_normal((2, 8)).astype(np.float32)
    m = _model()
    opt = Flux.setup(Flux.Adam(0.01), m)
    Flux.train_(_loss, m, Flux.DataLoader((x, y), batchsize=4), opt)
    assert calls[0] == 1
    Flux.train_(_loss, m, Flux.DataLoader((x, y), batchsize=4, collate=Flux.data.batch), opt)
    assert calls[0] == 3


def test_implicit_params_are_chained_too(calls):
    data = _batches((4, 4, 4))
    m, ref = _model(), _model()

    def step_loss(model):
        return lambda x, y: _loss(model, x, y)

    Flux.train_(step_loss(m), Flux.params(m), data, Flux.Adam(0.01))
    assert calls[0] == 1
    Flux.train_(step_loss(ref), Flux.params(ref), iter(data), Flux.Adam(0.01))
    _assert_same(m, ref)


@Flux.layer
class _Two:
    def __init__(self, a):
        self.a = a
        self.b = a  # the same array in two fields: the compiled program takes it as one input


@Flux.jit
def _bump(m, x):
    m.a = m.a + x.sum()
    if x.shape[0] == 1:
        m.b = m.a  # the two fields keep one array
    return m.a.sum() + m.b.sum()


def test_a_program_that_splits_a_shared_input_leaves_the_chain():
    """A batch of another shape is traced inside the chain, and that program rebinds one of two
    fields that held one array: the chain cannot keep them as one input, so it writes the model and
    hands the next call back to fluxjax.jit."""
    m, ref = _Two(jnp.ones(3)), _Two(jnp.ones(3))
    xs = [jnp.ones(1), jnp.ones(1), jnp.ones(2), jnp.ones(2)]
    with Chain(_bump, m) as step:
        outs = [float(step(x)) for x in xs]
    refs = [float(_bump(ref, x)) for x in xs]
    assert outs == refs == [12.0, 18.0, 24.0, 30.0]
    np.testing.assert_array_equal(np.asarray(m.a), [7.0, 7.0, 7.0])
    np.testing.assert_array_equal(np.asarray(m.b), [3.0, 3.0, 3.0])


def test_an_error_in_a_chained_step_leaves_the_model_after_the_last_good_step():
    """A batch of another size is traced inside the chain; when that trace raises, the model holds
    the arrays of the steps before it (what the chain held), not those of the first step."""
    good = _batches((4, 4))
    bad = (jnp.ones((5, 3)), jnp.ones((2, 3)))  # 5 features for a Dense(3, 4)
    m, ref = _model(), _model()
    opt, opt_ref = Flux.setup(Flux.Adam(0.01), m), Flux.setup(Flux.Adam(0.01), ref)
    with pytest.raises(Flux.DimensionMismatch, match="Dense"):
        Flux.train_(_loss, m, [*good, bad, *good], opt)
    Flux.train_(_loss, ref, good, opt_ref)
    _assert_same([m, opt], [ref, opt_ref])
