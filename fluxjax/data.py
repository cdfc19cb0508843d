"""One-hot encoding, `flatten` and the `DataLoader` (Flux re-exports these from OneHotArrays.jl
and MLUtils.jl), in Flux's layout: classes along the first axis, observations along the last.

Indices are 0-based: `onecold` without labels returns `argmax` along axis 0.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from .compiled.pure import concrete
from .errors import DimensionMismatch
from .random import check_rng, resolve_key

__all__ = ["onehot", "onehotbatch", "onecold", "flatten", "DataLoader", "batch", "unbatch"]

_MISSING = object()


# ---------------------------------------------------------------------------------------------
# one-hot


def _labels_list(labels: Any) -> list:
    if isinstance(labels, (str, range, list, tuple)):
        return list(labels)
    if isinstance(labels, (np.ndarray, jax.Array)):
        return np.asarray(labels).tolist()
    try:
        return list(labels)
    except TypeError:
        raise TypeError(f"labels must be a sequence, got {type(labels).__name__}") from None


def _key(v: Any) -> Any:
    """A dict key with Julia's `isequal` semantics for floats: NaN == NaN, 0.0 != -0.0."""
    if isinstance(v, (float, np.floating)):
        if math.isnan(v):
            return ("__nan__",)
        if v == 0 and math.copysign(1.0, v) < 0:
            return ("__negzero__",)
    if isinstance(v, np.generic):
        return v.item()
    return v


def _index_map(labels: list) -> dict:
    out: dict = {}
    for i, lab in enumerate(labels):
        try:
            out.setdefault(_key(lab), i)
        except TypeError:  # unhashable label: fall back to linear search
            return {}
    return out


def _findval(x: Any, labels: list, imap: dict) -> int | None:
    if imap:
        try:
            return imap.get(_key(x))
        except TypeError:
            pass
    k = _key(x)
    for i, lab in enumerate(labels):
        if _key(lab) == k:
            return i
    return None


def _short(labels: list) -> str:
    r = repr(labels)
    return r if len(r) <= 80 else r[:77] + "..."


def _hot(i: int, n: int) -> jax.Array:
    return jnp.asarray(np.arange(n) == i)


def onehot(x: Any, labels: Any, default: Any = _MISSING) -> jax.Array:
    """A one-hot bool vector of length `len(labels)`, true at the first label equal to `x`.

    If `x` is not among `labels`, the position of `default` is used, or a `ValueError` is raised
    when no default is given.

    ```python
    >>> onehot(20, range(10, 40, 10))          # [False, True, False]
    Array([False,  True, False], dtype=bool)
    >>> onehot(40, (10, 20, 30), 20)           # [False, True, False]
    Array([False,  True, False], dtype=bool)

    ```
    """
    labs = _labels_list(labels)
    imap = _index_map(labs)
    i = _findval(x, labs, imap)
    if i is None:
        if default is _MISSING:
            raise ValueError(f"Value {x!r} is not in labels {_short(labs)}")
        i = _findval(default, labs, imap)
        if i is None:
            raise ValueError(f"Default value {default!r} is not in labels {_short(labs)}")
    return _hot(i, len(labs))


def _traced_onehotbatch(data: jax.Array, labs: list, default: Any) -> jax.Array:
    lab = jnp.asarray(labs)
    n = len(labs)
    eq = lab.reshape((n,) + (1,) * data.ndim) == data[None]
    idx = jnp.argmax(eq, axis=0)
    if default is not _MISSING:
        d = _findval(default, labs, _index_map(labs))
        if d is None:
            raise ValueError(f"Default value {default!r} is not in labels {_short(labs)}")
        idx = jnp.where(jnp.any(eq, axis=0), idx, d)
    else:
        idx = jnp.where(jnp.any(eq, axis=0), idx, -1)  # unknown values give an all-false column
    return jnp.arange(n).reshape((n,) + (1,) * data.ndim) == idx[None]


