"""Zygote cases (Zygote.jl test/features.jl, test/deprecated.jl, test/tools.jl, src/lib/grad.jl docstrings).

Julia's `nothing` gradient is Python's `None`; Julia's 1-based linear indexing of `vec(x)` is column-major.
"""

import jax
import jax.numpy as jnp
import numpy as np

import fluxjax
from compat._case import case, close, equal, rows
from fluxjax import zygote as Z


def mul(a, b):
    return a * b


@case(
    names=("gradient", "withgradient", "pullback"),
    source="Zygote.jl test/features.jl",
    julia="""
    mul(a, b) = a*b
    y, back = pullback(mul, 2, 3)
    dx = back(4)
    @test y == 6
    @test dx == (12, 8)
    @test gradient(mul, 2, 3) == (3, 2)
    @test withgradient(mul, 2, 3) == (val = 6, grad = (3, 2))
    """,
)
def case_zygote_basics():
    y, back = Z.pullback(mul, 2.0, 3.0)
    close(y, 6)
    dx = back(4.0)
    close(dx[0], 12)
    close(dx[1], 8)
    g = Z.gradient(mul, 2.0, 3.0)
    assert len(g) == 2
    close(g[0], 3)
    close(g[1], 2)
    res = Z.withgradient(mul, 2.0, 3.0)
    close(res.val, 6)
    close(res.grad[0], 3)
    close(res.grad[1], 2)


@case(
    names=("gradient",),
    source="Zygote.jl test/features.jl",
    julia="""
    @test gradient(x -> 1, 2) == (nothing,)
    @test gradient(t -> t[1]*t[2], (2, 3)) == ((3, 2),)
    @test gradient((x, y, z) -> sum((x, y, z)[1:2]), 7, 8.8, 9.9) == (1.0, 1.0, nothing)
    """,
)
def case_gradient_nothing():
    assert Z.gradient(lambda x: 1.0, 2.0) == (None,)
    (g,) = Z.gradient(lambda t: t[0] * t[1], (2.0, 3.0))
    close(g[0], 3)
    close(g[1], 2)
    g = Z.gradient(lambda x, y, z: sum((x, y, z)[0:2]), 7.0, 8.8, 9.9)
    close(g[0], 1.0)
    close(g[1], 1.0)
    assert g[2] is None


@case(
    names=("withgradient",),
    source="Zygote.jl src/compiler/interface.jl (withgradient docstring) / test/features.jl",
    julia="""
    @test withgradient([1,2,4]) do x
        z = 1 ./ x
        sum(z), z  # here z is an auxillary output
    end == (val = (1.75, [1.0, 0.5, 0.25]), grad = ([-1.0, -0.25, -0.0625],))
    """,
)
def case_withgradient_aux():
    def f(x):
        z = 1 / x
        return jnp.sum(z), z

    val, grad = Z.withgradient(f, jnp.array([1.0, 2.0, 4.0]))
    close(val[0], 1.75)
    close(val[1], [1.0, 0.5, 0.25])
    close(grad[0], [-1.0, -0.25, -0.0625])


@case(
    names=("hook",),
    source="Zygote.jl test/features.jl",
    julia="""
    @test gradient((a, b) -> Zygote.hook(-, a)*b, 2, 3) == (-3, 2)
    """,
)
def case_hook():
    g = Z.gradient(lambda a, b: Z.hook(lambda d: -d, a) * b, 2.0, 3.0)
    close(g[0], -3)
    close(g[1], 2)


@case(
    names=("ignore", "@ignore", "ignore_derivatives"),
    source="Zygote.jl test/deprecated.jl",
    julia="""
    @test gradient(x -> Zygote.ignore(() -> x*x), 1) == (nothing,)
    @test gradient(x -> Zygote.@ignore(x*x), 1) == (nothing,)
    @test gradient(1) do x
      y = Zygote.@ignore x
      x * y
    end == (1,)
    """,
)
def case_ignore():
    assert Z.gradient(lambda x: Z.ignore(lambda: x * x), 1.0) == (None,)
    assert Z.gradient(lambda x: Z.ignore_derivatives(x * x), 1.0) == (None,)

    def f(x):
        y = Z.ignore(x)
        return x * y

    close(Z.gradient(f, 1.0)[0], 1)


