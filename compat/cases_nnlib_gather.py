# ruff: noqa: E501  (Julia test lines are quoted verbatim)
"""NNlib gather and scatter cases (NNlib.jl src/gather.jl, src/scatter.jl docstrings and test/testsuite/gather.jl, scatter.jl).

NNlib's 1-based indices are 0-based here: every index below is the Julia one minus 1.
"""

import operator
import statistics

import jax
import jax.numpy as jnp
import numpy as np

import fluxjax
from compat._case import case, close, equal, jl, raises, rows
from fluxjax import nnlib as N

GATHER = "NNlib.jl test/testsuite/gather.jl"
SCATTER = "NNlib.jl test/testsuite/scatter.jl"


def _fd_check(f, x, eps=1e-6, rtol=1e-6, atol=1e-8):
    """NNlib's `gradtest`: the AD gradient of `sum(w .* f(x))` (random `w`) against central finite differences, in Float64."""
    with jax.enable_x64(True):
        x = np.asarray(x, np.float64)
        w = np.random.default_rng(0).normal(size=np.shape(f(jnp.asarray(x))))

        def loss(v):
            return jnp.sum(w * f(v))

        g = np.asarray(jax.grad(loss)(jnp.asarray(x)))
        compiled = jax.jit(loss)  # the same loss at 2 x.size points: compiled once, not op by op each time
        num = np.zeros_like(x)
        for i in np.ndindex(x.shape):
            xp, xm = x.copy(), x.copy()
            xp[i] += eps
            xm[i] -= eps
            num[i] = (float(compiled(jnp.asarray(xp))) - float(compiled(jnp.asarray(xm)))) / (2 * eps)
        np.testing.assert_allclose(g, num, rtol=rtol, atol=atol)


@case(
    names=("gather",),
    source="NNlib.jl src/gather.jl (gather docstrings)",
    julia="""
    julia> NNlib.gather([1,20,300,4000], [2,4,2])
       20
     4000
       20
    julia> NNlib.gather([1 2 3; 4 5 6], [1,3,1,3,1])
     1  3  1  3  1
     4  6  4  6  4
    julia> src = reshape([1:15;], 3, 5)
    julia> NNlib.gather(src, [1, 2], [2, 4])
      4
     11
    """,
)
def case_gather_docstring():
    equal(N.gather(np.array([1, 20, 300, 4000]), [1, 3, 1]), [20, 4000, 20])
    equal(N.gather(rows([1, 2, 3], [4, 5, 6], dtype=np.int32), [0, 2, 0, 2, 0]), rows([1, 3, 1, 3, 1], [4, 6, 4, 6, 4]))
    src = jl(range(1, 16), (3, 5), np.int32)
    equal(N.gather(src, [0, 1], [1, 3]), [4, 11])


@case(
    names=("gather",),
    source=GATHER,
    julia="""
    @testset "gather scalar index" begin
        src = T[3, 4, 5, 6, 7];  index = [1 2 3 4; 4 2 1 3; 3 5 5 3]
        output = T[3 4 5 6; 6 4 3 5; 5 7 7 5]
        y = gather(src, index);  @test y isa Array{T,2};  @test size(y) == size(index);  @test y == output
        index2 = [1 2 3 4; 4 2 1 3; 3 6 5 3];  @test_throws BoundsError gather!(T.(zero(index)), src, index2)
        ## 2d src, 2d index of ints -> 3d output
        src = T[3 5 7; 4 6 8];  index = [1 2 3; 2 2 1; 3 1 3]
        output[:,:,1] = [3 5 7; 4 6 8];  output[:,:,2] = [5 5 3; 6 6 4];  output[:,:,3] = [7 3 7; 8 4 8]
        @test size(y) == (size(src)[1:Nsrc-M]..., size(index)...);  @test y == output
    end
    @testset "gather tuple index" begin
        src = T[3 5 7; 4 6 8];  index = [(1,1), (1,2), (1,3), (2,1), (2,2), (2,3)]
        @test gather(src, index) == T[3, 5, 7, 4, 6, 8]
        src = rand(T, 2, 3, 3);  index = [(rand(1:3), rand(1:3)) for i=1:6, j=1:6]
        @test size(gather(src, index)) == (2, 6, 6)
    end
    @testset "gather(src, IJK...)" begin
        x = reshape([1:15;], 3, 5)
        @test gather(x, [1,2], [2,4]) == [4, 11]
        @test gather(x, [1, 2]) == [1 4; 2 5; 3 6]
    end
    """,
)
def case_gather_testsuite():
    T = np.float32
    src = np.array([3, 4, 5, 6, 7], T)
    index = rows([1, 2, 3, 4], [4, 2, 1, 3], [3, 5, 5, 3], dtype=np.int64) - 1
    y = N.gather(src, index)
    assert y.dtype == T and y.shape == index.shape
    equal(y, rows([3, 4, 5, 6], [6, 4, 3, 5], [5, 7, 7, 5], dtype=T))
    equal(N.gather(src, index[:, :, None]), rows([3, 4, 5, 6], [6, 4, 3, 5], [5, 7, 7, 5], dtype=T)[:, :, None])
    raises(IndexError, N.gather, src, rows([1, 2, 3, 4], [4, 2, 1, 3], [3, 6, 5, 3], dtype=np.int64) - 1)

    src = rows([3, 5, 7], [4, 6, 8], dtype=T)
    index = rows([1, 2, 3], [2, 2, 1], [3, 1, 3], dtype=np.int64) - 1
    out = np.zeros((2, 3, 3), T)
    out[:, :, 0] = rows([3, 5, 7], [4, 6, 8])
    out[:, :, 1] = rows([5, 5, 3], [6, 6, 4])
    out[:, :, 2] = rows([7, 3, 7], [8, 4, 8])
    equal(N.gather(src, index), out)

    equal(N.gather(src, [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2)]), np.array([3, 5, 7, 4, 6, 8], T))
    src3 = np.random.rand(2, 3, 3).astype(T)
    tup = [[(np.random.randint(3), np.random.randint(3)) for _ in range(6)] for _ in range(6)]
    y = N.gather(src3, tup)
    assert y.shape == (2, 6, 6)
    equal(y[:, 4, 2], src3[:, tup[4][2][0], tup[4][2][1]])

    x = jl(range(1, 16), (3, 5), np.int32)
    equal(N.gather(x, [0, 1], [1, 3]), [4, 11])
    equal(N.gather(x, ([0, 1], [1, 3])), [4, 11])
    equal(N.gather(x, [0, 1]), rows([1, 4], [2, 5], [3, 6]))