def onehotbatch(data: Any, labels: Any, default: Any = _MISSING) -> jax.Array:
    """One-hot encode every element of `data`: a bool array of shape `(len(labels), *shape(data))`
    with `result[:, k...] == onehot(data[k...], labels, default)`.

    `data` may be any array or iterable (a string is a sequence of characters). A value missing
    from `labels` maps to `default`, or raises `ValueError` when no default is given; so does the
    eager `gradient` of a loss that one-hot encodes traced labels (fluxjax then runs it op by op: encode
    outside the loss, in the data pipeline, to keep it compiled). Inside your own `fluxjax.jit` or
    `jax.jit` (traced numeric `data`), a missing value without default gives an all-false column.

    ```python
    >>> onehotbatch([20, 10], range(10, 40, 10))    # [[F, T], [T, F], [F, F]]
    Array([[False,  True],
           [ True, False],
           [False, False]], dtype=bool)
    >>> onehotbatch("abc", "abc")                   # eye(3)
    Array([[ True, False, False],
           [False,  True, False],
           [False, False,  True]], dtype=bool)

    ```
    """
    labs = _labels_list(labels)
    n = len(labs)
    if isinstance(data, jax.core.Tracer):
        if default is _MISSING:
            concrete(data)  # the eager call that fluxjax compiles runs op by op, where a missing value raises
        return _traced_onehotbatch(data, labs, default)
    if isinstance(data, str):
        arr = np.empty(len(data), dtype=object)
        arr[:] = list(data)
    elif isinstance(data, (np.ndarray, jax.Array)):
        arr = np.asarray(data)
    else:
        arr = np.asarray(data if isinstance(data, (list, tuple)) else list(data))
        if arr.dtype.kind in "US":  # keep strings as Python objects (no fixed-width truncation)
            arr = arr.astype(object)
    shape = arr.shape
    flat = arr.reshape(-1)
    lab_arr = np.asarray(labs) if n else np.zeros(0, np.int64)
    if flat.dtype.kind in "iub" and lab_arr.dtype.kind in "iub":
        # vectorised path for integer data and labels: first occurrence via a stable sort
        order = np.argsort(lab_arr, kind="stable")
        sl = lab_arr[order]
        pos = np.clip(np.searchsorted(sl, flat, side="left"), 0, max(n - 1, 0))
        found = (sl[pos] == flat) if n else np.zeros(flat.shape, bool)
        idx = order[pos] if n else np.zeros(flat.shape, np.int64)
        if not found.all():
            if default is _MISSING:
                bad = flat[~found][0]
                raise ValueError(f"Value {bad.item()!r} not found in labels {_short(labs)}")
            d = _findval(default, labs, _index_map(labs))
            if d is None:
                raise ValueError(f"Default value {default!r} is not in labels {_short(labs)}")
            idx = np.where(found, idx, d)
    else:
        imap = _index_map(labs)
        d = None
        if default is not _MISSING:
            d = _findval(default, labs, imap)
            if d is None:
                raise ValueError(f"Default value {default!r} is not in labels {_short(labs)}")
        idx = np.empty(flat.shape, np.int64)
        for k, v in enumerate(flat.tolist()):
            i = _findval(v, labs, imap)
            if i is None:
                if d is None:
                    raise ValueError(f"Value {v!r} not found in labels {_short(labs)}")
                i = d
            idx[k] = i
    out = np.zeros((n, flat.size), bool)
    out[idx, np.arange(flat.size)] = True
    return jnp.asarray(out.reshape((n,) + shape))


def _jax_holds_exactly(a: np.ndarray) -> bool:
    """Whether `jnp.asarray(a)` keeps every value of the numeric array `a` (without x64, JAX turns
    int64 into int32 and float64 into float32, wrapping or rounding what does not fit)."""
    cd = np.dtype(jax.dtypes.canonicalize_dtype(a.dtype))
    if cd == a.dtype or a.size == 0:
        return True
    if a.dtype.kind in "iu":
        info = np.iinfo(cd)
        return bool(a.min() >= info.min and a.max() <= info.max)
    with np.errstate(over="ignore", invalid="ignore"):
        back = a.astype(cd).astype(a.dtype)
    same = (back == a) | (np.isnan(back) & np.isnan(a))
    return bool(same.all() and (np.signbit(back) == np.signbit(a)).all())


