"""An integer argument used as an axis, a count or a static size: Zygote gives it `nothing` and the other
arguments their gradients, as outside `gradient` (fluxjax holds the int as it is when tracing it as a float
fails, whatever the error says); an int used arithmetically keeps its real gradient, and an error of `f`'s
own still surfaces."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import fluxjax as F
from fluxjax.zygote import intargs


@pytest.fixture(autouse=True)
def _fresh_decisions(monkeypatch):
    monkeypatch.setattr(intargs, "_DECIDED", {})  # each test decides which ints are held on its own


A = jnp.arange(1.0, 7.0).reshape(2, 3)

AXIS_USES = {
    "sum": lambda a, d: jnp.sum(jnp.sum(a, axis=d) ** 2),
    "mean": lambda a, d: jnp.sum(jnp.mean(a, axis=d) ** 2),
    "prod": lambda a, d: jnp.sum(jnp.prod(a, axis=d)),
    "max": lambda a, d: jnp.sum(jnp.max(a, axis=d)),
    "var": lambda a, d: jnp.sum(jnp.var(a, axis=d)),
    "std": lambda a, d: jnp.sum(jnp.std(a, axis=d)),
    "flip": lambda a, d: jnp.sum(jnp.flip(a, axis=d)[0] * jnp.arange(3.0)),
    "expand_dims": lambda a, d: jnp.sum(jnp.expand_dims(a, d) ** 2),
    "softmax": lambda a, d: jnp.sum(F.softmax(a, dims=d)[0] * jnp.arange(3.0)),
    "logsoftmax": lambda a, d: jnp.sum(F.logsoftmax(a, dims=d)[0] * jnp.arange(3.0)),
    "logsumexp": lambda a, d: jnp.sum(F.logsumexp(a, dims=d) ** 2),
    "normalise": lambda a, d: jnp.sum(F.normalise(a, dims=d)[0] * jnp.arange(3.0)),
    "unsqueeze": lambda a, d: jnp.sum(F.unsqueeze(a, dims=d) ** 2),
    "repeat": lambda a, d: jnp.sum(jnp.repeat(a, d + 1, axis=0) ** 2),
}


@pytest.mark.parametrize("jit", [True, False], ids=["compiled", "op_by_op"])
@pytest.mark.parametrize("name", list(AXIS_USES))
def test_int_axis_argument_gets_none(name, jit):
    f = AXIS_USES[name]
    want = jax.grad(f)(A, 1)
    ga, gd = F.gradient(f, A, 1, jit=jit)
    np.testing.assert_allclose(ga, want, rtol=1e-5)
    assert gd is None
    val, (ga, gd) = F.withgradient(f, A, 0, jit=jit)  # another value, under the kept decision
    np.testing.assert_allclose(val, f(A, 0), rtol=1e-5)
    np.testing.assert_allclose(ga, jax.grad(f)(A, 0), rtol=1e-5)
    assert gd is None


@pytest.mark.parametrize("d", [0, jnp.array(0)], ids=["int", "int_array"])
def test_zygote_jacobian_j3(d):
    # Zygote test/utils.jl: jacobian((a,d) -> prod(a, dims=d), [1 2; 3 4], 1)[1] == [3 1 0 0; 0 0 4 2]
    ja, jd = F.jacobian(lambda a, d: jnp.prod(a, axis=d), jnp.array([[1.0, 2], [3, 4]]), d)
    np.testing.assert_allclose(ja, [[3, 1, 0, 0], [0, 0, 4, 2]])
    assert jd is None


@pytest.mark.parametrize("jit", [True, False], ids=["compiled", "op_by_op"])
def test_int_array_axis(jit):
    f = AXIS_USES["prod"]
    ga, gd = F.gradient(f, A, jnp.array(1), jit=jit)
    np.testing.assert_allclose(ga, jax.grad(f)(A, 1), rtol=1e-5)
    assert gd is None


def test_pullback_int_axis():
    y, back = F.pullback(lambda a, d: jnp.sum(a, axis=d), A, 1)
    np.testing.assert_allclose(y, [6.0, 15.0])
    ga, gd = back(jnp.array([1.0, 2.0]))
    np.testing.assert_allclose(ga, [[1.0, 1, 1], [2, 2, 2]])
    assert gd is None


@pytest.mark.parametrize("jit", [True, False], ids=["compiled", "op_by_op"])
def test_arithmetic_int_beside_axis_int_keeps_its_gradient(jit):
    # d is an axis (None), k is used as a number: Zygote differentiates it as a real
    ga, gd, gk = F.gradient(lambda a, d, k: jnp.sum(jnp.sum(a * k, axis=d)), A, 1, 3, jit=jit)
    np.testing.assert_allclose(ga, 3 * jnp.ones((2, 3)))
    assert gd is None
    np.testing.assert_allclose(gk, 21.0)


@pytest.mark.parametrize("jit", [True, False], ids=["compiled", "op_by_op"])
def test_error_of_f_own_still_raises(jit):
    # the error f raises with its ints held as ints, not the float's in the axis's place
    with pytest.raises(TypeError, match="incompatible shapes"):
        F.gradient(lambda a, d: jnp.sum(jnp.sum(a, axis=d) + jnp.ones(3)), A, 1, jit=jit)

    def own(a, d):
        if jnp.sum(a, axis=d).ndim == 1:
            raise ValueError("f's own error")
        return jnp.sum(a)

    with pytest.raises(ValueError, match="f's own error"):
        F.withgradient(own, A, 1, jit=jit)
    with pytest.raises(ValueError, match="f's own error"):
        F.jacobian(own, A, 1)
