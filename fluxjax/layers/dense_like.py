"""Dense-like layers from Flux's `src/layers/basic.jl`: `Bilinear`, `Scale`, `Embedding`."""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

from .._checks import as_array, as_size, check_callable, in_python_terms, is_int, match_eltype, positive_ints
from ..compiled.pure import concrete
from ..core.layer import is_array, layer
from ..errors import DimensionMismatch, describe
from ..init import create_bias, glorot_uniform, ones32, randn32
from .basic import act_name, identity

__all__ = ["Bilinear", "Scale", "Embedding"]


def _init(init: Callable, dims: tuple, rng):
    return init(*dims, rng=rng) if rng is not None else init(*dims)


def _suffix(sigma, bias) -> str:
    s = "" if sigma is identity else f", {act_name(sigma)}"
    return s + ("; bias=false" if bias is False else "")


def _bilinear_sizes(args: tuple):
    """Sizes from Flux's spellings: `in1, in2, out`; `((in1, in2), out)`; `(in1, in2), out`; `(in, out)`;
    `in, out`. Returns `(in or (in1, in2), out, remaining args)`."""
    a = args[0] if args else None
    if len(args) >= 3 and all(is_int(v) for v in args[:3]):
        return (args[0], args[1]), args[2], args[3:]
    if isinstance(a, tuple) and len(a) == 2 and isinstance(a[0], tuple):
        return a[0], a[1], args[1:]
    if isinstance(a, tuple) and len(args) >= 2 and is_int(args[1]):
        return a, args[1], args[2:]
    if isinstance(a, tuple) and len(a) == 2:
        return a[0], a[1], args[1:]
    if len(args) >= 2 and is_int(a) and is_int(args[1]):
        return a, args[1], args[2:]
    raise TypeError(
        "Bilinear needs sizes: Bilinear(((in1, in2), out), sigma), Bilinear((in, out)), "
        f"Bilinear(in1, in2, out) or a 3-array of weights; got {args!r}"
    )


# ---------------------------------------------------------------------------------------------


@layer
class Bilinear:
    """Bilinear map of two inputs: `z[i] = sigma(x' * W[i, :, :] * y + bias[i])`, `W` is `(out, in1, in2)`.

    Flux's `Bilinear((in1, in2) => out, σ; bias=true, init=glorot_uniform)` is written
    `Bilinear(((in1, in2), out), sigma)`, `Bilinear((in1, in2), out, sigma)` or (Flux's positional form)
    `Bilinear(in1, in2, out, sigma)`; Flux's `Bilinear(in => out)` is `Bilinear((in, out))` or
    `Bilinear(in, out)`, meaning `in1 == in2 == in`. `Bilinear(W, bias=True, sigma=identity)` wraps a
    3-array. Inputs are vectors `(in1,)`, `(in2,)` or matrices `(in1, batch)`, `(in2, batch)`;
    `B(x) == B(x, x)` and `B((x, y)) == B(x, y)` (so it can follow a layer returning a tuple).

    ```python
    >>> B = Bilinear((5, 5), 7)
    >>> B(jnp.ones((5, 32))).shape
    (7, 32)

    ```
    """

    def __init__(self, *args, bias=True, init: Callable = glorot_uniform, rng=None):
        if args and is_array(args[0]) and np.ndim(args[0]) > 0:
            if len(args) > 3:
                raise TypeError("Bilinear(W, bias=True, sigma=identity): at most 3 positional arguments")
            weight = jnp.asarray(args[0])
            if weight.ndim != 3:
                raise ValueError(f"Bilinear(W, ...): expected a 3-array of weights, got shape {weight.shape}")
            b, sigma = (tuple(args[1:]) + (None, None))[:2]
            if callable(b) and not is_array(b):
                b, sigma = None, b
            bias_arg = bias if b is None else b
        else:
            ins, out, rest = _bilinear_sizes(tuple(as_size(v) for v in args))
            if len(rest) > 1:
                raise TypeError(f"Bilinear: too many positional arguments {args!r}")
            sigma = rest[0] if rest else None
            in1, in2 = (ins, ins) if is_int(ins) else tuple(ins)
            in1, in2, out = positive_ints("Bilinear", in1, in2, out)
            weight = _init(init, (out, in1, in2), rng)
            bias_arg = bias
        check_callable("Bilinear", "the activation σ", sigma)
        self.weight = weight
        self.bias = _named_bias("Bilinear", weight, bias_arg, weight.shape[0])
        self.sigma = identity if sigma is None else sigma

    def __call__(self, x, y=None) -> jax.Array:
        if y is None:
            if isinstance(x, tuple):
                if len(x) != 2:
                    raise ValueError(f"layer {self._show()} takes a tuple of 2 inputs, got {len(x)}")
                x, y = x
            else:
                x = y = as_array(self, x, hint="pass the two inputs as a tuple, B((x, y)), or as B(x, y)")
        W = self.weight
        x, y = match_eltype(self, x, W.dtype), match_eltype(self, y, W.dtype)
        _, n1, n2 = W.shape
        for name, v, n in (("x", x, n1), ("y", y, n2)):
            if v.ndim not in (1, 2) or v.shape[0] != n:
                raise DimensionMismatch(
                    f"layer {self._show()} expects a vector or matrix {name} with size({name}, 1) == {n}, "
                    f"but got {describe(v)}"
                )
        if x.ndim != y.ndim or x.shape[1:] != y.shape[1:]:
            raise DimensionMismatch(
                f"layer {self._show()}: data inputs must agree on the number of columns, got "
                f"{describe(x)} and {describe(y)}"
            )
        z = jnp.einsum("oij,i...,j...->o...", W, x, y)
        if self.bias is not False:
            z = z + (self.bias if z.ndim == 1 else self.bias[:, None])
        return self.sigma(z)

    def _show(self) -> str:
        out, n1, n2 = self.weight.shape
        ins = f"{n1}" if n1 == n2 else f"({n1}, {n2})"
        return f"Bilinear({ins} => {out}{_suffix(self.sigma, self.bias)})"


