"""Zygote's documentation as a script: every example, its Julia line, its fluxjax line and the value.

Each section follows Zygote.jl's docs (docs/src/index.md, adjoints.md, limitations.md and the
docstrings of `gradient`, `pullback`, `withgradient`, `jacobian`, `hessian`, `diaghessian`, `dropgrad`,
`hook`, `Buffer`), prints what fluxjax computes and asserts the value the Julia docs show.
Differences a porter must know are noted where they occur: arrays are float32 JAX arrays (an integer
array is differentiated as a real, as in Zygote, and its gradient is a float array); indexing is 0-based.
Run: python examples/zygote_tutorial.py [--quick]   (the whole tutorial takes seconds; --quick is accepted)
"""

import argparse
import os

import jax
import jax.numpy as jnp
import numpy as np

import fluxjax as Flux
from fluxjax import (
    Buffer,
    Params,
    adjoint,
    checkpointed,
    diaghessian,
    dropgrad,
    gradient,
    hessian,
    hook,
    ignore,
    jacobian,
    pullback,
    withgradient,
    withjacobian,
)

parser = argparse.ArgumentParser()
parser.add_argument("--quick", action="store_true", default=os.environ.get("FLUXJAX_EXAMPLE_QUICK") == "1")
parser.parse_args()
jnp.set_printoptions(precision=6, suppress=True)
checked = 0


def show(julia, value, expected=None):
    """Print the Julia line and fluxjax's value; assert it equals what Zygote's docs show."""
    global checked
    print(f"julia> {julia}\n  {value!r}")
    if expected is not None:
        got = jax.tree_util.tree_leaves(value)
        want = jax.tree_util.tree_leaves(expected, is_leaf=lambda z: isinstance(z, list))  # a list is an array
        assert len(got) == len(want), f"{julia}: got {value!r}, Zygote's docs give {expected!r}"
        for g, w in zip(got, want, strict=True):
            np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-6, atol=1e-6, err_msg=julia)
        checked += 1


def section(title):
    print(f"\n## {title}")


# ------------------------------------------------------------------------------------------------
section("gradient: one derivative per argument (docs/src/index.md)")

show("gradient(x -> 3x^2 + 2x + 1, 5)", gradient(lambda x: 3 * x**2 + 2 * x + 1, 5.0), (32.0,))
show("gradient((a, b) -> a*b, 2, 3)", gradient(lambda a, b: a * b, 2.0, 3.0), (3.0, 2.0))
show("gradient(*, 2.0, 3.0, 5.0)", gradient(lambda a, b, c: a * b * c, 2.0, 3.0, 5.0), (15.0, 10.0, 6.0))
show("gradient(x -> sum(abs2, x), [7.0, 11.0, 13.0])",
     gradient(lambda x: jnp.sum(jnp.abs(x) ** 2), jnp.array([7.0, 11.0, 13.0])), ([14.0, 22.0, 26.0],))
# Zygote's `gradient([7, 11], 0, 1) do x, y, d; sum(x.^size(x, d) .+ y); end` gives ([14.0, 22.0], 2.0, nothing):
# integers are differentiated as reals, and one used as a size (Julia's dimension 1 is axis 0) gets None.
show("gradient((x, y, d) -> sum(x.^size(x, d) .+ y), [7, 11], 0, 1)",
     gradient(lambda x, y, d: jnp.sum(x ** x.shape[d] + y), jnp.array([7, 11]), 0, 0), ([14.0, 22.0], 2.0, None))


# Control flow and recursion are plain Python: the function is run, and its trace differentiated.
def pow_(x, n):                      # function pow(x, n); r = 1; for i = 1:n; r *= x; end; return r; end
    r = 1
    for _ in range(n):
        r *= x
    return r


def pow2(x, n):                      # pow2(x, n) = n <= 0 ? 1 : x*pow2(x, n-1)
    return 1 if n <= 0 else x * pow2(x, n - 1)


