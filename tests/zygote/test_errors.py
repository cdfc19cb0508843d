"""Bad input to Zygote's API: each error names what went wrong and what to do."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import fluxjax
from fluxjax import gradient


def test_nonscalar_loss_mentions_jacobian():
    with pytest.raises(TypeError, match="jacobian"):
        gradient(lambda x: x * 2, jnp.ones(3))


def test_tuple_output_mentions_withgradient():
    with pytest.raises(TypeError, match="withgradient"):
        gradient(lambda x: (x * 2, x), 1.0)


def test_differentiating_a_string():
    with pytest.raises(TypeError, match="str"):
        gradient(lambda s: float(len(s)), "abc")


G = None


def test_tracer_escaping_into_global():
    global G

    def f(x):
        global G
        G = x
        return x * x

    try:
        with pytest.raises(RuntimeError, match="'G'"):
            gradient(f, 3.0)
    finally:
        G = None


def test_tracer_escaping_into_closure():
    box = None

    def f(x):
        nonlocal box
        box = x
        return x * x

    with pytest.raises(RuntimeError, match="'box'"):
        gradient(f, 3.0)


def test_f_not_callable():
    with pytest.raises(TypeError, match="callable"):
        gradient(3.0, 1.0)


def test_showgrad_prints_inside_a_compiled_step(capsys):
    from fluxjax.zygote import showgrad

    m = fluxjax.Dense(np.ones((1, 2), np.float32), np.zeros(1, np.float32))

    @fluxjax.jit
    def grad(m, x):
        return fluxjax.gradient(lambda m: jnp.sum(showgrad(m(x), "y") * 3.0), m)[0]

    g = grad(m, jnp.ones((2, 1)))
    jax.effects_barrier()
    np.testing.assert_allclose(g.weight, [[3.0, 3.0]])
    assert "∂(y) = [[3.]]" in capsys.readouterr().out


@pytest.mark.parametrize("jit", [True, False])
@pytest.mark.parametrize("call", ["gradient", "withgradient", "pullback"])
def test_a_numpy_function_on_a_differentiated_value_says_to_use_jax_numpy(jit, call):
    """`np.exp(m(x))` in a loss ported from Julia's `exp.(m(x))`: JAX's TracerArrayConversionError named
    neither the cause nor the fix."""
    m = fluxjax.Dense(2, 1)
    loss = lambda mm: jnp.sum(np.exp(mm(jnp.ones((2, 1)))))  # noqa: E731
    kw = {} if call == "pullback" else {"jit": jit}
    with pytest.raises(jax.errors.TracerArrayConversionError) as info:
        getattr(fluxjax, call)(loss, m, **kw)
    if hasattr(info.value, "add_note"):  # Python 3.11+
        assert any("use jax.numpy (jnp.exp" in n for n in info.value.__notes__)
