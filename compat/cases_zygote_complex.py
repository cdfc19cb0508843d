"""Zygote's complex-number convention (Zygote.jl test/complex.jl).

For a real `f` of `z = x + iy`, Zygote's gradient is `∂f/∂x + i·∂f/∂y` (the conjugate of JAX's `grad`).
Julia's `10+20im` is Python's `10+20j`; Julia's Int arguments are integers here too (fluxjax, as Zygote,
differentiates integer numbers and arrays as reals; see tests/zygote/test_int_arrays.py).
"""

import jax.numpy as jnp
import numpy as np

from compat._case import case, rows
from fluxjax import zygote as Z


def cclose(got, want, rtol=3.5e-4, atol=1e-5):
    """Julia's ``≈`` for complex values (``close`` compares real parts only). Zygote's `nothing` is
    `None` here, and Julia's test compares it with 0 only where a zero gradient is expected."""
    assert got is not None, f"expected {want!r}, got None"
    np.testing.assert_allclose(np.asarray(got, np.complex128), np.asarray(want, np.complex128), rtol=rtol, atol=atol)


def zero_or_none(got):
    """Zygote's `≈ 0` where fluxjax may say `None` (no dependence)."""
    assert got is None or np.allclose(np.asarray(got, np.complex128), 0), got


@case(
    names=("gradient",),
    source="Zygote.jl test/complex.jl",
    julia="""
    @test gradient(x -> real(abs(x)*exp(im*angle(x))), 10+20im)[1] ≈ 1
    @test gradient(x -> imag(real(x)+0.3im), 0.3)[1] ≈ 0
    @test gradient(x -> imag(conj(x)+0.3im), 0.3 + 0im)[1] ≈ -1im
    @test gradient(x -> imag(conj(x)+0.3im), 0.3)[1] ≈ 0  # projected to zero
    @test gradient(x -> abs((imag(x)+0.3)), 0.3 + 0im)[1] ≈ 1im
    @test gradient(x -> abs((imag(x)+0.3)), 0.3)[1] ≈ 0
    """,
)
def case_complex_basic_projection():
    cclose(Z.gradient(lambda x: jnp.real(jnp.abs(x) * jnp.exp(1j * jnp.angle(x))), 10 + 20j)[0], 1)
    zero_or_none(Z.gradient(lambda x: jnp.imag(jnp.real(x) + 0.3j), 0.3)[0])
    cclose(Z.gradient(lambda x: jnp.imag(jnp.conj(x) + 0.3j), 0.3 + 0j)[0], -1j)
    g = Z.gradient(lambda x: jnp.imag(jnp.conj(x) + 0.3j), 0.3)[0]  # a real argument: a real gradient
    zero_or_none(g)
    assert g is None or not jnp.iscomplexobj(g)
    cclose(Z.gradient(lambda x: jnp.abs(jnp.imag(x) + 0.3), 0.3 + 0j)[0], 1j)
    zero_or_none(Z.gradient(lambda x: jnp.abs(jnp.imag(x) + 0.3), 0.3)[0])


@case(
    names=("gradient",),
    source="Zygote.jl test/complex.jl",
    julia="""
    @test gradient(a -> real((a*conj(a))), 0.3im)[1] == 0.6im
    @test gradient(a -> real((a.*conj(a))), 0.3im)[1] == 0.6im
    @test gradient(a -> real(([a].*conj([a])))[], 0.3im)[1] == 0.6im
    @test gradient(a -> real(([a].*conj.([a])))[], 0.3im)[1] == 0.6im
    @test gradient(a -> real.(([a].*conj.([a])))[], 0.3im)[1] == 0.6im
    """,
)
def case_complex_abs2():
    want = 0.6j
    cclose(Z.gradient(lambda a: (a * a.conj()).real, 0.3j)[0], want)
    cclose(Z.gradient(lambda a: jnp.real(a * jnp.conj(a)), 0.3j)[0], want)
    cclose(Z.gradient(lambda a: jnp.real(jnp.stack([a]) * jnp.conj(jnp.stack([a])))[0], 0.3j)[0], want)
    cclose(Z.gradient(lambda a: jnp.real(jnp.asarray([a]) * jnp.conj(jnp.asarray([a])))[0], jnp.asarray(0.3j))[0], want)


