"""fluxjax benchmark harness: ``python -m bench`` (see bench/README in __main__.py's --help).

Importing this package sets a few environment *defaults* (never overriding what the caller set,
never unsetting anything) before JAX is imported, so every contender runs under the same XLA setup.
"""

import os

# GPU/TPU: allocate on demand, so that per-contender peak device memory (--memory) means something
# and several subprocesses can share one accelerator. Harmless on CPU.
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
# Keep XLA's C++ logging quiet; errors still print.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")
# XLA's CPU backend already uses one intra-op thread per core. We deliberately do not force a host
# device count: one device, as a user's training script would have (see environment.env_warnings()).
