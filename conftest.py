"""Test-wide settings for tests/ and compat/."""

import os

# The suite runs in one process per core (pytest-xdist, see pyproject.toml): on a GPU each would
# otherwise reserve 75% of its memory when it starts.
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import jax  # noqa: E402
import pytest  # noqa: E402

# The tests check Flux's formulas and numbers at float32. On GPUs and TPUs, JAX computes float32 matrix
# products and convolutions at a lower default precision (TF32, bf16 passes); "highest" is float32, as
# XLA:CPU and Julia compute them. (A no-op on a CPU.)
jax.config.update("jax_default_matmul_precision", "highest")


@pytest.fixture(autouse=True)
def _doctest_namespace(request, doctest_namespace):
    """Names every docstring example may use without importing them: `Flux` and `fluxjax` (the package),
    `jnp`, `np`, `jax`, and every public name of `fluxjax` bare (`Dense`, `Chain`, `relu`, ...), as Julia's
    `using Flux` exports them. The default RNG is reset, so examples that build layers print the same
    numbers in every run. Other tests are left alone."""
    if type(request.node).__name__ != "DoctestItem":
        return
    import numpy as np

    import fluxjax

    doctest_namespace.update({n: getattr(fluxjax, n) for n in dir(fluxjax) if not n.startswith("_")})
    doctest_namespace.update(Flux=fluxjax, fluxjax=fluxjax, jnp=jax.numpy, np=np, jax=jax)
    fluxjax.seed_(0)
