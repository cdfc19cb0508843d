"""Moving weights to and from Julia: flat `.npz` and `.safetensors` files in Flux's orientation.

Keys. Every array of `state(model)` is stored under its path with `.` between components and
0-based positions, as PyTorch's `state_dict`: `layers.0.weight`, `layers.1.mu`, `layers.enc.bias`
(named chains). Field names are fluxjax's ASCII spellings (`mu`, `sigma2`, `beta`, `gamma`). In Julia,
`layers.0.weight` is `m.layers[1].weight` (`m[1].weight`): add one to every index.

Orientation. Arrays keep Flux's logical shape: a `Dense(in, out)` weight is stored with shape
`(out, in)`, a `Conv` weight as `(k1, k2, cin, cout)`. Both formats store the bytes row-major (C order,
the last index fastest; `.npz` with `fortran_order: False`). Julia's readers undo that: NPZ.jl reads a
C-order array by reading the reversed shape and `permutedims`, and SafeTensors.jl permutes the
dimensions "such that the tensor has the same shape as in python". So a Julia user gets the same
`(out, in)` matrix with `W_julia[i+1, j+1] == W_python[i, j]`, ready for `m[1].weight .= W`. Going the
other way, NPZ.jl writes `fortran_order: True` with the Julia shape, which numpy (and so `import_npz_`)
reads as the same shape. Nothing is transposed by hand anywhere.

The safetensors format is written and read here with numpy alone: an 8-byte little-endian header
length, a JSON header `{name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {...}}`
(padded with spaces to 8 bytes), then the raw little-endian bytes. fluxjax adds the sha256 of every
tensor to `__metadata__` and checks it on import, so damaged files raise instead of loading wrong numbers.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
import tempfile
import zipfile
from collections.abc import Callable
from typing import Any

import jax
import ml_dtypes
import numpy as np

from ._loading import CheckpointError, StructureMismatch, array_paths, plan_load, state
from .functors import is_array
from .random import is_typed_key

_ST_DTYPES: dict[str, np.dtype] = {
    "F64": np.dtype(np.float64), "F32": np.dtype(np.float32), "F16": np.dtype(np.float16),
    "BF16": np.dtype(ml_dtypes.bfloat16), "F8_E4M3": np.dtype(ml_dtypes.float8_e4m3fn),
    "F8_E5M2": np.dtype(ml_dtypes.float8_e5m2),
    "I64": np.dtype(np.int64), "I32": np.dtype(np.int32), "I16": np.dtype(np.int16), "I8": np.dtype(np.int8),
    "U64": np.dtype(np.uint64), "U32": np.dtype(np.uint32), "U16": np.dtype(np.uint16), "U8": np.dtype(np.uint8),
    "BOOL": np.dtype(np.bool_),
}
_ST_NAMES = {v: k for k, v in _ST_DTYPES.items()}
_MAX_HEADER = 100 * 2**20


def _key_name(path: tuple) -> str:
    return ".".join(str(p) for p in path)


def _host(a: Any) -> np.ndarray:
    if is_typed_key(a):
        a = jax.random.key_data(a)
    if isinstance(a, jax.core.Tracer):
        raise TypeError("export: the model holds traced values; export outside jax transformations")
    return np.asarray(jax.device_get(a))


def flat_state(model: Any) -> dict[str, np.ndarray]:
    """Every array of `state(model)` as a host numpy array under its flat key (`"layers.0.weight"`), in
    Flux's orientation (see the module docstring). Typed PRNG keys are stored as their `key_data`."""
    out: dict[str, np.ndarray] = {}
    for path, a in array_paths(model):
        k = _key_name(path)
        if k in out:
            raise ValueError(f"two arrays of the model map to the same key {k!r}")
        out[k] = _host(a)
    return out


def _digest(a: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(a).view(np.uint8).reshape(-1).tobytes()).hexdigest()


def _atomic_write(path: str, write: Callable[[Any], None]) -> None:
    """Write through a temporary file in the same directory, fsync, then rename over `path`: readers see
    the old file or the new one, never half of one."""
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


# ----------------------------------------------------------------------------------------------
# the safetensors format


