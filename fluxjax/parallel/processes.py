"""Many processes: `initialize` (jax.distributed) and `local_slice`, each process's part of the data."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import jax
import numpy as np

from ..errors import DimensionMismatch


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
    >>> X, Y = np.zeros((4, 512)), np.zeros((2, 512))
    >>> loader = DataLoader(local_slice((X, Y)), batchsize=256 // jax.process_count(), shuffle=True, partial=False)
    >>> len(loader) == 2 // jax.process_count()       # this process's share of the 2 global batches
    True

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
