"""Placing model and optimiser arrays on a mesh: `shard_`, replicated or split by rules."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from ..core.region import commit
from ..core.walk import walk
from ..random import is_typed_key
from .mesh import _auto, _axes_size

Rules = Mapping[str, P] | Callable[[str, jax.Array], P | None] | None


def _place(x, sharding: NamedSharding):
    """`x` (same value on every process) as one array with `sharding`; no copy when already there."""
    if isinstance(x, jax.Array) and x.sharding == sharding:
        return x
    if jax.process_count() == 1 or (isinstance(x, jax.Array) and not x.is_fully_addressable):
        return jax.device_put(x, sharding)  # one process, or a global array: reshard on the devices
    if is_typed_key(x):  # host copies of typed keys go through their raw data
        data = _place(np.asarray(jax.random.key_data(x)), NamedSharding(sharding.mesh, P(*sharding.spec, None)))
        return jax.random.wrap_key_data(data, impl=jax.random.key_impl(x))
    return jax.device_put(np.asarray(x), sharding)


def _field_of(path: str) -> str:
    m = re.search(r"\.(\w+)(?:\[[^\]]*\]|<\d+>)*$", path)
    return m.group(1) if m else path


def _glob(pattern: str) -> re.Pattern:
    """A path pattern: literal text (brackets included) where `*` matches anything."""
    return re.compile(".*".join(re.escape(part) for part in pattern.split("*")))


def _spec_for(rules: Rules, path: str, x) -> tuple[P, str]:
    if rules is None:
        return P(), ""
    if callable(rules):
        spec = rules(path, x)
        return (P() if spec is None else spec), "the rule function"
    field = _field_of(path)
    for k, spec in rules.items():
        if k == field or _glob(k).fullmatch(path):
            return (P() if spec is None else spec), f"rule {k!r}"
    return P(), ""


def _check_spec(mesh: Mesh, spec: P, path: str, x, why: str) -> None:
    if not isinstance(spec, P):
        raise TypeError(f"shard_: {why} gave {spec!r} for {path}; expected a PartitionSpec such as P('model', None)")
    if len(spec) > x.ndim:
        raise ValueError(
            f"shard_: {why} gives {spec} ({len(spec)} axes) for {path} of shape {tuple(x.shape)}; "
            "match it to arrays of that rank only, e.g. a path pattern like 'layers[2].weight'"
        )
    for i, names in enumerate(spec):
        if names is None:
            continue
        names = (names,) if isinstance(names, str) else tuple(names)
        for a in names:
            if a not in mesh.axis_names:
                raise ValueError(f"shard_: {why} uses mesh axis {a!r}, but the mesh has axes {mesh.axis_names}")
        k = _axes_size(mesh, names)
        if x.shape[i] % k:
            raise ValueError(
                f"shard_: {why} splits axis {i} of {path} (shape {tuple(x.shape)}) over {k} devices of mesh axis "
                f"{names if len(names) > 1 else names[0]!r}, and {k} does not divide {x.shape[i]}. Choose sizes divisible "
                f"by {k}, or a rule that matches only such arrays."
            )


def _arrays(tree: Any):
    """(path, slot, array) for every array in `tree` (a model, optimiser state or container)."""
    w = walk([tree], paths=True)
    for path, slot, x in zip(w.paths, w.slots, w.leaves):
        if isinstance(x, (jax.Array, np.ndarray)):
            if isinstance(x, jax.core.Tracer):
                raise RuntimeError("shard_ places concrete arrays; call it outside jit / gradient")
            yield (path[2:] if path.startswith("0.") else path[1:]), slot, x


def shard_(model: Any, mesh: Mesh, rules: Rules = None, *, opt_state: Any = None) -> Any:
    """Place every array of `model` on `mesh`, in place (rebinding its fields); returns `model`.

    - `rules`: `None` replicates every array on every device (data parallelism). A dict maps a field
      name (`"weight"`) or a glob over the array's path (`"layers[0].weight"`, `"layers[*].bias"`,
      `"enc.*"`) to a `PartitionSpec` over the array's axes (Flux's order: a Dense `weight` is
      `(out, in)`); the first matching entry wins and unmatched arrays are replicated. A function
      `rule(path, array) -> PartitionSpec | None` decides each array itself.
    - `opt_state`: an optimiser state from `setup` to place too: each moment follows its parameter's
      placement (same shape), everything else is replicated. (`setup` after `shard_` makes the
      moments follow too, but leaves scalar hyperparameters on the default device; pass the state
      here to place all of it, which `jax.distributed` jobs need.)

    Arrays already placed as asked are not copied. Split axes must be divisible by the number of
    devices they are split over; an error names the array otherwise. Under `jax.distributed`, every
    process must hold the same values (build the model with the same seed, or load the same file).

    ```python
    >>> mesh = device_mesh(data=4, model=2)   # needs 8 devices  # doctest: +SKIP
    >>> shard_(model, mesh, rules={"layers[0].weight": P("model", None), "layers[0].bias": P("model")})  # doctest: +SKIP
    >>> model[0].weight.sharding.spec   # doctest: +SKIP
    PartitionSpec('model', None)

    ```
    """
    mesh = _auto(mesh)
    placed: dict[int, tuple] = {}
    for path, slot, x in _arrays(model):
        spec, why = _spec_for(rules, path, x)
        _check_spec(mesh, spec, path, x, why)
        place_tied(placed, path, slot, x, NamedSharding(mesh, spec))
    if opt_state is not None:
        _follow(opt_state, model, mesh)
    return model


def _spec_key(spec: P) -> tuple:
    """A PartitionSpec without its trailing `None`s and with 1-tuples unwrapped: equal keys, same placement."""
    parts = [p[0] if isinstance(p, tuple) and len(p) == 1 else p for p in spec]
    while parts and parts[-1] is None:
        parts.pop()
    return tuple(parts)


def place_tied(placed: dict[int, tuple], path: str, slot, x, sharding: NamedSharding) -> None:
    """Commit `x` placed with `sharding` into `slot`. An array met before at another path (tied
    weights: one array in several layers) gets the array placed then, so the tie survives; `placed`
    maps `id(x)` to `(x, path, sharding, placed array)` across the calls of one placement."""
    if id(x) not in placed:
        placed[id(x)] = (x, path, sharding, _place(x, sharding))
    _, first, where, y = placed[id(x)]
    if _spec_key(where.spec) != _spec_key(sharding.spec):  # the rules disagree, on any mesh size
        raise ValueError(
            f"shard_: {path} is the same array as {first} (tied weights), but the rules place it as "
            f"{sharding.spec} there and as {where.spec} at {first}; give both paths the same PartitionSpec"
        )
    commit(slot, y)


def _on(x, mesh: Mesh) -> bool:
    s = getattr(x, "sharding", None)
    return isinstance(s, NamedSharding) and _auto(s.mesh) == mesh


def _follow(opt_state: Any, model: Any, mesh: Mesh, only_new: bool = False) -> None:
    """Place the arrays of an optimiser state on `mesh`: a moment shaped like its parameter gets the
    parameter's sharding, anything else is replicated. `only_new` leaves arrays already on `mesh`."""
    from ..optimise.implicit import ImplicitState
    from ..optimise.leaf import Leaf
    from ..zygote import Tangent

    rep = NamedSharding(mesh, P())
    placed: dict[tuple, Any] = {}  # an array leaves share (fluxjax/_sharing.py) is placed once, and stays shared

    def place_state(holder, field, param):
        target = param.sharding if _on(param, mesh) else rep

        def put(a):
            if not isinstance(a, (jax.Array, np.ndarray)) or (only_new and _on(a, mesh)):
                return a
            where = target if a.shape == param.shape else rep
            key = (id(a), where)
            if key not in placed:
                placed[key] = (a, _place(a, where))
            return placed[key][1]

        state = holder[field] if isinstance(holder, list) else getattr(holder, field)
        new = jax.tree_util.tree_map(put, state)
        commit(_slot(holder, field), new)

    def go(st, m):
        if st is None or m is None:
            return
        if isinstance(st, Leaf):
            if isinstance(m, (jax.Array, np.ndarray)):
                place_state(st, "state", m)
            return
        if isinstance(st, Tangent):
            for k, sub in st.fields.items():
                if sub is not None and k in getattr(m, "__dict__", {}):
                    go(sub, m.__dict__[k])
            return
        if isinstance(st, (list, tuple)):
            for s, mm in zip(st, m):
                go(s, mm)
            return
        if isinstance(st, dict):
            for k, s in st.items():
                if k in m:
                    go(s, m[k])

    if isinstance(opt_state, ImplicitState):  # model is then a Params
        if len(opt_state.states) == len(model._entries):  # one state per array
            for i, e in enumerate(model._entries):
                place_state(opt_state.states, i, e.value())
            return
        # else one whole-tree optax state for all of them: replicated below
    else:
        go(opt_state, model)
    # anything not reached through the model (e.g. state of arrays the model no longer has)
    for _, slot, x in _arrays(opt_state):
        if not _on(x, mesh):
            commit(slot, _place(x, rep))


def _slot(holder, field):
    from ..core.walk import Slot

    return Slot(holder, field, not isinstance(holder, list))
