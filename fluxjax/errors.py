"""Errors people see."""

from __future__ import annotations


class DimensionMismatch(ValueError):
    """Julia's `DimensionMismatch`: an input's size does not fit the layer. A `ValueError`."""


def describe(x) -> str:
    """Julia-style description of an array argument: `3×5 Matrix{float32}`."""
    shape = getattr(x, "shape", None)
    if shape is None:
        return type(x).__name__
    kind = {0: "Scalar", 1: "Vector", 2: "Matrix"}.get(len(shape), "Array")
    dims = "×".join(str(d) for d in shape) if shape else "0-dim"
    return f"{dims} {kind}{{{getattr(x, 'dtype', '?')}}}"
