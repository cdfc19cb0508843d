"""NNlib's `gather` and `scatter` over the trailing dimensions, with 0-based indices.

`gather(src, idx)[..., k] = src[..., idx[k]]` and `scatter(op, src, idx)[..., idx[k]] = op(dst[..., idx[k]], src[..., k])`:
the index array addresses the LAST dimensions of `src` (NNlib's `dst[:, ..., k] .= src[:, ..., idx[k]...]`),
the leading dimensions are carried along whole. Indices are 0-based (Python's), so NNlib's
`gather([1,20,300,4000], [2,4,2])` is `gather([1, 20, 300, 4000], [1, 3, 1])`.

An index `idx` is one of

- an integer array (or nested list of ints): each entry indexes the last dimension of `src`;
- a (nested) list of tuples, `[(0, 0), (1, 2)]`: each `M`-tuple indexes the last `M` dimensions
  (NNlib's tuple / `CartesianIndex` indices);
- a tuple of `M` integer arrays of equal shape `(I, J, ...)`, the same as the tuples `zip(I, J, ...)`
  (NNlib's `gather(src, I, J, K...)`; `gather(src, I, J)` is accepted too).

Gradients are JAX's (gather, scatter-add, scatter-max/min) or, for `*` and `/`, a JVP rule with the
product of the other entries that land in the same place (NNlib's `∇scatter_src`), so `jax.grad`,
`jax.jvp` and nested AD all work. Under `jax.jit` with traced indices, `scatter` needs `dstsize=`; an
out-of-range traced index reads NaN (`gather`, floats) or is dropped (`scatter`), while concrete
indices out of range raise `IndexError`, as NNlib's `BoundsError`.
"""

from __future__ import annotations

import builtins
import operator
import statistics
from collections.abc import Sequence
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from .._checks import ints
from ..compiled.pure import concrete
from ..copyto import InexactError
from ..errors import DimensionMismatch

__all__ = ["gather", "scatter"]


# ----------------------------------------------------------------------------------------------
# indices


def _is_tracer(x) -> bool:
    return isinstance(x, jax.core.Tracer)


def _first_leaf(x):
    while isinstance(x, list) and x:
        x = x[0]
    return x


def _int_array(a, what: str = "idx") -> jax.Array | np.ndarray:
    if not _is_tracer(a) and not isinstance(a, jax.Array):
        a = np.asarray(a)
    if a.dtype == bool or not np.issubdtype(a.dtype, np.integer):
        raise TypeError(f"{what} must hold integers (0-based indices), got dtype {a.dtype}")
    return a


def _components(idx, more: tuple = ()) -> tuple[list, tuple[int, ...]]:
    """The M index arrays (one per indexed trailing dim, all of one shape) and that shape."""
    if more:
        comps = [idx, *more]
    elif isinstance(idx, tuple):
        comps = list(idx)
    elif isinstance(idx, list) and isinstance(_first_leaf(idx), tuple):
        arr = np.asarray(idx)
        if arr.dtype == object:
            raise ValueError("gather/scatter: tuple indices must all have the same length")
        comps = [arr[..., m] for m in range(arr.shape[-1])]
    else:
        comps = [idx]
    if not comps:
        raise ValueError("gather/scatter: empty index tuple")
    comps = [_int_array(c) for c in comps]
    shape = tuple(comps[0].shape)
    if any(tuple(c.shape) != shape for c in comps):
        raise DimensionMismatch(
            f"gather/scatter: index components must have one shape, got {[tuple(c.shape) for c in comps]}"
        )
    return comps, shape


def _concrete(comps) -> bool:
    return concrete(*comps)  # (in a compiled eager call: the call goes op by op, where the check runs)


def _check_bounds(comps, sizes: Sequence[int], what: str) -> None:
    for m, (c, n) in enumerate(zip(comps, sizes, strict=True)):
        c = np.asarray(c)
        if c.size and (c.min() < 0 or c.max() >= n):
            bad = int(c.min()) if c.min() < 0 else int(c.max())
            where = f" (component {m} of the tuple index)" if len(comps) > 1 else ""
            raise IndexError(f"{what}: index {bad}{where} is out of range 0:{n - 1} (0-based) of size {tuple(sizes)}")


def _no_wrap(comps, sizes):
    """Negative traced indices must not wrap around (Python's negative indexing): make them out of range."""
    return tuple(jnp.where(c < 0, n, c) for c, n in zip(comps, sizes, strict=True))


