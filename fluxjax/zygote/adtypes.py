"""ADTypes' backend choices, as Flux 0.16's `gradient(f, adtype, args...)` takes them.

Every fluxjax gradient is JAX's reverse mode, so `AutoZygote()`, `AutoEnzyme()` and `AutoMooncake()` all
mean it: they are accepted so that Flux code naming a backend runs unchanged. `AutoFiniteDifferences()`
is different: central finite differences of `f`, the independent check that Flux uses it for.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ..core.region import run_in_region
from ..core.walk import NUMBER_TYPES, walk
from .plan import WithGradient, _check_scalar, _differentiable, first_output
from .tangent import _rebuild


class ADType:
    """A choice of AD backend for `gradient(f, adtype, args...)` and `withgradient(f, adtype, args...)`.
    `traceable`: whether its gradient can run inside a compiled (traced) step."""

    traceable = True

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other)

    def __hash__(self) -> int:
        return hash(type(self))


class AutoZygote(ADType):
    """Zygote: here JAX's reverse mode, as plain `gradient(f, args...)`.

    ```python
    >>> gradient(lambda x: x**2, AutoZygote(), 3.0)
    (Array(6., dtype=float32, weak_type=True),)

    ```
    """


class AutoEnzyme(ADType):
    """Enzyme: here JAX's reverse mode, as plain `gradient(f, args...)`.

    ```python
    >>> gradient(lambda x: x**2, AutoEnzyme(), 3.0)
    (Array(6., dtype=float32, weak_type=True),)

    ```
    """


class AutoMooncake(ADType):
    """Mooncake: here JAX's reverse mode, as plain `gradient(f, args...)`.

    ```python
    >>> gradient(lambda x: x**2, AutoMooncake(), 3.0)
    (Array(6., dtype=float32, weak_type=True),)

    ```
    """


class AutoFiniteDifferences(ADType):
    """Central finite differences (a 5-point stencil, step `ϵ^⅕·max(1, |x|)` for the element type's `ϵ`),
    one element at a time: `4n` calls of `f` for `n` numbers, so for small checks. `f` runs as outside
    `gradient` (BatchNorm and Dropout in test mode), as with Flux's `AutoFiniteDifferences`, and what it
    writes is undone. Every float array and number gets a gradient (zeros where `f` does not depend on it).

    ```python
    >>> gradient(lambda x: jnp.sum(x**2), AutoFiniteDifferences(), jnp.array([1.0, 2.0]))
    (Array([2., 4.], dtype=float32),)

    ```
    """

    traceable = False  # it reads the loss as Python floats

    def gradient(self, f: Callable, args: tuple) -> Any:
        return _finite_differences(f, args, "gradient")[1]

    def withgradient(self, f: Callable, args: tuple) -> Any:
        return WithGradient(*_finite_differences(f, args, "withgradient"))


def _finite_differences(f: Callable, args: tuple, name: str) -> tuple[Any, Any]:
    box = list(args)
    w = walk(box)
    diff = _differentiable(w)

    def run(i=None, x=None):  # not differentiating; writes (BatchNorm statistics, Dropout keys) undone
        return run_in_region(lambda: f(*box), [] if i is None else [(w.slots[i], x)])[0]

    full = run()
    y = first_output(full) if name == "withgradient" else full
    _check_scalar(y, name)
    by_leaf: list[Any] = [None] * len(w.leaves)
    for i in diff:
        by_leaf[i] = _stencil(lambda x, i=i: float(first_output(run(i, x))), w.leaves[i])
    return full, _rebuild(box, by_leaf)


def _stencil(f: Callable[[Any], float], x: Any) -> jax.Array:
    """d f / d x for `f` of one array (or number) `x`, element by element, by the 5-point stencil. For
    complex `x = u + iv`, Zygote's convention: `∂f/∂u + i·∂f/∂v`."""
    kind = complex if isinstance(x, (complex, np.complexfloating)) else float
    x0 = jnp.asarray(x, dtype=jnp.result_type(kind) if isinstance(x, NUMBER_TYPES) else None)
    cplx = jnp.iscomplexobj(x0)
    flat = np.asarray(x0, dtype=np.complex128 if cplx else np.float64).reshape(-1)
    eps = float(jnp.finfo(x0.dtype).eps)
    g = np.zeros_like(flat)
    for j, xj in enumerate(flat):
        h = 2.0 ** np.round(np.log2(eps**0.2 * max(1.0, abs(xj))))  # a power of two: x ± h are exact
        for unit in (1, 1j) if cplx else (1,):
            at = []
            for d in (-2 * h, -h, h, 2 * h):
                xd = flat.copy()
                xd[j] += d * unit
                at.append(f(jnp.asarray(xd.reshape(x0.shape), x0.dtype)))
            g[j] += unit * (at[0] - 8 * at[1] + 8 * at[2] - at[3]) / (12 * h)
    return jnp.asarray(g.reshape(x0.shape), x0.dtype)


__all__ = ["ADType", "AutoZygote", "AutoEnzyme", "AutoMooncake", "AutoFiniteDifferences"]
