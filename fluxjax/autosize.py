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
from collections.abc import Callable
from typing import Any

from .core.layer import is_layer
from .core.lazy import LazyLayer, Size, autosizefor, building
from .outputsize import input_sizes, trace_abstract


def _strip(x: Any, size: tuple) -> Any:
    if isinstance(x, LazyLayer):
        if x.layer is None:
            raise ValueError(
                f"autosize: {x!r} was never called when the model ran on an input of size {size}, so its "
                "`_` is unknown. Give that layer its sizes as numbers."
            )
        return _strip(x.layer, size)
    if isinstance(x, Size):
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
    sizes = input_sizes(size, (), "autosize")
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
    with building():
        model = build(Size())
    trace_abstract(model, sizes)
    return _strip(model, sizes[0])


__all__ = ["autosize", "autosizefor"]
