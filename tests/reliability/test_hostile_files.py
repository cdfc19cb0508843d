"""Files are untrusted input: hand-made hostile `.npz` / `.safetensors` files (absurd sizes, zip bombs,
overflowing shapes, object arrays) are a `CheckpointError` naming the file, raised before anything
large is allocated, with the model left bit-equal."""

import io
import json
import os
import struct
import tracemalloc
import zipfile

import jax
import numpy as np
import pytest

import fluxjax
from fluxjax import Chain, CheckpointError, Dense, DimensionMismatch

pytestmark = pytest.mark.reliability


def snapshot(m):
    return [np.asarray(a).copy() for a in jax.tree_util.tree_leaves(m)]


def assert_same(m, snap):
    leaves = jax.tree_util.tree_leaves(m)
    assert len(leaves) == len(snap)
    for a, b in zip(leaves, snap):
        assert np.asarray(a).dtype == b.dtype and np.asarray(a).tobytes() == b.tobytes()


def model():
    fluxjax.seed_(3)
    return Chain(Dense(3, 4))  # layers.0.weight (4, 3) float32, layers.0.bias (4,) float32


def npy_header(shape, descr="<f8", fortran=False) -> bytes:
    f = io.BytesIO()
    np.lib.format.write_array_header_1_0(f, {"descr": descr, "fortran_order": fortran, "shape": shape})
    return f.getvalue()


def write_npz(path, members: dict[str, bytes], compression=zipfile.ZIP_STORED):
    with zipfile.ZipFile(path, "w", compression=compression) as z:
        for name, data in members.items():
            z.writestr(name, data)


def good_members():
    src = model()
    out = {}
    for k, a in fluxjax.serialize.flat_state(src).items():
        f = io.BytesIO()
        np.lib.format.write_array(f, a)
        out[k + ".npy"] = f.getvalue()
    return out


def refused(imp, path, match):
    m = model()
    before = snapshot(m)
    with pytest.raises(CheckpointError, match=match) as e:
        imp(m, path)
    assert os.path.basename(str(path)) in str(e.value)
    assert_same(m, before)
    return str(e.value)


def test_npz_claiming_2_pow_40_float64_is_a_checkpoint_error(tmp_path):
    p = tmp_path / "huge.npz"
    members = good_members()
    members["layers.0.weight.npy"] = npy_header((2**40,)) + b"\0" * 64
    write_npz(p, members)
    tracemalloc.start()
    try:
        refused(fluxjax.import_npz_, p, r"huge\.npz.*layers\.0\.weight\.npy.*\(1099511627776,\).*8796093022208 bytes")
        assert tracemalloc.get_traced_memory()[1] < 4 * 2**20
    finally:
        tracemalloc.stop()


def test_npz_zip_bomb_is_checked_against_the_model_before_inflating(tmp_path):
    """A consistent 64 MiB member of zeros, deflated to about 64 KiB, where the model wants 48 bytes: refused
    from its header alone (`np.load` would inflate all of it first)."""
    p = tmp_path / "bomb.npz"
    members = good_members()
    members["layers.0.weight.npy"] = npy_header((2**24,), "<f4") + bytes(2**26)
    write_npz(p, members, zipfile.ZIP_DEFLATED)
    del members
    assert os.path.getsize(p) < 2**20
    m = model()
    before = snapshot(m)
    tracemalloc.start()
    try:
        with pytest.raises(DimensionMismatch, match=r"bomb\.npz.*layers\[0\]\.weight.*\(16777216,\).*\(4, 3\)"):
            fluxjax.import_npz_(m, p)
        assert tracemalloc.get_traced_memory()[1] < 4 * 2**20
    finally:
        tracemalloc.stop()
    assert_same(m, before)


def test_npz_member_that_inflates_past_its_header_is_refused_before_inflating(tmp_path):
    """A zip bomb: the header claims the model's (4, 3) float32, the deflated data is 256 MiB of zeros and
    the zip directory is patched to claim only what the header says. Nothing near 256 MiB is allocated."""
    p = tmp_path / "bomb.npz"
    members = good_members()
    hdr = npy_header((4, 3), "<f4")
    members["layers.0.weight.npy"] = hdr + bytes(256 * 2**20)
    write_npz(p, members, zipfile.ZIP_DEFLATED)
    del members
    data = bytearray(p.read_bytes())
    claimed = len(hdr) + 48
    name = b"layers.0.weight.npy"
    for sig, size_at in ((b"PK\x03\x04", 22), (b"PK\x01\x02", 24)):  # local header, central directory
        i = data.find(sig)
        while data[i + (30 if sig == b"PK\x03\x04" else 46):].find(name) != 0:
            i = data.find(sig, i + 1)
        struct.pack_into("<I", data, i + size_at, claimed)
    p.write_bytes(bytes(data))
    tracemalloc.start()
    try:
        msg = refused(fluxjax.import_npz_, p, r"bomb\.npz.*(inflates to more|Bad CRC)")
        assert tracemalloc.get_traced_memory()[1] < 16 * 2**20
    finally:
        tracemalloc.stop()
    assert "'layers.0.weight.npy'" in msg


