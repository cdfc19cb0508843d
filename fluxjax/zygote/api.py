"""Zygote's entry points: `gradient`, `withgradient`, `pullback`, `jacobian`, `withjacobian`, `hessian` and
`diaghessian`, each a thin layer over a `_Plan`."""

from __future__ import annotations

import functools
import threading
import types
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax._src.core import trace_state_clean  # no public API says whether a trace is under way

from ..compiled.call import jit as _fluxjax_jit
from ..compiled.call import last_set_reads
from ..compiled.pure import is_eager, tracing_eager_call
from ..core.layer import LAYER_TYPES
from ..core.region import current_region
from ..core.undo import TRACE_ERRORS
from ..core.walk import ARRAY_TYPES
from ..errors import DimensionMismatch
from .adtypes import ADType, AutoFiniteDifferences
from .closure import _check_leaks, _snapshot
from .implicit import Grads, Params
from .intargs import IntsUndecided, _vjp, traced_with
from .plan import WithGradient, _check_scalar, _grads, _plan, _used_inputs, plain_order, zygote_cotangents, zygote_seed

# ---------------------------------------------------------------------------------------------
# The eager entry points as cached compiled programs.
#
# An eager `gradient(f, args...)` / `withgradient(f, args...)` runs as `fluxjax.jit` of the eager
# call itself, with `f` among the walked arguments: the models in `args`, the layers and arrays that
# `f` reads from its closure cells and globals (a fresh `lambda m: loss(m(x), y)` over each step's
# batch `x` included: `read_arrays=True` makes those arrays inputs, not constants keyed by identity),
# BatchNorm/Dropout state and the global RNG key are the program's inputs; `f`'s code, what it reads
# that is not an array, and the structure of everything are the cache key. So a training loop compiles
# once and then runs one XLA call per gradient, with the numbers of the op-by-op call (rtol 1e-6).
#
# Python side effects of `f` happen while tracing (once per compilation), as under `jax.jit`, but for
# fields set on the models, which make the next call run the code again (see `fluxjax.jit`). The
# op-by-op call is kept: with `jit=False`, inside `with fluxjax.eager():`, inside any trace, and for a
# function whose tracing failed (Python control flow on a traced value, an output that is not an
# array): that call then runs op by op, and its code is remembered so that it always does.

_EAGER_ONLY: dict[Any, bool] = {}  # code objects whose tracing failed: run op by op from then on
_lock = threading.Lock()
_compiled: dict[str, Any] = {}
stats: dict[str, int] = {"compiled": 0, "eager": 0, "fallbacks": 0}


def compilations() -> int:
    """How many programs the eager `gradient`/`withgradient` have compiled so far (cache entries made;
    a training loop over batches of one shape should add one)."""
    return sum(p.compilations for p in list(_compiled.values()))


def _code(f: Any) -> Any:
    if isinstance(f, functools.partial):
        return _code(f.func)
    if isinstance(f, types.MethodType):
        return _code(f.__func__)
    return getattr(f, "__code__", None)


def _can_compile(f: Any, args: tuple, jit: bool) -> bool:
    if not jit or is_eager() or current_region() is not None or not trace_state_clean():
        return False
    code = f.__code__ if type(f) is types.FunctionType else _code(f)
    if code is None and not hasattr(type(f), "__fluxjax_layer__") and not callable(f):
        return False
    if code is not None and code in _EAGER_ONLY:
        return False
    if args and isinstance(args[0], Params) and any(not e.slots for e in args[0]._entries):
        return False  # bare arrays, found in f's globals and closure by identity: not once they are traced
    # a Python number argument is differentiated as a real number op by op; compiled it would become
    # a traced (possibly integer) input, so such calls stay op by op
    return (len(args) == 1 and (type(args[0]) in LAYER_TYPES or type(args[0]) is Params)) or not _number_or_tracer(args)


_NUMBER_OR_TRACER = (jax.core.Tracer, int, float, complex)


def _number_or_tracer(v: Any) -> bool:
    """Whether a leaf of `v` is a Python number or a tracer. A layer's leaves are arrays (its numbers
    are static configuration), so layers are not flattened: this runs on every eager call."""
    t = type(v)
    if t in LAYER_TYPES or v is None:
        return False
    if t is list or t is tuple:
        return any(_number_or_tracer(e) for e in v)
    if t is dict:
        return any(_number_or_tracer(e) for e in v.values())
    if isinstance(v, _NUMBER_OR_TRACER):
        return True
    if isinstance(v, ARRAY_TYPES):
        return False
    return any(isinstance(e, _NUMBER_OR_TRACER) for e in jax.tree_util.tree_leaves(v))


