"""Flux.Losses (`Flux/src/losses/functions.jl`), every function, with Flux's exact definitions.

Conventions, as in Flux:

- `loss(yhat, y; agg=mean)`: `agg` is any reduction (`jnp.mean` by default, `jnp.sum`,
  `lambda l: l` for the unreduced array, `lambda l: jnp.sum(l) / n`, ...). Python's builtin `sum`
  is read as `jnp.sum`, so that a ported `agg=sum` works.
- `eps=` is Flux's `ϵ`: by default the machine epsilon of `yhat`'s float dtype
  (`1.1920929e-07` for float32).
- `dims=` is the class axis. Flux's `dims=1` (its first, feature axis) is `dims=0` here; `dims`
  may be a tuple. Sums over `dims` keep the axis (Flux's `sum(...; dims)`), so `agg=lambda l: l`
  returns Flux's `1 x N` array.
- `yhat` and `y` must have the same size, or `y` is a scalar, else `DimensionMismatch` (a
  `ValueError`) saying e.g. "loss function expects size(ŷ) = (2, 4) to match size(y) = (2, 3)". As in Julia, trailing
  singleton dims do not count: `(3,)` matches `(3, 1)`.
- `y` may be bool or int (one-hot labels): it is cast to `yhat`'s float dtype. Float32 in, float32
  out; everything works under `jax.jit`, `jax.grad` and nested differentiation.

`xlogy(x, y)` and `xlogx(x)` are 0 where `x == 0` (`0 * log(0) = 0`), with gradients that stay
finite there.
"""

from ._utils import xlogx, xlogy
from .ctc import ctc_loss
from .functions import (
    binary_focal_loss,
    binarycrossentropy,
    crossentropy,
    dice_coeff_loss,
    focal_loss,
    hinge_loss,
    huber_loss,
    kldivergence,
    label_smoothing,
    logitbinarycrossentropy,
    logitcrossentropy,
    mae,
    mse,
    msle,
    poisson_loss,
    siamese_contrastive_loss,
    squared_hinge_loss,
    tversky_loss,
)

__all__ = [
    "mae",
    "mse",
    "msle",
    "huber_loss",
    "label_smoothing",
    "crossentropy",
    "logitcrossentropy",
    "binarycrossentropy",
    "logitbinarycrossentropy",
    "kldivergence",
    "poisson_loss",
    "hinge_loss",
    "squared_hinge_loss",
    "dice_coeff_loss",
    "tversky_loss",
    "binary_focal_loss",
    "focal_loss",
    "siamese_contrastive_loss",
    "ctc_loss",
    "xlogx",
    "xlogy",
]
