"""The JSON form of a nested state (`state(model)`, `state(opt_state)`) inside a fluxjax checkpoint.

Format version 2 stores the tree as a flat table of nodes, so the JSON nests a few levels deep however
deep the model is (a 200-deep chain of chains saves and loads; version 1 nested the JSON like the model
and hit Python's recursion limit). Each node is one of

```
{"array": "a3"}  {"array": "a3", "key_impl": "threefry2x32"}   an array (named in the `arrays` table)
{"dict": [[k, v], ...]}  {"tuple": [i, ...]}  {"list": [i, ...]}   containers; k, v, i are node indices
{"v": x}  {"np": [dtype, value]}  {"complex": [re, im]}  {"bytes": "hex"}   plain values
```

and a container's children always have larger indices than the container, so the table is a tree (or
a DAG) by construction and is decoded in one pass from the end, with no recursion. An array saved once
(tied weights) is named once and comes back as one object. Version 1 files are read by converting
their nested form to the table.
"""

from __future__ import annotations

import re
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from .core.layer import is_array
from .loading import CheckpointError, show_path
from .random import is_typed_key


class Encoder:
    """Encodes state trees into one shared node table. `arrays` maps each array's readable name
    (`model.layers.0.weight`, `opt_state.layers.0.weight.0`: the part, then the path, as `export_npz`
    names it) to the array itself (a jax array keeps its sharding; no host copy is made), `info` holds
    its dtype, shape and checksum, and `ids` names each array object once (a tied array is saved once,
    under the first path that reaches it)."""

    def __init__(self, checksum):
        self.checksum = checksum
        self.nodes: list[Any] = []
        self.arrays: dict[str, Any] = {}
        self.info: dict[str, dict] = {}
        self.ids: dict[int, str] = {}

    def _new(self) -> int:
        self.nodes.append(None)
        return len(self.nodes) - 1

    def encode(self, tree: Any, prefix: str) -> int:
        """Add `tree` (whose arrays are named `prefix.<path>`) to the table; returns its root index."""
        root = self._new()
        stack = [(tree, root, (prefix,))]
        while stack:
            v, i, path = stack.pop()
            if is_array(v):
                self.nodes[i] = self._array(v, path)
            elif isinstance(v, dict):
                for k in v:
                    if not isinstance(k, _KEY_TYPES):
                        raise TypeError(f"save: {_where(path)}: a dict key {k!r:.60} is a {type(k).__name__}; a "
                                        "checkpoint stores dict keys that are str, int, float, complex, bool, None, "
                                        "bytes or NumPy scalars. Use such keys (e.g. a string for a tuple)")
                pairs = [[self._new(), self._new()] for _ in v]
                # pushed in reverse, so the arrays are met in the model's order
                stack.extend(reversed([e for (k, x), (ki, xi) in zip(v.items(), pairs)
                                       for e in ((k, ki, None), (x, xi, path + (k,)))]))
                self.nodes[i] = {"dict": pairs}
            elif isinstance(v, (tuple, list)):
                kids = [self._new() for _ in v]
                stack.extend(reversed([(x, c, path + (n,)) for n, (x, c) in enumerate(zip(v, kids))]))
                self.nodes[i] = {"tuple" if isinstance(v, tuple) else "list": kids}
            else:
                try:
                    self.nodes[i] = _plain(v)
                except TypeError as e:
                    raise TypeError(f"save: {_where(path)}: {str(e).removeprefix('save: ')}") from None
        return root

    def _name(self, path: tuple) -> str:
        base = _UNSAFE.sub("_", ".".join(str(p) for p in path))
        name, n = base, 1
        while name in self.info:  # two paths that read alike (a key holding a dot): keep both
            name, n = f"{base}~{n}", n + 1
        return name

    def _array(self, v: Any, path: tuple) -> dict:
        if isinstance(v, jax.core.Tracer):
            raise TypeError("save: the model holds traced values; save outside jax transformations")
        name = self.ids.get(id(v))
        if name is None:
            name = self.ids[id(v)] = self._name(path)
            a = jax.random.key_data(v) if is_typed_key(v) else v
            if not isinstance(a, jax.Array):
                a = np.asarray(a)
            self.arrays[name] = a
            self.info[name] = {"dtype": np.dtype(a.dtype).name, "shape": list(a.shape), "checksum": self.checksum(a)}
        out = {"array": name}
        if is_typed_key(v):
            out["key_impl"] = str(jax.random.key_impl(v))
        return out