def write_safetensors(path: str | os.PathLike, tensors: dict[str, Any], metadata: dict[str, str] | None = None) -> None:
    """Write `tensors` (name -> array) as a `.safetensors` file, atomically. `metadata` (str -> str) goes
    into `__metadata__`, with the sha256 of every tensor added under `"fluxjax.sha256"`."""
    header: dict[str, Any] = {}
    arrays = []
    off = 0
    sums = {}
    for k, a in tensors.items():
        a = np.ascontiguousarray(_host(a))
        dt = a.dtype.newbyteorder("=") if a.dtype.byteorder not in "=|" else a.dtype
        if dt not in _ST_NAMES:
            raise TypeError(f"write_safetensors: {k}: dtype {a.dtype} has no safetensors equivalent")
        a = a.astype(dt.newbyteorder("<"), copy=False)
        header[k] = {"dtype": _ST_NAMES[dt], "shape": list(a.shape), "data_offsets": [off, off + a.nbytes]}
        off += a.nbytes
        arrays.append(a)
        sums[k] = _digest(a)
    meta = {"producer": "fluxjax", **(metadata or {}), "fluxjax.sha256": json.dumps(sums)}
    header = {"__metadata__": meta, **header}
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)

    def write(f):
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for a in arrays:
            f.write(a.tobytes())

    _atomic_write(os.fspath(path), write)


def read_safetensors(path: str | os.PathLike) -> dict[str, np.ndarray]:
    """Read a `.safetensors` file into `{name: numpy array}`, validating everything (header length, JSON,
    dtypes, shapes, offsets covering the data exactly, fluxjax's checksums when present).

    Raises `FileNotFoundError` for a missing file and `CheckpointError` (a `ValueError`) naming the file for
    anything malformed."""
    path = os.fspath(path)
    with open(path, "rb") as f:
        raw = f.read()

    def bad(msg):
        return CheckpointError(f"{path!r} is not a valid safetensors file: {msg}")

    if len(raw) < 8:
        raise bad(f"only {len(raw)} bytes")
    (n,) = struct.unpack("<Q", raw[:8])
    if n > len(raw) - 8 or n > _MAX_HEADER:
        raise bad(f"header length {n} exceeds the file size {len(raw)}")
    try:
        header = json.loads(raw[8:8 + n].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise bad(f"header is not JSON ({e})") from None
    if not isinstance(header, dict):
        raise bad("header is not a JSON object")
    meta = header.pop("__metadata__", None)
    if meta is not None and (not isinstance(meta, dict) or not all(isinstance(v, str) for v in meta.values())):
        raise bad("__metadata__ must map strings to strings")
    buf = memoryview(raw)[8 + n:]
    spans = []
    out: dict[str, np.ndarray] = {}
    for k, e in header.items():
        if not isinstance(e, dict) or set(e) != {"dtype", "shape", "data_offsets"}:
            raise bad(f"entry {k!r} must have exactly dtype, shape, data_offsets")
        dt, shape, offs = _ST_DTYPES.get(e["dtype"]) if isinstance(e["dtype"], str) else None, e["shape"], e["data_offsets"]
        if dt is None:
            raise bad(f"entry {k!r} has unknown dtype {e['dtype']!r}")
        if not isinstance(shape, list) or not all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in shape):
            raise bad(f"entry {k!r} has an invalid shape {shape!r}")
        if (not isinstance(offs, list) or len(offs) != 2
                or not all(isinstance(o, int) and not isinstance(o, bool) for o in offs) or not 0 <= offs[0] <= offs[1]):
            raise bad(f"entry {k!r} has invalid data_offsets {offs!r}")
        nbytes = int(np.prod(shape, dtype=np.int64)) * dt.itemsize
        if offs[1] - offs[0] != nbytes:
            raise bad(f"entry {k!r}: data_offsets {offs} span {offs[1] - offs[0]} bytes, but dtype {e['dtype']} and "
                      f"shape {shape} need {nbytes}")
        if offs[1] > len(buf):
            raise bad(f"entry {k!r}: data_offsets {offs} run past the end of the data ({len(buf)} bytes; truncated?)")
        spans.append((offs[0], offs[1], k))
        a = np.frombuffer(buf[offs[0]:offs[1]], dtype=dt.newbyteorder("<"))
        out[k] = a.astype(dt, copy=True).reshape(shape)
    pos = 0
    for b, e, k in sorted(spans):
        if b != pos:
            raise bad(f"entry {k!r} starts at {b}, expected {pos} (holes or overlapping tensors)")
        pos = e
    if pos != len(buf):
        raise bad(f"{len(buf) - pos} bytes after the last tensor")
    if meta and "fluxjax.sha256" in meta:
        try:
            sums = json.loads(meta["fluxjax.sha256"])
            ok = isinstance(sums, dict) and set(sums) == set(out) and all(_digest(out[k]) == sums[k] for k in out)
        except json.JSONDecodeError:
            ok = False
        if not ok:
            raise bad("checksum mismatch: the tensor data or header is corrupted")
    return out


# ----------------------------------------------------------------------------------------------
# export / import of a model


