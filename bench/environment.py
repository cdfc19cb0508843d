"""What the report records about the run: the machine, its load, the versions, and warnings about the
environment that make timings less representative."""


from __future__ import annotations

import os
import platform
import re
import subprocess
from pathlib import Path

import jax


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
