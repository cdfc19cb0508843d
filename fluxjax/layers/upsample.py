"""Upsampling layers: Flux's `Upsample` and `PixelShuffle` (`src/layers/upsample.jl`), on NNlib's
`upsample_nearest` / `upsample_bilinear` / `upsample_trilinear` / `pixel_shuffle`, in Flux's layout.

Bilinear and trilinear interpolation use NNlib's `align_corners=True` (PyTorch and `jax.image.resize`
default to half-pixel centres, which give other values).
"""

from __future__ import annotations

from collections.abc import Sequence

from .._checks import is_int, is_real
from ..core.layer import layer
from ..errors import DimensionMismatch, describe
from ..nnlib.upsample import pixel_shuffle, upsample_bilinear, upsample_nearest, upsample_trilinear
from .conv import _as_array

_MODES = ("nearest", "bilinear", "trilinear")
_NDIMS = {"bilinear": 4, "trilinear": 5}


def _mode(mode) -> str:
    m = str(mode)
    m = m[1:] if m.startswith(":") else m
    if m not in _MODES:
        raise ValueError(f"Upsample: mode=:{m} is not supported; use one of {', '.join(_MODES)}.")
    return m


def _number(v):
    """A NumPy scalar as the Python number it holds (the field is static configuration)."""
    return int(v) if is_int(v) else float(v) if is_real(v) else v


def _static(v):
    return tuple(_number(e) for e in v) if isinstance(v, (list, tuple)) else _number(v)


def _positive(what: str, v, integer: bool) -> None:
    """Upsample's `scale` (positive numbers; integers for `"nearest"`) or `size` (positive ints)."""
    vals = v if isinstance(v, tuple) else (v,)
    ok = all(isinstance(e, (int, float)) and not isinstance(e, bool) and e > 0 for e in vals) and vals
    if ok and integer:
        ok = all(isinstance(e, int) or float(e).is_integer() for e in vals)
    if not ok:
        kind = "positive integers" if integer else "positive numbers"
        raise ValueError(f"Upsample: {what} must be {kind} (a number or a tuple, one per spatial dim), got {v!r}")


@layer
class Upsample:
    """Upsampling by `scale` (a number for every spatial dim, or a tuple) or to `size` (a tuple).

    `Upsample(mode="nearest"; scale=None, size=None)` or `Upsample(scale, mode="nearest")`; exactly one
    of `scale`/`size`. Modes `"nearest"`, `"bilinear"` (WHCN input), `"trilinear"` (WHDCN input); Julia's
    `:nearest` may be written `"nearest"` (or `":nearest"`).

    ```python
    >>> Upsample(scale=(2, 3))(jnp.ones((2, 2, 1, 1))).shape
    (4, 6, 1, 1)
    >>> Upsample("bilinear", size=(4, 5))(jnp.ones((2, 2, 1, 1))).shape
    (4, 5, 1, 1)

    ```
    """

    def __init__(self, a="nearest", b=None, *, scale: float | Sequence[float] | None = None,
                 size: Sequence[int] | None = None):
        if isinstance(a, str):
            if b is not None:
                raise TypeError("Upsample(mode; scale=..., size=...) takes the mode as its only positional argument")
            mode = a
        else:
            if scale is not None:
                raise TypeError("Upsample(scale, mode): scale given both positionally and as scale=")
            scale, mode = a, ("nearest" if b is None else b)
        self.mode = _mode(mode)
        if (scale is None) == (size is None):
            raise ValueError("Either scale or size should be specified (but not both).")
        self.scale = _static(scale)
        self.size = _static(size)
        if self.scale is not None:
            _positive("scale", self.scale, self.mode == "nearest")
        if self.size is not None:
            _positive("size", self.size, True)

    def __call__(self, x):
        x = _as_array(x, self)
        nd = _NDIMS.get(self.mode)
        if (nd is not None and x.ndim != nd) or x.ndim < 3:
            want = f"== {nd}" if nd is not None else ">= 3"
            raise DimensionMismatch(f"layer {self._show()} expects ndims(input) {want}, but got {describe(x)}")
        for what, v in (("scale", self.scale), ("size", self.size)):
            # NNlib: nearest scales the first len(v) dims; linear modes need one entry per spatial dim
            if isinstance(v, tuple) and (len(v) > x.ndim if nd is None else len(v) != x.ndim - 2):
                raise DimensionMismatch(
                    f"layer {self._show()} has a {what} with {len(v)} entries, which does not fit {describe(x)}"
                )
        if self.mode == "nearest":
            if self.size is not None:
                return upsample_nearest(x, size=self.size)
            scale = (self.scale,) * (x.ndim - 2) if isinstance(self.scale, int) else self.scale
            return upsample_nearest(x, scale)
        f = upsample_bilinear if self.mode == "bilinear" else upsample_trilinear
        return f(x, size=self.size) if self.size is not None else f(x, self.scale)

    def _show(self) -> str:
        s = f"Upsample(:{self.mode}"
        if self.scale is not None:
            s += f", scale = {self.scale}"
        if self.size is not None:
            s += f", size = {self.size}"
        return s + ")"


@layer
class PixelShuffle:
    """Sub-pixel shuffle with factor `r`: `(W, H, C*r^2, N)` to `(W*r, H*r, C, N)` (1-D and 3-D alike).

    ```python
    >>> PixelShuffle(3)(jnp.ones((3, 4, 18, 3))).shape
    (9, 12, 2, 3)

    ```
    """

    def __init__(self, r: int):
        if not is_int(r) or r < 1:
            raise ValueError(f"PixelShuffle: r must be a positive integer, got {r!r}")
        self.r = int(r)

    def __call__(self, x):
        x = _as_array(x, self)
        if x.ndim < 3 or x.shape[-2] % self.r ** (x.ndim - 2):
            raise DimensionMismatch(
                f"layer {self._show()} expects an input (spatial..., C, N) with C divisible by r^d = "
                f"{self.r}^{max(x.ndim - 2, 1)} (d spatial dims), but got {describe(x)}"
            )
        return pixel_shuffle(x, self.r)

    def _show(self) -> str:
        return f"PixelShuffle({self.r})"


__all__ = ["Upsample", "PixelShuffle"]