def _valid(comps, sizes):
    ok = jnp.ones(comps[0].shape, bool)
    for c, n in zip(comps, sizes, strict=True):
        ok = ok & (c >= 0) & (c < n)
    return ok


# ----------------------------------------------------------------------------------------------
# gather


def gather(src: jax.typing.ArrayLike, idx, *more) -> jax.Array:
    """NNlib's `gather(src, idx)`: `dst[..., k] = src[..., idx[k]]`, of shape `(size(src)[:N-M]..., size(idx)...)`.

    `M` is the length of each index (1 for integer indices, `M` for `M`-tuples); indices are 0-based and may
    repeat. `gather(src, I, J, ...)` is `gather(src, (I, J, ...))`.

    >>> gather(jnp.array([1, 20, 300, 4000]), [1, 3, 1])
    Array([  20, 4000,   20], dtype=int32)
    >>> gather(jnp.array([[1, 2, 3], [4, 5, 6]]), [0, 2, 0, 2, 0])   # columns 0, 2, 0, 2, 0
    Array([[1, 3, 1, 3, 1],
           [4, 6, 4, 6, 4]], dtype=int32)
    """
    src = jnp.asarray(src)
    comps, _ = _components(idx, more)
    dims = src.ndim - len(comps)
    if dims < 0:
        raise DimensionMismatch(
            f"gather: {len(comps)}-component indices need src with at least {len(comps)} dims, got shape {src.shape}"
        )
    sizes = src.shape[dims:]
    lead = (slice(None),) * dims
    if _concrete(comps):
        _check_bounds(comps, sizes, "gather")
        return src[(*lead, *(jnp.asarray(c) for c in comps))]
    fill = jnp.nan if jnp.issubdtype(src.dtype, jnp.inexact) else None
    return src.at[(*lead, *_no_wrap(comps, sizes))].get(mode="fill", fill_value=fill)


# ----------------------------------------------------------------------------------------------
# scatter

_OPS = {
    "+": "+", "add": "+", operator.add: "+", jnp.add: "+", np.add: "+",
    "-": "-", "sub": "-", operator.sub: "-", jnp.subtract: "-", np.subtract: "-",
    "*": "*", "mul": "*", operator.mul: "*", jnp.multiply: "*", np.multiply: "*",
    "/": "/", "div": "/", operator.truediv: "/", jnp.divide: "/", jnp.true_divide: "/", np.divide: "/",
    "max": "max", builtins.max: "max", jnp.maximum: "max", np.maximum: "max",
    "min": "min", builtins.min: "min", jnp.minimum: "min", np.minimum: "min",
    "mean": "mean", statistics.mean: "mean", jnp.mean: "mean", np.mean: "mean",
}


def _op_kind(op) -> str:
    try:
        kind = _OPS.get(op)
    except TypeError:  # unhashable
        kind = None
    if kind is None:
        raise ValueError(
            f"scatter: unsupported op {op!r}; NNlib's scatter ops are +, -, *, /, max, min and mean "
            "(operator.add, ..., builtins max/min, statistics.mean, or the strings '+', '-', '*', '/', 'max', 'min', 'mean')"
        )
    return kind


def _empty(kind: str, dtype) -> float | int:
    """NNlib's `scatter_empty(op, T)`: the value the destination starts from."""
    if kind in ("+", "-", "mean"):
        return 0
    if kind in ("*", "/"):
        return 1
    if jnp.issubdtype(dtype, jnp.inexact):
        return -jnp.inf if kind == "max" else jnp.inf
    info = jnp.iinfo(dtype)
    return info.min if kind == "max" else info.max


