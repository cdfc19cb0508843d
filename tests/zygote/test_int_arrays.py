"""Integer arrays as arguments: Zygote differentiates `Int` arrays as reals; an integer array used as an
index (into `Embedding`, a gather, a slice) gets `nothing`, as Zygote's rules for indexing give.

fluxjax traces a signed integer argument as a float copy; when `f` then fails with an index error, or
returns something else than with the integers (`Embedding` reads float input as one-hot), the array is
held as it is and gets `None`. The decision is kept per function, so a loop decides once.
"""

import jax.numpy as jnp
import numpy as np
import pytest
from structure import same

import fluxjax
from fluxjax import Embedding, Params, gradient, hessian, jacobian, pullback, withgradient
from fluxjax.zygote import api


def test_jacobian_of_int_range():
    # Zygote.jl/src/lib/grad.jl:141 (jacobian docstring)  jacobian(a -> 100*a[1:3].^2, 1:7)[1] ==
    #   [200 0 0 0 0 0 0; 0 400 0 0 0 0 0; 0 0 600 0 0 0 0]  (an Int input)
    (J,) = jacobian(lambda a: 100 * a[0:3] ** 2, jnp.arange(1, 8))
    want = np.zeros((3, 7))
    want[0, 0], want[1, 1], want[2, 2] = 200, 400, 600
    same(J, want)


@pytest.mark.parametrize("jit", [True, False])
def test_int_array_in_arithmetic_matches_numpy(jit):
    # NumPy reference: d/dx sum(x^3 - 2x) = 3x^2 - 2, at integer points
    x = np.arange(-2, 4, dtype=np.int32)
    for _ in range(3):  # the compiled path decides on the first call and compiles on the next
        (g,) = gradient(lambda x: jnp.sum(x**3 - 2 * x), jnp.asarray(x), jit=jit)
        same(g, 3.0 * x.astype(np.float64) ** 2 - 2)
    (g,) = gradient(lambda x: jnp.sum(x**3 - 2 * x), x, jit=jit)  # a NumPy int array too
    same(g, 3.0 * x.astype(np.float64) ** 2 - 2)
    # the same as central finite differences at the float copy
    xf = jnp.asarray(x, jnp.float32)
    (fd,) = gradient(lambda x: jnp.sum(x**3 - 2 * x), fluxjax.AutoFiniteDifferences(), xf)
    same(g, fd, rtol=1e-3, atol=1e-2)


def test_int_array_entry_points():
    x = jnp.array([1, 2, 3])
    y, back = pullback(lambda x: x**2, x)
    same(y, np.array([1.0, 4.0, 9.0]))
    same(back(jnp.ones(3)), (np.array([2.0, 4.0, 6.0]),))
    res = withgradient(lambda x: jnp.sum(x * x), x)
    same(res.val, 14.0)
    same(res.grad, (np.array([2.0, 4.0, 6.0]),))
    same(hessian(lambda x: jnp.sum(x**3), jnp.array([1, 2])), np.diag([6.0, 12.0]))
    # implicit: Zygote.jl Params([x]) of an Int array: the gradient is keyed by the array itself
    gs = gradient(lambda: jnp.sum(x**2), Params([x]))
    same(gs[x], np.array([2.0, 4.0, 6.0]))


@pytest.mark.parametrize("jit", [True, False])
@pytest.mark.parametrize("n", [3, 10])
def test_int_index_array_into_embedding(jit, n):
    # Flux's Embedding(10 => 4) of Int indices: the indices get nothing, the weight its gradient.
    # n == 10 is the silent case: a float copy of 10 tokens would be read as one one-hot column.
    e = Embedding(10, 4)
    tok = jnp.arange(n) % 7

    def loss(m, t):
        return jnp.sum(m(t) ** 2)

    (ref,) = gradient(lambda m: loss(m, tok), e, jit=False)
    W = np.asarray(e.weight)
    want = np.zeros_like(W)
    for t in np.asarray(tok):  # NumPy: d/dW sum(W[:, t]^2) = 2 W[:, t] at each column used
        want[:, t] += 2 * W[:, t]
    same(ref.weight, want, rtol=1e-5)
    for _ in range(3):
        g = gradient(loss, e, tok, jit=jit)
        assert g[1] is None
        same(g[0].weight, want, rtol=1e-5)
    val, g = withgradient(loss, e, tok, jit=jit)
    same(val, np.sum(W[:, np.asarray(tok)] ** 2), rtol=1e-5)
    assert g[1] is None
    _, back = pullback(loss, e, tok)
    g = back(1.0)
    assert g[1] is None
    same(g[0].weight, want, rtol=1e-5)


