"""Memory mode: run ONE (workload, contender) in this fresh process and report its peak memory.

    python -m bench.one WORKLOAD CONTENDER [--steps N]

Prints one line ``BENCH_ONE_RESULT {json}`` with ``rss_after_import_mb`` (after importing every
contender library, before building anything), ``peak_rss_mb`` (peak RSS over build, first call and
N steps: Linux ``VmHWM`` after resetting it post-import via /proc/self/clear_refs, else ``ru_maxrss``),
``ru_maxrss_mb`` (getrusage peak of the whole process, import spike included) and, where the
backend reports it (GPU/TPU), ``peak_device_mb``.
"""

from __future__ import annotations

import argparse
import gc
import json
import re
import resource
import sys
import time
from pathlib import Path

import jax

from bench import harness
from bench.workloads import WORKLOADS


def maxrss_mb() -> float:
    """getrusage peak RSS of the whole process life: imports included, cannot be reset, and on Linux
    inherited across fork+exec from a larger parent (the harness) — hence VmHWM below."""
    kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return kb / 1024.0 if sys.platform != "darwin" else kb / 2**20  # macOS reports bytes


def _status_mb(field: str) -> float | None:
    try:
        m = re.search(rf"^{field}:\s+(\d+) kB", Path("/proc/self/status").read_text(), re.M)
    except OSError:
        return None
    return int(m.group(1)) / 1024.0 if m else None


def reset_peak() -> bool:
    """Linux: reset VmHWM to the current RSS, so the import-time spike does not mask the contender."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def device_peak_mb() -> float | None:
    try:
        stats = jax.devices()[0].memory_stats() or {}
    except Exception:
        return None
    v = stats.get("peak_bytes_in_use")
    return None if v is None else v / 2**20


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.one", description=__doc__.splitlines()[0])
    ap.add_argument("workload", choices=sorted(WORKLOADS))
    ap.add_argument("contender")
    ap.add_argument("--steps", type=int, default=50)
    a = ap.parse_args(argv)

    harness.load_contenders(verbose=False)
    wl = WORKLOADS[a.workload]
    entry = harness.find_entry(a.workload, a.contender)
    gc.collect()
    reset = reset_peak()
    rss0 = _status_mb("VmRSS") if reset else maxrss_mb()
    out = {"workload": a.workload, "contender": a.contender, "steps": a.steps,
           "rss_after_import_mb": round(rss0, 1), "peak_is_since_import": reset}
    try:
        t0 = time.perf_counter()
        b = harness.build(entry, wl)
        r = b.step()
        b.block(r)
        for _ in range(a.steps):
            r = b.step()
        b.block(r)
        # the peak is read before the loss: a contender may compute its loss eagerly (train_'s
        # does, as train_ returns none), and that op-by-op run is not part of a training step
        out.update(status="ok", seconds=round(time.perf_counter() - t0, 3),
                   peak_rss_mb=round((_status_mb("VmHWM") if reset else None) or maxrss_mb(), 1),
                   ru_maxrss_mb=round(maxrss_mb(), 1), peak_device_mb=device_peak_mb())
        out["loss"] = b.loss_of(r)
    except Exception as e:
        out.update(status=f"error: {type(e).__name__}: {e}"[:200])
    print(harness.ONE_PREFIX + json.dumps(out), flush=True)
    return 0 if out["status"] == "ok" else 1


if __name__ == "__main__":
    sys.exit(main())
