"""Runs in a subprocess for tests/test_parallel.py, with 8 simulated CPU devices
(`XLA_FLAGS=--xla_force_host_platform_device_count=8`, set before jax is imported).

Every check compares a run on the 8-device mesh to the same run on one device, in this process, and
reports numbers (max abs differences, losses, shardings, error messages) as one JSON object on the
last line of stdout. A check that raises reports its traceback under "error".

`python tests/parallel_worker.py mp PROCESS_ID PORT` is one of two processes of a jax.distributed job
on loopback (2 CPU devices each); it trains and reports its final parameters.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback

MODE = sys.argv[1] if len(sys.argv) > 1 else "single"
os.environ["XLA_FLAGS"] = ("--xla_force_host_platform_device_count=" + ("2" if MODE == "mp" else "8")
                           + " --xla_backend_optimization_level=0 --xla_llvm_disable_expensive_passes=true")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import fluxjax as Flux  # noqa: E402
from fluxjax import parallel  # noqa: E402
from fluxjax.losses import logitcrossentropy, mse  # noqa: E402
from fluxjax.parallel import P  # noqa: E402


def leaves(tree):
    return [np.asarray(a) for a in jax.tree_util.tree_leaves(tree)]


def maxdiff(a, b) -> float:
    la, lb = leaves(a), leaves(b)
    assert len(la) == len(lb) and all(x.shape == y.shape for x, y in zip(la, lb))
    return max(float(np.max(np.abs(x.astype(np.float64) - y.astype(np.float64)))) if x.size else 0.0 for x, y in zip(la, lb))


def specs(tree) -> list:
    out = []
    for a in jax.tree_util.tree_leaves(tree):
        s = a.sharding
        out.append(str(tuple(s.spec)) + f"@{dict(s.mesh.shape)}" if hasattr(s, "spec") else type(s).__name__)
    return out


def mlp():
    Flux.seed_(1)
    return Flux.Chain(Flux.Dense(6, 16, Flux.relu), Flux.Dense(16, 3))


def cnn():
    Flux.seed_(2)
    return Flux.Chain(
        Flux.Conv((3, 3), (1, 4), pad=1),
        Flux.BatchNorm(4, Flux.relu),
        Flux.MaxPool((2, 2)),
        Flux.flatten,
        Flux.Dense(36, 3),
    )


def make_step():
    @Flux.jit
    def step(m, st, x, y, lossfn):
        val, (g,) = Flux.withgradient(lambda m: lossfn(m(x), y), m)
        Flux.update_(st, m, g)
        return val

    return step


def mlp_data(n=64):
    r = np.random.default_rng(0)
    x = r.normal(size=(6, n)).astype(np.float32)
    # a per-observation offset, so that each device's slice of a batch has different statistics
    x += np.linspace(-2, 2, n, dtype=np.float32)[None, :]
    y = r.normal(size=(3, n)).astype(np.float32)
    return x, y


def check_mlp(mesh):
    x, y = mlp_data()
    out = {}

    def loss(m, x, y):
        return mse(m(x), y)

    # plain fluxjax.jit steps over shard_batches, loss curve and parameters
    curves, models, states = [], [], []
    for on_mesh in (False, True):
        m = mlp()
        st = Flux.setup(Flux.Adam(0.01), m)
        if on_mesh:
            parallel.shard_(m, mesh, opt_state=st)
        loader = Flux.DataLoader((x, y), batchsize=16)
        data = parallel.shard_batches(loader, mesh) if on_mesh else loader
        step = make_step()
        if not on_mesh:
            step1 = step
        curve = []
        for _ in range(2):  # two epochs: the ShardedBatches iterates again
            for xb, yb in data:
                if on_mesh:
                    out["batch_specs"] = specs((xb, yb))
                curve.append(float(step(m, st, xb, yb, mse)))
        curves.append(curve)
        models.append(m)
        states.append(st)
    out["jit_curve_1"], out["jit_curve_8"] = curves
    out["jit_param_diff"] = maxdiff(models[0], models[1])
    out["jit_model_specs"] = specs(models[1])
    out["jit_opt_specs"] = sorted(set(specs(states[1])))
    # Adam's βt, shared by the leaves (fluxjax/_sharing.py), is still one array after shard_ and steps
    out["jit_shared_bt"] = len({id(leaf.state.beta_t) for leaf in jax.tree_util.tree_leaves(
        states[1], is_leaf=lambda z: hasattr(z, "rule"))})

    # reference for the two-process run (tests/test_parallel.py): one device, global batches in the
    # order the processes assemble them (process 0's local batch, then process 1's)
    m = mlp()
    st = Flux.setup(Flux.Adam(0.01), m)
    for _ in range(2):
        for b in range(4):
            xb, yb = (np.concatenate([a[:, 8 * b:8 * b + 8], a[:, 32 + 8 * b:40 + 8 * b]], axis=1) for a in (x, y))
            step1(m, st, xb, yb, mse)
    out["mp_reference_params"] = [np.asarray(a).tolist() for a in jax.tree_util.tree_leaves(m)]
    out["mp_reference_loss"] = float(Flux.jit(loss)(m, x, y))

    # train_(..., mesh=...) from an unplaced model and state, against the 1-device jit run above;
    # the mesh is jax.make_mesh's default (Explicit axes), which fluxjax converts to GSPMD's Auto axes
    em = jax.make_mesh((8,), ("data",))
    out["explicit_axis_types"] = str(em.axis_types)
    m = mlp()
    st = Flux.setup(Flux.Adam(0.01), m)
    for _ in range(2):
        Flux.train_(loss, m, Flux.DataLoader((x, y), batchsize=16), st, mesh=em)
    out["train_param_diff"] = maxdiff(models[0], m)
    out["train_opt_diff"] = maxdiff(states[0], st)
    out["train_model_specs"] = specs(m)
    out["train_opt_specs"] = sorted(set(specs(st)))

    # implicit (Flux 0.13) mode: train_(loss, params(m), data, rule, mesh=mesh)
    m = mlp()
    ps = Flux.params(m)
    rule = Flux.Adam(0.01)
    for _ in range(2):
        Flux.train_(lambda x, y: mse(m(x), y), ps, Flux.DataLoader((x, y), batchsize=16), rule, mesh=mesh)
    out["implicit_param_diff"] = maxdiff(models[0], m)
    out["implicit_specs"] = specs(m)
    return out


def cnn_data(n=32):
    r = np.random.default_rng(3)
    x = r.normal(size=(6, 6, 1, n)).astype(np.float32)
    x += np.linspace(-3, 3, n, dtype=np.float32)[None, None, None, :]  # shard-dependent statistics
    y = np.asarray(Flux.onehotbatch(r.integers(0, 3, n), range(3)), np.float32)
    return x, y


def check_cnn(mesh):
    x, y = cnn_data()
    out = {}

    # BatchNorm alone, train mode, one call under fluxjax.jit: global statistics
    def bn_run(xs):
        Flux.seed_(0)
        bn = Flux.BatchNorm(1, active=True)
        f = Flux.jit(lambda bn, x: bn(x))
        return f(bn, xs), bn

    y1, bn1 = bn_run(x)
    y8, bn8 = bn_run(parallel.shard_batch(x, mesh))
    out["bn_out_diff"] = maxdiff(y1, y8)
    out["bn_stats_diff"] = maxdiff((bn1.mu, bn1.sigma2), (bn8.mu, bn8.sigma2))
    out["bn_mu"] = float(np.asarray(bn8.mu)[0])
    out["bn_mu_expected"] = float(0.1 * x.mean())
    # what per-device statistics would have given (to show the check can fail)
    loc = x[..., :4]
    out["bn_local_mu"] = float(0.1 * loc.mean())
    out["bn_out_spec"] = specs(y8)

    def loss(m, x, y):
        return logitcrossentropy(m(x), y)

    curves, ms = [], []
    for on_mesh in (False, True):
        m = cnn()
        st = Flux.setup(Flux.Momentum(0.05), m)
        if on_mesh:
            parallel.shard_(m, mesh, opt_state=st)
        step = make_step()
        loader = Flux.DataLoader((x, y), batchsize=16, shuffle=True, rng=7)
        data = parallel.shard_batches(loader, mesh) if on_mesh else loader
        curve = [float(step(m, st, xb, yb, logitcrossentropy)) for _ in range(2) for xb, yb in data]
        curves.append(curve)
        ms.append((m, st))
    out["cnn_curve_1"], out["cnn_curve_8"] = curves
    out["cnn_param_diff"] = maxdiff(ms[0][0], ms[1][0])
    out["cnn_opt_diff"] = maxdiff(ms[0][1], ms[1][1])
    out["cnn_stats_diff"] = maxdiff((ms[0][0][1].mu, ms[0][0][1].sigma2), (ms[1][0][1].mu, ms[1][0][1].sigma2))
    out["cnn_stats_moved"] = float(np.max(np.abs(np.asarray(ms[0][0][1].mu))))
    out["cnn_model_specs"] = sorted(set(specs(ms[1][0])))

    # train_ with a mesh on the same CNN and batches (state writes + guard_writes in the compiled step)
    m = cnn()
    st = Flux.setup(Flux.Momentum(0.05), m)
    loader = Flux.DataLoader((x, y), batchsize=16, shuffle=True, rng=7)
    for _ in range(2):
        Flux.train_(loss, m, loader, st, mesh=mesh)
    out["cnn_train_diff"] = maxdiff(ms[0][0], m)
    out["cnn_train_specs"] = sorted(set(specs(m)))
    return out


def check_model_parallel():
    mesh = parallel.device_mesh(data=4, model=2)
    out = {"mesh": dict(mesh.shape)}
    r = np.random.default_rng(5)
    x = r.normal(size=(6, 8)).astype(np.float32)
    y = r.normal(size=(3, 8)).astype(np.float32)
    rules = {"layers[0].weight": P("model", None), "layers[0].bias": P("model"), "layers[1].weight": P(None, "model")}
    ref, mp = mlp(), mlp()
    st_ref = Flux.setup(Flux.Adam(0.01), ref)
    st_mp = Flux.setup(Flux.Adam(0.01), mp)
    parallel.shard_(mp, mesh, rules, opt_state=st_mp)
    w = mp[0].weight
    out["w_spec"] = str(tuple(w.sharding.spec))
    out["w_shard_shapes"] = sorted({tuple(s.data.shape) for s in w.addressable_shards})
    out["w_global_shape"] = list(w.shape)
    out["moment_specs"] = [str(tuple(a.sharding.spec)) for a in jax.tree_util.tree_leaves(st_mp.layers[0].weight.state)]
    fwd = Flux.jit(lambda m, x: m(x))
    out["forward_jit_diff"] = maxdiff(ref(x), fwd(mp, parallel.shard_batch(x, mesh)))
    # a single model-parallel Dense, sharded by field name
    Flux.seed_(4)
    d_ref = Flux.Dense(6, 8, Flux.tanh)
    Flux.seed_(4)
    d = parallel.shard_(Flux.Dense(6, 8, Flux.tanh), mesh, rules={"weight": P("model", None)})
    out["dense_spec"] = str(tuple(d.weight.sharding.spec))
    out["dense_bias_spec"] = str(tuple(d.bias.sharding.spec))
    out["dense_diff"] = maxdiff(d_ref(x), fwd(d, parallel.shard_batch(x, mesh)))
    # training keeps the placement and matches one device
    step = make_step()
    for _ in range(5):
        step(ref, st_ref, x, y, mse)
    for _ in range(3):
        step(mp, st_mp, *parallel.shard_batch((x, y), mesh), mse)
    Flux.train_(lambda m, x, y: mse(m(x), y), mp, [(x, y)] * 2, st_mp, mesh=mesh)
    out["train_diff"] = maxdiff(ref, mp)
    out["train_opt_diff"] = maxdiff(st_ref, st_mp)
    out["specs_after"] = specs(mp)
    out["moment_specs_after"] = [str(tuple(a.sharding.spec)) for a in jax.tree_util.tree_leaves(st_mp.layers[0].weight.state)]
    # a callable rule: shard every 2-d array along its first axis
    c = parallel.shard_(mlp(), mesh, rules=lambda path, a: P("model", None) if a.ndim == 2 and a.shape[0] % 2 == 0 else None)
    out["callable_specs"] = specs(c)
    return out


def check_errors(mesh):
    out = {}
    x, y = mlp_data(100)
    try:
        parallel.shard_batch((x[:, :30], y[:, :30]), mesh)
        out["batch_error"] = None
    except Flux.DimensionMismatch as e:
        out["batch_error"] = str(e)
    # train_ stops before the short last batch, with the first 6 steps applied
    m, m_ref = mlp(), mlp()
    st, st_ref = Flux.setup(Flux.Descent(0.1), m), Flux.setup(Flux.Descent(0.1), m_ref)
    try:
        Flux.train_(lambda m, x, y: mse(m(x), y), m, Flux.DataLoader((x, y), batchsize=16), st, mesh=mesh)
        out["train_error"] = None
    except Flux.DimensionMismatch as e:
        out["train_error"] = str(e)
    Flux.train_(lambda m, x, y: mse(m(x), y), m_ref, Flux.DataLoader((x, y), batchsize=16, partial=False), st_ref)
    out["after_error_diff"] = maxdiff(m, m_ref)
    for name, fn in {
        "rank_error": lambda: parallel.shard_(mlp(), mesh, rules={"bias": P(None, "data")}),
        "divisible_error": lambda: parallel.shard_(mlp(), mesh, rules={"layers[1].weight": P("data", None)}),
        "axis_error": lambda: parallel.shard_(mlp(), mesh, rules={"weight": P("model", None)}),
        "mesh_error": lambda: parallel.device_mesh(data=3),
        "get_device_error": lambda: Flux.get_device([jax.device_put(jnp.ones(2), d) for d in jax.devices()[:2]]),
    }.items():
        try:
            fn()
            out[name] = None
        except ValueError as e:
            out[name] = str(e)
    return out


def check_loader(mesh):
    out = {}
    x, y = mlp_data(48)
    for kind, data in (("numpy", (x, y)), ("jax", (jnp.asarray(x), jnp.asarray(y)))):
        plain = list(Flux.DataLoader(data, batchsize=16, shuffle=True, rng=3))
        sb = parallel.shard_batches(Flux.DataLoader(data, batchsize=16, shuffle=True, rng=3), mesh)
        placed = list(sb)
        out[f"{kind}_len"] = [len(sb), len(placed)]
        out[f"{kind}_diff"] = maxdiff(plain, placed)
        out[f"{kind}_specs"] = sorted(set(specs(placed)))
        out[f"{kind}_shard_shape"] = list(placed[0][0].addressable_shards[0].data.shape)
    return out


def single():
    report = {"devices": jax.device_count()}
    mesh = parallel.device_mesh()
    report["mesh"] = dict(mesh.shape)
    for name, fn in (("mlp", lambda: check_mlp(mesh)), ("cnn", lambda: check_cnn(mesh)),
                     ("model_parallel", check_model_parallel), ("errors", lambda: check_errors(mesh)),
                     ("loader", lambda: check_loader(mesh))):
        t = time.time()
        try:
            report[name] = fn()
        except Exception:
            report[name] = {"error": traceback.format_exc()}
        report[name]["seconds"] = round(time.time() - t, 2)
    print(json.dumps(report))


def multi(pid: int, port: int):
    parallel.initialize(f"127.0.0.1:{port}", num_processes=2, process_id=pid, initialization_timeout=60)
    report = {"pid": pid, "process_count": jax.process_count(), "devices": jax.device_count(),
              "local_devices": jax.local_device_count()}
    mesh = parallel.device_mesh()
    x, y = mlp_data(64)
    xl, yl = parallel.local_slice((x, y))
    report["local_shape"] = list(xl.shape)
    m = mlp()
    st = Flux.setup(Flux.Adam(0.01), m)
    loader = Flux.DataLoader((xl, yl), batchsize=8)  # global batch 16
    for _ in range(2):
        Flux.train_(lambda m, x, y: mse(m(x), y), m, loader, st, mesh=mesh)
    report["specs"] = sorted(set(specs(m)))
    report["params"] = [np.asarray(a).tolist() for a in jax.tree_util.tree_leaves(m)]
    xs, ys = parallel.shard_batch((xl, yl), mesh)
    report["global_batch_shape"] = list(xs.shape)
    report["loss"] = float(Flux.jit(lambda m, x, y: mse(m(x), y))(m, xs, ys))
    print(json.dumps(report))


if __name__ == "__main__":
    if MODE == "mp":
        multi(int(sys.argv[2]), int(sys.argv[3]))
    else:
        single()
