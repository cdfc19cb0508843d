"""The eager Flux loop, `withgradient` then `update_`, as one compiled program per step.

Model-zoo code trains in an eager loop (or in Flux 0.13's implicit form, `gs = gradient(() ->
loss, ps)` then `update_(rule, ps, gs)`, which is fused the same way):

```python
for x, y in data:
    val, grads = withgradient(lambda m: loss(m(x), y), model)
    update_(opt_state, model, grads[0])
```

Each call compiles on its own (`zygote.api`, `compiled.pure`), so a step is two programs and two
trips through Python. Once `update_(opt_state, model, g)` has received the gradient that the eager
`gradient`/`withgradient` of `model` had just returned (or as soon as `setup(rule, model)` has made
the state), the two are *linked*: from then on,
`withgradient(f, model)` runs one program that also computes the optimiser step (the same `update_`,
run in a region of its own whose writes are undone, see `_held_back`) and holds its new arrays back,
*pending*. Nothing of the update is written then.
The next `update_(opt_state, model, g)` commits them if, and only if, it is the pending step exactly:

- `g` is the very gradient object that call returned, with the same arrays in it (a `Grads`: the
  same gradients, and its `Params` the same parameters);
- `model` and `opt_state` are the ones linked, their structure is unchanged (the structure version,
  and every list and dict in them holding the same items),
  and every array the update replaces is still the one the program read;

otherwise `update_` runs as it always does, and the pending arrays are dropped. A clipped or scaled
gradient, an `adjust_`, a `loadmodel_` or a gradient taken without `update_` in between all take
that path, so the numbers are always those of the two calls made one after the other (one XLA
program computes them, so they agree to rounding, as every compiled call does). A link that misses
`MISSES` times in a row is not fused again, nor is a model whose fused step cannot be compiled.

Only calls with one model (or one `Params`) argument are fused; `jit=False`, `fluxjax.eager()` and
calls inside a trace never are, nor is a step whose rule draws from the global key (a noisy custom
rule: held back, its draw would not advance the key) or sets a field of its own. Python side
effects of `f` happen while tracing, as for the compiled `withgradient` itself.
"""

from __future__ import annotations

import operator
import threading
import weakref
from collections.abc import Callable
from typing import Any

import jax

from ..compiled.access import Source, holding, loader, storer
from ..compiled.call import jit as _fluxjax_jit
from ..compiled.call import last_set_reads
from ..compiled.plan import Containers
from ..compiled.pure import tracing_eager_call
from ..core.layer import LAYER_TYPES, structure_version
from ..core.region import current_region, run_in_region
from ..core.walk import walk
from ..random import default_rng
from ..zygote import api
from ..zygote.implicit import Grads, Params
from ..zygote.tangent import Tangent, make_tangent
from . import tree
from .implicit import _implicit_holder, implicit_update_
from .tree import update_

MISSES = 2  # fused steps in a row that no `update_` committed before a link is dropped
MAX_LINKS = 8  # models linked at once (least recently linked dropped)
NOT_FUSED = object()

stats: dict[str, int] = {"fused": 0, "committed": 0, "missed": 0}


def compilations() -> int:
    """How many fused programs (cache entries) have been made so far; `zygote.api.compilations()`
    counts the unfused ones."""
    return sum(p.compilations for p in _PROGRAMS.values())


def _grad_of(name: str, out: Any) -> Any:
    """The gradient `update_` is handed from what the entry point `name` returned: `grads[0]` of an
    explicit call, the `Grads` of an implicit one."""
    if name.endswith("withgradient"):
        out = out.grad
    return out if name.startswith("implicit") else out[0]


