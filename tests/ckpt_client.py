"""Starting `ckpt_worker.py` in subprocesses and reading its JSON reports (tests/test_checkpoint_orbax.py,
tests/test_safetensors_interop.py); `free_port` for jax.distributed on loopback (tests/test_parallel.py too)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

WORKER = Path(__file__).with_name("ckpt_worker.py")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(*args) -> subprocess.Popen:
    """`ckpt_worker.py args...`, with the repository importable and the caller's XLA/platform flags removed
    (the worker sets its own device count)."""
    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "JAX_PLATFORMS")}
    env["PYTHONPATH"] = str(WORKER.parent.parent) + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.Popen([sys.executable, str(WORKER), *map(str, args)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)


def report(p: subprocess.Popen, timeout: float = 240) -> dict:
    """The last JSON line of a worker that exits 0."""
    out, err = p.communicate(timeout=timeout)
    lines = [ln for ln in out.splitlines() if ln.startswith("{")]
    assert p.returncode == 0 and lines, f"ckpt_worker failed (rc {p.returncode}):\n{err[-4000:]}"
    return json.loads(lines[-1])


def first_report(p: subprocess.Popen, timeout: float = 240) -> dict:
    """The first JSON line of a worker that stays alive after printing it."""
    deadline = time.monotonic() + timeout
    line = ""
    while not line.startswith("{"):
        line = p.stdout.readline()
        if not line and p.poll() is not None:
            raise AssertionError(f"ckpt_worker failed (rc {p.returncode}):\n{p.stderr.read()[-4000:]}")
        assert time.monotonic() < deadline, "ckpt_worker did not report in time"
    return json.loads(line)
