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

The format is written and read by the `safetensors` package. `safetensors.numpy.save` lays the file out
(tensors ordered by alignment, then name). `safe_open` parses the header lazily and checks it before any
tensor is read: its length against the file, the JSON, known dtypes, non-negative integer shapes, each
shape's byte count (overflow-checked) against its `data_offsets`, and offsets that cover the data
exactly (no holes, overlaps or trailing bytes). fluxjax then checks what the package does not: no key
twice in the header (two readers could pick different ones), each entry exactly `dtype`, `shape`,
`data_offsets`, only the dtypes of `_ST_DTYPES`, and, importing into a model, its keys and shapes. Only
then are tensors read, one at a time with `pread` (a file truncated meanwhile raises, never SIGBUS).
fluxjax adds the sha256 of every tensor to `__metadata__` (`"fluxjax.sha256"`) and checks it on import,
so damaged files raise instead of loading wrong numbers. The package's errors become `CheckpointError`s
naming the file.

A model sharded across processes (`jax.distributed`) is gathered and written by process 0 (`_flat.py`).
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
import safetensors
import safetensors.numpy

from ._flat import Expected, atomic_write, export_flat, host
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
# the package's numpy reader looks these up as attributes of numpy, which has none: read from the offsets
_RAW_DTYPES = {"F8_E4M3", "F8_E5M2"}
_FIELDS = {"dtype", "shape", "data_offsets"}


def _digest(a: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(a).view(np.uint8).reshape(-1).tobytes()).hexdigest()


# ----------------------------------------------------------------------------------------------
# the safetensors format


def write_safetensors(path: str | os.PathLike, tensors: dict[str, Any], metadata: dict[str, str] | None = None) -> None:
    """Write `tensors` (name -> array) as a `.safetensors` file, atomically (with `safetensors.numpy.save`).
    `metadata` (str -> str) goes into `__metadata__`, with the sha256 of every tensor added under
    `"fluxjax.sha256"`. A full disk raises `OSError` (`ENOSPC`) and leaves any old file as it was."""
    if metadata is not None and not all(isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()):
        raise TypeError("write_safetensors: metadata must map str to str")
    arrays: dict[str, np.ndarray] = {}
    sums = {}
    for k, a in tensors.items():
        a = np.ascontiguousarray(host(a))
        dt = a.dtype.newbyteorder("=") if a.dtype.byteorder not in "=|" else a.dtype
        if dt not in _ST_NAMES:
            raise TypeError(f"write_safetensors: {k}: dtype {a.dtype} has no safetensors equivalent")
        arrays[k] = a = a.astype(dt.newbyteorder("<"), copy=False)
        sums[k] = _digest(a)
    meta = {"producer": "fluxjax", **(metadata or {}), "fluxjax.sha256": json.dumps(sums)}
    data = safetensors.numpy.save(arrays, metadata=meta)
    atomic_write(os.fspath(path), lambda f: f.write(data))


def _bad(path: str, fn: str):
    return lambda msg: CheckpointError(f"{fn}: {path!r} is not a valid safetensors file: {msg}")


def _header(f, bad) -> tuple[int, dict]:
    """The header `safe_open` accepted, parsed again from `f` with the checks it does not make."""

    def no_twice(pairs):
        d: dict = {}
        for k, v in pairs:
            if k in d:
                raise bad(f"key {k!r} appears twice in the header")
            d[k] = v
        return d

    f.seek(0)
    (n,) = struct.unpack("<Q", f.read(8))
    if n > os.fstat(f.fileno()).st_size - 8:  # safe_open checked this for the file at `path`: it was replaced
        raise bad("the file changed while reading")
    try:
        header = json.loads(f.read(n).decode("utf-8"), object_pairs_hook=no_twice)
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as e:  # the file changed after safe_open
        raise bad(f"header is not JSON ({type(e).__name__}: {e})") from None
    header.pop("__metadata__", None)
    for k, e in header.items():
        if not isinstance(e, dict) or set(e) != _FIELDS:
            raise bad(f"entry {k!r} must have exactly dtype, shape, data_offsets")
        if not isinstance(e["dtype"], str) or e["dtype"] not in _ST_DTYPES:
            raise bad(f"entry {k!r} has dtype {e['dtype']!r}, which fluxjax does not read (one of {sorted(_ST_DTYPES)})")
    return n, header