# ---------------------------------------------------------------------------------------------


def _check_broadcast(layer_, scale: jax.Array, x: jax.Array) -> None:
    """Julia's broadcast rule: shapes aligned on their FIRST dims (missing trailing dims are 1)."""
    n = max(scale.ndim, x.ndim)
    for a, b in zip(scale.shape + (1,) * (n - scale.ndim), x.shape + (1,) * (n - x.ndim), strict=True):
        if a != b and a != 1 and b != 1:
            raise DimensionMismatch(
                f"layer {layer_._show()} cannot broadcast its scale of size {tuple(scale.shape)} with "
                f"an input {describe(x)} (Julia broadcasting aligns the first dims)"
            )


def _pad_to(a: jax.Array, n: int) -> jax.Array:
    return a.reshape(a.shape + (1,) * (n - a.ndim))


@layer
class Scale:
    """Elementwise affine layer, `y = sigma.(scale .* x .+ bias)` with Julia's broadcasting.

    `Scale(size..., sigma=identity; bias=True, init=ones32)` builds `scale = init(size...)` and
    `bias = zeros(size...)`; `Scale(scale, bias=True, sigma=identity)` wraps an array. As in Julia,
    `scale` (shape `size`) is aligned with the FIRST dims of `x`, so `Scale(2)` scales the rows of a
    `(2, batch)` matrix, and `Scale(2, 3)` maps `(2, 1, batch)` to `(2, 3, batch)`.

    ```python
    >>> Scale(2)(jnp.array([[1.0, 2.0]]))       # (2,) .* (1, 2)
    Array([[1., 2.],
           [1., 2.]], dtype=float32)

    ```
    """

    def __init__(self, *args, bias=True, init: Callable = ones32, rng=None):
        if args and is_array(args[0]):
            if len(args) > 3:
                raise TypeError("Scale(scale, bias=True, sigma=identity): at most 3 positional arguments")
            scale = jnp.asarray(args[0])
            b = args[1] if len(args) > 1 else None
            sigma = args[2] if len(args) > 2 else None
            if callable(b) and not is_array(b):
                b, sigma = None, b
            bias_arg = bias if b is None else b
        else:
            sigma = None
            if args and callable(args[-1]):
                args, sigma = args[:-1], args[-1]
            if len(args) == 1 and isinstance(args[0], tuple):
                args = args[0]
            if not args:
                raise TypeError("Scale needs a size, e.g. Scale(2) or Scale(2, 3, relu), or an array")
            if isinstance(args[-1], str):
                check_callable("Scale", "the activation σ", args[-1])
            args = positive_ints("Scale", *args)
            scale = _init(init, tuple(args), rng)
            bias_arg = bias
        check_callable("Scale", "the activation σ", sigma)
        self.scale = scale
        self.bias = _named_bias("Scale", scale, bias_arg, *scale.shape)
        self.sigma = identity if sigma is None else sigma

    def __call__(self, x) -> jax.Array:
        x = match_eltype(self, x, self.scale.dtype)
        _check_broadcast(self, self.scale, x)
        n = max(self.scale.ndim, x.ndim)
        y = _pad_to(self.scale, n) * _pad_to(x, n)
        if self.bias is not False:
            y = y + _pad_to(self.bias, n)
        return self.sigma(y)

    def _show(self) -> str:
        return f"Scale({', '.join(str(d) for d in self.scale.shape)}{_suffix(self.sigma, self.bias)})"


# ---------------------------------------------------------------------------------------------


def _named_bias(owner: str, weight, bias, *dims):
    try:
        return create_bias(weight, bias, *dims)
    except ValueError as e:
        raise DimensionMismatch(f"{owner}: {e}") from None


def _concrete(x) -> bool:
    return concrete(x)  # (in a compiled eager call: the call goes op by op, where the check runs)


