"""`WeightNorm` and `remove_weight_norms`: Flux's weight normalisation (Salimans & Kingma 2016)."""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp

from ..core.layer import is_array, is_layer, layer, state_fields, with_fields
from ..functors import fmap
from ..nnlib.axes import axes
from .containers import fn_name


def _axes(dims: Any, v: Any, which: str) -> tuple[int, ...]:
    """The distinct axes `dims` names in the weight `v` (`None`, Julia's `dims = :`, is all of them)."""
    return tuple(sorted(set(axes("WeightNorm", dims, v.shape, f"the {which!r} field"))))


@layer(trainable=("layer", "g"))
class WeightNorm:
    """`w = g .* v ./ sqrt.(sum(abs2, v; dims) .+ eps)`: the field `which` of `layer` (its `weight` by
    default) becomes the direction `v`, and a new trainable `g`, its norm at construction, the
    magnitude.

    `WeightNorm(layer, which="weight", *, dims=-1)`; `dims` (0-based, an int, a tuple or `None` for
    all axes) are the axes the norm sums over, by default the last, as Flux's `dims=ndims(w)` (Flux's
    `dims=k` is `dims=k-1`; an axis the weight does not have raises). The
    forward pass equals the wrapped layer's at construction; `remove_weight_norms(model)` folds `g`
    back into plain layers.

    ```python
    >>> wn = WeightNorm(Dense(3, 2))      # g has shape (2, 1)
    >>> wn(jnp.ones((3, 5))).shape
    (2, 5)

    ```
    """

    def __init__(self, layer: Any, which: str = "weight", *, dims: int | tuple[int, ...] | None = -1):
        if not is_layer(layer):
            raise TypeError(f"WeightNorm: expected a layer to wrap, got {type(layer).__name__}")
        if state_fields(layer):
            raise TypeError(f"WeightNorm: {type(layer).__name__} has state fields; weight normalisation of "
                            "a layer with running statistics or keys is not supported")
        x = layer.__dict__.get(which)
        if not is_array(x):
            raise ValueError(f"WeightNorm: `{type(layer).__name__}` does not have field `{which}` holding an array")
        if not bool(jnp.any(x != 0)):
            raise ValueError(f"WeightNorm: `{which}` field for `{type(layer).__name__}` is all zero, which will result in NaN")
        self.layer = layer
        self.g = jnp.sqrt(jnp.sum(jnp.square(x), axis=_axes(dims, x, which), keepdims=True) + jnp.finfo(x.dtype).eps)
        self.which = which
        self.dims = dims

    def __call__(self, *x: Any) -> Any:
        return reparametrize(self)(*x)

    def _show(self) -> str:
        return f"WeightNorm({fn_name(self.layer)}, {self.which!r}; dims={self.dims!r})"

    def _show_children(self):
        return [(None, self.layer)]


def reparametrize(wn: WeightNorm) -> Any:
    """The wrapped layer with its `which` field set to `g .* v ./ ‖v‖` (a new layer; `wn` is unchanged)."""
    v = wn.layer.__dict__[wn.which]
    n2 = jnp.sum(jnp.square(v), axis=_axes(wn.dims, v, wn.which), keepdims=True)
    return with_fields(wn.layer, {wn.which: wn.g * v / jnp.sqrt(n2 + jnp.finfo(wn.g.dtype).eps)})


def remove_weight_norms(model: Any) -> Any:
    """`model` with every `WeightNorm` replaced by its reparametrized layer (Flux's `remove_weight_norms`).

    ```python
    >>> m = Chain(WeightNorm(Dense(2, 3)), Dense(3, 1))
    >>> m2 = remove_weight_norms(m)
    >>> type(m[0]).__name__, type(m2[0]).__name__   # the same function, weight = g .* v ./ norm(v)
    ('WeightNorm', 'Dense')

    ```
    """
    return fmap(lambda v: reparametrize(v) if isinstance(v, WeightNorm) else v, model,
                exclude=lambda v: isinstance(v, WeightNorm) or is_array(v))


__all__ = ["WeightNorm", "remove_weight_norms"]
