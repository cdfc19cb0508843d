"""The registry of compatibility cases.

A case is one block of a Flux / Zygote / NNlib / Optimisers.jl test file (or docstring), ported line by
line. It records the Julia names it exercises (spelled as in Julia, e.g. ``"train!"``, ``"σ"``), the file
it comes from, the Julia lines themselves, and a Python function that runs the port and asserts the values
the Julia test asserts. A case that fluxjax gets wrong carries ``xfail="what differs"``; the test suite
runs it as ``xfail(strict=True)`` and the matrix counts it against every name it lists.
"""

from __future__ import annotations

import dataclasses
import textwrap
from collections.abc import Callable

import numpy as np


@dataclasses.dataclass(frozen=True)
class Case:
    id: str
    names: tuple[str, ...]
    source: str
    julia: str
    fn: Callable[[], None]
    xfail: str | None = None


CASES: dict[str, Case] = {}


def case(*, names: tuple[str, ...] | list[str], source: str, julia: str, xfail: str | None = None):
    """Register the decorated function as a compatibility case (its id is the function's name)."""

    def register(fn: Callable[[], None]) -> Callable[[], None]:
        cid = fn.__name__.removeprefix("case_")
        if cid in CASES:
            raise ValueError(f"duplicate compat case id {cid!r}")
        CASES[cid] = Case(cid, tuple(names), source, textwrap.dedent(julia).strip("\n"), fn, xfail)
        return fn

    return register


def load_all() -> dict[str, Case]:
    """Import every ``compat/cases_*.py`` module (registering its cases) and return the registry."""
    import importlib
    import pathlib

    here = pathlib.Path(__file__).resolve().parent
    for path in sorted(here.glob("cases_*.py")):
        importlib.import_module(f"compat.{path.stem}")
    return CASES


def run_case(c: Case) -> str | None:
    """Run one case from a fresh seed; return None when its assertions pass, else the error text."""
    import fluxjax

    fluxjax.seed_(0)
    np.random.seed(0)  # some cases draw throwaway test inputs with numpy, as the Julia tests use rand()
    try:
        c.fn()
    except Exception as e:  # noqa: BLE001 - the failure is the result
        return f"{type(e).__name__}: {e}".splitlines()[0][:300]
    return None


# ----------------------------------------------------------------------------------------------
# Helpers shared by the cases


def jl(values, shape=None, dtype=np.float64):
    """A Julia array literal: ``jl(range(1, 7), (2, 3))`` is Julia's ``reshape(1:6, 2, 3)`` (column-major)."""
    a = np.asarray(list(values) if not isinstance(values, np.ndarray) else values, dtype=dtype)
    return a if shape is None else a.reshape(shape, order="F")


def rows(*rs, dtype=np.float64):
    """A Julia matrix literal written row by row: ``rows([1, 2], [3, 4])`` is ``[1 2; 3 4]``."""
    return np.asarray(rs, dtype=dtype)


def close(got, want, rtol=3.5e-4, atol=1e-6):
    """Julia's ``≈`` (default rtol sqrt(eps(Float32)) for the float32 arrays fluxjax computes with)."""
    assert got is not None, f"expected {want!r}, got None"
    np.testing.assert_allclose(np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64), rtol=rtol, atol=atol)


def equal(got, want):
    """Julia's ``==`` on arrays and numbers."""
    assert got is not None, f"expected {want!r}, got None"
    g, w = np.asarray(got), np.asarray(want)
    assert g.shape == w.shape, f"shape {g.shape} != {w.shape}"
    assert np.array_equal(g, w), f"{g!r} != {w!r}"


def raises(exc, fn, *args, **kw):
    """Julia's ``@test_throws``."""
    try:
        fn(*args, **kw)
    except exc:
        return
    except Exception as e:  # noqa: BLE001
        raise AssertionError(f"expected {exc}, got {type(e).__name__}: {e}") from e
    raise AssertionError(f"expected {exc}, nothing was raised")
