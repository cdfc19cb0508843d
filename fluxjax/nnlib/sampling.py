"""NNlib's spatial sampling: `grid_sample` (bilinear / trilinear, as spatial transformers use it) and
`imrotate`, with their adjoints `grad_grid_sample` and `grad_imrotate`. Arrays are WHCN (`(W, H, C, N)`)."""

from __future__ import annotations

import functools
import itertools
import math

import jax
import jax.numpy as jnp
from jax import lax

from ..errors import DimensionMismatch


def grid_sample(x: jax.typing.ArrayLike, grid: jax.typing.ArrayLike, *, padding_mode: str = "zeros") -> jax.Array:
    """Sample `x` `(W, H, [D,] C, N)` at the points of `grid` `(2|3, W_out, H_out, [D_out,] N)` by bilinear
    (trilinear) interpolation, giving `(W_out, H_out, [D_out,] C, N)`.

    A grid point holds `(x, y [, z])` in `[-1, 1]`: `-1` is the centre of the first pixel along that axis,
    `1` the centre of the last (align corners). Outside, `padding_mode="zeros"` reads zeros and
    `"border"` the border pixels.

    ```python
    >>> x = jnp.arange(1.0, 5.0).reshape(2, 2, 1, 1, order="F")   # [[1, 3], [2, 4]]
    >>> grid = jnp.asarray([[[-3, -1], [-1, 1]], [[0, -1], [0, 1]], [[1, -1], [3, 1]]]).transpose(2, 0, 1)[..., None]
    >>> grid_sample(x, grid)[:, :, 0, 0]    # Julia: [0 3; 1.5 3.5; 2 0]
    Array([[0. , 3. ],
           [1.5, 3.5],
           [2. , 0. ]], dtype=float32)

    ```
    """
    x, grid = jnp.asarray(x), jnp.asarray(grid)
    d = x.ndim - 2
    if d not in (2, 3):
        raise ValueError(f"grid_sample is only supported for 4D and 5D arrays, got x of shape {x.shape}")
    if padding_mode not in ("zeros", "border"):
        raise ValueError(f"grid_sample: padding_mode must be 'zeros' or 'border', got {padding_mode!r}")
    if grid.ndim != d + 2 or grid.shape[0] != d or grid.shape[-1] != x.shape[-1]:
        raise DimensionMismatch(
            f"grid_sample of x {x.shape} expects grid of shape ({d}, out..., {x.shape[-1]}), "
            f"got {grid.shape}"
        )
    return _grid_sample(x, grid, padding_mode)


@functools.partial(jax.jit, static_argnums=2)
def _grid_sample(x: jax.Array, grid: jax.Array, padding_mode: str) -> jax.Array:
    d = x.ndim - 2
    sizes = x.shape[:d]
    coords = []
    for k in range(d):  # NNlib's unnormalize, 0-based: -1 → 0, 1 → size - 1
        c = (grid[k] + 1) * 0.5 * (sizes[k] - 1)
        if padding_mode == "border":
            c = lax.clamp(jnp.zeros((), c.dtype), c, jnp.asarray(sizes[k] - 1, c.dtype))
        coords.append(c)
    lo = [jnp.floor(c) for c in coords]
    channels_last = jnp.moveaxis(x, -1, 0)  # (N, spatial..., C)
    n = jnp.broadcast_to(jnp.arange(x.shape[-1]), grid.shape[1:])
    out = 0
    for corner in itertools.product((0, 1), repeat=d):
        weight, valid, index = 1, True, []
        for k, bit in enumerate(corner):
            i = lo[k].astype(jnp.int32) + bit
            weight = weight * (coords[k] - lo[k] if bit else lo[k] + 1 - coords[k])
            valid = valid & (i >= 0) & (i < sizes[k])
            index.append(jnp.clip(i, 0, sizes[k] - 1))
        values = channels_last[(n, *index)]  # (out..., N, C)
        out = out + values * jnp.where(valid, weight, 0)[..., None]
    return jnp.moveaxis(out, -1, -2).astype(x.dtype)


