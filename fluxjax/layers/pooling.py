"""Pooling layers: Flux's `MaxPool`, `MeanPool`, `GlobalMaxPool`, `GlobalMeanPool`, `AdaptiveMaxPool`,
`AdaptiveMeanPool` (`src/layers/conv.jl`), on NNlib's `maxpool`/`meanpool`, in Flux's layout.

Inputs are `(spatial..., C, N)`; windows cover the spatial dims only. None has parameters.
"""

from __future__ import annotations

from .._checks import int_tuple
from ..core.layer import layer
from ..errors import DimensionMismatch, describe
from ..nnlib.pooling import maxpool, meanpool
from .conv import PadSpec, _as_array, _kernel_tuple, _maybetuple_string, _spatial_check, calc_padding


def _pool_size_check(lay, n: int, x) -> None:
    if x.ndim != n + 2:
        raise DimensionMismatch(f"layer {lay._show()} expects ndims(input) == {n + 2}, but got {describe(x)}")
    if hasattr(lay, "pad"):
        _spatial_check(lay, x, lay.k, (1,) * n, lay.pad)


class _Pool:
    _name = ""

    def __init__(self, k: tuple[int, ...], *, pad: PadSpec = 0, stride=None, **unknown):
        if unknown:
            raise TypeError(f"{self._name}() got an unexpected keyword argument {next(iter(unknown))!r}")
        k = _kernel_tuple(k, self._name)
        self.k = k
        try:
            self.pad = calc_padding(pad, k, (1,) * len(k))
        except ValueError as e:
            raise ValueError(f"{self._name}: {e}") from None
        self.stride = k if stride is None else int_tuple(self._name, "stride", stride, len(k))

    def _show(self) -> str:
        s = f"{self._name}({self.k}"
        if any(p != 0 for p in self.pad):
            s += f", pad={_maybetuple_string(self.pad)}"
        if self.stride != self.k:
            s += f", stride={_maybetuple_string(self.stride)}"
        return s + ")"


@layer
class MaxPool(_Pool):
    """Max pooling over windows `k`: `MaxPool(k; pad=0, stride=k)`, `pad` as for `Conv` (incl. `SamePad()`).

    `(n..., C, N)` gives `(fld(n + lo + hi - k, s) + 1..., C, N)`.

    ```python
    >>> MaxPool((2, 2))(jnp.ones((10, 10, 3, 2))).shape
    (5, 5, 3, 2)

    ```
    """

    _name = "MaxPool"

    def __call__(self, x):
        x = _as_array(x, self)
        _pool_size_check(self, len(self.k), x)
        return maxpool(x, self.k, pad=self.pad, stride=self.stride)


@layer
class MeanPool(_Pool):
    """Mean pooling over windows `k`: `MeanPool(k; pad=0, stride=k)`; padded zeros count in the mean.

    ```python
    >>> MeanPool((2, 2))(jnp.ones((10, 10, 3, 2))).shape
    (5, 5, 3, 2)

    ```
    """

    _name = "MeanPool"

    def __call__(self, x):
        x = _as_array(x, self)
        _pool_size_check(self, len(self.k), x)
        return meanpool(x, self.k, pad=self.pad, stride=self.stride)


def _global_check(lay, x):
    x = _as_array(x, lay)
    if x.ndim < 3:
        raise DimensionMismatch(f"layer {lay._show()} expects ndims(input) >= 3, but got {describe(x)}")
    return x


@layer
class GlobalMaxPool:
    """Maximum over all spatial dims: `(spatial..., C, N)` to `(1..., C, N)`.

    ```python
    >>> GlobalMaxPool()(jnp.ones((100, 100, 3, 50))).shape
    (1, 1, 3, 50)

    ```
    """

    def __call__(self, x):
        x = _global_check(self, x)
        return maxpool(x, x.shape[:-2])

    def _show(self) -> str:
        return "GlobalMaxPool()"


@layer
class GlobalMeanPool:
    """Mean over all spatial dims: `(spatial..., C, N)` to `(1..., C, N)`.

    ```python
    >>> GlobalMeanPool()(jnp.ones((100, 100, 3, 50))).shape
    (1, 1, 3, 50)

    ```
    """

    def __call__(self, x):
        x = _global_check(self, x)
        return meanpool(x, x.shape[:-2])

    def _show(self) -> str:
        return "GlobalMeanPool()"


class _Adaptive:
    _name = ""

    def __init__(self, out: tuple[int, ...], **unknown):
        if unknown:
            raise TypeError(f"{self._name}() got an unexpected keyword argument {next(iter(unknown))!r}")
        self.out = _kernel_tuple(out, self._name)

    def _window(self, x) -> tuple[tuple[int, ...], tuple[int, ...]]:
        x = _as_array(x, self)
        _pool_size_check(self, len(self.out), x)
        insize = x.shape[:-2]
        if any(o > i for o, i in zip(self.out, insize)):
            raise DimensionMismatch(
                f"layer {self._show()} cannot produce spatial size {self.out} from input {describe(x)}"
            )
        stride = tuple(i // o for i, o in zip(insize, self.out))
        k = tuple(i - (o - 1) * s for i, o, s in zip(insize, self.out, stride))
        return k, stride

    def _show(self) -> str:
        return f"{self._name}({self.out})"


@layer
class AdaptiveMaxPool(_Adaptive):
    """Max pooling to a fixed spatial output size `out`: `stride = in ÷ out`, `k = in - (out-1)*stride`.

    ```python
    >>> AdaptiveMaxPool((25, 25))(jnp.ones((100, 100, 3, 50))).shape
    (25, 25, 3, 50)

    ```
    """

    _name = "AdaptiveMaxPool"

    def __call__(self, x):
        x = _as_array(x, self)
        k, stride = self._window(x)
        return maxpool(x, k, stride=stride)


@layer
class AdaptiveMeanPool(_Adaptive):
    """Mean pooling to a fixed spatial output size `out`: `stride = in ÷ out`, `k = in - (out-1)*stride`.

    ```python
    >>> AdaptiveMeanPool((25, 25))(jnp.ones((100, 100, 3, 50))).shape
    (25, 25, 3, 50)

    ```
    """

    _name = "AdaptiveMeanPool"

    def __call__(self, x):
        x = _as_array(x, self)
        k, stride = self._window(x)
        return meanpool(x, k, stride=stride)


__all__ = ["MaxPool", "MeanPool", "GlobalMaxPool", "GlobalMeanPool", "AdaptiveMaxPool", "AdaptiveMeanPool"]