def _held_back(roots: list, step: Callable[[], Any]) -> dict:
    """Inside the fused program: run `step` (an `update_`) in a region of its own, whose writes are
    undone when it ends, and return what it wrote: `{(leaf indices of walk(roots)...): new array}`,
    one entry per new array, so that places tied to one array get one array again."""
    before = walk(roots)

    def collect(region):
        if any(s.owner is default_rng for s in region.written.values()):
            raise _NotFusable  # the step draws from the global key (a noisy rule): held back, it would not advance
        after = walk(roots)
        if after.signature != before.signature:
            raise _NotFusable  # the step changes the structure (a state made anew): not fused
        owners = set(after.layers) | {id(s.owner) for s in after.slots}
        if any(id(s.owner) not in owners for s in region.written.values()):
            raise _NotFusable  # it writes where the walk does not reach (`Params([W, b])` of a closure's model)
        new: dict[int, tuple[Any, list]] = {}
        for i, (a, b) in enumerate(zip(before.leaves, after.leaves)):
            if b is not a:
                new.setdefault(id(b), (b, []))[1].append(i)
        return {tuple(where): v for v, where in new.values()}

    return run_in_region(step, collect=collect, fields_set=_sets_fields)[1]


def _sets_fields(fields: list[str]) -> None:
    raise _NotFusable  # the step sets a field (a rule's): held back, that would not happen


def _fused(name: str) -> Callable:
    """The fused program of the entry point `name`: `(its result, the update held back)`."""
    call = api.withgradient if name.endswith("withgradient") else api.gradient

    if name.startswith("implicit"):
        def fused(f: Callable, ps: Any, holder: Any) -> tuple:
            out = call(f, ps)  # inside the program's region: op by op
            gs = _grad_of(name, out)
            held = _held_back([*ps._sources, holder], lambda: implicit_update_(holder, ps, gs))
            grads = list(gs._grads)  # a `Grads` is not a pytree: the program returns the list
            return ((out.val, grads) if name.endswith("withgradient") else grads), held
    else:
        def fused(f: Callable, model: Any, opt_state: Any) -> tuple:
            out = call(f, model)
            g = _grad_of(name, out)
            return out, _held_back([model, opt_state], lambda: update_(opt_state, model, g))

    return _fluxjax_jit(fused, read_arrays=True)


class _NotFusable(Exception):
    """The optimiser step changes the structure of the state: it is not fused."""


_PROGRAMS = {name: _fused(name) for name in ("gradient", "withgradient", "implicit_gradient", "implicit_withgradient")}


