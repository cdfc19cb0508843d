"""Damaged checkpoints and weight files: always a clear error naming the file, never a crash, never a
partially loaded model; and a save killed half-way leaves the previous checkpoint readable, bit-exact."""

import json
import os
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import textwrap
import time

import hypothesis.strategies as st
import jax
import numpy as np
import pytest
from hypothesis import HealthCheck, assume, example, given, settings

import fluxjax
from fluxjax import BatchNorm, Chain, CheckpointError, Dense, DimensionMismatch, Dropout, StructureMismatch

# orbax, failing a restore half-way, leaves asyncio callbacks that fire on a closed loop: harmless noise
pytestmark = [pytest.mark.reliability, pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")]

FUZZ = settings(max_examples=20, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))


def model(seed):
    fluxjax.seed_(seed)
    return Chain(Dense(3, 4), BatchNorm(4), Dropout(0.5), Dense(4, 2, bias=False))


def snapshot(m):
    return [np.asarray(a).copy() for a in jax.tree_util.tree_leaves(m)]


def same(m, snap):
    leaves = jax.tree_util.tree_leaves(m)
    return len(leaves) == len(snap) and all(
        np.asarray(a).dtype == b.dtype and np.asarray(a).tobytes() == b.tobytes() for a, b in zip(leaves, snap))


SOURCE = model(1)
SOURCE_SNAP = snapshot(SOURCE)


def check_outcome(load, target_file: str):
    """Run `load(m)` on a fresh model: either it raises `CheckpointError` naming the file (or, when the
    file is a well-formed one of another model, e.g. the damage renamed a key, `StructureMismatch` /
    `DimensionMismatch`) and leaves the model bit-equal, or it succeeds and the model holds exactly
    SOURCE's values. Nothing else (no bare ValueError, OSError, MemoryError) is right."""
    m = model(2)
    before = snapshot(m)
    try:
        load(m)
    except (CheckpointError, StructureMismatch, DimensionMismatch) as e:
        assert os.path.basename(target_file) in str(e), str(e)
        assert same(m, before), "a failed load changed the model"
        return "error"
    assert same(m, SOURCE_SNAP), "a load succeeded with wrong numbers"
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


def corrupt(data: bytes, how):
    kind, a, b = how
    if kind == "truncate":
        return data[: int(a * len(data))]
    out = bytearray(data)
    if out:
        out[int(a * (len(out) - 1))] ^= b
    return bytes(out)


CORRUPTION = st.tuples(st.sampled_from(["truncate", "flip"]), st.floats(0, 1), st.integers(1, 255))


@FUZZ
@given(how=CORRUPTION)
@example(how=("truncate", 0.0, 1))
@example(how=("truncate", 0.001, 1))
@example(how=("truncate", 0.99, 1))
@example(how=("flip", 0.0, 255))  # header length
@example(how=("flip", 0.05, 1))  # inside the JSON header
@example(how=("flip", 0.98, 128))  # inside the tensor data
def test_corrupted_safetensors(files, how):
    p = os.path.join(files["dir"], "bad.safetensors")
    with open(p, "wb") as f:
        f.write(corrupt(files["safetensors"], how))
    check_outcome(lambda m: fluxjax.import_safetensors_(m, p), p)


HEADER_VALUE = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 10**6) | st.sampled_from(["F32", "U32", "I64", "BF16", "X"]),
    lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.sampled_from(["dtype", "shape", "data_offsets", "x"]), kids),
    max_leaves=8,
)


@FUZZ
@given(header=st.dictionaries(st.sampled_from(["layers.0.weight", "layers.0.bias", "__metadata__", "z"]), HEADER_VALUE,
                              max_size=4))
def test_wrong_safetensors_header(files, header):
    data = files["safetensors"]
    (n,) = struct.unpack("<Q", data[:8])
    text = json.dumps(header).encode()
    p = os.path.join(files["dir"], "hdr.safetensors")
    with open(p, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + data[8 + n:])
    assert check_outcome(lambda m: fluxjax.import_safetensors_(m, p), p) == "error"


@FUZZ
@given(how=CORRUPTION)
@example(how=("truncate", 0.5, 1))
@example(how=("flip", 0.5, 4))
def test_corrupted_npz(files, how):
    p = os.path.join(files["dir"], "bad.npz")
    with open(p, "wb") as f:
        f.write(corrupt(files["npz"], how))
    check_outcome(lambda m: fluxjax.import_npz_(m, p), p)


@FUZZ
@given(key=st.sampled_from(sorted(fluxjax.serialize.flat_state(SOURCE))),
       shape=st.lists(st.integers(0, 5), max_size=3).map(tuple))
def test_npz_with_wrong_shapes(files, key, shape):
    flat = dict(fluxjax.serialize.flat_state(SOURCE))
    assume(shape != flat[key].shape)
    flat[key] = np.zeros(shape, flat[key].dtype)
    p = os.path.join(files["dir"], "shapes.npz")
    np.savez(p, **flat)
    assert check_outcome(lambda m: fluxjax.import_npz_(m, p), p) == "error"


def _ck_files(ck):
    out = []
    for root, _, names in os.walk(ck):
        out.extend(os.path.relpath(os.path.join(root, n), ck) for n in names)
    return sorted(out)


