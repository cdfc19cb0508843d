"""Layer system, printing, devices and model loading (Flux.jl test/layers/macro.jl, test/layers/show.jl,
test/functors.jl, test/loading.jl)."""

import jax
import jax.numpy as jnp
import numpy as np

import fluxjax
from compat._case import case, equal, raises
from fluxjax import Chain, Dense, Dropout, Scale


@fluxjax.layer
class Duo:
    def __init__(self, x, y):
        self.x, self.y = x, y

    def __call__(self, v):
        return self.y(self.x(v))


@fluxjax.layer(trainable=("a", "b"))
class Trio:
    def __init__(self, a, b, c):
        self.a, self.b, self.c = a, b, c


@case(
    names=("@layer", "fmap", "trainable", "gradient", "params"),
    source="Flux.jl test/layers/macro.jl",
    julia="""
    struct Duo{T,S}; x::T; y::S; end
    @layer Duo
    struct Trio; a; b; c end
    @layer Trio trainable=(a,b)
    m2 = MacroTest.Duo(Dense(2=>2), Chain(Flux.Scale(2), Dropout(0.2)))
    @test Functors.children(m2) isa NamedTuple{(:x, :y)}
    @test length(Optimisers.destructure(m2)[1]) == 10
    m3 = MacroTest.Trio([1.0], [2.0], [3.0])
    @test Functors.children(m3) isa NamedTuple{(:a, :b, :c)}
    @test fmap(zero, m3) isa MacroTest.Trio
    @test Optimisers.trainable(m3) isa NamedTuple{(:a, :b)}
    @test Optimisers.destructure(m3)[1] == [1, 2]
    """,
)
def case_layer_macro():
    m2 = Duo(Dense(2, 2), Chain(Scale(2), Dropout(0.2)))
    assert list(fluxjax.children(m2)) == ["x", "y"]
    assert sum(int(np.size(p)) for p in fluxjax.params(m2)) == 10  # destructure is missing; params counts the same
    m3 = Trio(jnp.array([1.0]), jnp.array([2.0]), jnp.array([3.0]))
    assert list(fluxjax.children(m3)) == ["a", "b", "c"]
    z = fluxjax.fmap(jnp.zeros_like, m3)
    assert isinstance(z, Trio)
    equal(z.c, [0.0])
    assert list(fluxjax.trainable(m3)) == ["a", "b"]
    assert [float(p[0]) for p in fluxjax.params(m3)] == [1.0, 2.0]
    g = fluxjax.gradient(lambda m: jnp.sum(m(jnp.ones(2))), m2)[0]
    assert g.x.weight.shape == (2, 2)


@case(
    names=("Dense", "Chain"),
    source="Flux.jl test/layers/show.jl",
    julia="""
    toplevel_dense = repr("text/plain", Dense(2,3))
    @test occursin("Dense(2 => 3)", toplevel_dense)
    @test occursin("# 9 parameters", toplevel_dense)
    toplevel_chain = repr("text/plain", Chain(Dense(2,3)))
    @test occursin("Chain(\\n  Dense(2 => 3)", toplevel_chain)
    @test occursin("# 9 parameters", toplevel_chain)
    """,
)
def case_show():
    s = repr(Dense(2, 3))
    assert "Dense(2 => 3)" in s and "# 9 parameters" in s
    s = repr(Chain(Dense(2, 3)))
    assert "Chain(\n  Dense(2 => 3)" in s and "# 9 parameters" in s


@case(
    names=("Chain",),
    source="Flux.jl test/layers/show.jl",
    julia="""
    toplevel_chain = repr("text/plain", Chain(Dense(2,3)))
    @test !occursin("# Total:", toplevel_chain)
    """,
)
def case_show_total():
    assert "# Total:" not in repr(Chain(Dense(2, 3)))
    assert "# Total: 4 arrays, 13 parameters" in repr(Chain(Dense(2, 3), Dense(3, 1)))


@case(
    names=("gpu", "cpu"),
    source="Flux.jl test/functors.jl",
    julia="""
    x = rand(Float32, 10, 10)
    if gpu_device() isa CPUDevice
        @test x == gpu(x)
    end
    """,
)
def case_gpu_cpu():
    import warnings

    import jax

    x = fluxjax.rand32(10, 10)
    if all(d.platform == "cpu" for d in jax.devices()):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # Flux's gpu also warns once when no GPU backend is loaded
            equal(fluxjax.gpu(x), x)
    equal(fluxjax.cpu(x), x)