class _Link:
    """A model and the optimiser state that `update_` steps it with, and their walk (kept while the
    structure version is unchanged), with generated code reading and writing the slots a step writes."""

    __slots__ = ("model", "opt_state", "version", "walk", "containers", "synced", "access", "last_access", "misses",
                 "dead", "pending", "params_reader", "__weakref__")

    def __init__(self, model: Any, opt_state: Any):
        key, me = id(model), weakref.ref(self)

        def gone(_: Any) -> None:  # the model or its state is dropped: so is the link, with its walk
            if _links.get(key) is me():  # (no lock: this may run inside a collection, on any thread)
                _links.pop(key, None)

        self.model, self.opt_state = _ref(model, gone), _ref(opt_state, gone)
        self.pending: _Pending | None = None  # the last fused step, until `update_` takes it or not
        self.version: tuple = ()  # the structure version and the roots' ids the walk is of
        self.walk = None
        self.containers: Containers | None = None  # the walk's lists and dicts: an item replaced voids it
        self.synced: Any = None  # a fused program's `Plan` whose check covers `containers` (see current_walk)
        self.access: dict[tuple, tuple] = {}  # slots a step writes -> (their loader, their storer)
        self.last_access: tuple = (None, None)  # (the last slots asked for, their accessors), by identity
        self.misses, self.dead = 0, False
        self.params_reader: tuple = ((), None)  # (a `Params`' key, a reader of its arrays: `list(ps)`)

    def current_walk(self, roots: list, plan: Any) -> None:
        """Right after a fused call: walk `roots` again if their structure changed since the last walk
        (the structure version, the roots, an item of a list or dict in them). `plan` is the program's
        `Plan` the call ran with (None: it walked). A plan is only run after its check has found every
        list and dict it snapshotted holding what they held (and a call that changes one of them in
        its trace is never run through a plan again), so once a plan's containers are known to
        include the walk's, with both snapshots taken of the same state, that plan being run again
        says that they still hold, and `containers.holds()` is not called again."""
        v = (structure_version(), *map(id, roots))
        if v == self.version and plan is not None and plan is self.synced:
            return
        if v != self.version or not self.containers.holds():
            self.walk = walk(roots)
            self.containers = Containers(self.walk.containers)
            self.access, self.last_access = {}, (None, None)
            self.version = v
        self.synced = None
        if plan is not None and plan.version == v[0] and {id(c) for c in self.walk.containers} <= plan.container_ids():
            self.synced = plan

    def params_arrays(self, ps: Params) -> list:
        """`list(ps)`, by code generated for where its parameters live, made again when its key changes
        (`_can_compile` has seen that every parameter has a place)."""
        key = ps.__fluxjax_key__()
        if self.params_reader[0] is not key:
            self.params_reader = (key, loader([e.slots[0] for e in ps._entries]))
        return self.params_reader[1]()

    def accessors(self, targets: tuple) -> tuple:
        """(a loader of the arrays the step reads, a check that their slots hold what it loaded, a storer
        of one value per group of `targets`, the ids of the walk's containers holding tuples that the
        storer rebuilds). The step reads the slots `targets` and, of the others, those in lists and
        dicts (a rule's hyperparameters): an item of a list or dict can be replaced by another array
        without the structure version changing, and the containers' check takes any array for an array."""
        if targets is self.last_access[0]:  # (a builder returns the same tuple for the same result structure)
            return self.last_access[1]
        got = self.access.get(targets)
        if got is None:  # (an IndexError, if the program's walk were not this one, voids the link)
            slots = [self.walk.slots[i] for where in targets for i in where]
            ids = {id(c) for c in self.walk.containers}
            written = {i for where in targets for i in where}
            read = slots + [s for i, s in enumerate(self.walk.slots)
                            if i not in written and s.attr is False and id(s.owner) in ids]
            rebuilt = frozenset(id(s.owner) for s in slots if s.attr is False and s.path and id(s.owner) in ids)
            got = self.access[targets] = (loader(read), holding(read), storer(self.walk.slots, targets), rebuilt)
        self.last_access = (targets, got)
        return got


class _Pending:
    """A fused step's update, held until `update_` commits it: the arrays it read and those it writes.
    Each linked model holds its own, so two models stepped in turn (a GAN) both fuse."""

    __slots__ = ("grad", "grad_leaves", "same_grad", "params_key", "version", "holds", "store", "rebuilt", "plan",
                 "inputs", "news")

    def __init__(self, link: _Link, model: Any, grad: Any, version: int, targets: tuple, news: list, plan: Any,
                 grad_leaves: list, same_grad: Callable[[Any, list], bool]):
        """`news` is what the program held back, for the slots `targets`; the arrays those hold now are
        those the update read (a write of the gradient's own call to one of them, committed with the
        call, was seen by the update inside the program too). `plan` is the program's `Plan` for this
        call, if any. `grad_leaves` are the arrays in `grad`, and `same_grad(g, grad_leaves)` tells
        whether `g` still holds them, in a gradient of the same structure."""
        self.grad, self.version, self.plan, self.news = grad, version, plan, news
        self.grad_leaves, self.same_grad = grad_leaves, same_grad
        # a `Params`' key is kept, the same object, until a parameter or a place is added or removed
        self.params_key = model.__fluxjax_key__() if isinstance(model, Params) else None
        load, self.holds, self.store, self.rebuilt = link.accessors(targets)
        self.inputs = load()

    def commit(self, link: _Link) -> None:
        """Write the step. An optimiser state in a list (the implicit form's) is a new tuple now: the
        link's and the program's snapshots of that list take it, as the program's own writes do."""
        self.store(self.news)
        if self.rebuilt:
            link.containers.rebuilt(self.rebuilt)
            if self.plan is not None:
                self.plan.rebuilt(self.rebuilt)

    def is_step(self, link: _Link, opt_state: Any, model: Any, grads: Any) -> bool:
        """Whether `update_(opt_state, model, grads)` is this step exactly (see the module docstring)."""
        return (grads is self.grad and link.model() is model and link.opt_state() is opt_state
                and structure_version() == self.version
                and self.same_grad(grads, self.grad_leaves)  # not edited in place (an item replaced or added)
                and (self.params_key is None or model.__fluxjax_key__() is self.params_key)
                and link.containers.holds() and self.holds(self.inputs))  # the slots reach the same places


