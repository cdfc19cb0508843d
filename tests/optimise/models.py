"""The small models and comparisons that the tests of fused and compiled steps share (`train_`'s scan
in test_fused.py, the fused eager loop in test_eager_fused.py, fields set while tracing in
tests/compiled): 3 inputs, 2 outputs."""

import jax
import jax.numpy as jnp
import numpy as np

import fluxjax as Flux


def mse(m, x, y):
    return Flux.mse(m(x), y)


def mlp():
    return Flux.Chain(Flux.Dense(3, 5, Flux.tanh), Flux.Dense(5, 2))


def stateful(bias: bool = True):
    """Dense, BatchNorm, Dropout, Dense. Without the bias before the BatchNorm, whose gradient is
    rounding noise that Adam scales up, two ways of computing a step agree closely."""
    return Flux.Chain(Flux.Dense(3, 5, bias=bias), Flux.BatchNorm(5, Flux.relu), Flux.Dropout(0.3), Flux.Dense(5, 2))


def tied():
    """One layer at two places."""
    d = Flux.Dense(3, 3, Flux.tanh)
    return Flux.Chain(d, d, Flux.Dense(3, 2))


def tied_arrays():
    """One array in two layers: one optimiser state, the gradients summed."""
    a, b = Flux.Dense(3, 3, Flux.tanh), Flux.Dense(3, 3)
    b.weight = a.weight
    return Flux.Chain(a, b, Flux.Dense(3, 2))


@Flux.layer
class ActNorm:
    """Glow's activation normalisation: the first batch it sees sets its scale and bias (data-dependent
    initialisation), which a Python flag records."""

    def __init__(self, n: int):
        self.scale = jnp.ones((n, 1))
        self.bias = jnp.zeros((n, 1))
        self.initialized = False

    def __call__(self, x):
        if not self.initialized:
            self.bias = -jnp.mean(x, axis=1, keepdims=True)
            self.scale = 1 / (jnp.std(x, axis=1, keepdims=True) + 1e-6)
            self.initialized = True
        return self.scale * (x + self.bias)


def arrays(*trees) -> list:
    return [np.asarray(a) for a in jax.tree_util.tree_leaves(trees)]


def assert_same_arrays(a, b, rtol: float = 1e-5) -> None:
    """The trees `a` and `b` hold as many arrays, pairwise close."""
    for x, y in zip(arrays(a), arrays(b), strict=True):
        np.testing.assert_allclose(x, y, rtol=rtol, atol=1e-6)


class DecayDescent(Flux.optimise.AbstractRule):
    """Optimisers.jl's documented example rule: the step `eta / sqrt(t) * dx` at the `t`-th update."""

    def __init__(self, eta=0.1):
        self.eta = eta

    def init(self, x):
        return 1

    def apply_(self, state, x, dx):
        return state + 1, self.eta / jnp.sqrt(state) * dx