@case(
    names=("cpu_device", "CPUDevice"),
    source="Flux.jl test/functors.jl",
    julia="""
    dev = Flux.cpu_device()
    @test typeof(dev) <: Flux.CPUDevice
    @test dev(x) == x
    """,
)
def case_cpu_device():
    dev = fluxjax.cpu_device()
    assert isinstance(dev, fluxjax.CPUDevice)
    x = fluxjax.rand32(3)
    equal(dev(x), x)
    m = dev(Chain(Dense(2, 3)))  # a model moves too, as with cpu(m)
    assert m[0].weight.devices() == {jax.devices("cpu")[0]}


@case(
    names=("gpu_device", "cpu_device", "CPUDevice", "gpu"),
    source="Flux.jl test/functors.jl",
    julia="""
    x = rand(Float32, 10, 10)
    if gpu_device() isa CPUDevice
        @test x == gpu(x)
    end
    cdev = cpu_device()   # test/ext_cuda/get_devices.jl
    @test cdev(x) == x
    """,
)
def case_gpu_device():
    import warnings

    x = fluxjax.rand32(10, 10)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # MLDataDevices also warns when it falls back to the CPU
        dev = fluxjax.gpu_device()
        if isinstance(dev, fluxjax.CPUDevice):
            equal(fluxjax.gpu(x), x)
            equal(dev(x), x)
        else:
            equal(fluxjax.cpu_device()(dev(x)), x)
    equal(fluxjax.cpu_device()(x), x)


@case(
    names=("loadmodel!", "Chain", "Dense", "relu"),
    source="Flux.jl test/loading.jl",
    julia="""
    m1 = Chain(Dense(10 => 5), Dense(5 => 2, relu))
    m2 = Chain(Dense(10 => 5), Dense(5 => 2))
    m4 = Chain(Dense(10 => 6), Dense(6 => 2))
    Flux.loadmodel!(m1, m2)
    # trainable parameters copy over
    @test m1[1].weight == m2[1].weight
    @test m1[1].bias == m2[1].bias
    # non-array leaves are untouched
    @test m1[2].σ == relu
    # size mismatches throw an error
    @test_throws DimensionMismatch Flux.loadmodel!(m1, m4)
    """,
)
def case_loadmodel():
    m1 = Chain(Dense(10, 5), Dense(5, 2, fluxjax.relu))
    m2 = Chain(Dense(10, 5), Dense(5, 2))
    fluxjax.loadmodel_(m1, m2)
    equal(m1[0].weight, m2[0].weight)
    equal(m1[0].bias, m2[0].bias)
    assert m1[1].sigma is fluxjax.relu
    raises(fluxjax.DimensionMismatch, fluxjax.loadmodel_, m1, Chain(Dense(10, 6), Dense(6, 2)))


@case(
    names=("state",),
    source="Flux.jl test/loading.jl",
    julia="""
    @test Flux.state((1, tanh)) == (1, ())
    @test Flux.state((a=1, b=tanh)) == (; a=1, b=())
    @test Flux.state(Dict(:a=>1, :b=>tanh)) == Dict(:a=>1, :b=>())
    """,
)
def case_state():
    assert fluxjax.state((1, jnp.tanh)) == (1, ())
    assert fluxjax.state({"a": 1, "b": jnp.tanh}) == {"a": 1, "b": ()}


@case(
    names=("loadmodel!", "Chain", "Conv", "BatchNorm", "flatten", "Dropout"),
    source="Flux.jl test/loading.jl",
    julia="""
    # tests for BatchNorm and Dropout
    m1 = Chain(Conv((3, 3), 3 => 16), BatchNorm(16), Flux.flatten, Dropout(0.2))
    m2 = Chain(Conv((3, 3), 3 => 16), BatchNorm(16), x -> reshape(x, :, size(x)[end]), Dropout(0.1))
    m2[2].μ .= rand(Float32, size(m2[2].μ)...)
    Flux.loadmodel!(m1, m2)
    # non-trainable parameters are copied as well
    @test m1[2].μ == m2[2].μ
    # functions are not copied
    @test m1[3] == Flux.flatten
    # dropout rate is not copied
    @test m1[4].p == 0.2
    """,
)
def case_loadmodel_state():
    from fluxjax import BatchNorm, Conv

    m1 = Chain(Conv((3, 3), (3, 16)), BatchNorm(16), fluxjax.flatten, Dropout(0.2))
    m2 = Chain(Conv((3, 3), (3, 16)), BatchNorm(16), lambda x: x.reshape((-1, x.shape[-1]), order="F"), Dropout(0.1))
    m2[1].mu = fluxjax.rand32(16)
    fluxjax.loadmodel_(m1, m2)
    equal(m1[1].mu, m2[1].mu)
    assert m1[2] is fluxjax.flatten
    assert m1[3].p == 0.2


