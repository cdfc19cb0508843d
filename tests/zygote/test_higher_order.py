"""Nested AD, jacobian, withjacobian, hessian and diaghessian (Zygote.jl sources cited per case;
jacobians are column-major vec as in Julia)."""

import math

import jax.numpy as jnp
import numpy as np
import pytest
from structure import same

import fluxjax
from fluxjax import gradient, hessian, jacobian, pullback
from fluxjax.zygote import diaghessian, withjacobian

# ----------------------------------------------------------------------------------------------
# I7. Nested AD


def D(f, x):
    # Zygote.jl/test/features.jl:290-296  grad(f, args...) = back(1) of pullback; D(f, x) = grad(f, x)[1]
    y, back = pullback(f, x)
    return back(1.0)[0]


def test_nested_D():
    # Zygote.jl/test/features.jl:298  D(x -> D(sin, x), 0.5) == -sin(0.5)
    same(D(lambda x: D(jnp.sin, x), 0.5), -math.sin(0.5))
    # Zygote.jl/test/features.jl:299  D(x -> x*D(y -> x+y, 1), 1) == 1
    same(D(lambda x: x * D(lambda y: x + y, 1), 1), 1.0)
    # Zygote.jl/test/features.jl:300  D(x -> x*D(y -> x*y, 1), 4) == 8
    same(D(lambda x: x * D(lambda y: x * y, 1), 4), 8.0)


def test_nested_derivatives_of_sin():
    # Zygote.jl/test/features.jl:302  sin''(1.0) == -sin(1.0)
    d1 = lambda x: gradient(jnp.sin, x)[0]
    d2 = lambda x: gradient(d1, x)[0]
    d3 = lambda x: gradient(d2, x)[0]
    same(d2(1.0), -math.sin(1.0))
    # Zygote.jl/test/features.jl:303  sin'''(1.0) == -cos(1.0)
    same(d3(1.0), -math.cos(1.0))


# ----------------------------------------------------------------------------------------------
# I8. jacobian / hessian (Zygote.jl/src/lib/grad.jl docstrings). Column-major vec.


def test_jacobian_slice():
    # Zygote.jl/src/lib/grad.jl:141  jacobian(a -> 100*a[1:3].^2, 1:7)[1]
    #   == [200 0 0 0 0 0 0; 0 400 0 0 0 0 0; 0 0 600 0 0 0 0]   (float input: see the xfail above)
    (J,) = jacobian(lambda a: 100 * a[0:3] ** 2, jnp.arange(1.0, 8.0))
    want = np.zeros((3, 7))
    want[0, 0], want[1, 1], want[2, 2] = 200, 400, 600
    same(J, want)


def test_jacobian_scalar_argument():
    # Zygote.jl/src/lib/grad.jl:147  jacobian((a,x) -> a.^2 .* x, [1,2,3], 1) == ([2 0 0; 0 4 0; 0 0 6], [1,4,9])
    Ja, Jx = jacobian(lambda a, x: a**2 * x, jnp.array([1.0, 2.0, 3.0]), 1)
    same(Ja, np.diag([2.0, 4.0, 6.0]))
    same(Jx, np.array([1.0, 4.0, 9.0]))


def test_jacobian_string_argument_nothing():
    # Zygote.jl/src/lib/grad.jl:158  jacobian((a,s) -> a.^length(s), [1,2,3], "str") == ([3 0 0; 0 12 0; 0 0 27], nothing)
    Ja, Js = jacobian(lambda a, s: a ** len(s), jnp.array([1.0, 2.0, 3.0]), "str")
    same(Ja, np.diag([3.0, 12.0, 27.0]))
    assert Js is None


def test_withjacobian_cumsum():
    # Zygote.jl/src/lib/grad.jl:176  withjacobian(cumsum, [1,2,3]) == (val = [1,3,6], grad = ([1 0 0; 1 1 0; 1 1 1],))
    val, grad = withjacobian(jnp.cumsum, jnp.array([1.0, 2.0, 3.0]))
    same(val, np.array([1.0, 3.0, 6.0]))
    same(grad, (np.tril(np.ones((3, 3))),))


def test_jacobian_matrix_input_is_column_major():
    # Zygote.jl/test/deprecated.jl:260-262 (explicit form): Jxy[xs] ≈ [2 6 4 8; 2 6 4 8] for xs = [1 2; 3 4]
    xs = jnp.array([[1.0, 2.0], [3.0, 4.0]])
    (J,) = jacobian(lambda xs: jnp.array([5.0, 7.0]) + jnp.sum(xs**2), xs)
    same(J, np.array([[2.0, 6.0, 4.0, 8.0], [2.0, 6.0, 4.0, 8.0]]))


