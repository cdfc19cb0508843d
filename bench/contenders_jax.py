"""Hand-written pure JAX + optax contenders: the baseline every ratio is taken against.

Parameters are plain dict/list pytrees, the step is ``jax.jit`` of a pure function (no donation),
and the training state lives in a Python list cell that ``step()`` rebinds.

Two layouts of the same code are provided (the ``layout_*`` workloads compare them):
* batch-major / NHWC (the baseline): x (batch, features), y = x @ W.T + b; images NHWC.
* feature-major / WHCN (Flux's layout): x (features, batch), y = W @ x + b[:, None]; images WHCN.
W is (out, in) in both, conv kernels are (k, k, cin, cout) (HWIO resp. WHIO).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import optax
from jax import lax

from bench.harness import Bench, register
from bench.workloads import NHWC, PURE_JAX, WHCN, WHCN_VIA_NHWC, Workload, glorot_uniform

# ------------------------------------------------------------------ parameters


def init_dense(key, n_in: int, n_out: int) -> dict:
    return {"W": glorot_uniform(key, (n_out, n_in), n_in, n_out), "b": jnp.zeros((n_out,), jnp.float32)}


def init_mlp(key, sizes) -> list:
    keys = jax.random.split(key, len(sizes) - 1)
    return [init_dense(k, a, b) for k, a, b in zip(keys, sizes[:-1], sizes[1:])]


def dense(p, x, feature_major: bool):
    if feature_major:
        return p["W"] @ x + p["b"][:, None]
    return x @ p["W"].T + p["b"]


def mlp(params, x, feature_major: bool):
    for p in params[:-1]:
        x = jax.nn.relu(dense(p, x, feature_major))
    return dense(params[-1], x, feature_major)


def xent(logits, y, feature_major: bool):
    return optax.softmax_cross_entropy_with_integer_labels(logits, y, axis=0 if feature_major else -1).mean()


# ------------------------------------------------------------------ LeNet + BatchNorm

# layout -> (conv dimension numbers, spatial axes, channel axis, batch axis)
_CNN = {
    False: (("NHWC", "HWIO", "NHWC"), (1, 2), 3, 0),
    True: (("WHCN", "WHIO", "WHCN"), (0, 1), 2, 3),
}
MOMENTUM, EPS = 0.9, 1e-5


def init_cnn(key):
    k = jax.random.split(key, 5)

    def conv(key, cin, cout):
        w = glorot_uniform(key, (5, 5, cin, cout), 25 * cin, 25 * cout)
        return {"w": w, "b": jnp.zeros((cout,), jnp.float32)}

    def bn(c):
        return {"gamma": jnp.ones((c,), jnp.float32), "beta": jnp.zeros((c,), jnp.float32)}

    params = {"conv1": conv(k[0], 1, 6), "bn1": bn(6), "conv2": conv(k[1], 6, 16), "bn2": bn(16),
              "fc": init_mlp(k[2], (256, 120, 84, 10))}
    stats = {n: {"mean": jnp.zeros((c,), jnp.float32), "var": jnp.ones((c,), jnp.float32)}
             for n, c in (("bn1", 6), ("bn2", 16))}
    return params, stats


def nhwc_to_whcn(params):
    """The same network for WHCN input: swap the kernels' spatial axes (HWIO -> WHIO) and permute the
    first dense layer's columns from (h, w, c) to (w, h, c) order, i.e. the row-major flatten of
    (W, H, C, N). Both layouts then compute identical losses (checked by --check)."""
    p = jax.tree.map(lambda a: a, params)
    for c in ("conv1", "conv2"):
        p[c] = {**p[c], "w": p[c]["w"].transpose(1, 0, 2, 3)}
    w = p["fc"][0]["W"]
    p["fc"][0] = {**p["fc"][0], "W": w.reshape(w.shape[0], 4, 4, 16).transpose(0, 2, 1, 3).reshape(w.shape)}
    return p


def _chan(v, ndim: int, axis: int):
    shape = [1] * ndim
    shape[axis] = v.shape[0]
    return v.reshape(shape)


def batchnorm_train(p, s, x, axis: int):
    """Batch statistics (biased var) for normalising; running stats get the unbiased var."""
    red = tuple(i for i in range(x.ndim) if i != axis)
    mean = x.mean(red)
    var = x.var(red)
    n = x.size // x.shape[axis]
    c = lambda v: _chan(v, x.ndim, axis)
    y = (x - c(mean)) * lax.rsqrt(c(var) + EPS) * c(p["gamma"]) + c(p["beta"])
    new = {"mean": MOMENTUM * s["mean"] + (1 - MOMENTUM) * mean,
           "var": MOMENTUM * s["var"] + (1 - MOMENTUM) * var * (n / (n - 1))}
    return y, new


def cnn(params, stats, x, feature_major: bool):
    dn, spatial, caxis, baxis = _CNN[feature_major]
    win = [1] * 4
    for ax in spatial:
        win[ax] = 2
    new_stats = {}
    for i in (1, 2):
        c = params[f"conv{i}"]
        x = lax.conv_general_dilated(x, c["w"], (1, 1), "VALID", dimension_numbers=dn)
        x = x + _chan(c["b"], 4, caxis)
        x, new_stats[f"bn{i}"] = batchnorm_train(params[f"bn{i}"], stats[f"bn{i}"], x, caxis)
        x = jax.nn.relu(x)
        x = lax.reduce_window(x, -jnp.inf, lax.max, tuple(win), tuple(win), "VALID")
    x = x.reshape(-1, x.shape[baxis]) if feature_major else x.reshape(x.shape[baxis], -1)
    return mlp(params["fc"], x, feature_major), new_stats


# ------------------------------------------------------------------ LSTM


def init_lstm(key, n_in: int, hidden: int):
    k1, k2, k3 = jax.random.split(key, 3)
    return {
        "Wi": glorot_uniform(k1, (4 * hidden, n_in), n_in, 4 * hidden),
        "Wh": glorot_uniform(k2, (4 * hidden, hidden), hidden, 4 * hidden),
        "b": jnp.zeros((4 * hidden,), jnp.float32),
        "head": init_dense(k3, hidden, 10),
    }


def lstm(params, xs):
    """xs: (time, batch, features) -> logits (batch, 10)."""
    hidden = params["Wh"].shape[1]
    batch = xs.shape[1]

    def cell(carry, x):
        h, c = carry
        z = x @ params["Wi"].T + h @ params["Wh"].T + params["b"]
        i, f, g, o = jnp.split(z, 4, axis=-1)
        c = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(i) * jnp.tanh(g)
        h = jax.nn.sigmoid(o) * jnp.tanh(c)
        return (h, c), None

    zeros = jnp.zeros((batch, hidden), xs.dtype)
    (h, _), _ = lax.scan(cell, (zeros, zeros), xs)
    return dense(params["head"], h, False)


# ------------------------------------------------------------------ the training-step builder


def trainer(loss_fn, params, model_state, opt: optax.GradientTransformation, *args) -> Bench:
    """``loss_fn(params, model_state, *args) -> (loss, new_model_state)``; returns a jitted step."""

    @jax.jit
    def train_step(params, model_state, opt_state, *args):
        (loss, model_state), grads = jax.value_and_grad(loss_fn, has_aux=True)(params, model_state, *args)
        updates, opt_state = opt.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), model_state, opt_state, loss

    cell = [params, model_state, opt.init(params)]

    def step():
        cell[0], cell[1], cell[2], loss = train_step(*cell, *args)
        return loss

    return Bench(step)


def make_mlp(wl: Workload, feature_major: bool = False) -> Bench:
    d = wl.data("feature_major" if feature_major else "batch_major")
    params = init_mlp(jax.random.key(0), wl.sizes)

    def loss_fn(params, _state, x, y):
        return xent(mlp(params, x, feature_major), y, feature_major), _state

    return trainer(loss_fn, params, (), wl.optimizer(), d.x, d.y)


def make_cnn(wl: Workload, feature_major: bool = False) -> Bench:
    d = wl.data("WHCN" if feature_major else "NHWC")
    params, stats = init_cnn(jax.random.key(0))
    if feature_major:
        params = nhwc_to_whcn(params)

    def loss_fn(params, stats, x, y):
        logits, stats = cnn(params, stats, x, feature_major)
        return xent(logits, y, feature_major), stats

    return trainer(loss_fn, params, stats, wl.optimizer(), d.x, d.y)


@register(("mlp_tiny", "mlp_medium"), PURE_JAX)
def _mlp(wl):
    return make_mlp(wl)


@register("cnn_bn", PURE_JAX)
def _cnn(wl):
    return make_cnn(wl)


@register("lstm", PURE_JAX)
def _lstm(wl):
    d = wl.data("TBF")  # time-major: what lax.scan wants
    params = init_lstm(jax.random.key(0), wl.input_size, wl.hidden)

    def loss_fn(params, _state, xs, y):
        return xent(lstm(params, xs), y, False), _state

    return trainer(loss_fn, params, (), wl.optimizer(), d.x, d.y)


@register("eager_grad", PURE_JAX)
def _eager(wl):
    d = wl.data("batch_major")
    params = init_mlp(jax.random.key(0), wl.sizes)
    grad_fn = jax.value_and_grad(lambda p, x, y: xent(mlp(p, x, False), y, False))  # NOT jitted

    def step():
        return grad_fn(params, d.x, d.y)  # (loss, grads)

    return Bench(step)


@register("layout_mlp", NHWC)
def _layout_mlp_bm(wl):
    return make_mlp(wl, feature_major=False)


@register("layout_mlp", WHCN)
def _layout_mlp_fm(wl):
    return make_mlp(wl, feature_major=True)


@register("layout_mlp", WHCN_VIA_NHWC)
def _layout_mlp_fm_inside_bm(wl):
    """Feature-major input transposed once to batch-major, batch-major products, logits handed back
    feature-major: what `Chain` could do with a run of `Dense` layers. Same numbers as the others."""
    d = wl.data("feature_major")
    params = init_mlp(jax.random.key(0), wl.sizes)

    def loss_fn(params, _state, x, y):
        return xent(mlp(params, x.T, False).T, y, True), _state

    return trainer(loss_fn, params, (), wl.optimizer(), d.x, d.y)


@register("layout_cnn", NHWC)
def _layout_cnn_bm(wl):
    return make_cnn(wl, feature_major=False)


@register("layout_cnn", WHCN)
def _layout_cnn_fm(wl):
    return make_cnn(wl, feature_major=True)


@register("layout_cnn", WHCN_VIA_NHWC)
def _layout_cnn_fm_inside_bm(wl):
    """What a feature-major library could do instead: accept WHCN, transpose the input once to NHWC,
    compute in NHWC, hand logits back feature-major. Same numbers as the NHWC contender."""
    d = wl.data("WHCN")
    params, stats = init_cnn(jax.random.key(0))

    def loss_fn(params, stats, x, y):
        logits, stats = cnn(params, stats, x.transpose(3, 1, 0, 2), False)  # WHCN -> NHWC
        return xent(logits.T, y, True), stats

    return trainer(loss_fn, params, stats, wl.optimizer(), d.x, d.y)


def warmup():
    f = jax.jit(lambda a: jnp.tanh(a @ a.T).sum())
    jax.block_until_ready(jax.grad(f)(jnp.ones((4, 4), jnp.float32)))
