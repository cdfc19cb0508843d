"""Flux's `@autosize`: build a model whose input sizes are filled in from the size of its input.

Flux writes `@autosize (28, 28, 1, 32) Chain(Conv((3, 3), _ => 5), Flux.flatten, Dense(_ => 10))`.
Python has no macros, so the model is written as a function of the placeholder `_`:

    autosize((28, 28, 1, 32), lambda _: Chain(Conv((3, 3), (_, 5)), flatten, Dense(_, 10)))

While that function runs, a layer constructor given `_` (anywhere in its arguments, alone or in
arithmetic such as `_ // 4`) is not run: it returns a `LazyLayer` that remembers the call. The model is
then traced on an abstract input of the given size (`outputsize`, no arithmetic done); each
`LazyLayer`, when first called, reads its `_` off its input, builds the real layer and runs it. Finally
every `LazyLayer` is replaced by the layer it built, in place, so the model returned holds only real
layers, their weights drawn in the order the layers are called.
"""

from __future__ import annotations

import inspect
import operator
import threading
from collections.abc import Callable
from typing import Any

import jax

_tls = threading.local()


class _Size:
    """`_` in an `autosize` model: the size read off a layer's input. `+ - * //` with ints give another
    placeholder; anything else that needs a number is an error, since there is no number yet."""

    __slots__ = ("_fn", "_text")

    def __init__(self, fn: Callable[[int], int] = lambda n: n, text: str = "_"):
        self._fn, self._text = fn, text

    def resolve(self, n: int) -> int:
        return self._fn(n)

    def _op(self, other: Any, op: Callable, sym: str, flip: bool = False) -> _Size:
        if isinstance(other, _Size):
            a, b = (other, self) if flip else (self, other)
            return _Size(lambda n: op(a.resolve(n), b.resolve(n)), f"({a._text} {sym} {b._text})")
        if not isinstance(other, int):
            return NotImplemented
        if flip:
            return _Size(lambda n: op(other, self.resolve(n)), f"({other} {sym} {self._text})")
        return _Size(lambda n: op(self.resolve(n), other), f"({self._text} {sym} {other})")

    def __add__(self, o): return self._op(o, operator.add, "+")
    def __radd__(self, o): return self._op(o, operator.add, "+", True)
    def __sub__(self, o): return self._op(o, operator.sub, "-")
    def __rsub__(self, o): return self._op(o, operator.sub, "-", True)
    def __mul__(self, o): return self._op(o, operator.mul, "*")
    def __rmul__(self, o): return self._op(o, operator.mul, "*", True)
    def __floordiv__(self, o): return self._op(o, operator.floordiv, "//")
    def __rfloordiv__(self, o): return self._op(o, operator.floordiv, "//", True)

    def _no_number(self, *_args: Any) -> Any:
        raise TypeError(
            f"autosize: {self._text} is a size not known until the model runs, so it cannot be used as a "
            "number here. Pass it to a layer's constructor (Dense(_, 10), Conv((3, 3), (_, 16))), "
            "combining it with + - * // and ints if needed (Dense(_, _ // 4))."
        )

    __index__ = __int__ = __float__ = __bool__ = __lt__ = __le__ = __gt__ = __ge__ = _no_number
    __truediv__ = __rtruediv__ = __mod__ = __pow__ = __neg__ = _no_number

    def __repr__(self) -> str:
        return self._text


def _has_size(x: Any) -> bool:
    if isinstance(x, _Size):
        return True
    if isinstance(x, (tuple, list)):
        return any(_has_size(v) for v in x)
    if isinstance(x, dict):
        return any(_has_size(v) for v in x.values())
    return False


def _fill(x: Any, n: int) -> Any:
    if isinstance(x, _Size):
        return x.resolve(n)
    if isinstance(x, (tuple, list)) and _has_size(x):
        return type(x)(_fill(v, n) for v in x)
    if isinstance(x, dict) and _has_size(x):
        return {k: _fill(v, n) for k, v in x.items()}
    return x


def autosizefor(cls: type, x: Any) -> int:
    """The size `_` stands for in `cls(...)` given the layer's input `x`: the channel dimension
    `x.shape[-2]` (the only one for a vector), or `x.shape[0]` for a layer class that sets
    `__fluxjax_autosize_dim__ = 0` (Dense, LayerNorm, Embedding, recurrent layers, attention: the
    feature dimension). A layer of your own can set that attribute too (Flux overloads `autosizefor`).
    """
    shape = x.shape
    dim = getattr(cls, "__fluxjax_autosize_dim__", None)
    if dim is None:
        dim = max(0, len(shape) - 2)
    return shape[dim]


