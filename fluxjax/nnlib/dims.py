"""NNlib's `ConvDims`: the sizes and settings of a convolution or pooling, carried as one argument.

NNlib code builds them once and passes them on: `cdims = DenseConvDims(x, w; stride=2)`, then
`conv(x, w, cdims)`, `∇conv_data(dy, w, cdims)`, `∇conv_filter(x, dy, cdims)`;
`pdims = PoolDims(x, 2)`, then `maxpool(x, pdims)`, `∇maxpool(dy, y, x, pdims)`. Here they are frozen
dataclasses that every such function of `fluxjax.nnlib` accepts in the same place; the keyword
forms (`conv(x, w, stride=2)`) stay the primary spelling. NNlib's accessor functions are attributes:
`cdims.input_size`, `cdims.kernel_size`, `cdims.output_size`, `cdims.channels_out`, ...

Sizes are spatial only, as NNlib's: `input_size` leaves out the channel and batch dims, and
`padding` is always the 2N-tuple `(lo₁, hi₁, lo₂, hi₂, ...)`.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from numbers import Integral
from typing import Any

from ..errors import DimensionMismatch


def _size(a: Any, what: str) -> tuple[int, ...]:
    """An array's shape, or a size given as a tuple of ints."""
    shape = getattr(a, "shape", a)
    try:
        return tuple(int(s) for s in shape)
    except TypeError:
        raise TypeError(f"{what} must be an array or a tuple of sizes, got {type(a).__name__}") from None


def expand(value: Any, n: int, name: str = "argument", fn: str = "", lengths: tuple[int, ...] = ()) -> tuple[int, ...]:
    """An int as `n` copies of it, or a tuple of ints as it is (NNlib's `expand(Val(n), value)`), with
    one of `lengths` entries (by default `n`, one per spatial dim). `fn` names the caller in errors.

    ```python
    >>> expand(2, 3), expand((1, 2), 2)
    ((2, 2, 2), (1, 2))

    ```
    """
    where = f"{fn}: " if fn else ""
    try:
        out = (operator.index(value),) * n
    except TypeError:
        try:
            out = tuple(map(operator.index, value))
        except TypeError:
            raise TypeError(f"{where}{name} must be an int or a tuple of ints, got {value!r}") from None
    lengths = lengths or (n,)
    if len(out) not in lengths:
        want = " or ".join(str(k) for k in lengths)
        raise DimensionMismatch(f"{where}{name} {value!r} has {len(out)} entries, it should have {want}: one per "
                                f"spatial dim{' (or a lo, hi pair each)' if 2 * n in lengths else ''}")
    return out


def _check_spdf(fn: str, x_size, k_size, n: int, stride, padding, dilation) -> tuple[tuple, tuple, tuple]:
    """NNlib's `check_spdf`: stride, padding (as 2N lo/hi pairs) and dilation of `fn`, one entry per
    spatial dim, with stride, dilation and kernel size >= 1. With `x_size`, the kernel `k_size` times
    the dilation must fit in the padded input (NNlib's `_validate_padding`): a convolution or pooling
    that would give an empty array raises `DimensionMismatch` instead. Negative padding crops the
    input, as in NNlib (Flux's `ConvTranspose` with `SamePad()` and a stride above the kernel size
    makes some)."""
    s = expand(stride, n, "stride", fn)
    d = expand(dilation, n, "dilation", fn)
    p = expand(padding, n, "padding", fn, (n, 2 * n))
    if len(p) == n:
        p = tuple(v for v in p for _ in range(2))
    ks = tuple(k_size[:n]) if k_size is not None else ()
    for name, given, v in (("kernel size", ks, ks), ("stride", stride, s), ("dilation", dilation, d)):
        if any(e < 1 for e in v):
            raise ValueError(f"{fn}: {name} must be >= 1 in every spatial dim, got {given!r}")
    for i in range(n if x_size is not None else 0):
        if x_size[i] + p[2 * i] + p[2 * i + 1] < (ks[i] - 1) * d[i] + 1:
            raise DimensionMismatch(
                f"{fn}: Kernel * dilation (({ks[i]} - 1) * {d[i]} + 1) cannot be larger than input + padding "
                f"({x_size[i]} + {p[2 * i]} + {p[2 * i + 1]})! That is spatial dim {i} of x of size {tuple(x_size)}; "
                "the result would be empty: use a smaller kernel or dilation, or more padding"
            )
    return s, p, d


def _same_rank(x_size, w_size) -> None:
    if len(x_size) != len(w_size) or len(x_size) < 3:
        raise DimensionMismatch(f"Rank of x and w must match and be at least 3! ({len(x_size)} vs. {len(w_size)})")


