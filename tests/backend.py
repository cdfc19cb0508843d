"""The default JAX backend, for the few tests that read XLA:CPU's compiled programs."""

import jax
import pytest

ON_CPU = jax.default_backend() == "cpu"
cpu_only = pytest.mark.skipif(not ON_CPU, reason="reads what XLA:CPU compiles (CPU-specific schedule or layout)")
