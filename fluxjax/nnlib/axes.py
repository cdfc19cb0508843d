"""`dims` arguments: 0-based axes, checked against the array, never wrapped around.

Flux's `dims=1` (the first axis) is `dims=0` here; a negative `dims` counts from the end, as NumPy's
`axis` (`-1` is the last axis). An axis the array does not have raises a `ValueError` naming the
function: NumPy raises there too, and wrapping it round (`dims % ndim`) would turn a port that forgot
the 0-based shift (Julia's `softmax(x; dims=2)` on a matrix written `dims=2`) into a quiet wrong answer
along another axis. (Julia reads a dim past `ndims(x)` as a singleton; a 0-based port never means that.)
Every `dims` of `nnlib`, `losses`, `mlutils` and `WeightNorm` goes through `axes` or `axis`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .._checks import is_int


def axes(fn: str, dims: Any, shape: Sequence[int], arg: str = "x") -> tuple[int, ...]:
    """The axes `dims` names in the array `arg` of `shape`, as non-negative ints in the order given;
    `dims=None` is every axis (Julia's `dims=:`). `fn` names the function in the error.

    ```python
    >>> axes("softmax", -1, (2, 3)), axes("softmax", (1, 0), (2, 3)), axes("softmax", None, (2, 3))
    ((1,), (1, 0), (0, 1))
    >>> axes("softmax", 2, (2, 3))
    Traceback (most recent call last):
        ...
    ValueError: softmax: dims=2 is not an axis of x, which has shape (2, 3): its axes are 0 to 1 (or -2 to -1). ...

    ```
    """
    nd = len(shape)
    if dims is None:
        return tuple(range(nd))
    ds = (dims,) if is_int(dims) else tuple(dims) if isinstance(dims, (tuple, list, range)) else None
    if ds is None or not all(is_int(d) for d in ds):
        raise TypeError(f"{fn}: dims must be an int or a tuple of ints (0-based axes), got {dims!r}")
    bad = [d for d in ds if not -nd <= d < nd]
    if not bad:
        return tuple(int(d) % nd for d in ds)
    what = f"dims={dims!r} is not" if is_int(dims) else f"dims={dims!r} names {bad[0]}, which is not"
    has = {0: "it has no axes", 1: "its one axis is 0 (or -1)"}.get(nd, f"its axes are 0 to {nd - 1} (or -{nd} to -1)")
    raise ValueError(f"{fn}: {what} an axis of {arg}, which has shape {tuple(shape)}: {has}. "
                     f"dims are 0-based here: Flux's dims=1 is dims=0, and dims=-1 is the last axis")


def axis(fn: str, dims: Any, shape: Sequence[int], arg: str = "x") -> int:
    """The one axis `dims` (an int) names in the array `arg` of `shape`, checked as by `axes`.

    ```python
    >>> axis("glu", -1, (4, 6))
    1

    ```
    """
    if not is_int(dims):
        raise TypeError(f"{fn}: dims must be an int (a 0-based axis), got {dims!r}")
    return axes(fn, dims, shape, arg)[0]


__all__ = ["axes", "axis"]
