"""Every device, and many machines: data and model parallelism over a `jax.sharding.Mesh`.

fluxjax does no collective communication of its own. It places arrays: model and optimiser arrays
replicated (or split along a mesh axis, for model parallelism), each batch split along its LAST axis
(Flux's observation axis) over the mesh's `"data"` axis. `jax.jit` of a step with such inputs is one
SPMD program (GSPMD): means over the batch, BatchNorm's batch statistics and the gradients are global,
computed across every device with the collectives XLA inserts, so the numbers are those of one device
up to float rounding.

```python
import fluxjax as Flux
from fluxjax import parallel

mesh = parallel.device_mesh()                       # every device, one axis "data"
Flux.train_(loss, model, loader, opt_state, mesh=mesh)

# model parallel: split the first (output) axis of every Dense weight over 2 devices
mesh = parallel.device_mesh(data=4, model=2)
opt_state = Flux.setup(Flux.Adam(), model)
parallel.shard_(model, mesh, rules={"weight": parallel.P("model", None), "bias": parallel.P("model")},
                opt_state=opt_state)                # Adam's moments follow their weights
```

Many machines: one process per host, `parallel.initialize()` first (a thin wrapper of
`jax.distributed.initialize`), every process builds the same model (same seed), loads its own part
of the data (`local_slice`) and passes its local batches; `shard_batch` assembles the global batch
with `jax.make_array_from_process_local_data`.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

import jax
import numpy as np
from jax.sharding import AxisType, Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from ._slots import walk
from .errors import DimensionMismatch
from .state import commit

__all__ = [
    "P",
    "device_mesh",
    "shard_",
    "shard_batch",
    "shard_batches",
    "ShardedBatches",
    "local_slice",
    "initialize",
]

Rules = Mapping[str, P] | Callable[[str, jax.Array], P | None] | None


# ----------------------------------------------------------------------------------------------
# Meshes


def device_mesh(devices: Sequence[Any] | int | str | None = None, **axes: int) -> Mesh:
    """A `Mesh` over `devices` with named axes, in the order given (`-1`: all remaining devices).

    - `devices`: `None` or `"all"` for every device (of every process, under `jax.distributed`),
      an int for the first `n` devices, or a list of devices.
    - `axes`: axis name = size, e.g. `data=4, model=2`. Without any, one axis `"data"` over all of
      `devices` (pure data parallelism).

    The mesh's axes are of `AxisType.Auto` (GSPMD: XLA decides how to communicate), which is what
    Flux layers need; meshes made elsewhere are converted the same way when fluxjax places arrays.

    ```python
    >>> device_mesh().shape                       # on 8 devices
    OrderedDict([('data', 8)])
    >>> device_mesh(data=-1, model=2).shape
    OrderedDict([('data', 4), ('model', 2)])
    ```
    """
    if devices is None or devices == "all":
        devs = list(jax.devices())
    elif isinstance(devices, int) and not isinstance(devices, bool):
        if not 1 <= devices <= jax.device_count():
            raise ValueError(f"device_mesh: asked for {devices} devices, but {jax.device_count()} are visible")
        devs = list(jax.devices())[:devices]
    elif isinstance(devices, str):
        raise ValueError(f"device_mesh: devices must be 'all', an int or a list of devices, got {devices!r}")
    else:
        devs = list(devices)
    n = len(devs)
    if not axes:
        axes = {"data": n}
    names, sizes = tuple(axes), [int(s) for s in axes.values()]
    free = [i for i, s in enumerate(sizes) if s == -1]
    if len(free) > 1:
        raise ValueError(f"device_mesh: at most one axis may have size -1, got {dict(axes)}")
    known = math.prod(s for s in sizes if s != -1)
    if any(s == 0 or s < -1 for s in sizes):
        raise ValueError(f"device_mesh: axis sizes must be positive (or -1), got {dict(axes)}")
    if free:
        if n % known:
            raise ValueError(f"device_mesh: {n} devices do not split into axes {dict(axes)}")
        sizes[free[0]] = n // known
    if math.prod(sizes) != n:
        raise ValueError(
            f"device_mesh: axes {dict(zip(names, sizes))} hold {math.prod(sizes)} devices, but {n} were given; "
            "use -1 for one axis to take the rest"
        )
    auto = (AxisType.Auto,) * len(names)
    if devices is None or devices == "all":
        return jax.make_mesh(tuple(sizes), names, axis_types=auto)
    return jax.make_mesh(tuple(sizes), names, axis_types=auto, devices=devs)


def _auto(mesh: Mesh) -> Mesh:
    """The same mesh with every axis of `AxisType.Auto` (GSPMD)."""
    if not isinstance(mesh, Mesh):
        raise TypeError(f"expected a jax.sharding.Mesh (e.g. parallel.device_mesh()), got {type(mesh).__name__}")
    if all(t == AxisType.Auto for t in mesh.axis_types):
        return mesh
    return Mesh(mesh.devices, mesh.axis_names, axis_types=(AxisType.Auto,) * len(mesh.axis_names))


def _data_axes(mesh: Mesh, axis: str | tuple[str, ...] | None) -> tuple[str, ...]:
    if axis is None:
        if "data" in mesh.axis_names:
            return ("data",)
        if len(mesh.axis_names) == 1:
            return (mesh.axis_names[0],)
        raise ValueError(
            f"the mesh has axes {mesh.axis_names} and none is called 'data': name the batch axis with axis=..."
        )
    names = (axis,) if isinstance(axis, str) else tuple(axis)
    for a in names:
        if a not in mesh.axis_names:
            raise ValueError(f"the mesh has axes {mesh.axis_names}, not {a!r}")
    return names


def _axes_size(mesh: Mesh, names) -> int:
    return math.prod(mesh.shape[a] for a in names)


# ----------------------------------------------------------------------------------------------
# Placing arrays


def _is_key(x) -> bool:
    return jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key)


def _place(x, sharding: NamedSharding):
    """`x` (same value on every process) as one array with `sharding`; no copy when already there."""
    if isinstance(x, jax.Array) and x.sharding == sharding:
        return x
    if jax.process_count() == 1 or (isinstance(x, jax.Array) and not x.is_fully_addressable):
        return jax.device_put(x, sharding)  # one process, or a global array: reshard on the devices
    if _is_key(x):  # host copies of typed keys go through their raw data
        data = _place(np.asarray(jax.random.key_data(x)), NamedSharding(sharding.mesh, P(*sharding.spec, None)))
        return jax.random.wrap_key_data(data, impl=jax.random.key_impl(x))
    return jax.device_put(np.asarray(x), sharding)


def _field_of(path: str) -> str:
    m = re.search(r"\.(\w+)(?:\[[^\]]*\]|<\d+>)*$", path)
    return m.group(1) if m else path


def _glob(pattern: str) -> re.Pattern:
    """A path pattern: literal text (brackets included) where `*` matches anything."""
    return re.compile(".*".join(re.escape(part) for part in pattern.split("*")))


def _spec_for(rules: Rules, path: str, x) -> tuple[P, str]:
    if rules is None:
        return P(), ""
    if callable(rules):
        spec = rules(path, x)
        return (P() if spec is None else spec), "the rule function"
    field = _field_of(path)
    for k, spec in rules.items():
        if k == field or _glob(k).fullmatch(path):
            return (P() if spec is None else spec), f"rule {k!r}"
    return P(), ""


def _check_spec(mesh: Mesh, spec: P, path: str, x, why: str) -> None:
    if not isinstance(spec, P):
        raise TypeError(f"shard_: {why} gave {spec!r} for {path}; expected a PartitionSpec such as P('model', None)")
    if len(spec) > x.ndim:
        raise ValueError(
            f"shard_: {why} gives {spec} ({len(spec)} axes) for {path} of shape {tuple(x.shape)}; "
            "match it to arrays of that rank only, e.g. a path pattern like 'layers[2].weight'"
        )
    for i, names in enumerate(spec):
        if names is None:
            continue
        names = (names,) if isinstance(names, str) else tuple(names)
        for a in names:
            if a not in mesh.axis_names:
                raise ValueError(f"shard_: {why} uses mesh axis {a!r}, but the mesh has axes {mesh.axis_names}")
        k = _axes_size(mesh, names)
        if x.shape[i] % k:
            raise ValueError(
                f"shard_: {why} splits axis {i} of {path} (shape {tuple(x.shape)}) over {k} devices of mesh axis "
                f"{names if len(names) > 1 else names[0]!r}, and {k} does not divide {x.shape[i]}. Choose sizes divisible "
                f"by {k}, or a rule that matches only such arrays."
            )


def _arrays(tree: Any):
    """(path, slot, array) for every array in `tree` (a model, optimiser state or container)."""
    w = walk([tree], paths=True)
    for path, slot, x in zip(w.paths, w.slots, w.leaves):
        if isinstance(x, (jax.Array, np.ndarray)):
            if isinstance(x, jax.core.Tracer):
                raise RuntimeError("shard_ places concrete arrays; call it outside jit / gradient")
            yield (path[2:] if path.startswith("0.") else path[1:]), slot, x


def shard_(model: Any, mesh: Mesh, rules: Rules = None, *, opt_state: Any = None) -> Any:
    """Place every array of `model` on `mesh`, in place (rebinding its fields); returns `model`.

    - `rules`: `None` replicates every array on every device (data parallelism). A dict maps a field
      name (`"weight"`) or a glob over the array's path (`"layers[0].weight"`, `"layers[*].bias"`,
      `"enc.*"`) to a `PartitionSpec` over the array's axes (Flux's order: a Dense `weight` is
      `(out, in)`); the first matching entry wins and unmatched arrays are replicated. A function
      `rule(path, array) -> PartitionSpec | None` decides each array itself.
    - `opt_state`: an optimiser state from `setup` to place too: each moment follows its parameter's
      placement (same shape), everything else is replicated. (`setup` after `shard_` makes the
      moments follow too, but leaves scalar hyperparameters on the default device; pass the state
      here to place all of it, which `jax.distributed` jobs need.)

    Arrays already placed as asked are not copied. Split axes must be divisible by the number of
    devices they are split over; an error names the array otherwise. Under `jax.distributed`, every
    process must hold the same values (build the model with the same seed, or load the same file).

    ```python
    >>> mesh = device_mesh(data=4, model=2)
    >>> shard_(model, mesh, rules={"layers[0].weight": P("model", None), "layers[0].bias": P("model")})
    >>> model[0].weight.sharding.spec
    PartitionSpec('model', None)
    ```
    """
    mesh = _auto(mesh)
    for path, slot, x in _arrays(model):
        spec, why = _spec_for(rules, path, x)
        _check_spec(mesh, spec, path, x, why)
        commit(slot, _place(x, NamedSharding(mesh, spec)))
    if opt_state is not None:
        _follow(opt_state, model, mesh)
    return model


def _on(x, mesh: Mesh) -> bool:
    s = getattr(x, "sharding", None)
    return isinstance(s, NamedSharding) and _auto(s.mesh) == mesh


def _follow(opt_state: Any, model: Any, mesh: Mesh, only_new: bool = False) -> None:
    """Place the arrays of an optimiser state on `mesh`: a moment shaped like its parameter gets the
    parameter's sharding, anything else is replicated. `only_new` leaves arrays already on `mesh`."""
    from .optimise.tree import ImplicitState, Leaf
    from .zygote import Tangent

    rep = NamedSharding(mesh, P())
    placed: dict[tuple, Any] = {}  # an array leaves share (fluxjax/_sharing.py) is placed once, and stays shared

    def place_state(holder, field, param):
        target = param.sharding if _on(param, mesh) else rep

        def put(a):
            if not isinstance(a, (jax.Array, np.ndarray)) or (only_new and _on(a, mesh)):
                return a
            where = target if a.shape == param.shape else rep
            key = (id(a), where)
            if key not in placed:
                placed[key] = (a, _place(a, where))
            return placed[key][1]

        state = holder[field] if isinstance(holder, list) else getattr(holder, field)
        new = jax.tree_util.tree_map(put, state)
        commit(_slot(holder, field), new)

    def go(st, m):
        if st is None or m is None:
            return
        if isinstance(st, Leaf):
            if isinstance(m, (jax.Array, np.ndarray)):
                place_state(st, "state", m)
            return
        if isinstance(st, Tangent):
            for k, sub in st.fields.items():
                if sub is not None and k in getattr(m, "__dict__", {}):
                    go(sub, m.__dict__[k])
            return
        if isinstance(st, (list, tuple)):
            for s, mm in zip(st, m):
                go(s, mm)
            return
        if isinstance(st, dict):
            for k, s in st.items():
                if k in m:
                    go(s, m[k])

    if isinstance(opt_state, ImplicitState):  # model is then a Params
        for i, e in enumerate(model._entries):
            place_state(opt_state.states, i, e.value())
        return
    go(opt_state, model)
    # anything not reached through the model (e.g. state of arrays the model no longer has)
    for _, slot, x in _arrays(opt_state):
        if not _on(x, mesh):
            commit(slot, _place(x, rep))