def _same_grads(g: Grads, leaves: list) -> bool:
    """Whether the `Grads` `g` holds the gradients `leaves` (`gs[W] = ...`, `copy_`, `merge_` replace them)."""
    return _same_leaves(g.values(), leaves)


def _gradient_check(template: Any) -> tuple[Callable[[Any, list], bool], list[int]]:
    """For the gradient in a fused result, given as `template` (the gradient with each array replaced by
    its position among the result's leaves): a function `same(g, leaves)` telling whether `g` is a
    gradient of this structure (`Tangent`s, tuples, lists, dicts and `None` around arrays) holding the
    very arrays `leaves`, in straight-line code, and the positions of those arrays, in that order.
    Another kind of node is read by `tree_flatten`, under the same check of its tree structure."""
    src = Source(_Tangent=Tangent, _flatten=jax.tree_util.tree_flatten)
    lines: list[str] = []
    leaves: list[str] = []
    at: list[int] = []

    def visit(e: str, v: Any) -> None:
        t = type(v)
        if t is int:  # an array: the result's leaf `v`
            leaves.append(e)
            at.append(v)
        elif v is None:
            lines.append(f"    if {e} is not None:\n        return False")
        elif t is Tangent or t is list or t is dict or t is tuple or (isinstance(v, tuple) and hasattr(t, "_fields")):
            n = f"n{len(lines)}"
            lines.append(f"    {n} = {e}")
            if t is Tangent:
                lines.append(f"    if not (type({n}) is _Tangent and {n}.primal_type is {src.name(v.primal_type)} "
                             f"and tuple({n}.fields) == {src.name(tuple(v.fields))}):\n        return False")
                items = [(f"{n}.fields[{src.literal(k)}]", x) for k, x in v.fields.items()]
            elif t is dict:
                lines.append(f"    if not (type({n}) is dict and tuple({n}) == {src.name(tuple(v))}):\n        return False")
                items = [(f"{n}[{src.literal(k)}]", x) for k, x in v.items()]
            else:
                lines.append(f"    if not (type({n}) is {src.name(t)} and len({n}) == {len(v)}):\n        return False")
                items = [(f"{n}[{i}]", x) for i, x in enumerate(v)]
            for ex, x in items:
                visit(ex, x)
        else:  # another pytree node: through `tree_flatten`
            n = f"n{len(lines)}"
            lines.append(f"    {n}, d = _flatten({e})\n    if d != {src.name(jax.tree_util.tree_structure(v))}:\n"
                         f"        return False")
            for j, x in enumerate(jax.tree_util.tree_leaves(v)):
                leaves.append(f"{n}[{j}]")
                at.append(x)

    visit("g", template)
    same = " and ".join(f"{e} is S[{i}]" for i, e in enumerate(leaves)) or "True"
    return src.compile("def same(g, S):\n" + "\n".join([*lines, f"    return {same}"]) + "\n", "same"), at


_built: dict[str, tuple] = {}  # entry point -> (its program's last result structure, `_builder` of it)