@jax.jit  # one program: op by op, its associative scans are hundreds of small compiled calls (4 s)
def _segment_siblings(src2: jax.Array, seg: jax.Array) -> tuple[jax.Array, jax.Array]:
    """For `src2` of shape `(L, n)` and destination ids `seg` `(n,)`: the product of the other entries with
    the same id (`siblings`) and of all of them (`group`), per column, without division (zeros are fine)."""
    n = seg.shape[0]
    order = jnp.argsort(seg, stable=True)
    g = seg[order]
    v = src2[:, order]
    one = jnp.ones_like(v[:, :1])

    def seg_scan(flags, vals):  # inclusive product within segments (flags mark a segment's first entry)
        def combine(a, b):
            fa, va = a
            fb, vb = b
            return fa | fb, jnp.where(fb, vb, va * vb)

        f = jnp.broadcast_to(flags, vals.shape)
        return lax.associative_scan(combine, (f, vals), axis=1)[1]

    start = jnp.concatenate([jnp.ones((1,), bool), g[1:] != g[:-1]])
    end = jnp.concatenate([g[:-1] != g[1:], jnp.ones((1,), bool)])
    pre = seg_scan(start, v)
    pre_ex = jnp.where(start, 1, jnp.concatenate([one, pre[:, :-1]], axis=1))
    suf = seg_scan(end[::-1], v[:, ::-1])[:, ::-1]
    suf_ex = jnp.where(end, 1, jnp.concatenate([suf[:, 1:], one], axis=1))
    inv = jnp.zeros((n,), order.dtype).at[order].set(jnp.arange(n, dtype=order.dtype))
    sib = (pre_ex * suf_ex)[:, inv]
    group = (pre_ex * v * suf_ex)[:, inv]
    return sib, group


def _ix(dims: int, comps) -> tuple:
    return (*(slice(None),) * dims, *comps)


@partial(jax.custom_jvp, nondiff_argnums=(0,))
def _scatter_mul(dims, dst, src, comps, seg):
    return dst.at[_ix(dims, comps)].multiply(src, mode="drop")


@_scatter_mul.defjvp
def _scatter_mul_jvp(dims, primals, tangents):
    dst, src, comps, seg = primals
    ddst, dsrc, _, _ = tangents
    out = _scatter_mul(dims, dst, src, comps, seg)
    n = seg.size
    if n == 0:
        return out, ddst
    ix = _ix(dims, comps)
    sib, group = _segment_siblings(src.reshape(-1, n), seg.reshape(n))
    # out[d] = dst[d] * prod(src in d): its tangent is ddst[d] * prod + dst[d] * sum_k dsrc_k * prod(siblings of k)
    prod_d = jnp.ones_like(dst).at[ix].set(group.reshape(src.shape), mode="drop")
    acc = jnp.zeros_like(dst).at[ix].add(dsrc * sib.reshape(src.shape), mode="drop")
    return out, ddst * prod_d + dst * acc


def _make_extremal(kind: str):
    @partial(jax.custom_jvp, nondiff_argnums=(0,))
    def f(dims, dst, src, comps, valid):
        at = dst.at[_ix(dims, comps)]
        return at.max(src, mode="drop") if kind == "max" else at.min(src, mode="drop")

    @f.defjvp
    def f_jvp(dims, primals, tangents):
        # NNlib's rule: every source entry equal to the result gets the full cotangent (ties included),
        # and the destination's starting value where it is still the result.
        dst, src, comps, valid = primals
        ddst, dsrc, _, _ = tangents
        out = f(dims, dst, src, comps, valid)
        ix = _ix(dims, comps)
        hit = (src == out.at[ix].get(mode="fill", fill_value=0)) & valid
        return out, jnp.where(dst == out, ddst, 0) + jnp.zeros_like(dst).at[ix].add(jnp.where(hit, dsrc, 0), mode="drop")

    return f


_scatter_max = _make_extremal("max")
_scatter_min = _make_extremal("min")


def _exact_init(init, dtype):
    """`init` as a value of `dtype`, or `InexactError` when it has none (`init=0.5` for integers): NNlib
    `fill!`s its destination, of `src`'s type, with `init` and throws; casting would truncate it quietly."""
    if isinstance(init, jax.core.Tracer) or jnp.issubdtype(dtype, jnp.inexact):
        return init
    v = np.asarray(init)
    with np.errstate(invalid="ignore", over="ignore"):
        exact = np.array_equal(v.astype(dtype).astype(np.result_type(v, dtype)), v.astype(np.result_type(v, dtype)))
    if not exact:
        raise InexactError(f"scatter: init={init!r} is not a value of src's type {np.dtype(dtype).name} (the destination "
                           "is filled with it, as NNlib's); pass an init of that type, or a float src: src.astype(float)")
    return init