def _raw(f, start: int, k: str, dtype: str, shape: tuple, offsets: Any, bad) -> np.ndarray:
    """Tensor `k` read from `f` by its offsets (the dtypes the package's numpy reader cannot make)."""
    dt = _ST_DTYPES[dtype]
    nbytes = math.prod(shape) * dt.itemsize
    # safe_open checked the offsets of the file at `path`; `f` is that file unless it was replaced meanwhile
    if (not isinstance(offsets, list) or len(offsets) != 2 or not all(type(o) is int for o in offsets)
            or not 0 <= offsets[0] <= offsets[1] or offsets[1] - offsets[0] != nbytes):
        raise bad("the file changed while reading")
    f.seek(start + offsets[0])
    data = f.read(nbytes)
    if len(data) != nbytes:
        raise bad(f"entry {k!r} is truncated: {len(data)} of {nbytes} bytes (the file changed while reading?)")
    return np.frombuffer(data, dtype=dt.newbyteorder("<")).astype(dt, copy=True).reshape(shape)


def read_safetensors(path: str | os.PathLike, expected: Expected | None = None) -> dict[str, np.ndarray]:
    """Read a `.safetensors` file into `{name: numpy array}`. The file is untrusted input: the header (by
    `safetensors.safe_open`: length, JSON, dtypes, shapes, offsets covering the data exactly; then by
    fluxjax: no key twice, exact entries, dtypes fluxjax reads, and with `expected`, the model's keys and
    shapes) is validated before any tensor is read, then fluxjax's checksums when present.

    Raises `FileNotFoundError` for a missing file and `CheckpointError` (a `ValueError`) naming the file for
    anything malformed (`StructureMismatch` / `DimensionMismatch` when it does not fit `expected`)."""
    path = os.fspath(path)
    fn = expected.fn if expected is not None else "read_safetensors"
    bad = _bad(path, fn)
    with open(path, "rb") as f:
        try:
            with safetensors.safe_open(path, framework="numpy", backend="pread") as st:
                n, header = _header(f, bad)
                names = st.offset_keys()
                info = {k: (st.get_slice(k).get_dtype(), tuple(st.get_slice(k).get_shape())) for k in names}
                if set(names) != set(header) or any((info[k][0], list(info[k][1])) != (header[k]["dtype"], header[k]["shape"])
                                                     for k in names):
                    raise bad("the file changed while reading")
                meta = st.metadata() or {}
                keys = names if expected is None else expected.check_keys(names)
                if expected is not None:
                    for k in expected.want:  # in the model's order, whatever the writer's layout
                        expected.check_shape(k, info[k][1])
                out = {k: _raw(f, 8 + n, k, *info[k], header[k]["data_offsets"], bad) if info[k][0] in _RAW_DTYPES
                       else st.get_tensor(k) for k in keys}
        except safetensors.SafetensorError as e:
            raise bad(str(e)) from e
    if "fluxjax.sha256" in meta:
        try:
            sums = json.loads(meta["fluxjax.sha256"])
            ok = isinstance(sums, dict) and set(sums) == set(names) and all(_digest(out[k]) == sums[k] for k in out)
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
    A model sharded across processes is gathered, and process 0 writes the file: every process must call
    this, and all return once the file is written (or all raise).

    ```python
    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "model.safetensors")
    >>> fluxjax.export_safetensors(path, Dense(2, 3))
    >>> os.path.getsize(path) > 0
    True

    ```
    """
    export_flat(path, model, "export_safetensors", lambda flat: write_safetensors(path, flat, metadata))


def import_safetensors_(model: Any, path: str | os.PathLike) -> Any:
    """Load a `.safetensors` file (from `export_safetensors`, `safetensors.numpy.save_file`, or any writer
    using the same keys and Flux's shapes) into `model`, in place. Same validation and errors as
    `import_npz_`; returns `model`.

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