@pytest.mark.parametrize("jit", [True, False])
def test_gather_index_and_bool_mask(jit):
    W = jnp.arange(10.0).reshape(2, 5)
    idx = jnp.array([0, 2, 2])
    mask = jnp.array([True, False, True, False, True])
    for _ in range(2):
        g = gradient(lambda W, i, m: jnp.sum(jnp.where(m, W, 0.0)[:, i] * 3), W, idx, mask, jit=jit)
        same(g, (np.array([[3.0, 0, 6, 0, 0], [3, 0, 6, 0, 0]]), None, None))
    # Zygote: a Bool array is not differentiable: nothing
    same(gradient(lambda b, x: jnp.sum(jnp.where(b, x, 0.0)), mask, jnp.ones(5), jit=jit), (None, np.array([1.0, 0, 1, 0, 1])))
    (J,) = jacobian(lambda W, i: W[0, i], W, idx)[:1]
    assert J.shape == (3, 10)
    assert jacobian(lambda W, i: W[0, i], W, idx)[1] is None


@pytest.mark.parametrize("jit", [True, False])
def test_mixed_int_arrays(jit):
    # one integer array is arithmetic (differentiated), the other an index (nothing)
    a = jnp.array([1, 2, 3, 4])
    i = jnp.array([3, 0])
    for _ in range(2):
        g = gradient(lambda a, i, x: jnp.sum(a[i] ** 2 * x), a, i, 2.0, jit=jit)
        same(g, (np.array([4.0, 0, 0, 16]), None, 17.0))


def test_decision_is_kept_across_calls():
    # an eager loop traces the function once per call once the integers are decided
    calls = {"n": 0}
    W = jnp.ones((2, 5))

    def f(W, i):
        calls["n"] += 1
        return jnp.sum(W[:, i])

    gradient(f, W, jnp.array([0, 1]), jit=False)
    first = calls["n"]
    assert first >= 2  # tried as a float, failed as an index, held
    for k in range(3):
        calls["n"] = 0
        g = gradient(f, W, jnp.array([k, 4]), jit=False)
        assert calls["n"] == 1
        want = np.zeros((2, 5))
        want[:, [k, 4]] = 1
        same(g, (want, None))


def test_compiled_gradient_compiles_after_deciding():
    before = dict(api.stats)

    def f(x):
        return jnp.sum(x**2)

    for k in range(3):
        same(gradient(f, jnp.arange(3) + k), (2.0 * (np.arange(3) + k),))
    assert api.stats["compiled"] - before["compiled"] == 2  # the first call decided op by op


def test_other_errors_still_raise():
    # an error that is not the integers' fault surfaces, with the integers held or not
    with pytest.raises(TypeError, match="unsupported operand"):
        gradient(lambda W, i: jnp.sum(W[:, i]) + "a", jnp.ones((2, 3)), jnp.array([0, 1]), jit=False)
    with pytest.raises(TypeError, match="unsupported operand"):
        gradient(lambda x: jnp.sum(x) + "a", jnp.arange(3), jit=False)
    with pytest.raises(ZeroDivisionError):
        gradient(lambda x: jnp.sum(x) / 0 if x.shape[0] == 3 else 1 / 0, jnp.arange(2), jit=False)


def test_layer_int_fields_are_not_differentiated():
    # a layer's integer array is its configuration or an index table (Optimisers.jl never trains one)
    @fluxjax.layer
    class Pick:
        def __init__(self):
            self.W = jnp.ones(4)
            self.idx = jnp.array([0, 3])

        def __call__(self, x):
            return jnp.sum(self.W[self.idx] * self.idx * x)

    (g,) = gradient(lambda m: m(2.0), Pick())
    same(g.W, np.array([0.0, 0, 0, 6.0]))
    assert g.idx is None