def test_npz_member_larger_than_its_header_says(tmp_path):
    p = tmp_path / "long.npz"
    members = good_members()
    members["layers.0.weight.npy"] = npy_header((4, 3), "<f4") + bytes(48 + 4000)
    write_npz(p, members, zipfile.ZIP_DEFLATED)
    refused(fluxjax.import_npz_, p, r"long\.npz.*claims shape \(4, 3\) of float32 \(48 bytes\).*4048 bytes")


@pytest.mark.parametrize("descr, match", [("|O", "object|Python objects"), ("<f4", None)])
def test_npz_object_arrays_and_negative_shapes(tmp_path, descr, match):
    p = tmp_path / "odd.npz"
    members = good_members()
    shape = (4, 3) if descr == "|O" else (-4, -3)
    members["layers.0.weight.npy"] = npy_header(shape, descr) + bytes(96)
    write_npz(p, members)
    refused(fluxjax.import_npz_, p, r"odd\.npz.*" + (match or "negative dimension"))


def test_npz_model_shape_checked_before_reading(tmp_path):
    p = tmp_path / "other.npz"
    members = good_members()
    members["layers.0.weight.npy"] = npy_header((5, 3), "<f4") + bytes(60)
    write_npz(p, members)
    m = model()
    before = snapshot(m)
    with pytest.raises(DimensionMismatch, match=r"other\.npz.*layers\[0\]\.weight.*\(5, 3\).*\(4, 3\)"):
        fluxjax.import_npz_(m, p)
    assert_same(m, before)


def test_npz_single_npy_and_non_npy_members(tmp_path):
    p = tmp_path / "one.npz"
    np.save(tmp_path / "one.npy", np.zeros(3))
    os.replace(tmp_path / "one.npy", p)
    refused(fluxjax.import_npz_, p, r"one\.npz.*single \.npy")
    q = tmp_path / "extra.npz"
    write_npz(q, {**good_members(), "readme.txt": b"hi"})
    refused(fluxjax.import_npz_, q, r"extra\.npz.*'readme\.txt'.*not \.npy")


def test_good_npz_with_fortran_order_and_big_endian_loads(tmp_path):
    src = model()
    p = tmp_path / "good.npz"
    w = np.asarray(src[0].weight)
    with zipfile.ZipFile(p, "w", zipfile.ZIP_DEFLATED) as z:
        with z.open("layers.0.weight.npy", "w") as f:
            np.lib.format.write_array(f, np.asfortranarray(w.astype(">f4")))
        with z.open("layers.0.bias.npy", "w") as f:
            np.lib.format.write_array(f, np.asarray(src[0].bias))
    fluxjax.seed_(9)
    m = Chain(Dense(3, 4))
    fluxjax.import_npz_(m, p)
    assert np.asarray(m[0].weight).tobytes() == w.tobytes()
    assert np.asarray(m[0].bias).tobytes() == np.asarray(src[0].bias).tobytes()


def safetensors_file(path, header: dict, data: bytes):
    text = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(text)) + text + data)


def test_safetensors_shape_product_overflowing_int64(tmp_path):
    """2**32 * 2**32 wraps to 0 in int64: a product computed in int64 would pass a 0-byte span."""
    p = tmp_path / "wrap.safetensors"
    safetensors_file(p, {"layers.0.weight": {"dtype": "F32", "shape": [2**32, 2**32], "data_offsets": [0, 0]},
                         "layers.0.bias": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}, bytes(16))
    refused(fluxjax.import_safetensors_, p, r"wrap\.safetensors.*overflow computing buffer size")