def grad_grid_sample(dy: jax.typing.ArrayLike, x: jax.typing.ArrayLike, grid: jax.typing.ArrayLike, *,
                     padding_mode: str = "zeros") -> tuple[jax.Array, jax.Array]:
    """NNlib's `∇grid_sample(Δ, input, grid; padding_mode)`: `(dx, dgrid)` for the output gradient `dy`.

    ```python
    >>> x = jnp.arange(4.0).reshape(2, 2, 1, 1)   # WHCN
    >>> grid = jnp.zeros((2, 1, 1, 1))   # (xy, W_out, H_out, N): sample the centre
    >>> dx, dgrid = grad_grid_sample(jnp.ones((1, 1, 1, 1)), x, grid)
    >>> dx[:, :, 0, 0]   # the centre is the mean of the four pixels
    Array([[0.25, 0.25],
           [0.25, 0.25]], dtype=float32)

    ```
    """
    y, back = jax.vjp(lambda x, g: grid_sample(x, g, padding_mode=padding_mode), jnp.asarray(x), jnp.asarray(grid))
    dy = jnp.asarray(dy)
    if dy.shape != y.shape:
        raise DimensionMismatch(f"grad_grid_sample: dy has shape {dy.shape}, the samples {y.shape}")
    return back(dy.astype(y.dtype))


