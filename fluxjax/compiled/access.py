"""Straight-line code that reads and rebinds a walk's slots, for `fluxjax.jit`'s every call.

Going through `Slot.get`/`Slot.set` costs about 0.3 µs a slot; a tiny model and its Adam state have
dozens, which is as long as the compiled step itself. So a `Plan` generates, once, a function that
reads every slot with one expression each (`o3.__dict__['weight']`, `o5.__dict__['state'][2]`), and
for each set of slots a compiled program rebinds, a function that writes them, rebuilding each
tuple-valued field once. Slots inside opaque pytree nodes go through their `Slot`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..core.layer import restore_order
from ..core.walk import ARRAY_TYPES, Slot


class Source:
    """The names a generated function reads: each object once, and constants that have no literal."""

    def __init__(self, **env: Any):
        self.env: dict[str, Any] = {"_new": tuple.__new__, "_ARRAY": ARRAY_TYPES, **env}
        self._owners: dict[int, str] = {}

    def alias(self, obj: Any, expr: str) -> None:
        """Read `obj` as `expr` (over names in `env`) wherever it is named: an object that a later call
        replaces by another one in the same place (a closure cell of a function passed anew)."""
        self._owners[id(obj)] = expr

    def name(self, obj: Any, prefix: str = "c") -> str:
        k = self._owners.get(id(obj))
        if k is None:
            k = self._owners[id(obj)] = f"{prefix}{len(self._owners)}"
            self.env[k] = obj
        return k

    def literal(self, v: Any) -> str:
        if type(v) in (str, int):
            return repr(v)
        return self.name(v, "k")

    def base(self, s: Slot) -> str:
        """The expression for the slot's field or item, before its path."""
        o = self.name(s.owner, "o")
        if s.attr is True:
            return f"{o}.__dict__[{self.literal(s.key)}]"
        if s.attr is False:
            return f"{o}[{self.literal(s.key)}]"
        return f"{o}.cell_contents"

    def compile(self, src: str, fn: str) -> Callable:
        exec(src, self.env)  # noqa: S102 - the source is built above from literals and names only
        return self.env[fn]


def _plain(s: Slot) -> bool:
    return all(type(p) is int for p in s.path)


def loader(slots: Sequence[Slot], shared: Sequence[int] | None = None, src: Source | None = None
           ) -> Callable[[], list | None]:
    """A function returning `[s.get() for s in slots]`; with `shared` (each slot's position among the
    distinct arrays, see `fluxjax.compiled.call._sharing_pattern`), the distinct arrays, or None when slots
    that shared an array no longer do. `src` may hold aliases (`Source.alias`)."""
    src = src or Source()
    exprs = _reads(src, slots)
    if shared is None:
        return src.compile(f"def load():\n    return [{', '.join(exprs)}]\n", "load")
    lines, same = [], []
    for e, p in zip(exprs, shared):
        if p == len(lines):
            lines.append(f"    u{p} = {e}")
        else:
            same.append(f"{e} is u{p}")
    lines.append(f"    if not ({' and '.join(same)}):\n        return None")
    lines.append(f"    return [{', '.join(f'u{p}' for p in range(len(lines) - 1))}]")
    return src.compile("def load():\n" + "\n".join(lines) + "\n", "load")


def _reads(src: Source, slots: Sequence[Slot]) -> list[str]:
    """An expression reading each slot: its field or item and path, or its `Slot.get()`."""
    return [src.base(s) + "".join(f"[{p}]" for p in s.path) if _plain(s) else f"{src.name(s, 's')}.get()" for s in slots]


def holding(slots: Sequence[Slot]) -> Callable[[list], bool]:
    """A function `holds(xs)`: whether each slot holds the very object `xs` has at its position (the
    arrays a `loader` of the same slots returned), one straight-line expression."""
    src = Source()
    conds = [f"{e} is x[{i}]" for i, e in enumerate(_reads(src, slots))] or ["True"]
    return src.compile("def holds(x):\n    return " + " and ".join(conds) + "\n", "holds")