def _run_compiled(name: str, eager: Callable, f: Callable, args: tuple) -> Any:
    """`eager(f, *args)` as a cached `fluxjax.jit` program, falling back to the op-by-op call."""
    with _lock:
        prog = _compiled.get(name)
        if prog is None:
            prog = _compiled[name] = _fluxjax_jit(eager, read_arrays=True)
    try:
        with tracing_eager_call():
            out = prog(f, *args)
    except IntsUndecided:
        # which integer arguments `f` can take as floats is decided on concrete values, once: this call
        # runs op by op, and the next one compiles with the decision
        stats["fallbacks"] += 1
        return eager(f, *args)
    except (*TRACE_ERRORS, TypeError) as e:
        # `f` needs concrete values (Python control flow on an array) or returns what a program cannot
        # (a string beside the loss): run op by op (nothing was written by the failed trace), and keep
        # `f`'s code op by op from now on. Any other error is `f`'s own.
        if not isinstance(e, TRACE_ERRORS) and "not a valid JAX type" not in str(e):
            raise
        out = eager(f, *args)
        run_op_by_op(f)
        stats["fallbacks"] += 1
        return out
    if last_set_reads():  # `f` advances what it reads (a counter): op by op from now on, run each time
        run_op_by_op(f)
    stats["compiled"] += 1
    return out


def run_op_by_op(f: Callable) -> None:
    """Run the eager gradients of `f`'s code op by op from now on: its tracing failed, or it set a value
    it reads (a counter it advances itself: compiled, the next call would need a new program each time)."""
    code = _code(f)
    if code is not None:
        _EAGER_ONLY[code] = True


_STEP_FUSION: list[Callable] = []  # fluxjax.optimise.eagerstep's hook, once it is imported


def use_step_fusion(hook: Callable) -> None:
    """Called by fluxjax.optimise.eagerstep: eager gradients of a model pass through `hook(name, f,
    args, run)`, which may run them fused with the optimiser step that follows."""
    _STEP_FUSION[:] = [hook]


def _fusable(name: str, f: Callable, args: tuple) -> Any:
    """The compiled eager `gradient`/`withgradient` (`name`) of `f` at `args`; through the step fusion's
    hook when `args` is one model or one `Params` (see fluxjax/optimise/eagerstep.py)."""
    if len(args) == 1 and isinstance(args[0], Params):
        name = "implicit_" + name
        run = functools.partial(_run_implicit, name, f, args[0])
    elif len(args) == 1 and type(args[0]) in LAYER_TYPES:
        run = functools.partial(_run_compiled, name, _EAGER[name], f, args)
    else:
        return _run_compiled(name, _EAGER[name], f, args)
    return _STEP_FUSION[0](name, f, args[0], run) if _STEP_FUSION else run()


def _run_implicit(name: str, f: Callable, ps: Params) -> Any:
    """The implicit form compiled: the program returns the gradients as a list (a `Grads` is not a pytree)."""
    keys = list(ps)
    out = _run_compiled(name, _EAGER[name], f, (ps,))
    return implicit_result(name, ps, keys, out)


def implicit_result(name: str, ps: Params, keys: list, out: Any) -> Any:
    """The `Grads` (or `WithGradient` of one) that the implicit `name` returns, from a compiled
    program's `[gradients]` (or `(val, [gradients])`); a result already made (op by op) as it is."""
    if isinstance(out, (Grads, WithGradient)):
        return out
    if name == "implicit_withgradient":
        return WithGradient(out[0], Grads(ps, keys, out[1]))
    return Grads(ps, keys, out)


def gradient(f: Callable, *args, jit: bool = True) -> Any:
    """Zygote's `gradient`: one gradient per argument, `None` for no dependence.

    ```python
    >>> gradient(lambda x: 3 * x**2 + 2 * x + 1, 5.0)   # a Python number: a weakly typed float
    (Array(32., dtype=float32, weak_type=True),)
    >>> model, x, y = Chain(Dense(2, 3)), jnp.ones((2, 5)), jnp.zeros((3, 5))
    >>> gradient(lambda m: Flux.mse(m(x), y), model)[0].layers[0].weight.shape
    (3, 2)

    ```
    With `ps = params(model)` and a zero-argument `f`, returns `Grads` indexed by parameter arrays.
    Flux's `gradient(f, adtype, args...)` works too: `AutoZygote()`, `AutoEnzyme()` and `AutoMooncake()`
    are JAX's reverse mode, as here; `AutoFiniteDifferences()` is central finite differences.

    Called eagerly, the call runs as a cached compiled program (see `fluxjax.jit`): Python side effects
    of `f` happen while it is traced. `jit=False` (or `with fluxjax.eager():`) runs it op by op.
    """
    if _can_compile(f, args, jit) and not (args and isinstance(args[0], ADType)):
        return _fusable("gradient", f, args)
    stats["eager"] += 1
    return _gradient(f, *args)


