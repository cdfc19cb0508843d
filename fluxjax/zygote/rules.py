"""Custom rules: Zygote's `@adjoint` through `jax.custom_vjp`, and the projection of the cotangent a rule
returns (array, layer, `Tangent`, dict, NamedTuple, `None` or `0`) onto the structure of its argument."""

from __future__ import annotations

import functools
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

from ..core.layer import LAYER_TYPES, is_array
from .tangent import Tangent, _short


def adjoint(fn: Callable) -> Callable:
    """Zygote's `@adjoint`: `fn(*args)` returns `(y, back)` and `back(dy)` the tuple of argument
    gradients (`None` for zero). Through `jax.custom_vjp`; the forward is re-run in the backward pass
    (XLA removes the duplicate under `jit`).

    Arguments that are not arrays or numbers (functions, Python ints used as sizes, strings, `None`)
    are static: they pass through unchanged and their entry in `back`'s tuple is ignored (Zygote's
    `nothing`). The gradient of a layer (or any pytree) argument may be given as a layer of the same
    type, a `Tangent`, a dict or a NamedTuple of its fields, with `None` or `0` for fields without one.

    ```python
    @adjoint
    def hook(f, x):
        return x, lambda dx: (None, f(dx))
    ```

    ```python
    >>> @adjoint
    ... def clipgrad(x):
    ...     return x, lambda dy: (jnp.clip(dy, -1, 1),)
    >>> float(clipgrad(2.0))                       # the forward pass: x
    2.0
    >>> gradient(lambda x: 5 * clipgrad(x), 2.0)   # the rule's gradient: clip(5) = 1, not 5
    (Array(1., dtype=float32),)

    ```
    """
    name = getattr(fn, "__name__", "rule")

    @functools.wraps(fn)
    def call(*args):
        leaves, treedef = jax.tree_util.tree_flatten(args)
        dyn = [i for i, v in enumerate(leaves) if _dynamic_leaf(v)]
        if not dyn:  # nothing to differentiate: no rule needed
            return fn(*args)[0]

        def rebuild(xs):
            ls = list(leaves)
            for i, x in zip(dyn, xs):
                ls[i] = x
            return treedef.unflatten(ls)

        @jax.custom_vjp
        def f(*xs):
            return fn(*rebuild(xs))[0]

        def fwd(*xs):
            return fn(*rebuild(xs))[0], xs

        def bwd(xs, dy):
            primal = rebuild(xs)
            gs = fn(*primal)[1](dy)
            if not isinstance(gs, tuple):
                gs = (gs,)
            if len(gs) != len(primal):
                raise ValueError(f"adjoint {name}: back returned {len(gs)} gradients for {len(primal)} arguments")
            cts: list = []
            for k, (a, g) in enumerate(zip(primal, gs)):
                sub = jax.tree_util.tree_structure(a)
                if g is None or not any(_dynamic_leaf(v) for v in jax.tree_util.tree_leaves(a)):
                    cts.extend([None] * sub.num_leaves)
                    continue
                what = f"argument {k + 1} ({_short(a) if is_array(a) else type(a).__name__})"
                like = _cotangent_like(g, a, what, name)
                try:
                    cts.extend(sub.flatten_up_to(like))
                except (ValueError, TypeError) as e:
                    raise ValueError(
                        f"adjoint {name}: the gradient for {what} does not match "
                        f"its structure: {e}"
                    ) from None
            return tuple(cts[i] for i in dyn)

        f.defvjp(fwd, bwd)
        return f(*(leaves[i] for i in dyn))

    return call


def _dynamic_leaf(v) -> bool:
    """A leaf `adjoint` passes to `jax.custom_vjp`: numeric arrays (tracers and PRNG keys included) and
    real or complex Python numbers. Everything else is static."""
    if is_array(v):
        extended = jax.dtypes.issubdtype(v.dtype, jax.dtypes.extended)
        return extended or v.dtype.kind in "biufc" or jnp.issubdtype(v.dtype, jnp.inexact)
    return isinstance(v, (float, complex, np.inexact)) and not isinstance(v, bool)


def _no_tangent(a) -> bool:
    """An integer, boolean or PRNG-key array: its cotangent is float0, JAX ignores what a rule gives."""
    return is_array(a) and (
        jax.dtypes.issubdtype(a.dtype, jax.dtypes.extended) or not jnp.issubdtype(a.dtype, jnp.inexact)
    )


def _zero_ct(a):
    """A zero cotangent for the leaf `a`; integer and key leaves keep their value (JAX ignores them)."""
    return a if _no_tangent(a) else jnp.zeros_like(a)


def _leaf_ct(g, a, where, name):
    if g is None or _no_tangent(a):
        return _zero_ct(a)  # an integer or key input has no cotangent (float0), whatever the rule says
    if not (is_array(g) or isinstance(g, (int, float, complex, np.number))) or isinstance(g, bool):
        raise ValueError(
            f"adjoint {name}: back returned {_short(g)} as the gradient of {where}, which is an array "
            f"of shape {np.shape(a)}; return an array (or None for zero)"
        )
    g = jnp.asarray(g, jnp.result_type(a))
    shape = np.shape(a)
    if g.shape == shape:
        return g
    if g.ndim == 0:
        return jnp.broadcast_to(g, shape)
    if g.size == int(np.prod(shape)):
        return g.reshape(shape)  # ChainRules' ProjectTo reshapes an array of the right length
    raise ValueError(
        f"adjoint {name}: back returned a gradient of shape {g.shape} for {where}, which has shape {shape}"
    )


