"""fluxjax.parallel: data and model parallelism over a mesh, and multi-process training.

This pytest process has already started JAX with one CPU device, so the 8-device checks run in one
subprocess (tests/parallel_worker.py, `XLA_FLAGS=--xla_force_host_platform_device_count=8`) that
compares each 8-device run to the same run on one device and reports numbers as JSON; the tests here
assert on them. The multi-process check starts two processes that form one jax.distributed job on
loopback (2 CPU devices each, gloo collectives) and compares their parameters to one device here.
All three subprocesses run at the same time.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import jax
import numpy as np
import pytest
from ckpt_client import free_port

import fluxjax as Flux
from fluxjax import parallel
from fluxjax.parallel import P

WORKER = Path(__file__).with_name("parallel_worker.py")
TOL = 1e-5  # float32 rounding of reductions split over devices


def _start(*args: str) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "JAX_PLATFORMS")}
    env["JAX_PLATFORMS"] = "cpu"
    return subprocess.Popen([sys.executable, str(WORKER), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env, cwd=str(WORKER.parent.parent))


def _collect(p: subprocess.Popen, what: str, timeout: float = 240) -> dict:
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
        pytest.fail(f"{what} timed out; stderr:\n{err[-3000:]}")
    lines = [ln for ln in out.splitlines() if ln.startswith("{")]
    assert p.returncode == 0 and lines, f"{what} failed (rc {p.returncode}); stderr:\n{err[-5000:]}"
    return json.loads(lines[-1])


@pytest.fixture(scope="module")
def runs():
    t0 = time.time()
    port = str(free_port())
    procs = {"single": _start("single"), "mp0": _start("mp", "0", port), "mp1": _start("mp", "1", port)}
    reports = {k: _collect(p, f"parallel_worker {k}") for k, p in procs.items()}
    reports["seconds"] = time.time() - t0
    return reports


@pytest.fixture(scope="module")
def report(runs):
    r = runs["single"]
    assert r["devices"] == 8 and r["mesh"] == {"data": 8}
    return r


def _ok(section: dict) -> dict:
    assert "error" not in section, section["error"]
    return section


REP8 = "()@{'data': 8}"
BATCH8 = "(None, 'data')@{'data': 8}"


def test_mlp_data_parallel_matches_one_device(report):
    r = _ok(report["mlp"])
    c1, c8 = np.array(r["jit_curve_1"]), np.array(r["jit_curve_8"])
    assert c1.shape == (8,)  # 2 epochs of 4 batches
    np.testing.assert_allclose(c8, c1, rtol=TOL, atol=TOL)
    assert c1[-1] < 0.5 * c1[0]  # it trained
    assert r["jit_param_diff"] < TOL
    assert r["batch_specs"] == [BATCH8, BATCH8]
    # fluxjax.jit's write-back keeps every array replicated on the mesh
    assert r["jit_model_specs"] == [REP8] * 4
    assert r["jit_opt_specs"] == [REP8]
    assert r["jit_shared_bt"] == 1  # shard_ placed the leaves' shared βt once
    # train_(..., mesh=mesh) from an unplaced model, on jax.make_mesh's default (Explicit) mesh
    assert r["explicit_axis_types"] == "(Explicit,)"
    assert r["train_param_diff"] < TOL and r["train_opt_diff"] < TOL
    assert r["train_model_specs"] == [REP8] * 4 and r["train_opt_specs"] == [REP8]
    assert r["implicit_param_diff"] < TOL and r["implicit_specs"] == [REP8] * 4


def test_batchnorm_uses_global_batch_statistics(report):
    r = _ok(report["cnn"])
    assert r["bn_out_diff"] < TOL and r["bn_stats_diff"] < TOL
    assert r["bn_mu"] == pytest.approx(r["bn_mu_expected"], abs=1e-6)
    # per-device statistics would be far off: the data's mean differs between devices' slices
    assert abs(r["bn_local_mu"] - r["bn_mu_expected"]) > 0.1
    assert r["bn_out_spec"] == ["(None, None, None, 'data')@{'data': 8}"]


def test_batchnorm_cnn_data_parallel_matches_one_device(report):
    r = _ok(report["cnn"])
    c1, c8 = np.array(r["cnn_curve_1"]), np.array(r["cnn_curve_8"])
    assert c1.shape == (4,)  # 2 epochs of 2 shuffled batches
    np.testing.assert_allclose(c8, c1, rtol=TOL, atol=TOL)
    assert r["cnn_param_diff"] < TOL and r["cnn_opt_diff"] < TOL
    assert r["cnn_stats_diff"] < TOL and r["cnn_stats_moved"] > 1e-3  # running stats moved, identically
    assert r["cnn_model_specs"] == [REP8]
    assert r["cnn_train_diff"] < TOL and r["cnn_train_specs"] == [REP8]


def test_model_parallel_dense(report):
    r = _ok(report["model_parallel"])
    assert r["mesh"] == {"data": 4, "model": 2}
    assert r["w_spec"] == "('model', None)" and r["w_global_shape"] == [16, 6] and r["w_shard_shapes"] == [[8, 6]]
    # Adam's state: mt, vt follow the weight; beta_t (one (2,) array) and the 4 scalar hyperparameters are replicated
    assert r["moment_specs"] == ["('model', None)", "('model', None)"] + ["()"] * 5
    assert r["forward_jit_diff"] < TOL
    assert r["dense_spec"] == "('model', None)" and r["dense_bias_spec"] == "()"
    assert r["dense_diff"] < TOL
    assert r["train_diff"] < TOL and r["train_opt_diff"] < TOL
    mp = "{'data': 4, 'model': 2}"
    assert r["specs_after"] == [f"('model', None)@{mp}", f"('model',)@{mp}", f"(None, 'model')@{mp}", f"()@{mp}"]
    assert r["moment_specs_after"] == r["moment_specs"]
    assert r["callable_specs"] == [f"('model', None)@{mp}", f"()@{mp}", f"()@{mp}", f"()@{mp}"]


def test_bad_input_errors(report):
    r = _ok(report["errors"])
    e = r["batch_error"]
    assert e is not None and "30 observations" in e and "8 devices" in e and "partial=False" in e
    e = r["train_error"]
    assert e is not None and "4 observations" in e and "8 devices" in e and "data index 6" in e
    assert r["after_error_diff"] < TOL  # the 6 full batches were applied, the short one was not
    assert "layers[0].bias" in r["rank_error"] and "(16,)" in r["rank_error"]
    assert "layers[1].weight" in r["divisible_error"] and "8 does not divide 3" in r["divisible_error"]
    assert "'model'" in r["axis_error"] and "('data',)" in r["axis_error"]
    assert "3 devices" in r["mesh_error"] and "8 were given" in r["mesh_error"]
    e = r["get_device_error"]  # MLDataDevices' get_device on arrays that sit on two devices
    assert e is not None and "2 devices (cpu:0, cpu:1)" in e and "cpu_device()" in e


def test_shard_batches_dataloader(report):
    r = _ok(report["loader"])
    for kind in ("numpy", "jax"):
        assert r[f"{kind}_len"] == [3, 3]
        assert r[f"{kind}_diff"] == 0.0  # same shuffled batches as the DataLoader itself
        assert r[f"{kind}_specs"] == [BATCH8]
        assert r[f"{kind}_shard_shape"] == [6, 2]  # 16 observations over 8 devices


def test_two_processes_on_loopback(runs):
    r0, r1 = runs["mp0"], runs["mp1"]
    for pid, r in enumerate((r0, r1)):
        assert (r["pid"], r["process_count"], r["devices"], r["local_devices"]) == (pid, 2, 4, 2)
        assert r["local_shape"] == [6, 32] and r["global_batch_shape"] == [6, 64]
        assert r["specs"] == ["()@{'data': 4}"]
    # one device (in the 8-device worker, unsharded), trained on the global batches the processes assembled
    ref = runs["single"]["mlp"]
    assert "error" not in ref, ref["error"]
    for r in (r0, r1):
        got = [np.asarray(a, np.float32) for a in r["params"]]
        assert [a.shape for a in got] == [(16, 6), (16,), (3, 16), (3,)]
        for a, b in zip(got, ref["mp_reference_params"]):
            np.testing.assert_allclose(a, np.asarray(b, np.float32), rtol=TOL, atol=TOL)
        assert r["loss"] == pytest.approx(ref["mp_reference_loss"], abs=TOL)
    assert r0["params"] == r1["params"]  # every process holds the same replicated parameters


# ------------------------------------------------------------------------------------------------
# In this process (one device)


def test_device_mesh_and_rules_here():
    mesh = parallel.device_mesh()
    assert dict(mesh.shape) == {"data": 1} and mesh.axis_types == (jax.sharding.AxisType.Auto,)
    assert dict(parallel.device_mesh(data=-1, model=1).shape) == {"data": 1, "model": 1}
    with pytest.raises(ValueError, match="at most one axis"):
        parallel.device_mesh(data=-1, model=-1)
    with pytest.raises(ValueError, match="2 devices, but 1 are visible"):
        parallel.device_mesh(2)
    Flux.seed_(0)
    m = Flux.Chain(Flux.Dense(2, 4), Flux.Dense(4, 2))
    x = np.ones((2, 3), np.float32)
    before = np.asarray(m(x))
    assert parallel.shard_(m, mesh, rules={"layers[*].weight": P("data", None)}) is m
    assert [tuple(a.sharding.spec) for a in jax.tree_util.tree_leaves(m)] == [("data", None), (), ("data", None), ()]
    np.testing.assert_array_equal(np.asarray(m(x)), before)
    with pytest.raises(TypeError, match="PartitionSpec"):
        parallel.shard_(m, mesh, rules={"weight": ("data", None)})
    xs, n = parallel.shard_batch((x, 3), mesh)
    assert n == 3 and tuple(xs.sharding.spec) == (None, "data")
    two = parallel.device_mesh(data=1, model=1)
    with pytest.raises(ValueError, match="none is called 'data'"):
        parallel.shard_batch(x, jax.make_mesh((1, 1), ("a", "b")))
    assert tuple(parallel.shard_batch(x, two, axis="model").sharding.spec) == (None, "model")


def test_shard_batches_here():
    mesh = parallel.device_mesh()
    x, y = np.arange(24, dtype=np.float32).reshape(2, 12), np.arange(12)
    sb = parallel.shard_batches(Flux.DataLoader((x, y), batchsize=5, shuffle=True, rng=1), mesh, prefetch=2)
    assert sb._host_batches() is not None  # NumPy data: sliced on the host, sent to each device
    got = list(sb)
    want = list(Flux.DataLoader((x, y), batchsize=5, shuffle=True, rng=1))
    assert len(sb) == 3 and [b[0].shape for b in got] == [(2, 5), (2, 5), (2, 2)]
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a[0], b[0])
        np.testing.assert_array_equal(a[1], b[1])
        assert tuple(a[0].sharding.spec) == (None, "data") and tuple(a[1].sharding.spec) == ("data",)
    jx = parallel.shard_batches(Flux.DataLoader(jax.numpy.asarray(x), batchsize=4), mesh)
    assert jx._host_batches() is None and [b.shape for b in jx] == [(2, 4)] * 3
    gen = parallel.shard_batches([{"x": x[:, :4]}, {"x": x[:, 4:8]}], mesh, prefetch=0)
    assert [tuple(b["x"].sharding.spec) for b in gen] == [(None, "data")] * 2
    with pytest.raises(ValueError, match="prefetch"):
        parallel.shard_batches([], mesh, prefetch=-1)


def test_local_slice():
    x, y = np.arange(20).reshape(2, 10), np.arange(10)
    a = parallel.local_slice((x, y), process_index=1, process_count=3)
    np.testing.assert_array_equal(a[0], x[:, 3:6])
    np.testing.assert_array_equal(a[1], y[3:6])
    assert parallel.local_slice({"x": x}, 0, 1)["x"].shape == (2, 10)
    with pytest.raises(ValueError, match="process_index 3"):
        parallel.local_slice(x, 3, 3)
    with pytest.raises(Flux.DimensionMismatch, match=r"\[9, 10\]"):
        parallel.local_slice((x, y[:9]), 0, 2)


def test_shard_and_train_mesh_keep_tied_weights():
    def tied():
        Flux.seed_(0)
        d = Flux.Dense(3, 3, Flux.tanh)
        return Flux.Chain(d, Flux.Dense(d.weight, False))  # one weight array in two layers

    r = np.random.default_rng(0)
    x, y = r.normal(size=(3, 8)).astype(np.float32), r.normal(size=(3, 8)).astype(np.float32)
    loss = lambda m, x, y: Flux.losses.mse(m(x), y)
    ref = tied()
    Flux.train_(loss, ref, [(x, y)] * 3, Flux.setup(Flux.Descent(0.1), ref))
    mesh = parallel.device_mesh()
    sharded, placed = tied(), tied()
    parallel.shard_(sharded, mesh)                     # shard_ first, setup after (as documented)
    Flux.train_(loss, placed, [(x, y)], Flux.setup(Flux.Descent(0.1), placed), mesh=mesh)  # train_ places it
    assert sharded[0].weight is sharded[1].weight and placed[0].weight is placed[1].weight
    Flux.train_(loss, sharded, [(x, y)] * 3, Flux.setup(Flux.Descent(0.1), sharded), mesh=mesh)
    assert sharded[0].weight is sharded[1].weight
    np.testing.assert_allclose(np.asarray(sharded[1].weight), np.asarray(ref[1].weight), atol=TOL)
    np.testing.assert_allclose(np.asarray(sharded[0].bias), np.asarray(ref[0].bias), atol=TOL)
    with pytest.raises(ValueError, match=r"layers\[1\]\.weight is the same array as layers\[0\]\.weight"):
        parallel.shard_(tied(), mesh, rules={"layers[0].weight": P("data", None)})