def _implicit_grads(f: Callable, ps: Params) -> Any:
    """`gradient(f, ps)`'s gradients as a list (what the compiled program returns; a `Grads` is not a
    pytree); op by op (the fallback), the `Grads` itself."""
    gs = _gradient(f, ps)
    return list(gs._grads) if current_region() is not None else gs


def _gradient(f: Callable, *args) -> Any:
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


def withgradient(f: Callable, *args, jit: bool = True) -> WithGradient:
    """`(val, grad)`; when `f` returns a tuple or dict, its first element is differentiated and the
    whole value is returned (Zygote's auxiliary outputs): `loss, (g,) = withgradient(...)`. An ADTypes
    backend may come first, as for `gradient`: `withgradient(f, AutoFiniteDifferences(), x)`.

    Called eagerly, it runs as a cached compiled program, as `gradient` (`jit=False`: op by op).

    >>> withgradient(lambda x: x**2, 3.0)           # the value and the gradient tuple
    WithGradient(val=Array(9., dtype=float32, weak_type=True), grad=(Array(6., dtype=float32, weak_type=True),))
    """
    if _can_compile(f, args, jit) and not (args and isinstance(args[0], ADType)):
        out = _fusable("withgradient", f, args)
    else:
        stats["eager"] += 1
        out = _withgradient(f, *args)
    val = plain_order(out.val)
    if val is out.val and type(out) is WithGradient:
        return out  # nothing to give back as a plain dict (a loss alone): the result as it is
    return WithGradient(val, out.grad)


def _implicit_withgradient(f: Callable, ps: Params) -> Any:
    """`withgradient(f, ps)` as `(val, [gradients])` in the compiled program (a `Grads` is not a pytree);
    op by op (the fallback), the `WithGradient` itself."""
    r = _withgradient(f, ps)
    return (r.val, list(r.grad._grads)) if current_region() is not None else r


def _withgradient(f: Callable, *args) -> WithGradient:
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


# the op-by-op call each compiled entry point runs inside its program (and falls back to)
_EAGER: dict[str, Callable] = {"gradient": _gradient, "withgradient": _withgradient,
                               "implicit_gradient": _implicit_grads, "implicit_withgradient": _implicit_withgradient}


def pullback(f: Callable, *args) -> tuple[Any, Callable]:
    """`y, back = pullback(f, args...)`; `back(dy)` returns the gradients as `gradient` does.
    A `None` inside `dy` is a zero cotangent; `back(None)` gives all `None`. Complex numbers follow
    Zygote: `back(dy) = conj(vjp(conj(dy)))` with JAX's `vjp`, so for a real `f`, `back(1)` is
    `∂f/∂x + i·∂f/∂y` at `z = x + iy`.

    >>> y, back = pullback(lambda x: x**2, 3.0)
    >>> y, back(1.0)                                 # back(dy) is the tuple of dy * df/dx
    (Array(9., dtype=float32, weak_type=True), (Array(6., dtype=float32),))
    """
    plan, y, back, _ = _vjp(f, args, "pullback", check=False)
    n = len(plan.primals)
    used = _used_inputs(back, n) if n else []

    def pb(dy):
        if dy is None or n == 0:
            return plan.finish([None] * n)
        cts = zygote_cotangents(plan.backward(back, zygote_seed(_cotangent(dy, y, "dy"))))
        return plan.finish([c if u else None for c, u in zip(cts, used)])

    return plain_order(y), pb