def _slot(holder, field):
    from ._slots import Slot

    return Slot(holder, field, not isinstance(holder, list))


# ----------------------------------------------------------------------------------------------
# Batches


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
    >>> x, y = shard_batch((np.zeros((4, 64)), np.zeros((2, 64))), device_mesh())
    >>> x.sharding.spec
    PartitionSpec(None, 'data')
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
        from .data import DataLoader

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
    >>> loader = DataLoader((X, Y), batchsize=64, shuffle=True, partial=False)
    >>> for x, y in shard_batches(loader, mesh):
    ...     step(model, opt_state, x, y)
    ```
    """
    return ShardedBatches(data, mesh, axis, prefetch)


# ----------------------------------------------------------------------------------------------
# train_ with a mesh


def _place_for_training(mesh: Mesh, model: Any, sources: list | None, opt_state: Any, data: Iterable,
                        axis: str | tuple[str, ...] | None = None) -> ShardedBatches:
    """What `train_(..., mesh=mesh)` does first: every model / optimiser array not yet on `mesh` is
    replicated there (arrays placed by `shard_` keep their placement), and the data is wrapped in
    `shard_batches`."""
    mesh = _auto(mesh)
    rep = NamedSharding(mesh, P())
    for tree in (sources if sources is not None else [model]):
        for _, slot, x in _arrays(tree):
            if not _on(x, mesh):
                commit(slot, _place(x, rep))
    _follow(opt_state, model, mesh, only_new=True)
    return data if isinstance(data, ShardedBatches) and data.mesh == mesh else ShardedBatches(data, mesh, axis)


# ----------------------------------------------------------------------------------------------
# Many processes


def initialize(coordinator_address: str | None = None, num_processes: int | None = None,
               process_id: int | None = None, *, local_device_ids: Sequence[int] | None = None,
               cpu_collectives: str | None = "gloo", **kwargs: Any) -> None:
    """Join a multi-process JAX job (`jax.distributed.initialize`); call it first, before any array.

    One process per host (or per accelerator group). On TPU pods, SLURM and Open MPI every argument
    is found automatically: `parallel.initialize()`. Elsewhere give `coordinator_address`
    (`"host0:1234"`, reachable by all), `num_processes` and this process's `process_id`, or set the
    environment variables `JAX_COORDINATOR_ADDRESS`, `JAX_NUM_PROCESSES`, `JAX_PROCESS_ID`. After it,
    `jax.devices()` lists the devices of every process and `device_mesh()` spans them all.
    `cpu_collectives` picks the CPU backend's cross-process collectives (`"gloo"`, `"mpi"`, or `None`
    to leave JAX's setting); it matters only for CPU-only jobs. Other keywords go to
    `jax.distributed.initialize`.

    ```python
    parallel.initialize("10.0.0.1:1234", num_processes=2, process_id=int(os.environ["RANK"]))
    ```
    """
    if num_processes is None and os.environ.get("JAX_NUM_PROCESSES"):
        num_processes = int(os.environ["JAX_NUM_PROCESSES"])
    if process_id is None and os.environ.get("JAX_PROCESS_ID"):
        process_id = int(os.environ["JAX_PROCESS_ID"])
    if cpu_collectives is not None:
        jax.config.update("jax_cpu_collectives_implementation", cpu_collectives)
    jax.distributed.initialize(coordinator_address=coordinator_address, num_processes=num_processes,
                               process_id=process_id, local_device_ids=local_device_ids, **kwargs)


def local_slice(data: Any, process_index: int | None = None, process_count: int | None = None) -> Any:
    """This process's share of a dataset: a contiguous `1/process_count` of the observations (LAST
    axis) of every array in `data` (an array, or a tuple / dict of arrays). Every process gets
    `nobs // process_count` observations (the remainder is dropped), so all run the same number of
    steps. Give each process a `DataLoader` over its slice with `batchsize = global_batch //
    process_count`.

    ```python
    >>> loader = DataLoader(local_slice((X, Y)), batchsize=256 // jax.process_count(), shuffle=True, partial=False)
    ```
    """
    i = jax.process_index() if process_index is None else int(process_index)
    p = jax.process_count() if process_count is None else int(process_count)
    if not 0 <= i < p:
        raise ValueError(f"local_slice: process_index {i} is not in 0:{p}")
    leaves = jax.tree_util.tree_leaves(data)
    if not leaves:
        raise ValueError("local_slice: data holds no arrays")
    ns = {np.shape(a)[-1] for a in leaves}
    if len(ns) != 1:
        raise DimensionMismatch(f"local_slice: all arrays must have the same number of observations, got {sorted(ns)}")
    per = ns.pop() // p
    return jax.tree_util.tree_map(lambda a: a[..., i * per:(i + 1) * per], data)
