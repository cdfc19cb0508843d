"""Batches on a mesh: `shard_batch` splits a batch's last (observation) axis over the data axes,
`shard_batches` does it for a data iterator, prefetching."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from ..errors import DimensionMismatch
from .mesh import _auto, _axes_size, _data_axes
from .placement import _arrays, _follow, _on, _place, place_tied


def _local_data_count(mesh: Mesh, names: tuple[str, ...]) -> int:
    """How many distinct positions along the data axes this process's devices occupy."""
    if jax.process_count() == 1:
        return _axes_size(mesh, names)
    me = jax.process_index()
    idx = [mesh.axis_names.index(a) for a in names]
    seen = set()
    for pos in np.ndindex(mesh.devices.shape):
        if mesh.devices[pos].process_index == me:
            seen.add(tuple(pos[i] for i in idx))
    return len(seen)


def _batch_spec(ndim: int, names: tuple[str, ...]) -> P:
    part = names[0] if len(names) == 1 else names
    return P(*([None] * (ndim - 1)), part)


def shard_batch(batch: Any, mesh: Mesh, axis: str | tuple[str, ...] | None = None) -> Any:
    """Split a batch over the mesh's data axis along the LAST axis of each array (Flux's batch axis).

    - `batch`: an array, or a tuple / named tuple / dict / list of arrays (as a `DataLoader` yields).
      0-dimensional arrays are replicated; non-array leaves are returned as they are.
    - `axis`: the mesh axis (or axes) to split over: by default `"data"`, or the mesh's only axis.

    The number of observations must be divisible by the number of devices along that axis; otherwise
    a `DimensionMismatch` says so (use `DataLoader(..., partial=False)` or a divisible batch size).
    Arrays already placed this way are not copied. Under `jax.distributed` each process passes its
    OWN part of the batch and gets the global array (`jax.make_array_from_process_local_data`).

    ```python
    >>> x, y = Flux.parallel.shard_batch((np.zeros((4, 64)), np.zeros((2, 64))), Flux.parallel.device_mesh())
    >>> tuple(x.sharding.spec)
    (None, 'data')

    ```
    """
    mesh = _auto(mesh)
    names = _data_axes(mesh, axis)
    k = _local_data_count(mesh, names)
    multi = jax.process_count() > 1
    flat, treedef = jax.tree_util.tree_flatten_with_path(batch)
    out = []
    for kp, x in flat:
        if isinstance(x, (list, range)):
            x = np.asarray(x)
        if not isinstance(x, (jax.Array, np.ndarray)):
            out.append(x)
            continue
        if x.ndim == 0:
            out.append(_place(x, NamedSharding(mesh, P())))
            continue
        sharding = NamedSharding(mesh, _batch_spec(x.ndim, names))
        if isinstance(x, jax.Array) and (x.sharding == sharding or not x.is_fully_addressable):
            out.append(x)  # already global
            continue
        n = x.shape[-1]
        if n % k:
            where = f"batch{jax.tree_util.keystr(kp)}" if kp else "the batch"
            devs = f"{k} devices of mesh axis {names[0]!r}" if len(names) == 1 else f"{k} devices of mesh axes {names}"
            if multi:
                devs += f" local to process {jax.process_index()}"
            raise DimensionMismatch(
                f"shard_batch: {where} (shape {tuple(x.shape)}) has {n} observations along its last axis, which does "
                f"not split evenly over the {devs}. Use a batch size divisible by {k} "
                f"(e.g. DataLoader(..., batchsize={max(k, n - n % k)})), drop the short last batch with "
                "DataLoader(..., partial=False), or pad it."
            )
        if multi:
            out.append(jax.make_array_from_process_local_data(sharding, x))
        else:
            out.append(jax.device_put(x, sharding))
    return jax.tree_util.tree_unflatten(treedef, out)