show("gradient(x -> pow(x, 3), 5)", gradient(lambda x: pow_(x, 3), 5.0), (75.0,))
show("gradient(x -> pow2(x, 3), 5)", gradient(lambda x: pow2(x, 3), 5.0), (75.0,))

d = {}                               # d = Dict(); mutable containers work


def store_and_square(x):
    d["x"] = x
    return d["x"] * d["x"]


show("gradient(5) do x; d[:x] = x; d[:x] * d[:x]; end", gradient(store_and_square, 5.0), (10.0,))

# ------------------------------------------------------------------------------------------------
section("Structs: the gradient of a struct has one entry per field")


@Flux.layer                          # struct Point; x::Float64; y::Float64; end
class Point:
    def __init__(self, x, y):
        self.x = jnp.asarray(x, jnp.float32)
        self.y = jnp.asarray(y, jnp.float32)

    def __add__(self, other):        # a::Point + b::Point = Point(a.x + b.x, a.y + b.y)
        return Point(self.x + other.x, self.y + other.y)


def dist(p):                         # dist(p::Point) = sqrt(p.x^2 + p.y^2)
    return jnp.sqrt(p.x**2 + p.y**2)


a, b = Point(1, 2), Point(3, 4)
show("dist(a + b)", dist(a + b), 7.211102550927978)
g = gradient(lambda a: dist(a + b), a)[0]
show("gradient(a -> dist(a + b), a)[1]   # (x = 0.5547, y = 0.8320)", (g.x, g.y), (0.5547001962252291, 0.8320502943378437))
g = gradient(lambda a: a.x, a)[0]
show("gradient(a -> a.x, Point(1, 2))   # ((x = 1, y = nothing),)", (g.x, g.y), (1.0, None))
assert g.y is None

# ------------------------------------------------------------------------------------------------
section("Explicit and implicit parameters (docs/src/index.md)")


@Flux.layer                          # struct Linear; W; b; end
class Linear:
    def __init__(self, W, b):
        self.W, self.b = W, b

    def __call__(self, x):           # (l::Linear)(x) = l.W * x .+ l.b
        return self.W @ x + self.b


x = jax.random.uniform(jax.random.PRNGKey(0), (5,))                     # x = rand(5)
theta = {"W": jax.random.uniform(jax.random.PRNGKey(1), (2, 5)), "b": jax.random.uniform(jax.random.PRNGKey(2), (2,))}
dtheta = gradient(lambda theta: jnp.sum(theta["W"] @ x + theta["b"]), theta)[0]
show("θ̄ = gradient(θ -> sum(linear(θ, x)), θ)[1]; θ̄[:b]", dtheta["b"], [1.0, 1.0])
show("θ̄[:W]   # each row is x", dtheta["W"], jnp.stack([x, x]))

model = Linear(theta["W"], theta["b"])                                  # model = Linear(rand(2, 5), rand(2))
dmodel = gradient(lambda model: jnp.sum(model(x)), model)[0]
show("dmodel = gradient(model -> sum(model(x)), model)[1]; dmodel.b", dmodel.b, [1.0, 1.0])

W, bias = theta["W"], theta["b"]                                        # W = rand(2, 5); b = rand(2)


def linear(x):                                                          # linear(x) = W * x .+ b
    return W @ x + bias


grads = gradient(lambda: jnp.sum(linear(x)), Params([W, bias]))        # Grads(...)
show("grads = gradient(() -> sum(linear(x)), Params([W, b])); grads[b]", grads[bias], [1.0, 1.0])
show("grads[W]", grads[W], jnp.stack([x, x]))

xm = jnp.array([[1.0, 2, 3], [4, 5, 6]])                                # x = [1 2 3; 4 5 6]
ym = jnp.array([7.0, 8])                                                # y = [7, 8]
zm = jnp.array([1.0, 10, 100])                                          # z = [1, 10, 100]
g = gradient(lambda: jnp.sum(xm * ym[:, None] * zm[None, :]), Params([xm, ym]))   # sum(x .* y .* z')
show("g = gradient(() -> sum(x .* y .* z'), Params([x, y])); g[x]", g[xm], [[7.0, 70, 700], [8, 80, 800]])
show("haskey(g, z)   # only x and y are parameters", zm in g, False)
assert zm not in g

