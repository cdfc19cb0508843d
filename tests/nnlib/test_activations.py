"""Tests for fluxjax.nnlib.activations: values (NNlib's own test values and a float64 numpy
formula), gradients (finite differences of the numpy formula), NNlib's derivatives at kinks,
dtype preservation, NaN/Inf behaviour and rrelu's randomness.

Known values: `NNlib.jl/test/activations.jl` and docstrings in `NNlib.jl/src/activations.jl`.
"""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from backend import ON_CPU

import fluxjax
import fluxjax.nnlib as nn

LAMBDA, ALPHA = 1.0507009873554804934193349852946, 1.6732632423543772848170429916717
_erf = np.vectorize(math.erf)


def _sig(x):
    return 1 / (1 + np.exp(-x))


def _hsig(x):
    return np.clip((x + 3) / 6, 0, 1)


def _softplus(x):
    return np.logaddexp(x, 0)


# name -> (fluxjax function, float64 numpy formula)
CASES = {
    "sigmoid": (nn.sigmoid, _sig),
    "sigmoid_fast": (nn.sigmoid_fast, _sig),
    "hardsigmoid": (nn.hardsigmoid, _hsig),
    "logsigmoid": (nn.logsigmoid, lambda x: -_softplus(-x)),
    "hardtanh": (nn.hardtanh, lambda x: np.clip(x, -1, 1)),
    "relu": (nn.relu, lambda x: np.maximum(x, 0)),
    "leakyrelu": (nn.leakyrelu, lambda x: np.where(x > 0, x, 0.01 * x)),
    "leakyrelu_0.2": (lambda x: nn.leakyrelu(x, 0.2), lambda x: np.where(x > 0, x, 0.2 * x)),
    "relu6": (nn.relu6, lambda x: np.clip(x, 0, 6)),
    "elu": (nn.elu, lambda x: np.where(x >= 0, x, np.expm1(x))),
    "elu_2": (lambda x: nn.elu(x, 2.0), lambda x: np.where(x >= 0, x, 2 * np.expm1(x))),
    "gelu": (nn.gelu, lambda x: 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3)))),
    "gelu_tanh": (nn.gelu_tanh, lambda x: 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3)))),
    "gelu_sigmoid": (nn.gelu_sigmoid, lambda x: x * _sig(np.sqrt(8 / np.pi) * (x + 0.044715 * x**3))),
    "gelu_erf": (nn.gelu_erf, lambda x: 0.5 * x * (1 + _erf(x / np.sqrt(2)))),
    "swish": (nn.swish, lambda x: x * _sig(x)),
    "hardswish": (nn.hardswish, lambda x: x * _hsig(x)),
    "lisht": (nn.lisht, lambda x: x * np.tanh(x)),
    "selu": (nn.selu, lambda x: LAMBDA * np.where(x > 0, x, ALPHA * np.expm1(x))),
    "celu": (nn.celu, lambda x: np.where(x >= 0, x, np.expm1(x))),
    "celu_0.5": (lambda x: nn.celu(x, 0.5), lambda x: np.where(x >= 0, x, 0.5 * np.expm1(x / 0.5))),
    "trelu": (nn.trelu, lambda x: np.where(x > 1, x, 0)),
    "trelu_0.3": (lambda x: nn.trelu(x, 0.3), lambda x: np.where(x > 0.3, x, 0)),
    "softplus": (nn.softplus, _softplus),
    "softsign": (nn.softsign, lambda x: x / (1 + np.abs(x))),
    "logcosh": (nn.logcosh, lambda x: np.log(np.cosh(x))),
    "mish": (nn.mish, lambda x: x * np.tanh(_softplus(x))),
    "tanhshrink": (nn.tanhshrink, lambda x: x - np.tanh(x)),
    "softshrink": (nn.softshrink, lambda x: np.where(x > 0.5, x - 0.5, np.where(x < -0.5, x + 0.5, 0))),
    "softshrink_1.2": (lambda x: nn.softshrink(x, 1.2), lambda x: np.where(x > 1.2, x - 1.2, np.where(x < -1.2, x + 1.2, 0))),
    "tanh_fast": (nn.tanh_fast, np.tanh),
    "tanh": (nn.tanh, np.tanh),
}

# Away from every kink (0, ±0.3, ±0.5, ±1, ±1.2, ±3, 6) so finite differences are meaningful.
GRID = np.array([-9.0, -5.3, -2.7, -1.9, -1.3, -0.7, -0.2, 0.15, 0.45, 0.8, 1.6, 2.4, 4.1, 6.3, 11.0])