class LazyLayer:
    """A layer constructor call that held `_`, waiting for its input to say what `_` is. Only
    `autosize` makes these, and none survives it."""

    def __init__(self, cls: type, args: tuple, kwargs: dict):
        self.cls, self.args, self.kwargs, self.layer = cls, args, kwargs, None

    def __call__(self, x: Any, *ys: Any) -> Any:
        if self.layer is None:
            first = next((a for a in jax.tree_util.tree_leaves(x) if hasattr(a, "shape")), None)
            if first is None:
                raise TypeError(f"autosize: {self!r} was called with {type(x).__name__}, not an array")
            n = autosizefor(self.cls, first)
            with jax.ensure_compile_time_eval():  # real weights, though the model is being traced
                self.layer = self.cls(*_fill(self.args, n), **_fill(self.kwargs, n))
        return self.layer(x, *ys)

    def __repr__(self) -> str:
        if self.layer is not None:
            return f"LazyLayer({self.layer!r})"
        parts = [repr(a) for a in self.args] + [f"{k}={v!r}" for k, v in self.kwargs.items()]
        return f"LazyLayer({self.cls.__name__}({', '.join(parts)}))"


def lazy_new(layer_cls: type) -> staticmethod:
    """The `__new__` that `@layer` gives a class: inside `autosize`, a call with `_` among its
    arguments returns a `LazyLayer`. It carries `__wrapped__` so that `inspect.signature(cls)` (and
    `help`) still show the class's `__init__` arguments."""

    def __new__(cls: type, *args: Any, **kwargs: Any) -> Any:
        if getattr(_tls, "building", 0) and (_has_size(args) or _has_size(kwargs)):
            return LazyLayer(cls, args, kwargs)
        if (args or kwargs) and cls.__init__ is object.__init__:  # which no longer checks, given a __new__
            raise TypeError(f"{cls.__name__}() takes no arguments")
        return object.__new__(cls)

    __new__.__wrapped__ = layer_cls.__init__  # type: ignore[attr-defined]
    return staticmethod(__new__)


def _strip(x: Any, size: tuple) -> Any:
    from .functors import is_layer

    if isinstance(x, LazyLayer):
        if x.layer is None:
            raise ValueError(
                f"autosize: {x!r} was never called when the model ran on an input of size {size}, so its "
                "`_` is unknown. Give that layer its sizes as numbers."
            )
        return _strip(x.layer, size)
    if isinstance(x, _Size):
        raise TypeError(
            f"autosize: {x!r} reached the model outside a layer constructor; `_` can only be an argument "
            "of a layer such as Dense(_, 10) or Conv((3, 3), (_, 16))."
        )
    if isinstance(x, (tuple, list)):
        new = [_strip(v, size) for v in x]
        return x if all(a is b for a, b in zip(new, x)) else type(x)(new)
    if isinstance(x, dict):
        new = {k: _strip(v, size) for k, v in x.items()}
        return x if all(new[k] is v for k, v in x.items()) else new
    if is_layer(x):
        for k, v in list(vars(x).items()):
            s = _strip(v, size)
            if s is not v:
                setattr(x, k, s)
    return x


def autosize(size: tuple, build: Callable[[Any], Any]) -> Any:
    """Flux's `@autosize size model`: `build(_)` with every `_` filled in from the input size.

    `size` is the size of one input, batch included (a tuple of ints), as for `outputsize`. `build` takes
    the placeholder `_` and returns the model; a layer constructor given `_` (also as `_ // 2`,
    `_ * 4`, ...) is built when the model first runs, with `_` the size of its input's channel
    dimension `x.shape[-2]` (for `Dense`, `LayerNorm`, `Embedding`, recurrent layers and attention: the
    feature dimension `x.shape[0]`). The input is abstract (`jax.eval_shape`): nothing is computed.

    ```python
    >>> m = autosize((28, 28, 1, 32), lambda _: Chain(
    ...     Conv((3, 3), (_, 5), relu, stride=2, pad=SamePad()), BatchNorm(_),
    ...     flatten, Dense(_, _ // 4, relu), Dense(_, 10)))
    >>> m[3]
    Dense(980 => 245, relu)  # 240_345 parameters
    >>> m(jnp.ones((28, 28, 1, 32))).shape
    (10, 32)
    ```
    """
    from .functors import is_layer
    from .outputsize import _sizes, _trace

    sizes = _sizes(size, (), "autosize")
    if not callable(build) or is_layer(build):
        raise TypeError(f"autosize(size, build): build must be a function of `_`, got {type(build).__name__}")
    try:
        inspect.signature(build).bind(None)
    except TypeError:
        raise TypeError(
            "autosize(size, build): build must take one argument, the placeholder `_`, e.g. "
            "autosize((3, 1), lambda _: Chain(Dense(_, 4), Dense(4, 2)))"
        ) from None
    except ValueError:  # no signature (a builtin): let the call decide
        pass
    _tls.building = getattr(_tls, "building", 0) + 1
    try:
        model = build(_Size())
    finally:
        _tls.building -= 1
    _trace(model, sizes)
    return _strip(model, sizes[0])


__all__ = ["autosize", "autosizefor"]