@case(
    names=("dropgrad",),
    source="Zygote.jl src/deprecated.jl (dropgrad docstring)",
    julia="""
    julia> gradient(2, 3) do a, b
         dropgrad(a)*b
       end
    (nothing, 2)
    """,
)
def case_dropgrad():
    g = Z.gradient(lambda a, b: Z.dropgrad(a) * b, 2.0, 3.0)
    assert g[0] is None
    close(g[1], 2)


@case(
    names=("forwarddiff",),
    source="Zygote.jl test/features.jl",
    julia="""
    @test gradient(5) do x
      forwarddiff(x -> x^2, x)
    end == (10,)
    for chunk_threshold in 1:10:100
      x = [1:100;]
      @test gradient(x) do x
        Zygote.forwarddiff(x -> x' * x, x; chunk_threshold = chunk_threshold)
      end == (2 * x,)
    end
    """,
)
def case_forwarddiff():
    close(Z.gradient(lambda x: Z.forwarddiff(lambda x: x**2, x), 5.0)[0], 10)
    x = jnp.arange(1.0, 101.0)
    g = jax.jit(lambda x: Z.gradient(lambda x: Z.forwarddiff(lambda x: x @ x, x), x)[0])(x)  # one compilation
    close(g, 2 * np.arange(1.0, 101.0))


@case(
    names=("checkpointed", "pullback"),
    source="Zygote.jl test/features.jl",
    julia="""
    @testset "checkpointed does not change pullback value" begin
        for setup in [
                (f=identity, args = (1.0,), dy=1.0),
                (f=max, args = (1.0,2, 3), dy=1.0),
                (f=sum, args = (cos, [1.0, 2.0],), dy=1.0),
                (f=*, args = (randn(2,2),randn(2,2)), dy=randn(2,2)),
            ]
            y_ref, pb_ref = Zygote.pullback(setup.f, setup.args...)
            y_cp, pb_cp = Zygote.pullback(Zygote.checkpointed, setup.f, setup.args...)
            @test y_cp == y_ref
            @test pb_cp(setup.dy) == (nothing, pb_ref(setup.dy)...)
        end
    end
    """,
)
def case_checkpointed():
    # Python functions are not differentiable arguments, so `pullback(checkpointed, f, args...)` is written
    # `pullback(lambda *xs: checkpointed(f, *xs), args...)` and has no leading `nothing`
    rng = np.random.default_rng(0)
    A, B, dY = (jnp.asarray(rng.standard_normal((2, 2)), jnp.float32) for _ in range(3))
    setups = [
        (lambda x: x, (1.0,), 1.0),
        (lambda a, b, c: jnp.maximum(jnp.maximum(a, b), c), (1.0, 2.0, 3.0), 1.0),
        (lambda x: jnp.sum(jnp.cos(x)), (jnp.array([1.0, 2.0]),), 1.0),  # sum(cos, x)
        (lambda A, B: A @ B, (A, B), dY),
    ]
    for f, args, dy in setups:
        y_ref, pb_ref = Z.pullback(f, *args)
        y_cp, pb_cp = Z.pullback(lambda *xs, f=f: Z.checkpointed(f, *xs), *args)
        equal(y_cp, y_ref)
        for g_cp, g_ref in zip(pb_cp(dy), pb_ref(dy)):
            if g_ref is None:
                assert g_cp is None
            else:
                close(g_cp, g_ref, rtol=1e-6)


@case(
    names=("gradient",),
    source="Zygote.jl test/features.jl",
    julia="""
    D(f, x) = pullback(f, x)[2](1)[1]
    @test D(x -> D(sin, x), 0.5) == -sin(0.5)
    @test D(x -> x*D(y -> x+y, 1), 1) == 1
    @test D(x -> x*D(y -> x*y, 1), 4) == 8
    """,
)
def case_nested_ad():
    def D(f, x):
        return Z.pullback(f, x)[1](1.0)[0]

    close(D(lambda x: D(jnp.sin, x), 0.5), -np.sin(0.5), rtol=1e-6)
    close(D(lambda x: x * D(lambda y: x + y, 1.0), 1.0), 1)
    close(D(lambda x: x * D(lambda y: x * y, 1.0), 4.0), 8)


