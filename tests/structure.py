"""Structural comparison of gradients, with `None` as Zygote's `nothing`."""

import numpy as np


def same(got, want, rtol=1e-6, atol=1e-6):
    """Structural equality with `None` as Zygote's `nothing` and approximate array leaves."""
    if want is None:
        assert got is None, f"expected None, got {got!r}"
    elif isinstance(want, dict):
        assert isinstance(got, dict) and list(got) == list(want)
        for k in want:
            same(got[k], want[k], rtol, atol)
    elif isinstance(want, (tuple, list)):
        assert type(got) is type(want), f"expected {type(want).__name__}, got {type(got).__name__}"
        assert len(got) == len(want)
        for a, b in zip(got, want):
            same(a, b, rtol, atol)
    else:
        assert got is not None, f"expected {want!r}, got None"
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=rtol, atol=atol)


def mul(a, b):
    return a * b
