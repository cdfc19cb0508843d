"""Draws from the global key in a forward pass (NNlib's `dropout(x, p)`, `rrelu`, `rand_like`,
`randn_like`, a recurrent cell that draws) where nothing takes the advanced key back.

Under a plain `jax.jit`, `lax.scan` or `lax.fori_loop` the key was split off the global one while
tracing, a constant of the program: every call of a jitted function, and every step of a scan inside
one eager call, drew the same mask. Inside `functional`'s `apply` the advance was discarded with the
region: every call drew the same mask, whatever `rng=` said. Now the first raises (Flux draws anew,
fluxjax cannot under a trace it does not see), and `apply` feeds such draws from its `rng=` and
raises without one. What threads the key (the eager call, `jax.grad` op by op, `fluxjax.jit`,
`gradient`) draws anew at every call, checked here against the eager call's sequence."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import fluxjax as Flux
from fluxjax import random as global_rng
from fluxjax.nnlib import dropout, rrelu

X = jnp.ones(16)

DRAWS = {
    "dropout(x, p)": lambda x: dropout(x, 0.5),
    "rrelu": lambda x: rrelu(-x),
    "rand_like": lambda x: Flux.rand_like(x) * x,
    "randn_like": lambda x: Flux.randn_like(x) * x,
}
MATCH = {"dropout(x, p)": r"dropout\(x, p\)", "rrelu": "rrelu", "rand_like": "rand_like", "randn_like": "randn_like"}

PLAIN = {
    "jax.jit": lambda f: jax.jit(f)(X),
    "lax.scan": lambda f: jax.lax.scan(lambda c, x: (c, f(x)), 0, jnp.stack([X, X, X]))[1],
    "lax.fori_loop": lambda f: jax.lax.fori_loop(0, 3, lambda i, a: a.at[i].set(f(X)), jnp.zeros((3, 16))),
    "jax.jit of jax.grad": lambda f: jax.jit(jax.grad(lambda x: jnp.sum(f(x))))(X),
}


@pytest.mark.parametrize("how", list(PLAIN))
@pytest.mark.parametrize("draw", list(DRAWS))
def test_a_global_key_draw_under_a_plain_staging_transformation_raises(draw, how):
    key = global_rng.default_key()
    with pytest.raises(RuntimeError, match=MATCH[draw] + " drew from the global key under a JAX transformation"):
        PLAIN[how](DRAWS[draw])
    assert global_rng.default_key() is key  # nothing drawn


@pytest.mark.parametrize("draw", list(DRAWS))
def test_calls_that_thread_the_key_draw_anew_at_every_call(draw):
    f = DRAWS[draw]
    Flux.seed_(3)
    eager = [np.asarray(f(X)) for _ in range(2)]
    assert not np.array_equal(*eager)
    Flux.seed_(3)
    grads = [np.asarray(jax.grad(lambda x: jnp.sum(f(x)))(X)) for _ in range(2)]  # op by op: draws now
    assert not np.array_equal(*grads)
    jf = Flux.jit(f)
    compiled = [np.asarray(jf(X)) for _ in range(3)]
    assert not np.array_equal(compiled[1], compiled[2])
    g = [np.asarray(Flux.gradient(lambda x: jnp.sum(f(x)), X)[0]) for _ in range(2)]
    assert not np.array_equal(*g)
    assert jax.eval_shape(f, X).shape == (16,)  # shapes only: no values to freeze
    k = jax.random.PRNGKey(5)  # a key of one's own under a plain jax.jit: what it says
    np.testing.assert_array_equal(jax.jit(lambda x, k: dropout(k, x, 0.5))(X, k), dropout(k, X, 0.5))


@Flux.layer
class NoisyScale:
    """A custom layer in NNlib's style: `dropout(x, p)` with the global key."""

    def __init__(self):
        self.w = jnp.full(16, 2.0)

    def __call__(self, x):
        return dropout(self.w * x, 0.5)


def test_apply_feeds_global_key_draws_from_its_rng_and_raises_without_one():
    m = NoisyScale()
    params, state, apply = Flux.functional(m)
    k0, k1 = jax.random.PRNGKey(0), jax.random.PRNGKey(1)
    y0 = np.asarray(apply(params, state, X, rng=k0)[0])
    y1 = np.asarray(apply(params, state, X, rng=k1)[0])
    assert not np.array_equal(y0, y1)  # was one mask for every key
    np.testing.assert_array_equal(apply(params, state, X, rng=k0)[0], y0)  # the key decides
    jitted = jax.jit(lambda p, s, k: apply(p, s, X, rng=k)[0])
    np.testing.assert_array_equal(jitted(params, state, k1), y1)
    assert set(np.unique(y0)) <= {0.0, 4.0}
    with pytest.raises(ValueError, match="apply: a random draw from the global key .* Pass rng=key"):
        apply(params, state, X)
    d = Flux.Chain(Flux.Dense(16, 16), Flux.Dropout(0.5))  # a Dropout layer draws from its own key
    p2, s2, apply2 = Flux.functional(d)
    a, new = apply2(p2, s2, X, train=True)
    b, _ = apply2(p2, new, X, train=True)
    assert not np.array_equal(np.asarray(a) == 0, np.asarray(b) == 0)




@Flux.layer
class _NoisyCell:
    def __init__(self):
        self.d = Flux.Dense(5, 3)

    def initialstates(self):
        return jnp.zeros(3)

    def __call__(self, x, h):
        h = self.d(jnp.concatenate([x, h])) + Flux.randn_like(h)
        return h, h


def test_a_recurrent_cell_that_draws_inside_apply_takes_the_rng():
    r = Flux.Recurrence(_NoisyCell())
    params, state, apply = Flux.functional(r)
    xs = jnp.ones((2, 4))  # (features, time)
    k0, k1 = jax.random.PRNGKey(0), jax.random.PRNGKey(1)
    y0 = np.asarray(apply(params, state, xs, rng=k0)[0])
    np.testing.assert_array_equal(apply(params, state, xs, rng=k0)[0], y0)
    assert not np.array_equal(apply(params, state, xs, rng=k1)[0], y0)
    assert not np.allclose(y0[:, 1], y0[:, 2])  # each step its own draw
    with pytest.raises(ValueError, match="Pass rng=key"):
        apply(params, state, xs)