_UNSAFE = re.compile(r"[^A-Za-z0-9_.\-]")
_KEY_TYPES = (str, int, float, complex, bool, bytes, type(None), np.generic)


def _where(path: tuple | None) -> str:
    """`model: layers[0].table` for the encoder's path `("model", "layers", 0, "table")`; a dict key's own
    path is None."""
    if not path:
        return "a dict key"
    return f"{path[0]}: {show_path(tuple(path[1:]))}"


def _plain(v: Any) -> dict:
    if isinstance(v, np.generic):
        return {"np": [v.dtype.name, v.item() if not np.iscomplexobj(v) else [v.real.item(), v.imag.item()]]}
    if isinstance(v, complex):
        return {"complex": [v.real, v.imag]}
    if isinstance(v, bytes):
        return {"bytes": v.hex()}
    if v is None or isinstance(v, (bool, int, float, str)):
        return {"v": v}
    raise TypeError(f"save: cannot encode {type(v).__name__}")


def _node(nodes: list, i: Any, where: str) -> tuple[str, Any]:
    if not isinstance(i, int) or isinstance(i, bool) or not 0 <= i < len(nodes):
        raise CheckpointError(f"{where}: the structure refers to node {i!r:.40}, which does not exist")
    v = nodes[i]
    if not isinstance(v, dict) or not v:
        raise CheckpointError(f"{where}: malformed structure entry {v!r:.80}")
    if "array" in v:
        return "array", v
    if len(v) != 1:
        raise CheckpointError(f"{where}: malformed structure entry {v!r:.80}")
    (tag, body), = v.items()
    return tag, body


def children(nodes: list, i: int, where: str) -> tuple[str, Any, list[int]]:
    """`(tag, body, child indices)` of node `i`, validated: a container's children come after it."""
    tag, body = _node(nodes, i, where)
    if tag == "dict":
        if not isinstance(body, list) or not all(isinstance(p, list) and len(p) == 2 for p in body):
            raise CheckpointError(f"{where}: malformed dict entry in the structure")
        kids = [c for p in body for c in p]
    elif tag in ("tuple", "list"):
        if not isinstance(body, list):
            raise CheckpointError(f"{where}: malformed {tag} entry in the structure")
        kids = body
    else:
        kids = []
    for c in kids:
        _node(nodes, c, where)
        if c <= i:
            raise CheckpointError(f"{where}: structure node {i} refers back to node {c} (a cycle)")
    return tag, body, kids


def array_refs(nodes: list, root: int, where: str) -> list[tuple[tuple, str]]:
    """`(path, array name)` for every array the tree at `root` refers to, with no recursion."""
    out = []
    stack = [(root, ())]
    while stack:
        i, path = stack.pop()
        tag, body, _ = children(nodes, i, where)
        if tag == "array":
            out.append((path, body["array"]))
        elif tag == "dict":
            stack.extend((v, path + (_leaf(nodes, k, where),)) for k, v in reversed(body))
        elif tag in ("tuple", "list"):
            stack.extend((c, path + (n,)) for n, c in reversed(list(enumerate(body))))
    return out


def _leaf(nodes: list, i: int, where: str) -> Any:
    tag, body = _node(nodes, i, where)
    if tag in ("array", "dict", "tuple", "list"):
        raise CheckpointError(f"{where}: a dict key in the structure is a {tag}")
    return _value(tag, body, where)


