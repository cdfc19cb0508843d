"""Zygote's `Params` set operations and `Grads` algebra (Zygote.jl test/interface.jl, "Params" /
"Grads"; docs/src/index.md "Working with Grads"), and `params([W, b])` on bare arrays."""

import jax.numpy as jnp
import numpy as np
import pytest

import fluxjax as Flux
from fluxjax import Dense, Grads, Params, gradient, params
from fluxjax.optimise import Descent, update_

# globals, as Zygote's tests use them
W = jnp.array([[0.1, 0.2], [0.3, -0.4]])
B = jnp.array([0.05, -0.1])
X1 = jnp.array([1.0, -2.0])
X2 = jnp.array([3.0, 0.5])


def _loss1():
    return jnp.sum(jnp.tanh(W @ X1 + B))


def _loss2():
    return jnp.sum(jnp.tanh(W @ X2 + B))


def _np_grads(x):
    """d/dW, d/dB of sum(tanh(W x + b)) in NumPy."""
    z = np.asarray(W, np.float64) @ np.asarray(x, np.float64) + np.asarray(B, np.float64)
    d = 1 - np.tanh(z) ** 2
    return np.outer(d, np.asarray(x)), d


def test_params_on_a_list_of_bare_arrays_is_Params():
    """Flux 0.13 `params([W, b])`: the arrays are found where the loss reads them (globals)."""
    ps = params([W, B])
    assert isinstance(ps, Params) and len(ps) == 2 and ps[0] is W and ps[1] is B
    assert ps[0:2] == [W, B] and ps[0:2][1] is B and ps[1:] == [B] and ps[-1] is B  # Zygote: ps[1:2] == [x, y]
    gs = gradient(_loss1, ps)
    gw, gb = _np_grads(X1)
    np.testing.assert_allclose(gs[W], gw, rtol=1e-5)
    np.testing.assert_allclose(gs[B], gb, rtol=1e-5)
    gs2 = gradient(_loss1, Params([W, B]))
    np.testing.assert_allclose(gs2[W], gs[W], rtol=1e-6)
    assert len(params((W, B))) == 2 and len(params(W, B)) == 2


def test_params_of_bare_list_then_update_rebinds_the_global():
    global W, B
    w0, b0 = np.asarray(W), np.asarray(B)
    try:
        gw, gb = _np_grads(X1)
        ps = params([W, B])
        gs = gradient(_loss1, ps)
        update_(Descent(0.1), ps, gs)
        np.testing.assert_allclose(W, w0 - 0.1 * gw, rtol=1e-5)
        np.testing.assert_allclose(B, b0 - 0.1 * gb, rtol=1e-5)
    finally:
        W, B = jnp.asarray(w0), jnp.asarray(b0)


def test_union_intersect():
    """Zygote.jl test/interface.jl "union and intersect"."""
    x, y, z = jnp.array([1.0, 2.0]), jnp.array([1.0]), jnp.array([3.0, 4.0])
    ps1, ps2, ps3 = Params([x, y]), Params([z]), Params([y, z])
    ps = ps1.union(ps2)
    assert isinstance(ps, Params) and ps.issetequal([x, y, z]) and len(ps) == 3
    assert len(ps1) == 2  # union copies
    ps = ps1.union(ps3)
    assert ps.issetequal([x, y, z]) and [id(a) for a in ps] == [id(x), id(y), id(z)]
    assert len(ps1.intersect(ps2)) == 0
    ps = ps1.intersect(ps3)
    assert ps.issetequal([y]) and len(ps1) == 2
    ps1.union_([z, x])
    assert [id(a) for a in ps1] == [id(x), id(y), id(z)]
    ps1.intersect_(ps3)
    assert [id(a) for a in ps1] == [id(y), id(z)]
    assert len(Params()) == 0 and len(Params(())) == 0 and len(Params([])) == 0


