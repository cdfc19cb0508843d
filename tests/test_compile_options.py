"""`fluxjax.jit` compiles with XLA:CPU's memory-optimised scheduler unless told otherwise
(fluxjax/compiled/options.py); the numbers do not depend on it."""

import jax
import jax.numpy as jnp
import numpy as np
from backend import ON_CPU, cpu_only

import fluxjax as Flux
from fluxjax.compiled import options as co
from fluxjax.losses import mse

MEMORY = {"xla_cpu_scheduler_type": "CPU_SCHEDULER_TYPE_MEMORY_OPTIMIZED"}
CONCURRENT = {"xla_cpu_scheduler_type": "CPU_SCHEDULER_TYPE_DEFAULT"}


def test_defaults_on_cpu_and_the_callers_options_win():
    if not ON_CPU:  # the options are XLA:CPU's: other backends get none
        assert co.with_defaults({"donate_argnums": (0,)}) == {"donate_argnums": (0,)}
        return
    assert co.with_defaults({}) == {"compiler_options": MEMORY}
    mine = co.with_defaults({"donate_argnums": (0,), "compiler_options": {**CONCURRENT, "xla_cpu_use_thunk_runtime": True}})
    assert mine == {"donate_argnums": (0,), "compiler_options": {**CONCURRENT, "xla_cpu_use_thunk_runtime": True}}


@cpu_only
def test_a_jaxlib_without_the_option_gets_no_defaults(monkeypatch):
    monkeypatch.setattr(co, "_CPU", {"xla_cpu_no_such_option_in_any_jaxlib": True})
    co._defaults.cache_clear()
    try:
        assert co.with_defaults({"static_argnums": (1,)}) == {"static_argnums": (1,)}
    finally:
        monkeypatch.undo()
        co._defaults.cache_clear()
    assert co.with_defaults({}) == {"compiler_options": MEMORY}


def _schedule(step, args):
    """The order of the compiled program's instructions (the scheduler's output)."""
    step(*args)
    plan = step._plan
    text = plan.entry.top.lower(plan.load(args)).compile().as_text()
    plan.release()
    return [line.split(" = ")[0] for line in text[text.index("ENTRY"):].splitlines()[1:] if " = " in line]


def _step(model, opt_state, x, y):
    loss, (g,) = Flux.withgradient(lambda m: mse(m(x), y), model)
    Flux.update_(opt_state, model, g)
    return loss


@cpu_only
def test_the_scheduler_changes_the_order_not_the_numbers():
    x, y = jax.random.normal(jax.random.PRNGKey(0), (6, 16)), jax.random.normal(jax.random.PRNGKey(1), (3, 16))
    runs = []
    for options in (None, CONCURRENT):
        Flux.seed_(3)
        m = Flux.Chain(Flux.Dense(6, 32, Flux.relu), Flux.Dense(32, 32, Flux.relu), Flux.Dense(32, 3))
        opt = Flux.setup(Flux.Adam(0.01), m)
        step = Flux.jit(_step) if options is None else Flux.jit(_step, compiler_options=options)
        order = _schedule(step, (m, opt, x, y))
        losses = [float(step(m, opt, x, y)) for _ in range(3)]
        runs.append((order, losses, [np.asarray(a) for a in jax.tree_util.tree_leaves(m)]))
    (order_a, loss_a, leaves_a), (order_b, loss_b, leaves_b) = runs
    assert sorted(order_a) == sorted(order_b) and order_a != order_b  # the same kernels, another order
    assert loss_a == loss_b
    for a, b in zip(leaves_a, leaves_b):
        np.testing.assert_array_equal(a, b)
    assert jnp.isfinite(loss_a[-1]) and loss_a[-1] < loss_a[0]