@case(
    names=("gather", "gradient"),
    source=GATHER,
    julia="""
    @testset "gather gradient for scalar index" begin
        src = Float64[3, 4, 5, 6, 7];  idx = [1 2 3 4; 4 2 1 3; 3 5 5 3]
        gradtest(xs -> gather(xs, idx), src)
    end
    @testset "gather gradient for tuple index" begin
        src = Float64[3 5 7; 4 6 8];  idx = [(1,1), (1,2), (1,3), (2,1), (2,2), (2,3)]
        gradtest(xs -> gather(xs, idx), src)
    end
    """,
)
def case_gather_gradient():
    idx = rows([1, 2, 3, 4], [4, 2, 1, 3], [3, 5, 5, 3], dtype=np.int64) - 1
    _fd_check(lambda xs: N.gather(xs, idx), [3, 4, 5, 6, 7.0])
    tup = [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2)]
    _fd_check(lambda xs: N.gather(xs, tup), rows([3, 5, 7], [4, 6, 8]))
    # the pullback is NNlib's ∇gather_src = scatter(+, Δ, idx): repeated indices accumulate
    g = fluxjax.gradient(lambda xs: jnp.sum(N.gather(xs, idx)), jnp.asarray([3, 4, 5, 6, 7.0]))[0]
    equal(g, [2, 2, 4, 2, 2.0])


@case(
    names=("scatter",),
    source="NNlib.jl src/scatter.jl (scatter docstring)",
    julia="""
    julia> NNlib.scatter(+, [10,100,1000], [3,1,2])
      100
     1000
       10
    julia> NNlib.scatter(+, [1 2 3 4; 5 6 7 8], [2,1,1,5])
      5  1  0  0  4
     13  5  0  0  8
    julia> NNlib.scatter(*, [10,200,3000], [1,4,2]; init = 10, dstsize = 6)
       100
     30000
        10
      2000
        10
        10
    """,
)
def case_scatter_docstring():
    equal(N.scatter("+", np.array([10, 100, 1000]), [2, 0, 1]), [100, 1000, 10])
    equal(N.scatter(operator.add, rows([1, 2, 3, 4], [5, 6, 7, 8], dtype=np.int32), [1, 0, 0, 4]),
          rows([5, 1, 0, 0, 4], [13, 5, 0, 0, 8]))
    equal(N.scatter(operator.mul, np.array([10, 200, 3000]), [0, 3, 1], init=10, dstsize=6), [100, 30000, 10, 2000, 10, 10])