def test_grads_algebra_values():
    """Zygote.jl test/interface.jl "Grads algebra": `.-`, `.+`, `2 .*`, `./ 2`, nothing as zero."""
    ps = Params([W, B])
    gs1, gs2 = gradient(_loss1, ps), gradient(_loss2, ps)
    (a_w, a_b), (b_w, b_b) = _np_grads(X1), _np_grads(X2)
    np.testing.assert_allclose((gs1 + gs2)[W], a_w + b_w, rtol=1e-5)
    np.testing.assert_allclose((gs1 - gs2)[B], a_b - b_b, rtol=1e-5)
    np.testing.assert_allclose((2 * gs1)[W], 2 * a_w, rtol=1e-5)
    np.testing.assert_allclose((gs1 / 2)[B], a_b / 2, rtol=1e-5)
    np.testing.assert_allclose((1 - gs1)[B], 1 - a_b, rtol=1e-5)
    np.testing.assert_allclose((+gs1)[W], a_w, rtol=1e-6)
    assert isinstance(+gs1, Grads) and (+gs1) is not gs1
    np.testing.assert_allclose((-gs1)[W], -a_w, rtol=1e-6)
    np.testing.assert_allclose((gs1 + jnp.array([1.0, 2.0]))[B], a_b + [1.0, 2.0], rtol=1e-5)
    # a parameter with no gradient (nothing) is zero under .+ with a number, as Zygote's map
    gs3 = gradient(lambda: jnp.sum(W @ X1), ps)
    assert gs3[B] is None
    np.testing.assert_allclose((gs3 + 1.0)[B], [1.0, 1.0])
    np.testing.assert_allclose((gs3 + gs2)[B], b_b, rtol=1e-5)
    # gradients of different parameters cannot be combined (Zygote: ArgumentError)
    gs4 = gradient(lambda: jnp.sum(W @ X1), Params([W]))
    with pytest.raises(ValueError, match="different Params"):
        gs1 + gs4
    with pytest.raises(ValueError, match="different parameters"):
        gs1.map(jnp.add, gs4)


def test_grads_map_broadcast_setitem_merge():
    ps = Params([W, B])
    gs1, gs2 = gradient(_loss1, ps), gradient(_loss2, ps)
    (a_w, _), (b_w, _) = _np_grads(X1), _np_grads(X2)
    clipped = gs1.map(lambda g: jnp.clip(g, -0.1, 0.1))  # docs: clip gradients
    np.testing.assert_allclose(clipped[W], np.clip(a_w, -0.1, 0.1), rtol=1e-6)
    np.testing.assert_allclose(gs1.broadcast(lambda a, b: a * b, gs2)[W], a_w * b_w, rtol=1e-5)
    gs1[W] = jnp.ones((2, 2))
    np.testing.assert_array_equal(gs1[W], np.ones((2, 2)))
    with pytest.raises(ValueError, match=r"g.shape == W.shape == \(2, 2\)"):
        gs1[W] = jnp.ones(3)
    with pytest.raises(KeyError):
        gs1[jnp.ones(2)] = jnp.ones(2)
    # merge_: Zygote's merge!(gs_dst, gs_src): params united, gradients replaced
    z = jnp.array([2.0, 3.0])
    gz = gradient(lambda: jnp.sum(z * z) + jnp.sum(B), Params([z, B]))
    dst = gradient(_loss1, Params([W, B]))
    dst.merge_(gz)
    assert len(dst) == 3 and len(dst.params) == 3
    np.testing.assert_allclose(dst[z], [4.0, 6.0])
    np.testing.assert_allclose(dst[B], [1.0, 1.0])
    np.testing.assert_allclose(dst[W], a_w, rtol=1e-5)


def test_grads_copy_to_and_from_a_vector():
    """Zygote.jl test/interface.jl "copy!": `copy!(x, gs)` and `copy!(gs, x)`, column-major."""
    ps = Params([W, B])
    gs = gradient(_loss1, ps)
    gw, gb = _np_grads(X1)
    v = gs.flat()
    np.testing.assert_allclose(v, np.concatenate([gw.ravel(order="F"), gb]), rtol=1e-5)
    gs.copy_(jnp.arange(6.0))
    np.testing.assert_array_equal(gs[W], np.arange(4.0).reshape(2, 2, order="F"))
    np.testing.assert_array_equal(gs[B], [4.0, 5.0])
    with pytest.raises(ValueError, match="length 6"):
        gs.copy_(jnp.zeros(5))
    other = gradient(_loss2, ps)
    gs.copy_(other)  # Zygote's gs .= other
    np.testing.assert_allclose(gs[W], _np_grads(X2)[0], rtol=1e-5)


def test_params_of_a_model_union():
    m1, m2 = Dense(2, 3), Dense(3, 1)
    ps = params(m1).union(params(m2))
    assert len(ps) == 4
    x = jnp.ones((2, 4))
    gs = gradient(lambda: jnp.sum(m2(m1(x))), ps)
    (g1, g2) = Flux.gradient(lambda a, b: jnp.sum(b(a(x))), m1, m2)
    np.testing.assert_allclose(gs[m1.weight], g1.weight, rtol=1e-5)
    np.testing.assert_allclose(gs[m2.bias], g2.bias, rtol=1e-5)