def _values_and_grads(x):
    return {name: (f(x), jax.vmap(jax.grad(f))(x)) for name, (f, _) in CASES.items()}


_OUT = None


def _computed():
    """Every activation and its derivative on GRID, from one jit compilation (float32)."""
    global _OUT
    if _OUT is None:
        _OUT = jax.tree.map(np.asarray, jax.jit(_values_and_grads)(jnp.asarray(GRID, jnp.float32)))
    return _OUT


@pytest.mark.parametrize("name", list(CASES))
def test_value_matches_numpy_formula(name):
    y, _ = _computed()[name]
    assert y.dtype == np.float32
    np.testing.assert_allclose(y, CASES[name][1](GRID), rtol=2e-6, atol=1e-6)


@pytest.mark.parametrize("name", list(CASES))
def test_gradient_matches_finite_differences(name):
    _, g = _computed()[name]
    ref, h = CASES[name][1], 1e-6
    fd = (ref(GRID + h) - ref(GRID - h)) / (2 * h)
    np.testing.assert_allclose(g, fd, rtol=1e-4, atol=1e-5)


def test_nnlib_known_values():
    # NNlib.jl/test/activations.jl, at 0, 1 and -1 (Float64 there; float32 here).
    cases = {
        nn.sigmoid: (0.5, 1 / (1 + math.exp(-1)), math.exp(-1) / (1 + math.exp(-1))),
        nn.hardsigmoid: (0.5, 4 / 6, 2 / 6),
        nn.hardtanh: (0.0, 1.0, -1.0),
        nn.relu: (0.0, 1.0, 0.0),
        nn.leakyrelu: (0.0, 1.0, -0.01),
        nn.relu6: (0.0, 1.0, 0.0),
        nn.elu: (0.0, 1.0, math.exp(-1) - 1),
        nn.gelu: (0.0, 0.8411919906082768, -0.15880800939172324),
        nn.gelu_tanh: (0.0, 0.8411919906082768, -0.15880800939172324),
        nn.gelu_sigmoid: (0.0, 0.8411919906082768, -0.15880800939172324),
        nn.gelu_erf: (0.0, 0.8413447460685429, -0.15865525393145707),
        nn.swish: (0.0, 1 / (1 + math.exp(-1)), -math.exp(-1) / (1 + math.exp(-1))),
        nn.hardswish: (0.0, 4 / 6, -2 / 6),
        nn.lisht: (0.0, math.tanh(1.0), math.tanh(1.0)),
        nn.softplus: (math.log(2.0), math.log(math.e + 1), math.log(math.exp(-1) + 1)),
        nn.softsign: (0.0, 0.5, -0.5),
        nn.selu: (0.0, 1.0507009873554804934193349852946, LAMBDA * ALPHA * (math.exp(-1) - 1)),
        nn.celu: (0.0, 1.0, math.exp(-1) - 1),
        nn.trelu: (0.0, 0.0, 0.0),
        nn.logcosh: (0.0, math.log(math.cosh(1.0)), math.log(math.cosh(1.0))),
        nn.mish: (0.0, math.tanh(math.log(1 + math.e)), -math.tanh(math.log(1 + math.exp(-1)))),
        nn.tanhshrink: (0.0, 0.23840584404423515, -0.23840584404423515),
        nn.softshrink: (0.0, 0.5, -0.5),
    }
    xs = jnp.asarray([0.0, 1.0, -1.0], jnp.float32)
    got = jax.tree.map(np.asarray, jax.jit(lambda x: [f(x) for f in cases])(xs))
    for (f, expected), y in zip(cases.items(), got, strict=True):
        np.testing.assert_allclose(y, expected, rtol=1e-6, atol=1e-7, err_msg=f.__name__)
    assert float(nn.softplus(1e8)) == pytest.approx(1e8)
    assert float(nn.softplus(-1e8)) == 0.0