@case(
    names=("loadmodel!", "ones32", "zeros32", "randn32", "Chain", "Dense", "Parallel"),
    source="Flux.jl test/loading.jl",
    julia="""
    m5 = Chain(Dense(10 => 5), Parallel(+, Dense(Flux.ones32(2, 5), false), Dense(5 => 2)))
    m6 = Chain(Dense(10 => 5), Parallel(+, Dense(5 => 2), Dense(5 => 2)))
    Flux.loadmodel!(m5, m6)
    # more complex nested structures also work
    @test m5[1].weight == m6[1].weight
    @test m5[2][1].weight == m6[2][1].weight
    # false bias is not overwritten
    @test m5[2][1].bias == false
    @testset "loadmodel! & absent bias" begin
      m0 = Chain(Dense(2 => 3; bias=false, init = Flux.ones32), Dense(3 => 1))
      m1 = Chain(Dense(2 => 3; bias = Flux.randn32(3)), Dense(3 => 1))
      m2 = Chain(Dense(Float32[1 2; 3 4; 5 6], Float32[7, 8, 9]), Dense(3 => 1))
      Flux.loadmodel!(m1, m2)
      @test m1[1].bias == 7:9
      @test sum(m1[1].weight) == 21
      # load from a model without bias -- should ideally recognise the `false` but `Params` doesn't store it
      m1 = Flux.loadmodel!(m1, m0)
      @test iszero(m1[1].bias)
      @test sum(m1[1].weight) == 6  # written before error
    # loading into tied weights with absent parameter is okay when the dst == zero
    b = Flux.zeros32(5)
    m1 = Chain(Dense(10 => 5; bias = b), Dense(5 => 5; bias = b))
    m2 = Chain(Dense(10 => 5; bias = Flux.zeros32(5)), Dense(5 => 5; bias = false))
    Flux.loadmodel!(m1, m2)
    @test m1[1].bias === m1[2].bias
    @test iszero(m1[1].bias)
    """,
)
def case_loadmodel_nested_and_bias():
    from fluxjax import Parallel

    add = lambda a, b: a + b
    m5 = Chain(Dense(10, 5), Parallel(add, Dense(fluxjax.ones32(2, 5), False), Dense(5, 2)))
    m6 = Chain(Dense(10, 5), Parallel(add, Dense(5, 2), Dense(5, 2)))
    fluxjax.loadmodel_(m5, m6)
    equal(m5[0].weight, m6[0].weight)
    equal(m5[1][0].weight, m6[1][0].weight)
    assert m5[1][0].bias is False
    m0 = Chain(Dense(2, 3, bias=False, init=fluxjax.ones32), Dense(3, 1))
    m1 = Chain(Dense(2, 3, bias=fluxjax.randn32(3)), Dense(3, 1))
    m2 = Chain(Dense(jnp.float32([[1, 2], [3, 4], [5, 6]]), jnp.float32([7, 8, 9])), Dense(3, 1))
    fluxjax.loadmodel_(m1, m2)
    equal(m1[0].bias, [7, 8, 9])
    assert float(jnp.sum(m1[0].weight)) == 21
    m1 = fluxjax.loadmodel_(m1, m0)
    equal(m1[0].bias, np.zeros(3))
    assert float(jnp.sum(m1[0].weight)) == 6
    b = fluxjax.zeros32(5)
    m1 = Chain(Dense(10, 5, bias=b), Dense(5, 5, bias=b))
    m2 = Chain(Dense(10, 5, bias=fluxjax.zeros32(5)), Dense(5, 5, bias=False))
    fluxjax.loadmodel_(m1, m2)
    assert m1[0].bias is m1[1].bias
    equal(m1[0].bias, np.zeros(5))


class _Tkp:
    """Functors' `Tkp`: fields a, b, c and a computed property `ab`."""

    def __init__(self, a, b, c):
        self.a, self.b, self.c = a, b, c

    @property
    def ab(self):
        return "ab"


