"""Convolution layers: Flux's `src/layers/conv.jl` (`Conv`, `ConvTranspose`, `CrossCor`, `DepthwiseConv`,
`SamePad`), in Flux's layout.

Inputs are `(spatial..., C, N)` (WHCN for images); weights are `(k..., cin ÷ groups, cout)` (for
`ConvTranspose`, `(k..., cout ÷ groups, cin)`). `Conv` is true convolution (the kernel is flipped, as
NNlib's `conv`); `CrossCor` is not flipped. `pad` is an int, an N-tuple, a 2N-tuple `(lo1, hi1, ...)` in
Flux's dim order, or `SamePad()`, which puts the odd extra pixel at the start.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import jax.numpy as jnp

from .._checks import as_array, check_callable, in_python_terms, int_tuple, is_int, match_eltype, name
from ..core.layer import is_array, layer
from ..errors import DimensionMismatch, describe
from ..init import create_bias, glorot_uniform
from ..nnlib._layout import from_last, to_last
from ..nnlib.conv import conv, conv_transpose, crosscor, same_pad
from .basic import act_name, identity

PadSpec = Any  # int | tuple[int, ...] | SamePad


class SamePad:
    """Padding such that the output size is `cld(n, stride)` (`n * stride` for `ConvTranspose`).

    Total padding `(k-1)*dilation` per dim, split `lo = cld(t, 2)`, `hi = fld(t, 2)`: the odd extra
    pixel goes at the *start* (JAX's `"SAME"` puts it at the end).

    ```python
    >>> Conv((2, 2), (3, 7), pad=SamePad())
    Conv((2, 2), 3 => 7, pad=(1, 0, 1, 0))  # 91 parameters

    ```
    """

    def __repr__(self) -> str:
        return "SamePad()"

    def __eq__(self, other) -> bool:
        return isinstance(other, SamePad)

    def __hash__(self) -> int:
        return hash(SamePad)


def _is_samepad(pad) -> bool:
    return isinstance(pad, SamePad) or pad is SamePad


def calc_padding(pad: PadSpec, k: Sequence[int], dilation: Sequence[int]) -> tuple[int, ...]:
    """Flux's `calc_padding`: an int becomes a 2N-tuple, a tuple is kept (N or 2N entries), and
    `SamePad()` becomes `(cld(t,2), fld(t,2), ...)` with `t = (k-1)*dilation`. A negative entry crops
    (a `ConvTranspose`'s output grows), as in Flux: the model zoo's `ConvTranspose(..., pad=(0, -1, 0, -1))`."""
    n = len(k)
    if _is_samepad(pad):
        return same_pad(tuple(k), tuple(dilation))
    if is_int(pad):
        pads = (int(pad),) * (2 * n)
    elif isinstance(pad, (tuple, list)) and len(pad) in (n, 2 * n) and all(is_int(p) for p in pad):
        pads = tuple(int(p) for p in pad)
    else:
        raise ValueError(f"pad must be an int, a {n}-tuple, a {2 * n}-tuple or SamePad(), got {pad!r}")
    return pads


def _maybetuple_string(t: tuple) -> str:
    return str(t[0]) if all(v == t[0] for v in t) else str(t)


def _kernel_tuple(k, name: str) -> tuple[int, ...]:
    if not isinstance(k, (tuple, list)) or not k or not all(is_int(v) for v in k):
        raise TypeError(f"{name}: the kernel size must be a tuple of ints such as (3, 3) or (3,), got {k!r}")
    k = tuple(int(v) for v in k)
    if any(v <= 0 for v in k):
        raise ValueError(f"{name}: kernel sizes must be positive, got {k}")
    return k


def _channels(ch, rest: tuple, name: str) -> tuple[int, int, tuple]:
    """`(cin, cout)` from `(cin, cout), σ` or `cin, cout, σ` (the tuple is Flux's `cin => cout`)."""
    if isinstance(ch, (tuple, list)) and len(ch) == 2:
        cin, cout = ch
    elif is_int(ch) and rest and is_int(rest[0]):
        cin, cout, rest = ch, rest[0], rest[1:]
    else:
        raise TypeError(f"{name}: channels must be given as (cin, cout), got {ch!r}")
    if not (is_int(cin) and is_int(cout)) or cin <= 0 or cout <= 0:
        raise ValueError(f"{name}: channel counts must be positive integers, got {(cin, cout)}")
    return int(cin), int(cout), rest


def _filter(init: Callable, shape: tuple[int, ...], rng) -> Any:
    """`init(shape...)` checked to have that shape (Flux's `_sizecheck`)."""
    w = init(*shape, rng=rng) if rng is not None else init(*shape)
    w = jnp.asarray(w)
    if tuple(w.shape) != shape:
        raise DimensionMismatch(f"Weight shape mismatch: expected {shape}, got {tuple(w.shape)}")
    return w


def _bias(weight, bias, n: int, owner: str = "Conv"):
    try:
        return create_bias(weight, bias, n)
    except ValueError as e:
        raise DimensionMismatch(f"{owner}: {e}") from None


def _split_args(b, c, bias, name: str) -> tuple[Any, Callable | None]:
    """`(bias, σ)` of the array form `L(w, [bias, σ])`; a callable second argument is σ, and the
    `bias=` keyword is used when no bias is given positionally."""
    if callable(b) and not is_array(b):
        b, c = None, b
    if c is not None and not callable(c):
        raise TypeError(f"{name}(weight, bias, σ): σ must be callable, got {c!r}")
    return (bias if b is None else b), c


def _as_array(x, lay=None):
    return as_array(lay, x)


def _geometry(owner: str, n: int, k: tuple, stride, dilation, pad, *, outpad=None, pad_k=None):
    """Checked `(stride, dilation, pad[, outpad])`: stride >= 1, dilation >= 1 (0 allowed where the
    kernel size is 1, as Flux), pad >= 0 and 0 <= outpad < stride, one entry per spatial dim."""
    s = int_tuple(owner, "stride", stride, n)
    d = int_tuple(owner, "dilation", dilation, n, minimum=0)
    if any(dd < 1 and kk > 1 for dd, kk in zip(d, k)):
        raise ValueError(f"{owner}: dilation must be positive, got {dilation!r}")
    try:
        p = calc_padding(pad, k if pad_k is None else pad_k(s), d)
    except ValueError as e:
        raise ValueError(f"{owner}: {e}") from None
    if outpad is None:
        return s, d, p
    op = int_tuple(owner, "outpad", outpad, n, minimum=0)
    if any(o >= ss for o, ss in zip(op, s)):
        # NNlib's ∇conv_data: no convolution maps that output size back onto the input (its check_dims fails)
        raise ValueError(f"{owner}: outpad must be smaller than stride in every dim, got outpad={outpad!r}, stride={stride!r}")
    return s, d, p, op


def _pad_total(pad: tuple, i: int, n: int) -> int:
    """lo + hi padding of spatial dim `i`, from an N-tuple (symmetric) or a 2N-tuple."""
    return 2 * pad[i] if len(pad) == n else pad[2 * i] + pad[2 * i + 1]


def _check_groups(owner: str, groups) -> None:
    if not is_int(groups) or groups < 1:
        raise ValueError(f"{owner}: groups must be a positive integer, got {groups!r}")


def _spatial_check(lay, x, k, dilation, pad) -> None:
    """Flux/NNlib cannot make an output smaller than one pixel: the padded input must hold the
    (dilated) kernel in every spatial dim."""
    for i, (n, kk, d) in enumerate(zip(x.shape[:-2], k, dilation)):
        keff = (kk - 1) * d + 1
        if n + _pad_total(pad, i, len(k)) < keff:
            raise DimensionMismatch(
                f"layer {name(lay)} needs a (padded) spatial size of at least {keff} in dim {i + 1} for its "
                f"kernel, but got {describe(x)}"
            )


def _conv_size_check(lay, x, cin: int) -> None:
    nd = lay.weight.ndim
    if x.ndim != nd:
        extra = ""
        if x.ndim == nd - 1 and x.shape[-1] == cin:
            extra = f". In Python terms: x.shape == {tuple(x.shape)} has no batch axis: try x[..., None]"
        raise DimensionMismatch(f"layer {lay._show()} expects ndims(input) == {nd}, but got {describe(x)}{extra}")
    if x.shape[-2] != cin:
        raise DimensionMismatch(
            f"layer {lay._show()} expects size(input, {nd - 1}) == {cin}, but got {describe(x)}"
            + in_python_terms(lay, x, nd - 2, cin, "width, height, ..., channels, batch", "channels")
        )


def _call_dilation(lay) -> tuple[int, ...]:
    """The dilation passed to NNlib: a size-1 kernel dim ignores it (Flux allows `dilation=0` there)."""
    k = lay.weight.shape[:-2]
    return tuple(d if kk > 1 else 1 for d, kk in zip(lay.dilation, k))


def _bias_act(sigma: Callable, y, bias):
    if bias is False and sigma is identity:
        return y
    y = to_last(y)  # cancels with the convolution's own transpose back (see nnlib/_layout.py)
    if bias is not False:
        y = y + bias
    return from_last(y if sigma is identity else sigma(y))


def _conv_opts(lay) -> str:
    s = ""
    if lay.sigma is not identity:
        s += f", {act_name(lay.sigma)}"
    if any(p != 0 for p in lay.pad):
        s += f", pad={_maybetuple_string(lay.pad)}"
    if any(v != 1 for v in lay.stride):
        s += f", stride={_maybetuple_string(lay.stride)}"
    if any(v != 1 for v in lay.dilation):
        s += f", dilation={_maybetuple_string(lay.dilation)}"
    if getattr(lay, "groups", 1) != 1:
        s += f", groups={lay.groups}"
    if lay.bias is False:
        s += ", bias=false"
    return s


def _kernel_str(w) -> str:
    return str(tuple(int(v) for v in w.shape[:-2]))


@layer
class Conv:
    """Convolution `y = σ.(conv(x, weight) .+ bias)`, true convolution (kernel flipped) as NNlib's `conv`.

    `Conv(k, (cin, cout), σ=identity; stride=1, pad=0, dilation=1, groups=1, bias=True,
    init=glorot_uniform)` builds a weight `(k..., cin ÷ groups, cout)`; `Conv(weight, bias=True, σ;
    stride, pad, dilation, groups)` wraps an existing one. Input `(spatial..., cin, N)` with
    `len(k)` spatial dims; output `(fld(n + lo + hi - (k-1)*d - 1, s) + 1..., cout, N)`.

    ```python
    >>> Conv((5, 5), (3, 7), relu)(jnp.ones((100, 100, 3, 50))).shape
    (96, 96, 7, 50)

    ```
    """

    def __init__(
        self, a, b=None, c=None, d=None, *, stride=1, pad: PadSpec = 0, dilation=1, groups: int = 1,
        bias=True, init: Callable = glorot_uniform, rng=None,
    ):
        if is_array(a):
            weight = jnp.asarray(a)
            bias_arg, sigma = _split_args(b, c, bias, "Conv")
        else:
            k = _kernel_tuple(a, "Conv")
            cin, cout, rest = _channels(b, (c, d) if d is not None else (c,), "Conv")
            sigma = rest[0] if rest else None
            _check_groups("Conv", groups)
            if cin % groups:
                raise ValueError(f"Conv: input channel dimension {cin} must be divisible by groups={groups}")
            if cout % groups:
                raise ValueError(f"Conv: output channel dimension {cout} must be divisible by groups={groups}")
            weight = _filter(init, (*k, cin // groups, cout), rng)
            bias_arg = bias
        if weight.ndim < 3:
            raise ValueError(f"Conv: weight must have shape (k..., cin ÷ groups, cout), got {weight.shape}")
        _check_groups("Conv", groups)
        if weight.shape[-1] % groups:
            raise ValueError(f"Conv: output channel dimension {weight.shape[-1]} must be divisible by groups={groups}")
        n = weight.ndim - 2
        check_callable("Conv", "the activation σ", sigma)
        stride, dilation, pad = _geometry("Conv", n, weight.shape[:n], stride, dilation, pad)
        self.sigma = identity if sigma is None else sigma
        self.weight = weight
        self.bias = _bias(weight, bias_arg, weight.shape[-1], "Conv")
        self.stride = stride
        self.dilation = dilation
        self.pad = pad
        self.groups = int(groups)

    def __call__(self, x):
        x = _as_array(x, self)
        _conv_size_check(self, x, self.weight.shape[-2] * self.groups)
        _spatial_check(self, x, self.weight.shape[:-2], _call_dilation(self), self.pad)
        x = match_eltype(self, x, self.weight.dtype)
        y = conv(x, self.weight, stride=self.stride, pad=self.pad, dilation=_call_dilation(self), groups=self.groups)
        return _bias_act(self.sigma, y, self.bias)

    def _show(self) -> str:
        w = self.weight
        return f"Conv({_kernel_str(w)}, {w.shape[-2] * self.groups} => {w.shape[-1]}{_conv_opts(self)})"


@layer
class ConvTranspose:
    """Transposed convolution (NNlib's `∇conv_data`, the adjoint of `Conv`), which upsamples.

    `ConvTranspose(k, (cin, cout), σ=identity; stride=1, pad=0, outpad=0, dilation=1, groups=1,
    bias=True, init=glorot_uniform)` builds a weight `(k..., cout ÷ groups, cin)`; `ConvTranspose(weight,
    bias=True, σ; ...)` wraps one. Output spatial size `(n-1)*s + 1 + (k-1)*d - (lo+hi) + outpad`;
    `pad=SamePad()` gives `n * stride`. `outpad` must be smaller than `stride` (NNlib's size check).

    ```python
    >>> ConvTranspose((5, 5), (3, 7), stride=2)(jnp.ones((100, 100, 3, 50))).shape
    (203, 203, 7, 50)

    ```
    """

    def __init__(
        self, a, b=None, c=None, d=None, *, stride=1, pad: PadSpec = 0, outpad=0, dilation=1, groups: int = 1,
        bias=True, init: Callable = glorot_uniform, rng=None,
    ):
        if is_array(a):
            weight = jnp.asarray(a)
            bias_arg, sigma = _split_args(b, c, bias, "ConvTranspose")
        else:
            k = _kernel_tuple(a, "ConvTranspose")
            cin, cout, rest = _channels(b, (c, d) if d is not None else (c,), "ConvTranspose")
            sigma = rest[0] if rest else None
            _check_groups("ConvTranspose", groups)
            if cin % groups or cout % groups:
                raise ValueError(f"ConvTranspose: channels {cin} => {cout} must be divisible by groups={groups}")
            weight = _filter(init, (*k, cout // groups, cin), rng)
            bias_arg = bias
        if weight.ndim < 3:
            raise ValueError(f"ConvTranspose: weight must have shape (k..., cout ÷ groups, cin), got {weight.shape}")
        _check_groups("ConvTranspose", groups)
        if weight.shape[-1] % groups:
            raise ValueError(f"ConvTranspose: input channel dimension {weight.shape[-1]} must be divisible by groups={groups}")
        n = weight.ndim - 2
        check_callable("ConvTranspose", "the activation σ", sigma)
        k = weight.shape[:n]
        # Flux: SamePad for the kernel k - stride + 1, giving n * stride
        pad_k = (lambda s: tuple(kk - ss + 1 for kk, ss in zip(k, s))) if _is_samepad(pad) else None
        stride, dilation, pad, outpad = _geometry("ConvTranspose", n, k, stride, dilation, pad, outpad=outpad, pad_k=pad_k)
        self.sigma = identity if sigma is None else sigma
        self.weight = weight
        self.bias = _bias(weight, bias_arg, weight.shape[-2] * groups, "ConvTranspose")
        self.stride = stride
        self.dilation = dilation
        self.pad = pad
        self.outpad = outpad
        self.groups = int(groups)

    def __call__(self, x):
        x = _as_array(x, self)
        _conv_size_check(self, x, self.weight.shape[-1])
        self._output_check(x)
        x = match_eltype(self, x, self.weight.dtype)
        y = conv_transpose(
            x, self.weight, stride=self.stride, pad=self.pad, dilation=_call_dilation(self), groups=self.groups,
            outpad=self.outpad,
        )
        return _bias_act(self.sigma, y, self.bias)

    def _output_check(self, x) -> None:
        k, d = self.weight.shape[:-2], _call_dilation(self)
        for i, (n, kk, dd, s, o) in enumerate(zip(x.shape[:-2], k, d, self.stride, self.outpad)):
            if (n - 1) * s + 1 + (kk - 1) * dd - _pad_total(self.pad, i, len(k)) + o < 1:
                raise DimensionMismatch(
                    f"layer {name(self)}: padding {self.pad} leaves no output in spatial dim {i + 1} for input "
                    f"{describe(x)}"
                )

    def _show(self) -> str:
        w = self.weight
        s = f"ConvTranspose({_kernel_str(w)}, {w.shape[-1]} => {w.shape[-2] * self.groups}{_conv_opts(self)}"
        if any(o != 0 for o in self.outpad):
            s += f", outpad={self.outpad}"
        return s + ")"


@layer
class CrossCor:
    """Cross-correlation layer: as `Conv` but the kernel is *not* flipped, and no `groups`.

    `CrossCor(k, (cin, cout), σ=identity; stride=1, pad=0, dilation=1, bias=True, init=glorot_uniform)`
    or `CrossCor(weight, bias=True, σ; stride, pad, dilation)`; weight `(k..., cin, cout)`.
    `CrossCor(w[::-1, ::-1])(x) ≈ Conv(w)(x)`.

    ```python
    >>> CrossCor((5, 5), (3, 6), relu, bias=False)(jnp.ones((100, 100, 3, 50))).shape
    (96, 96, 6, 50)

    ```
    """

    def __init__(
        self, a, b=None, c=None, d=None, *, stride=1, pad: PadSpec = 0, dilation=1, bias=True,
        init: Callable = glorot_uniform, rng=None,
    ):
        if is_array(a):
            weight = jnp.asarray(a)
            bias_arg, sigma = _split_args(b, c, bias, "CrossCor")
        else:
            k = _kernel_tuple(a, "CrossCor")
            cin, cout, rest = _channels(b, (c, d) if d is not None else (c,), "CrossCor")
            sigma = rest[0] if rest else None
            weight = _filter(init, (*k, cin, cout), rng)
            bias_arg = bias
        if weight.ndim < 3:
            raise ValueError(f"CrossCor: weight must have shape (k..., cin, cout), got {weight.shape}")
        n = weight.ndim - 2
        check_callable("CrossCor", "the activation σ", sigma)
        stride, dilation, pad = _geometry("CrossCor", n, weight.shape[:n], stride, dilation, pad)
        self.sigma = identity if sigma is None else sigma
        self.weight = weight
        self.bias = _bias(weight, bias_arg, weight.shape[-1], "CrossCor")
        self.stride = stride
        self.dilation = dilation
        self.pad = pad

    def __call__(self, x):
        x = _as_array(x, self)
        _conv_size_check(self, x, self.weight.shape[-2])
        _spatial_check(self, x, self.weight.shape[:-2], _call_dilation(self), self.pad)
        x = match_eltype(self, x, self.weight.dtype)
        y = crosscor(x, self.weight, stride=self.stride, pad=self.pad, dilation=_call_dilation(self))
        return _bias_act(self.sigma, y, self.bias)

    def _show(self) -> str:
        w = self.weight
        return f"CrossCor({_kernel_str(w)}, {w.shape[-2]} => {w.shape[-1]}{_conv_opts(self)})"


def DepthwiseConv(
    a, b=None, c=None, d=None, *, stride=1, pad: PadSpec = 0, dilation=1, bias=True,
    init: Callable = glorot_uniform, rng=None,
) -> Conv:
    """Depthwise convolution: a `Conv` with `groups = cin` (exactly what Flux returns).

    `DepthwiseConv(k, (cin, cout), σ=identity; stride, pad, dilation, bias, init)`, `cout` a multiple of
    `cin`, gives `Conv` with weight `(k..., 1, cout)`. `DepthwiseConv(weight, bias=True, σ; ...)` takes
    `weight` of shape `(k..., a, b)` and, as Flux, reshapes it (column-major) to `(k..., 1, a*b)` with
    `groups = a`.

    ```python
    >>> DepthwiseConv((5, 5), (3, 6), relu, bias=False)
    Conv((5, 5), 3 => 6, relu, groups=3, bias=false)  # 150 parameters

    ```
    """
    if is_array(a):
        w = jnp.asarray(a)
        if w.ndim < 3:
            raise ValueError(f"DepthwiseConv: weight must have at least 3 dims, got {w.shape}")
        groups = w.shape[-2]
        w2 = jnp.reshape(w, (*w.shape[:-2], 1, w.shape[-2] * w.shape[-1]), order="F")
        return Conv(w2, b, c, stride=stride, pad=pad, dilation=dilation, groups=groups, bias=bias)
    _kernel_tuple(a, "DepthwiseConv")
    cin, cout, rest = _channels(b, (c, d) if d is not None else (c,), "DepthwiseConv")
    if cout % cin:
        raise ValueError(f"DepthwiseConv: output channels {cout} must be a multiple of input channels {cin}")
    sigma = rest[0] if rest else None
    return Conv(a, (cin, cout), sigma, stride=stride, pad=pad, dilation=dilation, groups=cin, bias=bias,
                init=init, rng=rng)


__all__ = ["Conv", "ConvTranspose", "CrossCor", "DepthwiseConv", "SamePad", "calc_padding"]