def test_nnlib_docstring_float32_values():
    # Docstrings in NNlib.jl/src/activations.jl (Float32 outputs, printed to full precision).
    fs = {
        "tanh_fast": (nn.tanh_fast, 0.5, 0.46211714),  # NNlib's rational approximation, bit for bit
        "tanh": (nn.tanh, 0.5, 0.46211717),
        "sigmoid": (nn.sigmoid, 0.2, 0.54983395),
        "sigmoid_fast": (nn.sigmoid_fast, 0.2, 0.54983395),
        "hardsigmoid": (nn.hardsigmoid, 0.2, 0.53333336),
        "celu": (nn.celu, -10.0, -0.9999546),
        "softsign": (nn.softsign, 100.0, 0.990099),
        "softplus": (nn.softplus, 16.0, 16.0),
        "tanhshrink-": (nn.tanhshrink, -10.0, -9.0),
        "tanhshrink+": (nn.tanhshrink, 10.0, 9.0),
        "softshrink-": (nn.softshrink, -10.0, -9.5),
        "softshrink+": (nn.softshrink, 10.0, 9.5),
    }
    xs = jnp.asarray([x for _, x, _ in fs.values()], jnp.float32)
    got = np.asarray(jax.jit(lambda xs: jnp.stack([f(x) for (f, _, _), x in zip(fs.values(), xs)]))(xs))
    for (name, (_, _, expected)), y in zip(fs.items(), got, strict=True):
        if ON_CPU or name == "tanh_fast":
            assert y == np.float32(expected), name
        else:  # a GPU's tanh, exp and division may differ from Julia's (and XLA:CPU's) in the last bits
            np.testing.assert_array_max_ulp(y, np.float32(expected), maxulp=2)


def test_derivatives_at_kinks_follow_nnlib_rules():
    # The derivative rules in NNlib.jl/src/activations.jl (UNARY_ACTS / BINARY_ACTS).
    cases = [
        (nn.relu, 0.0, 0.0),
        (nn.leakyrelu, 0.0, 0.01),
        (nn.hardtanh, 1.0, 0.0),
        (nn.hardtanh, -1.0, 0.0),
        (nn.relu6, 0.0, 0.0),
        (nn.relu6, 6.0, 0.0),
        (nn.hardsigmoid, 3.0, 0.0),
        (nn.hardsigmoid, -3.0, 0.0),
        (nn.hardswish, 3.0, 1.5),  # deriv_hardswish: x/3 + 1/2 on [-3, 3]
        (nn.hardswish, -3.0, -0.5),
        (nn.hardswish, -3.5, 0.0),
        (nn.hardswish, 3.5, 1.0),
        (nn.trelu, 1.0, 0.0),
        (nn.softshrink, 0.5, 0.0),
        (nn.softshrink, -0.5, 0.0),
        (nn.elu, 0.0, 1.0),
        (nn.celu, 0.0, 1.0),
        (nn.selu, 0.0, LAMBDA * ALPHA),
        (nn.sigmoid_fast, -100.0, 0.0),
    ]
    fs = jax.jit(lambda xs: [jax.grad(f)(x) for (f, _, _), x in zip(cases, xs, strict=True)])
    got = fs(jnp.asarray([c[1] for c in cases], jnp.float32))
    for (f, x, expected), g in zip(cases, got, strict=True):
        assert float(g) == pytest.approx(expected, rel=1e-6), (f.__name__, x)
    # NNlib issue #671: softplus is smooth at 0, so its second derivative there is 1/4.
    assert float(jax.grad(jax.grad(nn.softplus))(0.0)) == pytest.approx(0.25, rel=1e-6)
    assert float(jax.grad(nn.softplus)(0.0)) == pytest.approx(0.5, rel=1e-6)


ALL = [
    nn.sigmoid, nn.sigmoid_fast, nn.hardsigmoid, nn.logsigmoid, nn.hardtanh, nn.relu, nn.leakyrelu,
    nn.relu6, nn.elu, nn.gelu, nn.gelu_tanh, nn.gelu_erf, nn.gelu_sigmoid, nn.swish, nn.hardswish,
    nn.lisht, nn.selu, nn.celu, nn.trelu, nn.softplus, nn.softsign, nn.logcosh, nn.mish,
    nn.tanhshrink, nn.softshrink, nn.tanh_fast, nn.tanh,
]


def test_dtypes_are_preserved():
    for f in ALL:
        for dtype in (jnp.float32, jnp.bfloat16, jnp.float16):
            out = jax.eval_shape(f, jax.ShapeDtypeStruct((3, 2), dtype))
            assert out.dtype == dtype and out.shape == (3, 2), (f.__name__, dtype)
        assert jax.eval_shape(f, 1.0).dtype == jnp.float32, f.__name__  # a Python float
        assert jnp.issubdtype(jax.eval_shape(f, jax.ShapeDtypeStruct((2,), jnp.int32)).dtype, jnp.number)
    assert jax.eval_shape(nn.relu, jax.ShapeDtypeStruct((2,), jnp.int32)).dtype == jnp.int32
    assert jax.eval_shape(nn.sigmoid, jax.ShapeDtypeStruct((2,), jnp.int32)).dtype == jnp.float32