@case(
    names=("KeyPath", "getkeypath", "haskeypath"),
    source="Functors.jl test/keypath.jl",
    julia="""
    kp = KeyPath(:a, 3, :b, 4)
    @test (kp...,) === (:a, 3, :b, 4)
    @test length(kp) == 4
    @test kp[1] == :a
    kp2 = KeyPath(:a, kp, :c, 5)
    @test (kp2...,) === (:a, :a, 3, :b, 4, :c, 5)
    kp3 = KeyPath(kp, kp2)
    @test (kp3...,) === (:a, 3, :b, 4, :a, :a, 3, :b, 4, :c, 5)
    kp0 = KeyPath()
    @test (kp0...,) === ()
    @testset "getkeypath" begin
        x = Dict(:a => 3, :b => Dict(:c => 4, "d" => [5, 6, 7]))
        @test getkeypath(x, KeyPath(:a)) == 3
        @test getkeypath(x, KeyPath(:b, :c)) == 4
        @test getkeypath(x, KeyPath(:b, "d", 2)) == 6
        x = Tkp(3, Tkp(4, 5, (6, 7)), 8)
        kp = KeyPath(:b, :c, 2)
        @test getkeypath(x, kp) == 7
        x = [(a=1,) (b=2,)]
        @test getkeypath(x, KeyPath(CartesianIndex(1, 1), :a)) == 1
        @test getkeypath(x, KeyPath(CartesianIndex(1, 2), :b)) == 2
        x = Tkp(3, Dict(:c => 4, :d => 5), 6);
        @test getkeypath(x, KeyPath(:ab)) == "ab"
        @test getkeypath(x, KeyPath(:b, :c)) == 4
    end
    @testset "setkeypath!" begin
        x = Dict(:a => 3, :b => Dict(:c => 4, "d" => [5, 6, 7]))
        setkeypath!(x, KeyPath(:a), 4)
        @test x[:a] == 4
        setkeypath!(x, KeyPath(:b, "d", 1), 17)
        @test x[:b]["d"][1] == 17
        setkeypath!(x, KeyPath(:b, "d"), [0])
        @test x[:b]["d"] == [0]
        x = Tkp(3, Tkp(4, 5, [6, 7]), 8)
        kp = KeyPath(:b, :c, 2)
        setkeypath!(x, kp, 17)
        @test x.b.c[2] == 17
    end
    @testset "haskeypath" begin
        x = Dict(:a => 3, :b => Dict(:c => 4, "d" => [5, 6, 7]))
        @test haskeypath(x, KeyPath(:a))
        @test haskeypath(x, KeyPath(:b, :c))
        @test haskeypath(x, KeyPath(:b, "d", 2))
        @test !haskeypath(x, KeyPath(:b, "d", 4))
        @test !haskeypath(x, KeyPath(:b, "e"))
        x = [(a=1,) (b=2,)]
        @test haskeypath(x, KeyPath(CartesianIndex(1, 1)))
        @test haskeypath(x, KeyPath(CartesianIndex(1, 2)))
        @test !haskeypath(x, KeyPath(CartesianIndex(1, 3)))
        x = Tkp(3, Dict(:c => 4, :d => 5), 6);
        @test haskeypath(x, KeyPath(:ab))
        @test haskeypath(x, KeyPath(:b, :c))
        @test !haskeypath(x, KeyPath(:b, :e))
    end
    """,
)
def case_keypath():
    from fluxjax import KeyPath, getkeypath, haskeypath, setkeypath_

    kp = KeyPath("a", 2, "b", 3)  # indices are 0-based: Julia's 3 and 4
    assert tuple(kp) == ("a", 2, "b", 3) and len(kp) == 4 and kp[0] == "a" and kp[1] == 2
    kp2 = KeyPath("a", kp, "c", 4)
    assert tuple(kp2) == ("a", "a", 2, "b", 3, "c", 4)
    assert tuple(KeyPath(kp, kp2)) == ("a", 2, "b", 3, "a", "a", 2, "b", 3, "c", 4)
    assert tuple(KeyPath()) == ()

    x = {"a": 3, "b": {"c": 4, "d": [5, 6, 7]}}
    assert getkeypath(x, KeyPath("a")) == 3 and getkeypath(x, KeyPath("b", "c")) == 4
    assert getkeypath(x, KeyPath("b", "d", 1)) == 6
    assert getkeypath(_Tkp(3, _Tkp(4, 5, (6, 7)), 8), KeyPath("b", "c", 1)) == 7
    grid = np.empty((1, 2), object)
    grid[0, 0], grid[0, 1] = {"a": 1}, {"b": 2}
    assert getkeypath(grid, KeyPath((0, 0), "a")) == 1 and getkeypath(grid, KeyPath((0, 1), "b")) == 2
    t = _Tkp(3, {"c": 4, "d": 5}, 6)
    assert getkeypath(t, KeyPath("ab")) == "ab" and getkeypath(t, KeyPath("b", "c")) == 4

    setkeypath_(x, KeyPath("a"), 4)
    assert x["a"] == 4
    setkeypath_(x, KeyPath("b", "d", 0), 17)
    assert x["b"]["d"][0] == 17
    setkeypath_(x, KeyPath("b", "d"), [0])
    assert x["b"]["d"] == [0]
    t = _Tkp(3, _Tkp(4, 5, [6, 7]), 8)
    setkeypath_(t, KeyPath("b", "c", 1), 17)
    assert t.b.c[1] == 17

    x = {"a": 3, "b": {"c": 4, "d": [5, 6, 7]}}
    assert haskeypath(x, KeyPath("a")) and haskeypath(x, KeyPath("b", "c")) and haskeypath(x, KeyPath("b", "d", 1))
    assert not haskeypath(x, KeyPath("b", "d", 3)) and not haskeypath(x, KeyPath("b", "e"))
    assert haskeypath(grid, KeyPath((0, 0))) and haskeypath(grid, KeyPath((0, 1)))
    assert not haskeypath(grid, KeyPath((0, 2)))
    t = _Tkp(3, {"c": 4, "d": 5}, 6)
    assert haskeypath(t, KeyPath("ab")) and haskeypath(t, KeyPath("b", "c")) and not haskeypath(t, KeyPath("b", "e"))


