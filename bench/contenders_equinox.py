"""Equinox contenders, written the way the Equinox docs write them.

``eqx.filter_jit`` + ``eqx.filter_value_and_grad`` + optax; layers are per-sample and the batch is
``jax.vmap``-ed (BatchNorm via ``axis_name="batch"`` and ``eqx.nn.State``); images are NCHW per sample.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import optax
from jax import lax

from bench.harness import Bench, register
from bench.workloads import Workload

NAME = "Equinox"


def xent(logits, y):
    return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()


def make_mlp(sizes, key) -> eqx.nn.MLP:
    widths = set(sizes[1:-1])
    assert len(widths) == 1, "eqx.nn.MLP needs equal hidden widths"
    return eqx.nn.MLP(sizes[0], sizes[-1], widths.pop(), len(sizes) - 2, activation=jax.nn.relu, key=key)


class LeNetBN(eqx.Module):
    conv1: eqx.nn.Conv2d
    bn1: eqx.nn.BatchNorm
    conv2: eqx.nn.Conv2d
    bn2: eqx.nn.BatchNorm
    pool: eqx.nn.MaxPool2d
    fc: eqx.nn.Sequential

    def __init__(self, key):
        k1, k2, k3 = jax.random.split(key, 3)
        self.conv1 = eqx.nn.Conv2d(1, 6, 5, key=k1)
        self.bn1 = eqx.nn.BatchNorm(6, axis_name="batch", momentum=0.9, mode="batch")
        self.conv2 = eqx.nn.Conv2d(6, 16, 5, key=k2)
        self.bn2 = eqx.nn.BatchNorm(16, axis_name="batch", momentum=0.9, mode="batch")
        self.pool = eqx.nn.MaxPool2d(2, 2)
        k4, k5, k6 = jax.random.split(k3, 3)
        # 256 -> 120 -> 84 -> 10 (unequal widths, so a Sequential of Linears rather than eqx.nn.MLP)
        self.fc = eqx.nn.Sequential([
            eqx.nn.Linear(256, 120, key=k4), eqx.nn.Lambda(jax.nn.relu),
            eqx.nn.Linear(120, 84, key=k5), eqx.nn.Lambda(jax.nn.relu),
            eqx.nn.Linear(84, 10, key=k6),
        ])

    def __call__(self, x, state):  # x: (C, H, W), one sample
        x = self.conv1(x)
        x, state = self.bn1(x, state)
        x = self.pool(jax.nn.relu(x))
        x = self.conv2(x)
        x, state = self.bn2(x, state)
        x = self.pool(jax.nn.relu(x))
        return self.fc(x.reshape(-1)), state



class LSTMHead(eqx.Module):
    cell: eqx.nn.LSTMCell
    head: eqx.nn.Linear

    def __init__(self, n_in, hidden, key):
        k1, k2 = jax.random.split(key)
        self.cell = eqx.nn.LSTMCell(n_in, hidden, key=k1)
        self.head = eqx.nn.Linear(hidden, 10, key=k2)

    def __call__(self, xs):  # xs: (time, features), one sample
        h0 = jnp.zeros((self.cell.hidden_size,), xs.dtype)

        def f(carry, x):
            return self.cell(x, carry), None

        (h, _), _ = lax.scan(f, (h0, h0), xs)
        return self.head(h)


def stateless_trainer(model, opt, x, y) -> Bench:
    def loss_fn(model, x, y):
        return xent(jax.vmap(model)(x), y)

    @eqx.filter_jit
    def train_step(model, opt_state, x, y):
        loss, grads = eqx.filter_value_and_grad(loss_fn)(model, x, y)
        updates, opt_state = opt.update(grads, opt_state, eqx.filter(model, eqx.is_inexact_array))
        return eqx.apply_updates(model, updates), opt_state, loss

    cell = [model, opt.init(eqx.filter(model, eqx.is_inexact_array))]

    def step():
        cell[0], cell[1], loss = train_step(cell[0], cell[1], x, y)
        return loss

    return Bench(step)


@register(("mlp_tiny", "mlp_medium"), NAME)
def _mlp(wl: Workload):
    d = wl.data("batch_major")
    return stateless_trainer(make_mlp(wl.sizes, jax.random.key(0)), wl.optimizer(), d.x, d.y)


@register("lstm", NAME)
def _lstm(wl: Workload):
    d = wl.data("BTF")  # vmap over batch, scan over time inside each sample
    model = LSTMHead(wl.input_size, wl.hidden, jax.random.key(0))
    return stateless_trainer(model, wl.optimizer(), d.x, d.y)


@register("cnn_bn", NAME)
def _cnn(wl: Workload):
    d = wl.data("NCHW")
    model, state = eqx.nn.make_with_state(LeNetBN)(jax.random.key(0))
    opt = wl.optimizer()

    def loss_fn(model, state, x, y):
        batched = jax.vmap(model, axis_name="batch", in_axes=(0, None), out_axes=(0, None))
        logits, state = batched(x, state)
        return xent(logits, y), state

    @eqx.filter_jit
    def train_step(model, state, opt_state, x, y):
        (loss, state), grads = eqx.filter_value_and_grad(loss_fn, has_aux=True)(model, state, x, y)
        updates, opt_state = opt.update(grads, opt_state, eqx.filter(model, eqx.is_inexact_array))
        return eqx.apply_updates(model, updates), state, opt_state, loss

    cell = [model, state, opt.init(eqx.filter(model, eqx.is_inexact_array))]

    def step():
        cell[0], cell[1], cell[2], loss = train_step(cell[0], cell[1], cell[2], d.x, d.y)
        return loss

    return Bench(step)


@register("eager_grad", NAME)
def _eager(wl: Workload):
    d = wl.data("batch_major")
    model = make_mlp(wl.sizes, jax.random.key(0))
    grad_fn = eqx.filter_value_and_grad(lambda m, x, y: xent(jax.vmap(m)(x), y))  # NOT jitted

    def step():
        return grad_fn(model, d.x, d.y)

    return Bench(step)


def warmup():
    m = eqx.nn.Linear(2, 2, key=jax.random.key(1))
    jax.block_until_ready(eqx.filter_jit(eqx.filter_grad(lambda m, x: m(x).sum()))(m, jnp.ones(2)))