def scatter(op, src: jax.typing.ArrayLike, idx, *, init=None, dstsize: Sequence[int] | int | None = None) -> jax.Array:
    """NNlib's `scatter(op, src, idx; init, dstsize)`: `dst[..., idx[k]] = op(dst[..., idx[k]], src[..., k])`.

    `dst` starts filled with `init` (default: NNlib's `scatter_empty`, 0 for `+ - mean`, 1 for `* /`, -inf / the
    type's minimum for `max`, +inf / maximum for `min`); its shape is `dstsize`, or `(size(src)[:d]..., max(idx)+1...)`
    with `d = ndim(src) - ndim(idx)`. `op` is one of `+ - * / max min mean` (`operator.add`, `builtins.max`,
    `statistics.mean`, `jnp.maximum`, ... or the strings `"+"`, `"max"`, `"mean"`, ...); `mean` averages what
    lands in each place (adding that mean to `init`) and leaves untouched places at `init`. Indices are 0-based;
    `/` and `mean` of integers give floats.

    >>> scatter("+", jnp.array([10, 100, 1000]), [2, 0, 1])
    Array([ 100, 1000,   10], dtype=int32)
    >>> scatter("*", jnp.array([10, 200, 3000]), [0, 3, 1], init=10, dstsize=6)
    Array([  100, 30000,    10,  2000,    10,    10], dtype=int32)
    """
    kind = _op_kind(op)
    src = jnp.asarray(src)
    comps, ishape = _components(idx)
    M = len(comps)
    dims = src.ndim - len(ishape)
    if dims < 0 or tuple(src.shape[dims:]) != ishape:
        raise DimensionMismatch(
            f"scatter: the last dims of src must match idx, got src of shape {src.shape} and idx of shape {ishape}"
        )
    if kind in ("/", "mean") and not jnp.issubdtype(src.dtype, jnp.inexact):
        src = src.astype(jnp.result_type(float))
    concrete = _concrete(comps)
    if dstsize is None:
        if not concrete:
            raise ValueError("scatter: with traced indices (inside jit) the destination size is unknown; pass dstsize=")
        if not ishape or 0 in ishape:
            raise ValueError("scatter: cannot infer dstsize from an empty idx; pass dstsize=")
        _check_bounds(comps, [np.iinfo(np.int64).max] * M, "scatter")  # negative indices
        dstsize = (*src.shape[:dims], *(int(np.max(np.asarray(c))) + 1 for c in comps))
    else:
        dstsize = ints("scatter", "dstsize", dstsize)
        if len(dstsize) != dims + M or dstsize[:dims] != tuple(src.shape[:dims]):
            raise DimensionMismatch(
                f"scatter: dstsize {dstsize} must be (size(src)[:{dims}]..., {M} indexed sizes) = "
                f"({', '.join(map(str, src.shape[:dims]))}{', ' if dims else ''}{', '.join('_' * M)}) "
                f"for src of shape {src.shape} and {M}-component indices"
            )
    sizes = dstsize[dims:]
    if concrete:
        _check_bounds(comps, sizes, "scatter")
        comps = tuple(jnp.asarray(c) for c in comps)
    else:
        comps = _no_wrap(comps, sizes)
    ix = _ix(dims, comps)
    fill = _empty(kind, src.dtype) if init is None else _exact_init(init, src.dtype)
    dst = jnp.full(dstsize, fill, src.dtype)
    if kind == "+":
        return dst.at[ix].add(src, mode="drop")
    if kind == "-":
        return dst.at[ix].add(-src, mode="drop")
    if kind in ("*", "/"):
        valid = _valid(comps, sizes)
        lin = jnp.ravel_multi_index(tuple(jnp.clip(c, 0, n - 1) for c, n in zip(comps, sizes, strict=True)), sizes, mode="clip")
        seg = jnp.where(valid, lin, -1 - jnp.arange(lin.size).reshape(lin.shape))  # dropped entries: own groups
        return _scatter_mul(dims, dst, src if kind == "*" else 1 / src, comps, seg)
    if kind in ("max", "min"):
        f = _scatter_max if kind == "max" else _scatter_min
        return f(dims, dst, src, comps, _valid(comps, sizes))
    # mean: NNlib's dst .+= safe_div.(sum, count), safe_div(x, 0) = x
    sums = jnp.zeros(dstsize, src.dtype).at[ix].add(src, mode="drop")
    counts = jnp.zeros(sizes, src.dtype).at[tuple(comps)].add(1, mode="drop")
    return dst + sums / jnp.where(counts == 0, 1, counts)
