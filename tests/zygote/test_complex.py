"""Complex numbers follow Zygote's convention in every entry point (Zygote.jl test/complex.jl; the
ported cases are in compat/cases_zygote_complex.py).

For a real `f` of `z = x + iy`, Zygote's gradient is `∂f/∂x + i·∂f/∂y`, the conjugate of `jax.grad`;
its pullback is `back(dy) = conj(vjp(conj(dy)))`; its jacobian (of a real output: a complex one raises, as in Zygote) has
row `k` `back(e_k)`. References
here are central finite differences in complex128 NumPy.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import fluxjax
from fluxjax import Dense, Descent, gradient, jacobian, params, pullback, setup, train_, update, update_, withgradient

Z0 = np.array([0.3 + 0.5j, -1.2 + 0.7j, 2.0 - 0.1j])


def fd_grad(f, z, eps=1e-6):
    """`∂f/∂x + i·∂f/∂y` for a real `f` of a complex array `z`, entry by entry."""
    z = np.asarray(z, np.complex128)
    out = np.zeros_like(z)
    for i in np.ndindex(z.shape):
        e = np.zeros_like(z)
        e[i] = 1
        dx = (f(z + eps * e) - f(z - eps * e)) / (2 * eps)
        dy = (f(z + 1j * eps * e) - f(z - 1j * eps * e)) / (2 * eps)
        out[i] = dx + 1j * dy
    return out


def loss_np(z):
    return float(np.sum(np.abs(z - 1j) ** 2 * np.real(z) + np.imag(z) ** 3))


def loss_j(z):
    return jnp.sum(jnp.abs(z - 1j) ** 2 * jnp.real(z) + jnp.imag(z) ** 3)


def test_gradient_is_the_conjugate_of_jax_grad():
    # Zygote.jl test/complex.jl: gradient(a -> real(a*conj(a)), 0.3im)[1] == 0.6im
    (g,) = gradient(lambda a: (a * a.conj()).real, 0.3j)
    assert g is not None
    np.testing.assert_allclose(complex(g), 0.6j, rtol=1e-6)
    z = jnp.asarray(Z0, jnp.complex64)
    (g,) = gradient(loss_j, z)
    np.testing.assert_allclose(np.asarray(g), fd_grad(loss_np, Z0), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(np.asarray(g), np.conj(np.asarray(jax.grad(loss_j)(z))), rtol=1e-6)


def test_python_complex_scalar_gets_a_gradient():
    (g,) = gradient(lambda z: jnp.abs(z) ** 2, 1.0 + 2.0j)  # 2z
    np.testing.assert_allclose(complex(g), 2.0 + 4.0j, rtol=1e-6)
    g = gradient(lambda a, z: a * jnp.real(z * z), 3.0, 1.0 + 1.0j)  # ∂/∂z of a·(x²-y²) = a(2x - 2iy)
    np.testing.assert_allclose(float(g[0]), 0.0, atol=1e-6)
    np.testing.assert_allclose(complex(g[1]), 6.0 - 6.0j, rtol=1e-6)


def test_withgradient_and_aux():
    z = jnp.asarray(Z0, jnp.complex64)
    val, (g,) = withgradient(lambda z: (loss_j(z), "aux"), z)
    assert val[1] == "aux"
    np.testing.assert_allclose(float(val[0]), loss_np(Z0), rtol=1e-5)
    np.testing.assert_allclose(np.asarray(g), fd_grad(loss_np, Z0), rtol=1e-4, atol=1e-4)


def test_pullback_real_output_and_complex_cotangent():
    z = jnp.asarray(Z0, jnp.complex64)
    y, back = pullback(loss_j, z)
    (g,) = back(2.0)
    np.testing.assert_allclose(np.asarray(g), 2 * fd_grad(loss_np, Z0), rtol=1e-4, atol=1e-4)
    # a complex output: back(dy) is the gradient of Re(conj(dy)·f), Zygote's pairing of cotangents
    f = lambda z: z**2 * jnp.conj(z[::-1])  # noqa: E731 (neither holomorphic nor real)
    fnp = lambda z: z**2 * np.conj(z[::-1])  # noqa: E731
    dy = np.array([0.5 - 1j, 2j, -1.0 + 0.25j])
    y, back = pullback(f, z)
    (g,) = back(jnp.asarray(dy, jnp.complex64))
    want = fd_grad(lambda w: float(np.sum(np.real(np.conj(dy) * fnp(w)))), Z0)
    np.testing.assert_allclose(np.asarray(g), want, rtol=1e-4, atol=1e-4)


def test_implicit_params_gradient():
    W = jnp.asarray([[1 + 1j, 2 - 1j]], jnp.complex64)
    b = jnp.asarray([0.5j], jnp.complex64)
    m = Dense(W, b)
    x = jnp.asarray([1.0 - 1j, 0.5 + 2j], jnp.complex64)
    ps = params(m)
    gs = gradient(lambda: jnp.sum(jnp.abs(m(x)) ** 2), ps)
    r = np.asarray(W) @ np.asarray(x) + np.asarray(b)  # d|r|²: 2r for b, 2r·conj(x)ᵀ for W
    np.testing.assert_allclose(np.asarray(gs[m.bias]), 2 * r, rtol=1e-5)
    np.testing.assert_allclose(np.asarray(gs[m.weight]), 2 * np.outer(r, np.conj(np.asarray(x))), rtol=1e-5)


def _complex_model():
    W = jnp.asarray([[1 + 1j, 2 - 1j], [0.5j, -1.0]], jnp.complex64)
    return Dense(W, jnp.asarray([0.5j, 0.2], jnp.complex64))


X = jnp.asarray([1.0 - 1j, 0.5 + 2j], jnp.complex64)
TARGET = jnp.asarray([1.0, -1j], jnp.complex64)


def _loss(m):
    return jnp.sum(jnp.abs(m(X) - TARGET) ** 2)


@pytest.mark.parametrize("how", ["update_", "update"])
def test_descent_moves_a_complex_parameter_downhill(how):
    m = _complex_model()
    W0, b0 = np.asarray(m.weight), np.asarray(m.bias)
    (g,) = gradient(_loss, m)
    r = W0 @ np.asarray(X) + b0 - np.asarray(TARGET)
    np.testing.assert_allclose(np.asarray(g.bias), 2 * r, rtol=1e-5)
    s = setup(Descent(0.01), m)
    before = float(_loss(m))
    if how == "update_":
        update_(s, m, g)
    else:
        s, m = update(s, m, g)
    np.testing.assert_allclose(np.asarray(m.bias), b0 - 0.01 * 2 * r, rtol=1e-5)
    np.testing.assert_allclose(np.asarray(m.weight), W0 - 0.01 * 2 * np.outer(r, np.conj(np.asarray(X))), rtol=1e-5)
    assert float(_loss(m)) < before


@pytest.mark.parametrize("jit", [True, False])
def test_train_descends_with_complex_parameters(jit):
    m = _complex_model()
    losses = [float(_loss(m))]
    s = setup(Descent(0.02), m)
    for _ in range(5):
        train_(lambda m: _loss(m), m, [()], s, jit=jit)
        losses.append(float(_loss(m)))
    assert all(b < a for a, b in zip(losses, losses[1:])), losses
    assert losses[-1] < 0.5 * losses[0]


def test_implicit_update_descends():
    m = _complex_model()
    ps = params(m)
    b0 = np.asarray(m.bias)
    gs = gradient(lambda: _loss(m), ps)
    g_b = np.asarray(gs[m.bias])
    update_(Descent(0.01), ps, gs)
    np.testing.assert_allclose(np.asarray(m.bias), b0 - 0.01 * g_b, rtol=1e-6)
    assert float(_loss(m)) < float(_loss(_complex_model()))


def test_real_arguments_keep_real_gradients():
    (g,) = gradient(lambda x: jnp.real(jnp.exp(1j * x)), 0.7)  # -sin(x)
    assert not jnp.iscomplexobj(g)
    np.testing.assert_allclose(float(g), -np.sin(0.7), rtol=1e-6)
    assert fluxjax.gradient(lambda x: x**2, 3.0)[0] == 6.0


def test_finite_differences_backend_follows_the_convention():
    z = jnp.asarray(Z0, jnp.complex64)
    (g,) = gradient(loss_j, fluxjax.AutoFiniteDifferences(), z)
    np.testing.assert_allclose(np.asarray(g), fd_grad(loss_np, Z0), rtol=1e-3, atol=1e-3)
    (g,) = gradient(lambda z: jnp.abs(z) ** 2, fluxjax.AutoFiniteDifferences(), 1.0 + 2.0j)
    np.testing.assert_allclose(complex(g), 2.0 + 4.0j, rtol=1e-3)


def test_adam_on_complex_parameters_uses_abs2():
    # Optimisers.jl src/rules.jl Adam: vt = β₂·vt + (1-β₂)·abs2(dx), so vt stays real and the step
    # points along the (Zygote) gradient; with g² it would rotate the step.
    m = _complex_model()
    s = setup(fluxjax.Adam(0.05), m)
    b = np.asarray(m.bias).astype(np.complex128)
    mt, vt, bt = np.zeros_like(b), np.zeros(b.shape), np.array([0.9, 0.999])
    losses = [float(_loss(m))]
    for _ in range(4):
        (g,) = gradient(_loss, m)
        gb = np.asarray(g.bias).astype(np.complex128)
        update_(s, m, g)
        mt = 0.9 * mt + 0.1 * gb
        vt = 0.999 * vt + 0.001 * np.abs(gb) ** 2
        b = b - mt / (1 - bt[0]) / (np.sqrt(vt / (1 - bt[1])) + 1e-8) * 0.05
        bt = bt * np.array([0.9, 0.999])
        np.testing.assert_allclose(np.asarray(m.bias), b, rtol=1e-4, atol=1e-6)
        losses.append(float(_loss(m)))
    assert losses[-1] < losses[0]


@pytest.mark.parametrize("jit", [True, False])
def test_train_step_is_the_descent_formula(jit):
    # one train_ step with Descent(η) moves each complex parameter by -η·(Zygote's gradient): for
    # |W x + b - t|², 2r for b and 2r·conj(x)ᵀ for W (NumPy), compiled and eager alike
    m = _complex_model()
    W0, b0 = np.asarray(m.weight), np.asarray(m.bias)
    train_(lambda m: _loss(m), m, [()], setup(Descent(0.01), m), jit=jit)
    r = W0 @ np.asarray(X) + b0 - np.asarray(TARGET)
    np.testing.assert_allclose(np.asarray(m.bias), b0 - 0.01 * 2 * r, rtol=1e-5)
    np.testing.assert_allclose(np.asarray(m.weight), W0 - 0.01 * 2 * np.outer(r, np.conj(np.asarray(X))), rtol=1e-5)


def test_python_complex_scalar_in_pullback_and_jacobian():
    y, back = pullback(lambda z: jnp.abs(z) ** 2, 1.0 + 2.0j)  # Zygote: back(1) == 2z
    np.testing.assert_allclose(float(y), 5.0, rtol=1e-6)
    np.testing.assert_allclose(complex(back(1.0)[0]), 2.0 + 4.0j, rtol=1e-6)
    (J,) = jacobian(lambda z: jnp.stack([jnp.abs(z) ** 2, jnp.real(z)]), 1.0 + 2.0j)
    np.testing.assert_allclose(np.asarray(J), [2.0 + 4.0j, 1.0], rtol=1e-6)


W_C = jnp.array([1.0 + 2.0j, -0.5j])


@pytest.mark.parametrize("case", ["times i", "exp(ix)", "scalar sum", "real input, Params", "complex input",
                                  "withjacobian"])
def test_jacobian_of_a_complex_output_raises_as_zygote(case):
    """Zygote's jacobian refuses complex output (src/lib/grad.jl `_jvec`, test/utils.jl:70-71). Its rows
    were pullbacks of a real basis, which with a real input kept the real part's derivatives only:
    `jacobian(x -> x * 1j, [1, 2])` was a zero matrix, `withjacobian(x -> x * (1+2i), [1])` was [[1]]."""
    x = jnp.array([1.0, 2.0])
    call = {
        "times i": lambda: jacobian(lambda v: v * 1j, x),
        "exp(ix)": lambda: jacobian(lambda v: jnp.exp(1j * v), 0.5),
        "scalar sum": lambda: jacobian(jnp.sum, jnp.array([1.0, 2.0, 3.0 + 1.0j])),
        "real input, Params": lambda: jacobian(lambda: W_C * x, params([x])),
        "complex input": lambda: jacobian(lambda v: v * 2, W_C),
        "withjacobian": lambda: fluxjax.withjacobian(lambda v: v * (1 + 2j), jnp.array([1.0])),
    }[case]
    with pytest.raises(TypeError, match="jacobian does not accept complex output"):
        call()


def test_a_real_output_of_a_complex_input_keeps_its_jacobian():
    """Zygote test/utils.jl `j6`: `jacobian((x, y) -> abs2.(x .* y), [1+i, 2], 3+4i)`, whose first row is
    the gradient of the first output."""
    x, y = jnp.array([1 + 1j, 2 + 0j]), jnp.asarray(3 + 4j)
    j = jacobian(lambda a, b: jnp.abs(a * b) ** 2, x, y)
    g = gradient(lambda a, b: (jnp.abs(a * b) ** 2)[0], x, y)
    np.testing.assert_allclose(np.asarray(j[0][0]), np.asarray(g[0]), rtol=1e-6)
    np.testing.assert_allclose(complex(j[1][0]), complex(g[1]), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(g[0]), [2 * 25 * (1 + 1j), 0], rtol=1e-6)  # 2|y|² x, only entry 0


@pytest.mark.parametrize("fn", ["hessian", "hessian_reverse", "diaghessian"])
def test_hessians_of_a_complex_argument_name_the_argument(fn):
    """Zygote's hessians fail on complex arguments too; the error was JAX's jacfwd message, whose hint
    (`holomorphic=True`) does not apply to a real loss."""
    with pytest.raises(TypeError, match=f"{fn}.*x is complex .*complex64.*real and imaginary parts"):
        getattr(fluxjax, fn)(lambda v: jnp.sum(jnp.abs(v) ** 2), jnp.array([1.0 + 1j]))