@case(
    names=("jacobian",),
    source="Zygote.jl src/lib/grad.jl (jacobian docstring)",
    julia="""
    julia> jacobian(a -> 100*a[1:3].^2, 1:7)[1]  # first index (rows) is output
     200    0    0  0  0  0  0
       0  400    0  0  0  0  0
       0    0  600  0  0  0  0
    julia> jacobian((a,x) -> a.^2 .* x, [1,2,3], 1)  # scalar argument has vector jacobian
    ([2 0 0; 0 4 0; 0 0 6], [1, 4, 9])
    """,
)
def case_jacobian():
    (j,) = jax.jit(lambda a: Z.jacobian(lambda a: 100 * a[0:3] ** 2, a))(jnp.arange(1.0, 8.0))
    want = np.zeros((3, 7))
    want[0, 0], want[1, 1], want[2, 2] = 200, 400, 600
    close(j, want)
    ja, jx = Z.jacobian(lambda a, x: a**2 * x, jnp.array([1.0, 2, 3]), 1.0)
    close(ja, np.diag([2.0, 4, 6]))
    close(jx, [1.0, 4, 9])
    # Julia's Int arguments as they are: integer arrays and ints are differentiated as reals
    (j,) = Z.jacobian(lambda a: 100 * a[0:3] ** 2, jnp.arange(1, 8))
    close(j, want)
    ja, jx = Z.jacobian(lambda a, x: a**2 * x, jnp.array([1, 2, 3]), 1)
    close(ja, np.diag([2.0, 4, 6]))
    close(jx, [1.0, 4, 9])


@case(
    names=("withjacobian",),
    source="Zygote.jl src/lib/grad.jl (withjacobian docstring)",
    julia="""
    julia> withjacobian(cumsum, [1,2,3])
    (val = [1, 3, 6], grad = ([1 0 0; 1 1 0; 1 1 1],))
    """,
)
def case_withjacobian():
    for x in (jnp.array([1.0, 2, 3]), jnp.array([1, 2, 3])):  # Julia's Int vector too
        val, grad = Z.withjacobian(jnp.cumsum, x)
        close(val, [1, 3, 6])
        close(grad[0], rows([1, 0, 0], [1, 1, 0], [1, 1, 1]))


@case(
    names=("hessian",),
    source="Zygote.jl src/lib/grad.jl (hessian docstring)",
    julia="""
    julia> hessian(x -> x[1]*x[2], randn(2))
     0.0  1.0
     1.0  0.0
    julia> hessian(x -> sum(x.^3), [1 2; 3 4])  # uses linear indexing of x
     6   0   0   0
     0  18   0   0
     0   0  12   0
     0   0   0  24
    julia> hessian(sin, pi/2)
    -1.0
    """,
)
def case_hessian():
    # under jax.jit: one compilation instead of one per primitive (the same functions run)
    close(jax.jit(lambda x: Z.hessian(lambda x: x[0] * x[1], x))(jnp.array([0.3, -1.2])), rows([0, 1], [1, 0]))
    close(jax.jit(lambda x: Z.hessian(lambda x: jnp.sum(x**3), x))(jnp.array(rows([1, 2], [3, 4]))), np.diag([6.0, 18, 12, 24]))
    close(jax.jit(lambda x: Z.hessian(jnp.sin, x))(np.pi / 2), -1.0)


@case(
    names=("diaghessian",),
    source="Zygote.jl src/lib/grad.jl (diaghessian docstring)",
    julia="""
    julia> diaghessian(x -> sum(x.^3), [1 2; 3 4])[1]
     6  12
    18  24
    julia> diaghessian(atan, 1, 2)  # note that the function does not map Number -> Number
    (-0.16, 0.16)
    """,
)
def case_diaghessian():
    dh = jax.jit(lambda x: Z.diaghessian(lambda x: jnp.sum(x**3), x))  # one compilation instead of one per primitive
    close(dh(jnp.array(rows([1, 2], [3, 4])))[0], rows([6, 12], [18, 24]))
    d = jax.jit(lambda a, b: Z.diaghessian(jnp.arctan2, a, b))(1.0, 2.0)
    close(d[0], -0.16)
    close(d[1], 0.16)


