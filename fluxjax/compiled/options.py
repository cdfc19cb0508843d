"""The XLA options `fluxjax.jit` compiles its programs with, unless the caller gives others.

On XLA:CPU, the concurrency-optimised scheduler (on by default) orders a training step so that
independent kernels can overlap. For Flux's feature-major layers that order cost the medium MLP of
the benchmarks (784→256→256→10, batch 128, Adam) about 20% of its step on a 2-core machine, while
the hand-written batch-major JAX step did not change: with the memory-optimised scheduler fluxjax's
step took 1.00-1.02x the pure JAX one, against 1.21-1.26x with the default. The tiny MLP, the LeNet
CNN and the LSTM ran as fast either way. The results are bit-identical; only the order of
independent kernels changes.
"""

from __future__ import annotations

import functools
from typing import Any

import jax

_CPU = {"xla_cpu_scheduler_type": "CPU_SCHEDULER_TYPE_MEMORY_OPTIMIZED"}


@functools.cache
def _defaults() -> dict[str, Any]:
    """`_CPU` when the default backend is XLA:CPU and its jaxlib knows the options, else nothing."""
    if jax.default_backend() != "cpu":
        return {}
    try:
        jax.jit(lambda x: x + 1, compiler_options=_CPU)(0.0)
    except Exception:  # a jaxlib without these options ("No such compile option")
        return {}
    return dict(_CPU)


def with_defaults(jit_kwargs: dict[str, Any]) -> dict[str, Any]:
    """`jax.jit` keywords with fluxjax's compiler options added; the caller's `compiler_options` win."""
    defaults = _defaults()
    if not defaults:
        return jit_kwargs
    return {**jit_kwargs, "compiler_options": {**defaults, **(jit_kwargs.get("compiler_options") or {})}}