def onecold(y: Any, labels: Any = None) -> Any:
    """Inverse of :func:`onehotbatch`: the index of the largest entry along axis 0, looked up in
    `labels`. Without labels, 0-based indices.

    A vector gives one result (a Python int, or the label); an N-D array gives one per column,
    exactly `labels[i]` as OneHotArrays.jl: a jax array of shape `y.shape[1:]` for indices, and for
    numeric labels that JAX holds exactly (without `jax_enable_x64`: ints that fit in 32 bits,
    floats exact in float32); a NumPy array in the labels' own dtype for other numeric labels
    (`2**40`, `uint32` 3e9, float64 `0.1`), so they are never wrapped or rounded; a (nested) list
    for other labels. A NaN maximum in a vector raises `ValueError`, as OneHotArrays.jl.
    Under `jax.jit` it returns traced indices, or traced labels when they are numeric and JAX
    holds them exactly (otherwise a `TypeError`).

    ```python
    >>> onecold(jnp.array([1, 2, 5, 3.0]))                       # 2
    2
    >>> onecold(jnp.array([[1, 20, 5], [2, 7, 6], [3, 9, 10], [2, 1, 14]]))   # [2, 0, 3]
    Array([2, 0, 3], dtype=int32)
    >>> onecold(jnp.array([1, 2, 5, 3.0]), "ABCD")               # 'C'
    'C'
    >>> onecold(jnp.array([[0.9, 0.1], [0.1, 0.9]]), [2**40, 7])    # 64-bit labels, not wrapped
    array([1099511627776,             7])

    ```
    """
    y = jnp.asarray(y)
    if y.ndim == 0:
        raise ValueError("onecold expects an array with at least one dimension")
    ny = y.shape[0]
    labs = None if labels is None else _labels_list(labels)
    if labs is not None and len(labs) != ny:
        what = "a vector of length" if y.ndim == 1 else "an array with size(y, 0) =="
        raise DimensionMismatch(f"onecold got {len(labs)} labels for {what} {ny}, these must agree")
    idx = jnp.argmax(y, axis=0)
    concrete = not isinstance(idx, jax.core.Tracer)
    if y.ndim == 1 and concrete:
        i = int(idx)
        v = y[i]
        if jnp.issubdtype(y.dtype, jnp.inexact) and bool(jnp.isnan(v)):
            raise ValueError(f"maximum value found by onecold is {float(v)}")
        return i if labs is None else labs[i]
    if labs is None:
        return idx
    # the labels' own dtype: an array keeps it (uint32 stays uint32), a list gives NumPy's
    lab_arr = np.asarray(labels) if isinstance(labels, (np.ndarray, jax.Array)) else np.asarray(labs)
    if lab_arr.dtype.kind in "iubf":
        exact = _jax_holds_exactly(lab_arr)
        if not concrete:
            if not exact:
                raise TypeError(
                    f"onecold: labels {_short(labs)} ({lab_arr.dtype}) cannot be held exactly by JAX "
                    f"({jax.dtypes.canonicalize_dtype(lab_arr.dtype)}, jax_enable_x64 is off), so they cannot "
                    "be looked up under a jax transformation; take the indices onecold(y) inside jit and "
                    "index the labels outside it, or enable jax_enable_x64"
                )
            return jnp.asarray(lab_arr)[idx]
        picked = lab_arr[np.asarray(idx)]  # labels[i] exactly, as OneHotArrays.jl
        return jnp.asarray(picked) if exact else picked
    if not concrete:
        raise TypeError("onecold with non-numeric labels cannot run under jax transformations")
    picked = np.empty(idx.shape, dtype=object)
    flat = np.asarray(idx).reshape(-1)
    picked.reshape(-1)[:] = [labs[i] for i in flat]
    return picked.tolist()


# ---------------------------------------------------------------------------------------------
# flatten / batch


def flatten(x: Any) -> jax.Array:
    """Reshape to `(prod(shape[:-1]), shape[-1])` in Julia's column-major order (MLUtils.flatten).

    A `(W, H, C, N)` batch becomes `(W*H*C, N)` with `W` varying fastest within a column, so
    weights trained in Flux see the same features. Equals numpy's
    `np.reshape(x, (-1, N), order='F')`.

    ```python
    >>> flatten(jnp.zeros((28, 28, 1, 5))).shape
    (784, 5)

    ```
    """
    x = jnp.asarray(x)
    if x.ndim == 0:
        raise ValueError("flatten expects an array with at least one dimension")
    n = x.shape[-1]
    return x.T.reshape(n, -1).T