@case(
    names=("Params", "Grads", "gradient", "withgradient", "jacobian"),
    source="Zygote.jl test/deprecated.jl",
    julia="""
    w = [3.0, 1.0]; x = [2.0, 4.0]
    gs = @test_deprecated gradient(() -> sum(w .* x), Params([w]))
    @test gs[w] == x
    res = @test_deprecated withgradient(() -> sum(w .* x), Params([w]))
    @test res.val == sum(w .* x)
    @test res.grad[w] == x
    js = @test_deprecated jacobian(() -> w .* x, Params([w]))
    @test js[w] == [x[1] 0.0; 0.0 x[2]]
    """,
)
def case_implicit_params():
    w, x = jnp.array([3.0, 1.0]), jnp.array([2.0, 4.0])
    gs = Z.gradient(lambda: jnp.sum(w * x), Z.Params([w]))
    assert isinstance(gs, Z.Grads)
    close(gs[w], x)
    res = Z.withgradient(lambda: jnp.sum(w * x), Z.Params([w]))
    close(res.val, 10.0)
    close(res.grad[w], x)
    js = Z.jacobian(lambda: w * x, Z.Params([w]))
    close(js[w], rows([2.0, 0], [0, 4.0]))


@case(
    names=("Params",),
    source="Zygote.jl test/deprecated.jl",
    julia="""
    x = [0, 0]; y = [0]
    ps = Params([x, y])
    copy!(ps, [1, 2, 3])
    @test x == [1, 2]
    @test y == [3]
    """,
)
def case_params_copy():
    x, y = jnp.zeros(2), jnp.zeros(1)
    ps = Z.Params([x, y])
    ps.copy_(jnp.array([1.0, 2.0, 3.0]))
    equal(list(ps)[0], [1.0, 2.0])
    equal(list(ps)[1], [3.0])


@case(
    names=("Buffer",),
    source="Zygote.jl test/gradcheck_p3.jl (Buffer)",
    julia="""
    @test gradient([1, 2, 3]) do x
      b = Buffer(x)
      b[:] = x
      return sum(copy(b))
    end == ([1,1,1],)
    function vstack(xs)
      buf = Buffer(xs, length(xs), 5)
      for i = 1:5
        buf[:, i] = xs
      end
      return copy(buf)
    end
    @test gradient(x -> sum(vstack(x)), [1, 2, 3]) == ([5, 5, 5],)
    """,
)
def case_buffer():
    def f(x):
        b = Z.Buffer(x)
        b[:] = x
        return jnp.sum(b.copy())

    close(Z.gradient(f, jnp.array([1.0, 2, 3]))[0], [1, 1, 1])

    def vstack(xs):
        buf = Z.Buffer(xs, 3, 5)
        for i in range(5):
            buf[:, i] = xs
        return buf.copy()

    close(Z.gradient(lambda x: jnp.sum(vstack(x)), jnp.array([1.0, 2, 3]))[0], [5, 5, 5])


@case(
    names=("@adjoint", "gradient"),
    source="Zygote.jl test/features.jl",
    julia="""
    grad_closure(x) = 2x
    Zygote.@adjoint (f::typeof(grad_closure))(x) = f(x), Δ -> (1, 2)
    @test gradient((f, x) -> f(x), grad_closure, 5) == (1, 2)
    """,
)
def case_adjoint():
    # Python functions are not differentiable arguments: the rule's x-gradient (2) is what comes out.
    @Z.adjoint
    def grad_closure(x):
        return 2 * x, lambda dy: (2.0,)

    close(Z.gradient(grad_closure, 5.0)[0], 2)
    close(Z.gradient(lambda x: grad_closure(x), 5.0)[0], 2)