def test_hessian_docstrings():
    # Zygote.jl/src/lib/grad.jl:86  hessian(x -> x[1]*x[2], randn(2)) == [0 1; 1 0]
    same(hessian(lambda x: x[0] * x[1], jnp.array([0.3, -1.2])), np.array([[0.0, 1.0], [1.0, 0.0]]))
    # Zygote.jl/src/lib/grad.jl:91  hessian(x -> sum(x.^3), [1 2; 3 4]) == diag(6, 18, 12, 24) (linear indexing)
    H = hessian(lambda x: jnp.sum(x**3), jnp.array([[1.0, 2.0], [3.0, 4.0]]))
    same(H, np.diag([6.0, 18.0, 12.0, 24.0]))
    # Zygote.jl/src/lib/grad.jl:98  hessian(sin, pi/2) == -1.0
    same(hessian(jnp.sin, math.pi / 2), -1.0)
    # Zygote.jl/src/lib/grad.jl:294  hessian(xy -> atan(xy[1], xy[2]), [1, 2]) ≈ [-0.16 -0.12; -0.12 0.16]
    same(hessian(lambda xy: jnp.arctan2(xy[0], xy[1]), jnp.array([1.0, 2.0])),
         np.array([[-0.16, -0.12], [-0.12, 0.16]]), rtol=1e-5)


def test_hessian_reverse_equals_hessian_on_a_non_diagonal_case():
    # Zygote.jl test/utils.jl runs the same cases through hessian_dual and hessian_reverse
    f = lambda x: jnp.sum(jnp.sin(x) * x[::-1] ** 2) + x[0] * x[1] ** 3
    x = jnp.array([0.3, -1.2, 0.7])
    H = fluxjax.hessian_reverse(f, x)
    same(H, hessian(f, x), rtol=1e-6)
    same(H, H.T, rtol=1e-6)
    same(fluxjax.hessian_reverse(jnp.sin, math.pi / 2), -1.0)
    with pytest.raises(TypeError, match=r"hessian_reverse\(f, x\)"):
        fluxjax.hessian_reverse(lambda a, b: a * b, (1.0, 2.0))


def test_isderiving_is_true_inside_gradient_also_nested():
    # Zygote.jl test/tools.jl "isderiving": gradient(x -> gradient(f, x)[1], 4) == (2,)
    f = lambda x: x**2 if fluxjax.isderiving(x) else 2 * x**2
    assert f(3.0) == 18.0 and not fluxjax.isderiving()
    same(fluxjax.gradient(lambda x: fluxjax.gradient(f, x)[0], 4.0)[0], 2.0)


def test_hessian_of_number_is_number():
    # Zygote.jl/src/lib/grad.jl:98  hessian(sin, pi/2) == -1.0: a number for a number (hessian_dual(f, x::Number)
    # is ForwardDiff.derivative of the gradient), a matrix for a vector
    H = hessian(jnp.sin, math.pi / 2)
    assert np.shape(H) == ()
    assert float(H) == pytest.approx(-1.0)
    H = hessian(lambda x: x**3, 2.0)  # 6x
    assert np.shape(H) == () and float(H) == pytest.approx(12.0)
    H = hessian(lambda x: jnp.sum(x**3), jnp.array([1.0, 2.0]))
    assert H.shape == (2, 2)
    same(H, np.diag([6.0, 12.0]))
    # a 0-d array is a number too
    assert np.shape(hessian(lambda x: x**3, jnp.array(2.0))) == ()


def test_diaghessian_docstrings():
    # Zygote.jl/src/lib/grad.jl:280  diaghessian(x -> sum(x.^3), [1 2; 3 4])[1] == [6 12; 18 24]
    (d,) = diaghessian(lambda x: jnp.sum(x**3), jnp.array([[1.0, 2.0], [3.0, 4.0]]))
    same(d, np.array([[6.0, 12.0], [18.0, 24.0]]))
    # Zygote.jl/src/lib/grad.jl:291  diaghessian(atan, 1, 2) ≈ (-0.16, 0.16)
    same(diaghessian(jnp.arctan2, 1, 2), (-0.16, 0.16), rtol=1e-5)