def _builder(shape: Any, name: str) -> tuple[Callable[[list], tuple], Callable[[Any, list], bool] | None]:
    """For the result structure `shape` of the fused program of the entry point `name` (`(result, {slot
    indices: new array})`): a function of its leaves returning `(result, the slot indices, [new arrays],
    [the arrays of the gradient update_ is handed])`, and the gradient's `same` check (`_gradient_check`;
    None for the implicit form, whose `Grads` is made afterwards). The result is built by straight-line
    code where it holds tuples, lists, dicts, `Tangent`s and `None` (`unflatten` calls back into Python
    for every `Tangent`); by `shape.unflatten` where it holds anything else."""
    n = shape.num_leaves
    result, held = shape.unflatten(list(range(n)))  # each leaf replaced by its position
    same, at = (None, None) if name.startswith("implicit") else _gradient_check(_grad_of(name, result))
    src = Source(_tangent=make_tangent)

    def expr(v: Any) -> str | None:
        t = type(v)
        if t is int:
            return f"L[{v}]"
        if v is None:
            return "None"
        if t is Tangent:
            parts = [(k, expr(e)) for k, e in v.fields.items()]
            if any(e is None for _, e in parts):
                return None
            inner = ", ".join(f"{src.literal(k)}: {e}" for k, e in parts)
            return f"_tangent({src.name(v.primal_type)}, {{{inner}}})"
        if t is tuple or t is list or (isinstance(v, tuple) and hasattr(t, "_fields")):
            parts = [expr(e) for e in v]
            if None in parts:
                return None
            if t is list:
                return f"[{', '.join(parts)}]"
            inner = "".join(f"{e}, " for e in parts)
            return f"({inner})" if t is tuple else f"{src.name(t)}({inner})"
        if t is dict:
            parts = [(k, expr(e)) for k, e in v.items()]
            if any(e is None for _, e in parts):
                return None
            return "{" + ", ".join(f"{src.name(k)}: {e}" for k, e in parts) + "}"
        return None  # another kind of node (`keep_order`'s dicts in an auxiliary output, a user's pytree)

    targets = tuple(held)
    news = "[" + ", ".join(f"L[{held[k]}]" for k in targets) + "]"
    grads = "None" if at is None else "[" + ", ".join(f"L[{i}]" for i in at) + "]"
    body = expr(result)
    src.env["_targets"] = targets
    if body is None:
        src.env["_unflatten"] = shape.unflatten
        body = "_unflatten(L)[0]"
    return src.compile(f"def build(L):\n    return {body}, _targets, {news}, {grads}\n", "build"), same


def _ref(obj: Any, gone: Callable[[Any], None] | None = None) -> Callable[[], Any]:
    try:
        return weakref.ref(obj, gone)
    except TypeError:  # not weakly referenceable: held (MAX_LINKS bounds how many)
        return lambda: obj


_lock = threading.Lock()
_links: dict[int, _Link] = {}  # id(model or Params) -> its link
_tls = threading.local()  # .last: {id(model): (gradient, model) (references)} of this thread's last unfused calls


def _last() -> dict:
    last = getattr(_tls, "last", None)
    if last is None:
        last = _tls.last = {}
    return last


def gradient_call(name: str, f: Callable, arg: Any, run: Callable[[], Any]) -> Any:
    """`zygote.api`'s hook around an eager compiled gradient entry point `name` of one model or
    `Params` `arg` (`run()` makes the call as usual): the fused program when `arg` is linked, else
    `run()`, remembering its gradient for `update_` to link."""
    link = _links.get(id(arg))
    if link is not None:
        m, opt_state = link.model(), link.opt_state()
        if m is None or opt_state is None:  # the linked objects are gone
            _drop(arg)
        elif m is arg and not link.dead:
            out = _run_fused(name, f, arg, opt_state, link)
            if out is not NOT_FUSED:
                return out
    out = run()
    last = _last()
    last[id(arg)] = (_ref(_grad_of(name, out)), _ref(arg))  # weakly: a dropped model is not kept
    while len(last) > MAX_LINKS:
        del last[next(iter(last))]
    return out