def _value(tag: str, body: Any, where: str) -> Any:
    if tag == "np":
        dt = np.dtype(body[0])
        if dt.hasobject or dt.fields:
            raise CheckpointError(f"{where}: a number in the structure has dtype {dt}")
        return dt.type(complex(*body[1]) if isinstance(body[1], list) else body[1])
    if tag == "complex":
        return complex(*body)
    if tag == "bytes":
        return bytes.fromhex(body)
    if tag == "v":
        if not (body is None or isinstance(body, (bool, int, float, str))):
            raise CheckpointError(f"{where}: malformed value {body!r:.80} in the structure")
        return body
    raise CheckpointError(f"{where}: unknown structure entry {tag!r}")


def decode(nodes: list, roots: list[int | None], arrays: dict[str, Any], where: str,
           unread: set[str] = frozenset()) -> list[Any]:
    """Rebuild the trees at `roots` (None stays None); `arrays` maps names to arrays read (host NumPy
    arrays, or jax arrays restored into a destination's sharding) and is updated to hold the device arrays
    made, so a tied array comes back as one object. A host array whose dtype jax would narrow (float64,
    int64, complex128 with x64 off) stays a NumPy array, bit-exact (`loadmodel_` converts it, checking,
    where the destination is a jax array). The `unread` arrays are stand-ins that were never read (their
    shape is all a load uses): they stay as they are."""
    vals: list[Any] = [None] * len(nodes)
    need = sorted({i for r in roots if r is not None for i in _reachable(nodes, r, where)}, reverse=True)
    for i in need:  # children have larger indices: they are built first
        tag, body, _ = children(nodes, i, where)
        if tag == "array":
            name = body["array"]
            if not isinstance(name, str) or name not in arrays:
                raise CheckpointError(f"{where}: the structure names an array {name!r:.40} that is not on disk")
            a = arrays[name]
            if name in unread:
                vals[i] = a
                continue
            if isinstance(a, np.ndarray) and jax.dtypes.canonicalize_dtype(a.dtype) == a.dtype:
                a = arrays[name] = jnp.asarray(a)
            vals[i] = jax.random.wrap_key_data(jnp.asarray(a), impl=body["key_impl"]) if "key_impl" in body else a
        elif tag == "dict":
            vals[i] = {vals[k]: vals[v] for k, v in body}
        elif tag in ("tuple", "list"):
            vals[i] = (tuple if tag == "tuple" else list)(vals[c] for c in body)
        else:
            vals[i] = _value(tag, body, where)
    return [None if r is None else vals[r] for r in roots]


def _reachable(nodes: list, root: int, where: str) -> set[int]:
    seen, stack = set(), [root]
    while stack:
        i = stack.pop()
        if i not in seen:
            seen.add(i)
            stack.extend(children(nodes, i, where)[2])
    return seen


def from_v1(trees: list[Any], where: str) -> tuple[list, list[int | None]]:
    """Convert version-1 nested structures (`{"tuple": [ {...}, ... ]}`) to a node table and roots."""
    nodes: list[Any] = []
    roots: list[int | None] = []
    for tree in trees:
        if tree is None:
            roots.append(None)
            continue
        roots.append(len(nodes))
        nodes.append(None)
        stack = [(tree, roots[-1])]
        while stack:
            v, i = stack.pop()
            if isinstance(v, dict) and "array" in v:
                nodes[i] = v
                continue
            if not isinstance(v, dict) or len(v) != 1:
                raise CheckpointError(f"{where}: malformed structure entry {v!r:.80}")
            (tag, body), = v.items()
            if tag == "dict" and isinstance(body, list):
                pairs = []
                for p in body:
                    if not isinstance(p, list) or len(p) != 2:
                        raise CheckpointError(f"{where}: malformed dict entry in the structure")
                    pairs.append([len(nodes), len(nodes) + 1])
                    nodes.extend((None, None))
                    stack.extend(zip(p, pairs[-1]))
                nodes[i] = {"dict": pairs}
            elif tag in ("tuple", "list") and isinstance(body, list):
                kids = list(range(len(nodes), len(nodes) + len(body)))
                nodes.extend([None] * len(body))
                stack.extend(zip(body, kids))
                nodes[i] = {tag: kids}
            else:
                nodes[i] = v
    return nodes, roots


__all__ = ["Encoder", "array_refs", "children", "decode", "from_v1"]
