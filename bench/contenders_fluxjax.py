"""fluxjax contenders: a `fluxjax.jit` step, `train_`, the implicit-Params path, and eager gradients."""

from __future__ import annotations

import jax

import fluxjax as Flux
from bench.harness import Bench, register
from fluxjax.losses import logitcrossentropy

JIT, TRAIN, IMPLICIT = "fluxjax jit", "fluxjax train_", "fluxjax implicit"


def _mlp(sizes):
    layers = [Flux.Dense(a, b, Flux.relu) for a, b in zip(sizes[:-2], sizes[1:-1])]
    return Flux.Chain(*layers, Flux.Dense(sizes[-2], sizes[-1]))


def _cnn():
    return Flux.Chain(
        Flux.Conv((5, 5), (1, 6)), Flux.BatchNorm(6, Flux.relu), Flux.MaxPool((2, 2)),
        Flux.Conv((5, 5), (6, 16)), Flux.BatchNorm(16, Flux.relu), Flux.MaxPool((2, 2)),
        Flux.flatten, Flux.Dense(256, 120, Flux.relu), Flux.Dense(120, 84, Flux.relu), Flux.Dense(84, 10),
    )


@Flux.layer
class _LSTMClassifier:
    def __init__(self, n_in, hidden):
        self.lstm = Flux.LSTM(n_in, hidden)
        self.head = Flux.Dense(hidden, 10)

    def __call__(self, x):
        return self.head(self.lstm(x)[:, -1, :])


def _model_and_data(wl):
    Flux.seed_(0)
    if wl.kind == "mlp":
        return _mlp(wl.sizes), wl.data("feature_major")
    if wl.kind == "cnn":
        return _cnn(), wl.data("WHCN")
    return _LSTMClassifier(wl.input_size, wl.hidden), wl.data("FTB")


def loss(m, x, y):
    return logitcrossentropy(m(x), y)


@Flux.jit
def _step(model, opt_state, x, y):
    val, grads = Flux.withgradient(lambda m: loss(m, x, y), model)
    Flux.update_(opt_state, model, grads[0])
    return val


@register(("mlp_tiny", "mlp_medium", "cnn_bn", "lstm"), JIT)
def _jit(wl):
    model, d = _model_and_data(wl)
    opt_state = Flux.setup(Flux.Adam(1e-3), model)
    return lambda: _step(model, opt_state, d.x, d.onehot_fm)


def _epochs(train_one_epoch, model, d):
    """A `train_` contender: the K steps of a timed turn are queued and run as one `train_` call over
    K batches when the harness blocks, the way a training loop calls `train_` once per epoch (`train_`
    checks every loss, so it synchronises once per call)."""
    pending = []

    def step():
        pending.append((d.x, d.onehot_fm))

    def sync(out):
        train_one_epoch(list(pending))
        pending.clear()
        jax.block_until_ready(jax.tree_util.tree_leaves(model))

    return Bench(step, sync=sync, loss=lambda out: float(loss(model, d.x, d.onehot_fm)))


@register(("mlp_tiny", "mlp_medium", "cnn_bn", "lstm"), TRAIN)
def _train(wl):
    model, d = _model_and_data(wl)
    opt_state = Flux.setup(Flux.Adam(1e-3), model)
    return _epochs(lambda batches: Flux.train_(loss, model, batches, opt_state), model, d)


@register(("mlp_tiny", "mlp_medium"), IMPLICIT)
def _implicit(wl):
    model, d = _model_and_data(wl)
    ps = Flux.params(model)
    rule = Flux.Adam(1e-3)

    def implicit_loss(x, y):
        return loss(model, x, y)

    return _epochs(lambda batches: Flux.train_(implicit_loss, ps, batches, rule), model, d)


@register("eager_grad", "fluxjax gradient")
def _eager(wl):
    model, d = _model_and_data(wl)

    def step():
        return Flux.withgradient(lambda m: loss(m, d.x, d.onehot_fm), model)

    return Bench(step, sync=lambda out: jax.block_until_ready(jax.tree_util.tree_leaves(out)),
                 loss=lambda out: float(out[0]))


@register("eager_grad", "fluxjax implicit gradient")
def _eager_implicit(wl):
    model, d = _model_and_data(wl)
    ps = Flux.params(model)

    def step():
        return Flux.withgradient(lambda: loss(model, d.x, d.onehot_fm), ps)

    return Bench(step, sync=lambda out: jax.block_until_ready([g for g in out[1] if g is not None]),
                 loss=lambda out: float(out[0]))




EAGER, EAGER_IMPLICIT = "fluxjax eager loop", "fluxjax implicit eager loop"


@register(("mlp_tiny", "mlp_medium", "cnn_bn"), EAGER)
def _eager_loop(wl):
    """The model-zoo loop, un-jitted: `withgradient` then `update_` per step (Flux 0.14+ style), over a
    batch held in local variables, as `for (x, y) in loader`."""
    model, d = _model_and_data(wl)
    opt_state = Flux.setup(Flux.Adam(1e-3), model)
    x, y = d.x, d.onehot_fm

    def step():
        val, grads = Flux.withgradient(lambda m: loss(m, x, y), model)
        Flux.update_(opt_state, model, grads[0])
        return val

    return Bench(step, sync=lambda out: jax.block_until_ready((out, jax.tree_util.tree_leaves(model))))


@register(("mlp_tiny", "mlp_medium", "cnn_bn"), EAGER_IMPLICIT)
def _eager_implicit_loop(wl):
    """The implicit Flux 0.13 loop, un-jitted: `gs = gradient(() -> loss, ps); update_(opt, ps, gs)`."""
    model, d = _model_and_data(wl)
    ps = Flux.params(model)
    rule = Flux.Adam(1e-3)
    x, y = d.x, d.onehot_fm

    def step():
        gs = Flux.gradient(lambda: loss(model, x, y), ps)
        Flux.update_(rule, ps, gs)
        return gs

    return Bench(step, sync=lambda out: jax.block_until_ready(jax.tree_util.tree_leaves(model)),
                 loss=lambda out: float(loss(model, d.x, d.onehot_fm)))
