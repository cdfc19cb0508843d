"""Test-wide settings for tests/ and compat/."""

import jax

# The tests check Flux's formulas and numbers at float32. On GPUs and TPUs, JAX computes float32 matrix
# products and convolutions at a lower default precision (TF32, bf16 passes); "highest" is float32, as
# XLA:CPU and Julia compute them. (A no-op on a CPU.)
jax.config.update("jax_default_matmul_precision", "highest")
