"""`unfold` / `fold` (NNlib's own cases are compat/cases_nnlib_conv.py `case_unfold_fold`)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from numgrad import fd_grad

from fluxjax import nnlib as N


@pytest.mark.parametrize("flipped", [True, False])
def test_unfold_times_the_weights_is_conv(flipped):
    r = np.random.default_rng(1)
    x = jnp.asarray(r.standard_normal((9, 7, 3, 2)), jnp.float32)
    w = jnp.asarray(r.standard_normal((3, 2, 3, 4)), jnp.float32)
    kw = dict(pad=(1, 0), stride=(2, 1), dilation=(1, 2), flipped=flipped)
    z = N.unfold(x, w.shape, **kw)
    y = N.conv(x, w, **kw)
    got = N.batched_mul(z, jnp.broadcast_to(w.reshape(-1, 4, order="F")[..., None], (18, 4, 2)))
    np.testing.assert_allclose(got, np.reshape(np.asarray(y), (-1, 4, 2), order="F"), rtol=1e-5, atol=1e-5)


def test_fold_is_the_adjoint_of_unfold_and_gradients_match_finite_differences():
    r = np.random.default_rng(2)
    x = r.standard_normal((5, 5, 2, 1))
    ws = (3, 3, 2, 1)
    y = r.standard_normal((9, 18, 1))
    ux = N.unfold(jnp.asarray(x, jnp.float32), ws)
    fy = N.fold(jnp.asarray(y, jnp.float32), x.shape, ws)
    np.testing.assert_allclose(np.sum(np.asarray(ux) * y), np.sum(np.asarray(fy) * x), rtol=1e-5)  # <Ux, y> = <x, Fy>
    c = r.standard_normal((9, 18, 1))
    with jax.enable_x64(True):
        g = jax.grad(lambda x: jnp.sum(N.unfold(x, ws, pad=1, stride=2) ** 2 * jnp.asarray(c)))(jnp.asarray(x))
        want = fd_grad(lambda x: float(np.sum(np.asarray(N.unfold(jnp.asarray(x), ws, pad=1, stride=2)) ** 2 * c)), x)
    np.testing.assert_allclose(g, want, rtol=1e-6, atol=1e-8)


def test_errors():
    x = jnp.ones((6, 6, 3, 1))
    with pytest.raises(ValueError, match=r"kernel_size \(3, 3, 2, 4\) has 2 input channels, the array has 3"):
        N.unfold(x, (3, 3, 2, 4))
    with pytest.raises(ValueError, match="kernel_size must be the kernel's spatial size"):
        N.unfold(x, (3,))
    with pytest.raises(ValueError, match="rank >= 3"):
        N.unfold(jnp.ones((6, 6)), (3, 3))
    with pytest.raises(ValueError, match=r"fold into \(6, 6, 3, 1\) with kernel \(3, 3\) expects y of shape \(16, 27, 1\)"):
        N.fold(jnp.ones((16, 26, 1)), x.shape, (3, 3))


def test_integer_arrays_fold_and_transpose_to_integers():
    """NNlib's fold docstring folds an `Int` array: `[100, 4, 9, 120, 15, 12, 700]`. JAX has no
    cotangents of integers (`float0`, empty values): the adjoints are taken in floats and rounded back,
    and the results equal the float computation's."""
    x = jnp.array([100, 2, 3, 40, 5, 6, 700]).reshape(7, 1, 1)
    z = N.fold(N.unfold(x, (3, 1, 1)), x.shape, (3, 1, 1))
    assert z.dtype == x.dtype
    np.testing.assert_array_equal(z[:, 0, 0], [100, 4, 9, 120, 15, 12, 700])
    rng = np.random.default_rng(0)
    xi = jnp.asarray(rng.integers(-5, 5, (5, 4, 2, 1)), jnp.int32)
    wi = jnp.asarray(rng.integers(-3, 3, (2, 2, 2, 3)), jnp.int32)
    dyi = jnp.asarray(rng.integers(-4, 4, (4, 3, 3, 1)), jnp.int32)
    f = lambda a: a.astype(jnp.float32)
    for got, want in [
        (N.grad_conv_data(dyi, wi), N.grad_conv_data(f(dyi), f(wi))),
        (N.grad_conv_filter(xi, dyi, (2, 2, 2, 3)), N.grad_conv_filter(f(xi), f(dyi), (2, 2, 2, 3))),
        (N.grad_upsample_linear(jnp.ones((4, 1, 1), jnp.int32), size=(2,)),
         N.grad_upsample_linear(jnp.ones((4, 1, 1)), size=(2,))),
    ]:
        assert got.dtype == jnp.int32
        np.testing.assert_array_equal(got, want)
    y = N.meanpool(f(xi), 2)
    got = N.grad_meanpool(jnp.ones(y.shape, jnp.int32), y, xi, 2)
    assert got.dtype == jnp.float32  # a mean's gradient has fractions (NNlib's Int buffer would throw)
    np.testing.assert_allclose(got, N.grad_meanpool(jnp.ones(y.shape), y, f(xi), 2))