# test/testsuite/scatter.jl: srcs[(dims, false)] and res[(op, dims, false)], the non-mutating `scatter(op, T.(src), idx)`
_SC_IDX = rows([1, 2, 3, 4], [4, 2, 1, 3], [3, 5, 5, 3], dtype=np.int64) - 1
_SC_SRC = {0: np.ones((3, 1)) * np.arange(1, 5)[None, :]}
_SC_SRC[1] = np.array([1, 2]).reshape(2, 1, 1) * _SC_SRC[0][None]
_SC_RES = {
    ("+", 0): [4, 4, 12, 5, 5], ("+", 1): rows([4, 4, 12, 5, 5], [8, 8, 24, 10, 10]),
    ("-", 0): [-4, -4, -12, -5, -5], ("-", 1): rows([-4, -4, -12, -5, -5], [-8, -8, -24, -10, -10]),
    ("max", 0): [3, 2, 4, 4, 3], ("max", 1): rows([3, 2, 4, 4, 3], [6, 4, 8, 8, 6]),
    ("min", 0): [1, 2, 1, 1, 2], ("min", 1): rows([1, 2, 1, 1, 2], [2, 4, 2, 2, 4]),
    ("*", 0): [3, 4, 48, 4, 6], ("*", 1): rows([3, 4, 48, 4, 6], [12, 16, 768, 16, 24]),
    ("/", 0): [1 / 3, 1 / 4, 1 / 48, 1 / 4, 1 / 6], ("/", 1): rows([1 / 3, 1 / 4, 1 / 48, 1 / 4, 1 / 6],
                                                                 [1 / 12, 1 / 16, 1 / 768, 1 / 16, 1 / 24]),
    ("mean", 0): [2, 2, 3, 2.5, 2.5], ("mean", 1): rows([2, 2, 3, 2.5, 2.5], [4, 4, 6, 5, 5]),
}
_SC_OPS = {"+": operator.add, "-": operator.sub, "max": max, "min": min, "*": operator.mul, "/": operator.truediv,
           "mean": statistics.mean}


@case(
    names=("scatter",),
    source=SCATTER,
    julia="""
    srcs = Dict((0, false) => ones(Int, 3) * collect(1:4)',
                (1, false) => [1, 2] .* reshape(ones(Int, 3) * collect(1:4)', 1,3,4))
    idxs = Dict(:int => [1 2 3 4; 4 2 1 3; 3 5 5 3],
                :tup => [(1,) (2,) (3,) (4,); (4,) (2,) (1,) (3,); (3,) (5,) (5,) (3,)])
    res = Dict((+, 0, false) => [4, 4, 12, 5, 5],     (+, 1, false) => [4 4 12 5 5; 8 8 24 10 10],
               (-, 0, false) => [-4, -4, -12, -5, -5], (max, 0, false) => [3, 2, 4, 4, 3],
               (min, 0, false) => [1, 2, 1, 1, 2],     (*, 1, false) => [3 4 48 4 6; 12 16 768 16 24],
               (/, 0, false) => [1//3, 1//4, 1//48, 1//4, 1//6],  (mean, 0, false) => [2, 2, 3, 2.5, 2.5], ...)
    for T in types, idx = values(idxs), dims = [0, 1]   # (+, -, max, min, *) over Int32, Int64, Float32, ...;
        @test scatter(op, T.(src), idx) == T.(res[(op, dims, false)])   # (/, mean) over Float16, Float32, ...
    end
    """,
)
def case_scatter_ops():
    for (name, dims), want in _SC_RES.items():
        types = (np.float32,) if name in ("/", "mean") else (np.int32, np.float32)
        for T in types:
            src = _SC_SRC[dims].astype(T)
            for idx in (_SC_IDX, [[(int(i),) for i in r] for r in _SC_IDX]):  # :int and :tup (1-tuples)
                for op in (name, _SC_OPS[name]):
                    y = N.scatter(op, src, idx)
                    assert y.dtype == T, (name, y.dtype, T)
                    close(y, want, rtol=1e-6)


@case(
    names=("scatter", "gradient"),
    source=SCATTER,
    julia="""
    @testset "dstsize" begin
        idx = [2, 2, 3, 4, 4];  src = ones(T, 3, 5)
        y = scatter(+, src, idx, dstsize = (3, 6))
        @test eltype(y) == T;  @test size(y) == (3, 6)
        gradtest(x -> scatter(+, x, idx; dstsize=(3, 6)), src)
    end
    @testset "∂src" begin
        for op in (+, -, *, /, mean, max, min), i in (0, 1)
            gradtest(xs -> scatter(op, xs, idx), T.(srcs[(i, false)]); fdm=fdm(op))
    end
    @testset "∂src vector index (#703) - $op" for op in (*, /)
        idx = [3, 1, 2, 2];  src = T[10, 100, 1000, 1]
        gradtest(xs -> scatter(op, xs, idx), src)
    end
    """,
)
def case_scatter_gradient():
    idx = np.array([2, 2, 3, 4, 4]) - 1
    y = N.scatter("+", np.ones((3, 5), np.float32), idx, dstsize=(3, 6))
    assert y.dtype == np.float32 and y.shape == (3, 6)
    _fd_check(lambda x: N.scatter("+", x, idx, dstsize=(3, 6)), np.ones((3, 5)))
    for name in ("+", "-", "*", "/", "mean", "max", "min"):
        for dims in (0, 1):
            # NNlib's srcs[(i, false)] has ties (repeated values into one place); max/min's finite differences
            # are one-sided there (fdm = :forward / :backward), so those two are checked on distinct values
            src = _SC_SRC[dims] + (np.arange(12).reshape(3, 4) / 16 if name in ("max", "min") else 0)
            _fd_check(lambda xs, op=name: N.scatter(op, xs, _SC_IDX), src, rtol=1e-5)
    for name in ("*", "/"):
        _fd_check(lambda xs, op=name: N.scatter(op, xs, np.array([3, 1, 2, 2]) - 1), [10, 100, 1000, 1.0], rtol=1e-5)
