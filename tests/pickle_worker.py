"""Runs in a `multiprocessing` 'spawn' worker for tests/test_pickling.py: everything it receives came
through pickle into a fresh interpreter, and everything it returns goes back the same way."""

from __future__ import annotations

import numpy as np

import fluxjax


def echo(x):
    """Send `x` back as it arrived."""
    return x


def train_step(model, opt_state, grads, x):
    """One `update_` and a forward pass in the worker: proves the received objects work, not just exist."""
    fluxjax.update_(opt_state, model, grads)
    return model, opt_state, np.asarray(model(x))


def grads_lookup(ps_model, gs):
    """`Grads` indexed by the received model's own parameter arrays (the identity map survived)."""
    return [np.asarray(gs[w]) for w in fluxjax.params(ps_model)]