def batch(xs: Any) -> Any:
    """Stack observations along a new last axis (MLUtils.batch). Tuples, named tuples and dicts of
    observations give the same container of batches.

    ```python
    >>> batch([jnp.array([1, 2]), jnp.array([3, 4])])   # [[1, 3], [2, 4]]
    Array([[1, 3],
           [2, 4]], dtype=int32)

    ```
    """
    xs = list(xs)
    if not xs:
        raise ValueError("batch needs at least one observation")
    x0 = xs[0]
    if isinstance(x0, (dict, tuple)):  # MLUtils asserts that all have x0's keys / length
        for i, x in enumerate(xs):
            if _layout(x) != _layout(x0):
                raise ValueError(f"batch: observation {i} is {_layout(x)}, observation 0 {_layout(x0)}: every "
                                 "observation needs the same keys or length")
    if isinstance(x0, dict):
        return type(x0)((k, batch([x[k] for x in xs])) for k in x0)
    if isinstance(x0, tuple):
        parts = [batch([x[i] for x in xs]) for i in range(len(x0))]
        return type(x0)(*parts) if hasattr(x0, "_fields") else tuple(parts)
    return jnp.stack([jnp.asarray(x) for x in xs], axis=-1)


def _layout(x: Any) -> str:
    if isinstance(x, dict):
        return f"a {type(x).__name__} with keys {sorted(map(str, x))}"
    return f"a {type(x).__name__} of length {len(x)}" if isinstance(x, (tuple, list)) else f"a {type(x).__name__}"


def unbatch(x: Any) -> list:
    """Split an array along its last axis into a list of observations (MLUtils.unbatch). A list or
    tuple is taken as observations already and comes back as a list.

    ```python
    >>> unbatch(jnp.array([[1, 3], [2, 4]]))            # [array([1, 2]), array([3, 4])]
    [Array([1, 2], dtype=int32), Array([3, 4], dtype=int32)]

    ```
    """
    if isinstance(x, (list, tuple)):  # already observations: MLUtils' `unbatch(x::AbstractVector) = x`
        return list(x)
    x = jnp.asarray(x)
    if x.ndim == 0:
        raise ValueError("unbatch expects an array with at least one dimension")
    return [x[..., i] for i in range(x.shape[-1])]


# ---------------------------------------------------------------------------------------------
# DataLoader


def _leaf(x: Any, path: str) -> Any:
    if isinstance(x, (np.ndarray, jax.Array)):
        arr = x
    elif isinstance(x, (str, bytes)):
        raise TypeError(
            f"DataLoader: data{path} is a {type(x).__name__}; expected an array, "
            "or a tuple / dict of arrays with observations along the last axis"
        )
    elif isinstance(x, list) and any(isinstance(v, (list, tuple, dict, str, bytes)) or np.ndim(v) > 0 for v in x):
        return _Items(x)  # MLUtils: a Vector's items are its observations (np.asarray would stack them first)
    elif callable(getattr(type(x), "getobs", None)):
        return _Items(x)  # a data container that draws its own observations (mapobs, ObsView, BatchView)
    elif isinstance(x, (list, range)) or np.isscalar(x):
        try:
            arr = np.asarray(x)
        except ValueError as e:  # a ragged list
            raise TypeError(f"DataLoader: data{path} does not convert to a numeric array ({e})") from None
    else:
        raise TypeError(
            f"DataLoader: cannot use data{path} of type {type(x).__name__}; expected an array, "
            "or a tuple / dict of arrays with observations along the last axis"
        )
    if arr.dtype.kind in "OUSV" and not jnp.issubdtype(arr.dtype, jnp.floating):
        raise TypeError(
            f"DataLoader: data{path} does not convert to a numeric array (got dtype {arr.dtype}); "
            "expected arrays with observations along the last axis"
        )
    if arr.ndim == 0:
        raise ValueError(f"DataLoader: data{path} is 0-dimensional, so it has no observation axis")
    if isinstance(arr, np.ndarray) and arr.dtype.kind in "iu" and not _jax_holds_exactly(arr):
        # each batch becomes a jax.Array: without x64 JAX turns int64 into int32 by wrapping around, a
        # silently wrong value (float64 -> float32 only rounds, JAX's documented behaviour, kept)
        cd = np.dtype(jax.dtypes.canonicalize_dtype(arr.dtype))
        bad = arr.max() if arr.max() > np.iinfo(cd).max else arr.min()
        raise ValueError(
            f"DataLoader: data{path} has dtype {arr.dtype} and holds {int(bad)}, which JAX (jax_enable_x64 is off) "
            f"would convert to {cd.name} as {int(np.asarray(bad).astype(cd))} (wrapped around); enable 64-bit "
            'JAX first with jax.config.update("jax_enable_x64", True), or convert the data to values that fit '
            f"{cd.name} (e.g. remap ids to 0:n-1)"
        )
    return arr


