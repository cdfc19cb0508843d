"""Checkpoints on orbax (issue #24): readable keys a plain orbax reader sees, the device checksum, async
save, one writer per directory, pruning by rename, restore into shardings (4 CPU devices, subprocess)
and multi-process sharded save/restore (two jax.distributed processes on loopback)."""

from __future__ import annotations

import os
import signal

import jax.numpy as jnp
import ml_dtypes
import numpy as np
import orbax.checkpoint as ocp
import pytest
from ckpt_client import first_report, free_port, report, start

import fluxjax
from fluxjax import Adam, Chain, Dense
from fluxjax._ckpt_checksum import checksum as _checksum


def _model(seed=0):
    fluxjax.seed_(seed)
    return Chain(Dense(3, 4), Dense(4, 2))


def test_plain_orbax_reader_sees_the_model_names(tmp_path):
    m = _model()
    opt = fluxjax.setup(Adam(), m)
    fluxjax.save(tmp_path / "ck", m, opt)
    raw = ocp.StandardCheckpointer().restore(tmp_path / "ck" / "0" / "arrays")
    assert {"model.layers.0.weight", "model.layers.0.bias", "model.layers.1.weight", "model.layers.1.bias"} <= set(raw)
    assert np.asarray(raw["model.layers.0.weight"]).tobytes() == np.asarray(m[0].weight).tobytes()
    assert np.asarray(raw["model.layers.1.bias"]).tobytes() == np.asarray(m[1].bias).tobytes()
    moments = sorted(k for k in raw if k.startswith("opt_state.layers.0.weight"))
    assert moments and all(np.asarray(raw[k]).shape in ((4, 3), ()) or np.asarray(raw[k]).ndim == 1 for k in moments)


def test_a_relative_path_saves_and_loads(tmp_path, monkeypatch):
    """The README's `Flux.load("ckpt", model, opt_state)`: a relative path was handed to orbax, which reads
    absolute ones only, and every load raised "cannot read checkpoint" as if the files were damaged."""
    monkeypatch.chdir(tmp_path)
    m = _model()
    opt = fluxjax.setup(Adam(0.01), m)
    assert fluxjax.save("ckpt", m, opt) == 0
    m2, opt2 = _model(seed=1), fluxjax.setup(Adam(0.01), _model(seed=1))
    m2, opt2, step = fluxjax.load("ckpt", m2, opt2)
    assert step == 0 and np.asarray(m2[0].weight).tobytes() == np.asarray(m[0].weight).tobytes()
    raw, _, _ = fluxjax.load(os.path.join(".", "ckpt"))
    assert np.asarray(raw["layers"][1]["bias"]).tobytes() == np.asarray(m[1].bias).tobytes()


def test_tied_array_saved_once_under_its_first_name(tmp_path):
    m = _model()
    shared = Chain(m[0], m[0])
    fluxjax.save(tmp_path / "ck", shared)
    raw = ocp.StandardCheckpointer().restore(tmp_path / "ck" / "0" / "arrays")
    assert sorted(raw) == ["model.layers.0.bias", "model.layers.0.weight"]
    loaded = fluxjax.load(tmp_path / "ck").model
    assert loaded["layers"][0]["weight"] is loaded["layers"][1]["weight"]


@pytest.mark.parametrize("dtype", [np.float32, np.float16, ml_dtypes.bfloat16, np.int8, np.uint16, np.bool_,
                                   np.complex64, np.int32])
def test_device_checksum_equals_host_checksum_and_sees_one_flipped_bit(dtype):
    rng = np.random.default_rng(0)
    a = (rng.standard_normal((5, 3)) * 50).astype(dtype) if dtype is not np.bool_ else rng.random((5, 3)) > 0.5
    if dtype is np.complex64:
        a = (a + 1j * rng.standard_normal((5, 3))).astype(dtype)
    assert _checksum(jnp.asarray(a)) == _checksum(a)
    b = a.copy()
    b.reshape(-1).view(np.uint8)[7] ^= 1
    assert _checksum(b) != _checksum(a) and _checksum(jnp.asarray(b)) == _checksum(b)
    c = a.copy().reshape(-1)
    c[[0, 1]] = c[[1, 0]]  # two words swapped: sums alone would not see it
    if not np.array_equal(c, a.reshape(-1)):
        assert _checksum(c.reshape(a.shape)) != _checksum(a)


