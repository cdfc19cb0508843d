"""Fuzzing the headers of every file fluxjax reads (`.npz`, `.safetensors`, its own checkpoints).

Each example takes a valid file written from SOURCE, rewrites part of its header (a shape, a dtype, the
offsets, the zip directory's sizes, the checkpoint's array table, with the checksums that cover them
recomputed, as a hostile writer would) or its bytes, and loads it into a fresh model. The outcome must be
one of:
- `CheckpointError` naming the file, the model bit-equal;
- `DimensionMismatch` / `StructureMismatch` naming the file, the model bit-equal, only when the file is
  well-formed (a reference reader that knows nothing of the model reads it): a valid file of another shape;
- success, and the model holds exactly what the reference reader reads from that file (SOURCE's values
  when the mutation left the data's meaning alone).
"""

import hashlib
import io
import json
import os
import shutil
import struct
import tempfile
import zipfile

import hypothesis.strategies as st
import jax
import numpy as np
import pytest
from hypothesis import HealthCheck, event, example, given, settings

import fluxjax
from fluxjax import BatchNorm, Chain, CheckpointError, Dense, DimensionMismatch, StructureMismatch
from fluxjax.serialize import flat_state, read_safetensors

pytestmark = [pytest.mark.reliability, pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")]

FUZZ = settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))


def model(seed):
    fluxjax.seed_(seed)
    return Chain(Dense(3, 4), BatchNorm(4), Dense(4, 2, bias=False))


SOURCE = model(1)


def snapshot(m):
    return [np.asarray(a).copy() for a in jax.tree_util.tree_leaves(m)]


def same(m, snap):
    leaves = jax.tree_util.tree_leaves(m)
    return len(leaves) == len(snap) and all(
        np.asarray(a).dtype == b.dtype and np.asarray(a).tobytes() == b.tobytes() for a, b in zip(leaves, snap))


def holds(m, ref: dict):
    """`m`'s arrays equal the reference reader's, cast to the model's dtypes (as loading casts)."""
    mine = flat_state(m)
    assert set(ref) >= set(mine), (sorted(ref), sorted(mine))
    for k, a in mine.items():
        with np.errstate(all="ignore"):
            want = np.asarray(ref[k]).real.astype(a.dtype) if np.iscomplexobj(ref[k]) else np.asarray(ref[k]).astype(a.dtype)
        assert np.array_equal(a, want, equal_nan=True), k


def outcome(load, name: str, reference):
    """Load into a fresh model and check the outcome as the module docstring says; `reference()` reads the
    file without a model (raising if it is not well-formed)."""
    m = model(2)
    before = snapshot(m)
    try:
        load(m)
    except CheckpointError as e:
        assert name in str(e), str(e)
        assert same(m, before), "a failed load changed the model"
        event("CheckpointError")
        return "error"
    except (DimensionMismatch, StructureMismatch) as e:
        assert name in str(e), str(e)
        assert same(m, before), "a failed load changed the model"
        reference()  # a mismatch is only right for a well-formed file
        event(type(e).__name__)
        return "mismatch"
    holds(m, reference())
    event("loaded")
    return "ok"


@pytest.fixture(scope="module")
def files():
    d = tempfile.mkdtemp()
    st_path, npz_path, ck = os.path.join(d, "m.safetensors"), os.path.join(d, "m.npz"), os.path.join(d, "ck")
    fluxjax.export_safetensors(st_path, SOURCE)
    fluxjax.export_npz(npz_path, SOURCE)
    fluxjax.save(ck, SOURCE)
    out = {"dir": d, "safetensors": open(st_path, "rb").read(), "npz": open(npz_path, "rb").read(), "ck": ck}
    yield out
    shutil.rmtree(d, ignore_errors=True)


KEYS = sorted(flat_state(SOURCE))
DIMS = st.sampled_from([0, 1, 2, 3, 4, 12, 2**20, 2**31, 2**32, 2**40, 2**62, 2**63 - 1, -1])
SHAPE = st.lists(DIMS, max_size=3)


# ------------------------------------------------------------------------------------------------
# .npz