class _Items:
    """The observations of a list (MLUtils: a `Vector` is a container of its elements: a batch is the
    list of its items, which `collate=True` stacks with `batch`), or of a data container with a
    `getobs` method (`mapobs(f, X)`: a batch is what its `getobs` gives for the batch's indices)."""

    def __init__(self, items: Any):
        self.items = items
        self.shape = (len(items),)

    def __getitem__(self, index: tuple) -> Any:  # `x[..., i]` (one item) or `x[..., idx]` (a list of them)
        i = index[-1]
        if not isinstance(self.items, list):
            return self.items.getobs(i if isinstance(i, (int, np.integer, slice)) else [int(k) for k in i])
        if isinstance(i, slice):
            return self.items[i]
        return self.items[i] if isinstance(i, (int, np.integer)) else [self.items[int(k)] for k in i]


def _tree(data: Any, path: str = "") -> Any:
    if isinstance(data, dict):
        return type(data)((k, _tree(v, f"{path}[{k!r}]")) for k, v in data.items())
    if isinstance(data, tuple):
        parts = [_tree(v, f"{path}[{i}]") for i, v in enumerate(data)]
        return type(data)(*parts) if hasattr(data, "_fields") else tuple(parts)
    return _leaf(data, path)


def _leaves(tree: Any, path: str = "") -> list[tuple[str, Any]]:
    if isinstance(tree, dict):
        return [lf for k, v in tree.items() for lf in _leaves(v, f"{path}[{k!r}]")]
    if isinstance(tree, tuple):
        return [lf for i, v in enumerate(tree) for lf in _leaves(v, f"{path}[{i}]")]
    return [(path, tree)]


def _map(tree: Any, f: Callable[[Any], Any]) -> Any:
    if isinstance(tree, dict):
        return type(tree)((k, _map(v, f)) for k, v in tree.items())
    if isinstance(tree, tuple):
        parts = [_map(v, f) for v in tree]
        return type(tree)(*parts) if hasattr(tree, "_fields") else tuple(parts)
    return f(tree)