@layer(trainable=("weight",))
class Embedding:
    """A lookup table of `in` embedding vectors of length `out`, stored as `weight` of shape `(out, in)`.

    Flux's `Embedding(in => out; init=randn32, padding_idx=nothing)` is `Embedding(in, out)` or
    `Embedding((in, out))`; `Embedding(W; padding_idx=None)` wraps a matrix. Indices are 0-based,
    `0 <= i < in`:

    - an int `i` gives `weight[:, i]`, of shape `(out,)`;
    - an integer array of shape `s` gives `(out, *s)`;
    - a bool (one-hot) array of shape `(in, rest...)`, as `onehotbatch` gives, gives `weight @ x`, `(out, rest...)`.

    Float input raises `TypeError`, as Flux's: token ids stored as floats need `x.astype(int)`, a float
    one-hot `x.astype(bool)`, and a weighted mix of embeddings is `e.weight @ x`.

    `padding_idx` (0-based) zeroes that column at construction and masks its output (and so its
    gradient). Only `weight` is trainable. Out-of-range concrete indices raise `IndexError`; inside a
    trace (jit) they give NaN columns.

    ```python
    >>> e = Embedding(26, 4)
    >>> e(jnp.array([[2, 0, 19], [3, 3, 1]])).shape
    (4, 2, 3)

    ```
    """

    __fluxjax_autosize_dim__ = 0  # autosize reads `_` off the feature dimension

    def __init__(self, a, b=None, *, init: Callable = randn32, padding_idx: int | None = None, rng=None):
        a = as_size(a)  # `Embedding(jnp.array(26), 4)`: a 0-d integer array is a size
        if is_array(a):
            if b is not None:
                raise TypeError("Embedding(W; padding_idx=None) takes one positional argument")
            weight = jnp.asarray(a)
            if weight.ndim != 2:
                raise ValueError(f"Embedding(W): W must be a matrix (out, in), got shape {weight.shape}")
        else:
            n_in, n_out = a if isinstance(a, tuple) else (a, b)
            n_in, n_out = positive_ints("Embedding", n_in, n_out)
            weight = _init(init, (n_out, n_in), rng)
        n_in = weight.shape[1]
        if padding_idx is not None:
            if not is_int(padding_idx) or not 0 <= padding_idx < n_in:
                raise ValueError(f"Embedding: padding_idx={padding_idx} must be in 0:{n_in - 1} (0-based)")
            padding_idx = int(padding_idx)
            if not is_array(a):
                weight = weight.at[:, padding_idx].set(0)
        self.weight = weight
        self.padding_idx = padding_idx

    def __call__(self, x) -> jax.Array:
        W = self.weight
        n_in = W.shape[1]
        x = as_array(self, x)
        if jnp.issubdtype(x.dtype, jnp.integer):
            return self._lookup(x)
        if not jnp.issubdtype(x.dtype, jnp.bool_):
            raise TypeError(
                f"layer {self._show()} takes integer indices (0-based) or a bool one-hot array, got {describe(x)}: "
                "convert float token ids with x.astype(int), a float one-hot array with x.astype(bool); "
                "a weighted mix of embeddings is layer.weight @ x"
            )
        if x.ndim == 0 or x.shape[0] != n_in:
            raise DimensionMismatch(
                f"layer {self._show()} expects integer indices, or one-hot input with "
                f"size(input, 1) == {n_in}, but got {describe(x)}"
                + in_python_terms(self, x, 0, n_in, "one-hot rows first, batch last; or integer indices")
            )
        # A one-hot product picks columns: exact at full precision, not rounded as a GPU's TF32 would.
        xf = x.astype(W.dtype).reshape(n_in, -1)
        y = jnp.matmul(W, xf, precision=jax.lax.Precision.HIGHEST).reshape((W.shape[0],) + x.shape[1:])
        if self.padding_idx is not None:
            keep = (x[self.padding_idx] == 0).astype(W.dtype)  # Flux: y .* !x[padding_idx]
            y = y * keep
        return y

    def _lookup(self, x: jax.Array) -> jax.Array:
        W = self.weight
        n_in = W.shape[1]
        if _concrete(x):
            xs = np.asarray(x)
            if xs.size and (xs.min() < 0 or xs.max() >= n_in):
                bad = int(xs.min()) if xs.min() < 0 else int(xs.max())
                raise IndexError(
                    f"layer {self._show()}: index {bad} is out of range; indices must be in "
                    f"0:{n_in - 1} (0-based)"
                )
        else:
            x = jnp.where(x < 0, n_in, x)  # negative indices must not wrap around: make them out of range
        y = jnp.take(W, x, axis=1, mode="fill", fill_value=jnp.nan)
        if self.padding_idx is not None:
            y = y * (x != self.padding_idx).astype(W.dtype)
        return y

    def _show(self) -> str:
        s = f"Embedding({self.weight.shape[1]} => {self.weight.shape[0]}"
        if self.padding_idx is not None:
            s += f", padding_idx={self.padding_idx}"
        return s + ")"

