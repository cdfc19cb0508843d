"""Draws from the host's random generators inside a compiled call (fluxjax/compiled/hostrandom.py): the
eager gradient and the fused eager loop draw anew at each call, as op by op (Zygote's); an explicit
`fluxjax.jit` warns that the draw is a constant of its program."""

import random

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import fluxjax as Flux
from fluxjax.optimise import eagerstep
from fluxjax.zygote import api


@pytest.fixture(autouse=True)
def _fresh(monkeypatch):
    # each case decides anew: the losses below share their code objects across cases, and a code that
    # fell back once stays op by op
    monkeypatch.setattr(api, "_EAGER_ONLY", {})

X = jnp.asarray(np.random.default_rng(0).normal(size=(3, 4)), jnp.float32)
G = np.random.default_rng(5)  # a module-level Generator the loss reads as a global


class _Augment:
    def __init__(self, rng):
        self.rng = rng

    def __call__(self, shape):
        return self.rng.standard_normal(shape, dtype=np.float32)


def _generators():
    """name -> (reseed(), draw()) for each kind of host generator, reached as code would reach it."""
    held_gen = {"g": np.random.default_rng(1)}
    held_rs = {"r": np.random.RandomState(2)}
    held_py = {"p": random.Random(3)}
    gen, rs, py = held_gen["g"], held_rs["r"], held_py["p"]  # closure cells of the draws below
    aug = _Augment(np.random.default_rng(7))  # a callable object holding its generator
    normal = np.random.default_rng(8).normal  # a bound method of a generator
    return {
        "Generator in an object's field": (lambda: aug.rng.bit_generator.__setstate__(
            np.random.default_rng(7).bit_generator.state), lambda: aug((2, 4))),
        "bound Generator method": (lambda: normal.__self__.bit_generator.__setstate__(
            np.random.default_rng(8).bit_generator.state), lambda: normal(size=(2, 4)).astype(np.float32)),
        "np.random": (lambda: np.random.seed(4), lambda: np.random.randn(2, 4).astype(np.float32)),
        "global Generator": (lambda: G.bit_generator.__setstate__(np.random.default_rng(5).bit_generator.state),
                             lambda: G.standard_normal((2, 4), dtype=np.float32)),
        "closure Generator": (lambda: gen.bit_generator.__setstate__(np.random.default_rng(1).bit_generator.state),
                              lambda: gen.standard_normal((2, 4), dtype=np.float32)),
        "RandomState": (lambda: rs.seed(2), lambda: rs.standard_normal((2, 4)).astype(np.float32)),
        "random": (lambda: random.seed(6), lambda: np.float32(random.gauss(0.0, 1.0))),
        "random.Random": (lambda: py.seed(3), lambda: np.float32(py.gauss(0.0, 1.0))),
    }


GENERATORS = list(_generators())


@pytest.mark.parametrize("name", GENERATORS)
def test_the_eager_gradient_draws_anew_at_each_call(name):
    reseed, draw = _generators()[name]
    m = Flux.Dense(3, 2)

    def loss(m):
        return jnp.sum((m(X) + draw()) ** 2)

    def run(jit):
        reseed()
        return [Flux.withgradient(loss, m, jit=jit) for _ in range(3)]

    compiled, op_by_op = run(True), run(False)
    vals = [float(v) for v, _ in compiled]
    assert len(set(vals)) == 3  # a fresh draw each call, not the first call's noise
    for (a, ga), (b, gb) in zip(compiled, op_by_op):
        np.testing.assert_allclose(a, b, rtol=1e-5)
        np.testing.assert_allclose(ga[0].weight, gb[0].weight, rtol=1e-5)


@pytest.mark.parametrize("name", ["np.random", "closure Generator"])
def test_the_fused_eager_loop_draws_anew_at_each_step(name):
    # the VAE's `z = mu + randn(Float32, size(logsigma)) .* exp.(logsigma)`, ported with np.random
    def train(fused):
        eagerstep.clear()
        reseed, draw = _generators()[name]
        reseed()
        Flux.seed_(0)
        m = Flux.Chain(Flux.Dense(3, 4, Flux.relu), Flux.Dense(4, 2))
        s = Flux.setup(Flux.Adam(0.01), m)
        losses = []
        for _ in range(4):
            val, g = Flux.withgradient(lambda m: jnp.sum((m(X) + draw()) ** 2), m, jit=fused)  # noqa: B023
            Flux.update_(s, m, g[0])
            losses.append(float(val))
        return losses, jax.tree_util.tree_leaves(m)

    (la, ma), (lb, mb) = train(True), train(False)
    np.testing.assert_allclose(la, lb, rtol=1e-5)
    for a, b in zip(ma, mb):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7)


def test_an_explicit_jit_warns_that_the_draw_is_a_constant():
    m = Flux.Dense(3, 2)

    @Flux.jit
    def noisy(m, x):
        return m(x) + np.random.randn(2, 4).astype(np.float32)

    with pytest.warns(UserWarning, match="drew from a host random generator .* constant of the compiled program") as w:
        noisy(m, X)
    assert w[0].filename == __file__  # the user's call, not a line of JAX's tracing (pjit.py)
    with Flux.eager():
        pass  # (op by op, the opt-out the warning names, draws at every call: nothing to compile)

    @Flux.jit
    def keyed(m, x):  # fluxjax's own draws take the global key as an input: no warning
        return m(x) + Flux.randn_like(jnp.zeros((2, 4)))

    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        a, b = keyed(m, X), keyed(m, X)
    assert not np.allclose(a, b)


@Flux.layer
class _Noisy:
    """A layer holding a NumPy generator in a field (not walked: keyed)."""

    def __init__(self, d):
        self.d, self.rng = d, np.random.default_rng(9)

    def __call__(self, x):
        return self.d(x) * np.float32(self.rng.normal())


def test_a_generator_in_a_layer_field_draws_anew_at_each_call():
    def run(jit):
        Flux.seed_(0)
        m = _Noisy(Flux.Dense(3, 2))
        return [Flux.gradient(lambda m: jnp.sum(m(X) ** 2), m, jit=jit)[0].d.weight for _ in range(3)]

    compiled, op_by_op = run(True), run(False)
    for c, e in zip(compiled, op_by_op):
        np.testing.assert_allclose(c, e, rtol=1e-5)
    assert not np.allclose(compiled[0], compiled[1])