class DataLoader:
    """Iterate over mini-batches of `data`, as Flux's (MLUtils') `DataLoader`.

    `data` is an array, or a tuple, named tuple or dict of arrays (nesting allowed); the LAST axis
    of every array is the observation axis, and all must hold the same number of observations. A
    list of arrays, tuples or strings is a list of observations (MLUtils' `Vector` container): its
    batches are lists of its items, which `collate=True` stacks. A data container (`mapobs(f, X)`,
    `ObsView`, `BatchView`) gives each batch as its `getobs` does.
    Each batch has the container type of `data` and holds `jax.Array` slices of the last axis.
    NumPy data stays on the host and only each batch is transferred.

    - `batchsize`: observations per batch; a negative value yields single observations (the last
      axis dropped), as MLUtils. A `batchsize` above the number of observations is lowered to it, with
      a warning (so `partial=False` still gives one batch), as MLUtils; data with no observations raises.
    - `shuffle`: reshuffle the observations at the start of every epoch (every `iter`).
    - `partial`: keep the last, smaller batch (`False` drops it).
    - `rng`: `None` (a key drawn from the global key at construction, so `fluxjax.seed_(n)`
      makes the order reproducible), an int seed (`3`, `np.int64(3)`) or a PRNG key, which each epoch
      splits; or a NumPy Generator (MLUtils' `rng::AbstractRNG`), which each epoch draws its order from
      (`rng.permutation(n)`, so `np.random.default_rng(0)` gives the same orders every run). Anything
      else raises `TypeError`, whether or not `shuffle` is set.
    - Integer NumPy data that JAX cannot hold (int64 beyond int32's range while `jax_enable_x64` is
      off) raises `ValueError` rather than wrap around; float64 data becomes float32 batches, as JAX.
    - `collate`: `None` slices arrays; `False` yields lists of observations; `True` stacks a list of
      observations with :func:`batch`; a function is applied to the list of observations.

    ```python
    >>> X = np.arange(10).reshape(5, 2).T              # Julia's reshape(0:9, 2, 5)
    >>> [b.shape for b in DataLoader(X, batchsize=2)]  # [(2, 2), (2, 2), (2, 1)]
    [(2, 2), (2, 2), (2, 1)]
    >>> for x, y in DataLoader((X, np.arange(5)), batchsize=2, shuffle=True): ...
    Ellipsis
    Ellipsis
    Ellipsis

    ```
    """

    def __init__(
        self,
        data: Any,
        batchsize: int = 1,
        shuffle: bool = False,
        partial: bool = True,
        rng: Any = None,
        collate: Any = None,
    ):
        if isinstance(batchsize, bool) or not isinstance(batchsize, (int, np.integer)):
            raise TypeError(f"DataLoader: batchsize must be an int, got {batchsize!r}")
        if batchsize == 0:
            raise ValueError("DataLoader: batchsize must be positive (or negative for single observations)")
        self.data = data
        self._tree = _tree(data)
        leaves = _leaves(self._tree)
        if not leaves:
            raise ValueError(f"DataLoader: data holds no arrays (got an empty {type(data).__name__})")
        sizes = {p: lf.shape[-1] for p, lf in leaves}
        if len(set(sizes.values())) > 1:
            listing = ", ".join(f"data{p or ''}: {n}" for p, n in sizes.items())
            raise DimensionMismatch(f"DataLoader: all arrays must have the same number of observations (last axis); got {listing}")
        self.nobs = int(next(iter(sizes.values())))
        if self.nobs == 0:
            raise ValueError("DataLoader: data holds no observations (its last axis has length 0)")
        if self.nobs < batchsize:  # as MLUtils' BatchView, which also warns
            warnings.warn(
                f"DataLoader: number of observations less than batch-size, decreasing the batch-size to {self.nobs}",
                stacklevel=2,
            )
            batchsize = self.nobs
        self.batchsize = int(batchsize)
        self.shuffle = bool(shuffle)
        self.partial = bool(partial)
        self.collate = collate
        check_rng(rng, "DataLoader")
        self._gen = rng if self.shuffle and isinstance(rng, np.random.Generator) else None
        self._key = resolve_key(rng, "DataLoader") if self.shuffle and self._gen is None else None

    def __len__(self) -> int:
        if self.batchsize < 0:
            return self.nobs
        if self.partial:
            return -(-self.nobs // self.batchsize)
        return self.nobs // self.batchsize

    def _order(self) -> np.ndarray | None:
        if not self.shuffle:
            return None
        if self._gen is not None:
            return self._gen.permutation(self.nobs)
        with jax.ensure_compile_time_eval():  # drawn now, also while a program is traced: never a traced key
            self._key, sub = jax.random.split(self._key)
            return np.asarray(jax.random.permutation(sub, self.nobs))

    @staticmethod
    def _take(x: Any, idx: Any) -> jax.Array | list:
        if isinstance(x, _Items):
            return x[..., idx]
        if isinstance(idx, slice):
            return jnp.asarray(x[..., idx])
        if isinstance(x, np.ndarray):
            # fancy indexing, not np.take: np.take copies a non-contiguous array (a transposed view)
            # whole before gathering, once per batch
            return jnp.asarray(x[..., idx])
        return jnp.take(x, jnp.asarray(idx), axis=-1)

    def _obs(self, i: int) -> Any:
        return _map(self._tree, lambda x: x[..., i] if isinstance(x, _Items) else jnp.asarray(x[..., i]))

    def __iter__(self) -> Iterator[Any]:
        order = self._order()
        if self.batchsize < 0:
            for k in range(self.nobs):
                yield self._obs(int(order[k]) if order is not None else k)
            return
        bs = self.batchsize
        for b in range(len(self)):
            lo, hi = b * bs, min((b + 1) * bs, self.nobs)
            if self.collate is None:
                idx = slice(lo, hi) if order is None else order[lo:hi]
                yield _map(self._tree, lambda x, idx=idx: self._take(x, idx))
                continue
            ids = range(lo, hi) if order is None else order[lo:hi].tolist()
            obs = [self._obs(int(i)) for i in ids]
            if self.collate is False:
                yield obs
            elif self.collate is True:
                yield batch(obs)
            else:
                yield self.collate(obs)

    def __repr__(self) -> str:
        class _Desc(str):
            def __repr__(self) -> str:
                return str(self)

        def desc(x: Any) -> str:
            shown = type(x.items if isinstance(x, _Items) else x).__name__
            return _Desc(f"{shown}{tuple(x.shape)}")

        inner = _map(self._tree, desc)
        extra = f", batchsize={self.batchsize}"
        if self.shuffle:
            extra += ", shuffle=True"
        if not self.partial:
            extra += ", partial=False"
        return f"DataLoader({inner!r}{extra})"
