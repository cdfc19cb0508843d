"""A model as a flat file sees it: `{"layers.0.weight": array}`, and what a file must hold to load into it.

Shared by the `.npz` (`_npz.py`) and `.safetensors` (`_safetensors.py`) readers and writers. `Expected`
is what the model wants (keys, shapes), so a reader checks every header against it *before* reading
or allocating an array: a hostile file can never make the process allocate more than the model holds.
`export_flat` writes a model whose arrays are sharded across processes: each process gathers every
array (`process_allgather`, a collective), process 0 writes, and all learn whether it did.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from typing import Any

import jax
import numpy as np
from jax.experimental import multihost_utils

from .core.layer import is_array
from .errors import DimensionMismatch
from .loading import StructureMismatch, array_paths, is_bias_path, plan_load, show_path, state
from .random import is_typed_key


def key_name(path: tuple) -> str:
    """`("layers", 0, "weight")` -> `"layers.0.weight"`."""
    return ".".join(str(p) for p in path)


def host(a: Any) -> np.ndarray:
    """A host numpy copy of array `a` (a typed PRNG key becomes its `key_data`). An array sharded across
    processes is gathered from all of them: every process must call this for it, in the same order."""
    if is_typed_key(a):
        a = jax.random.key_data(a)
    if isinstance(a, jax.core.Tracer):
        raise TypeError("export: the model holds traced values; export outside jax transformations")
    if _spans_processes(a):
        return np.asarray(multihost_utils.process_allgather(a, tiled=True))
    return np.asarray(jax.device_get(a))


def _spans_processes(a: Any) -> bool:
    return isinstance(a, jax.Array) and not isinstance(a, jax.core.Tracer) and not a.is_fully_addressable


def flat_state(model: Any) -> dict[str, np.ndarray]:
    """Every array of `state(model)` as a host numpy array under its flat key (`"layers.0.weight"`), in
    Flux's orientation (see `_safetensors.py`). Typed PRNG keys are stored as their `key_data`."""
    out: dict[str, np.ndarray] = {}
    for path, a in array_paths(model):
        k = key_name(path)
        if k in out:
            raise ValueError(f"two arrays of the model map to the same key {k!r}")
        out[k] = host(a)
    return out


def export_flat(path: str | os.PathLike, model: Any, fn: str, write: Callable[[dict[str, np.ndarray]], None]) -> None:
    """`write(flat_state(model))`. When some array of `model` is sharded across processes (not fully
    addressable), every process must call this: each gathers the arrays, only process 0 writes, and every
    process returns once it has, or raises when it failed (process 0 its own error)."""
    if not any(_spans_processes(a) for _, a in array_paths(model)):
        write(flat_state(model))
        return
    flat = flat_state(model)
    error = None
    if jax.process_index() == 0:
        try:
            write(flat)
        except Exception as e:  # raised below, once the other processes know
            error = e
    ok = int(multihost_utils.broadcast_one_to_all(np.int32(error is None)))
    if error is not None:
        raise error
    if not ok:
        raise RuntimeError(f"{fn}: process 0 failed to write {os.fspath(path)!r} (its error is raised there)")


def atomic_write(path: str, write: Callable[[Any], None]) -> None:
    """Write through a temporary file in the same directory, fsync, then rename over `path`: readers see
    the old file or the new one, never half of one. A full disk raises the `OSError` (`ENOSPC`) that the
    write raised, and the temporary file is removed."""
    d = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=d, prefix=os.path.basename(path) + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def shape_of(a: Any) -> tuple:
    """The shape an array is stored with (a typed PRNG key: its `key_data`'s)."""
    return tuple(jax.random.key_data(a).shape) if is_typed_key(a) else tuple(np.shape(a))


class Expected:
    """What `model` wants from a flat file: its keys in order, each with its path and shape, and the keys
    of `bias=False` fields (a file array there is ignored, as `loadmodel_` does)."""

    def __init__(self, model: Any, path: str, fn: str):
        self.model, self.path, self.fn = model, path, fn
        self.want: dict[str, tuple[tuple, tuple]] = {}
        for p, a in array_paths(model):
            self.want[key_name(p)] = (p, shape_of(a))
        # a file's array at a `bias=False` is ignored, as `loadmodel_` does; a `False` elsewhere is Flux's
        # `nothing` (BatchNorm with affine=False), where a file's array is an error
        self.absent = {key_name(p) for p, _ in array_paths(model, keep=lambda v: v is False) if is_bias_path(p)}

    def check_keys(self, have: list[str]) -> list[str]:
        """Raise `StructureMismatch` unless the file's keys `have` are the model's (plus ignorable `bias=False`
        ones); returns the keys to read, in the file's order."""
        have_set = set(have)
        missing = [k for k in self.want if k not in have_set]
        extra = [k for k in have if k not in self.want and k not in self.absent]
        if missing or extra:
            parts = []
            if missing:
                parts.append(f"missing from the file: {missing[:8]}{' ...' if len(missing) > 8 else ''}")
            if extra:
                parts.append(f"not in the model: {extra[:8]}{' ...' if len(extra) > 8 else ''}")
            raise StructureMismatch(f"{self.fn}: {self.path!r} does not match the model ({'; '.join(parts)})")
        return [k for k in have if k in self.want]

    def check_shape(self, key: str, shape: tuple) -> None:
        """Raise `DimensionMismatch` naming the file, the path and both sizes when the file's `shape` for
        `key` is not the model's."""
        p, want = self.want[key]
        if tuple(shape) != want:
            raise DimensionMismatch(f"{self.fn}: {self.path!r}: {show_path(p)}: tried to load size {tuple(shape)} "
                                    f"array into size {want}")

    def load(self, flat: dict[str, np.ndarray]) -> Any:
        """Load the validated arrays into the model, all or nothing; returns the model."""
        try:
            plan = plan_load(self.model, _substitute(self.model, flat))
        except ValueError as e:
            raise type(e)(f"{self.fn}: {self.path!r}: {str(e).removeprefix('loadmodel_: ')}") from e
        plan.commit()
        return self.model


def _substitute(tree: Any, flat: dict[str, Any]) -> Any:
    """`state(tree)` with every array replaced by `flat[its key]`; iterative, for very deep models."""
    done: list[Any] = []
    todo: list[tuple[bool, Any, tuple]] = [(False, state(tree), ())]
    while todo:
        closing, v, p = todo.pop()
        if closing:
            kind, keys = v
            vals = done[len(done) - len(keys):]
            del done[len(done) - len(keys):]
            done.append(dict(zip(keys, vals)) if kind is dict else kind(vals))
        elif is_array(v):
            done.append(flat[key_name(p)])
        elif isinstance(v, (dict, list, tuple)):
            keys = list(v) if isinstance(v, dict) else list(range(len(v)))
            todo.append((True, (dict if isinstance(v, dict) else type(v), keys), p))
            todo.extend((False, v[k], p + (k,)) for k in reversed(keys))
        else:
            done.append(v)
    return done[0]


__all__ = ["Expected", "atomic_write", "export_flat", "flat_state", "host", "key_name", "shape_of"]
