"""Functors.jl's `KeyPath`: a path of keys into a nested model, `getkeypath`, `haskeypath`, `setkeypath_`.

A key is a field name or a dict key (`str`, Julia's `Symbol` and `String`), an index (`int`, 0-based as
everywhere in Python: Julia's `KeyPath(:layers, 1)` is `KeyPath("layers", 0)`), or a tuple indexing an
array (Julia's `CartesianIndex`). A `str` key reads a dict's entry, else an attribute.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

Key = str | int | tuple


class KeyPath:
    """`KeyPath(*keys)`: keys and other `KeyPath`s, concatenated.

    ```python
    >>> kp = KeyPath("b", 3)
    >>> KeyPath("a", kp, "c", 4)
    KeyPath('a', 'b', 3, 'c', 4)
    >>> getkeypath(Chain(Dense(2, 3), Dense(3, 1)), KeyPath("layers", 1, "weight")).shape
    (1, 3)

    ```
    """

    __slots__ = ("keys",)

    def __init__(self, *keys: Key | KeyPath):
        flat: list = []
        for k in keys:
            if isinstance(k, KeyPath):
                flat.extend(k.keys)
            elif isinstance(k, (str, int, tuple)) and not isinstance(k, bool):
                flat.append(k)
            else:
                raise TypeError(f"KeyPath: a key is a str, an int or a tuple of ints, got {type(k).__name__} {k!r}")
        self.keys: tuple = tuple(flat)

    def __iter__(self) -> Iterator:
        return iter(self.keys)

    def __len__(self) -> int:
        return len(self.keys)

    def __getitem__(self, i: int | slice) -> Any:
        return KeyPath(*self.keys[i]) if isinstance(i, slice) else self.keys[i]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, KeyPath) and self.keys == other.keys

    def __hash__(self) -> int:
        return hash((KeyPath, self.keys))

    def __repr__(self) -> str:
        return f"KeyPath({', '.join(repr(k) for k in self.keys)})"

    def __str__(self) -> str:  # Functors' compact form, `keypathstr`
        return ".".join(str(k) for k in self.keys)


def _getkey(x: Any, k: Key) -> Any:
    if isinstance(k, str) and not isinstance(x, Mapping):
        return getattr(x, k)
    return x[k]


def _haskey(x: Any, k: Key) -> bool:
    if isinstance(x, Mapping):
        return k in x
    if isinstance(k, str):
        return hasattr(x, k)
    if isinstance(k, int) and isinstance(x, Sequence):
        return -len(x) <= k < len(x)
    try:
        x[k]
    except (IndexError, KeyError, TypeError):
        return False
    return True


def _path(kp: Any, fn: str) -> KeyPath:
    if not isinstance(kp, KeyPath):
        raise TypeError(f"{fn}(x, kp): kp must be a KeyPath, e.g. KeyPath('layers', 0, 'weight'); got {type(kp).__name__}")
    return kp


def getkeypath(x: Any, kp: KeyPath) -> Any:
    """The value in `x` at the path `kp` (`KeyPath()` gives `x`).

    ```python
    >>> m = Chain(Dense(2, 3), Dense(3, 1))
    >>> getkeypath(m, KeyPath('layers', 0, 'bias'))
    Array([0., 0., 0.], dtype=float32)
    >>> getkeypath(m, KeyPath()) is m
    True

    ```
    """
    _path(kp, "getkeypath")
    for i, k in enumerate(kp.keys):
        if not _haskey(x, k):
            raise KeyError(f"getkeypath: {type(x).__name__} at {KeyPath(*kp.keys[:i])!r} has no key {k!r}")
        x = _getkey(x, k)
    return x


def haskeypath(x: Any, kp: KeyPath) -> bool:
    """Whether `x` has a value at the path `kp`.

    ```python
    >>> m = Chain(Dense(2, 3), Dense(3, 1))
    >>> haskeypath(m, KeyPath('layers', 1, 'weight')), haskeypath(m, KeyPath('layers', 2))
    (True, False)

    ```
    """
    _path(kp, "haskeypath")
    for k in kp.keys:
        if not _haskey(x, k):
            return False
        x = _getkey(x, k)
    return True


def setkeypath_(x: Any, kp: KeyPath, v: Any) -> None:
    """Set the value in `x` at the path `kp` to `v` (Functors' `setkeypath!`): a layer's field, a list's
    or dict's entry. Tuples and JAX arrays are immutable: set the field that holds them instead.

    ```python
    >>> m = Chain(Dense(2, 3), Dense(3, 1))
    >>> setkeypath_(m, KeyPath('layers', 0, 'bias'), jnp.ones(3))
    >>> m[0].bias
    Array([1., 1., 1.], dtype=float32)

    ```
    """
    if not _path(kp, "setkeypath_").keys:
        raise ValueError("setkeypath_: the empty KeyPath has nothing to set")
    y, k = getkeypath(x, kp[:-1]), kp.keys[-1]
    if isinstance(k, str) and not isinstance(y, Mapping):
        setattr(y, k, v)
        return
    try:
        y[k] = v
    except TypeError:
        raise TypeError(
            f"setkeypath_: {type(y).__name__} at {kp[:-1]!r} cannot be changed in place; set the field that holds it"
        ) from None


__all__ = ["KeyPath", "getkeypath", "haskeypath", "setkeypath_"]
