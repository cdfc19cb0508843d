"""NNlib's convolutions in Flux's layout, on `jax.lax.conv_general_dilated`.

Layout: `x` is `(spatial..., C, N)` (WHCN for images, `(L, C, N)` in 1-D, `(W, H, D, C, N)` in
3-D), the weight `w` is `(k..., Cin ÷ groups, Cout)`. The dimension numbers describe that layout
to XLA directly (`"01CN"`, `"01IO"`), so there is no transpose in user code; XLA picks the physical
layout.

`conv` is true convolution (the kernel is flipped), as NNlib's `conv` with `flipped=false`;
`flipped=True` (or `crosscor`) is cross-correlation, which is what `lax` computes natively.

Padding `pad` is an int, an N-tuple (symmetric per spatial dim), or a 2N-tuple
`(lo1, hi1, lo2, hi2, ...)` in Flux's dim order (W first); a negative one crops, as NNlib's. The
settings are checked as NNlib's `DenseConvDims` checks them: stride and dilation >= 1, one entry per
spatial dim, and a kernel times dilation that fits in the padded input (else `DimensionMismatch`,
never an empty array).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from numbers import Integral
from typing import Any

import jax
import jax.numpy as jnp
from jax import lax

from .._checks import ints
from ..errors import DimensionMismatch
from ._layout import from_last, to_last
from .dims import ConvDims, DenseConvDims, DepthwiseConvDims, _check_spdf, conv_keywords, expand

IntOrTuple = int | Sequence[int]


def pad_pairs(pad: IntOrTuple, n: int, fn: str = "") -> tuple[tuple[int, int], ...]:
    """Flux's `pad` (int, N-tuple or 2N-tuple `(lo1, hi1, ...)`) as N `(lo, hi)` pairs."""
    p = expand(pad, n, "padding", fn, (n, 2 * n))
    return tuple((p[i], p[i]) for i in range(n)) if len(p) == n else tuple(zip(p[::2], p[1::2], strict=True))


