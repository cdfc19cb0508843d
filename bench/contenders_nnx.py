"""Flax NNX contenders, written the way the NNX docs write them.

``nnx.jit`` (default graph mode) over ``(model, optimizer)``, ``nnx.value_and_grad``,
``nnx.Optimizer(model, tx, wrt=nnx.Param)`` updated in place; batch-first layers, images NHWC;
``nnx.BatchNorm`` in train mode; LSTM as ``nnx.RNN(nnx.OptimizedLSTMCell)`` (an ``nnx.scan``).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import optax
from flax import nnx

from bench.harness import Bench, register
from bench.workloads import Workload

NAME = "Flax NNX"


def xent(logits, y):
    return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()


class MLP(nnx.Module):
    def __init__(self, sizes, rngs: nnx.Rngs):
        self.layers = nnx.List([nnx.Linear(a, b, rngs=rngs) for a, b in zip(sizes[:-1], sizes[1:])])

    def __call__(self, x):
        for layer in self.layers[:-1]:
            x = nnx.relu(layer(x))
        return self.layers[-1](x)


class LeNetBN(nnx.Module):
    def __init__(self, rngs: nnx.Rngs):
        self.conv1 = nnx.Conv(1, 6, (5, 5), padding="VALID", rngs=rngs)
        self.bn1 = nnx.BatchNorm(6, momentum=0.9, rngs=rngs)
        self.conv2 = nnx.Conv(6, 16, (5, 5), padding="VALID", rngs=rngs)
        self.bn2 = nnx.BatchNorm(16, momentum=0.9, rngs=rngs)
        self.fc = MLP((256, 120, 84, 10), rngs)

    def __call__(self, x):  # NHWC
        x = nnx.max_pool(nnx.relu(self.bn1(self.conv1(x))), (2, 2), (2, 2))
        x = nnx.max_pool(nnx.relu(self.bn2(self.conv2(x))), (2, 2), (2, 2))
        return self.fc(x.reshape(x.shape[0], -1))


class LSTMHead(nnx.Module):
    def __init__(self, n_in, hidden, rngs: nnx.Rngs):
        self.rnn = nnx.RNN(nnx.OptimizedLSTMCell(n_in, hidden, rngs=rngs), return_carry=True)
        self.head = nnx.Linear(hidden, 10, rngs=rngs)

    def __call__(self, x):  # (batch, time, features)
        (_, h), _ = self.rnn(x)
        return self.head(h)


@nnx.jit
def train_step(model, optimizer, x, y):
    def loss_fn(model):
        return xent(model(x), y)

    loss, grads = nnx.value_and_grad(loss_fn)(model)
    optimizer.update(model, grads)
    return loss


def trainer(model: nnx.Module, wl: Workload, x, y) -> Bench:
    model.train()
    optimizer = nnx.Optimizer(model, wl.optimizer(), wrt=nnx.Param)

    def step():
        return train_step(model, optimizer, x, y)

    # The model/optimizer are updated in place; the loss comes out of the same XLA executable, so
    # blocking on it also waits for the parameter updates.
    return Bench(step)


@register(("mlp_tiny", "mlp_medium"), NAME)
def _mlp(wl: Workload):
    d = wl.data("batch_major")
    return trainer(MLP(wl.sizes, nnx.Rngs(0)), wl, d.x, d.y)


@register("cnn_bn", NAME)
def _cnn(wl: Workload):
    d = wl.data("NHWC")
    return trainer(LeNetBN(nnx.Rngs(0)), wl, d.x, d.y)


@register("lstm", NAME)
def _lstm(wl: Workload):
    d = wl.data("BTF")
    return trainer(LSTMHead(wl.input_size, wl.hidden, nnx.Rngs(0)), wl, d.x, d.y)


@register("eager_grad", NAME)
def _eager(wl: Workload):
    d = wl.data("batch_major")
    model = MLP(wl.sizes, nnx.Rngs(0))
    grad_fn = nnx.value_and_grad(lambda m: xent(m(d.x), d.y))  # NOT jitted

    def step():
        return grad_fn(model)

    return Bench(step)


def warmup():
    m = nnx.Linear(2, 2, rngs=nnx.Rngs(1))
    opt = nnx.Optimizer(m, optax.sgd(0.1), wrt=nnx.Param)

    @nnx.jit
    def f(m, opt, x):
        loss, g = nnx.value_and_grad(lambda m: m(x).sum())(m)
        opt.update(m, g)
        return loss

    jax.block_until_ready(f(m, opt, jnp.ones((1, 2))))
