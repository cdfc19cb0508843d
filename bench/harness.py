"""Registry, timing (interleaved, medians), checks and the memory subprocesses (the report is bench/report.py).

Adding a contender
------------------
A contender module registers one factory per workload it supports::

    from bench.harness import Bench, register

    @register("mlp_tiny", "fluxjax train_")          # or register(("mlp_tiny", "mlp_medium"), name)
    def make(wl):                                      # wl: bench.workloads.Workload
        d = wl.data("feature_major")                   # fixed device data: d.x, d.y, d.onehot, d.onehot_fm
        ...                                            # build model + optimiser state (NOT timed)
        def step():                                    # one full training step
            ...
            return loss                                # scalar loss, or (loss, anything)
        return step                                    # or Bench(step, sync=..., loss=...)

The harness (never the factory) makes the first call (timed as compile), warms up, then times
``step()`` K times per repeat and blocks once at the end of the repeat with ``sync(last_output)``
(default ``jax.block_until_ready``). Factories must not call ``step`` themselves.

A module may also define ``warmup()``: called once after import, before any measurement, to pay
one-off library costs (first trace, lazy imports) that would otherwise land on the first workload.
"""

from __future__ import annotations

import gc
import importlib
import json
import math
import os
import statistics
import subprocess
import sys
import time
import traceback
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jax
import numpy as np

from bench.workloads import WORKLOADS, Workload

# --------------------------------------------------------------------------------------------
# Registry
# --------------------------------------------------------------------------------------------


@dataclass
class Bench:
    """What a factory returns (a bare ``step`` callable is wrapped into one).

    step: runs one training step; returns the loss (scalar array) or a tuple whose first item is it.
    sync: blocks until everything ``step`` dispatched is done; gets step's last output.
          Default: ``jax.block_until_ready(output)``. Override if your step returns before its
          parameter updates are enqueued (e.g. updates stored on Python objects).
    loss: optional ``loss(output) -> float`` to extract the loss for --check; default: the output
          itself, or its first item if it is a tuple/list.
    """

    step: Callable[[], Any]
    sync: Callable[[Any], Any] | None = None
    loss: Callable[[Any], Any] | None = None

    def block(self, out: Any) -> None:
        if self.sync is not None:
            self.sync(out)
        else:
            jax.block_until_ready(out)

    def loss_of(self, out: Any) -> float:
        if self.loss is not None:
            return float(self.loss(out))
        if isinstance(out, (tuple, list)):
            out = out[0]
        return float(np.asarray(out))


Factory = Callable[[Workload], "Bench | Callable[[], Any]"]


@dataclass
class Entry:
    workload: str
    name: str
    factory: Factory
    module: str


REGISTRY: dict[str, list[Entry]] = {}


def register(workload: str | Iterable[str], name: str) -> Callable[[Factory], Factory]:
    """Decorator: register ``factory(wl) -> step | Bench`` as contender ``name`` for ``workload``(s)."""
    names = [workload] if isinstance(workload, str) else list(workload)

    def deco(factory: Factory) -> Factory:
        for w in names:
            if w not in WORKLOADS:
                raise ValueError(f"register: unknown workload {w!r}; known: {', '.join(WORKLOADS)}")
            entries = REGISTRY.setdefault(w, [])
            if any(e.name == name for e in entries):
                raise ValueError(f"register: contender {name!r} already registered for {w!r}")
            entries.append(Entry(w, name, factory, factory.__module__))
        return factory

    return deco


# Contender modules, imported in this order. Only the pure-JAX baseline is mandatory.
CONTENDER_MODULES = (
    "bench.contenders_jax",
    "bench.contenders_equinox",
    "bench.contenders_nnx",
    "bench.contenders_fluxjax",
)
REQUIRED_MODULES = ("bench.contenders_jax",)
_loaded: dict[str, Any] = {}
LOAD_NOTES: list[str] = []


def load_contenders(verbose: bool = True, warm: bool = True) -> None:
    """Import every contender module (optional ones may fail with a printed note)."""
    for modname in CONTENDER_MODULES:
        if modname in _loaded:
            continue
        try:
            mod = importlib.import_module(modname)
        except Exception as e:  # optional contenders must never stop the harness
            if modname in REQUIRED_MODULES:
                raise
            if isinstance(e, ModuleNotFoundError) and e.name == modname:
                note = f"{modname}: not present (skipped)"
            else:
                note = f"{modname}: import failed, skipped: {type(e).__name__}: {e}"
            LOAD_NOTES.append(note)
            if verbose:
                print(f"note: {note}", file=sys.stderr)
            continue
        _loaded[modname] = mod
        fn = getattr(mod, "warmup", None)
        if warm and callable(fn):
            try:
                fn()
            except Exception as e:
                note = f"{modname}.warmup() failed: {type(e).__name__}: {e}"
                LOAD_NOTES.append(note)
                if verbose:
                    print(f"note: {note}", file=sys.stderr)


