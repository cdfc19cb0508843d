"""The placeholder `_` of Flux's `@autosize` and the layer constructor call that waits for it.

Inside `fluxjax.autosize`'s `building()` block, a layer constructor given `_` (alone or in arithmetic
such as `_ // 4`) is not run: `@layer`'s `__new__` (`lazy_new`) returns a `LazyLayer` that remembers the
call and builds the real layer when first called, reading `_` off its input.
"""

from __future__ import annotations

import contextlib
import operator
import threading
from collections.abc import Callable, Iterator
from typing import Any

import jax

_tls = threading.local()


class Size:
    """`_` in an `autosize` model: the size read off a layer's input. `+ - * //` with ints give another
    placeholder; anything else that needs a number is an error, since there is no number yet."""

    __slots__ = ("_fn", "_text")

    def __init__(self, fn: Callable[[int], int] = lambda n: n, text: str = "_"):
        self._fn, self._text = fn, text

    def resolve(self, n: int) -> int:
        return self._fn(n)

    def _op(self, other: Any, op: Callable, sym: str, flip: bool = False) -> Size:
        if isinstance(other, Size):
            a, b = (other, self) if flip else (self, other)
            return Size(lambda n: op(a.resolve(n), b.resolve(n)), f"({a._text} {sym} {b._text})")
        if not isinstance(other, int):
            return NotImplemented
        if flip:
            return Size(lambda n: op(other, self.resolve(n)), f"({other} {sym} {self._text})")
        return Size(lambda n: op(self.resolve(n), other), f"({self._text} {sym} {other})")

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
    if isinstance(x, Size):
        return True
    if isinstance(x, (tuple, list)):
        return any(_has_size(v) for v in x)
    if isinstance(x, dict):
        return any(_has_size(v) for v in x.values())
    return False


def _fill(x: Any, n: int) -> Any:
    if isinstance(x, Size):
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



@contextlib.contextmanager
def building() -> Iterator[None]:
    """While this block runs, layer constructors given `_` return a `LazyLayer`."""
    _tls.building = getattr(_tls, "building", 0) + 1
    try:
        yield
    finally:
        _tls.building -= 1


__all__ = ["Size", "LazyLayer", "lazy_new", "building", "autosizefor"]