@case(
    names=("gradient",),
    source="Zygote.jl test/complex.jl",
    julia="""
    @test gradient(x -> norm((im*x) ./ (im)), 2)[1] == 1
    @test gradient(x -> norm((im) ./ (im*x)), 2)[1] == -1/4
    @test gradient(x -> real(det(x)), [1 2im; 3im 4])[1] ≈ [4 3im; 2im 1]
    @test gradient(x -> real(logdet(x)), [1 2im; 3im 4])[1] ≈ [4 3im; 2im 1]/10
    @test gradient(x -> real(logabsdet(x)[1]), [1 2im; 3im 4])[1] ≈ [4 3im; 2im 1]/10
    """,
)
def case_complex_norm_det():
    cclose(Z.gradient(lambda x: jnp.abs((1j * x) / 1j), 2)[0], 1)
    cclose(Z.gradient(lambda x: jnp.abs(1j / (1j * x)), 2)[0], -1 / 4)
    A = jnp.asarray(rows([1, 2j], [3j, 4], dtype=np.complex64))
    want = rows([4, 3j], [2j, 1], dtype=np.complex128)
    cclose(Z.gradient(lambda x: jnp.real(jnp.linalg.det(x)), A)[0], want)

    def logdet(x):
        sign, logabs = jnp.linalg.slogdet(x)
        return jnp.log(sign) + logabs

    cclose(Z.gradient(lambda x: jnp.real(logdet(x)), A)[0], want / 10)
    cclose(Z.gradient(lambda x: jnp.linalg.slogdet(x)[1], A)[0], want / 10)


@case(
    names=("gradient",),
    source="Zygote.jl test/complex.jl (issue 705)",
    julia="""
    @test gradient(x -> imag(sum(exp, x)), [1,2,3])[1] ≈ real(im .* exp.(1:3))
    @test gradient(x -> imag(sum(exp, x)), [1+0im,2,3])[1] ≈ im .* exp.(1:3)
    """,
)
def case_complex_issue_705():
    k = np.arange(1, 4)
    # a real argument (Julia's Int vector, and as floats): the projection of i·exp(k) onto the reals, 0
    for x in (jnp.asarray(k, jnp.int32), jnp.asarray(k, jnp.float32)):
        zero_or_none(Z.gradient(lambda x: jnp.imag(jnp.sum(jnp.exp(x))), x)[0])
    cclose(Z.gradient(lambda x: jnp.imag(jnp.sum(jnp.exp(x))), jnp.asarray(k, jnp.complex64))[0], 1j * np.exp(k))


def _fd(f, z, eps=1e-4):
    """The C->R gradient by central differences: `∂f/∂x + i·∂f/∂y` (Julia's test uses forward
    differences in Float64; float32 here needs a central step)."""
    z = complex(z)
    fx = (f(z + eps) - f(z - eps)) / (2 * eps)
    fy = (f(z + 1j * eps) - f(z - 1j * eps)) / (2 * eps)
    return complex(fx) + 1j * complex(fy)


def _f64(f):
    """`f` evaluated in complex128 NumPy for the finite differences."""
    return lambda z: complex(f(np.complex128(z)))


FS_C_TO_R = (
    (np.real, jnp.real),
    (np.imag, jnp.imag),
    (np.abs, jnp.abs),
    (lambda z: np.abs(z) ** 2, lambda z: jnp.abs(z) ** 2),
    (lambda z: np.abs(z) * np.cos(1j * np.angle(z)), lambda z: jnp.abs(z) * jnp.cos(1j * jnp.angle(z))),
    (lambda z: np.abs(np.cos(np.exp(z))), lambda z: jnp.abs(jnp.cos(jnp.exp(z)))),
    (lambda z: 3 * np.real(z) ** 3 - 2 * np.imag(z) ** 5, lambda z: 3 * jnp.real(z) ** 3 - 2 * jnp.imag(z) ** 5),
)


@case(
    names=("gradient",),
    source="Zygote.jl test/complex.jl",
    julia="""
    fs_C_to_R = (real, imag, abs, abs2, z -> abs(z)*cos(im*angle(z)), z->abs(cos(exp(z))),
                 z->3*real(z)^3-2*imag(z)^5)
    @testset "C->R" begin
        for f in fs_C_to_R
            for z in (1.0+2.0im, -2.0+pi*im)
                grad_zygote = gradient(real∘f, z)[1]
                ε = 1e-8
                grad_fd = (f(z+ε)-f(z))/ε + im*(f(z+ε*im)-f(z))/ε
                @test abs(grad_zygote - grad_fd) < sqrt(ε)
    """,
)
def case_complex_c_to_r():
    for fnp, fj in FS_C_TO_R:
        for z in (1.0 + 2.0j, -2.0 + np.pi * 1j):
            got = Z.gradient(lambda z, fj=fj: jnp.real(fj(z)), z)[0]
            want = _fd(lambda w, fnp=fnp: np.real(fnp(w)), z)
            cclose(got, want, rtol=1e-3, atol=1e-3 * max(1.0, abs(want)))