def test_async_save_then_wait_and_load_waits_too(tmp_path):
    m = _model(1)
    assert fluxjax.save(tmp_path / "ck", m, async_=True) == 0
    fluxjax.wait_until_finished()
    m[0].bias = jnp.ones(4, jnp.float32)
    assert fluxjax.save(tmp_path / "ck", m, async_=True, keep=1) == 1
    dst = _model(2)
    assert fluxjax.load(tmp_path / "ck", dst).step == 1  # load waits for the pending save of its path
    assert np.asarray(dst[0].bias).tolist() == [1.0] * 4
    assert np.asarray(dst[0].weight).tobytes() == np.asarray(m[0].weight).tobytes()
    assert sorted(n for n in os.listdir(tmp_path / "ck") if not n.startswith(".")) == ["1"]


def test_arrays_swapped_for_valid_orbax_data_with_other_numbers_raise(tmp_path):
    # orbax checksums its indices, not the array data: an arrays item that orbax reads fine but that holds
    # other numbers (one float changed) is caught by fluxjax's checksum, and nothing is loaded
    import shutil

    fluxjax.seed_(3)
    m = Chain(Dense(40, 50))
    fluxjax.save(tmp_path / "ck", m)
    arrays = tmp_path / "ck" / "0" / "arrays"
    tree = {k: np.array(v) for k, v in ocp.StandardCheckpointer().restore(arrays).items()}
    tree["model.layers.0.weight"][17, 3] += 1e-3
    with ocp.PyTreeCheckpointer() as c:
        c.save(tmp_path / "other", tree)
    shutil.rmtree(arrays)
    shutil.copytree(tmp_path / "other", arrays)
    dst = Chain(Dense(40, 50))
    before = np.asarray(dst[0].weight).tobytes()
    with pytest.raises(fluxjax.CheckpointError, match=r"ck/0.*model\.layers\.0\.weight is corrupted"):
        fluxjax.load(tmp_path / "ck", dst)
    assert np.asarray(dst[0].weight).tobytes() == before


def test_second_writer_gets_checkpoint_busy_and_killed_prune_leaves_no_numbered_step(tmp_path):
    path = tmp_path / "ck"
    p = start("prune", path)
    try:
        assert p.stdout.readline().strip() == "pruning"  # step 1 is saved; step 0 is being pruned, lock held
        m = _model(5)
        with pytest.raises(fluxjax.CheckpointBusy, match="another process is saving to"):
            fluxjax.save(path, m)
        assert sorted(n for n in os.listdir(path) if not n.startswith(".")) == ["0.fluxjax-pruned", "1"]
        p.send_signal(signal.SIGKILL)
        p.wait()
    finally:
        p.kill()
        p.communicate()
    assert fluxjax.load(path).step == 1
    with pytest.raises(fluxjax.CheckpointError, match="has no step 0"):
        fluxjax.load(path, step=0)
    assert fluxjax.save(path, m) == 2  # the kernel dropped the dead writer's lock; the leftover is cleared
    assert sorted(n for n in os.listdir(path) if not n.startswith(".")) == ["1", "2"]


def test_load_restores_into_the_target_sharding(tmp_path):
    r = report(start("sharded", tmp_path / "ck"), timeout=120)
    assert r == {"devices": 4, "spec": "(None, 'x')", "same_sharding": True, "shards": 4, "shard_shape": [8, 2],
                 "equal": True, "bias_equal": True}


@pytest.mark.slow  # (two processes: in the full run; the sharded restore of one process runs by default)
def test_two_process_sharded_save_kill_restore(tmp_path):
    """Two jax.distributed processes on loopback, a weight sharded across both: each saves its shard and is
    killed (SIGKILL) once both `save`s returned; two fresh processes restore the same numbers."""
    path = tmp_path / "ck"
    port = free_port()
    procs = [start("mp", pid, port, path, "save") for pid in (0, 1)]
    try:
        runs = {"save": [first_report(p) for p in procs]}
    finally:
        for p in procs:  # no orderly shutdown: what save reported must already be on disk
            p.send_signal(signal.SIGKILL)
            p.communicate()
    port = free_port()
    procs = [start("mp", pid, port, path, "load") for pid in (0, 1)]
    runs["load"] = [report(p, timeout=240) for p in procs]
    for r in runs["save"] + runs["load"]:
        assert r["processes"] == 2 and not r["fully_addressable"] and r["same_sharding"]
        assert np.array_equal(np.float32(r["local"]), np.float32(r["expected"]))
    assert runs["load"][0]["local"] != runs["load"][1]["local"]  # each process holds its own half
    assert {"ocdbt.process_0", "ocdbt.process_1"} <= set(runs["load"][0]["files"])  # each wrote its own shards
