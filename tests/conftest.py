"""Shared fixtures for the foundation tests (Zygote API, layers, printing)."""

import jax
import numpy as np
import pytest

import fluxjax


@pytest.fixture
def seeded():
    """Reset fluxjax's default RNG, so that freshly built layers are reproducible."""
    fluxjax.seed_(0)


@pytest.fixture
def untouched():
    """`check = untouched(model)` snapshots every array in `model`; `check()` then asserts that no
    array is a JAX tracer and that every array is bit-identical to the snapshot."""

    def snapshot(model):
        before = [np.array(a) for a in jax.tree_util.tree_leaves(model)]

        def check():
            after = jax.tree_util.tree_leaves(model)
            assert not any(isinstance(a, jax.core.Tracer) for a in after)
            assert len(after) == len(before)
            for a, b in zip(after, before):
                assert np.array(a).dtype == b.dtype
                assert np.array_equal(np.array(a), b)

        return check

    return snapshot
