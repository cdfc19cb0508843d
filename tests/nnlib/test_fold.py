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
