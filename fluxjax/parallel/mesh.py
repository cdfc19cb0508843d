"""Meshes: `device_mesh` and the axis helpers the other parallel modules share."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import jax
from jax.sharding import AxisType, Mesh


def device_mesh(devices: Sequence[Any] | int | str | None = None, **axes: int) -> Mesh:
    """A `Mesh` over `devices` with named axes, in the order given (`-1`: all remaining devices).

    - `devices`: `None` or `"all"` for every device (of every process, under `jax.distributed`),
      an int for the first `n` devices, or a list of devices.
    - `axes`: axis name = size, e.g. `data=4, model=2`. Without any, one axis `"data"` over all of
      `devices` (pure data parallelism).

    The mesh's axes are of `AxisType.Auto` (GSPMD: XLA decides how to communicate), which is what
    Flux layers need; meshes made elsewhere are converted the same way when fluxjax places arrays.

    ```python
    >>> device_mesh().shape == {"data": jax.device_count()}   # all devices on one "data" axis
    True
    >>> device_mesh(data=-1, model=2).shape   # needs 8 devices  # doctest: +SKIP
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
