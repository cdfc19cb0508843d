"""Central finite differences in float64 NumPy, the reference every gradient test compares with."""

import numpy as np


def fd_grad(f, x, eps=1e-6):
    """d f(x) / d x for a scalar float64 function `f` of one array (any shape)."""
    x = np.array(x, np.float64)
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        xp, xm = x.copy(), x.copy()
        xp[i] += eps
        xm[i] -= eps
        g[i] = (f(xp) - f(xm)) / (2 * eps)
    return g


def fd_grads(f, args, eps=1e-6):
    """[d f(*args) / d args[k] for every k], each by `fd_grad`."""
    args = [np.array(a, np.float64) for a in args]

    def partial(k):
        return lambda xk: f(*args[:k], xk, *args[k + 1 :])

    return [fd_grad(partial(k), a, eps) for k, a in enumerate(args)]
