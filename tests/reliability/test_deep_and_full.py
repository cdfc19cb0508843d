"""Checkpoints at the edges: a 200-deep model saves and loads (no RecursionError); a full disk during a save
is an `OSError` with `errno.ENOSPC`, never a `ValueError`, and never leaves a listed step that cannot be
read; version-1 checkpoints (nested JSON structure) still load."""

import errno
import hashlib
import json
import os
import shutil
import subprocess

import jax
import numpy as np
import orbax.checkpoint as ocp
import pytest
from etils import epath

import fluxjax
from fluxjax import Adam, BatchNorm, Chain, Dense

pytestmark = [pytest.mark.reliability, pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")]

DEPTH = 200


def deep(seed, depth=DEPTH):
    fluxjax.seed_(seed)
    m = Chain(Dense(2, 3), BatchNorm(3))
    for _ in range(depth):
        m = Chain(m)
    return m


def innermost(m):
    while isinstance(m[0], Chain):
        m = m[0]
    return m


def host(tree):
    out = []
    for a in jax.tree_util.tree_leaves(tree):
        if isinstance(a, jax.Array) and jax.numpy.issubdtype(a.dtype, jax.dtypes.prng_key):
            a = jax.random.key_data(a)
        out.append(np.asarray(a).copy())
    return out


def assert_bit_equal(a, b):
    la, lb = host(a), host(b)
    assert len(la) == len(lb) > 0
    for x, y in zip(la, lb):
        assert x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes()


@pytest.fixture(scope="module")
def deep_pair():
    """A 200-deep model with a non-trivial Adam state, and a model of the same structure holding other values
    (built with tree_map: building 200 nested Chains is slow)."""
    src = deep(1)
    opt = jax.tree_util.tree_map(lambda a: a + 0.5, fluxjax.setup(Adam(0.01), src))
    other = jax.tree_util.tree_map(lambda a: a * 0 + 7, src)
    return src, opt, other


def test_200_deep_model_checkpoint_round_trip(tmp_path, deep_pair):
    src, src_opt, other = deep_pair
    assert fluxjax.save(tmp_path / "ck", src, src_opt) == 0
    dst = jax.tree_util.tree_map(lambda a: a, other)
    dst_opt = fluxjax.setup(Adam(0.01), dst)
    assert not np.array_equal(innermost(dst)[0].weight, innermost(src)[0].weight)
    fluxjax.load(tmp_path / "ck", dst, dst_opt)
    assert_bit_equal(dst, src)
    assert_bit_equal(dst_opt, src_opt)
    raw = fluxjax.load(tmp_path / "ck").model
    for _ in range(DEPTH):
        raw = raw["layers"][0]
    assert np.array_equal(raw["layers"][0]["weight"], innermost(src)[0].weight)


def test_200_deep_model_npz_and_safetensors(tmp_path, deep_pair):
    src, _, other = deep_pair
    for export, imp, name in ((fluxjax.export_npz, fluxjax.import_npz_, "m.npz"),
                              (fluxjax.export_safetensors, fluxjax.import_safetensors_, "m.safetensors")):
        export(tmp_path / name, src)
        dst = jax.tree_util.tree_map(lambda a: a, other)
        imp(dst, tmp_path / name)
        assert_bit_equal(dst, src)


def to_v1(nodes, i):
    """The version-1 (nested) form of node `i` of a version-2 node table."""
    n = nodes[i]
    if "array" in n:
        return n
    (tag, body), = n.items()
    if tag == "dict":
        return {"dict": [[to_v1(nodes, k), to_v1(nodes, v)] for k, v in body]}
    if tag in ("tuple", "list"):
        return {tag: [to_v1(nodes, c) for c in body]}
    return n


def test_version_1_checkpoints_still_load(tmp_path):
    fluxjax.seed_(5)
    src = Chain(Dense(3, 4), BatchNorm(4), Dense(4, 2))
    opt = fluxjax.setup(Adam(), src)
    fluxjax.save(tmp_path / "ck", src, opt)
    meta_file = tmp_path / "ck" / "0" / "meta" / "metadata"
    body = json.loads(json.loads(meta_file.read_text())["fluxjax"])
    assert body["version"] == 3 and isinstance(body["model"], int)
    nodes = body.pop("nodes")
    body.update(version=1, model=to_v1(nodes, body["model"]), opt_state=to_v1(nodes, body["opt_state"]))
    text = json.dumps(body)
    meta_file.write_text(json.dumps({"fluxjax": text, "sha256": hashlib.sha256(text.encode()).hexdigest()}))
    fluxjax.seed_(6)
    dst = Chain(Dense(3, 4), BatchNorm(4), Dense(4, 2))
    dst_opt = fluxjax.setup(Adam(), dst)
    fluxjax.load(tmp_path / "ck", dst, dst_opt)
    assert_bit_equal(dst, src)
    assert_bit_equal(dst_opt, opt)


# ------------------------------------------------------------------------------------------------
# a full disk


def small(seed):
    fluxjax.seed_(seed)
    return Chain(Dense(3, 4), BatchNorm(4))


def listing(path):
    return sorted(n for n in os.listdir(path) if n != ".fluxjax-save.lock")


def check_after_failed_save(ck, first):
    """Only step 0 is listed, nothing half-written is left, step 0 loads bit-equal, and the next save
    (with space again) is step 1."""
    assert listing(ck) == ["0"]
    m = small(9)
    assert fluxjax.load(ck, m).step == 0
    assert_bit_equal(m, first)
    assert fluxjax.save(ck, small(3)) == 1
    assert fluxjax.load(ck).step == 1


def test_disk_full_writing_the_metadata_is_enospc(tmp_path, monkeypatch):
    ck = tmp_path / "ck"
    first = small(1)
    fluxjax.save(ck, first)
    real = epath.Path.write_text

    def full(self, *a, **k):
        if self.name == "metadata" and self.parent.name.startswith("meta"):
            raise OSError(errno.ENOSPC, "No space left on device", str(self))
        return real(self, *a, **k)

    monkeypatch.setattr(epath.Path, "write_text", full)
    with pytest.raises(OSError) as e:
        fluxjax.save(ck, small(2))
    assert e.value.errno == errno.ENOSPC and not isinstance(e.value, ValueError)
    assert "no space left on device while writing step 1" in str(e.value) and str(ck) in str(e.value)
    monkeypatch.undo()
    check_after_failed_save(ck, first)


# tensorstore's error for a full disk, as a real 256 KiB tmpfs gave it
TENSORSTORE_ENOSPC = ('RESOURCE_EXHAUSTED: Error writing "a1/0.0" in OCDBT database at local file "{d}/": Failed writing: '
                      '"{d}/d/06ab": Failed to write 137997 bytes to file 7: No space left on device [os_error_code=\'28\']')


def test_disk_full_writing_the_arrays_is_enospc(tmp_path, monkeypatch):
    ck = tmp_path / "ck"
    first = small(1)
    fluxjax.save(ck, first)
    real = ocp.PyTreeCheckpointHandler.async_save

    async def full(self, directory, *a, **k):
        (epath.Path(directory) / "partial").write_bytes(b"\0" * 1000)  # what was written before the disk filled
        raise ValueError(TENSORSTORE_ENOSPC.format(d=directory))

    monkeypatch.setattr(ocp.PyTreeCheckpointHandler, "async_save", full)
    with pytest.raises(OSError) as e:
        fluxjax.save(ck, small(2))
    assert e.value.errno == errno.ENOSPC and not isinstance(e.value, ValueError)
    assert isinstance(e.value.__cause__, ValueError) and "RESOURCE_EXHAUSTED" in str(e.value.__cause__)
    monkeypatch.setattr(ocp.PyTreeCheckpointHandler, "async_save", real)
    check_after_failed_save(ck, first)


def test_other_save_errors_are_not_made_oserrors(tmp_path, monkeypatch):
    ck = tmp_path / "ck"
    fluxjax.save(ck, small(1))

    async def broken(self, directory, *a, **k):
        raise ValueError("INVALID_ARGUMENT: something else")

    monkeypatch.setattr(ocp.PyTreeCheckpointHandler, "async_save", broken)
    with pytest.raises(ValueError, match="INVALID_ARGUMENT"):
        fluxjax.save(ck, small(2))
    assert listing(ck) == ["0"]


@pytest.mark.parametrize("export", [fluxjax.export_npz, fluxjax.export_safetensors])
def test_disk_full_exporting_keeps_the_old_file(tmp_path, monkeypatch, export):
    p = tmp_path / "m.file"
    export(p, small(1))
    before = p.read_bytes()

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(OSError) as e:
        export(p, small(2))
    assert e.value.errno == errno.ENOSPC
    monkeypatch.undo()
    assert p.read_bytes() == before and listing(tmp_path) == ["m.file"]


@pytest.fixture
def tiny_disk(tmp_path):
    """A 256 KiB tmpfs, where this process may mount one (root in a container that allows it)."""
    d = tmp_path / "tiny"
    d.mkdir()
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a tmpfs needs root")
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(d)], capture_output=True, timeout=30)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.decode(errors='replace').strip()}")
    try:
        yield d
    finally:
        subprocess.run(["umount", str(d)], capture_output=True, timeout=30)


def test_real_full_disk(tiny_disk):
    ck = tiny_disk / "ck"
    first = small(1)
    fluxjax.save(ck, first)
    rng = np.random.default_rng(0)
    big = Chain(Dense(rng.random((300, 300), np.float32), rng.random(300, np.float32)))  # ~360 KB, incompressible
    with pytest.raises(OSError) as e:
        fluxjax.save(ck, big)
    assert e.value.errno == errno.ENOSPC
    assert listing(ck) == ["0"]
    m = small(9)
    fluxjax.load(ck, m)
    assert_bit_equal(m, first)
    with pytest.raises(OSError) as e:
        fluxjax.export_safetensors(tiny_disk / "big.safetensors", big)
    assert e.value.errno == errno.ENOSPC and listing(tiny_disk) == ["ck"]