def _default_center(x: jax.Array) -> tuple[float, float]:
    return (x.shape[0] // 2 + 1, x.shape[1] // 2 + 1)  # NNlib's 1-based `size .÷ 2 .+ 1`


def _trivial(x: jax.Array, theta: float, center: tuple, adjoint: bool) -> jax.Array | None:
    """NNlib's exact quarter turns about the middle of the array (reversals and a transpose), taken when
    `θ ≈ π/2, π, 3π/2` to the element type's `√ϵ`, as Julia's `≈`."""
    if theta == 0:
        return x
    W, H = x.shape[:2]
    # NNlib's condition, verbatim: for odd sizes it compares rotation_center[1] with both sizes
    middle = (W % 2 == 0 and H % 2 == 0 and math.isclose(center[0], W // 2 + 0.5) and math.isclose(center[1], H // 2 + 0.5)) or (
        W % 2 == 1 and H % 2 == 1 and center[0] == W // 2 + 1 and center[0] == H // 2 + 1
    )
    if not middle:
        return None
    tol = math.sqrt(float(jnp.finfo(x.dtype if jnp.issubdtype(x.dtype, jnp.floating) else jnp.float64).eps))
    near = lambda a: math.isclose(theta, a, rel_tol=tol)
    if near(math.pi):
        return x[::-1, ::-1]
    if W != H:  # a quarter turn changes the shape: the general path keeps it
        return None
    t = jnp.swapaxes(x, 0, 1)
    if near(math.pi / 2):
        return t[::-1] if adjoint else t[:, ::-1]
    if near(3 * math.pi / 2):
        return t[:, ::-1] if adjoint else t[::-1]
    return None


def _rotate(x: jax.Array, s: jax.Array, c: jax.Array, method: str, center: tuple) -> jax.Array:
    """The general case: output pixel (i, j) reads x at its rotation by the angle with sine `s` and cosine
    `c` about `center` (1-based, as NNlib)."""
    W, H = x.shape[:2]
    i = jnp.arange(1, W + 1, dtype=x.dtype)[:, None]
    j = jnp.arange(1, H + 1, dtype=x.dtype)[None, :]
    yy, xx = i - center[0], j - center[1]
    yrot = c * yy - s * xx + center[0]
    xrot = s * yy + c * xx + center[1]
    if method == "nearest":  # rounding half away from zero
        yi = (jnp.sign(yrot) * jnp.floor(jnp.abs(yrot) + 0.5)).astype(jnp.int32)
        xi = (jnp.sign(xrot) * jnp.floor(jnp.abs(xrot) + 0.5)).astype(jnp.int32)
        valid = (yi >= 1) & (yi <= W) & (xi >= 1) & (xi <= H)
        v = x[jnp.clip(yi - 1, 0, W - 1), jnp.clip(xi - 1, 0, H - 1)]
        return jnp.where(valid[..., None, None], v, 0)
    yf, xf = jnp.floor(yrot), jnp.floor(xrot)
    yi, xi = yf.astype(jnp.int32), xf.astype(jnp.int32)
    valid = (yi >= 1) & (yi <= W - 1) & (xi >= 1) & (xi <= H - 1)  # both neighbours inside
    dy, dx = (yrot - yf)[..., None, None], (xrot - xf)[..., None, None]
    y0, x0 = jnp.clip(yi - 1, 0, W - 1), jnp.clip(xi - 1, 0, H - 1)
    y1, x1 = jnp.clip(yi, 0, W - 1), jnp.clip(xi, 0, H - 1)
    v = ((1 - dx) * (1 - dy) * x[y0, x0] + (1 - dx) * dy * x[y1, x0]
         + dx * (1 - dy) * x[y0, x1] + dx * dy * x[y1, x1])
    return jnp.where(valid[..., None, None], v, 0)


def _sincos(theta: float, dtype) -> tuple[jax.Array, jax.Array]:
    dt = dtype if jnp.issubdtype(dtype, jnp.floating) else jnp.float32
    return jnp.asarray(math.sin(theta), dt), jnp.asarray(math.cos(theta), dt)


@functools.partial(jax.jit, static_argnums=(3, 4))
def _rotate_compiled(x, s, c, method, center):
    return _rotate(x, s, c, method, center).astype(x.dtype)


@functools.partial(jax.jit, static_argnums=(3, 4))
def _rotate_adjoint(dy, s, c, method, center):
    (dx,) = jax.linear_transpose(lambda a: _rotate(a, s, c, method, center), jax.ShapeDtypeStruct(dy.shape, dy.dtype))(dy)
    return dx


def _prepare(x, theta, method, rotation_center):
    x = jnp.asarray(x)
    if x.ndim != 4:
        raise ValueError(f"imrotate expects a WHCN array (W, H, C, N), got shape {x.shape}")
    if method not in ("bilinear", "nearest"):
        raise ValueError(f"No interpolation method such as {method!r}: use 'bilinear' or 'nearest'")
    if jnp.issubdtype(x.dtype, jnp.integer) and method != "nearest":
        raise ValueError("If the array has an int dtype, only method='nearest' is supported")
    theta = float(theta) % (2 * math.pi)
    center = _default_center(x) if rotation_center is None else tuple(float(v) for v in rotation_center)
    return x, theta, center


def imrotate(x: jax.typing.ArrayLike, theta: float, *, method: str = "bilinear",
             rotation_center: tuple | None = None) -> jax.Array:
    """Rotate `x` `(W, H, C, N)` by `theta` radians in its first two dims about `rotation_center` (1-based,
    as NNlib; default `size .÷ 2 .+ 1`, a real centre pixel for even and odd sizes). `method` is
    `"bilinear"` or `"nearest"`; pixels that come from outside are 0.

    ```python
    >>> x = jnp.zeros((3, 3, 1, 1)).at[0, 1].set(1.0)
    >>> imrotate(x, math.radians(45))[:, :, 0, 0]   # Julia: [0 0.207107 0; 0 0 0.207107; 0 0 0]
    Array([[0.    , 0.2071, 0.    ],
           [0.    , 0.    , 0.2071],
           [0.    , 0.    , 0.    ]], dtype=float32)

    ```
    """
    x, theta, center = _prepare(x, theta, method, rotation_center)
    out = _trivial(x, theta, center, adjoint=False)
    return out if out is not None else _rotate_compiled(x, *_sincos(theta, x.dtype), method, center)


def grad_imrotate(dy: jax.typing.ArrayLike, x: jax.typing.ArrayLike, theta: float, *, method: str = "bilinear",
                  rotation_center: tuple | None = None) -> jax.Array:
    """NNlib's `∇imrotate(dy, arr, θ; method, rotation_center)`: the adjoint of `imrotate` in the array (not θ).

    ```python
    >>> x = jnp.zeros((3, 3, 1, 1))   # WHCN
    >>> dy = jnp.arange(9.0).reshape(3, 3, 1, 1)
    >>> grad_imrotate(dy, x, 0.0)[:, :, 0, 0]   # θ = 0 is the identity: dy comes back
    Array([[0., 1., 2.],
           [3., 4., 5.],
           [6., 7., 8.]], dtype=float32)

    ```
    """
    x, theta, center = _prepare(x, theta, method, rotation_center)
    dy = jnp.asarray(dy)
    if dy.shape != x.shape:
        raise DimensionMismatch(f"grad_imrotate: dy has shape {dy.shape}, x {x.shape}")
    out = _trivial(dy, theta, center, adjoint=True)
    if out is not None:
        return out
    return _rotate_adjoint(dy, *_sincos(theta, dy.dtype), method, center)


__all__ = ["grid_sample", "grad_grid_sample", "imrotate", "grad_imrotate"]