def entries_for(wl: Workload, only: Sequence[str] | None = None) -> list[Entry]:
    """Contenders of a workload, baseline first, then registration order; ``only`` filters by substring."""
    es = list(REGISTRY.get(wl.name, []))
    if only:
        es = [e for e in es if e.name == wl.baseline or any(s.lower() in e.name.lower() for s in only)]
    es.sort(key=lambda e: e.name != wl.baseline)
    return es


def find_entry(workload: str, name: str) -> Entry:
    for e in REGISTRY.get(workload, []):
        if e.name == name:
            return e
    have = [e.name for e in REGISTRY.get(workload, [])]
    raise SystemExit(f"no contender {name!r} for workload {workload!r}; have {have}")


def build(entry: Entry, wl: Workload) -> Bench:
    b = entry.factory(wl)
    if isinstance(b, Bench):
        return b
    if callable(b):
        return Bench(step=b)
    raise TypeError(f"{entry.module}: factory for {entry.name!r} returned {type(b).__name__}, not a callable")


# --------------------------------------------------------------------------------------------
# Measurement
# --------------------------------------------------------------------------------------------


@dataclass
class Settings:
    repeats: int = 21  # R: timed repeats per contender (interleaved)
    target_repeat_s: float = 0.25  # a repeat lasts about this long (K chosen from warm-up timing)
    min_steps: int = 2  # K never below this
    max_steps: int = 20000
    warm_steps: int = 3  # untimed steps after the compile call


QUICK = Settings(repeats=5, target_repeat_s=0.05, warm_steps=2)


@dataclass
class Result:
    workload: str
    contender: str
    module: str
    status: str = "ok"  # "ok" or an error message
    loss0: float | None = None
    first_call_s: float | None = None
    compile_s: float | None = None
    us_per_step: float | None = None  # median over repeats
    us_p25: float | None = None
    us_p75: float | None = None
    steps_per_repeat: int | None = None
    repeats: int = 0
    samples_us: list[float] = field(default_factory=list)
    peak_rss_mb: float | None = None
    rss_after_import_mb: float | None = None
    peak_device_mb: float | None = None
    check: str | None = None


def _err(e: BaseException) -> str:
    return f"error: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:200]


def _time_block(b: Bench, k: int) -> float:
    """Seconds for k steps, blocking once at the end."""
    step = b.step
    t0 = time.perf_counter()
    out = None
    for _ in range(k):
        out = step()
    b.block(out)
    return time.perf_counter() - t0


def run_workload(wl: Workload, s: Settings, only: Sequence[str] | None = None, log=print) -> list[Result]:
    entries = entries_for(wl, only)
    results = [Result(wl.name, e.name, e.module) for e in entries]
    live: list[tuple[Result, Bench]] = []
    gc.collect()
    # 1. build all (untimed), 2. first call of each (compile), 3. warm-up. Errors disable one contender.
    for e, r in zip(entries, results):
        try:
            b = build(e, wl)
            t0 = time.perf_counter()
            out = b.step()
            b.block(out)
            r.first_call_s = time.perf_counter() - t0
            r.loss0 = b.loss_of(out)
            for _ in range(s.warm_steps):
                b.block(b.step())
            live.append((r, b))
            log(f"  {e.name:<28} first call {r.first_call_s:7.3f} s   loss0 {r.loss0:.4f}")
        except Exception as ex:
            r.status = _err(ex)
            log(f"  {e.name:<28} FAILED: {r.status}")
            if os.environ.get("BENCH_TRACEBACK"):
                traceback.print_exc()
    if not live:
        return results
    # Choose K from a short calibration (median of a few single blocked steps, per contender);
    # one K for the whole workload so every contender does identical work per repeat.
    per_step = []
    for _, b in live:
        ts = [_time_block(b, 1) for _ in range(3)]
        per_step.append(statistics.median(ts))
    typical = statistics.median(per_step)
    k = int(min(s.max_steps, max(s.min_steps, round(s.target_repeat_s / max(typical, 1e-7)))))
    # Interleaved repeats: round-robin over contenders, rotating who goes first.
    samples: dict[int, list[float]] = {i: [] for i in range(len(live))}
    for rep in range(s.repeats):
        order = [(i + rep) % len(live) for i in range(len(live))]
        for i in order:
            r, b = live[i]
            try:
                samples[i].append(_time_block(b, k) / k * 1e6)
            except Exception as ex:  # a contender failing mid-run is reported, others continue
                r.status = _err(ex)
        live_ok = [(i, rb) for i, rb in enumerate(live) if rb[0].status == "ok"]
        if not live_ok:
            break
    for i, (r, _) in enumerate(live):
        xs = samples[i]
        if r.status != "ok" or not xs:
            continue
        r.samples_us = [round(x, 3) for x in xs]
        r.repeats = len(xs)
        r.steps_per_repeat = k
        r.us_per_step = statistics.median(xs)
        q = np.percentile(xs, [25, 75])
        r.us_p25, r.us_p75 = float(q[0]), float(q[1])
        r.compile_s = max(0.0, r.first_call_s - r.us_per_step * 1e-6)
    del live
    gc.collect()
    return results


