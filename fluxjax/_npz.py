"""`.npz` exchange with Julia's NPZ.jl: `export_npz`, `import_npz_`, and the reader that treats the file
as untrusted input.

An `.npz` is a zip archive of `.npy` members, one per array (keys and orientation: see `_safetensors.py`).
The reader never inflates a member before checking it: it opens the member's stream, reads only the
`.npy` header (`numpy.lib.format`), and checks the dtype (plain numbers only, never objects), the shape,
the byte count the header implies against the size the zip directory records and against what the
compressed bytes can inflate to, and the model's shape for that key. Only then does it read exactly
that many bytes, and a member that inflates to more than its header claims, or fails its CRC, is
refused. So a file can never make the process allocate more than the model holds.
"""

from __future__ import annotations

import math
import os
import zipfile
from typing import Any

import ml_dtypes
import numpy as np
from numpy.lib import format as npy

from ._flat import Expected, atomic_write, export_flat
from .errors import DimensionMismatch
from .loading import CheckpointError, StructureMismatch

_DEFLATE_RATIO = 1100  # deflate cannot expand data more than 1032:1
_CHUNK = 1 << 22


def _member(z: zipfile.ZipFile, info: zipfile.ZipInfo, key: str, exp: Expected, bad) -> np.ndarray:
    with z.open(info) as f:
        version = npy.read_magic(f)
        if version == (1, 0):
            shape, fortran, dtype = npy.read_array_header_1_0(f)
        elif version == (2, 0):
            shape, fortran, dtype = npy.read_array_header_2_0(f)
        else:
            raise bad(f"member {info.filename!r} has .npy format version {version}, which is not read here (1.0 or 2.0)")
        if not all(d >= 0 for d in shape):
            raise bad(f"member {info.filename!r} has a negative dimension in its shape {shape}")
        if dtype.hasobject or dtype.kind not in "biufc" or dtype.shape:
            raise bad(f"member {info.filename!r} has dtype {dtype}; only plain bool/int/float/complex arrays are read "
                      "(never Python objects)")
        nbytes = math.prod(shape) * dtype.itemsize
        data = info.file_size - f.tell()
        if nbytes != data:
            raise bad(f"member {info.filename!r}: its header claims shape {shape} of {dtype} ({nbytes} bytes), but the "
                      f"archive records {data} bytes of data")
        if info.compress_type == zipfile.ZIP_STORED and info.compress_size != info.file_size:
            raise bad(f"member {info.filename!r} is stored uncompressed in {info.compress_size} bytes but claims "
                      f"{info.file_size}")
        if info.compress_type == zipfile.ZIP_DEFLATED and info.file_size > _DEFLATE_RATIO * info.compress_size + 1024:
            raise bad(f"member {info.filename!r} claims {info.file_size} bytes from {info.compress_size} compressed bytes, "
                      "more than deflate can produce")
        exp.check_shape(key, shape)
        buf = bytearray(nbytes)
        view, pos = memoryview(buf), 0
        while pos < nbytes:
            chunk = f.read(min(_CHUNK, nbytes - pos))
            if not chunk:
                raise bad(f"member {info.filename!r} is truncated: {pos} of {nbytes} bytes")
            view[pos:pos + len(chunk)] = chunk
            pos += len(chunk)
        if f.read(1):
            raise bad(f"member {info.filename!r} inflates to more than the {nbytes} bytes its header claims")
    a = np.frombuffer(buf, dtype=dtype).reshape(shape, order="F" if fortran else "C")
    return a.astype(dtype.newbyteorder("="), copy=False) if not dtype.isnative else a