@case(
    names=("gradient",),
    source="Zygote.jl test/features.jl",
    julia="""
    function net(x1)
      x2  = x1
      x3  = x1 + x2
      x4  = x1 + x2 + x3
      ...
      x10 = x1 + x2 + x3 + x4 + x5 + x6 + x7 + x8 + x9
    end
    loss(x) = sum(abs2, net(x))
    @test gradient(loss, ones(10,10))[1] == fill(131072, 10, 10)
    """,
)
def case_accumulation():
    def net(x1):
        x2 = x1
        x3 = x1 + x2
        x4 = x1 + x2 + x3
        x5 = x1 + x2 + x3 + x4
        x6 = x1 + x2 + x3 + x4 + x5
        x7 = x1 + x2 + x3 + x4 + x5 + x6
        x8 = x1 + x2 + x3 + x4 + x5 + x6 + x7
        x9 = x1 + x2 + x3 + x4 + x5 + x6 + x7 + x8
        return x1 + x2 + x3 + x4 + x5 + x6 + x7 + x8 + x9

    equal(Z.gradient(lambda x: jnp.sum(net(x) ** 2), jnp.ones((10, 10)))[0], np.full((10, 10), 131072.0))


@case(
    names=("pushforward",),
    source="Zygote.jl test/forward.jl",
    julia="""
    D(f, x) = pushforward(f, x)(1)
    @test D(x -> sin(cos(x)), 0.5) == -cos(cos(0.5))*sin(0.5)
    @test D(x -> D(cos, x), 0.5) == -cos(0.5)
    @test D(x -> x*D(y -> x*y, 1), 4) == 8
    function pow(x, n)
      r = 1
      while n > 0
        n -= 1
        r *= x
      end
      return r
    end
    @test D(x -> pow(x, 3), 2) == 12
    @test D(x -> abs(x+2im), 1) == gradient(x -> abs(x+2im), 1)[1]
    """,
)
def case_pushforward():
    D = lambda f, x: fluxjax.zygote.pushforward(f, x)(1)  # noqa: E731
    close(D(lambda x: jnp.sin(jnp.cos(x)), 0.5), -np.cos(np.cos(0.5)) * np.sin(0.5))
    close(D(lambda x: D(jnp.cos, x), 0.5), -np.cos(0.5))
    close(D(lambda x: x * D(lambda y: x * y, 1), 4), 8)

    def pow(x, n):
        r = 1
        while n > 0:
            n -= 1
            r *= x
        return r

    close(D(lambda x: pow(x, 3), 2), 12)
    close(D(lambda x: jnp.abs(x + 2j), 1), Z.gradient(lambda x: jnp.abs(x + 2j), 1.0)[0])
    close(D(lambda x: jnp.abs(x + 2j), 1), 1 / np.sqrt(5))


@case(
    names=("hessian_reverse", "hessian"),
    source="Zygote.jl test/utils.jl",
    julia="""
    @testset "hessian: $hess" for hess in [hessian_dual, hessian_reverse]
      @test hess(x -> x[1]*x[2], randn(2)) ≈ [0 1; 1 0]
      @test hess(x -> sum(x.^3), [1 2; 3 4]) ≈ Diagonal([6, 18, 12, 24])
      @test hess(sin, pi/2) ≈ -1
    """,
)
def case_hessian_reverse():
    for hess in (Z.hessian, Z.hessian_reverse):
        close(hess(lambda x: x[0] * x[1], jnp.array([0.3, -1.2])), rows([0, 1], [1, 0]))
        close(hess(lambda x: jnp.sum(x**3), jnp.array(rows([1, 2], [3, 4]))), np.diag([6.0, 18, 12, 24]))
        close(hess(jnp.sin, np.pi / 2), -1.0)


@case(
    names=("isderiving", "gradient"),
    source="Zygote.jl test/tools.jl",
    julia="""
    function f(x)
      if Zygote.isderiving(x)
        x^2
      else
        2x^2
      end
    end
    gs = gradient(4) do x
      gradient(x) do y
        f(y)
      end[1]
    end
    @test gs == (2,)
    f56(p) = sum(Tester(p).cpu_offload .* p)   # cpu_offload = isderiving(p) ? 0.0 : 0.2
    @test gradient(f56, [1.0])[1] == [0.]
    """,
)
def case_isderiving():
    f = lambda x: x**2 if Z.isderiving(x) else 2 * x**2
    equal(Z.gradient(lambda x: Z.gradient(f, x)[0], 4.0)[0], 2.0)
    assert f(3.0) == 18.0  # outside a gradient
    f56 = lambda p: jnp.sum((0.0 if Z.isderiving(p) else 0.2) * p)
    equal(Z.gradient(f56, jnp.array([1.0]))[0], [0.0])