# --------------------------------------------------------------------------------------------
# --check: finite loss that decreases over the first 20 steps
# --------------------------------------------------------------------------------------------


def check_one(entry: Entry, wl: Workload, steps: int = 20) -> tuple[bool, str, list[float]]:
    try:
        b = build(entry, wl)
        losses = []
        outs = []
        for _ in range(steps):
            out = b.step()
            b.block(out)
            losses.append(b.loss_of(out))
            outs.append(out)
    except Exception as ex:
        return False, _err(ex), []
    if not all(math.isfinite(v) for v in losses):
        return False, "non-finite loss", losses
    arrays = [x for x in jax.tree.leaves(outs[-1]) if isinstance(x, (jax.Array, np.ndarray))]
    leaves_ok = all(bool(np.all(np.isfinite(np.asarray(x)))) for x in arrays
                    if np.issubdtype(x.dtype, np.floating))
    if not leaves_ok:
        return False, "non-finite values in step output", losses
    if wl.trains:
        if not losses[-1] < losses[0]:
            return False, f"loss did not decrease: {losses[0]:.4f} -> {losses[-1]:.4f}", losses
        return True, f"{losses[0]:.4f} -> {losses[-1]:.4f}", losses
    # gradient-only workloads: the loss must be the same every call (no hidden update)
    if max(losses) - min(losses) > 1e-4 * max(1.0, abs(losses[0])):
        return False, f"loss changed without an update: {min(losses)}..{max(losses)}", losses
    return True, f"{losses[0]:.4f} (constant, grads finite)", losses


# --------------------------------------------------------------------------------------------
# --memory: one fresh subprocess per (workload, contender)
# --------------------------------------------------------------------------------------------

ONE_PREFIX = "BENCH_ONE_RESULT "


def measure_memory(wl: Workload, entry: Entry, steps: int, runs: int = 3, timeout: float = 600.0) -> dict:
    """`runs` fresh subprocesses of `python -m bench.one`; the run with the median peak (peak RSS of
    one and the same process varies by ±20 MB from run to run: allocator arenas, compile threads)."""
    ok, err = [], None
    for _ in range(runs):
        m = _one_memory_run(wl, entry, steps, timeout)
        if m.get("status") == "ok" and m.get("peak_rss_mb") is not None:
            ok.append(m)
        else:
            err = m
    if not ok:
        return err or {"status": "error: no run"}
    ok.sort(key=lambda m: m["peak_rss_mb"])
    return {**ok[len(ok) // 2], "runs": len(ok)}


def _one_memory_run(wl: Workload, entry: Entry, steps: int, timeout: float) -> dict:
    cmd = [sys.executable, "-m", "bench.one", wl.name, entry.name, "--steps", str(steps)]
    root = Path(__file__).resolve().parent.parent
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=root)
    except subprocess.TimeoutExpired:
        return {"status": "error: timeout"}
    for line in p.stdout.splitlines():
        if line.startswith(ONE_PREFIX):
            return json.loads(line[len(ONE_PREFIX):])
    tail = (p.stderr or p.stdout).strip().splitlines()[-1:] or ["no output"]
    return {"status": f"error: rc={p.returncode}: {tail[0][:160]}"}
