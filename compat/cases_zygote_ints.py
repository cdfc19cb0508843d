"""Zygote cases with Julia's `Int` arguments kept as integers (Zygote.jl test/features.jl, Flux.jl
src/gradient.jl) and `checkpointed` re-running Python on the backward pass (Zygote.jl test/features.jl).

Zygote differentiates `Int` numbers and arrays as reals; fluxjax does too (the gradient is a float array).
An integer used as an index or a size gets `nothing`, as in Zygote.
"""

import jax.numpy as jnp

import fluxjax
from compat._case import case, close, rows
from fluxjax import zygote as Z


@case(
    names=("pullback", "gradient"),
    source="Zygote.jl test/features.jl",
    julia="""
    y, back = pullback(x -> sum(x.*x), [1, 2, 3])
    dxs = back(1)
    @test y == 14
    @test dxs == ([2,4,6],)

    function myprod(xs)
      s = 1
      for x in xs
        s *= x
      end
      return s
    end
    @test gradient(myprod, [1,2,3])[1] == [6,3,2]
    """,
)
def case_int_array_arguments():
    y, back = Z.pullback(lambda x: jnp.sum(x * x), jnp.array([1, 2, 3]))
    close(y, 14)
    (dx,) = back(1)
    close(dx, [2, 4, 6])

    def myprod(xs):
        s = 1
        for x in xs:
            s *= x
        return s

    close(Z.gradient(myprod, jnp.array([1, 2, 3]))[0], [6, 3, 2])


@case(
    names=("Params", "pullback", "gradient"),
    source="Zygote.jl test/features.jl",
    julia="""
    W = [1 0; 0 1]
    x = [1, 2]
    y, back = pullback(() -> W * x, Params([W]))
    @test y == [1, 2]
    @test back([1, 1])[W] == [1 2; 1 2]
    @test gradient(() -> sum(W * x), Params([W]))[W] == [1 2; 1 2]
    """,
)
def case_int_array_implicit_params():
    W = jnp.array([[1, 0], [0, 1]])
    x = jnp.array([1, 2])
    y, back = Z.pullback(lambda: W @ x, Z.Params([W]))
    close(y, [1, 2])
    close(back(jnp.array([1, 1]))[W], rows([1, 2], [1, 2]))
    close(Z.gradient(lambda: jnp.sum(W @ x), Z.Params([W]))[W], rows([1, 2], [1, 2]))


@case(
    names=("gradient",),
    source="Flux.jl src/gradient.jl (gradient docstring)",
    julia="""
    julia> Flux.gradient([7, 11], 0, 1) do x, y, d
             p = size(x, d)
             sum(x.^p .+ y)
           end
    ([14.0, 22.0], 2.0, nothing)
    """,
)
def case_flux_gradient_int_array_and_dimension():
    # Julia's dimension 1 is axis 0; the Int `d` used as a dimension gets nothing
    g = fluxjax.gradient(lambda x, y, d: jnp.sum(x ** x.shape[d] + y), jnp.array([7, 11]), 0, 0)
    close(g[0], [14.0, 22.0])
    close(g[1], 2.0)
    assert g[2] is None


@case(
    names=("checkpointed", "pullback"),
    source="Zygote.jl test/features.jl",
    julia="""
    mutable struct CountCalls
        f
        ncalls
    end
    CountCalls(f=identity) = CountCalls(f, 0)
    function (o::CountCalls)(x...)
        o.ncalls += 1
        o.f(x...)
    end

    f = CountCalls()
    g = CountCalls()
    h = CountCalls()
    y,pb = Zygote.pullback(Zygote.checkpointed, h∘g∘f, 4.0)
    @test f.ncalls === g.ncalls === h.ncalls === 1
    @test pb(1.0) === (nothing, 1.0,)
    @test f.ncalls === g.ncalls === h.ncalls === 2
    @test pb(1.0) === (nothing, 1.0,)
    @test f.ncalls === g.ncalls === h.ncalls === 3

    function only_some_checkpointed(x)
        x2 = f(x)
        Zygote.checkpointed(h∘g, x2)
    end
    y,pb = Zygote.pullback(only_some_checkpointed, 4.0)
    @test f.ncalls === g.ncalls === h.ncalls === 1
    @test pb(1.0) === (1.0,)
    @test g.ncalls === h.ncalls === 2
    @test f.ncalls === 1
    """,
)
def case_checkpointed_counts_calls():
    # a plain Python counter (Julia's mutable struct): the eager backward pass calls the function again.
    # A Python function is not a differentiable argument: `pullback(lambda x: checkpointed(hgf, x), 4.0)`
    # has no leading `nothing`
    class CountCalls:
        def __init__(self, f=lambda x: x):
            self.f, self.ncalls = f, 0

        def __call__(self, *x):
            self.ncalls += 1
            return self.f(*x)

    f, g, h = CountCalls(), CountCalls(), CountCalls()
    y, pb = Z.pullback(lambda x: Z.checkpointed(lambda x: h(g(f(x))), x), 4.0)
    close(y, 4.0)
    assert f.ncalls == g.ncalls == h.ncalls == 1
    close(pb(1.0)[0], 1.0)
    assert f.ncalls == g.ncalls == h.ncalls == 2
    close(pb(1.0)[0], 1.0)
    assert f.ncalls == g.ncalls == h.ncalls == 3

    f, g, h = CountCalls(), CountCalls(), CountCalls()

    def only_some_checkpointed(x):
        x2 = f(x)
        return Z.checkpointed(lambda x: h(g(x)), x2)

    y, pb = Z.pullback(only_some_checkpointed, 4.0)
    assert f.ncalls == g.ncalls == h.ncalls == 1
    close(pb(1.0)[0], 1.0)
    assert g.ncalls == h.ncalls == 2
    assert f.ncalls == 1
