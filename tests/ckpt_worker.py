"""Runs in subprocesses for tests/test_checkpoint_orbax.py; prints one JSON report on its last stdout line.

- `sharded DIR`: 4 simulated CPU devices; save a model whose weight is sharded over them, load it into a
  model sharded differently, report shardings and numbers.
- `mp PID PORT DIR save|load`: one of two jax.distributed processes on loopback (1 CPU device each) with a
  weight sharded across both: `save` writes it (each process its own shard), reports, and waits to be
  killed with SIGKILL; `load` restores it into a fresh model with the same sharding and reports its local
  shard beside the expected numbers.
- `export DIR` (tests/test_safetensors_interop.py): 4 devices; export a model whose weight is sharded
  over them to DIR/m.safetensors and DIR/m.npz, report the numbers it holds.
- `mpexport PID PORT DIR`: one of two jax.distributed processes with a weight sharded across both;
  export it (gathered, written by process 0), count the renames onto the files, then export into a
  missing directory and report what each process raised.
- `prune DIR`: saves steps 0 and 1 with keep=1, and stops forever inside the prune of step 0 (after
  printing "pruning"), holding the directory's save lock, to be killed with SIGKILL.
"""

from __future__ import annotations

import json
import os
import sys
import time

MODE = sys.argv[1] if __name__ == "__main__" else None  # None when pytest imports the file to collect it
if MODE is not None:  # before jax is imported
    os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=" + ("4" if MODE in ("sharded", "export") else "1")
    os.environ["JAX_PLATFORMS"] = "cpu"

import jax  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import Mesh, NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

import fluxjax  # noqa: E402


def model(seed):
    fluxjax.seed_(seed)
    return fluxjax.Chain(fluxjax.Dense(8, 8), fluxjax.Dense(8, 2))


def sharded(d):
    mesh = Mesh(np.array(jax.devices()), ("x",))
    src = model(1)
    src[0].weight = jax.device_put(src[0].weight, NamedSharding(mesh, P("x", None)))
    fluxjax.save(d, src)
    dst = model(2)
    target = NamedSharding(mesh, P(None, "x"))
    dst[0].weight = jax.device_put(dst[0].weight, target)
    fluxjax.load(d, dst)
    w = dst[0].weight
    print(json.dumps({"devices": jax.device_count(), "spec": str(tuple(w.sharding.spec)),
                      "same_sharding": w.sharding == target, "shards": len(w.addressable_shards),
                      "shard_shape": list(w.addressable_shards[0].data.shape),
                      "equal": np.asarray(w).tobytes() == np.asarray(src[0].weight).tobytes(),
                      "bias_equal": np.asarray(dst[0].bias).tobytes() == np.asarray(src[0].bias).tobytes()}))


def multi(pid, port, d, phase):
    jax.distributed.initialize(f"127.0.0.1:{port}", num_processes=2, process_id=pid, initialization_timeout=60)
    mesh = Mesh(np.array(jax.devices()), ("x",))
    sh = NamedSharding(mesh, P("x", None))
    expected = np.asarray(model(1)[0].weight)  # every process builds the same numbers from the seed
    m = model(1 if phase == "save" else 2)
    m[0].weight = jax.make_array_from_callback(expected.shape, sh, lambda idx: np.asarray(m[0].weight)[idx])
    if phase == "save":
        fluxjax.save(d, m, step=7)
    else:
        fluxjax.load(d, m)
    w = m[0].weight
    (shard,) = w.addressable_shards
    print(json.dumps({"pid": pid, "processes": jax.process_count(), "phase": phase,
                      "fully_addressable": w.is_fully_addressable, "same_sharding": w.sharding == sh,
                      "local": np.asarray(shard.data).tolist(), "expected": expected[shard.index].tolist(),
                      "files": sorted(os.listdir(os.path.join(d, "7", "arrays"))) if phase == "load" else []}),
          flush=True)
    if phase == "save":  # stay alive until the test kills the process: no orderly shutdown after a save
        time.sleep(600)


def export(d):
    mesh = Mesh(np.array(jax.devices()), ("x",))
    m = model(1)
    expected = {k: a.tolist() for k, a in fluxjax.serialize.flat_state(m).items()}
    m[0].weight = jax.device_put(m[0].weight, NamedSharding(mesh, P("x", None)))
    fluxjax.export_safetensors(os.path.join(d, "m.safetensors"), m)
    fluxjax.export_npz(os.path.join(d, "m.npz"), m)
    w = m[0].weight
    print(json.dumps({"devices": jax.device_count(), "fully_addressable": w.is_fully_addressable,
                      "shards": len(w.addressable_shards), "expected": expected}))


def mpexport(pid, port, d):
    jax.distributed.initialize(f"127.0.0.1:{port}", num_processes=2, process_id=pid, initialization_timeout=60)
    mesh = Mesh(np.array(jax.devices()), ("x",))
    m = model(1)  # every process builds the same numbers from the seed
    expected = {k: a.tolist() for k, a in fluxjax.serialize.flat_state(m).items()}
    full = np.asarray(m[0].weight)
    m[0].weight = jax.make_array_from_callback(full.shape, NamedSharding(mesh, P("x", None)), lambda idx: full[idx])
    files = [os.path.join(d, "m.safetensors"), os.path.join(d, "m.npz")]
    replaced = []
    real = os.replace
    os.replace = lambda src, dst: (replaced.append(dst), real(src, dst))[1]
    fluxjax.export_safetensors(files[0], m)
    fluxjax.export_npz(files[1], m)
    os.replace = real
    exists = [os.path.exists(f) for f in files]
    try:
        fluxjax.export_safetensors(os.path.join(d, "missing", "m.safetensors"), m)
        failed = ""
    except Exception as e:
        failed = f"{type(e).__name__}: {e}"
    print(json.dumps({"pid": pid, "processes": jax.process_count(), "fully_addressable": m[0].weight.is_fully_addressable,
                      "replaced": sum(r in files for r in replaced), "exists_on_return": exists, "failed": failed,
                      "expected": expected}))


def prune(d):
    import shutil

    m = model(1)
    fluxjax.save(d, m)

    def stuck(*a, **k):
        print("pruning", flush=True)
        time.sleep(600)

    shutil.rmtree = stuck  # the prune (fluxjax/_ckpt_dir.py) hangs after renaming the step
    fluxjax.save(d, m, keep=1)


if __name__ == "__main__":
    if MODE == "sharded":
        sharded(sys.argv[2])
    elif MODE == "mp":
        multi(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5])
    elif MODE == "export":
        export(sys.argv[2])
    elif MODE == "mpexport":
        mpexport(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4])
    else:
        prune(sys.argv[2])
