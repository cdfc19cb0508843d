"""Registry, timing (interleaved, medians), checks and the RESULTS.md report.

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
import platform
import re
import statistics
import subprocess
import sys
import time
import traceback
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
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


# --------------------------------------------------------------------------------------------
# Environment description
# --------------------------------------------------------------------------------------------


def machine_info() -> dict:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem_gb = None
    try:
        m = re.search(r"MemTotal:\s+(\d+) kB", Path("/proc/meminfo").read_text())
        mem_gb = round(int(m.group(1)) / 2**20, 1) if m else None
    except OSError:
        pass
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count()
    devs = jax.devices()
    return {
        "load_start": load_average(),
        "cpu": cpu,
        "cores": os.cpu_count(),
        "usable_cores": usable,
        "memory_gb": mem_gb,
        "platform": platform.platform(),
        "jax_backend": jax.default_backend(),
        "devices": [f"{d.platform}:{d.id} {getattr(d, 'device_kind', '')}".strip() for d in devs],
        "env": {k: os.environ[k] for k in ("XLA_FLAGS", "JAX_PLATFORMS", "XLA_PYTHON_CLIENT_PREALLOCATE",
                                           "JAX_ENABLE_X64") if k in os.environ},
    }


def load_average() -> tuple[float, float, float] | None:
    try:
        return tuple(round(x, 2) for x in os.getloadavg())
    except OSError:
        return None


def versions() -> dict:
    from importlib import metadata

    out = {"python": platform.python_version()}
    for pkg in ("jax", "jaxlib", "optax", "flax", "equinox", "numpy"):
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            out[pkg] = "not installed"
    try:
        import fluxjax  # noqa: F401

        v = getattr(fluxjax, "__version__", None)
        if v is None:
            try:
                v = metadata.version("fluxjax")
            except metadata.PackageNotFoundError:
                v = "importable (no version)"
        out["fluxjax"] = v
    except Exception as e:
        out["fluxjax"] = f"not importable ({type(e).__name__})"
    try:
        root = Path(__file__).resolve().parent.parent
        rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                             cwd=root, timeout=10)
        if rev.returncode == 0:
            out["repo commit"] = rev.stdout.strip()
    except Exception:
        pass
    return out


def env_warnings() -> list[str]:
    w = []
    flags = os.environ.get("XLA_FLAGS", "")
    if "force_host_platform_device_count" in flags:
        w.append("XLA_FLAGS forces several host devices; timings use device 0 only but the CPU "
                 "thread pool is shared — unset it for representative numbers.")
    la = load_average()
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:
        cores = os.cpu_count() or 1
    if la and la[0] > 0.5 * cores:
        w.append(f"load average {la[0]} on {cores} cores: other processes compete for the CPU; "
                 "interleaving keeps ratios comparable but absolute times will be inflated.")
    if os.environ.get("JAX_ENABLE_X64"):
        w.append("JAX_ENABLE_X64 is set; workloads still use float32 data.")
    return w


# --------------------------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------------------------

READING_START = "<!-- reading:start -->"
READING_END = "<!-- reading:end -->"
READING_PLACEHOLDER = (
    "_(Human-written interpretation goes here. Text between the reading markers is preserved when the "
    "harness regenerates this file.)_"
)


def preserved_reading(path: Path) -> str:
    try:
        text = path.read_text()
    except OSError:
        return READING_PLACEHOLDER
    i, j = text.find(READING_START), text.find(READING_END)
    if i == -1 or j == -1 or j < i:
        return READING_PLACEHOLDER
    body = text[i + len(READING_START):j].strip("\n")
    return body if body.strip() else READING_PLACEHOLDER


def _fmt(v: float | None, spec: str) -> str:
    return "—" if v is None else format(v, spec)


def _ratio(v: float | None, base: float | None) -> str:
    if v is None or base is None or base <= 0:
        return "—"
    return f"{v / base:.2f}×"


def _us(v: float | None) -> str:
    if v is None:
        return "—"
    return f"{v:,.1f}" if v < 1000 else f"{v:,.0f}"


def render(results: dict[str, list[Result]], *, settings: Settings, argv: Sequence[str], memory: bool,
           machine: dict, vers: dict, reading: str, notes: Sequence[str], elapsed_s: float) -> str:
    L: list[str] = []
    a = L.append
    a("# fluxjax benchmarks")
    a("")
    a(f"Generated by `python -m bench {' '.join(argv)}`".rstrip() + f" on "
      f"{datetime.now(timezone.utc).strftime('%Y-%m-%d %H:%M UTC')} in {elapsed_s:.0f} s. "
      "Regenerate rather than edit; only the Reading section is kept across runs.")
    a("")
    a("## Machine")
    a("")
    a(f"- CPU: {machine['cpu']} — {machine['cores']} cores ({machine['usable_cores']} usable), "
      f"{machine['memory_gb']} GiB RAM")
    a(f"- JAX backend: {machine['jax_backend']}; devices: {', '.join(machine['devices'])}")
    a(f"- OS: {machine['platform']}")
    ls, le = machine.get("load_start"), machine.get("load_end")
    if ls:
        busy = " — **machine was busy: absolute µs are inflated; trust ratios more**" if (
            max(ls[0], (le or ls)[0]) > 0.5 * (machine["usable_cores"] or 1)) else ""
        a(f"- Load average (1/5/15 min) at start {ls}" + (f", at end {le}" if le else "") + busy)
    if machine["env"]:
        a("- Environment: " + ", ".join(f"`{k}={v}`" for k, v in machine["env"].items()))
    a("")
    a("## Versions")
    a("")
    a(", ".join(f"{k} {v}" for k, v in vers.items()))
    a("")
    a("## Method")
    a("")
    a(f"All contenders of a workload live in one process and are timed **interleaved**: {settings.repeats} "
      "repeats, each a round-robin over the contenders (the starting contender rotates), each turn "
      "K back-to-back `step()` calls followed by one `block_until_ready` (K is the same for every "
      f"contender of a workload, chosen so a turn lasts ≈{settings.target_repeat_s * 1000:.0f} ms). "
      "µs/step is the median over repeats; p25–p75 gives the spread. A step is a full training step "
      "(forward + loss + gradient + optimiser update, float32, Adam(1e-3), data fixed on device) "
      "except for `eager_grad` (value and gradient only, not jitted). No buffer donation anywhere. "
      "**compile s** = first call − one steady step (trace + lower + compile); for `eager_grad` it is "
      "the first-call overhead of op-by-op dispatch, whose per-primitive caches are shared by all "
      "contenders in the process, so the first contender (the baseline) pays most of it and no "
      "compile ratio is given. "
      "Ratios are to the workload's baseline (pure JAX + optax; for `layout_*`, batch-major NHWC). "
      "loss₀ is the first step's loss (inits differ across libraries; ≈ ln 10 = 2.30 expected).")
    if memory:
        a("")
        a("**Peak memory** comes from a fresh subprocess per (workload, contender) "
          "(`python -m bench.one WORKLOAD CONTENDER`): peak RSS over build + compile + N steps (Linux "
          "`VmHWM`, reset after imports via /proc/self/clear_refs; else `ru_maxrss`), the median of "
          "`--memory-runs` such processes (the peak of one process varies by about ±20 MB run to run). "
          "Every subprocess "
          "imports all contender libraries first, so Δ = peak − RSS after imports isolates the "
          "contender's own model, compiled program, tracing garbage and buffers. On GPU/TPU the "
          "device peak is in RESULTS.json (`peak_device_mb`).")
    for n in notes:
        a(f"\n> note: {n}")
    a("")

    # Summary matrix of time ratios
    a("## Summary: µs/step ratio to baseline")
    a("")
    names: list[str] = []
    for rs in results.values():
        for r in rs:
            if r.contender not in names:
                names.append(r.contender)
    a("| workload | " + " | ".join(names) + " |")
    a("|---|" + "---:|" * len(names))
    for w, rs in results.items():
        base = next((r.us_per_step for r in rs if r.contender == WORKLOADS[w].baseline), None)
        by = {r.contender: r for r in rs}
        cells = []
        for n in names:
            r = by.get(n)
            if r is None:
                cells.append("")
            elif r.status != "ok":
                cells.append("error")
            else:
                cells.append(_ratio(r.us_per_step, base))
        a(f"| {w} | " + " | ".join(cells) + " |")
    a("")

    for w, rs in results.items():
        wl = WORKLOADS[w]
        base = next((r for r in rs if r.contender == wl.baseline), None)
        bt = base.us_per_step if base else None
        bc = base.compile_s if base else None
        bm = base.peak_rss_mb if base else None
        a(f"## {w}")
        a("")
        a(f"{wl.title}. Baseline: {wl.baseline}.")
        a("")
        hdr = "| contender | µs/step | p25–p75 | ratio | compile s | compile ratio | loss₀ |"
        sep = "|---|---:|---:|---:|---:|---:|---:|"
        bd = (base.peak_rss_mb - base.rss_after_import_mb
              if base and base.peak_rss_mb is not None and base.rss_after_import_mb is not None else None)
        if memory:
            hdr += " peak MB | mem ratio | Δ MB | Δ ratio |"
            sep += "---:|---:|---:|---:|"
        a(hdr)
        a(sep)
        for r in rs:
            if r.status != "ok":
                row = f"| {r.contender} | {r.status} | | | | | |"
                if memory:
                    row += " | | | |"
                a(row)
                continue
            row = (f"| {r.contender} | {_us(r.us_per_step)} | {_us(r.us_p25)}–{_us(r.us_p75)} | "
                   f"{_ratio(r.us_per_step, bt)} | {_fmt(r.compile_s, '.3f')} | "
                   f"{'n/a' if wl.eager else _ratio(r.compile_s, bc)} | "
                   f"{_fmt(r.loss0, '.4f')} |")
            if memory:
                delta = (r.peak_rss_mb - r.rss_after_import_mb
                         if r.peak_rss_mb is not None and r.rss_after_import_mb is not None else None)
                row += (f" {_fmt(r.peak_rss_mb, '.0f')} | {_ratio(r.peak_rss_mb, bm)} | {_fmt(delta, '.1f')} | "
                        f"{_ratio(delta, bd)} |")
            a(row)
        k = next((r.steps_per_repeat for r in rs if r.steps_per_repeat), None)
        if k:
            a("")
            a(f"K = {k} steps per turn, {max(r.repeats for r in rs)} repeats.")
        if w.startswith("layout") and bt:
            a("")
            for r in rs:
                if r is not base and r.us_per_step:
                    a(f"- **{r.contender} / {wl.baseline} = {r.us_per_step / bt:.2f}×** (µs/step), "
                      f"compile {_ratio(r.compile_s, bc)}")
        a("")

    a("## Reading")
    a("")
    a(READING_START)
    a(reading)
    a(READING_END)
    a("")
    return "\n".join(L)


def results_json(results: dict[str, list[Result]], **meta) -> str:
    return json.dumps({**meta, "results": {w: [asdict(r) for r in rs] for w, rs in results.items()}},
                      indent=1, default=str)