@case(
    names=("gradient", "withgradient", "AutoZygote", "AutoEnzyme", "AutoMooncake", "AutoFiniteDifferences"),
    source="Flux.jl src/gradient.jl (gradient and withgradient docstrings)",
    julia="""
    julia> Flux.gradient(*, 2.0, 3.0, 5.0)
    (15.0, 10.0, 6.0)
    julia> Flux.gradient(x -> sum(abs2,x), [7.0, 11.0, 13.0])
    ([14.0, 22.0, 26.0],)
    julia> f(x) = sum(2 .* x)
    julia> Flux.gradient(f, AutoMooncake(), [1.0, 2.0, 3.0])
    ([2.0, 2.0, 2.0],)
    julia> model = Chain(Dense([3.0;;]));
    julia> Flux.gradient(model, [1]) do m, x  # computed using Zygote
             sum(abs2, m(x))
           end
    ((layers = ((weight = [6.0;;], bias = [6.0], σ = nothing),),), [18.0])
    # gradient(f, [adtype,] args...): "We provide specific support and testing for the following backends:
    # AutoZygote, AutoEnzyme, AutoMooncake, and AutoFiniteDifferences."
    """,
)
def case_adtypes():
    G = fluxjax.gradient
    backends = (fluxjax.AutoZygote(), fluxjax.AutoEnzyme(), fluxjax.AutoMooncake(), fluxjax.AutoFiniteDifferences())
    for ad in backends:
        close(G(lambda a, b, c: a * b * c, ad, 2.0, 3.0, 5.0), [15.0, 10.0, 6.0], rtol=1e-5)
        close(G(lambda x: jnp.sum(x**2), ad, jnp.asarray([7.0, 11.0, 13.0]))[0], [14.0, 22.0, 26.0], rtol=1e-5)
        close(G(lambda x: jnp.sum(2 * x), ad, jnp.asarray([1.0, 2.0, 3.0]))[0], [2.0, 2.0, 2.0], rtol=1e-5)
        model = fluxjax.Chain(fluxjax.Dense(np.array([[3.0]], np.float32)))
        gm, gx = G(lambda m, x: jnp.sum(m(x) ** 2), ad, model, jnp.asarray([[1.0]]))
        close(gm.layers[0].weight, [[6.0]], rtol=1e-5)
        close(gm.layers[0].bias, [6.0], rtol=1e-5)
        assert gm.layers[0].sigma is None
        close(gx, [[18.0]], rtol=1e-5)
        val, (g,) = fluxjax.withgradient(lambda x: jnp.sum(x**2), ad, jnp.asarray([1.0, 2.0]))
        close(val, 5.0)
        close(g, [2.0, 4.0], rtol=1e-5)


@case(
    names=("@showgrad",),
    source="Zygote.jl src/lib/utils.jl (@showgrad docstring)",
    julia="""
    julia> gradient(2, 3) do a, b
             @showgrad(a)*b
           end
    ∂(a) = 3
    (3, 2)
    # Note that the gradient depends on how the output of `@showgrad` is *used*, and is
    # not the *overall* gradient of the variable `a`. For example:
    julia> gradient(2) do a
         @showgrad(a)*a
       end
    ∂(a) = 2
    (4,)
    """,
)
def case_showgrad():
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        g = fluxjax.gradient(lambda a, b: Z.showgrad(a, "a") * b, 2.0, 3.0)
        jax.effects_barrier()
        g2 = fluxjax.gradient(lambda a: Z.showgrad(a, "a") * a, 2.0)
        jax.effects_barrier()
    close(g, [3.0, 2.0])
    close(g2[0], 4.0)
    assert out.getvalue().splitlines() == ["∂(a) = 3.0", "∂(a) = 2.0"], out.getvalue()


@fluxjax.layer
class TwoPaths:
    def __init__(self, a, b):
        self.a, self.b = a, b

    def __call__(self, x):
        return self.a(x) + self.b(x)