def test_safetensors_size_mismatch_and_huge_claims(tmp_path):
    p = tmp_path / "size.safetensors"
    safetensors_file(p, {"layers.0.weight": {"dtype": "F32", "shape": [4, 3], "data_offsets": [0, 40]},
                         "layers.0.bias": {"dtype": "F32", "shape": [4], "data_offsets": [40, 56]}}, bytes(56))
    refused(fluxjax.import_safetensors_, p, r"size\.safetensors.*invalid shape, data type, or offset")
    q = tmp_path / "huge.safetensors"
    safetensors_file(q, {"layers.0.weight": {"dtype": "F64", "shape": [2**40], "data_offsets": [0, 2**43]},
                         "layers.0.bias": {"dtype": "F32", "shape": [4], "data_offsets": [2**43, 2**43 + 16]}}, bytes(16))
    tracemalloc.start()
    try:
        refused(fluxjax.import_safetensors_, q, r"huge\.safetensors.*not fully covered")
        assert tracemalloc.get_traced_memory()[1] < 4 * 2**20
    finally:
        tracemalloc.stop()
    r = tmp_path / "len.safetensors"
    r.write_bytes(struct.pack("<Q", 2**62) + b"{}")
    refused(fluxjax.import_safetensors_, r, r"len\.safetensors.*header too large")


W = {"dtype": "F32", "shape": [4, 3], "data_offsets": [0, 48]}
B = {"dtype": "F32", "shape": [4], "data_offsets": [48, 64]}


def raw_header(text: bytes, data: bytes = bytes(64)) -> bytes:
    return struct.pack("<Q", len(text)) + text + data


HOSTILE_SAFETENSORS = {
    # what the safetensors package refuses while parsing the header
    "bad_json": (raw_header(b'{"layers.0.weight": '), r"invalid JSON in header"),
    "not_utf8": (raw_header(b'{"layers.0.weight": \xff}'), r"invalid UTF-8"),
    "not_an_object": (raw_header(b"[1, 2]"), r"invalid JSON in header"),
    "too_short": (b"\x01\x00", r"header too small"),
    "length_past_the_file": (struct.pack("<Q", 1000) + b"{}", r"invalid header length"),
    "unknown_dtype": (raw_header(json.dumps({"layers.0.weight": {**W, "dtype": "F33"}, "layers.0.bias": B}).encode()),
                      r"unknown variant `F33`"),
    "negative_dim": (raw_header(json.dumps({"layers.0.weight": {**W, "shape": [-4, -3]}, "layers.0.bias": B}).encode()),
                     r"invalid value: integer `-4`"),
    "truncated_data": (raw_header(json.dumps({"layers.0.weight": W, "layers.0.bias": B}).encode(), bytes(60)),
                       r"not fully covered"),
    "trailing_bytes": (raw_header(json.dumps({"layers.0.weight": W, "layers.0.bias": B}).encode(), bytes(72)),
                       r"not fully covered"),
    "overlap": (raw_header(json.dumps({"layers.0.weight": W, "layers.0.bias": {**B, "data_offsets": [32, 48]}}).encode(),
                           bytes(48)), r"invalid offset for tensor"),
    "metadata_not_str": (raw_header(json.dumps({"__metadata__": {"a": 1}, "layers.0.weight": W, "layers.0.bias": B}).encode()),
                         r"expected a string"),
    # what fluxjax refuses after the package accepted the header
    "key_twice": (raw_header(f'{{"layers.0.weight": {json.dumps(W)}, "layers.0.bias": {json.dumps(B)}, '
                             f'"layers.0.bias": {json.dumps(B)}}}'.encode()), r"'layers.0.bias' appears twice"),
    "extra_field": (raw_header(json.dumps({"layers.0.weight": {**W, "order": "F"}, "layers.0.bias": B}).encode()),
                    r"'layers.0.weight' must have exactly dtype, shape, data_offsets"),
    "complex_dtype": (raw_header(json.dumps({"layers.0.weight": {**W, "shape": [2, 3], "dtype": "C64"},
                                             "layers.0.bias": B}).encode()), r"dtype 'C64', which fluxjax does not read"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE_SAFETENSORS))
def test_hostile_safetensors_headers(tmp_path, case):
    data, match = HOSTILE_SAFETENSORS[case]
    p = tmp_path / f"{case}.safetensors"
    p.write_bytes(data)
    refused(fluxjax.import_safetensors_, p, rf"{case}\.safetensors.*is not a valid safetensors file: .*{match}")
    with pytest.raises(CheckpointError, match=match):
        fluxjax.serialize.read_safetensors(p)


def test_safetensors_flipped_data_byte_fails_the_checksum(tmp_path):
    p = tmp_path / "flip.safetensors"
    fluxjax.export_safetensors(p, Chain(Dense(3, 4)))
    raw = bytearray(p.read_bytes())
    raw[-1] ^= 1  # the package cannot see this: the header is intact
    p.write_bytes(bytes(raw))
    refused(fluxjax.import_safetensors_, p, r"flip\.safetensors.*checksum mismatch")