def _cotangent(dy, y, where: str):
    """The cotangent `back(dy)` gives JAX's `vjp` for the output `y`: the structure of `y` (tuples, lists,
    dicts), `None` as zeros, each array of `y`'s shape, in `y`'s dtype. Anything else raises, naming
    the place in `dy`."""
    if dy is None:
        return jax.tree_util.tree_map(jnp.zeros_like, y)
    if isinstance(y, (tuple, list)):
        if not isinstance(dy, (tuple, list)) or len(dy) != len(y):
            raise ValueError(
                f"pullback: f returned a {type(y).__name__} of {len(y)}, so back's {where} must be a tuple of "
                f"{len(y)} cotangents (None for zero); got {_describe(dy)}"
            )
        items = [_cotangent(d, e, f"{where}[{i}]") for i, (d, e) in enumerate(zip(dy, y))]
        return type(y)(*items) if hasattr(y, "_fields") else type(y)(items)
    if isinstance(y, dict):
        if not isinstance(dy, dict) or set(dy) != set(y):
            raise ValueError(
                f"pullback: f returned a dict with keys {list(y)}, so back's {where} must be a dict with those "
                f"keys (None for zero); got {_describe(dy)}"
            )
        return type(y)((k, _cotangent(dy[k], v, f"{where}[{k!r}]")) for k, v in y.items())
    if not isinstance(y, (jax.Array, np.ndarray, np.generic)):  # another pytree (a layer f returned): as JAX takes it
        return jax.tree_util.tree_map(
            lambda d, yy: jnp.zeros_like(yy) if d is None else jnp.asarray(d, jnp.result_type(yy)),
            dy, y, is_leaf=lambda z: z is None,
        )
    try:
        d = jnp.asarray(dy)
    except TypeError:
        d = None
    if d is None or not (jnp.issubdtype(d.dtype, jnp.number) or d.dtype == jnp.bool_):
        raise ValueError(f"pullback: back's {where} must be an array or a number like f's output; got {_describe(dy)}")
    if d.shape != np.shape(y):
        raise DimensionMismatch(
            f"pullback: back's {where} has shape {d.shape}, but f's output there has shape {np.shape(y)}; "
            "dy must have the shape of the output"
        )
    return jnp.asarray(d, jnp.result_type(y))


def _describe(v) -> str:
    if isinstance(v, (jax.Array, np.ndarray)):
        return f"an array of shape {v.shape}"
    if isinstance(v, dict):
        return f"a dict with keys {list(v)}"
    if isinstance(v, (tuple, list)):
        return f"a {type(v).__name__} of {len(v)}"
    return f"{type(v).__name__} {v!r:.40}"


def _vec_jacobian(J, yshape, xshape):
    """Zygote's jacobian matrix: rows vec(y), columns vec(x), both column-major."""
    ny, nx = len(yshape), len(xshape)
    perm = tuple(reversed(range(ny))) + tuple(ny + k for k in reversed(range(nx)))
    J = jnp.transpose(J, perm)
    if nx == 0:
        return J.reshape(-1)
    return J.reshape(int(np.prod(yshape)), int(np.prod(xshape)))


def _jacobian_rows(plan, y, back) -> list:
    """Zygote's jacobian: row `k` is the pullback of the `k`-th unit output, `back(e_k)`; for complex
    numbers that is `conj` of JAX's reverse-mode row (`jax.jacrev`, which refuses non-holomorphic
    complex functions). Each result has shape `y.shape + x.shape`."""
    yshape = np.shape(y)
    ny = int(np.prod(yshape))
    basis = jnp.eye(ny, dtype=jnp.result_type(y)).reshape((ny, *yshape))
    rows = plan.backward(jax.vmap(back), basis)
    return [J.reshape(yshape + J.shape[1:]) for J in zygote_cotangents(rows)]


def _jacobian_vjp(plan):
    return jax.vjp(plan.fx, *plan.primals, has_aux=True) if plan.primals else None


def withjacobian(f: Callable, *args) -> WithGradient:
    """`(val, jacobians)`: for an array argument `a`, `J[k, i] = ∂vec(y)[k] / ∂vec(a)[i]`; for a complex
    argument, Zygote's convention (row `k` is `back(e_k)`, see `pullback`). A complex `y` raises, as in
    Zygote: take the jacobians of its real and imaginary parts.

    ```python
    >>> withjacobian(jnp.cumsum, jnp.array([1.0, 2.0, 3.0]))   # Zygote: val = [1, 3, 6], grad = ([1 0 0; 1 1 0; 1 1 1],)
    WithGradient(val=Array([1., 3., 6.], dtype=float32), grad=(Array([[1., 0., 0.],
           [1., 1., 0.],
           [1., 1., 1.]], dtype=float32),))

    ```
    """
    plan, run = traced_with(f, args, "jacobian", _jacobian_vjp)  # an int used as an axis gets None
    if run is None:
        y, _ = plan.fx()
        return WithGradient(y, plan.finish([]))
    y, back, aux = run
    plan.commit(aux)
    if not isinstance(y, (jax.Array, np.ndarray, np.generic)):
        raise TypeError(
            f"jacobian expected a function which returns an array, or a scalar, got {_describe(y)} (as Zygote's "
            "ArgumentError); take the jacobian of each output separately"
        )
    if jnp.iscomplexobj(y):  # (with a real basis, the rows would hold the real part's derivatives only)
        raise TypeError(
            f"jacobian does not accept complex output (as Zygote's ArgumentError); f returned {y.dtype} values: "
            "take the jacobians of jnp.real(f(x)) and jnp.imag(f(x)) instead")
    jac = _jacobian_rows(plan, y, back)
    yshape = np.shape(y)
    mats = [_vec_jacobian(J, yshape, np.shape(x)) for J, x in zip(jac, plan.primals)]
    return WithGradient(y, plan.finish(mats))


