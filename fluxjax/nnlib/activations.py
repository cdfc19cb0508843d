"""NNlib's activation functions, elementwise over JAX arrays and Python scalars.

Each is a plain function of `x` (plus NNlib's optional parameters), so `relu(x)` is Flux's
`relu.(x)`. The value formulas are NNlib's (`NNlib.jl/src/activations.jl`); the forms are
chosen so that the derivative at a kink is the one NNlib's `rrule` gives (e.g. `relu'(0) == 0`,
`leakyrelu'(0) == a`, `hardtanh'(±1) == 0`), and stay finite everywhere.

Float32 in, float32 out; integer input is promoted to the default float type where the formula
needs it. Example: `relu(jnp.ones((3, 2)))` has shape `(3, 2)`.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
from jax import lax

from ..random import draw_key

ArrayLike = jax.typing.ArrayLike

_GELU_A = 0.044715
_GELU_L = math.sqrt(2 / math.pi)
_GELU_2L = math.sqrt(8 / math.pi)
SELU_LAMBDA = 1.0507009873554804934193349852946
SELU_ALPHA = 1.6732632423543772848170429916717
_LOG2 = math.log(2.0)


def _float(x: ArrayLike) -> jax.Array:
    """`x` as a JAX array with a floating dtype (NNlib's `float(x)`); float dtypes are kept."""
    x = jnp.asarray(x)
    if not jnp.issubdtype(x.dtype, jnp.inexact):
        x = x.astype(jnp.result_type(float))
    return x


def _real(x: ArrayLike, name: str, keep_ints: bool = False) -> jax.Array:
    """`_float(x)` (`jnp.asarray(x)` with `keep_ints`) for an activation that compares `x` with a number,
    which NNlib defines for real numbers only: a complex `x` raises (Julia's `MethodError` for `isless`)
    rather than be compared as JAX compares complex numbers, by their real parts first."""
    x = jnp.asarray(x) if keep_ints else _float(x)
    if jnp.issubdtype(x.dtype, jnp.complexfloating):
        raise TypeError(
            f"{name}: got a complex array ({x.dtype}); NNlib's {name} compares its argument with a number, "
            f"so it is defined for real numbers only. Apply it to the real and imaginary parts "
            f"({name}(jnp.real(x)) + 1j * {name}(jnp.imag(x))), or use an activation defined for complex numbers "
            "(tanh, sigmoid, swish, gelu, softplus)."
        )
    return x


def _nonpos(x: jax.Array) -> jax.Array:
    """`x` where `x <= 0`, else 0: keeps `exp` of the unused branch finite (and its gradient)."""
    return jnp.where(x > 0, jnp.zeros_like(x), x)


def sigmoid(x: ArrayLike) -> jax.Array:
    """`sigmoid(x) = 1 / (1 + exp(-x))`, computed stably (NNlib's `σ`). `sigmoid(0.0) == 0.5`.

    ```python
    >>> sigmoid(jnp.array([-1.0, 0.0, 1.0]))
    Array([0.26894143, 0.5       , 0.7310586 ], dtype=float32)

    ```
    """
    return jax.nn.sigmoid(_float(x))


def sigmoid_fast(x: ArrayLike) -> jax.Array:
    """`sigmoid` clamped as NNlib's `sigmoid_fast`: exactly 1 for `x > 40` and 0 for `x < -80` (plain
    `sigmoid` for Float16, as NNlib); derivative `y * (1 - y)` of the output, as NNlib's rule.

    ```python
    >>> sigmoid_fast(jnp.array([-100.0, 0.0, 1.0, 50.0]))
    Array([0.       , 0.5      , 0.7310586, 1.       ], dtype=float32)

    ```
    """
    return _sigmoid_fast(_float(x))


@jax.custom_jvp
def _sigmoid_fast(x: jax.Array) -> jax.Array:
    y = jax.nn.sigmoid(x)  # already exactly 1 for x > 40 in every float type
    if x.dtype == jnp.float16:
        return y
    return jnp.where(x < -80, jnp.zeros_like(y), y)


@_sigmoid_fast.defjvp
def _sigmoid_fast_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    y = _sigmoid_fast(x)
    return y, y * (1 - y) * t


def hardsigmoid(x: ArrayLike) -> jax.Array:
    """`hardsigmoid(x) = clamp((x + 3) / 6, 0, 1)` (NNlib's `hardσ`); derivative 0 at ±3.

    ```python
    >>> hardsigmoid(jnp.array([-4.0, -1.0, 0.0, 1.0, 4.0]))
    Array([0.        , 0.33333334, 0.5       , 0.6666667 , 1.        ],      dtype=float32)

    ```
    """
    y = (_real(x, "hardsigmoid") + 3) / 6
    return jnp.where(y >= 1, jnp.ones_like(y), jnp.where(y <= 0, jnp.zeros_like(y), y))


def logsigmoid(x: ArrayLike) -> jax.Array:
    """`logsigmoid(x) = log(sigmoid(x)) = -softplus(-x)` (NNlib's `logσ`), stable for large |x|.

    ```python
    >>> logsigmoid(jnp.array([-100.0, 0.0, 1.0]))   # -softplus(-x): finite where log(sigmoid(x)) is not
    Array([-100.       ,   -0.6931472,   -0.3132617], dtype=float32)

    ```
    """
    return -softplus(-_float(x))


def hardtanh(x: ArrayLike) -> jax.Array:
    """`hardtanh(x) = clamp(x, -1, 1)`; derivative 1 strictly inside, 0 at and beyond ±1.

    ```python
    >>> hardtanh(jnp.array([-2.0, -0.5, 0.0, 1.0, 3.0]))
    Array([-1. , -0.5,  0. ,  1. ,  1. ], dtype=float32)

    ```
    """
    x = _real(x, "hardtanh", keep_ints=True)
    return jnp.where(x >= 1, jnp.ones_like(x), jnp.where(x <= -1, -jnp.ones_like(x), x))


def relu(x: ArrayLike) -> jax.Array:
    """`relu(x) = max(0, x)`; `relu'(0) == 0` and NaN propagates, as NNlib.

    ```python
    >>> relu(jnp.array([-2.0, -0.5, 0.0, 1.0, 3.0]))
    Array([0., 0., 0., 1., 3.], dtype=float32)

    ```
    """
    return jax.nn.relu(_real(x, "relu", keep_ints=True))


def leakyrelu(x: ArrayLike, a: float = 0.01) -> jax.Array:
    """`leakyrelu(x, a=0.01) = x > 0 ? x : a*x`; derivative `a` at 0. `leakyrelu(-1.0) == -0.01`.

    ```python
    >>> leakyrelu(jnp.array([-2.0, -0.5, 0.0, 1.0, 3.0]))
    Array([-0.02 , -0.005,  0.   ,  1.   ,  3.   ], dtype=float32)
    >>> leakyrelu(jnp.array([-2.0, -0.5, 0.0, 1.0, 3.0]), 0.2)
    Array([-0.4, -0.1,  0. ,  1. ,  3. ], dtype=float32)

    ```
    """
    x = _real(x, "leakyrelu")
    return jnp.where(x > 0, x, a * x)


def relu6(x: ArrayLike) -> jax.Array:
    """`relu6(x) = min(max(0, x), 6)`; derivative 0 at 0 and at 6.

    ```python
    >>> relu6(jnp.array([-1.0, 3.0, 7.0]))
    Array([0., 3., 6.], dtype=float32)

    ```
    """
    x = _real(x, "relu6", keep_ints=True)
    return jnp.where(x >= 6, jnp.full_like(x, 6), jnp.where(x <= 0, jnp.zeros_like(x), x))


def rrelu(x: ArrayLike, lo: float = 1 / 8, hi: float = 1 / 3, *, rng=None) -> jax.Array:
    """`rrelu(x, lo=1/8, hi=1/3) = leakyrelu(x, a)` with a fresh `a ~ U(lo, hi)` per element.

    NNlib draws `a` from Julia's global RNG on every call. Here `rng` is a JAX key (or an int
    seed); `None` draws a key from fluxjax's global RNG (`fluxjax.seed_`), which happens at
    trace time, so pass `rng` explicitly inside `jax.jit`.

    ```python
    >>> y = rrelu(jnp.array([-1.0, -1.0, 2.0]))  # a random slope in [1/8, 1/3] for each negative entry
    >>> bool(jnp.all((-1/3 <= y[:2]) & (y[:2] <= -1/8))), y[2]
    (True, Array(2., dtype=float32))

    ```
    """
    x = _real(x, "rrelu")
    key = draw_key(rng, "rrelu")
    a = jax.random.uniform(key, x.shape, x.dtype, minval=lo, maxval=hi)
    return jnp.where(x > 0, x, a * x)


def elu(x: ArrayLike, alpha: float = 1.0) -> jax.Array:
    """`elu(x, alpha=1) = x >= 0 ? x : alpha * (exp(x) - 1)`; derivative 1 at 0.

    ```python
    >>> elu(jnp.array([-2.0, -0.5, 0.0, 1.0, 3.0]))
    Array([-0.86466473, -0.39346933,  0.        ,  1.        ,  3.        ],      dtype=float32)

    ```
    """
    x = _real(x, "elu")
    return jnp.where(x >= 0, x, alpha * jnp.expm1(_nonpos(x)))


def _tanh_fast_impl(x: jax.Array) -> jax.Array:
    if x.dtype != jnp.float32:
        return jnp.tanh(x)
    # NNlib's Float32 rational approximation (coefficients from NNlib.jl#345, found with Remez.jl).
    x2 = x * x
    n = 1.0 + x2 * (0.1346604 + x2 * (0.0035974074 + x2 * (2.2332108e-5 + x2 * 1.587199e-8)))
    d = 1.0 + x2 * (0.4679937 + x2 * (0.026262015 + x2 * (0.0003453992 + x2 * 8.7767893e-7)))
    return jnp.where(x2 < 66, x * (n / d), jnp.sign(x)).astype(x.dtype)


@jax.custom_jvp
def _tanh_fast(x: jax.Array) -> jax.Array:
    return _tanh_fast_impl(x)


@_tanh_fast.defjvp
def _tanh_fast_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    y = _tanh_fast(x)
    return y, (1 - y * y) * t


def tanh_fast(x: ArrayLike) -> jax.Array:
    """`tanh` as NNlib's `tanh_fast`: its Float32 rational approximation (within a few eps of
    `tanh`), `tanh` for other dtypes; derivative `1 - tanh_fast(x)^2`. Flux layers use it for `tanh`.

    ```python
    >>> tanh_fast(jnp.array([-1.0, 0.0, 0.5, 10.0]))
    Array([-0.7615942 ,  0.        ,  0.46211714,  1.        ], dtype=float32)

    ```
    """
    return _tanh_fast(_float(x))


def tanh(x: ArrayLike) -> jax.Array:
    """`tanh(x)`, the exact hyperbolic tangent (`jnp.tanh`).

    ```python
    >>> tanh(jnp.array([-1.0, 0.0, 0.5]))
    Array([-0.7615942 ,  0.        ,  0.46211717], dtype=float32)

    ```
    """
    return jnp.tanh(_float(x))


def gelu_tanh(x: ArrayLike) -> jax.Array:
    """`gelu_tanh(x) = x/2 * (1 + tanh(√(2/π) * (x + 0.044715 x³)))`. `gelu_tanh(1.0) ≈ 0.8411920`.

    ```python
    >>> gelu_tanh(jnp.array([-1.0, 0.0, 1.0]))   # gelu is gelu_tanh, as in NNlib 0.9
    Array([-0.15880802,  0.        ,  0.841192  ], dtype=float32)

    ```
    """
    x = _float(x)
    return x / 2 * (1 + tanh_fast(_GELU_L * (x + _GELU_A * x**3)))


gelu = gelu_tanh
"""`gelu = gelu_tanh`, as NNlib (the tanh approximation). `gelu(1.0) ≈ 0.8411920`."""


def gelu_sigmoid(x: ArrayLike) -> jax.Array:
    """`gelu_sigmoid(x) = x * σ(√(8/π) * (x + 0.044715 x³))`, equal to `gelu_tanh` mathematically.

    ```python
    >>> gelu_sigmoid(jnp.array([-1.0, 0.0, 1.0]))
    Array([-0.158808,  0.      ,  0.841192], dtype=float32)

    ```
    """
    x = _float(x)
    return x * sigmoid_fast(_GELU_2L * x * (1 + _GELU_A * x * x))


def gelu_erf(x: ArrayLike) -> jax.Array:
    """`gelu_erf(x) = x/2 * (1 + erf(x/√2))`, the exact GELU. `gelu_erf(1.0) ≈ 0.8413447`.

    ```python
    >>> gelu_erf(jnp.array([-1.0, 0.0, 1.0]))
    Array([-0.15865526,  0.        ,  0.8413447 ], dtype=float32)

    ```
    """
    x = _float(x)
    return x / 2 * (1 + lax.erf(x / math.sqrt(2.0)))


def swish(x: ArrayLike) -> jax.Array:
    """`swish(x) = x * σ(x)`.

    ```python
    >>> swish(jnp.array([-1.0, 0.0, 1.0]))
    Array([-0.26894143,  0.        ,  0.7310586 ], dtype=float32)

    ```
    """
    x = _float(x)
    return x * sigmoid_fast(x)


def hardswish(x: ArrayLike) -> jax.Array:
    """`hardswish(x) = x * hardsigmoid(x)`; derivative `x/3 + 1/2` on `[-3, 3]`, as NNlib's.

    ```python
    >>> hardswish(jnp.array([-4.0, -1.0, 0.0, 1.0, 4.0]))
    Array([-0.        , -0.33333334,  0.        ,  0.6666667 ,  4.        ],      dtype=float32)

    ```
    """
    x = _real(x, "hardswish")
    # piecewise, so that the derivative is NNlib's `deriv_hardswish`: x/3 + 1/2 on [-3, 3] (-1/2 and
    # 3/2 at the ends), where `x * hardsigmoid(x)` would give hardsigmoid's 0 there
    return jnp.where(x < -3, x * 0, jnp.where(x > 3, x, x * (x + 3) / 6))


def lisht(x: ArrayLike) -> jax.Array:
    """`lisht(x) = x * tanh(x)`.

    ```python
    >>> lisht(jnp.array([-1.0, 0.0, 2.0]))
    Array([0.7615942, 0.       , 1.9280552], dtype=float32)

    ```
    """
    x = _float(x)
    return x * tanh_fast(x)


def selu(x: ArrayLike) -> jax.Array:
    """`selu(x) = λ * (x > 0 ? x : α * (exp(x) - 1))`, λ = 1.0507009873554805, α = 1.6732632423543772.

    ```python
    >>> selu(jnp.array([-1.0, 0.0, 1.0]))
    Array([-1.1113307,  0.       ,  1.050701 ], dtype=float32)

    ```
    """
    x = _real(x, "selu")
    return SELU_LAMBDA * jnp.where(x > 0, x, SELU_ALPHA * jnp.expm1(_nonpos(x)))


def celu(x: ArrayLike, alpha: float = 1.0) -> jax.Array:
    """`celu(x, alpha=1) = x >= 0 ? x : alpha * (exp(x/alpha) - 1)`.

    ```python
    >>> celu(jnp.array([-1.0, 0.0, 1.0]))
    Array([-0.63212055,  0.        ,  1.        ], dtype=float32)
    >>> celu(jnp.array([-1.0, 0.0, 1.0]), 0.5)
    Array([-0.43233237,  0.        ,  1.        ], dtype=float32)

    ```
    """
    x = _real(x, "celu")
    return jnp.where(x >= 0, x, alpha * jnp.expm1(_nonpos(x) / alpha))


def trelu(x: ArrayLike, theta: float = 1.0) -> jax.Array:
    """`trelu(x, theta=1) = x > theta ? x : 0` (threshold ReLU). `trelu(1.0) == 0`.

    ```python
    >>> trelu(jnp.array([0.5, 1.0, 2.0]))   # thresholdrelu is the same function
    Array([0., 0., 2.], dtype=float32)
    >>> trelu(jnp.array([0.5, 1.0, 2.0]), 0.2)
    Array([0.5, 1. , 2. ], dtype=float32)

    ```
    """
    x = _real(x, "trelu", keep_ints=True)
    return jnp.where(x <= theta, jnp.zeros_like(x), x)


thresholdrelu = trelu  # NNlib's alias


def softplus(x: ArrayLike) -> jax.Array:
    """`softplus(x) = log(1 + exp(x))`, as `logaddexp(x, 0)`: stable and smooth at 0.

    ```python
    >>> softplus(jnp.array([-100.0, 0.0, 1.0, 100.0]))
    Array([  0.       ,   0.6931472,   1.3132617, 100.       ], dtype=float32)

    ```
    """
    return jnp.logaddexp(_float(x), 0.0)


def softsign(x: ArrayLike) -> jax.Array:
    """`softsign(x) = x / (1 + |x|)`. `softsign(1.0) == 0.5`.

    ```python
    >>> softsign(jnp.array([-3.0, 0.0, 1.0]))
    Array([-0.75,  0.  ,  0.5 ], dtype=float32)

    ```
    """
    x = _float(x)
    return x / (1 + jnp.abs(x))


def logcosh(x: ArrayLike) -> jax.Array:
    """`logcosh(x) = log(cosh(x)) = x + softplus(-2x) - log(2)`, stable for large |x|.

    ```python
    >>> logcosh(jnp.array([-1.0, 0.0, 100.0]))   # x - log(2) for large x, no overflow
    Array([ 0.4337809,  0.       , 99.306854 ], dtype=float32)

    ```
    """
    x = _float(x)
    return x + softplus(-2 * x) - _LOG2


def mish(x: ArrayLike) -> jax.Array:
    """`mish(x) = x * tanh(softplus(x))`.

    ```python
    >>> mish(jnp.array([-1.0, 0.0, 1.0]))
    Array([-0.30340144,  0.        ,  0.8650985 ], dtype=float32)

    ```
    """
    x = _float(x)
    return x * jnp.tanh(softplus(x))


def tanhshrink(x: ArrayLike) -> jax.Array:
    """`tanhshrink(x) = x - tanh(x)`. `tanhshrink(1.0) ≈ 0.23840584`.

    ```python
    >>> tanhshrink(jnp.array([-1.0, 0.0, 1.0]))
    Array([-0.23840582,  0.        ,  0.23840582], dtype=float32)

    ```
    """
    x = _float(x)
    return x - tanh_fast(x)


def softshrink(x: ArrayLike, lambd: float = 0.5) -> jax.Array:
    """`softshrink(x, lambd=0.5) = x > λ ? x - λ : (x < -λ ? x + λ : 0)`; derivative 0 at ±λ.

    ```python
    >>> softshrink(jnp.array([-2.0, -0.5, 0.0, 1.0, 3.0]))
    Array([-1.5,  0. ,  0. ,  0.5,  2.5], dtype=float32)
    >>> softshrink(jnp.array([-2.0, -0.5, 0.0, 1.0, 3.0]), 1.0)
    Array([-1.,  0.,  0.,  0.,  2.], dtype=float32)

    ```
    """
    x = _real(x, "softshrink")
    lo, hi = x - lambd, x + lambd
    return jnp.where(hi >= 0, jnp.where(lo <= 0, jnp.zeros_like(x), lo), hi)


__all__ = [
    "sigmoid", "sigmoid_fast", "hardsigmoid", "logsigmoid", "hardtanh", "relu", "leakyrelu",
    "relu6", "rrelu", "elu", "gelu", "gelu_tanh", "gelu_erf", "gelu_sigmoid", "swish",
    "hardswish", "lisht", "selu", "celu", "trelu", "thresholdrelu", "softplus", "softsign", "logcosh", "mish",
    "tanhshrink", "softshrink", "tanh_fast", "tanh",
]