FS_HOLOMORPHIC = (
    (np.cos, jnp.cos),
    (np.exp, jnp.exp),
    (np.log, jnp.log),
    (lambda z: z**2, lambda z: z**2),
    (lambda z: (np.real(z) + 1j * np.imag(z)) ** 2, lambda z: (jnp.real(z) + 1j * jnp.imag(z)) ** 2),
    (lambda z: np.real(z) ** 2 - np.imag(z) ** 2 + 2j * (np.real(z) * np.imag(z)),
     lambda z: jnp.real(z) ** 2 - jnp.imag(z) ** 2 + 2j * (jnp.real(z) * jnp.imag(z))),
    (lambda z: np.exp(np.cos(np.log(z))), lambda z: jnp.exp(jnp.cos(jnp.log(z)))),
    (lambda z: np.abs(z) * np.exp(1j * np.angle(z)), lambda z: jnp.abs(z) * jnp.exp(1j * jnp.angle(z))),
)

FS_NON_HOLOMORPHIC = (
    (np.conj, jnp.conj),
    (lambda z: np.abs(z) + 0j, lambda z: jnp.abs(z) + 0j),
    (lambda z: 1j * np.abs(z), lambda z: 1j * jnp.abs(z)),
    (lambda z: np.abs(z) ** 2 + 0j, lambda z: jnp.abs(z) ** 2 + 0j),
    (lambda z: 1j * np.abs(z) ** 2, lambda z: 1j * jnp.abs(z) ** 2),
    (lambda z: np.conj(z) * z, lambda z: jnp.conj(z) * z),
    (lambda z: np.conj(z) * z**2, lambda z: jnp.conj(z) * z**2),
    (lambda z: np.imag(z) ** 2 + np.real(np.sin(z)) ** 3 * 1j, lambda z: jnp.imag(z) ** 2 + jnp.real(jnp.sin(z)) ** 3 * 1j),
)


@case(
    names=("gradient",),
    source="Zygote.jl test/complex.jl",
    julia="""
    @testset "C->C holomorphic" begin
        for f in fs_C_to_C_holomorphic
            for z in (1.0+2.0im, -2.0+pi*im)
                grad_zygote = gradient(real∘f, z)[1]
                ε = 1e-8
                grad_fd_r = (f(z+ε)-f(z))/ε
                @test abs(grad_zygote - conj(grad_fd_r)) < sqrt(ε)
    """,
)
def case_complex_holomorphic():
    for fnp, fj in FS_HOLOMORPHIC:
        for z in (1.0 + 2.0j, -2.0 + np.pi * 1j):
            got = Z.gradient(lambda z, fj=fj: jnp.real(fj(z)), z)[0]
            eps = 1e-6
            deriv = (fnp(np.complex128(z) + eps) - fnp(np.complex128(z) - eps)) / (2 * eps)
            cclose(got, np.conj(deriv), rtol=1e-3, atol=1e-3 * max(1.0, abs(deriv)))


@case(
    names=("gradient",),
    source="Zygote.jl test/complex.jl",
    julia="""
    @testset "C->C non-holomorphic" begin
        for f in (fs_C_to_C_holomorphic...,fs_C_to_C_non_holomorphic...)
            for z in (1.0+2.0im, -2.0+pi*im)
                grad_zygote_r = gradient(real∘f, z)[1]
                grad_zygote_i = gradient(imag∘f, z)[1]
                grad_fd_r = real(f(z+ε)-f(z))/ε + im*real(f(z+ε*im)-f(z))/ε
                grad_fd_i = imag(f(z+ε)-f(z))/ε + im*imag(f(z+ε*im)-f(z))/ε
                @test abs(grad_zygote_r - grad_fd_r) < sqrt(ε)
                @test abs(grad_zygote_i - grad_fd_i) < sqrt(ε)
    """,
)
def case_complex_non_holomorphic():
    for fnp, fj in FS_HOLOMORPHIC + FS_NON_HOLOMORPHIC:
        for z in (1.0 + 2.0j, -2.0 + np.pi * 1j):
            for part_np, part_j in ((np.real, jnp.real), (np.imag, jnp.imag)):
                got = Z.gradient(lambda z, fj=fj, p=part_j: p(fj(z)), z)[0]
                want = _fd(lambda w, fnp=fnp, p=part_np: p(fnp(w)), z)
                cclose(got, want, rtol=1e-3, atol=1e-3 * max(1.0, abs(want)))


@case(
    names=("gradient",),
    source="Zygote.jl test/complex.jl (issue 342)",
    julia="""
    @test Zygote.gradient(x->real(x + 2.0*im), 3.0) == (1.0,)
    @test Zygote.gradient(x->imag(x + 2.0*im), 3.0) == (0.0,)
    """,
)
def case_complex_issue_342():
    (g,) = Z.gradient(lambda x: jnp.real(x + 2.0j), 3.0)
    cclose(g, 1.0)
    assert not jnp.iscomplexobj(g)  # a real argument gets a real gradient
    zero_or_none(Z.gradient(lambda x: jnp.imag(x + 2.0j), 3.0)[0])