def storer(slots: Sequence[Slot], targets: Sequence[Sequence[int]], src: Source | None = None
           ) -> Callable[[list], None]:
    """A function `store(values)` doing `slots[i].set(values[j])` for every `i` in `targets[j]`; the
    values are arrays, so no structure changes (the structure version stays as it is). A tuple-valued
    field is rebuilt as the type and length it has now, which only a structure change can alter."""
    src = src or Source()
    lines: list[str] = []
    fields: dict[tuple, tuple[Slot, list]] = {}  # a tuple-valued field -> its slot, (path, value) pairs
    for j, where in enumerate(targets):
        for i in where:
            s = slots[i]
            if not s.path:
                lines.append(f"    {src.base(s)} = v[{j}]")
            elif _plain(s):
                fields.setdefault((id(s.owner), s.key), (s, []))[1].append((s.path, f"v[{j}]"))
            else:
                lines.append(f"    {src.name(s, 's')}.set(v[{j}])")
    for n, (s, items) in enumerate(fields.values()):
        lines.append(f"    b{n} = {src.base(s)}")
        lines.append(f"    {src.base(s)} = {_rebuilt(src, f'b{n}', s.get_base(), items)}")
    return src.compile("def store(v):\n" + ("\n".join(lines) or "    pass") + "\n", "store")


def _rebuilt(src: Source, expr: str, value: tuple, items: list) -> str:
    """The expression for tuple `expr` (now `value`) with the `(path, value expression)` items put in."""
    direct = {p[0]: v for p, v in items if len(p) == 1}
    nested: dict[int, list] = {}
    for p, v in items:
        if len(p) > 1:
            nested.setdefault(p[0], []).append((p[1:], v))
    parts = []
    for i in range(len(value)):
        if i in direct:
            parts.append(direct[i])
        elif i in nested:
            parts.append(_rebuilt(src, f"{expr}[{i}]", value[i], nested[i]))
        else:
            parts.append(f"{expr}[{i}]")
    t = type(value)
    body = f"({', '.join(parts)},)"
    if t is tuple:
        return body
    if hasattr(t, "_fields"):  # a NamedTuple: its __new__ only names the positions
        return f"_new({src.name(t, 't')}, {body})"
    return f"{src.name(t, 't')}({body})"


MAX_NESTING = 40  # deeper subtrees are rebuilt by `unflatten` (Python limits the nesting of one expression)


def rebuilder(treedef: Any, order: Any) -> Callable[[list], Any]:
    """A function `build(leaves)` equal to `restore_order(treedef.unflatten(leaves), order)`, as one
    expression: each container made once, dicts in the insertion order that `order`
    (`fluxjax.core.layer.dict_order`) recorded. An eager optimiser step's new states (a dict of
    hyperparameters in each) are rebuilt this way at every step."""
    src = Source(_unflatten=_unflatten_part)
    expr, _ = _built(src, treedef, order, 0, 0)
    return src.compile(f"def build(L):\n    return {expr}\n", "build")


def _unflatten_part(treedef: Any, order: Any, leaves: list) -> Any:
    return restore_order(treedef.unflatten(leaves), order)


def _built(src: Source, td: Any, order: Any, pos: int, depth: int) -> tuple[str, int]:
    """The expression rebuilding the subtree `td` from `L[pos:]`, and the position after it."""
    node = td.node_data()
    if node is None:
        return f"L[{pos}]", pos + 1
    t, aux = node
    kids = td.children()
    if t is type(None):
        return "None", pos
    namedtuple = aux is None and issubclass(t, tuple) and hasattr(t, "_fields")
    if depth > MAX_NESTING or t not in (list, tuple, dict) and not namedtuple:
        end = pos + td.num_leaves
        return f"_unflatten({src.name(td, 'd')}, {src.name(order, 'r')}, L[{pos}:{end}])", end
    if t is dict:  # children come in jax's (sorted) key order, and are written in insertion order
        keys = aux if order is None else order[1]
        orders = {} if order is None else dict(zip(keys, order[2]))
        made = {}
        for k, kid in zip(aux, kids):
            made[k], pos = _built(src, kid, orders.get(k), pos, depth + 1)
        return "{" + ", ".join(f"{src.literal(k)}: {made[k]}" for k in keys) + "}", pos
    inner = (None,) * len(kids) if order is None else order[1]
    parts = []
    for kid, o in zip(kids, inner):
        e, pos = _built(src, kid, o, pos, depth + 1)
        parts.append(e)
    if t is list:
        return "[" + ", ".join(parts) + "]", pos
    body = "(" + "".join(p + ", " for p in parts) + ")"
    return (body if t is tuple else f"_new({src.name(t, 't')}, {body})"), pos
