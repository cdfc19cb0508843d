"""`train_`'s fused steps: `CHECK_EVERY` batches per XLA call (`jax.lax.scan`, fluxjax/compiled/scan.py)
give the numbers of the steps one by one (`fuse=False`) and of the eager loop (`jit=False`): losses,
parameters, optimiser state, BatchNorm statistics and the global key."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fluxjax as Flux
from fluxjax.core.layer import structure_version
from fluxjax.core.plain import PLAIN_DEPTH
from fluxjax.optimise import train as train_module
from fluxjax.optimise.train import CHECK_EVERY, NonFiniteLoss
from tests.optimise.models import arrays as _arrays
from tests.optimise.models import assert_same_arrays, mse
from tests.optimise.models import mlp as _mlp
from tests.optimise.models import stateful as _stateful
from tests.optimise.models import tied as _tied

RNG = np.random.default_rng(0)
N = CHECK_EVERY * 2 + 5  # two fused pieces, then five steps one by one
DATA = [(jnp.asarray(RNG.normal(size=(3, 4)), jnp.float32), jnp.asarray(RNG.normal(size=(2, 4)), jnp.float32))
        for _ in range(N)]


def _train(build, rule, data, *, fuse=True, jit=True, freeze=False, seed=1, loss=mse):
    """Train a fresh model; `fuse=None` runs eagerly. Returns (losses, model, opt_state, global key)."""
    if fuse is None:
        fuse, jit = True, False
    Flux.seed_(seed)
    m = build()
    opt = Flux.setup(rule, m)
    if freeze:
        Flux.freeze_(opt.layers[0])
    Flux.seed_(7)
    h = Flux.train_(loss, m, data, opt, fuse=fuse, jit=jit)
    return h.losses, m, opt, np.asarray(Flux.random.default_rng.key)


def _same(a, b, rtol=1e-5):
    la, ma, oa, ka = a
    lb, mb, ob, kb = b
    np.testing.assert_allclose(la, lb, rtol=rtol, atol=1e-6)
    assert_same_arrays((ma, oa), (mb, ob), rtol)
    np.testing.assert_array_equal(ka, kb)


@pytest.fixture
def scans(monkeypatch):
    """How many fused pieces `train_` ran."""
    calls = []
    real = train_module._compiled_chunk

    def counting(*args):
        out = real(*args)
        calls.append(len(args[3][0]))
        return out

    monkeypatch.setattr(train_module, "_compiled_chunk", counting)
    return calls


@pytest.mark.parametrize(
    "build, rule, freeze",
    [
        (_mlp, Flux.Adam(0.01), False),
        (_stateful, Flux.Momentum(0.05), False),
        (_tied, Flux.OptimiserChain(Flux.ClipNorm(1.0), Flux.Adam(0.01)), False),
        (_mlp, Flux.AdamW(0.01), True),
        (_mlp, optax.chain(optax.clip_by_global_norm(0.1), optax.sgd(0.1)), False),
    ],
    ids=["mlp-adam", "batchnorm-dropout-momentum", "tied-chain", "frozen", "optax-global-norm"],
)
def test_fused_equals_step_by_step_and_eager(build, rule, freeze, scans):
    fused = _train(build, rule, DATA, freeze=freeze)
    assert scans == [CHECK_EVERY, CHECK_EVERY]  # it did fuse
    _same(fused, _train(build, rule, DATA, fuse=False, freeze=freeze))
    _same(fused, _train(build, rule, DATA, jit=False, freeze=freeze), rtol=1e-4)
    assert len(fused[0]) == N
    if build is _tied:
        m = fused[1]
        assert m.layers[0] is m.layers[1]


def test_ties_and_state_survive_the_scan():
    _, m, opt, _ = _train(_tied, Flux.Adam(0.01), DATA)
    assert m.layers[0].weight is m.layers[1].weight
    _, m, _, _ = _train(_stateful, Flux.Adam(0.01), DATA)
    assert not np.allclose(np.asarray(m.layers[1].mu), 0)  # the running mean moved, through the carry


def test_dataloader_with_a_ragged_last_batch(scans):
    x = jnp.asarray(RNG.normal(size=(3, 4 * CHECK_EVERY + 3)), jnp.float32)
    y = jnp.asarray(RNG.normal(size=(2, 4 * CHECK_EVERY + 3)), jnp.float32)
    loader = Flux.DataLoader((x, y), batchsize=4)
    fused = _train(_mlp, Flux.Adam(0.01), loader)
    assert scans == [CHECK_EVERY]  # the last batch, of 3, goes on its own
    _same(fused, _train(_mlp, Flux.Adam(0.01), loader, fuse=False))


def test_batches_of_changing_shape_are_grouped(scans):
    small = DATA[:CHECK_EVERY]
    wide = [(jnp.concatenate([x, x], 1), jnp.concatenate([y, y], 1)) for x, y in DATA[:CHECK_EVERY + 2]]
    data = small[:3] + wide + small
    fused = _train(_mlp, Flux.Descent(0.1), data)
    assert scans == [CHECK_EVERY, CHECK_EVERY]
    _same(fused, _train(_mlp, Flux.Descent(0.1), data, fuse=False))


@pytest.mark.parametrize("bad", [0, 5, CHECK_EVERY - 1, CHECK_EVERY + 3, N - 1])
def test_a_non_finite_loss_names_its_batch_and_keeps_the_model_before_it(bad):
    data = list(DATA)
    x, y = data[bad]
    data[bad] = (x.at[0, 0].set(jnp.nan), y)
    Flux.seed_(1)
    m = _stateful()
    opt = Flux.setup(Flux.Adam(0.01), m)
    Flux.seed_(7)
    with pytest.raises(NonFiniteLoss, match=f"data index {bad} "):
        Flux.train_(mse, m, data, opt)
    key = np.asarray(Flux.random.default_rng.key)
    before = _train(_stateful, Flux.Adam(0.01), data[:bad], fuse=False)
    for a, b in zip(_arrays(m, opt), _arrays(before[1], before[2]), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(key, before[3])


def test_a_new_attribute_settles_then_the_steps_fuse(scans):
    def loss(m, x, y):
        out = m(x)
        m.layers[-1].seen = out.sum()  # a new field: the first steps run one by one, then it is walked
        return Flux.mse(out, y)

    fused = _train(_mlp, Flux.Adam(0.01), DATA, loss=loss)
    assert scans == [CHECK_EVERY]
    one_by_one = _train(_mlp, Flux.Adam(0.01), DATA, fuse=False, loss=loss)
    _same(fused, one_by_one)
    np.testing.assert_allclose(fused[1].layers[-1].seen, one_by_one[1].layers[-1].seen, rtol=1e-5)


def _norm_outside(fuse, depth):
    """`train_` with a loss that runs a BatchNorm held by a plain object, `depth` plain objects down."""
    import types

    Flux.seed_(3)
    norm = Flux.BatchNorm(2)
    Flux.trainmode_(norm)
    aux = types.SimpleNamespace(norm=norm)
    for _ in range(depth - 1):
        aux = types.SimpleNamespace(inner=aux)

    def run(a):
        while not hasattr(a, "norm"):
            a = a.inner
        return a.norm

    # outside the walk every step compiles (the statistics are constants of the program): a few steps
    data = DATA if depth <= PLAIN_DEPTH else DATA[:4]
    # (Descent: the last bias feeds a BatchNorm, so its gradient is rounding noise, which Adam would amplify)
    out = _train(_mlp, Flux.Descent(0.1), data, fuse=fuse, loss=lambda m, x, y: Flux.mse(run(aux)(m(x)), y))
    return out, np.asarray(norm.mu)


@pytest.mark.parametrize("depth", [1, *(pytest.param(d, marks=pytest.mark.slow) for d in (PLAIN_DEPTH, PLAIN_DEPTH + 1))],
                         ids=["held", "nested", "outside-the-walk"])
def test_a_batchnorm_held_by_a_plain_object(depth, scans):
    """A plain object holding layers (directly or through up to `PLAIN_DEPTH` plain objects), read by the
    loss, is walked: its BatchNorm's statistics are carried (and are inputs of the compiled step, not
    constants). Deeper it is not walked: its writes go beside the inputs, and the steps run one by one.
    Either way the numbers are the eager ones."""
    fused, mu = _norm_outside(True, depth)
    assert scans == ([] if depth > PLAIN_DEPTH else [CHECK_EVERY, CHECK_EVERY])
    eager, eager_mu = _norm_outside(None, depth)
    _same(fused, eager, rtol=1e-4)
    np.testing.assert_allclose(mu, eager_mu, rtol=1e-4, atol=1e-6)
    step_by_step, mu_steps = _norm_outside(False, depth)
    _same(fused, step_by_step)
    np.testing.assert_allclose(mu, mu_steps, rtol=1e-5, atol=1e-6)


def test_the_global_key_advances_once_per_step():
    def noisy(m, x, y):
        return Flux.mse(m(x + 0.1 * jax.random.normal(Flux.random.next_key(), x.shape)), y)

    fused = _train(_mlp, Flux.Adam(0.01), DATA, loss=noisy)
    _same(fused, _train(_mlp, Flux.Adam(0.01), DATA, fuse=False, loss=noisy))
    assert len(set(np.round(fused[0], 6))) == N


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(n=st.integers(0, CHECK_EVERY + 6), bad=st.one_of(st.none(), st.integers(0, CHECK_EVERY + 6)))
def test_any_length_and_any_bad_step_match_step_by_step(n, bad):
    data = list(DATA[:n])
    if bad is not None and bad < n:
        x, y = data[bad]
        data[bad] = (x * jnp.inf, y)
    outcomes = []
    for fuse in (True, False):
        Flux.seed_(1)
        m = _mlp()
        opt = Flux.setup(Flux.Adam(0.01), m)
        try:
            h = Flux.train_(mse, m, data, opt, fuse=fuse)
            outcomes.append((h.losses, None, _arrays(m, opt)))
        except NonFiniteLoss as e:
            outcomes.append((None, str(e), _arrays(m, opt)))
    (la, ea, aa), (lb, eb, ab) = outcomes
    assert ea == eb
    if la is not None:
        np.testing.assert_allclose(la, lb, rtol=1e-5, atol=1e-6)
    for a, b in zip(aa, ab, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_large_batches_run_one_call_per_step(scans):
    cols = train_module.FUSE_MAX_BATCH_BYTES // (4 * 3) + 1  # x alone is just over the limit
    x = jnp.ones((3, cols), jnp.float32)
    data = [(x * (i % 3), jnp.zeros((2, cols))) for i in range(CHECK_EVERY)]
    fused = _train(_mlp, Flux.Descent(0.1), data)
    assert scans == []
    _same(fused, _train(_mlp, Flux.Descent(0.1), data, fuse=False))


def test_numpy_batches_stack_on_the_host_with_the_same_numbers(scans):
    host = [tuple(np.asarray(a) for a in d) for d in DATA]
    fused = _train(_stateful, Flux.Adam(0.01), host)
    assert scans == [CHECK_EVERY, CHECK_EVERY]
    _same(fused, _train(_stateful, Flux.Adam(0.01), DATA))
    mixed = [d if i % 2 else tuple(np.asarray(a) for a in d) for i, d in enumerate(DATA)]
    _same(fused, _train(_stateful, Flux.Adam(0.01), mixed))


def test_epochs_reuse_one_walk_until_the_mode_changes(monkeypatch):
    """`train_` puts the model in train mode at every call; when it already is, the compiled chunk keeps
    its walk of the model from one epoch to the next (a walk per epoch cost more than the epoch of a
    small model). A real change of mode makes the next call walk again, and compute in the new mode."""
    import fluxjax.compiled.call as call_module

    plans = []
    real = call_module.Plan

    def counting(*args, **kwargs):
        plans.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(call_module, "Plan", counting)
    Flux.seed_(1)
    m, other = _stateful(), _stateful()
    opt = Flux.setup(Flux.Adam(0.01), m)
    data = DATA[:CHECK_EVERY]
    for _ in range(3):
        Flux.train_(mse, m, data, opt)
    assert len(plans) == 1
    version = structure_version()
    Flux.trainmode_(m)  # already in train mode: nothing changes
    assert structure_version() == version
    Flux.train_(mse, m, data, opt)
    assert len(plans) == 1
    Flux.testmode_(other)
    Flux.train_(mse, other, data, Flux.setup(Flux.Adam(0.01), other))  # another model: a new walk
    assert len(plans) == 2
    Flux.testmode_(m)  # test mode, then `train_` switches back: walked again, trained in train mode
    assert not m.layers[2].active
    before = _arrays(m)
    Flux.train_(mse, m, data, opt)
    assert len(plans) == 3 and m.layers[2].active is True
    assert any(not np.allclose(a, b) for a, b in zip(before, _arrays(m)))