def jacobian(f: Callable, *args) -> Any:
    """Zygote's `jacobian`: a tuple with one matrix per argument (rows: outputs, columns: inputs).

    >>> jacobian(lambda x: 2 * x[::-1], jnp.array([1.0, 2.0]))
    (Array([[0., 2.],
           [2., 0.]], dtype=float32),)
    """
    return withjacobian(f, *args).grad


def hessian(f: Callable, x) -> Any:
    """Zygote's `hessian` of a scalar function of one argument, with linear (column-major)
    indexing: `hessian(lambda x: jnp.sum(x**3), jnp.array([[1., 2], [3, 4]]))` is
    `diag([6, 18, 12, 24])`. For a number `x` it is a number: `hessian(jnp.sin, jnp.pi / 2) == -1.0`.
    Forward over reverse mode, as Zygote's.

    >>> hessian(lambda x: jnp.sum(x**3), jnp.array([1.0, 2.0]))   # diag(6x)
    Array([[ 6.,  0.],
           [ 0., 12.]], dtype=float32)
    """
    return _hessian(f, x, "hessian", jax.hessian)


def hessian_reverse(f: Callable, x) -> Any:
    """Zygote's `hessian_reverse`: `hessian` computed reverse over reverse (the Jacobian of the
    gradient). The same numbers; slower, for functions forward mode cannot go through.

    ```python
    >>> hessian_reverse(lambda x: jnp.sum(x**3), jnp.array([1.0, 2.0]))   # diag(6x), as hessian
    Array([[ 6.,  0.],
           [ 0., 12.]], dtype=float32)

    ```
    """
    return _hessian(f, x, "hessian_reverse", lambda g: jax.jacrev(jax.grad(g)))


def _hessian(f: Callable, x, fn: str, second: Callable) -> Any:
    plan = _plan(f, (x,), fn)
    if len(plan.primals) != 1:
        raise TypeError(f"{fn}(f, x): x must be a single number or float array")
    x0 = plan.primals[0]
    _real_argument(x0, fn)
    H = second(lambda z: _scalar(plan.fx(z)[0], fn))(x0)
    if np.ndim(x0) == 0:  # Zygote: a number for a number, `hessian(sin, pi/2) == -1.0`
        return jnp.reshape(H, ())
    return _vec_jacobian(H, np.shape(x0), np.shape(x0))


def _real_argument(x, fn: str) -> None:
    if jnp.iscomplexobj(x):
        raise TypeError(f"{fn}(f, x): x is complex ({jnp.result_type(x)}), and {fn} takes real arguments, as Zygote's "
                        "(which fails there too): pass the real and imaginary parts as separate real arguments")


def _scalar(y, fn: str):
    """`y`, the value of `f` under `hessian`/`diaghessian`, which must be a real scalar as for `gradient`."""
    _check_scalar(y, fn)
    return y


def diaghessian(f: Callable, *args) -> tuple:
    """The diagonal of the Hessian for each argument, shaped like the argument (Zygote's `diaghessian`).

    ```python
    >>> diaghessian(lambda x: jnp.sum(x**3), jnp.array([[1.0, 2], [3, 4]]))[0]   # Zygote: [6 12; 18 24]
    Array([[ 6., 12.],
           [18., 24.]], dtype=float32)
    >>> diaghessian(jnp.arctan2, 1.0, 2.0)   # two numbers; Zygote: (-0.16, 0.16)
    (Array(-0.16, dtype=float32), Array(0.16, dtype=float32))

    ```
    """
    plan = _plan(f, args, "diaghessian")
    out = []
    for k, x in enumerate(plan.primals):
        _real_argument(x, "diaghessian")

        def fk(z, k=k):
            xs = list(plan.primals)
            xs[k] = z
            return _scalar(plan.fx(*xs)[0], "diaghessian")

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
    Array(-0.3064, dtype=float32)
    >>> pushforward(lambda x, y: x * y, 2.0, 3.0)(1.0, 0.0)    # 3.0
    Array(3., dtype=float32)

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