w = jnp.array([3.0])                                                    # w = [3.0]
res = withgradient(lambda: jnp.sum(jnp.abs(w) ** 2), Params([w]))
show("res = withgradient(() -> sum(abs2, w), Params([w])); res.val, res.grad[w]", (res.val, res.grad[w]), (9.0, [6.0]))

# A Flux model: params(m) collects every trainable array; Grads is indexed by the arrays themselves
m = Flux.Chain(Flux.Dense(jnp.eye(2), jnp.zeros(2)), Flux.Dense(jnp.array([[1.0, 2.0]]), False))
gs = gradient(lambda: jnp.sum(m(jnp.array([3.0, 4.0]))), Flux.params(m))
show("gs = gradient(() -> sum(m([3, 4])), Flux.params(m)); gs[m[1].weight]", gs[m[0].weight], [[3.0, 4.0], [6.0, 8.0]])
show("gs[m[2].weight]", gs[m[1].weight], [[3.0, 4.0]])

# ------------------------------------------------------------------------------------------------
section("pullback: the value and a back-propagator (docstring of pullback; adjoints.md)")

y, back = pullback(jnp.sin, 0.5)                                        # y, back = pullback(sin, 0.5)
show("y", y, 0.479425538604203)
show("back(1)   # cos(0.5)", back(1.0), (0.8775825618903728,))
y, back = pullback(lambda a, b, c: a * b * c, 2.0, 3.0, 5.0)            # pullback(*, 2.0, 3.0, 5.0)
show("y", y, 30.0)
show("back(1.0)", back(1.0), (15.0, 10.0, 6.0))
show("back(2.0)", back(2.0), (30.0, 20.0, 12.0))
y, back = pullback(lambda x: jnp.stack([x, x]), 1.0)                    # pullback(x -> [x, x], 1.0)
show("back([1.0, 1.0])", back(jnp.array([1.0, 1.0])), (2.0,))

# ------------------------------------------------------------------------------------------------
section("withgradient: the value too, and auxiliary outputs (docstring of withgradient)")

y, grad = withgradient(lambda a, b: a / b, 1.0, 2.0)                    # y, ∇ = withgradient(/, 1, 2)
show("y, ∇ = withgradient(/, 1, 2)", (y, grad), (0.5, (0.5, -0.25)))


def inverse_sum(x):                  # withgradient([1,2,4]) do x; z = 1 ./ x; sum(z), z; end
    z = 1 / x
    return jnp.sum(z), z             # z is an auxiliary output: only the first element is differentiated


show("withgradient([1,2,4]) do x; z = 1 ./ x; sum(z), z; end", withgradient(inverse_sum, jnp.array([1.0, 2, 4])),
     ((1.75, [1.0, 0.5, 0.25]), ([-1.0, -0.25, -0.0625],)))
show("withgradient(3.0, 4.0) do x, y; (div = x/y, mul = x*y); end",
     withgradient(lambda x, y: {"div": x / y, "mul": x * y}, 3.0, 4.0), ({"div": 0.75, "mul": 12.0}, (0.25, -0.1875)))

# ------------------------------------------------------------------------------------------------
section("jacobian and hessian (docstrings; arrays are flattened column-major, as vec)")

show("jacobian(a -> 100*a[1:3].^2, 1:7)[1]", jacobian(lambda a: 100 * a[0:3] ** 2, jnp.arange(1.0, 8.0))[0],
     [[200.0, 0, 0, 0, 0, 0, 0], [0, 400, 0, 0, 0, 0, 0], [0, 0, 600, 0, 0, 0, 0]])
show("jacobian((a,x) -> a.^2 .* x, [1,2,3], 1)", jacobian(lambda a, x: a**2 * x, jnp.array([1.0, 2, 3]), 1.0),
     ([[2.0, 0, 0], [0, 4, 0], [0, 0, 6]], [1.0, 4, 9]))
