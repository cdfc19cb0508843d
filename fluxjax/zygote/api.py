"""Zygote's entry points: `gradient`, `withgradient`, `pullback`, `jacobian`, `withjacobian`, `hessian` and
`diaghessian`, each a thin layer over a `_Plan`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from .adtypes import ADType, AutoFiniteDifferences
from .closure import _check_leaks, _snapshot
from .plan import WithGradient, _grads, _plan, _used_inputs, _vjp, traced_with, zygote_cotangents, zygote_seed


def gradient(f: Callable, *args) -> Any:
    """Zygote's `gradient`: one gradient per argument, `None` for no dependence.

    ```python
    >>> gradient(lambda x: 3 * x**2 + 2 * x + 1, 5.0)
    (Array(32., dtype=float32),)
    >>> gradient(lambda m: mse(m(x), y), model)[0].layers[0].weight.shape
    (3, 2)
    ```
    With `ps = params(model)` and a zero-argument `f`, returns `Grads` indexed by parameter arrays.
    Flux's `gradient(f, adtype, args...)` works too: `AutoZygote()`, `AutoEnzyme()` and `AutoMooncake()`
    are JAX's reverse mode, as here; `AutoFiniteDifferences()` is central finite differences.
    """
    if args and isinstance(args[0], ADType):  # AutoZygote(), AutoEnzyme(), ... are JAX's reverse mode, as here
        if isinstance(args[0], AutoFiniteDifferences):
            return args[0].gradient(f, args[1:])
        args = args[1:]
    before = _snapshot(f)
    plan, y, back, _, commit = _vjp(f, args, "gradient", defer=True)
    out = _grads(plan, y, back)
    commit()
    _check_leaks(f, "gradient", before)
    return out


def withgradient(f: Callable, *args) -> WithGradient:
    """`(val, grad)`; when `f` returns a tuple or dict, its first element is differentiated and the
    whole value is returned (Zygote's auxiliary outputs): `loss, (g,) = withgradient(...)`. An ADTypes
    backend may come first, as for `gradient`: `withgradient(f, AutoFiniteDifferences(), x)`."""
    if args and isinstance(args[0], ADType):
        if isinstance(args[0], AutoFiniteDifferences):
            return args[0].withgradient(f, args[1:])
        args = args[1:]
    before = _snapshot(f)
    plan, y, back, full, commit = _vjp(f, args, "withgradient", first_only=True, defer=True)
    out = _grads(plan, y, back)
    commit()
    _check_leaks(f, "withgradient", before)
    return WithGradient(full, out)


def pullback(f: Callable, *args) -> tuple[Any, Callable]:
    """`y, back = pullback(f, args...)`; `back(dy)` returns the gradients as `gradient` does.
    A `None` inside `dy` is a zero cotangent; `back(None)` gives all `None`. Complex numbers follow
    Zygote: `back(dy) = conj(vjp(conj(dy)))` with JAX's `vjp`, so for a real `f`, `back(1)` is
    `∂f/∂x + i·∂f/∂y` at `z = x + iy`."""
    plan, y, back, _ = _vjp(f, args, "pullback", check=False)
    n = len(plan.primals)
    used = _used_inputs(back, n) if n else []

    def pb(dy):
        if dy is None or n == 0:
            return plan.finish([None] * n)
        dy = jax.tree_util.tree_map(
            lambda d, yy: jnp.zeros_like(yy) if d is None else jnp.asarray(d, jnp.result_type(yy)),
            dy, y, is_leaf=lambda z: z is None,
        )
        cts = zygote_cotangents(back(zygote_seed(dy)))
        return plan.finish([c if u else None for c, u in zip(cts, used)])

    return y, pb


def _vec_jacobian(J, yshape, xshape):
    """Zygote's jacobian matrix: rows vec(y), columns vec(x), both column-major."""
    ny, nx = len(yshape), len(xshape)
    perm = tuple(reversed(range(ny))) + tuple(ny + k for k in reversed(range(nx)))
    J = jnp.transpose(J, perm)
    if nx == 0:
        return J.reshape(-1)
    return J.reshape(int(np.prod(yshape)), int(np.prod(xshape)))


def _jacobian_rows(y, back) -> list:
    """Zygote's jacobian: row `k` is the pullback of the `k`-th unit output, `back(e_k)`; for complex
    numbers that is `conj` of JAX's reverse-mode row (`jax.jacrev`, which refuses non-holomorphic
    complex functions). Each result has shape `y.shape + x.shape`."""
    yshape = np.shape(y)
    ny = int(np.prod(yshape))
    basis = jnp.eye(ny, dtype=jnp.result_type(y)).reshape((ny, *yshape))
    rows = jax.vmap(back)(basis)
    return [J.reshape(yshape + J.shape[1:]) for J in zygote_cotangents(rows)]


def _jacobian_vjp(plan):
    return jax.vjp(plan.fx, *plan.primals, has_aux=True) if plan.primals else None


def withjacobian(f: Callable, *args) -> WithGradient:
    """`(val, jacobians)`: for an array argument `a`, `J[k, i] = ∂vec(y)[k] / ∂vec(a)[i]`; for complex
    numbers, Zygote's convention (row `k` is `back(e_k)`, see `pullback`)."""
    plan, run = traced_with(f, args, "jacobian", _jacobian_vjp)  # an int used as an axis gets None
    if run is None:
        y, _ = plan.fx()
        return WithGradient(y, plan.finish([]))
    y, back, aux = run
    plan.commit(aux)
    jac = _jacobian_rows(y, back)
    yshape = np.shape(y)
    mats = [_vec_jacobian(J, yshape, np.shape(x)) for J, x in zip(jac, plan.primals)]
    return WithGradient(y, plan.finish(mats))


def jacobian(f: Callable, *args) -> Any:
    """Zygote's `jacobian`: a tuple with one matrix per argument (rows: outputs, columns: inputs)."""
    return withjacobian(f, *args).grad


def hessian(f: Callable, x) -> Any:
    """Zygote's `hessian` of a scalar function of one argument, with linear (column-major)
    indexing: `hessian(lambda x: jnp.sum(x**3), jnp.array([[1., 2], [3, 4]]))` is
    `diag([6, 18, 12, 24])`. For a number `x` it is a number: `hessian(jnp.sin, jnp.pi / 2) == -1.0`.
    Forward over reverse mode, as Zygote's."""
    return _hessian(f, x, "hessian", jax.hessian)


def hessian_reverse(f: Callable, x) -> Any:
    """Zygote's `hessian_reverse`: `hessian` computed reverse over reverse (the Jacobian of the
    gradient). The same numbers; slower, for functions forward mode cannot go through."""
    return _hessian(f, x, "hessian_reverse", lambda g: jax.jacrev(jax.grad(g)))


def _hessian(f: Callable, x, fn: str, second: Callable) -> Any:
    plan = _plan(f, (x,), fn)
    if len(plan.primals) != 1:
        raise TypeError(f"{fn}(f, x): x must be a single number or float array")
    x0 = plan.primals[0]
    H = second(lambda z: plan.fx(z)[0])(x0)
    if np.ndim(x0) == 0:  # Zygote: a number for a number, `hessian(sin, pi/2) == -1.0`
        return jnp.reshape(H, ())
    return _vec_jacobian(H, np.shape(x0), np.shape(x0))


def diaghessian(f: Callable, *args) -> tuple:
    """The diagonal of the Hessian for each argument, shaped like the argument."""
    plan = _plan(f, args, "diaghessian")
    out = []
    for k, x in enumerate(plan.primals):

        def fk(z, k=k):
            xs = list(plan.primals)
            xs[k] = z
            return plan.fx(*xs)[0]

        H = _vec_jacobian(jax.hessian(fk)(x), np.shape(x), np.shape(x))
        d = jnp.diagonal(jnp.atleast_2d(H))
        out.append(d.reshape(tuple(reversed(np.shape(x)))).T if np.ndim(x) else d.reshape(()))
    return plan.finish(out)


def _float_primal(x):
    """A primal for forward mode: numbers and integer arrays become floats (Zygote's `pushforward(f, 4)`
    differentiates at 4.0); other leaves stay as they are."""
    if isinstance(x, bool) or isinstance(x, np.bool_):
        return x
    if isinstance(x, (int, float, complex, np.number)):
        return jnp.asarray(x, jnp.result_type(float))
    if isinstance(x, (jax.Array, np.ndarray)) and jnp.issubdtype(x.dtype, jnp.integer):
        return jnp.asarray(x, jnp.result_type(float))
    return x


def pushforward(f: Callable, *args) -> Callable:
    """Zygote's forward mode: `pushforward(f, x...)(dx...)` is the directional derivative of `f` at
    `x` along `dx` (a Jacobian-vector product, `jax.jvp`).

    ```python
    >>> pushforward(lambda x: jnp.sin(jnp.cos(x)), 0.5)(1.0)   # -cos(cos(0.5)) * sin(0.5)
    >>> pushforward(lambda x, y: x * y, 2.0, 3.0)(1.0, 0.0)    # 3.0
    ```
    Each `dx` has the structure of its `x` (numbers for numbers, arrays of the same shape, pytrees
    alike); `None` is a zero tangent. Nests with itself and with `gradient`.
    """
    primals = tuple(jax.tree_util.tree_map(_float_primal, a) for a in args)

    def push(*dargs):
        if len(dargs) != len(primals):
            raise TypeError(
                f"pushforward: f was given {len(primals)} argument(s), so pass {len(primals)} tangent(s); got {len(dargs)}"
            )

        def tangent(x, dx):
            if dx is None:
                return jax.tree_util.tree_map(jnp.zeros_like, x)
            return jax.tree_util.tree_map(lambda p, d: jnp.broadcast_to(jnp.asarray(d, jnp.result_type(p)), jnp.shape(p)), x, dx)

        tangents = tuple(tangent(x, dx) for x, dx in zip(primals, dargs))
        _, ydot = jax.jvp(f, primals, tangents)
        return ydot

    return push
