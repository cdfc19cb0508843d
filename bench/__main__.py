"""python -m bench [--quick] [--workloads a,b] [--contenders x,y] [--memory] [--check] [--out PATH]

Times every registered contender of each workload in one process, interleaved, and writes a
Markdown report (default bench/RESULTS.md) plus the raw numbers as JSON next to it.
Workloads: mlp_tiny, mlp_medium, cnn_bn, lstm, eager_grad, layout_mlp, layout_cnn (group: layout).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from bench import environment, harness, report
from bench.workloads import resolve

HERE = Path(__file__).resolve().parent


def parse(argv):
    ap = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="few short repeats (smoke test, < 2 min)")
    ap.add_argument("--workloads", help="comma-separated workloads or groups (default: all)")
    ap.add_argument("--contenders", help="comma-separated substrings of contender names "
                    "(the baseline always runs)")
    ap.add_argument("--memory", action="store_true",
                    help="also measure peak RSS per contender, each in a fresh subprocess (slower)")
    ap.add_argument("--memory-steps", type=int, default=None, help="steps per memory subprocess")
    ap.add_argument("--memory-runs", type=int, default=None,
                    help="memory subprocesses per contender, median taken (default 3; 1 with --quick)")
    ap.add_argument("--check", action="store_true",
                    help="only check: loss finite and decreasing over 20 steps; exit 1 on failure")
    ap.add_argument("--repeats", type=int, help="override the number of interleaved repeats")
    ap.add_argument("--target-ms", type=float, help="override the length of one timed turn (ms)")
    ap.add_argument("--out", type=Path, default=HERE / "RESULTS.md", help="report path")
    ap.add_argument("--json", type=Path, help="raw results path (default: --out with .json)")
    return ap.parse_args(argv)


def run_check(workloads, only) -> int:
    bad = 0
    for wl in workloads:
        print(f"[{wl.name}] {wl.title}")
        curves = {}
        for e in harness.entries_for(wl, only):
            ok, msg, losses = harness.check_one(e, wl)
            bad += not ok
            curves[e.name] = losses
            print(f"  {'ok  ' if ok else 'FAIL'} {e.name:<28} {msg}")
        if wl.same_init:  # same weights and data in every layout: the loss curves must agree
            ref = curves.get(wl.baseline) or []
            differ = [n for n, ls in curves.items()
                      if ref and ls and any(abs(a - b) > 1e-3 * max(1.0, abs(a)) for a, b in zip(ref, ls))]
            for name in differ:
                print(f"  FAIL {name:<28} loss curve differs from {wl.baseline}")
            bad += len(differ)
            if ref and not differ:
                print(f"  {'':4} same-init: {len(curves)} loss curves agree with the baseline to 1e-3")
    print("all checks passed" if not bad else f"{bad} check(s) FAILED")
    return 1 if bad else 0


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    a = parse(argv)
    t_start = time.perf_counter()
    workloads = resolve(a.workloads)
    only = [s.strip() for s in a.contenders.split(",")] if a.contenders else None
    for w in environment.env_warnings():
        print(f"warning: {w}", file=sys.stderr)
    machine = environment.machine_info()  # records the load average before we add to it
    harness.load_contenders()
    if a.check:
        return run_check(workloads, only)

    s = harness.QUICK if a.quick else harness.Settings()
    if a.repeats:
        s.repeats = a.repeats
    if a.target_ms:
        s.target_repeat_s = a.target_ms / 1000
    results: dict[str, list[harness.Result]] = {}
    for wl in workloads:
        print(f"[{wl.name}] {wl.title}", flush=True)
        rs = harness.run_workload(wl, s, only)
        base = next((r.us_per_step for r in rs if r.contender == wl.baseline), None)
        for r in rs:
            if r.us_per_step is not None:
                ratio = f"{r.us_per_step / base:5.2f}x" if base else "   —"
                print(f"  {r.contender:<28} {r.us_per_step:11.1f} us/step  {ratio}   "
                      f"compile {r.compile_s:6.3f} s", flush=True)
        results[wl.name] = rs

    if a.memory:
        steps = a.memory_steps or (10 if a.quick else 50)
        runs = a.memory_runs or (1 if a.quick else 3)
        print(f"[memory] {runs} subprocess(es) per contender, {steps} steps each, median peak", flush=True)
        for wl in workloads:
            for r in results[wl.name]:
                m = harness.measure_memory(wl, harness.find_entry(wl.name, r.contender), steps, runs)
                r.peak_rss_mb = m.get("peak_rss_mb")
                r.rss_after_import_mb = m.get("rss_after_import_mb")
                r.peak_device_mb = m.get("peak_device_mb")
                print(f"  {wl.name:<11} {r.contender:<28} peak {r.peak_rss_mb} MB "
                      f"(after imports {r.rss_after_import_mb} MB) {m.get('status')}", flush=True)

    elapsed = time.perf_counter() - t_start
    out: Path = a.out
    meta = dict(argv=argv, settings=vars(s), machine=machine, versions=environment.versions(),
                notes=list(harness.LOAD_NOTES))
    meta["machine"]["load_end"] = environment.load_average()
    text = report.render(results, settings=s, argv=argv, memory=a.memory, machine=meta["machine"],
                         vers=meta["versions"], reading=report.preserved_reading(out),
                         notes=harness.LOAD_NOTES, elapsed_s=elapsed)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    js = a.json or out.with_suffix(".json")
    js.write_text(report.results_json(results, **meta))
    print(f"wrote {out} and {js} ({elapsed:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