def _ct_field(g, field, where, name):
    if isinstance(g, Tangent):
        return g.fields.get(field)
    if isinstance(g, dict):
        return g.get(field)
    if isinstance(g, tuple) and hasattr(g, "_fields"):
        return getattr(g, field, None)
    if type(g) in LAYER_TYPES:
        return g.__dict__.get(field)
    raise ValueError(
        f"adjoint {name}: back returned {_short(g)} as the gradient of {where}; a layer's gradient "
        "must be a layer of the same type, a Tangent, a dict or a NamedTuple of its fields (or None)"
    )


def _ct_names(g):
    if isinstance(g, Tangent):
        return set(g.fields)
    if isinstance(g, dict):
        return set(g)
    if isinstance(g, tuple) and hasattr(g, "_fields"):
        return set(g._fields)
    if type(g) in LAYER_TYPES:
        return set(g.__dict__)
    return set()


def _cotangent_like(g, a, where, name):
    """The cotangent `g` a rule returned for the primal `a`, rebuilt with `a`'s pytree structure:
    zeros where `g` has `None` or `0`, `a`'s own values in its static (non-array) places."""
    if _dynamic_leaf(a):
        return _leaf_ct(g, a, where, name)
    if not jax.tree_util.tree_leaves(a) or not any(_dynamic_leaf(v) for v in jax.tree_util.tree_leaves(a)):
        return a  # static: a function, an int, a string, None, a layer without arrays
    if g is None or (isinstance(g, (int, float)) and not isinstance(g, bool) and g == 0):
        return jax.tree_util.tree_map(lambda v: _zero_ct(v) if _dynamic_leaf(v) else v, a)
    t = type(a)
    if t in LAYER_TYPES:
        if type(g) in LAYER_TYPES and type(g) is not t:
            raise ValueError(
                f"adjoint {name}: back returned a {type(g).__name__} as the gradient of {where}, a {t.__name__}"
            )
        if isinstance(g, Tangent) and not issubclass(t, g.primal_type) and not issubclass(g.primal_type, t):
            raise ValueError(f"adjoint {name}: back returned {g!r} as the gradient of {where}, a {t.__name__}")
        _ct_field(g, "", where, name)  # type check
        extra = _ct_names(g) - set(a.__dict__)
        if extra:
            raise ValueError(
                f"adjoint {name}: the gradient of {where} has field(s) {sorted(extra)} that {t.__name__} does not have"
            )
        out = object.__new__(t)
        for field, v in a.__dict__.items():
            out.__dict__[field] = _cotangent_like(_ct_field(g, field, where, name), v, f"{where}.{field}", name)
        return out
    if isinstance(a, (list, tuple)):
        if hasattr(a, "_fields") and isinstance(g, (dict, Tangent)) or (
            hasattr(a, "_fields") and isinstance(g, tuple) and hasattr(g, "_fields")
        ):
            extra = _ct_names(g) - set(a._fields)
            if extra:
                raise ValueError(f"adjoint {name}: the gradient of {where} has field(s) {sorted(extra)} it does not have")
            items = [_ct_field(g, fld, where, name) for fld in a._fields]
        elif isinstance(g, (list, tuple)) and len(g) == len(a):
            items = list(g)
        else:
            raise ValueError(
                f"adjoint {name}: back returned {_short(g)} as the gradient of {where}, a {type(a).__name__} "
                f"of length {len(a)}; return a {type(a).__name__} of {len(a)} gradients (or None)"
            )
        items = [_cotangent_like(gi, ai, f"{where}[{i}]", name) for i, (gi, ai) in enumerate(zip(items, a))]
        return t(*items) if hasattr(a, "_fields") else t(items)
    if isinstance(a, dict):
        if not isinstance(g, (dict, Tangent)):
            raise ValueError(f"adjoint {name}: back returned {_short(g)} as the gradient of {where}, a dict; return a dict")
        extra = _ct_names(g) - set(a)
        if extra:
            raise ValueError(f"adjoint {name}: the gradient of {where} has key(s) {sorted(extra, key=repr)} it does not have")
        return t({k: _cotangent_like(_ct_field(g, k, where, name), v, f"{where}[{k!r}]", name) for k, v in a.items()})
    if jax.tree_util.tree_structure(g) == jax.tree_util.tree_structure(a):  # another pytree type, given as itself
        return jax.tree_util.tree_map(lambda gi, ai: _leaf_ct(gi, ai, where, name) if _dynamic_leaf(ai) else ai, g, a)
    raise ValueError(
        f"adjoint {name}: back returned {_short(g)} as the gradient of {where}, whose structure is "
        f"{jax.tree_util.tree_structure(a)}"
    )
