"""A plain object (no `@layer`) holding Python floats, passed to `gradient`: Zygote differentiates a
struct's number fields (`gradient(x -> x.value^2 + x.value, MyMutable(3.0)) == ((value = 7.0,),)`,
Zygote test/features.jl); fluxjax keeps a plain object constant, so its numbers got `None` in silence
(the same object holding arrays already raised). Now it raises, naming the argument and the fields."""

import dataclasses
import types

import jax.numpy as jnp
import numpy as np
import pytest

import fluxjax as Flux


class MyMutable:
    def __init__(self, v):
        self.value = v


@dataclasses.dataclass
class DC:
    a: float
    b: float


CALLS = {
    "object": (lambda jit: Flux.gradient(lambda x: x.value ** 2 + x.value, MyMutable(3.0), jit=jit), "argument 1", "value"),
    "in a tuple": (lambda jit: Flux.gradient(lambda t: t[0].value ** 2 * t[1], (MyMutable(3.0), 2.0), jit=jit),
                   r"argument 1\[0\]", "value"),
    "dataclass": (lambda jit: Flux.withgradient(lambda x: x.a * x.b, DC(2.0, 3.0), jit=jit), "argument 1", "a, b"),
    "in a dict": (lambda jit: Flux.gradient(lambda m, d: jnp.sum(m(jnp.ones(2))) * d["c"].a, Flux.Dense(2, 2),
                                            {"c": DC(2.0, 3.0)}, jit=jit), r"argument 2\['c'\]", "a, b"),
    "numpy float": (lambda jit: Flux.gradient(lambda x: x.value * 2, MyMutable(np.float32(3.0)), jit=jit),
                    "argument 1", "value"),
    "pullback": (lambda jit: Flux.pullback(lambda x: x.a * x.b, DC(2.0, 3.0)), "argument 1", "a, b"),
    "jacobian": (lambda jit: Flux.jacobian(lambda x: x.a * jnp.ones(2), DC(2.0, 3.0)), "argument 1", "a, b"),
}


@pytest.mark.parametrize("jit", [True, False])
@pytest.mark.parametrize("case", list(CALLS))
def test_a_plain_object_holding_floats_raises(case, jit):
    call, where, fields = CALLS[case]
    with pytest.raises(TypeError, match=rf"{where} is a .*not a fluxjax layer, holding Python numbers \({fields}\)"):
        call(jit)


@pytest.mark.parametrize("jit", [True, False])
def test_ints_strings_layers_and_closed_over_objects_keep_working(jit):
    """Sizes and names (Zygote gives them `nothing` unless used as numbers), a layer's float fields
    (configuration, documented), and a plain object closed over rather than passed."""
    m = Flux.Dense(np.array([[1.0, 2.0]], np.float32), False)
    cfg = types.SimpleNamespace(n=3, name="x", scale=2.0)
    g = Flux.gradient(lambda mm, c: jnp.sum(mm(jnp.ones(2))) * c.n, m, types.SimpleNamespace(n=3, name="x"), jit=jit)
    np.testing.assert_allclose(np.asarray(g[0].weight), [[3.0, 3.0]])
    assert g[1] is None
    g = Flux.gradient(lambda mm: jnp.sum(mm(jnp.ones(2))) * cfg.scale, m, jit=jit)
    np.testing.assert_allclose(np.asarray(g[0].weight), [[2.0, 2.0]])
    bn = Flux.BatchNorm(2)  # eps, momentum: a layer's float fields
    g = Flux.gradient(lambda b: jnp.sum(b(jnp.ones((2, 3)))), bn, jit=jit)
    assert g[0].eps is None and g[0].momentum is None
