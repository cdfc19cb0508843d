"""python -m bench.scaling [--depths 16,64,256] [--out bench/SCALING.md]

How fluxjax's costs grow with the number of arrays, against pure JAX + optax in the same process: a
flat `Chain` of `n` `Dense(4 => 4)` layers (2n arrays), Adam, batch 2. For each depth:

* `params(m)` and `setup(Adam(), m)` (optax: `adam.init` of the same arrays, eager);
* the compiled training step: compile time (first call − one warm call) and warm time, `fluxjax.jit`
  against `jax.jit` of the same step written by hand;
* the eager loop (`gradient` then `update_`, fused: one program per step);
* the eager `update_` that runs alone (a loop that edits its gradients), against a `jax.jit` optax
  update of the same arrays.

Warm times are medians of `--repeats` turns of `--steps` calls, the contenders' turns interleaved.
Each depth's pure-JAX programs compile first; one-off library costs are paid by a depth-2 round
that is not reported.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import jax
import jax.numpy as jnp
import optax

import fluxjax as Flux
from bench import environment

HERE = Path(__file__).resolve().parent


def _interleaved(fs: dict, steps: int, repeats: int) -> dict:
    """Median seconds per call of each of `fs`, timed in turns of `steps` calls (each turn ends
    blocked), one turn of each per repeat, the starting one rotating."""
    names = list(fs)
    out: dict = {k: [] for k in names}
    for r in range(repeats):
        for k in names[r % len(names):] + names[:r % len(names)]:
            t = time.perf_counter()
            for _ in range(steps):
                res = fs[k]()
            jax.block_until_ready(res)
            out[k].append((time.perf_counter() - t) / steps)
    return {k: statistics.median(v) for k, v in out.items()}


def _first(f) -> float:
    t = time.perf_counter()
    jax.block_until_ready(f())
    return time.perf_counter() - t


def measure(n: int, steps: int, repeats: int) -> dict:
    """Every number of one depth (seconds)."""
    x = jnp.ones((4, 2))
    r: dict = {"layers": n, "arrays": 2 * n}

    # pure JAX + optax
    m = Flux.Chain(*[Flux.Dense(4, 4) for _ in range(n)])
    ps = [(layer.weight, layer.bias) for layer in m.layers]
    opt = optax.adam(1e-3)

    def loss(ps, x):
        for w, b in ps:
            x = w @ x + b[:, None]
        return jnp.sum(x)

    @jax.jit
    def step(ps, st, x):
        g = jax.grad(loss)(ps, x)
        u, st = opt.update(g, st, ps)
        return optax.apply_updates(ps, u), st

    @jax.jit
    def update(g, st, ps):
        u, st = opt.update(g, st, ps)
        return optax.apply_updates(ps, u), st

    t = time.perf_counter()
    st = jax.block_until_ready(opt.init(ps))
    r["jax_init"] = time.perf_counter() - t
    box = [ps, st]

    def jstep():
        box[0], box[1] = step(box[0], box[1], x)
        return box[0]

    first = {"jax_step": _first(jstep)}
    g = jax.grad(loss)(ps, x)

    def jupdate():
        box[0], box[1] = update(g, box[1], box[0])
        return box[0]

    first["jax_update"] = _first(jupdate)

    # fluxjax
    t = time.perf_counter()
    Flux.params(m)
    r["params"] = time.perf_counter() - t
    t = time.perf_counter()
    s = jax.block_until_ready(Flux.setup(Flux.Adam(1e-3), m))
    r["setup"] = time.perf_counter() - t

    @Flux.jit
    def fstep(m, s, x):
        g = Flux.gradient(lambda m: jnp.sum(m(x)), m)[0]
        Flux.update_(s, m, g)
        return m.layers[0].weight

    first["step"] = _first(lambda: fstep(m, s, x))

    m2 = Flux.Chain(*[Flux.Dense(4, 4) for _ in range(n)])
    s2 = Flux.setup(Flux.Adam(1e-3), m2)

    def eager():
        g = Flux.gradient(lambda m: jnp.sum(m(x)), m2)[0]
        Flux.update_(s2, m2, g)
        return m2.layers[0].weight

    first["eager"] = _first(eager)

    g2 = Flux.gradient(lambda m: jnp.sum(m(x)), m2, jit=False)[0]  # not the last gradient: not fused

    def alone():
        Flux.update_(s2, m2, g2)
        return m2.layers[0].weight

    first["update"] = _first(alone)
    fs = {"jax_step": jstep, "jax_update": jupdate, "step": lambda: fstep(m, s, x), "eager": eager, "update": alone}
    r.update(_interleaved(fs, steps, repeats))
    r["jax_compile"] = first["jax_step"] - r["jax_step"]
    r["jax_update_compile"] = first["jax_update"] - r["jax_update"]
    r["compile"] = first["step"] - r["step"]
    r["update_compile"] = first["update"] - r["update"]
    return r


COLUMNS = [
    ("params ms", lambda r: f"{r['params'] * 1e3:.1f}"),
    ("setup ms (optax init)", lambda r: f"{r['setup'] * 1e3:.0f} ({r['jax_init'] * 1e3:.0f})"),
    ("step compile s (JAX)", lambda r: f"{r['compile']:.2f} ({r['jax_compile']:.2f})"),
    ("compile ratio", lambda r: f"{r['compile'] / r['jax_compile']:.2f}×"),
    ("jit step ms (JAX)", lambda r: f"{r['step'] * 1e3:.2f} ({r['jax_step'] * 1e3:.2f})"),
    ("step ratio", lambda r: f"{r['step'] / r['jax_step']:.2f}×"),
    ("eager loop ms", lambda r: f"{r['eager'] * 1e3:.2f}"),
    ("eager ratio", lambda r: f"{r['eager'] / r['jax_step']:.2f}×"),
    ("update_ alone ms (JAX)", lambda r: f"{r['update'] * 1e3:.1f} ({r['jax_update'] * 1e3:.2f})"),
    ("update_ compile s (JAX)", lambda r: f"{r['update_compile']:.2f} ({r['jax_update_compile']:.2f})"),
    ("µs per array: params, setup, update_", lambda r: " / ".join(
        f"{r[k] / r['arrays'] * 1e6:.1f}" for k in ("params", "setup", "update"))),
]


def render(rows: list[dict], argv: list[str], machine: dict, elapsed: float) -> str:
    lines = [
        "# fluxjax scaling with model size",
        "",
        f"Generated by `python -m bench.scaling {' '.join(argv)}`".rstrip() + " on "
        f"{datetime.now(timezone.utc).strftime('%Y-%m-%d %H:%M UTC')} in {elapsed:.0f} s. Regenerate rather than edit.",
        "",
        f"Machine: {machine['cpu']}, {machine['usable_cores']} usable cores, JAX backend {machine['jax_backend']}; "
        f"load average at start {machine['load_start']}, at end {environment.load_average()}.",
        "",
        "## Method",
        "",
        *__doc__.split("\n\n", 1)[1].strip().splitlines(),
        "",
        "Ratios are to pure JAX + optax (the eager loop's to the pure JAX compiled step).",
        "",
        "## Results",
        "",
        "| arrays | " + " | ".join(c for c, _ in COLUMNS) + " |",
        "|---:|" + "---:|" * len(COLUMNS),
    ]
    for r in rows:
        lines.append(f"| {r['arrays']} | " + " | ".join(f(r) for _, f in COLUMNS) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    ap = argparse.ArgumentParser(prog="python -m bench.scaling", description=__doc__.splitlines()[0])
    ap.add_argument("--depths", default="16,64,256", help="comma-separated numbers of Dense layers")
    ap.add_argument("--steps", type=int, default=10, help="calls per timed turn")
    ap.add_argument("--repeats", type=int, default=9, help="timed turns (median taken)")
    ap.add_argument("--out", type=Path, default=HERE / "SCALING.md")
    a = ap.parse_args(argv)
    machine = environment.machine_info()
    start = time.perf_counter()
    measure(2, 2, 1)  # one-off costs of both libraries
    rows = []
    for n in (int(d) for d in a.depths.split(",")):
        rows.append(measure(n, a.steps, a.repeats))
        print(" | ".join([f"{rows[-1]['arrays']} arrays", *(f"{c} {f(rows[-1])}" for c, f in COLUMNS)]), flush=True)
    a.out.write_text(render(rows, argv, machine, time.perf_counter() - start))
    print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