@dataclass(frozen=True)
class ConvDims:
    """NNlib's abstract `ConvDims`: what `DenseConvDims`, `DepthwiseConvDims` and `PoolDims` share.

    ```python
    >>> cdims = DenseConvDims(jnp.ones((8, 8, 3, 1)), jnp.ones((3, 3, 3, 16)), padding=1)
    >>> isinstance(cdims, ConvDims), cdims.kernel_size, cdims.channels_in
    (True, (3, 3), 3)

    ```
    """

    input_size: tuple[int, ...]
    kernel_size: tuple[int, ...]
    channels_in: int
    stride: tuple[int, ...]
    padding: tuple[int, ...]
    dilation: tuple[int, ...]
    flipkernel: bool = False

    @property
    def spatial_dims(self) -> int:
        return len(self.input_size)

    @property
    def output_size(self) -> tuple[int, ...]:
        """The spatial size of the output: `(I + lo + hi - (K-1)*D - 1) ÷ S + 1` per dim."""
        I, K, S, P, D = self.input_size, self.kernel_size, self.stride, self.padding, self.dilation
        return tuple(
            (I[i] + P[2 * i] + P[2 * i + 1] - (K[i] - 1) * D[i] - 1) // S[i] + 1 for i in range(len(I))
        )

    @property
    def channels_out(self) -> int:
        raise NotImplementedError

    @property
    def groupcount(self) -> int:
        return 1

    def __repr__(self) -> str:
        i = (*self.input_size, self.channels_in)
        o = (*self.output_size, self.channels_out)
        return (
            f"{type(self).__name__}: {i} * {self.kernel_size} -> {o}, stride: {self.stride}, pad: {self.padding}, "
            f"dil: {self.dilation}, flip: {str(self.flipkernel).lower()}, groups: {self.groupcount}"
        )


@dataclass(frozen=True, repr=False)
class DenseConvDims(ConvDims):
    """`DenseConvDims(x, w, *, stride=1, padding=0, dilation=1, flipkernel=False, groups=1)`: a
    convolution of `x` `(spatial..., Cin, N)` with `w` `(k..., Cin ÷ groups, Cout)`; either may be
    given as its size tuple. `padding` is an int, N values or 2N `(lo, hi)` values.

    ```python
    >>> c = DenseConvDims(jnp.ones((5, 4, 3, 2)), jnp.ones((1, 2, 3, 4)), stride=2, padding=3)
    >>> c.output_size, c.padding
    ((6, 5), (3, 3, 3, 3))
    >>> x, w = jnp.ones((5, 4, 3, 2)), jnp.ones((1, 2, 3, 4))
    >>> bool(jnp.all(conv(x, w, c) == conv(x, w, stride=2, pad=3)))
    True

    ```
    """

    out_channels: int = 0
    groups: int = 1

    def __init__(self, x: Any, w: Any, *, stride: Any = 1, padding: Any = 0, dilation: Any = 1,
                 flipkernel: bool = False, groups: int = 1) -> None:
        xs, ws = _size(x, "DenseConvDims: x"), _size(w, "DenseConvDims: w")
        _same_rank(xs, ws)
        n = len(xs) - 2
        s, p, d = _check_spdf("DenseConvDims", xs, ws, n, stride, padding, dilation)
        if xs[-2] != ws[-2] * groups:
            raise DimensionMismatch(f"Input channels must match! ({xs[-2]} vs. {ws[-2]}; groups={groups})")
        if xs[-2] % ws[-2] or ws[-1] % groups:
            raise DimensionMismatch(f"Group count should be divisible by input and output channels ({groups} vs. {ws[-2:]})")
        _init(self, xs[:n], ws[:n], xs[-2], s, p, d, bool(flipkernel), out_channels=ws[-1], groups=int(groups))

    @property
    def channels_out(self) -> int:
        return self.out_channels

    @property
    def groupcount(self) -> int:
        return self.groups


@dataclass(frozen=True, repr=False)
class DepthwiseConvDims(ConvDims):
    """`DepthwiseConvDims(x, w, *, stride=1, padding=0, dilation=1, flipkernel=False)`: a depthwise
    convolution of `x` `(spatial..., Cin, N)` with NNlib's `w` `(k..., mult, Cin)`; `channels_out`
    is `mult * Cin`.

    ```python
    >>> cdims = DepthwiseConvDims(jnp.ones((5, 5, 3, 1)), jnp.ones((3, 3, 2, 3)))
    >>> cdims.channels_out
    6
    >>> depthwiseconv(jnp.ones((5, 5, 3, 1)), jnp.ones((3, 3, 2, 3)), cdims).shape
    (3, 3, 6, 1)

    ```
    """

    channel_multiplier: int = 1

    def __init__(self, x: Any, w: Any, *, stride: Any = 1, padding: Any = 0, dilation: Any = 1,
                 flipkernel: bool = False) -> None:
        xs, ws = _size(x, "DepthwiseConvDims: x"), _size(w, "DepthwiseConvDims: w")
        _same_rank(xs, ws)
        n = len(xs) - 2
        s, p, d = _check_spdf("DepthwiseConvDims", xs, ws, n, stride, padding, dilation)
        if xs[-2] != ws[-1]:
            raise DimensionMismatch(f"Input channels must match! ({xs[-2]} vs. {ws[-1]})")
        _init(self, xs[:n], ws[:n], xs[-2], s, p, d, bool(flipkernel), channel_multiplier=ws[-2])

    @property
    def channels_out(self) -> int:
        return self.channels_in * self.channel_multiplier