def npz_with(members: dict[str, bytes], patch_sizes: int | None = None) -> bytes:
    f = io.BytesIO()
    with zipfile.ZipFile(f, "w", zipfile.ZIP_DEFLATED) as z:
        for k, v in members.items():
            z.writestr(k, v)
    data = bytearray(f.getvalue())
    if patch_sizes is not None:  # the zip directory lies about the first member's size
        for sig, at in ((b"PK\x03\x04", 22), (b"PK\x01\x02", 24)):
            i = data.find(sig)
            struct.pack_into("<I", data, i + at, patch_sizes % 2**32)
    return bytes(data)


def npz_members(data: bytes) -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        return {n: z.read(n) for n in z.namelist()}


NPY_EDIT = st.fixed_dictionaries({
    "key": st.sampled_from(KEYS),
    "shape": st.none() | SHAPE.map(tuple),
    "descr": st.none() | st.sampled_from(["<f4", "<f8", ">f4", "<i4", "|b1", "<c8", "|O", "<V4", "<U1", "<f2"]),
    "fortran": st.none() | st.booleans(),
    "data": st.sampled_from(["same", "short", "long", "empty"]),
    "patch": st.none() | st.integers(0, 2**32 - 1),
})


def edit_npy(raw: bytes, e) -> bytes:
    f = io.BytesIO(raw)
    np.lib.format.read_magic(f)
    shape, fortran, dtype = np.lib.format.read_array_header_1_0(f)
    body = raw[f.tell():]
    hdr = {"descr": e["descr"] or np.lib.format.dtype_to_descr(dtype),
           "fortran_order": fortran if e["fortran"] is None else e["fortran"],
           "shape": shape if e["shape"] is None else e["shape"]}
    out = io.BytesIO()
    np.lib.format.write_array_header_1_0(out, hdr)
    body = {"same": body, "short": body[: len(body) // 2], "long": body + bytes(4096), "empty": b""}[e["data"]]
    return out.getvalue() + body


@FUZZ
@given(e=NPY_EDIT)
@example(e={"key": "layers.0.weight", "shape": (2**40,), "descr": "<f8", "fortran": None, "data": "same", "patch": None})
@example(e={"key": "layers.0.weight", "shape": (3, 4), "descr": None, "fortran": True, "data": "same", "patch": None})
@example(e={"key": "layers.0.weight", "shape": None, "descr": "<i4", "fortran": None, "data": "same", "patch": None})
@example(e={"key": "layers.0.weight", "shape": None, "descr": None, "fortran": None, "data": "long", "patch": 80})
def test_npz_headers(files, e):
    members = npz_members(files["npz"])
    name = e["key"] + ".npy"
    members = {name: edit_npy(members[name], e), **{k: v for k, v in members.items() if k != name}}
    p = os.path.join(files["dir"], "fuzz.npz")
    with open(p, "wb") as f:
        f.write(npz_with(members, e["patch"]))

    def reference():
        with np.load(p, allow_pickle=False) as z:
            return {k: np.array(z[k]) for k in z.files}

    outcome(lambda m: fluxjax.import_npz_(m, p), "fuzz.npz", reference)


# ------------------------------------------------------------------------------------------------
# .safetensors


ST_EDIT = st.fixed_dictionaries({
    "key": st.sampled_from(KEYS),
    "field": st.sampled_from(["shape", "dtype", "data_offsets", "length", "flip", "extra", "twice"]),
    "shape": SHAPE,
    "dtype": st.sampled_from(["F32", "F64", "I32", "U8", "BF16", "BOOL", "F8_E4M3", "X", 3]),
    "offsets": st.lists(DIMS, min_size=1, max_size=3),
    "where": st.floats(0, 1),
    "mask": st.integers(1, 255),
})


def edit_safetensors(data: bytes, e) -> bytes:
    (n,) = struct.unpack("<Q", data[:8])
    header, body = json.loads(data[8:8 + n]), data[8 + n:]
    if e["field"] == "length":
        return struct.pack("<Q", int(e["where"] * 2**64) % 2**64) + data[8:]
    if e["field"] == "flip":
        out = bytearray(data)
        out[int(e["where"] * (8 + n - 1))] ^= e["mask"]
        return bytes(out)
    entry = header[e["key"]]
    if e["field"] == "extra":  # a field the format does not have
        entry["order"] = e["dtype"]
    elif e["field"] != "twice":
        entry[e["field"]] = {"shape": e["shape"], "dtype": e["dtype"], "data_offsets": e["offsets"]}[e["field"]]
    text = json.dumps(header).encode()
    if e["field"] == "twice":  # the key again, last, with other offsets: readers taking either copy would differ
        other = {**entry, "data_offsets": [o % 64 for o in (e["offsets"] * 2)[:2]]}
        text = text[:-1] + f", {json.dumps(e['key'])}: {json.dumps(other)}}}".encode()
    return struct.pack("<Q", len(text)) + text + body


@FUZZ
@given(e=ST_EDIT)
@example(e={"key": "layers.0.weight", "field": "shape", "shape": [2**32, 2**32], "dtype": "F32", "offsets": [0],
            "where": 0.0, "mask": 1})
@example(e={"key": "layers.0.weight", "field": "shape", "shape": [3, 4], "dtype": "F32", "offsets": [0],
            "where": 0.0, "mask": 1})
@example(e={"key": "layers.0.weight", "field": "dtype", "dtype": "I32", "shape": [], "offsets": [0], "where": 0.0,
            "mask": 1})
@example(e={"key": "layers.0.bias", "field": "twice", "shape": [], "dtype": "F32", "offsets": [0], "where": 0.0,
            "mask": 1})
@example(e={"key": "layers.0.bias", "field": "extra", "shape": [], "dtype": "F32", "offsets": [0], "where": 0.0,
            "mask": 1})
def test_safetensors_headers(files, e):
    p = os.path.join(files["dir"], "fuzz.safetensors")
    with open(p, "wb") as f:
        f.write(edit_safetensors(files["safetensors"], e))
    outcome(lambda m: fluxjax.import_safetensors_(m, p), "fuzz.safetensors", lambda: read_safetensors(p))


# ------------------------------------------------------------------------------------------------
# fluxjax checkpoints: the metadata rewritten with its checksum recomputed, as a hostile writer would


CK_EDIT = st.fixed_dictionaries({
    "array": st.integers(0, 50),
    "field": st.sampled_from(["shape", "dtype", "ref", "table", "flip"]),
    "shape": st.one_of(SHAPE, st.just("x")),
    "dtype": st.sampled_from(["float64", "int32", "object", "V4", "bfloat16", "float32", "nonsense", 7]),
    "where": st.floats(0, 1),
})


def edit_checkpoint(ck: str, e) -> None:
    meta_file = os.path.join(ck, "0", "meta", "metadata")
    meta = json.load(open(meta_file))
    if e["field"] == "flip":
        text = bytearray(meta["fluxjax"].encode())
        text[int(e["where"] * (len(text) - 1))] ^= 4
        body = text.decode("utf-8", "replace")
    else:
        body = json.loads(meta["fluxjax"])
        names = sorted(body["arrays"])
        name = names[e["array"] % len(names)]
        if e["field"] == "shape":
            body["arrays"][name]["shape"] = e["shape"]
        elif e["field"] == "dtype":
            body["arrays"][name]["dtype"] = e["dtype"]
        elif e["field"] == "table":
            body["arrays"][name] = [e["shape"]]
        else:  # point one reference of the model's structure at another array
            other = names[(e["array"] + 1) % len(names)]
            node = next(n for n in body["nodes"] if isinstance(n, dict) and n.get("array") == name)
            node["array"] = other
        body = json.dumps(body)
    with open(meta_file, "w") as f:
        json.dump({"fluxjax": body, "sha256": hashlib.sha256(body.encode()).hexdigest()}, f)


@settings(max_examples=12, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(e=CK_EDIT)
@example(e={"array": 0, "field": "shape", "shape": [2**40], "dtype": "float32", "where": 0.0})
@example(e={"array": 0, "field": "dtype", "shape": [], "dtype": "object", "where": 0.0})
@example(e={"array": 2, "field": "ref", "shape": [], "dtype": "float32", "where": 0.0})
def test_checkpoint_metadata(files, e):
    ck = os.path.join(files["dir"], "fuzz_ck")
    shutil.rmtree(ck, ignore_errors=True)
    shutil.copytree(files["ck"], ck)
    edit_checkpoint(ck, e)

    def reference():
        raw = fluxjax.load(ck).model
        return {".".join(map(str, p)): a for p, a in fluxjax.serialize.array_paths(raw)}

    outcome(lambda m: fluxjax.load(ck, m), "fuzz_ck", reference)