@case(
    names=("hessian",),
    source="Zygote.jl test/complex.jl (issue 917)",
    julia="""
    function fun(v)
        c = v[1:3] + v[4:6]*im
        r = v[7:9]
        sum(r .* abs2.(c))
    end
    @test Zygote.hessian(fun, collect(1:9)) ≈ [14 0 0 0 0 0 2 0 0; 0 16 0 0 0 0 0 4 0; ...]
    """,
)
def case_complex_issue_917_hessian():
    def fun(v):
        c = v[0:3] + v[3:6] * 1j
        r = v[6:9]
        return jnp.sum(r * jnp.abs(c) ** 2)

    want = rows(
        [14, 0, 0, 0, 0, 0, 2, 0, 0], [0, 16, 0, 0, 0, 0, 0, 4, 0], [0, 0, 18, 0, 0, 0, 0, 0, 6],
        [0, 0, 0, 14, 0, 0, 8, 0, 0], [0, 0, 0, 0, 16, 0, 0, 10, 0], [0, 0, 0, 0, 0, 18, 0, 0, 12],
        [2, 0, 0, 8, 0, 0, 0, 0, 0], [0, 4, 0, 0, 10, 0, 0, 0, 0], [0, 0, 6, 0, 0, 12, 0, 0, 0],
    )  # fmt: skip
    cclose(Z.hessian(fun, jnp.arange(1.0, 10.0)), want)


@case(
    names=("gradient",),
    source="Zygote.jl docs/src/complex.md",
    julia="""
    julia> gradient(c -> abs2(c), 1+2im)
    (2 + 4im,)
    julia> gradient(x -> real(log(x)), 1+2im)[1] |> conj
    0.2 - 0.4im
    julia> -im*gradient(x -> imag(log(x)), 1+2im)[1] |> conj
    0.2 - 0.4im
    julia> gradient(x -> real(log(x')), 1+2im)[1] |> conj
    0.2 - 0.4im
    julia> -im*gradient(x -> imag(log(x')), 1+2im)[1] |> conj
    -0.2 + 0.4im
    """,
)
def case_complex_docs_gradient():
    cclose(Z.gradient(lambda c: jnp.abs(c) ** 2, 1 + 2j)[0], 2 + 4j)
    cclose(np.conj(Z.gradient(lambda x: jnp.real(jnp.log(x)), 1 + 2j)[0]), 0.2 - 0.4j)
    cclose(np.conj(-1j * Z.gradient(lambda x: jnp.imag(jnp.log(x)), 1 + 2j)[0]), 0.2 - 0.4j)
    cclose(np.conj(Z.gradient(lambda x: jnp.real(jnp.log(jnp.conj(x))), 1 + 2j)[0]), 0.2 - 0.4j)
    cclose(np.conj(-1j * Z.gradient(lambda x: jnp.imag(jnp.log(jnp.conj(x))), 1 + 2j)[0]), -0.2 + 0.4j)


def _wirtinger(f, x):
    """Zygote's docs: `jacobi(f, x) = (back(1)[1], back(im)[1])`, then the two Wirtinger derivatives."""
    _, back = Z.pullback(f, x)
    du, dv = complex(back(1.0 + 0j)[0]), complex(back(1j)[0])
    return (np.conj(du) + 1j * np.conj(dv)) / 2, (du + 1j * dv) / 2


@case(
    names=("pullback",),
    source="Zygote.jl docs/src/complex.md",
    julia="""
    function jacobi(f, x)
      y, back = Zygote.pullback(f, x)
      back(1)[1], back(im)[1]
    end
    function wirtinger(f, x)
      du, dv = jacobi(f, x)
      (du' + im*dv')/2, (du + im*dv)/2
    end
    julia> wirtinger(x -> 3x^2 + 2x + 1, 1+2im)
    (8.0 + 12.0im, 0.0 + 0.0im)
    julia> wirtinger(x -> abs2(x), 1+2im)
    (1.0 - 2.0im, 1.0 + 2.0im)
    """,
)
def case_complex_docs_wirtinger():
    d, dbar = _wirtinger(lambda x: 3 * x**2 + 2 * x + 1, 1 + 2j)
    cclose(d, 8 + 12j)
    cclose(dbar, 0)
    d, dbar = _wirtinger(lambda x: (x * jnp.conj(x)).astype(jnp.complex64), 1 + 2j)  # abs2 as a complex value
    cclose(d, 1 - 2j)
    cclose(dbar, 1 + 2j)
