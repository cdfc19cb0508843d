"""Moving weights to and from Julia: flat `.safetensors` files in Flux's orientation (`.npz`: `_npz.py`).

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
import math
import os
import struct
from typing import Any

import ml_dtypes
import numpy as np

from ._flat import Expected, atomic_write, flat_state, host
from .loading import CheckpointError

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


def _digest(a: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(a).view(np.uint8).reshape(-1).tobytes()).hexdigest()


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
        a = np.ascontiguousarray(host(a))
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

    atomic_write(os.fspath(path), write)


def _bad(path: str, fn: str):
    return lambda msg: CheckpointError(f"{fn}: {path!r} is not a valid safetensors file: {msg}")


def _entries(header: dict, data_len: int, bad) -> dict[str, tuple[np.dtype, tuple, int, int]]:
    """Validate every entry of a parsed header against itself and the data size; nothing is allocated."""
    out = {}
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
        nbytes = math.prod(shape) * dt.itemsize  # Python ints: a product past int64 cannot wrap around
        if nbytes >= 2**63:
            raise bad(f"entry {k!r}: shape {shape} of {e['dtype']} is {nbytes} bytes, past what int64 can count")
        if offs[1] - offs[0] != nbytes:
            raise bad(f"entry {k!r}: data_offsets {offs} span {offs[1] - offs[0]} bytes, but dtype {e['dtype']} and "
                      f"shape {shape} need {nbytes}")
        if offs[1] > data_len:
            raise bad(f"entry {k!r}: data_offsets {offs} run past the end of the data ({data_len} bytes; truncated?)")
        out[k] = (dt, tuple(shape), offs[0], offs[1])
    pos = 0
    for b, e, k in sorted((b, e, k) for k, (_, _, b, e) in out.items()):
        if b != pos:
            raise bad(f"entry {k!r} starts at {b}, expected {pos} (holes or overlapping tensors)")
        pos = e
    if pos != data_len:
        raise bad(f"{data_len - pos} bytes after the last tensor")
    return out


def read_safetensors(path: str | os.PathLike, expected: Expected | None = None) -> dict[str, np.ndarray]:
    """Read a `.safetensors` file into `{name: numpy array}`. The file is untrusted input: the header (length,
    JSON, dtypes, shapes, offsets covering the data exactly, and with `expected`, the model's keys and
    shapes) is validated before any tensor is read, then fluxjax's checksums when present.

    Raises `FileNotFoundError` for a missing file and `CheckpointError` (a `ValueError`) naming the file for
    anything malformed (`StructureMismatch` / `DimensionMismatch` when it does not fit `expected`)."""
    path = os.fspath(path)
    fn = expected.fn if expected is not None else "read_safetensors"
    bad = _bad(path, fn)
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size < 8:
            raise bad(f"only {size} bytes")
        (n,) = struct.unpack("<Q", f.read(8))
        if n > size - 8 or n > _MAX_HEADER:
            raise bad(f"header length {n} exceeds the file size {size}")
        try:
            header = json.loads(f.read(n).decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as e:
            raise bad(f"header is not JSON ({type(e).__name__}: {e})") from None
        if not isinstance(header, dict):
            raise bad("header is not a JSON object")
        meta = header.pop("__metadata__", None)
        if meta is not None and (not isinstance(meta, dict) or not all(isinstance(v, str) for v in meta.values())):
            raise bad("__metadata__ must map strings to strings")
        entries = _entries(header, size - 8 - n, bad)
        keys = list(entries) if expected is None else expected.check_keys(list(entries))
        if expected is not None:
            for k in keys:
                expected.check_shape(k, entries[k][1])
        out: dict[str, np.ndarray] = {}
        for k in keys:
            dt, shape, b, e = entries[k]
            f.seek(8 + n + b)
            raw = f.read(e - b)
            if len(raw) != e - b:
                raise bad(f"entry {k!r} is truncated: {len(raw)} of {e - b} bytes (the file changed while reading?)")
            out[k] = np.frombuffer(raw, dtype=dt.newbyteorder("<")).astype(dt, copy=True).reshape(shape)
    if meta and "fluxjax.sha256" in meta:
        try:
            sums = json.loads(meta["fluxjax.sha256"])
            ok = isinstance(sums, dict) and set(sums) == set(entries) and all(_digest(out[k]) == sums[k] for k in out)
        except (json.JSONDecodeError, RecursionError):
            ok = False
        if not ok:
            raise bad("checksum mismatch: the tensor data or header is corrupted")
    return out


# ----------------------------------------------------------------------------------------------
# export / import of a model


def export_safetensors(path: str | os.PathLike, model: Any, metadata: dict[str, str] | None = None) -> None:
    """Write every array of `model` (parameters and state) to a `.safetensors` file, atomically, under keys
    like `layers.0.weight`, in Flux's orientation: SafeTensors.jl's `load_safetensors(path)["layers.0.weight"]`
    is the `(out, in)` matrix Flux's `m[1].weight` holds. `metadata` (str -> str) is stored in the header.

    ```python
    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "model.safetensors")
    >>> fluxjax.export_safetensors(path, Dense(2, 3))
    >>> os.path.getsize(path) > 0
    True

    ```
    """
    write_safetensors(path, flat_state(model), metadata)


def import_safetensors_(model: Any, path: str | os.PathLike) -> Any:
    """Load a `.safetensors` file (from `export_safetensors`, or any writer using the same keys and Flux's
    shapes) into `model`, in place. Same validation and errors as `import_npz_`; returns `model`.

    ```python
    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "model.safetensors")
    >>> fluxjax.export_safetensors(path, Dense(jnp.ones((3, 2))))
    >>> model = Dense(2, 3)
    >>> _ = fluxjax.import_safetensors_(model, path)
    >>> float(model.weight.sum())
    6.0

    ```
    """
    path = os.fspath(path)
    exp = Expected(model, path, "import_safetensors_")
    return exp.load(read_safetensors(path, exp))