def _run_fused(name: str, f: Callable, model: Any, opt_state: Any, link: _Link) -> Any:
    if link.misses >= MISSES:
        link.dead = True  # for good: a loop that does not hand `update_` the gradient never will
        return NOT_FUSED
    implicit = name.startswith("implicit")
    held = _implicit_holder(opt_state, model) if implicit else opt_state
    roots = [*model._sources, held] if implicit else [model, held]
    program = _PROGRAMS[name]
    try:
        keys = link.params_arrays(model) if implicit else None
        with tracing_eager_call():  # a check on values (ClipNorm's non-finite norm) sends the call op by op
            leaves, shape = program.call_flat(f, model, held)
    except Exception:  # anything the fused trace cannot do; the usual call then runs (and raises the user's errors)
        link.dead = True
        return NOT_FUSED
    if last_set_reads():  # `f` advances what it reads: this call is right, the next ones go op by op
        api.run_op_by_op(f)
    built = _built.get(name)
    if built is None or built[0] is not shape:
        built = _built[name] = (shape, *_builder(shape, name))
    out, targets, news, grad_leaves = built[1](leaves)
    if implicit:
        out = api.implicit_result(name, model, keys, out)
    grad, same_grad = _grad_of(name, out), built[2]
    if same_grad is None:  # a `Grads`
        grad_leaves, same_grad = grad.values(), _same_grads
    plan = program.last_plan
    link.current_walk(roots, plan)  # the update held back is of the structure as it is after the call
    try:
        link.pending = _Pending(link, model, grad, link.version[0], targets, news, plan, grad_leaves, same_grad)
    except IndexError:  # the program's walk is not this one: never expected, but never committed
        link.pending, link.dead = None, True
        return out
    link.misses += 1  # until an `update_` commits it
    stats["fused"] += 1
    return out


def commit_update(opt_state: Any, model: Any, grads: Any) -> bool:
    """`update_`'s first question: whether this is the pending fused step of `model` (see the module
    docstring); if so its arrays are written and True is returned. Otherwise links `model` to
    `opt_state` when `grads` is what the last eager gradient of `model` returned."""
    if current_region() is not None:
        return False
    link = _links.get(id(model))
    p = None if link is None else link.pending
    if p is not None:
        link.pending = None  # `model` is stepped now, with this gradient or another: either way it is taken
        if p.is_step(link, opt_state, model, grads):
            p.commit(link)
            link.misses = 0
            stats["committed"] += 1
            return True
        stats["missed"] += 1
        return False
    last = _last().pop(id(model), None)
    if last is not None and last[0]() is grads and last[1]() is model:
        with _lock:
            if id(model) not in _links:
                _links[id(model)] = _Link(model, opt_state)
                while len(_links) > MAX_LINKS:
                    _links.pop(next(iter(_links)), None)
    return False


def link(model: Any, opt_state: Any) -> None:
    """`setup`'s hook: the state just made for `model` is the one its eager loop will step it with, so
    the loop's first gradient already runs fused (one compilation where linking at the first
    `update_` makes two). If the loop steps it otherwise, the fused steps are not committed and the
    link is given up after `MISSES` of them."""
    if type(model) in LAYER_TYPES and current_region() is None:
        with _lock:
            _links.pop(id(model), None)
            _links[id(model)] = _Link(model, opt_state)
            while len(_links) > MAX_LINKS:
                _links.pop(next(iter(_links)), None)


def _same_leaves(a: list, b: list) -> bool:
    return len(a) == len(b) and all(map(operator.is_, a, b))


def _drop(model: Any) -> None:
    with _lock:
        _links.pop(id(model), None)


def clear() -> None:
    """Forget every link and pending step."""
    with _lock:
        _links.clear()
    _tls.last = {}


api.use_step_fusion(gradient_call)
tree.use_step_fusion(commit_update, link)