@case(
    names=("functor", "@functor", "fmap"),
    source="Functors.jl test/basics.jl",
    julia="""
    struct Foo; x; y; end
    struct Bar{T}; x::T; end
    (in Functors ≥ 0.5 every struct is a functor; Flux code writes `@functor Foo`, now `@layer`)
    @testset "Nested" begin
      model = Bar(Foo(1, [1, 2, 3]))
      model′ = fmap(float, model)
      @test model.x.y == model′.x.y
      @test model′.x.y isa Vector{Float64}
    end
    @testset "@leaf" begin
      children, re = Functors.functor(b)
      @test re(children) === b
      a = LeafType(1)
      children, re = Functors.functor(a)
      @test children == Functors.NoChildren()
      @test re(children) === a
    end
    """,
)
def case_functor():
    @fluxjax.functor
    class Foo:
        def __init__(self, x, y):
            self.x, self.y = x, y

    @fluxjax.functor
    class Bar:
        def __init__(self, x):
            self.x = x

    model = Bar(Foo(1, np.asarray([1, 2, 3])))
    model2 = fluxjax.fmap(lambda a: a.astype(np.float64), model)
    equal(model2.x.y, model.x.y)
    assert model2.x.y.dtype == np.float64 and model2.x.x == 1
    children, re = fluxjax.functor(model)
    assert set(children) == {"x"} and re(children).x is model.x
    children, re = fluxjax.functor(model.x)
    assert set(children) == {"y"}  # the Python int is not a child: fluxjax's children are arrays and layers
    assert re({"y": np.zeros(3)}).x == 1
    leaf = jnp.ones(2)
    children, re = fluxjax.functor(leaf)
    assert children == () and re(children) is leaf


@case(
    names=("DeviceIterator", "get_device_type", "cpu_device"),
    source="MLDataDevices.jl src/iterator.jl (DeviceIterator docstring) and test/iterator_tests.jl",
    julia="""
    julia> X = rand(Float64, 3, 33);
    julia> dataloader = DataLoader(X; batchsize=13, shuffle=false);
    julia> for (i, x) in enumerate(CUDADevice()(dataloader))
               @show i, summary(x)
           end
    (i, summary(x)) = (1, "3×13 CuArray{Float32, 2, CUDA.DeviceMemory}")
    (i, summary(x)) = (2, "3×13 CuArray{Float32, 2, CUDA.DeviceMemory}")
    (i, summary(x)) = (3, "3×7 CuArray{Float32, 2, CUDA.DeviceMemory}")
    @testset "Basic Device Iterator" begin
        datalist = [rand(10) for _ in 1:10]
        for data in DeviceIterator(dev, datalist)
            @test size(data) == (10,)
            @test get_device_type(data) == dev_type
        end
    end
    """,
)
def case_device_iterator():
    dev = fluxjax.cpu_device()  # the device this suite runs on; gpu_device() is the same code
    X = np.random.default_rng(0).random((3, 33))
    shapes = [tuple(x.shape) for x in dev(fluxjax.DataLoader(X, batchsize=13, shuffle=False))]
    assert shapes == [(3, 13), (3, 13), (3, 7)]
    datalist = [np.random.default_rng(i).random(10) for i in range(10)]
    for data in fluxjax.DeviceIterator(dev, datalist):
        assert data.shape == (10,) and isinstance(data, jax.Array)
        assert fluxjax.get_device_type(data) is fluxjax.CPUDevice