class ShardedBatches:
    """Batches of `data` placed on a mesh by `shard_batch`; see `shard_batches`."""

    def __init__(self, data: Iterable, mesh: Mesh, axis: str | tuple[str, ...] | None = None, prefetch: int = 1):
        self.data = data
        self.mesh = _auto(mesh)
        self.axis = _data_axes(self.mesh, axis)
        if prefetch < 0:
            raise ValueError(f"shard_batches: prefetch must be >= 0, got {prefetch}")
        self.prefetch = int(prefetch)

    def __len__(self) -> int:
        return len(self.data)  # type: ignore[arg-type]

    def _host_batches(self) -> Iterator[Any] | None:
        """A `DataLoader` over NumPy arrays: slice on the host and send each shard straight to its
        device (no staging of the whole batch on one device)."""
        from ..data import DataLoader

        dl = self.data
        if type(dl) is not DataLoader or dl.collate is not None or dl.batchsize < 0:
            return None
        if not all(isinstance(a, np.ndarray) for a in jax.tree_util.tree_leaves(dl._tree)):
            return None

        def gen():
            order = dl._order()
            bs = dl.batchsize
            for b in range(len(dl)):
                lo, hi = b * bs, min((b + 1) * bs, dl.nobs)
                if order is None:
                    yield jax.tree_util.tree_map(lambda a, lo=lo, hi=hi: a[..., lo:hi], dl._tree)
                else:
                    idx = order[lo:hi]
                    yield jax.tree_util.tree_map(lambda a, idx=idx: np.take(a, idx, axis=-1), dl._tree)

        return gen()

    def __iter__(self) -> Iterator[Any]:
        src = self._host_batches()
        if src is None:
            src = iter(self.data)
        placed = (self._place(i, d) for i, d in enumerate(src))
        if self.prefetch == 0:
            yield from placed
            return
        queue: list[Any] = []  # keep `prefetch` batches in flight: their transfers overlap the steps
        while True:
            try:
                queue.append((next(placed), None))
            except StopIteration:
                break
            except DimensionMismatch as e:  # raised when its batch is reached, not while prefetching
                queue.append((None, e))
            if len(queue) > self.prefetch:
                b, err = queue.pop(0)
                if err is not None:
                    raise err
                yield b
            if queue and queue[-1][1] is not None:
                break
        for b, err in queue:
            if err is not None:
                raise err
            yield b

    def _place(self, i: int, d: Any) -> Any:
        try:
            return shard_batch(d, self.mesh, self.axis)
        except DimensionMismatch as e:
            raise DimensionMismatch(f"{e} (data index {i}, 0-based)") from None

    def __repr__(self) -> str:
        return f"ShardedBatches({self.data!r}, mesh={dict(self.mesh.shape)})"


def shard_batches(data: Iterable, mesh: Mesh, axis: str | tuple[str, ...] | None = None, *,
                  prefetch: int = 1) -> ShardedBatches:
    """Wrap an iterable of batches (a `DataLoader`, a list, a generator) so that each comes out split
    over the mesh's data axis (`shard_batch`). Re-iterable when `data` is; has `len` when `data` has.

    A `DataLoader` over NumPy arrays is sliced on the host and each device's part is sent straight to
    it; device-resident data stays on the devices. `prefetch` batches are placed ahead, so their
    transfers overlap the running step. A batch that does not split evenly raises `DimensionMismatch`
    naming its index, before any step sees it.

    ```python
    >>> X, Y = np.zeros((4, 256)), np.zeros((2, 256))
    >>> loader = DataLoader((X, Y), batchsize=64, shuffle=True, partial=False)
    >>> mesh = Flux.parallel.device_mesh()
    >>> [tuple(x.sharding.spec) for x, y in Flux.parallel.shard_batches(loader, mesh)][0]
    (None, 'data')

    ```
    """
    return ShardedBatches(data, mesh, axis, prefetch)


# ----------------------------------------------------------------------------------------------
# train_ with a mesh


def place_for_training(mesh: Mesh, model: Any, sources: list | None, opt_state: Any, data: Iterable,
                        axis: str | tuple[str, ...] | None = None) -> ShardedBatches:
    """What `train_(..., mesh=mesh)` does first: every model / optimiser array not yet on `mesh` is
    replicated there (arrays placed by `shard_` keep their placement), and the data is wrapped in
    `shard_batches`."""
    mesh = _auto(mesh)
    rep = NamedSharding(mesh, P())
    placed: dict[int, tuple] = {}
    for tree in (sources if sources is not None else [model]):
        for path, slot, x in _arrays(tree):
            if not _on(x, mesh):
                place_tied(placed, path, slot, x, rep)
    _follow(opt_state, model, mesh, only_new=True)
    return data if isinstance(data, ShardedBatches) and data.mesh == mesh else ShardedBatches(data, mesh, axis)