def test_nan_inf_and_large_inputs():
    # NNlib.jl/test/activations.jl, "NaN propagation": NaN in, NaN out; +Inf never gives NaN
    # (except softsign); -Inf never gives NaN except for the gelu family, swish, hardswish,
    # logcosh and mish. Large finite inputs give finite values and finite gradients.
    x = jnp.asarray([np.nan, np.inf, -np.inf, -1e4, -100.0, -50.0, 50.0, 100.0, 1e4], jnp.float32)

    def run(x):
        return [(f(x), jax.vmap(jax.grad(f))(x[3:])) for f in ALL]

    may_nan_at_minus_inf = {nn.gelu, nn.gelu_tanh, nn.gelu_sigmoid, nn.gelu_erf, nn.swish, nn.hardswish,
                            nn.logcosh, nn.mish}
    for f, (y, g) in zip(ALL, jax.jit(run)(x), strict=True):
        y, g = np.asarray(y), np.asarray(g)
        assert np.isnan(y[0]), f.__name__
        if f is not nn.softsign:
            assert not np.isnan(y[1]), f.__name__
        if f is not nn.softsign and f not in may_nan_at_minus_inf:
            assert not np.isnan(y[2]), f.__name__
        assert np.isfinite(y[3:]).all(), f.__name__
        assert np.isfinite(g).all(), f.__name__


def test_rrelu():
    # NNlib.jl/test/activations.jl: rrelu(0) == 0, rrelu(1) == 1, -1/3 <= rrelu(-1) <= -1/8.
    def draws(k0, k1):
        x = -jnp.ones(1000)
        return (
            nn.rrelu(x, rng=k0),
            nn.rrelu(x, rng=k0),
            nn.rrelu(x, rng=k1),
            nn.rrelu(jnp.asarray([0.0, 1.0]), rng=k0),
            nn.rrelu(x, 0.0, 1.0, rng=k1),
        )

    y, y_same, y_other, y01, z = _run_keys(draws)
    assert ((y >= -1 / 3) & (y <= -1 / 8)).all()
    assert len(np.unique(y)) > 900  # one slope per element
    np.testing.assert_array_equal(y, y_same)
    assert not np.array_equal(y, y_other)
    np.testing.assert_array_equal(y01, [0.0, 1.0])
    assert ((z >= -1) & (z <= 0)).all()
    # Without a key it draws from fluxjax's global RNG. Under a plain jax.jit the key would be a constant
    # of the program (the same slopes at every call): that raises; fluxjax.jit threads the global key.
    assert jax.eval_shape(nn.rrelu, jax.ShapeDtypeStruct((3,), jnp.bfloat16)).dtype == jnp.bfloat16
    from fluxjax import random as global_rng

    key = global_rng.default_key()
    with pytest.raises(RuntimeError, match=r"rrelu drew from the global key under a JAX transformation"):
        jax.jit(lambda x: nn.rrelu(x))(-jnp.ones(4))
    assert global_rng.default_key() is key
    f = fluxjax.jit(lambda x: nn.rrelu(x))
    a, b = f(-jnp.ones(4)), f(-jnp.ones(4))
    assert ((a >= -1 / 3) & (a <= -1 / 8)).all() and not np.array_equal(a, b)
    assert not np.array_equal(nn.rrelu(-jnp.ones(4)), nn.rrelu(-jnp.ones(4)))  # the global key moves on


def _run_keys(f):
    k0, k1 = jax.random.split(jax.random.PRNGKey(0))
    return jax.tree.map(np.asarray, jax.jit(f)(k0, k1))


PIECEWISE = ["relu", "leakyrelu", "relu6", "rrelu", "elu", "selu", "celu", "hardsigmoid", "hardtanh", "hardswish",
             "trelu", "softshrink"]


@pytest.mark.parametrize("name", PIECEWISE)
def test_piecewise_activations_refuse_complex_input(name):
    # NNlib's piecewise activations compare x with a number: Julia has no `isless` for complex numbers
    # (a MethodError), while JAX would compare by the real part first and answer quietly
    f = getattr(nn, name)
    with pytest.raises(TypeError, match=f"^{name}: got a complex array \\(complex64\\)"):
        f(jnp.array([1.0 + 1.0j, -2.0 + 0.5j], jnp.complex64))
    np.testing.assert_allclose(f(jnp.array([-2.0, 0.5, 4.0]), **({"rng": 0} if name == "rrelu" else {})).shape, (3,))


@pytest.mark.parametrize("name", ["sigmoid", "tanh", "swish", "gelu", "softplus"])
def test_smooth_activations_take_complex_input(name):
    z = jnp.array([0.4 + 0.6j, -0.7 + 0.2j], jnp.complex64)
    assert getattr(nn, name)(z).dtype == jnp.complex64
