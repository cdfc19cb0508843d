"""`.safetensors` files through the `safetensors` package: fluxjax's files read by plain
`safetensors.numpy`, plain files imported by fluxjax, float8 (which the package's numpy reader cannot
make), and exports of sharded models (4 CPU devices in a subprocess; two `jax.distributed` processes)."""

import json
import os

import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
import safetensors.numpy
from ckpt_client import free_port, report, start

import fluxjax
from fluxjax import BatchNorm, Chain, CheckpointError, Conv, Dense, DimensionMismatch, flatten
from fluxjax.serialize import flat_state, read_safetensors


def build(seed):
    fluxjax.seed_(seed)
    return Chain(Conv((2, 2), (1, 2)), BatchNorm(2), flatten, Dense(8, 3))


def bits(model):
    return {k: (a.dtype, a.tobytes()) for k, a in flat_state(model).items()}


def test_fluxjax_file_read_by_plain_safetensors(tmp_path):
    m = build(1)
    p = tmp_path / "m.safetensors"
    fluxjax.export_safetensors(p, m, {"note": "hi"})
    plain = safetensors.numpy.load_file(p)
    flat = flat_state(m)
    assert sorted(plain) == sorted(flat) == ["layers.0.bias", "layers.0.weight", "layers.1.beta", "layers.1.gamma",
                                             "layers.1.mu", "layers.1.sigma2", "layers.3.bias", "layers.3.weight"]
    assert plain["layers.0.weight"].shape == (2, 2, 1, 2) and plain["layers.3.weight"].shape == (3, 8)
    for k, a in flat.items():
        assert plain[k].dtype == a.dtype and plain[k].tobytes() == a.tobytes(), k
    with safetensors.safe_open(p, framework="numpy") as f:
        meta = f.metadata()
    assert meta["note"] == "hi" and meta["producer"] == "fluxjax"
    assert sorted(json.loads(meta["fluxjax.sha256"])) == sorted(flat)


def test_plain_safetensors_file_imports(tmp_path):
    src = build(1)
    p = tmp_path / "plain.safetensors"
    flat = flat_state(src)
    safetensors.numpy.save_file(flat, p)
    m = build(2)
    assert bits(m) != bits(src)
    fluxjax.import_safetensors_(m, p)
    assert bits(m) == bits(src)
    # bfloat16 from a plain writer (ml_dtypes arrays), into a bfloat16 model
    bf = Chain(Dense(2, 2))
    bf[0].weight = bf[0].weight.astype(jnp.bfloat16)
    w = np.array([[1.5, -2.0], [0.25, 3.0]], ml_dtypes.bfloat16)
    safetensors.numpy.save_file({"layers.0.weight": w, "layers.0.bias": np.array([7, 8], np.float32)}, tmp_path / "bf.safetensors")
    fluxjax.import_safetensors_(bf, tmp_path / "bf.safetensors")
    assert bf[0].weight.dtype == jnp.bfloat16 and np.asarray(bf[0].weight).tobytes() == w.tobytes()
    assert bf[0].bias.tolist() == [7, 8]


def test_plain_file_of_the_wrong_shape_leaves_the_model(tmp_path, untouched):
    p = tmp_path / "wrong.safetensors"
    flat = flat_state(build(1))
    flat["layers.3.weight"] = np.zeros((3, 9), np.float32)
    safetensors.numpy.save_file(flat, p)
    m = build(2)
    check = untouched(m)
    with pytest.raises(DimensionMismatch, match=r"wrong\.safetensors.*layers\[3\]\.weight.*\(3, 9\).*\(3, 8\)"):
        fluxjax.import_safetensors_(m, p)
    check()


@pytest.mark.parametrize("dtype", [ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2])
def test_float8_round_trip(tmp_path, dtype):
    m = Chain(Dense(3, 2))
    m[0].weight = jnp.asarray(np.array([[0.5, -1.0, 2.0], [4.0, 0.125, -8.0]]), dtype)
    p = tmp_path / "f8.safetensors"
    fluxjax.export_safetensors(p, m)
    d = read_safetensors(p)
    assert d["layers.0.weight"].dtype == dtype and d["layers.0.weight"].astype(np.float32).tolist() == [
        [0.5, -1.0, 2.0], [4.0, 0.125, -8.0]]
    fresh = Chain(Dense(3, 2))
    fresh[0].weight = fresh[0].weight.astype(dtype)
    fluxjax.import_safetensors_(fresh, p)
    assert bits(fresh) == bits(m)
    raw = bytearray(p.read_bytes())  # the float8 bytes fluxjax reads itself are covered by the checksum too
    at = raw.index(np.asarray(m[0].weight).tobytes())
    raw[at] ^= 1
    p.write_bytes(bytes(raw))
    with pytest.raises(CheckpointError, match=r"f8\.safetensors.*checksum mismatch"):
        fluxjax.import_safetensors_(fresh, p)
    assert bits(fresh) == bits(m)


def test_metadata_must_be_strings(tmp_path):
    with pytest.raises(TypeError, match="metadata must map str to str"):
        fluxjax.export_safetensors(tmp_path / "m.safetensors", build(1), {"epoch": 3})
    assert not os.listdir(tmp_path)


# ------------------------------------------------------------------------------------------------
# sharded models


def _expected(r):
    return {k: np.float32(v) for k, v in r["expected"].items()}


def test_export_of_a_model_sharded_over_4_devices(tmp_path):
    r = report(start("export", tmp_path))
    assert r["devices"] == 4 and r["fully_addressable"] and r["shards"] == 4
    want = _expected(r)
    for name in ("m.safetensors", "m.npz"):
        got = safetensors.numpy.load_file(tmp_path / name) if name.endswith("safetensors") else dict(np.load(tmp_path / name))
        assert sorted(got) == sorted(want)
        for k in want:
            assert got[k].tobytes() == want[k].tobytes(), (name, k)


@pytest.mark.slow  # two jax.distributed processes: ~10 s on 2 shared cores
def test_two_process_export_gathers_and_process_0_writes(tmp_path):
    port = free_port()
    procs = [start("mpexport", pid, port, tmp_path) for pid in (0, 1)]
    r0, r1 = (report(p) for p in procs)
    for r in (r0, r1):
        assert r["processes"] == 2 and not r["fully_addressable"]
        assert r["exists_on_return"] == [True, True]  # every process returns once process 0 has written
    assert r0["replaced"] == 2 and r1["replaced"] == 0  # one atomic rename per file, all on process 0
    # a write that fails on process 0 raises there, and raises on process 1 too instead of hanging
    assert r0["failed"].startswith("FileNotFoundError") and r1["failed"].startswith("RuntimeError: export_safetensors")
    assert r0["expected"] == r1["expected"]
    want = _expected(r0)
    got = safetensors.numpy.load_file(tmp_path / "m.safetensors")
    npz = dict(np.load(tmp_path / "m.npz"))
    for k in want:
        assert got[k].tobytes() == want[k].tobytes() == npz[k].tobytes(), k
    m = Chain(Dense(8, 8), Dense(8, 2))
    fluxjax.import_safetensors_(m, tmp_path / "m.safetensors")
    assert np.asarray(m[0].weight).tobytes() == want["layers.0.weight"].tobytes()