show("withjacobian(cumsum, [1,2,3])", withjacobian(jnp.cumsum, jnp.array([1.0, 2, 3])),
     ([1.0, 3, 6], ([[1.0, 0, 0], [1, 1, 0], [1, 1, 1]],)))
show("hessian(x -> x[1]*x[2], randn(2))", hessian(lambda x: x[0] * x[1], jax.random.normal(jax.random.PRNGKey(3), (2,))),
     [[0.0, 1], [1, 0]])
show("hessian(x -> sum(x.^3), [1 2; 3 4])   # uses linear indexing of x",
     hessian(lambda x: jnp.sum(x**3), jnp.array([[1.0, 2], [3, 4]])), np.diag([6.0, 18, 12, 24]))
h = hessian(jnp.sin, jnp.pi / 2)
show("hessian(sin, pi/2)", h)
assert np.shape(h) == () and np.allclose(h, -1.0), h      # a number, as Zygote's -1.0
checked += 1
show("diaghessian(x -> sum(x.^3), [1 2; 3 4])[1]", diaghessian(lambda x: jnp.sum(x**3), jnp.array([[1.0, 2], [3, 4]]))[0],
     [[6.0, 12], [18, 24]])
show("diaghessian(atan, 1, 2)   # two scalar arguments", diaghessian(jnp.arctan2, 1.0, 2.0), (-0.16, 0.16))

# ------------------------------------------------------------------------------------------------
section("Custom adjoints (docs/src/adjoints.md)")


@adjoint                             # @adjoint mul(a, b) = mul(a, b), c̄ -> (c̄*b, c̄*a)
def mul(a, b):
    return a * b, lambda c: (c * b, c * a)


show("gradient(mul, 2, 3)", gradient(mul, 2.0, 3.0), (3.0, 2.0))


@adjoint                             # a rule that changes the gradient: clip it to [-1, 1]
def clip_gradient(x):
    return x, lambda dx: (jnp.clip(dx, -1.0, 1.0),)


show("gradient(x -> sum(5 .* clip_gradient(x)), [1.0, 2.0])",
     gradient(lambda x: jnp.sum(5 * clip_gradient(x)), jnp.array([1.0, 2.0])), ([1.0, 1.0],))

# ------------------------------------------------------------------------------------------------
section("dropgrad, ignore, hook (docs/src/utils.md)")

g = gradient(lambda a, b: dropgrad(a) * b, 2.0, 3.0)
show("gradient(2, 3) do a, b; dropgrad(a)*b; end   # (nothing, 2)", g, (None, 2.0))
assert g[0] is None
# f(x) = (y = Zygote.@ignore x; x * y); f'(1) == 1
show("f(x) = (y = @ignore x; x * y); f'(1)", gradient(lambda x: x * ignore(lambda: x), 1.0), (1.0,))
show("gradient((a, b) -> hook(-, a)*b, 2, 3)", gradient(lambda a, b: hook(lambda da: -da, a) * b, 2.0, 3.0), (-3.0, 2.0))
seen = []                            # hook(ā -> @show(ā), a): the hook sees the gradient, here 3


def show_grad(da):
    print(f"  ā = {float(da)}")
    seen.append(float(da))
    return da


show("gradient((a, b) -> hook(ā -> @show(ā), a)*b, 2, 3)", gradient(lambda a, b: hook(show_grad, a) * b, 2.0, 3.0), (3.0, 2.0))
assert seen == [3.0]

# ------------------------------------------------------------------------------------------------
section("checkpointed: recompute the forward pass in the backward pass (docstring; adjoints.md)")

show("gradient(x -> checkpointed(sin, x), 1)", gradient(lambda x: checkpointed(jnp.sin, x), 1.0), (0.5403023058681398,))
layer = Flux.Dense(jnp.array([[1.0, 2.0], [3.0, 4.0]]), jnp.zeros(2), Flux.tanh)
xs = jnp.array([[0.1], [0.2]])
g1 = gradient(lambda m: jnp.sum(checkpointed(m, xs)), layer)[0]
g2 = gradient(lambda m: jnp.sum(m(xs)), layer)[0]
show("gradient(m -> sum(checkpointed(m, x)), m)[1].weight == gradient(m -> sum(m(x)), m)[1].weight", g1.weight, g2.weight)