def read_npz(path: str, exp: Expected) -> dict[str, np.ndarray]:
    """The arrays of the `.npz` file `path` that `exp`'s model wants, each checked (header, size, the model's
    shape) before it is read. Raises `FileNotFoundError` for a missing file, `StructureMismatch` /
    `DimensionMismatch` when the file does not fit the model, `CheckpointError` for anything malformed or
    hostile; all name the file."""

    def bad(msg):
        return CheckpointError(f"{exp.fn}: {path!r} is not a valid .npz file: {msg}")

    if not os.path.exists(path):
        raise FileNotFoundError(f"{exp.fn}: no such file {path!r}")
    try:
        with open(path, "rb") as f:
            if f.read(6) == b"\x93NUMPY":
                raise bad("it is a single .npy array, not an .npz archive (save with numpy.savez)")
        with zipfile.ZipFile(path) as z:
            infos = z.infolist()
            names = [i.filename for i in infos]
            odd = [n for n in names if not n.endswith(".npy")]
            if odd:
                raise bad(f"members {odd[:4]} are not .npy arrays")
            if len(set(names)) != len(names):
                raise bad("it holds the same member twice")
            by_key = {i.filename[:-4]: i for i in infos}
            keys = exp.check_keys(list(by_key))
            return {k: _member(z, by_key[k], k, exp, bad) for k in keys}
    except (CheckpointError, StructureMismatch, DimensionMismatch, FileNotFoundError):
        raise
    except (ValueError, OSError, EOFError, zipfile.BadZipFile, KeyError, TypeError, RuntimeError, NotImplementedError,
            OverflowError, SyntaxError) as e:  # zipfile, zlib and numpy's header parser raise all of these
        raise bad(f"{type(e).__name__}: {e}") from e


def export_npz(path: str | os.PathLike, model: Any) -> None:
    """Write every array of `model` (parameters and state) to an uncompressed `.npz` file, atomically,
    under keys like `layers.0.weight`, in Flux's orientation: `NPZ.jl`'s `npzread(path)["layers.0.weight"]`
    is the `(out, in)` matrix Flux's `m[1].weight` holds. bfloat16 arrays are refused (npy cannot describe
    them; use `export_safetensors`). A full disk raises `OSError` (`ENOSPC`) and leaves any old file as it was.
    A model sharded across processes is gathered and written by process 0, as `export_safetensors`.

    ```python
    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "model.npz")
    >>> fluxjax.export_npz(path, Dense(2, 3))
    >>> sorted(np.load(path).files)
    ['bias', 'weight']

    ```
    """

    def write(flat: dict[str, np.ndarray]) -> None:
        for k, a in flat.items():
            if a.dtype == ml_dtypes.bfloat16 or a.dtype.kind == "V":
                raise TypeError(f"export_npz: {k} has dtype {a.dtype}, which .npy cannot describe; use export_safetensors")
        atomic_write(os.fspath(path), lambda f: np.savez(f, **flat))

    export_flat(path, model, "export_npz", write)


def import_npz_(model: Any, path: str | os.PathLike) -> Any:
    """Load the arrays of an `.npz` file (from `export_npz`, numpy, or Julia's `NPZ.jl`) into `model`, in place.

    Keys must be exactly the model's flat keys (`layers.0.weight`); shapes are Flux's. The file is untrusted
    input: every member's header is checked against the model before the member is inflated. Raises
    `StructureMismatch` for missing/extra keys, `DimensionMismatch` naming the key and both sizes,
    `CheckpointError` for a damaged or hostile file (all `ValueError`s naming the file), `FileNotFoundError`
    for a missing one; on any error the model is unchanged. Returns `model`.

    ```python
    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "model.npz")
    >>> fluxjax.export_npz(path, Dense(jnp.ones((3, 2))))
    >>> model = Dense(2, 3)
    >>> _ = fluxjax.import_npz_(model, path)
    >>> model.weight
    Array([[1., 1.],
           [1., 1.],
           [1., 1.]], dtype=float32)

    ```
    """
    path = os.fspath(path)
    exp = Expected(model, path, "import_npz_")
    return exp.load(read_npz(path, exp))


__all__ = ["export_npz", "import_npz_", "read_npz"]