@case(
    names=("gradient", "destructure", "update!"),
    source="Flux.jl test/utils.jl (issue 1767)",
    julia="""
    struct Model; a; b; end
    Flux.@layer Model
    (m::Model)(x) = m.a(x) .+ m.b(x)
    d = Dense(1, 1)
    x = rand(Float32, 1, 1)
    model = Model(d, d)
    # Sharing the parameters
    @test Flux.trainables(model) |> length == 2
    g1 = Flux.gradient(m -> sum(m(x)), model)[1]
    p, re = Flux.destructure(model)
    g2 = Flux.gradient(p -> sum(re(p)(x)), p)[1]
    @test g2 ≈ vcat(g1.a.weight .+ g1.b.weight, g1.a.bias .+ g1.b.bias)
    """,
)
def case_shared_layer_per_path_gradient():
    # Zygote gives each path its own gradient (g1.a and g1.b are x and 1 each); Optimisers.jl sums them
    d = fluxjax.Dense(jnp.array([[0.7]]), jnp.array([0.2]))
    x = jnp.array([[0.4]])
    model = TwoPaths(d, d)
    assert len(fluxjax.params(model)) == 2
    (g1,) = Z.gradient(lambda m: jnp.sum(m(x)), model)
    close(g1.a.weight, [[0.4]])
    close(g1.b.bias, [1.0])
    p, re = fluxjax.destructure(model)
    (g2,) = Z.gradient(lambda p: jnp.sum(re(p)(x)), p)
    close(g2, np.concatenate([(g1.a.weight + g1.b.weight).ravel(), g1.a.bias + g1.b.bias]))
    st = fluxjax.setup(fluxjax.Descent(0.1), model)
    fluxjax.update_(st, model, g1)
    assert model.a is model.b
    close(d.weight, [[0.7 - 0.1 * 0.8]])


@case(
    names=("jacobian",),
    source="Zygote.jl src/lib/grad.jl jacobian (an argument that is not an array gets nothing); Julia lines written for this port",
    julia="""
    j5 = jacobian((x, y) -> cumsum(x; dims=y), [1.0, 2, 3], 1)
    @test j5[1] == LowerTriangular(ones(3, 3))
    @test j5[2] === nothing
    """,
)
def case_jacobian_int_axis():
    J, n = Z.jacobian(lambda x, d: jnp.cumsum(x, axis=d), jnp.array([1.0, 2.0, 3.0]), 0)
    assert n is None
    close(J, np.tril(np.ones((3, 3))))


@case(
    names=("Buffer",),
    source="Zygote.jl src/tools/buffer.jl (Base.deleteat!(b::Buffer, i)); Julia lines written for this port",
    julia="""
    gradient([1.0, 2, 3]) do x
      b = Zygote.Buffer(x)
      b[:] = x
      deleteat!(b, 2)
      sum(copy(b))
    end == ([1, 0, 1],)
    """,
)
def case_buffer_deleteat():
    def f(x):
        b = Z.Buffer(x)
        b[:] = x
        del b[1]
        return jnp.sum(b.copy())

    (g,) = Z.gradient(f, jnp.array([1.0, 2.0, 3.0]))
    close(g, [1.0, 0.0, 1.0])


@case(
    names=("trainables",),
    source="Optimisers.jl src/trainables.jl (trainables(x; path=true)); Julia lines written for this port",
    julia="""
    m = (a = [1.0, 2.0], b = (c = [3.0], d = 4))
    ps = trainables(m, path=true)
    @test ps[1] == (KeyPath(:a) => [1.0, 2.0])
    @test ps[2] == (KeyPath(:b, :c) => [3.0])
    """,
)
def case_trainables_path():
    from fluxjax.keypath import KeyPath

    m = {"a": jnp.array([1.0, 2.0]), "b": {"c": jnp.array([3.0]), "d": 4}}
    ps = fluxjax.trainables(m, path=True)
    assert [kp for kp, _ in ps] == [KeyPath("a"), KeyPath("b", "c")]
    close(ps[0][1], [1.0, 2.0])
    close(ps[1][1], [3.0])