def test_safetensors_file_truncated_after_its_header_was_checked(tmp_path, monkeypatch):
    """The file shrinks between the header check and the tensor reads: an error, not a crash or garbage."""
    import safetensors

    p = tmp_path / "shrunk.safetensors"
    fluxjax.export_safetensors(p, Chain(Dense(3, 4)))
    real = safetensors.safe_open

    def shrinking(path, *a, **k):
        handle = real(path, *a, **k)
        os.truncate(path, os.path.getsize(path) - 8)
        return handle

    monkeypatch.setattr(safetensors, "safe_open", shrinking)
    refused(fluxjax.import_safetensors_, p, r"shrunk\.safetensors.*Could not read tensor .* failed to fill whole buffer")


def test_safetensors_file_replaced_while_opening(tmp_path, monkeypatch):
    """Another file is renamed over the path between fluxjax's open and the package's: the two headers differ."""
    import safetensors

    p, q = tmp_path / "swapped.safetensors", tmp_path / "other.safetensors"
    fluxjax.export_safetensors(p, Chain(Dense(3, 4)))
    fluxjax.export_safetensors(q, Chain(Dense(3, 5)))
    real = safetensors.safe_open

    def swapping(path, *a, **k):
        os.replace(q, path)
        return real(path, *a, **k)

    monkeypatch.setattr(safetensors, "safe_open", swapping)
    refused(fluxjax.import_safetensors_, p, r"swapped\.safetensors.*the file changed while reading")


def test_safetensors_model_shape_checked_before_reading(tmp_path):
    p = tmp_path / "other.safetensors"
    fluxjax.export_safetensors(p, Chain(Dense(3, 5)))
    m = model()
    before = snapshot(m)
    with pytest.raises(DimensionMismatch, match=r"other\.safetensors.*layers\[0\]\.weight.*\(5, 3\).*\(4, 3\)"):
        fluxjax.import_safetensors_(m, p)
    assert_same(m, before)


# ------------------------------------------------------------------------------------------------
# fluxjax checkpoints: only what the model needs is read


@pytest.fixture
def restored(monkeypatch):
    """The names of the arrays each `load` asks orbax to read."""
    import orbax.checkpoint as ocp

    asked = []
    real = ocp.args.PyTreeRestore

    def recording(*a, **k):
        asked.append(sorted(k["restore_args"]))
        return real(*a, **k)

    monkeypatch.setattr(ocp.args, "PyTreeRestore", recording)
    return asked


def test_checkpoint_arrays_the_model_has_no_place_for_are_never_read(tmp_path, restored):
    big = Chain(Dense(3, 4), Dense(4, 1024), Dense(1024, 1024))
    fluxjax.save(tmp_path / "ck", big)
    m = model()
    before = snapshot(m)
    with pytest.raises(fluxjax.StructureMismatch, match=r"ck.*length 3.*length 1"):
        fluxjax.load(tmp_path / "ck", m)
    assert_same(m, before)
    assert restored == [["model.layers.0.bias", "model.layers.0.weight"]]  # layers[0]'s weight and bias only


def test_checkpoint_bias_false_destination_skips_the_file_bias(tmp_path, restored):
    src = model()
    fluxjax.save(tmp_path / "ck", src)
    fluxjax.seed_(8)
    dst = Chain(Dense(3, 4, bias=False))
    fluxjax.load(tmp_path / "ck", dst)
    assert dst[0].bias is False and np.asarray(dst[0].weight).tobytes() == np.asarray(src[0].weight).tobytes()
    assert restored == [["model.layers.0.weight"]]
    raw = fluxjax.load(tmp_path / "ck").model  # no model: everything is read
    assert restored[-1] == ["model.layers.0.bias", "model.layers.0.weight"]
    assert np.array_equal(raw["layers"][0]["bias"], src[0].bias)


def test_checkpoint_table_naming_arrays_nothing_refers_to(tmp_path):
    import hashlib

    fluxjax.save(tmp_path / "ck", model())
    meta_file = tmp_path / "ck" / "0" / "meta" / "metadata"
    body = json.loads(json.loads(meta_file.read_text())["fluxjax"])
    body["arrays"]["a9"] = {"dtype": "float64", "shape": [2**40], "checksum": "0" * 24}
    text = json.dumps(body)
    meta_file.write_text(json.dumps({"fluxjax": text, "sha256": hashlib.sha256(text.encode()).hexdigest()}))
    refused(lambda m, p: fluxjax.load(p, m), tmp_path / "ck", r"ck.*(do not match the metadata|disagree).*a9")