def same_pad(k: IntOrTuple, dilation: IntOrTuple = 1) -> tuple[int, ...]:
    """Flux's `SamePad()` as a 2N-tuple `(lo1, hi1, ...)`: total `(k-1)*d`, `lo = cld(total, 2)`.

    The odd extra pixel goes at the start (JAX's "SAME" puts it at the end).
    `same_pad((4, 3)) == (2, 1, 1, 1)`.

    ```python
    >>> same_pad((3, 3))
    (1, 1, 1, 1)
    >>> same_pad(4)   # even kernels put the extra on the low side, as Flux's SamePad
    (2, 1)

    ```
    """
    ks = ints("same_pad", "the kernel size", k)
    ds = expand(dilation, len(ks), "dilation")
    out: list[int] = []
    for kk, d in zip(ks, ds, strict=True):
        total = (kk - 1) * d
        out += [-(-total // 2), total // 2]
    return tuple(out)


def conv_output_size(
    in_size: Sequence[int], k: Sequence[int], *, stride: IntOrTuple = 1, pad: IntOrTuple = 0,
    dilation: IntOrTuple = 1,
) -> tuple[int, ...]:
    """Spatial output size of `conv`: `fld(n + lo + hi - ((k-1)*d + 1), s) + 1` per dim; a kernel that
    does not fit in the padded input raises `DimensionMismatch`, as `conv` does.

    ```python
    >>> conv_output_size((28, 28), (5, 5))
    (24, 24)
    >>> conv_output_size((28, 28), (3, 3), stride=2, pad=1)
    (14, 14)

    ```
    """
    n = len(k)
    if len(in_size) != n:
        raise DimensionMismatch(f"conv_output_size: in_size {tuple(in_size)} and kernel {tuple(k)} must have one entry "
                                "per spatial dim each")
    s, p, d = _check_spdf("conv_output_size", in_size, k, n, stride, pad, dilation)
    return tuple((in_size[i] + p[2 * i] + p[2 * i + 1] - (k[i] - 1) * d[i] - 1) // s[i] + 1 for i in range(n))


def conv_transpose_output_size(
    in_size: Sequence[int], k: Sequence[int], *, stride: IntOrTuple = 1, pad: IntOrTuple = 0,
    dilation: IntOrTuple = 1, outpad: IntOrTuple = 0,
) -> tuple[int, ...]:
    """Spatial output size of `conv_transpose`: `(n-1)*s + 1 + (k-1)*d - (lo+hi) + outpad`.

    ```python
    >>> conv_transpose_output_size((14, 14), (3, 3), stride=2, pad=1)
    (27, 27)
    >>> conv_transpose_output_size((14, 14), (3, 3), stride=2, pad=1, outpad=1)
    (28, 28)

    ```
    """
    return _transpose_size("conv_transpose_output_size", in_size, k, stride, pad, dilation, outpad)[0]


def _transpose_size(fn: str, in_size, k, stride, pad, dilation, outpad) -> tuple[tuple[int, ...], tuple, tuple, tuple]:
    """`(size, stride, padding, dilation)` of a transposed convolution, checked: stride and dilation >= 1,
    `0 <= outpad < stride` (else no convolution maps the output back onto the input), and a size of at
    least 1 in every spatial dim (where NNlib's `∇conv_data` fails to allocate). Negative padding widens
    the output (Flux's `ConvTranspose` with `SamePad()` and a stride above the kernel size)."""
    n = len(k)
    if len(in_size) != n:
        raise DimensionMismatch(f"{fn}: input size {tuple(in_size)} and kernel {tuple(k)} must have one entry per "
                                "spatial dim each")
    s, p, d = _check_spdf(fn, None, k, n, stride, pad, dilation)
    op = expand(outpad, n, "outpad", fn)
    if any(o < 0 or o >= ss for o, ss in zip(op, s, strict=True)):
        raise DimensionMismatch(f"{fn} needs 0 <= outpad < stride in every dim (the output must map back onto the "
                                f"input), got outpad={outpad!r}, stride={stride!r}")
    full = tuple((in_size[i] - 1) * s[i] + 1 + (k[i] - 1) * d[i] + op[i] for i in range(n))
    size = tuple(full[i] - p[2 * i] - p[2 * i + 1] for i in range(n))
    if min(size, default=1) < 1:
        raise DimensionMismatch(f"{fn}: padding {pad!r} crops the whole output: input size {tuple(in_size)}, kernel "
                                f"{tuple(k)}, stride {s}, dilation {d} and outpad {op} give {full} before the padding "
                                "is taken off; use less padding")
    return size, s, p, d


def _groups(fn: str, groups: Any) -> int:
    if isinstance(groups, bool) or not isinstance(groups, Integral) or groups < 1:
        raise ValueError(f"{fn}: groups must be a positive int, got {groups!r}")
    return int(groups)


def _dimension_numbers(n: int, kernel: str) -> tuple[str, str, str]:
    """For inputs made channels-last by `to_last` (see `_layout.py`); the kernel stays as Flux has it."""
    spatial = "".join(str(i) for i in range(n))
    return "N" + spatial + "C", spatial + kernel, "N" + spatial + "C"


def _check(x: jax.Array, w: jax.Array, what: str) -> int:
    if x.ndim != w.ndim or x.ndim < 3:
        raise DimensionMismatch(
            f"{what} expects x and w of equal rank >= 3 (spatial..., C, N), "
            f"got x of shape {x.shape} and w of shape {w.shape}"
        )
    return w.ndim - 2


def _promote(x, w) -> tuple[jax.Array, jax.Array]:
    x, w = jnp.asarray(x), jnp.asarray(w)
    dtype = jnp.result_type(x, w)
    return x.astype(dtype), w.astype(dtype)


def conv(
    x: jax.typing.ArrayLike, w: jax.typing.ArrayLike, cdims: DenseConvDims | None = None, *, stride: IntOrTuple = 1,
    pad: IntOrTuple = 0, dilation: IntOrTuple = 1, flipped: bool = False, groups: int = 1,
) -> jax.Array:
    """NNlib's `conv`: `y[o, co, b] = Σ x[o*s + k*d - lo, ci, b] * w[K-1-k, ci, co]` (kernel flipped).

    `x` `(spatial..., Cin, N)`, `w` `(k..., Cin ÷ groups, Cout)` give `(spatial_out..., Cout, N)`;
    with `flipped=True` the kernel is not reversed (cross-correlation). NNlib's `conv(x, w, cdims)`
    with `cdims = DenseConvDims(x, w; ...)` is accepted in place of the keywords.
    `conv(jnp.ones((28, 28, 3, 16)), jnp.ones((5, 5, 3, 8))).shape == (24, 24, 8, 16)`.

    ```python
    >>> x = jnp.arange(1.0, 6.0).reshape(5, 1, 1)   # (W, Cin, N)
    >>> w = jnp.array([1.0, 0.0, -1.0]).reshape(3, 1, 1)   # (K, Cin, Cout)
    >>> conv(x, w)[:, 0, 0]   # the kernel is flipped: x[i+2] - x[i]
    Array([2., 2., 2.], dtype=float32)
    >>> conv(x, w, pad=1, flipped=True)[:, 0, 0]
    Array([-2., -2., -2., -2.,  4.], dtype=float32)

    ```
    """
    x, w = _promote(x, w)
    if cdims is not None:
        _check(x, w, "conv")
        kw = conv_keywords(cdims, "conv", x.shape, w.shape, stride=stride, pad=pad, dilation=dilation,
                           flipped=flipped, groups=groups)
        return _conv("conv", x, w, **kw)
    return _conv("conv", x, w, stride, pad, dilation, flipped, groups)


def _conv(fn: str, x: jax.Array, w: jax.Array, stride: IntOrTuple = 1, pad: IntOrTuple = 0, dilation: IntOrTuple = 1,
          flipped: bool = False, groups: int = 1) -> jax.Array:
    """`conv` of the promoted `x` and `w`, checked as NNlib's `DenseConvDims` checks them (channels, groups,
    stride, padding, dilation, and a kernel that fits the padded input); `fn` names the caller in errors."""
    n = _check(x, w, fn)
    groups = _groups(fn, groups)
    if x.shape[-2] != w.shape[-2] * groups or w.shape[-1] % groups:
        raise DimensionMismatch(
            f"{fn} with groups={groups} expects size(x, {n + 1}) == "
            f"size(w, {n + 1}) * groups and size(w, {n + 2}) divisible by groups, "
            f"got x of shape {x.shape} and w of shape {w.shape}"
        )
    s, p, d = _check_spdf(fn, x.shape, w.shape, n, stride, pad, dilation)
    if not flipped:
        w = lax.rev(w, tuple(range(n)))
    return from_last(lax.conv_general_dilated(
        to_last(x), w,
        window_strides=s,
        padding=tuple(zip(p[::2], p[1::2], strict=True)),
        rhs_dilation=d,
        dimension_numbers=_dimension_numbers(n, "IO"),
        feature_group_count=groups,
    ))


def conv_bias_act(
    x: jax.typing.ArrayLike, w: jax.typing.ArrayLike, b: Any, sigma: Any = None, *more: Callable,
    stride: IntOrTuple = 1, pad: IntOrTuple = 0, dilation: IntOrTuple = 1, flipped: bool = False, groups: int = 1,
) -> jax.Array:
    """NNlib's `conv_bias_act(x, w, cdims, b, σ)`: `σ.(conv(x, w) .+ b)`, one fused XLA expression.

    `conv_bias_act(x, w, b, σ; keywords...)` takes `conv`'s keywords; NNlib's order
    `conv_bias_act(x, w, cdims, b, σ)` with a `DenseConvDims` is accepted too. `b` is NNlib's
    `(1, ..., 1, Cout, 1)` array or a vector of the `Cout` biases; `σ` defaults to the identity.

    ```python
    >>> x = jnp.array([1.0, 2.0, 4.0, 8.0, 16.0]).reshape(5, 1, 1)
    >>> w = jnp.array([1.0, 0.0, -1.0]).reshape(3, 1, 1)
    >>> conv(x, w)[:, 0, 0]
    Array([ 3.,  6., 12.], dtype=float32)
    >>> conv_bias_act(x, w, jnp.array([-5.0]), relu)[:, 0, 0]   # relu.(conv(x, w) .- 5)
    Array([0., 1., 7.], dtype=float32)

    ```
    """
    cdims = None
    if isinstance(b, ConvDims):
        cdims, b, sigma = b, sigma, (more[0] if more else None)
        if b is None:
            raise TypeError("conv_bias_act(x, w, cdims, b, σ): the bias b is missing")
    elif more:
        raise TypeError(f"conv_bias_act takes (x, w, b, σ) or (x, w, cdims, b, σ), got {len(more)} more arguments")
    y = conv(x, w, cdims, stride=stride, pad=pad, dilation=dilation, flipped=flipped, groups=groups)
    sigma = sigma if sigma is not None else (lambda v: v)
    b = jnp.asarray(b)
    if b.ndim == 1:
        if b.shape[0] != y.shape[-2]:
            raise DimensionMismatch(f"conv_bias_act: {b.shape[0]} biases for {y.shape[-2]} output channels")
        b = b.reshape((1,) * (y.ndim - 2) + (-1, 1))
    return sigma(y + b.astype(y.dtype))


def crosscor(
    x: jax.typing.ArrayLike, w: jax.typing.ArrayLike, *, stride: IntOrTuple = 1,
    pad: IntOrTuple = 0, dilation: IntOrTuple = 1, groups: int = 1,
) -> jax.Array:
    """Cross-correlation, `conv(x, w; flipped=true)`, as Flux's `CrossCor`; same shapes as `conv`.

    ```python
    >>> x = jnp.arange(1.0, 6.0).reshape(5, 1, 1)   # (W, Cin, N)
    >>> w = jnp.array([1.0, 0.0, -1.0]).reshape(3, 1, 1)
    >>> crosscor(x, w)[:, 0, 0]   # no flip: x[i] - x[i+2]
    Array([-2., -2., -2.], dtype=float32)

    ```
    """
    return _conv("crosscor", *_promote(x, w), stride, pad, dilation, True, groups)


def depthwiseconv(
    x: jax.typing.ArrayLike, w: jax.typing.ArrayLike, cdims: DepthwiseConvDims | None = None, *, stride: IntOrTuple = 1,
    pad: IntOrTuple = 0, dilation: IntOrTuple = 1, flipped: bool = False,
) -> jax.Array:
    """NNlib's `depthwiseconv`: `conv` with `groups = Cin`.

    `w` is NNlib's depthwise layout `(k..., mult, Cin)`, output channel `i*mult + m` (0-based);
    Flux's grouped layout `(k..., 1, Cout)` (what `DepthwiseConv` holds) is accepted as well, and
    NNlib's `DepthwiseConvDims` in place of the keywords.
    `depthwiseconv(jnp.ones((10, 10, 3, 2)), jnp.ones((2, 2, 3, 3))).shape == (9, 9, 9, 2)`.

    ```python
    >>> x = jnp.ones((5, 5, 3, 1))   # WHCN, 3 channels
    >>> w = jnp.ones((3, 3, 2, 3))   # (kW, kH, multiplier, Cin)
    >>> depthwiseconv(x, w).shape   # Cout = multiplier * Cin
    (3, 3, 6, 1)

    ```
    """
    x, w = _promote(x, w)
    _check(x, w, "depthwiseconv")
    if cdims is not None:
        kw = conv_keywords(cdims, "depthwiseconv", x.shape, w.shape, stride=stride, pad=pad, dilation=dilation,
                           flipped=flipped)
        return depthwiseconv(x, w, **kw)
    cin = x.shape[-2]
    w = _grouped(w, cin, f"depthwiseconv expects w of shape (k..., mult, {cin}) or (k..., 1, mult*{cin}) for x of shape {x.shape}")
    return _conv("depthwiseconv", x, w, stride, pad, dilation, flipped, cin)


def _grouped(w: jax.Array, cin: int, expects: str) -> jax.Array:
    """A depthwise weight as `conv`'s grouped one, `(k..., 1, mult*Cin)`: NNlib's `(k..., mult, Cin)` is
    merged column-major (output channel `i*mult + m`); the grouped layout passes as it is."""
    n = w.ndim - 2
    if w.shape[-1] == cin:
        return jnp.reshape(w, (*w.shape[:n], 1, w.shape[-2] * cin), order="F")
    if not (w.shape[-2] == 1 and w.shape[-1] % cin == 0):
        raise DimensionMismatch(f"{expects}, got {w.shape}")
    return w


def conv_transpose(
    x: jax.typing.ArrayLike, w: jax.typing.ArrayLike, *, stride: IntOrTuple = 1,
    pad: IntOrTuple = 0, dilation: IntOrTuple = 1, groups: int = 1, outpad: IntOrTuple = 0,
    flipped: bool = False,
) -> jax.Array:
    """Transposed convolution, NNlib's `∇conv_data` as used by Flux's `ConvTranspose`.

    It is the adjoint (input gradient) of `conv(·, w; stride, pad, dilation, flipped, groups)`, so a
    complex `w` enters conjugated, as in NNlib (`conv_transpose(x, w) == grad_conv_data(x, w)`):
    `w` is `(k..., Cout ÷ groups, Cin)`, `x` `(spatial..., Cin, N)` gives `(spatial_out..., Cout, N)`
    with `spatial_out = (n-1)*s + 1 + (k-1)*d - (lo+hi) + outpad`.
    `conv_transpose(jnp.ones((8, 8, 2, 1)), jnp.ones((3, 3, 4, 2))).shape == (10, 10, 4, 1)`.

    ```python
    >>> x = jnp.ones((3, 1, 1))   # (W, Cin, N)
    >>> w = jnp.ones((2, 1, 1))   # (K, Cout, Cin)
    >>> conv_transpose(x, w)[:, 0, 0]
    Array([1., 2., 2., 1.], dtype=float32)
    >>> conv_transpose(x, w, stride=2).shape
    (6, 1, 1)

    ```
    """
    x, w = _promote(x, w)
    n = _check(x, w, "conv_transpose")
    groups = _groups("conv_transpose", groups)
    if x.shape[-2] != w.shape[-1] or w.shape[-1] % groups:
        raise DimensionMismatch(
            f"conv_transpose expects size(x, {n + 1}) == size(w, {n + 2}) "
            f"(divisible by groups={groups}), got x of shape {x.shape} and w of shape {w.shape}"
        )
    k = w.shape[:n]
    _, s, p, d = _transpose_size("conv_transpose", x.shape[:n], k, stride, pad, dilation, outpad)
    op = expand(outpad, n, "outpad")
    # Adjoint of the cross-correlation with w' = flip(w) (flipped=False) or w (flipped=True):
    # a cross-correlation of the s-dilated input with flip(w'), padded by (k-1)*d - lo on the
    # left and (k-1)*d - hi + outpad on the right (negative values crop).
    w = jnp.conj(w)  # the adjoint: NNlib's gemm takes 'C' (a no-op for real w)
    if flipped:
        w = lax.rev(w, tuple(range(n)))
    padding = tuple(((k[i] - 1) * d[i] - p[2 * i], (k[i] - 1) * d[i] - p[2 * i + 1] + op[i]) for i in range(n))
    if groups > 1:  # (k..., Cout/g, Cin) -> (k..., Cout, Cin/g): group j's block of Cin is its own.
        cout_g, cin = w.shape[-2], w.shape[-1]
        w = w.reshape(*k, cout_g, groups, cin // groups)
        w = jnp.swapaxes(w, n, n + 1).reshape(*k, groups * cout_g, cin // groups)
    return from_last(lax.conv_general_dilated(
        to_last(x), w,
        window_strides=(1,) * n,
        padding=padding,
        lhs_dilation=s,
        rhs_dilation=d,
        dimension_numbers=_dimension_numbers(n, "OI"),
        feature_group_count=groups,
    ))


# ----------------------------------------------------------------------------------------------
# NNlib's hand-written pullbacks of `conv`: `∇conv_data` and `∇conv_filter`, spelled grad_conv_*


def _size_arg(size, n: int, full: tuple[int, ...], what: str) -> tuple[int, ...]:
    """A full shape (`n + 2` entries) or only the spatial dims (`n` entries) as the full shape."""
    size = ints("grad_conv", what, size)
    if len(size) == n:
        return (*size, *full)
    if len(size) == n + 2:
        if size[n:] != full:
            raise DimensionMismatch(f"{what} {size} should end with {full}, the channel/batch sizes")
        return size
    raise DimensionMismatch(f"{what} {size} should have {n} (spatial) or {n + 2} entries")


def _check_dy(what: str, x_shape, w_shape, dy_shape, n: int, kw: dict) -> None:
    _groups(what, kw["groups"])
    _check_spdf(what, x_shape, w_shape, n, kw["stride"], kw["pad"], kw["dilation"])
    want = (*conv_output_size(x_shape[:n], w_shape[:n], stride=kw["stride"], pad=kw["pad"], dilation=kw["dilation"]),
            w_shape[-1], x_shape[-1])
    if tuple(dy_shape) != want or x_shape[-2] != w_shape[-2] * kw["groups"] or w_shape[-1] % kw["groups"]:
        raise DimensionMismatch(
            f"{what}: conv of x {tuple(x_shape)} with w {tuple(w_shape)} (groups={kw['groups']}, "
            f"stride={kw['stride']}, pad={kw['pad']}, dilation={kw['dilation']}) gives {want}, but dy has shape {tuple(dy_shape)}"
        )


def grad_conv_data(
    dy: jax.typing.ArrayLike, w: jax.typing.ArrayLike, x_size: IntOrTuple | DenseConvDims | None = None, *,
    stride: IntOrTuple = 1, pad: IntOrTuple = 0, dilation: IntOrTuple = 1, flipped: bool = False, groups: int = 1,
) -> jax.Array:
    """NNlib's `∇conv_data(dy, w, cdims)`: the gradient of `conv(x, w; ...)` with respect to `x`, given `dy`.

    NNlib's `DenseConvDims(x, w; stride, padding, dilation, flipkernel, groups)` is accepted in place of
    `x_size`, or becomes the keywords `stride, pad, dilation, flipped, groups` (as `conv`) plus `x_size`,
    the shape of `x` (all of it, or just its spatial dims). With a stride several input sizes give the
    same output; `x_size=None` takes the smallest, `(out-1)*s + (k-1)*d + 1 - (lo+hi)`, as
    `conv_transpose` does. `conv` flips the kernel unless
    `flipped=True`, so this is the adjoint of exactly that operation: for complex arrays the conjugate
    transpose, `conj(w)` enters as in NNlib, which is Zygote's (`fluxjax.pullback`'s) gradient of `conv`;
    for real arrays `jax.vjp` of `conv` gives the same.

    NNlib's test: `x = reshape(1:5, 5, 1, 1)`, `w = reshape(1:2, 2, 1, 1)`, `dy = conv(x, w)`;
    `grad_conv_data(dy, w)[:, 0, 0] == [8, 18, 27, 36, 13]`.

    ```python
    >>> x, w = jnp.ones((5, 1, 1)), jnp.ones((3, 1, 1))
    >>> dy = jnp.ones((3, 1, 1))
    >>> grad_conv_data(dy, w, x.shape)[:, 0, 0]   # how often each x[i] is used
    Array([1., 2., 3., 2., 1.], dtype=float32)

    ```
    """
    dy, w = _promote(dy, w)
    n = _check(dy, w, "grad_conv_data")
    if isinstance(x_size, ConvDims):
        kw = conv_keywords(x_size, "grad_conv_data", None, w.shape, stride=stride, pad=pad, dilation=dilation,
                           flipped=flipped, groups=groups)
        return grad_conv_data(dy, w, x_size.input_size, **kw)
    kw = dict(stride=stride, pad=pad, dilation=dilation, flipped=flipped, groups=groups)
    full = (w.shape[-2] * _groups("grad_conv_data", groups), dy.shape[-1])
    if x_size is None:
        spatial = _transpose_size("grad_conv_data", dy.shape[:n], w.shape[:n], stride, pad, dilation, 0)[0]
        x_shape = (*spatial, *full)
    else:
        x_shape = _size_arg(x_size, n, full, "x_size")
    _check_dy("grad_conv_data", x_shape, w.shape, dy.shape, n, kw)
    wc = jnp.conj(w)  # the adjoint, not the transpose, for complex w (a no-op for real w)
    return adjoint(lambda x: conv(x, wc, **kw), x_shape, dy)


def adjoint(f: Callable, shape: tuple, dy: jax.Array) -> jax.Array:
    """The adjoint of the linear `f` at an input of `shape` (in `dy`'s dtype), applied to `dy`. JAX has
    no cotangents of integers (it gives `float0`, empty values): integer `dy` is transposed in floats and
    rounded back, for NNlib's integer results (`fold` of an `Int` array)."""
    if not jnp.issubdtype(dy.dtype, jnp.integer):
        (dx,) = jax.linear_transpose(f, jax.ShapeDtypeStruct(tuple(shape), dy.dtype))(dy)
        return dx
    ft = jnp.result_type(float)  # float32, or float64 under jax_enable_x64
    (dx,) = jax.linear_transpose(lambda x: f(x).astype(ft), jax.ShapeDtypeStruct(tuple(shape), ft))(dy.astype(ft))
    return jnp.round(dx).astype(dy.dtype)


def grad_conv_filter(
    x: jax.typing.ArrayLike, dy: jax.typing.ArrayLike, w_size: IntOrTuple | DenseConvDims | None = None, *, stride: IntOrTuple = 1,
    pad: IntOrTuple = 0, dilation: IntOrTuple = 1, flipped: bool = False, groups: int = 1,
) -> jax.Array:
    """NNlib's `∇conv_filter(x, dy, cdims)`: the gradient of `conv(x, w; ...)` with respect to `w`, given `dy`.

    The keywords are `conv`'s; `w_size` is the shape of `w` `(k..., Cin ÷ groups, Cout)`, all of it or just the
    kernel size `k`, or NNlib's `DenseConvDims` in place of both. Without it the kernel size is solved
    from the sizes of `x` and `dy`, which is ambiguous with a stride > 1 (then pass `w_size`). The result
    is in `conv`'s convention: the kernel is flipped unless `flipped=True`. It is the adjoint with respect
    to `w`: for complex arrays `conj(x)` enters as in NNlib (`grad_conv_filter(x, dy) == conj(x) .* dy` for a
    1×1 kernel), which is Zygote's (`fluxjax.pullback`'s) gradient of `conv`; for real arrays it equals
    `jax.vjp` of `conv` with respect to `w`.

    NNlib's test: `x = reshape(1:5, 5, 1, 1)`, `w = reshape(1:2, 2, 1, 1)`, `dy = conv(x, w)`;
    `grad_conv_filter(x, dy, (2,))[:, 0, 0] == [134, 100]`.

    ```python
    >>> x, w = jnp.arange(1.0, 6.0).reshape(5, 1, 1), jnp.ones((3, 1, 1))
    >>> dy = jnp.ones((3, 1, 1))
    >>> grad_conv_filter(x, dy, w.shape)[:, 0, 0]
    Array([12.,  9.,  6.], dtype=float32)

    ```
    """
    x, dy = _promote(x, dy)
    if x.ndim != dy.ndim or x.ndim < 3:
        raise DimensionMismatch(
            f"grad_conv_filter expects x and dy of equal rank >= 3 (spatial..., C, N), "
            f"got x of shape {x.shape} and dy of shape {dy.shape}"
        )
    n = x.ndim - 2
    if isinstance(w_size, ConvDims):
        kw = conv_keywords(w_size, "grad_conv_filter", x.shape, None, stride=stride, pad=pad, dilation=dilation,
                           flipped=flipped, groups=groups)
        return grad_conv_filter(x, dy, w_size.kernel_size, **kw)
    kw = dict(stride=stride, pad=pad, dilation=dilation, flipped=flipped, groups=groups)
    if x.shape[-2] % _groups("grad_conv_filter", groups):
        raise DimensionMismatch(f"grad_conv_filter: {x.shape[-2]} input channels are not divisible by groups={groups}")
    full = (x.shape[-2] // groups, dy.shape[-2])
    if w_size is None:
        s, p, d = _check_spdf("grad_conv_filter", None, None, n, stride, pad, dilation)
        ks = []
        for i in range(n):
            span = x.shape[i] + p[2 * i] + p[2 * i + 1] - 1 - (dy.shape[i] - 1) * s[i]  # (k-1)*d + r, 0 <= r < s
            cands = [(span - r) // d[i] + 1 for r in range(s[i]) if span - r >= 0 and (span - r) % d[i] == 0]
            if len(cands) != 1:
                raise ValueError(
                    f"grad_conv_filter: the kernel size along spatial dim {i} is {'ambiguous' if cands else 'impossible'} "
                    f"for x of shape {x.shape}, dy of shape {dy.shape} and stride={stride}; pass w_size=(k...)"
                )
            ks.append(cands[0])
        w_shape = (*ks, *full)
    else:
        w_shape = _size_arg(w_size, n, full, "w_size")
    _check_dy("grad_conv_filter", x.shape, w_shape, dy.shape, n, kw)
    xc = jnp.conj(x)  # the adjoint, not the transpose, for complex x (a no-op for real x)
    return adjoint(lambda w: conv(xc, w, **kw), w_shape, dy)


__all__ = [
    "grad_conv_data", "grad_conv_filter", "conv_bias_act",
    "conv", "crosscor", "depthwiseconv", "conv_transpose", "same_pad", "conv_output_size",
    "conv_transpose_output_size", "pad_pairs", "expand",
]