@settings(max_examples=8, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(pick=st.floats(0, 1), action=st.sampled_from(["delete", "truncate", "flip"]), where=st.floats(0, 1),
       mask=st.integers(1, 255))
@example(pick=0.0, action="delete", where=0.0, mask=1)
@example(pick=1.0, action="truncate", where=0.5, mask=1)
def test_damaged_checkpoint_directory(files, pick, action, where, mask):
    ck = os.path.join(files["dir"], "damaged")
    shutil.rmtree(ck, ignore_errors=True)
    shutil.copytree(files["ck"], ck)
    names = _ck_files(ck)
    target = os.path.join(ck, names[int(pick * (len(names) - 1))])
    if action == "delete":
        os.unlink(target)
    else:
        data = open(target, "rb").read()
        with open(target, "wb") as f:
            f.write(corrupt(data, ("truncate" if action == "truncate" else "flip", where, mask)))
    check_outcome(lambda m: fluxjax.load(ck, m), ck)


def test_every_file_of_a_checkpoint_flipped_or_truncated(files):
    """Each file in turn: damage to the metadata or the array data is an error; damage to files orbax does
    not read back (its bookkeeping, the per-process OCDBT copy) loads the right numbers."""
    outcomes = {}
    for name in _ck_files(files["ck"]):
        for how in (("flip", 0.5, 16), ("truncate", 0.5, 1)):
            ck = os.path.join(files["dir"], "each")
            shutil.rmtree(ck, ignore_errors=True)
            shutil.copytree(files["ck"], ck)
            target = os.path.join(ck, name)
            data = open(target, "rb").read()
            with open(target, "wb") as f:
                f.write(corrupt(data, how))
            outcomes[name, how[0]] = check_outcome(lambda m, ck=ck: fluxjax.load(ck, m), ck)
    for (name, _), r in outcomes.items():
        if name == os.path.join("0", "meta", "metadata") or name.startswith(os.path.join("0", "arrays", "d", "")):
            assert r == "error", name
    assert sum(r == "error" for r in outcomes.values()) >= 4


def test_deleted_meta_and_arrays_are_errors(files):
    for part in ("meta", "arrays"):
        ck = os.path.join(files["dir"], "no_" + part)
        shutil.rmtree(ck, ignore_errors=True)
        shutil.copytree(files["ck"], ck)
        shutil.rmtree(os.path.join(ck, "0", part))
        assert check_outcome(lambda m, ck=ck: fluxjax.load(ck, m), ck) == "error"


# ------------------------------------------------------------------------------------------------
# a save killed half-way

CHILD = textwrap.dedent("""
    import sys
    import numpy as np
    import fluxjax
    path = sys.argv[1]
    n = 2048
    for step in range(10000):
        w = np.full((n, n), step, np.float32) + np.arange(n, dtype=np.float32)
        m = fluxjax.Chain(fluxjax.Dense(w, np.full(n, -step, np.float32)), fluxjax.Dense(w.T.copy(), False))
        fluxjax.save(path, m, step=step)
        print("done", step, flush=True)
""")


def expected(step, n=2048):
    w = np.full((n, n), step, np.float32) + np.arange(n, dtype=np.float32)
    return w, np.full(n, -step, np.float32), w.T.copy()


def test_killed_save_leaves_previous_checkpoint_readable(tmp_path):
    path = str(tmp_path / "ck")
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    for _attempt in range(3):
        shutil.rmtree(path, ignore_errors=True)
        proc = subprocess.Popen([sys.executable, str(script), path], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        try:
            assert proc.stdout.readline().split() == ["done", "0"]
            deadline = time.time() + 60
            killed_during = None
            while time.time() < deadline:  # kill as soon as a save of step >= 1 is under way
                tmp = [n for n in os.listdir(path) if "tmp" in n and not n.startswith("0")]
                if tmp:
                    proc.send_signal(signal.SIGKILL)
                    killed_during = tmp
                    break
                time.sleep(0.001)
            assert killed_during, "never saw a save in progress"
        finally:
            proc.kill()
            proc.wait()
        rest = proc.stdout.read().split()
        proc.stdout.close()
        if any("tmp" in n for n in os.listdir(path)):
            break  # the kill interrupted a save, as intended (else it landed just after a rename: retry)
    leftovers = [n for n in os.listdir(path) if "tmp" in n]
    assert leftovers, "the kill never landed inside a save"
    done = [0] + [int(rest[i + 1]) for i in range(0, len(rest) - 1, 2) if rest[i] == "done"]

    raw, _, step = fluxjax.load(path)
    assert step >= max(done)  # nothing that finished was lost
    w, b, w2 = expected(step)
    assert np.asarray(raw["layers"][0]["weight"]).tobytes() == w.tobytes()
    assert np.asarray(raw["layers"][0]["bias"]).tobytes() == b.tobytes()
    assert np.asarray(raw["layers"][1]["weight"]).tobytes() == w2.tobytes()

    m = Chain(Dense(2048, 2048), Dense(2048, 2048, bias=False))
    fluxjax.load(path, m)
    assert np.asarray(m[0].weight).tobytes() == w.tobytes()
    # the next save goes on from the newest finished step and clears the interrupted one away
    assert fluxjax.save(path, m) == step + 1
    assert not [n for n in os.listdir(path) if "tmp" in n]