# ------------------------------------------------------------------------------------------------
section("Buffer: array mutation inside gradient (docstring of Buffer; limitations.md)")


def vstack(xs):                      # buf = Buffer(xs, length(xs), 5); for i = 1:5; buf[:, i] = xs; end
    buf = Buffer(xs, len(xs), 5)
    for i in range(5):
        buf[:, i] = xs
    return buf.copy()                # copy(buf): freezes the buffer, returns the array


show("vstack([1, 2, 3])", vstack(jnp.array([1.0, 2, 3])), [[1.0] * 5, [2.0] * 5, [3.0] * 5])
show("gradient(x -> sum(vstack(x)), [1, 2, 3])", gradient(lambda x: jnp.sum(vstack(x)), jnp.array([1.0, 2, 3])), ([5.0, 5, 5],))


def g_limitations(y):                # function g(y); x = Zygote.Buffer(y); g!(x, y); return copy(x); end
    x = Buffer(y)
    x[:] = 2 * y                     # g!(x, y) = (x .= 2 .* y)
    return x.copy()


show("gradient(y -> sum(g(y)), rand(3))", gradient(lambda y: jnp.sum(g_limitations(y)), jnp.ones(3)), ([2.0, 2, 2],))


def scaledpairedcumsum(xs):          # Zygote's test: reads back what it wrote
    n = len(xs)
    buf = Buffer(xs)
    buf[0:2] = xs[0:2]
    for i in range(2, n - 1, 2):     # Julia: for i in 3:2:(n - 1); buf[i:i+1] = buf[i-2:i-1] + i * xs[i:i+1]
        buf[i:i + 2] = buf[i - 2:i] + (i + 1) * xs[i:i + 2]
    return buf.copy()


_, back = pullback(scaledpairedcumsum, jnp.arange(1.0, 5.0))
show("pullback(_scaledpairedcumsum, 1:4)[2]([0, 0, 0, 1])", back(jnp.array([0.0, 0, 0, 1])), ([0.0, 1, 0, 3],))
show("pullback(_scaledpairedcumsum, 1:4)[2]([1, 1, 1, 1])", back(jnp.array([1.0, 1, 1, 1])), ([2.0, 2, 3, 3],))

# ------------------------------------------------------------------------------------------------
section("Nested AD: gradients of gradients")

# hessian_reverse(f, x::Number) = gradient(x -> gradient(f, x)[1], x)[1]
show("gradient(x -> gradient(sin, x)[1], 0.5)   # -sin(0.5)", gradient(lambda x: gradient(jnp.sin, x)[0], 0.5), (-np.sin(0.5),))
show("gradient(x -> gradient(x -> x^3, x)[1], 2)   # 6x", gradient(lambda x: gradient(lambda x: x**3, x)[0], 2.0), (12.0,))
# A gradient penalty through a layer: |∂ sum(m(x)) / ∂x|² for m = Dense(W, b) is sum((W' * 1).^2) per
# column of x, whose gradient with respect to W[i, j] is 2 * sum(W[:, j]) * ncols(x).
dense = Flux.Dense(jnp.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]), jnp.zeros(2))
x4 = jnp.ones((3, 4))
gp = gradient(lambda m: jnp.sum(gradient(lambda x: jnp.sum(m(x)), x4)[0] ** 2), dense)[0]
show("gradient(m -> sum(abs2, gradient(x -> sum(m(x)), x)[1]), m)[1].weight", gp.weight,
     2 * 4 * jnp.tile(jnp.sum(dense.weight, axis=0), (2, 1)))
show("... .bias   # the penalty does not depend on the bias: nothing", gp.bias)
assert gp.bias is None

print(f"\nzygote tutorial: {checked} values checked against Zygote's docs")
