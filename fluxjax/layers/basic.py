"""`Dense` and `Chain`: Flux's `src/layers/basic.jl`, in Flux's layout (features × batch)."""

from __future__ import annotations

from collections.abc import Callable

import jax.numpy as jnp

from .._checks import as_size, check_callable, check_size, match_eltype, positive_ints
from ..core.layer import is_array, is_layer, layer
from ..errors import DimensionMismatch
from ..init import create_bias, glorot_uniform
from .containers import fn_name


def identity(x):
    return x


def act_name(f: Callable) -> str:
    return getattr(f, "__name__", repr(f))


@layer
class Dense:
    """Fully connected layer, `y = σ.(W * x .+ b)`, with `W` of shape `(out, in)`.

    `Dense(in, out, σ=identity; init=glorot_uniform, bias=True)` or `Dense((in, out), σ)` builds fresh
    weights; `Dense(W, b=True, σ=identity)` wraps existing ones (`b` may be `True`, `False` or an array).
    The input is `(in,)` or `(in, batch...)`:

    ```python
    >>> d = Dense(5, 2)
    >>> d(jnp.ones((5, 64))).shape
    (2, 64)

    ```
    """

    __fluxjax_autosize_dim__ = 0  # autosize reads `_` off the feature dimension

    def __init__(self, a, b=None, c=None, *, init: Callable = glorot_uniform, bias=True, rng=None):
        a = as_size(a)  # `Dense(jnp.array(3), 4)`: a 0-d integer array is a size
        if is_array(a):
            weight = jnp.asarray(a)
            if weight.ndim != 2:
                raise ValueError(f"Dense(W, ...): W must be a matrix (out, in), got shape {weight.shape}")
            if callable(b) and not is_array(b):
                b, c = True, b
            bias_arg = bias if b is None else b
            sigma = c
        else:
            if isinstance(a, tuple):
                (n_in, n_out), sigma = a, b
            else:
                n_in, n_out, sigma = a, b, c
            n_in, n_out = positive_ints("Dense", n_in, n_out)
            weight = init(n_out, n_in, rng=rng) if rng is not None else init(n_out, n_in)
            bias_arg = bias
        check_callable("Dense", "the activation σ", sigma)
        try:
            bias = create_bias(weight, bias_arg, weight.shape[0])
        except ValueError as e:
            raise DimensionMismatch(f"Dense: {e}") from None
        self.weight = weight
        self.bias = bias
        self.sigma = identity if sigma is None else sigma

    def __call__(self, x):
        W = self.weight
        x = match_eltype(self, x, W.dtype)
        check_size(self, x, 0, W.shape[1])
        if x.ndim <= 2:
            y = W @ x
        else:
            y = (W @ x.reshape(x.shape[0], -1)).reshape(W.shape[0], *x.shape[1:])
        if self.bias is not False:
            b = self.bias
            y = y + (b if y.ndim == 1 else b.reshape(b.shape + (1,) * (y.ndim - 1)))
        return self.sigma(y)

    def _show(self):
        s = f"Dense({self.weight.shape[1]} => {self.weight.shape[0]}"
        if self.sigma is not identity:
            s += f", {act_name(self.sigma)}"
        if self.bias is False:
            s += "; bias=false"
        return s + ")"


@layer
class Chain:
    """Apply layers in sequence: `Chain(l1, l2)(x) == l2(l1(x))`. Named: `Chain(enc=..., dec=...)`.

    Indexing is Python's (`m[0]` is the first layer, `m[-1]` the last, `m[0:2]` a `Chain`, `m["enc"]`
    or `m.enc` a named layer). Plain functions are allowed as layers (`Chain(Dense(2, 3), jnp.tanh)`).

    ```python
    >>> m = Chain(Dense(10, 5, relu), Dense(5, 2))
    >>> m(jnp.ones((10, 3))).shape
    (2, 3)

    ```
    """

    def __init__(self, *layers, **named):
        if layers and named:
            raise ValueError(f"Chain: give either positional layers or named layers, not both (got keyword {', '.join(named)})")
        if "layers" in named:
            raise ValueError("Chain: 'layers' is a reserved name")
        if len(layers) == 1 and isinstance(layers[0], list):
            layers = tuple(layers[0])
        for key, lay in (named.items() if named else enumerate(layers)):
            if not callable(lay):
                raise TypeError(f"Chain: every layer must be callable, got {type(lay).__name__} for {key!r}")
        self.layers = dict(named) if named else tuple(layers)

    def _seq(self):
        return tuple(self.layers.values()) if isinstance(self.layers, dict) else self.layers

    def __call__(self, *x):
        h = x[0] if len(x) == 1 else x
        for lay in self._seq():
            h = lay(h)
        return h

    def __getitem__(self, i):
        if isinstance(i, str):
            if not isinstance(self.layers, dict):
                raise KeyError(f"Chain has no named layers; index it with an int (got {i!r})")
            return self.layers[i]
        if isinstance(i, slice):
            if isinstance(self.layers, dict):
                return Chain(**dict(list(self.layers.items())[i]))
            return Chain(*self.layers[i])
        return self._seq()[i]

    def __getattr__(self, name):
        layers = self.__dict__.get("layers")
        if isinstance(layers, dict) and name in layers:
            return layers[name]
        raise AttributeError(f"Chain has no attribute {name!r}")

    def __len__(self):
        return len(self.layers)

    def __iter__(self):
        return iter(self._seq())

    def _show(self) -> str:
        if isinstance(self.layers, dict):
            return f"Chain({', '.join(f'{k} = {fn_name(v)}' for k, v in self.layers.items())})"
        return f"Chain({', '.join(fn_name(v) for v in self.layers)})"

    def _show_children(self):
        # Flux expands the Chain only when some child is not leaf-like (i.e. is a layer):
        # `Chain(relu, softmax)` is one line, as an empty `Chain()`
        if not any(is_layer(v) for v in self._seq()):
            return []
        if isinstance(self.layers, dict):
            return list(self.layers.items())
        return [(None, lay) for lay in self.layers]


def activations(c: Chain, x) -> tuple:
    """Every layer's output, in order (Flux's `activations`).

    ```python
    >>> m = Chain(Dense(2, 3, relu), Dense(3, 1))
    >>> [a.shape for a in activations(m, jnp.ones((2, 5)))]
    [(3, 5), (1, 5)]

    ```
    """
    out = []
    for lay in c._seq():
        x = lay(x)
        out.append(x)
    return tuple(out)


__all__ = ["Dense", "Chain", "activations", "identity"]