def _read_npz(path: str) -> dict[str, np.ndarray]:
    try:
        with np.load(path, allow_pickle=False) as z:
            if not isinstance(z, np.lib.npyio.NpzFile):
                raise CheckpointError(f"{path!r} is a single .npy array, not an .npz archive")
            return {k: np.array(z[k]) for k in z.files}
    except (FileNotFoundError, CheckpointError):
        raise
    except (ValueError, OSError, EOFError, zipfile.BadZipFile, KeyError, UnicodeDecodeError, TypeError) as e:
        raise CheckpointError(f"{path!r} is not a valid .npz file: {type(e).__name__}: {e}") from e


def _false_keys(model: Any) -> set[str]:
    return {_key_name(p) for p, _ in array_paths(model, keep=lambda v: v is False)}


def _substitute(tree: Any, flat: dict[str, Any]) -> Any:
    def go(v, p):
        if is_array(v):
            return flat[_key_name(p)]
        if isinstance(v, dict):
            return {k: go(e, p + (k,)) for k, e in v.items()}
        if isinstance(v, (list, tuple)):
            return type(v)(go(e, p + (i,)) for i, e in enumerate(v))
        return v

    return go(state(tree), ())


def _import(model: Any, flat: dict[str, np.ndarray], path: str, fn: str) -> Any:
    want = [_key_name(p) for p, _ in array_paths(model)]
    absent = _false_keys(model)  # `bias=False` fields: a file array there is ignored, as loadmodel_ does
    missing = [k for k in want if k not in flat]
    extra = [k for k in flat if k not in set(want) and k not in absent]
    if missing or extra:
        parts = []
        if missing:
            parts.append(f"missing from the file: {missing[:8]}{' ...' if len(missing) > 8 else ''}")
        if extra:
            parts.append(f"not in the model: {extra[:8]}{' ...' if len(extra) > 8 else ''}")
        raise StructureMismatch(f"{fn}: {path!r} does not match the model ({'; '.join(parts)})")
    try:
        plan = plan_load(model, _substitute(model, flat))
    except ValueError as e:
        raise type(e)(f"{fn}: {path!r}: {str(e).removeprefix('loadmodel_: ')}") from e
    plan.commit()
    return model


def export_npz(path: str | os.PathLike, model: Any) -> None:
    """Write every array of `model` (parameters and state) to an uncompressed `.npz` file, atomically,
    under keys like `layers.0.weight`, in Flux's orientation: `NPZ.jl`'s `npzread(path)["layers.0.weight"]`
    is the `(out, in)` matrix Flux's `m[1].weight` holds. bfloat16 arrays are refused (npy cannot describe
    them; use `export_safetensors`).

    ```python
    >>> fluxjax.export_npz("model.npz", model)
    ```
    """
    flat = flat_state(model)
    for k, a in flat.items():
        if a.dtype == ml_dtypes.bfloat16 or a.dtype.kind == "V":
            raise TypeError(f"export_npz: {k} has dtype {a.dtype}, which .npy cannot describe; use export_safetensors")
    _atomic_write(os.fspath(path), lambda f: np.savez(f, **flat))


def import_npz_(model: Any, path: str | os.PathLike) -> Any:
    """Load the arrays of an `.npz` file (from `export_npz`, numpy, or Julia's `NPZ.jl`) into `model`, in place.

    Keys must be exactly the model's flat keys (`layers.0.weight`); shapes are Flux's. Validates everything
    first (`StructureMismatch` for missing/extra keys, `DimensionMismatch` naming the key and both sizes,
    `CheckpointError` for a damaged file; all `ValueError`s naming the file), so on error the model is
    unchanged. Returns `model`.

    ```python
    >>> fluxjax.import_npz_(model, "model.npz")
    ```
    """
    path = os.fspath(path)
    return _import(model, _read_npz(path), path, "import_npz_")


def export_safetensors(path: str | os.PathLike, model: Any, metadata: dict[str, str] | None = None) -> None:
    """Write every array of `model` (parameters and state) to a `.safetensors` file, atomically, under keys
    like `layers.0.weight`, in Flux's orientation: SafeTensors.jl's `load_safetensors(path)["layers.0.weight"]`
    is the `(out, in)` matrix Flux's `m[1].weight` holds. `metadata` (str -> str) is stored in the header.

    ```python
    >>> fluxjax.export_safetensors("model.safetensors", model)
    ```
    """
    write_safetensors(path, flat_state(model), metadata)


def import_safetensors_(model: Any, path: str | os.PathLike) -> Any:
    """Load a `.safetensors` file (from `export_safetensors`, or any writer using the same keys and Flux's
    shapes) into `model`, in place. Same validation and errors as `import_npz_`; returns `model`.

    ```python
    >>> fluxjax.import_safetensors_(model, "model.safetensors")
    ```
    """
    path = os.fspath(path)
    return _import(model, read_safetensors(path), path, "import_safetensors_")