@dataclass(frozen=True, repr=False)
class PoolDims(ConvDims):
    """`PoolDims(x, k, *, stride=k, padding=0, dilation=1)`: pooling `x` `(spatial..., C, N)` (or its
    size) with window `k` (an int or N ints).

    ```python
    >>> p = PoolDims((3, 3, 1, 1), (2, 2), padding=(1, 1), stride=(2, 2))
    >>> p.output_size
    (2, 2)
    >>> x = jnp.arange(9.0).reshape(3, 3, 1, 1)
    >>> bool(jnp.all(maxpool(x, p) == maxpool(x, (2, 2), pad=1, stride=2)))
    True

    ```
    """

    def __init__(self, x: Any, k: Any, *, stride: Any = None, padding: Any = 0, dilation: Any = 1) -> None:
        xs = _size(x, "PoolDims: x")
        ks = (int(k),) * (len(xs) - 2) if isinstance(k, Integral) else _size(k, "PoolDims: k")
        if len(xs) != len(ks) + 2:
            raise DimensionMismatch(
                f"PoolDims expects ndims(x) == length(k) + 2, got x of size {xs} and a window of {len(ks)} dims"
            )
        n = len(ks)
        s, p, d = _check_spdf("PoolDims", xs, ks, n, ks if stride is None else stride, padding, dilation)
        _init(self, xs[:n], ks, xs[-2], s, p, d, False)

    @property
    def channels_out(self) -> int:
        return self.channels_in


def _init(self: ConvDims, input_size, kernel_size, channels_in, stride, padding, dilation, flipkernel, **extra) -> None:
    fields = dict(input_size=tuple(input_size), kernel_size=tuple(kernel_size), channels_in=int(channels_in),
                  stride=stride, padding=padding, dilation=dilation, flipkernel=flipkernel, **extra)
    for k, v in fields.items():
        object.__setattr__(self, k, v)


_CONV_DEFAULTS = {"stride": 1, "pad": 0, "dilation": 1, "flipped": False, "groups": 1}
_POOL_DEFAULTS = {"stride": None, "pad": 0, "dilation": 1}


def _checked(dims: ConvDims, kinds: tuple[type, ...], fn: str, x_shape, w_shape, given: dict, defaults: dict) -> None:
    """`dims` is of one of `kinds`, no keyword in `given` was set besides it, and the arrays have the
    sizes it was built for."""
    name = type(dims).__name__
    if not isinstance(dims, kinds):
        raise TypeError(f"{fn}: expected {' or '.join(k.__name__ for k in kinds)}, got {name}")
    extra = sorted(k for k, v in given.items() if v != defaults[k])
    if extra:
        raise TypeError(f"{fn}: the settings come from the {name} given; drop the keywords {', '.join(extra)} "
                        f"or pass keywords without the {name}")
    if x_shape is not None and (tuple(x_shape[:-2]) != dims.input_size or x_shape[-2] != dims.channels_in):
        raise DimensionMismatch(f"{fn}: x has size {tuple(x_shape)}, but the {name} was built for an input of size "
                                f"{(*dims.input_size, dims.channels_in)} (spatial..., channels)")
    if w_shape is not None and tuple(w_shape[:dims.spatial_dims]) != dims.kernel_size:
        raise DimensionMismatch(f"{fn}: w has size {tuple(w_shape)}, but the {name} was built for a kernel of size "
                                f"{dims.kernel_size}")


def conv_keywords(cdims: ConvDims, fn: str, x_shape: tuple | None, w_shape: tuple | None, **given: Any) -> dict:
    """The keywords of `conv` (and its gradients) that `cdims` stands for, after checking that `given`
    (the call's own keywords) are at their defaults and that the arrays fit `cdims`."""
    depthwise = "depthwise" in fn
    kinds = (DepthwiseConvDims,) if depthwise else (DenseConvDims,)
    _checked(cdims, kinds, fn, x_shape, w_shape, given, _CONV_DEFAULTS)
    kw = {"stride": cdims.stride, "pad": cdims.padding, "dilation": cdims.dilation, "flipped": cdims.flipkernel}
    if not depthwise:
        kw["groups"] = cdims.groupcount
    return kw


def pool_keywords(pdims: PoolDims, fn: str, x_shape: tuple, **given: Any) -> tuple[tuple[int, ...], dict]:
    """`(k, keywords)` of `maxpool`/`meanpool`/`lpnormpool` that `pdims` stands for, checked as in
    `conv_keywords`."""
    _checked(pdims, (PoolDims,), fn, x_shape, None, given, _POOL_DEFAULTS)
    return pdims.kernel_size, {"stride": pdims.stride, "pad": pdims.padding, "dilation": pdims.dilation}


__all__ = ["ConvDims", "DenseConvDims", "DepthwiseConvDims", "PoolDims"]
