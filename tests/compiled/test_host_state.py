"""Python state a loss reads and advances itself, inside a compiled call: an iterator it takes the next
batch from (`next(it)`), a counter it increments (`global STEP; STEP += 1`, a `nonlocal`, `cfg.n += 1`).
Traced once, each became a constant of the program: every later call gave the first call's loss and
gradient, and the state did not advance. Now the eager gradient and the fused eager loop run such code
op by op (an iterator: from its first call; a counter: from its second, the first call's program having
run the code once, as the eager call does), an explicit `fluxjax.jit` compiles each such call anew, with
a warning, and `train_` takes one item per step. Every result is compared with `jit=False` / NumPy."""

from __future__ import annotations

import types
import warnings

import jax.numpy as jnp
import numpy as np
import pytest

import fluxjax as Flux
from fluxjax.compiled import call, hostrandom
from fluxjax.zygote import api

W0 = np.array([[1.0, -2.0], [0.5, 1.0]], np.float32)
BATCHES = [np.array(b, np.float32) for b in ([1, 0], [0, 1], [1, 1], [2, -1], [0.5, 3])]


@pytest.fixture(autouse=True)
def _fresh(monkeypatch):
    monkeypatch.setattr(api, "_EAGER_ONLY", {})  # a code that went op by op stays so: each case decides anew
    monkeypatch.setattr(call, "_warned_sets", set())  # (warned once per code)
    monkeypatch.setattr(hostrandom, "_warned", set())


def _model():
    return Flux.Dense(jnp.asarray(W0), False)


def _grad_of(b, scale=1.0):
    """d/dW of scale * sum((W b)^2) = 2 scale (W b) b'."""
    return 2 * scale * np.outer(W0 @ b, b)


def _sources():
    """name -> a fresh zero-argument function giving the next batch, as a loss would reach it."""
    def listed():
        it = iter(BATCHES)
        return lambda: next(it)

    def generated():
        def gen():
            yield from BATCHES
        g = gen()
        return lambda: next(g)

    def mapped():
        it = map(jnp.asarray, BATCHES)
        return lambda: next(it)

    return {"iter(list)": listed, "generator": generated, "map": mapped}


@pytest.mark.parametrize("source", list(_sources()))
@pytest.mark.parametrize("call", ["gradient", "withgradient"])
def test_the_eager_gradient_takes_the_next_item_at_each_call(source, call):
    m, take = _model(), _sources()[source]()

    def loss(mm):
        return jnp.sum(mm(take()) ** 2)

    for b in BATCHES[:4]:
        out = getattr(Flux, call)(loss, m)
        g = out[0] if call == "gradient" else out.grad[0]
        np.testing.assert_allclose(g.weight, _grad_of(b), rtol=1e-6)
        if call == "withgradient":
            np.testing.assert_allclose(out.val, np.sum((W0 @ b) ** 2), rtol=1e-6)
    np.testing.assert_array_equal(take(), BATCHES[4])  # advanced once per call, not more


@pytest.mark.parametrize("implicit", [False, True])
def test_the_fused_eager_loop_takes_the_next_item_at_each_step(implicit):
    m, take = _model(), _sources()["iter(list)"]()
    ref = _model()
    ps = Flux.params(m)
    s = Flux.Descent(0.1) if implicit else Flux.setup(Flux.Descent(0.1), m)
    for b in BATCHES[:4]:
        if implicit:
            gs = Flux.gradient(lambda: jnp.sum(m(take()) ** 2), ps)
            Flux.update_(s, ps, gs)
        else:
            _, g = Flux.withgradient(lambda mm: jnp.sum(mm(take()) ** 2), m)
            Flux.update_(s, m, g[0])
        w = np.asarray(ref.weight)
        ref.weight = jnp.asarray(w - 0.1 * 2 * np.outer(w @ b, b))
    np.testing.assert_allclose(m.weight, ref.weight, rtol=1e-5)


def test_an_explicit_jit_compiles_each_call_that_reads_an_iterator_anew():
    m, take = _model(), _sources()["generator"]()

    @Flux.jit
    def f(mm):
        return jnp.sum(mm(take()) ** 2)

    with pytest.warns(UserWarning, match="reads an iterator or a generator"):
        got = [float(f(m)) for _ in range(4)]
    np.testing.assert_allclose(got, [np.sum((W0 @ b) ** 2) for b in BATCHES[:4]], rtol=1e-6)
    assert f.compilations == 4


@pytest.mark.parametrize("jit", [True, False])
def test_train_takes_one_item_per_step(jit):
    m, take = _model(), _sources()["iter(list)"]()
    s = Flux.setup(Flux.Descent(0.05), m)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (the compiled steps warn that they compile anew)
        h = Flux.train_(lambda mm, k: jnp.sum(mm(take()) ** 2), m, list(range(5)), s, jit=jit)
    w = W0.astype(np.float64)
    for b, lval in zip(BATCHES, h.losses, strict=True):
        np.testing.assert_allclose(lval, np.sum((w @ b) ** 2), rtol=1e-5)
        w = w - 0.05 * 2 * np.outer(w @ b, b)
    np.testing.assert_allclose(m.weight, w, rtol=1e-5)


def _counters():
    """name -> (a loss that advances a counter it reads and scales by it, reset())."""
    ns = types.SimpleNamespace(n=0)
    box = {"d": 0}

    def by_attribute(mm):
        ns.n += 1
        return jnp.sum(mm(jnp.asarray(BATCHES[0])) ** 2) * ns.n

    def by_item(mm):
        box["d"] += 1
        return jnp.sum(mm(jnp.asarray(BATCHES[0])) ** 2) * box["d"]

    def make_nonlocal():
        n = 0

        def by_cell(mm):
            nonlocal n
            n += 1
            return jnp.sum(mm(jnp.asarray(BATCHES[0])) ** 2) * n
        return by_cell

    return {"global": (_by_global, lambda: globals().update(STEP=0)),
            "nonlocal": (make_nonlocal(), lambda: None),
            "attribute": (by_attribute, lambda: setattr(ns, "n", 0)),
            "dict item": (by_item, lambda: box.update(d=0))}


STEP = 0


def _by_global(mm):
    global STEP
    STEP += 1
    return jnp.sum(mm(jnp.asarray(BATCHES[0])) ** 2) * STEP


@pytest.mark.parametrize("counter", list(_counters()))
def test_the_eager_gradient_sees_a_counter_the_loss_advances(counter):
    """Zygote runs the loss at each call: a KL weight `min(1, step / 1000)` grows. Compiled, a global,
    a closure variable or an attribute the trace itself set was taken as the next call's value (as
    under `jax.jit`), so the counter stayed at 1: gradients 2, 2, 2 where Zygote's are 2, 4, 6."""
    loss, reset = _counters()[counter]
    reset()
    m = _model()
    got = [np.asarray(Flux.gradient(loss, m)[0].weight) for _ in range(4)]
    for k, g in enumerate(got, start=1):
        np.testing.assert_allclose(g, _grad_of(BATCHES[0], k), rtol=1e-6)


def test_the_fused_loop_advances_a_counter_once_per_step():
    global STEP
    STEP = 0
    m, ref = _model(), _model()
    s = Flux.setup(Flux.Descent(0.01), m)
    for _ in range(4):
        _, g = Flux.withgradient(_by_global, m)
        Flux.update_(s, m, g[0])
    assert STEP == 4
    w = W0.astype(np.float64)
    for k in range(1, 5):
        w = w - 0.01 * 2 * k * np.outer(w @ BATCHES[0], BATCHES[0])
    np.testing.assert_allclose(m.weight, w, rtol=1e-5)
    del ref


def test_an_explicit_jit_that_advances_what_it_reads_runs_it_each_call_and_says_so():
    global STEP
    STEP = 0
    m = _model()
    f = Flux.jit(lambda mm: _by_global(mm))
    with pytest.warns(UserWarning, match=r"set global STEP while being traced, and reads it") as w:
        got = [float(f(m)) for _ in range(3)]
    assert w[0].filename == __file__  # the user's call
    np.testing.assert_allclose(got, [k * np.sum((W0 @ BATCHES[0]) ** 2) for k in (1, 2, 3)], rtol=1e-6)
    assert STEP == 3


def test_a_value_set_once_compiles_once_more_and_then_is_reused():
    """A memo (`if CACHE is None: CACHE = ...`) changes at the first trace only: that call's program is
    used once, the next one is kept."""
    cache = {}

    @Flux.jit
    def f(mm):
        if "k" not in cache:
            cache["k"] = 3.0
        return jnp.sum(mm(jnp.asarray(BATCHES[0])) ** 2) * cache["k"]

    m = _model()
    with pytest.warns(UserWarning, match="set the contents of a dict while being traced"):
        got = [float(f(m)) for _ in range(4)]
    np.testing.assert_allclose(got, [3 * np.sum((W0 @ BATCHES[0]) ** 2)] * 4, rtol=1e-6)
    assert f.compilations == 2


@pytest.mark.parametrize("how", ["list.pop", "dict.pop"])
def test_a_loss_that_takes_items_out_of_a_container_it_reads(how):
    """`q.pop(0)` in the loss: the compiled eager gradient crashed in fluxjax's own restore (IndexError),
    having popped an item each time. Now it runs op by op, popping once per call as Zygote does; an
    explicit `fluxjax.jit` pops once per call too (compiled anew each time, with a warning)."""
    m = _model()
    q = list(map(jnp.asarray, BATCHES[:3])) if how == "list.pop" else {k: jnp.asarray(b) for k, b in enumerate(BATCHES[:3])}
    take = (lambda: q.pop(0)) if how == "list.pop" else (lambda: q.pop(min(q)))
    for k, b in enumerate(BATCHES[:2]):
        g = Flux.gradient(lambda mm: jnp.sum(mm(take()) ** 2), m)[0].weight
        np.testing.assert_allclose(g, _grad_of(b), rtol=1e-6)
        assert len(q) == 2 - k
    f = Flux.jit(lambda mm: jnp.sum(mm(take()) ** 2))
    with pytest.warns(UserWarning, match="set the contents of a (list|dict) while being traced"):
        np.testing.assert_allclose(f(m), np.sum((W0 @ BATCHES[2]) ** 2), rtol=1e-6)
    assert len(q) == 0


def _noisy_loss(mm, x):
    """A VAE-style loss ported line by line: noise from NumPy's global generator (Julia's `randn`)."""
    eps = jnp.asarray(np.random.randn(2), jnp.float32)
    return jnp.sum((mm(x) - eps) ** 2)


@pytest.mark.parametrize("data", ["list", "generator", "ragged list"])
def test_train_with_a_loss_that_draws_from_numpy_runs_op_by_op_with_fresh_noise(data):
    """Compiled, the draw was a constant of the program: the same noise at every step (with a warning).
    Now the step that draws and the ones after it run op by op: the losses and weights are those of
    `jit=False`, and no warning is given."""
    xs = [jnp.asarray(b) for b in BATCHES] * 8  # 40 steps: a fused chunk's worth and more
    if data == "ragged list":
        xs = xs[:33] + [jnp.ones((2,), jnp.float32)[:, None]] + xs[33:]  # a batch of another shape

    def run(jit):
        np.random.seed(7)
        m = _model()
        s = Flux.setup(Flux.Adam(0.01), m)
        d = (x for x in xs) if data == "generator" else list(xs)
        h = Flux.train_(_noisy_loss, m, d, s, jit=jit)
        return h.losses, np.asarray(m.weight), np.random.randn()

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = run(True)
    want = run(False)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5)
    np.testing.assert_allclose(got[1], want[1], rtol=1e-5)
    assert got[2] == want[2]  # NumPy's generator advanced exactly as op by op
    assert len(set(np.round(got[0][:5], 4))) == 5


def _by_global_x(mm, x):
    global STEP
    STEP += 1
    return jnp.sum(mm(x) ** 2) * STEP


class _Slotted:
    __slots__ = ("n",)

    def __init__(self):
        self.n = 0


def _side_effects():
    """name -> (a loss `(m, x)` that changes Python state it reads and scales by it, reset(), read())."""
    ns = types.SimpleNamespace(n=0, seen=[])
    box = {"d": 0}
    slotted = _Slotted()
    tags: set = set()

    def attribute(mm, x):
        ns.n += 1
        return jnp.sum(mm(x) ** 2) * ns.n

    def item(mm, x):
        box["d"] += 1
        return jnp.sum(mm(x) ** 2) * box["d"]

    def nested_list(mm, x):
        ns.seen.append(len(ns.seen))
        return jnp.sum(mm(x) ** 2) * len(ns.seen)

    def slot(mm, x):
        slotted.n += 2
        return jnp.sum(mm(x) ** 2) * slotted.n

    def set_add(mm, x):
        tags.add(len(tags))
        return jnp.sum(mm(x) ** 2) * len(tags)

    def reset():
        global STEP
        ns.n, ns.seen[:], box["d"], slotted.n, STEP = 0, [], 0, 0, 0
        tags.clear()

    def read():
        return ns.n, len(ns.seen), box["d"], slotted.n, len(tags), STEP

    return {f.__name__: f for f in (attribute, item, nested_list, slot, set_add)} | {"global": _by_global_x}, reset, read


@pytest.mark.parametrize("n", [5, 40])
@pytest.mark.parametrize("kind", ["global", "attribute", "item", "nested_list", "slot", "set_add"])
def test_train_with_a_loss_that_advances_what_it_reads(kind, n):
    """`global STEP; STEP += 1`, `cfg.n += 1`, `counts["k"] += 1`, `hist.append(...)` in the loss: op by op
    each step sees what the last one left. Compiled, the first step's trace sets it and the rest run op
    by op; 40 steps are a fused chunk's worth, whose trace fails (the loss changes what the step's walk
    read) and whose steps then go one by one. The failed trace's change stayed for objects: every later
    step saw the count one ahead of `jit=False` (losses 2, 3, 4 where they are 1, 2, 3). Now what a failed
    trace changed in what the code reads is put back; the numbers of `jit=False`, and no warning."""
    losses, reset, read = _side_effects()
    xs = [jnp.asarray(BATCHES[k % 5]) for k in range(n)]

    def run(jit):
        reset()
        m = _model()
        s = Flux.setup(Flux.Descent(0.001), m)
        h = Flux.train_(losses[kind], m, xs, s, jit=jit)
        return h.losses, np.asarray(m.weight), read()

    want = run(False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = run(True)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5)
    np.testing.assert_allclose(got[1], want[1], rtol=1e-5)
    assert got[2] == want[2]
    assert max(want[2]) == n * (2 if kind == "slot" else 1)


X_DATA = jnp.asarray(BATCHES[2])


@pytest.mark.parametrize("kind", ["global", "attribute", "item", "nested_list", "slot", "set_add", "np.random", "random"])
def test_a_gradient_whose_trace_fails_has_its_side_effects_once(kind):
    """The eager gradient compiles the loss; a loss that reads an array's value (`float(x.sum())` on
    data) cannot be traced and runs op by op. The failed trace's side effects stayed, so the first call
    counted twice and drew twice from NumPy's generator: its loss and gradient were not Zygote's. Now
    they are put back before the call runs op by op."""
    import random

    losses, reset, read = _side_effects()
    draws = {"np.random": lambda: float(np.random.randn()), "random": lambda: random.gauss(0.0, 1.0)}

    def loss(mm):
        if kind in draws:
            scale = 2.0 + draws[kind]()
            base = jnp.sum(mm(X_DATA) ** 2) * scale
        else:
            base = losses[kind](mm, X_DATA)
        return base if float(X_DATA.sum()) > 0 else -base  # the value of data: op by op only

    def run(eager):
        reset()
        np.random.seed(3)
        random.seed(3)
        m = _model()
        with Flux.eager() if eager else warnings.catch_warnings():
            got = [Flux.withgradient(loss, m) for _ in range(3)]
        return [float(v) for v, _ in got], [np.asarray(g[0].weight) for _, g in got], read(), np.random.randn(), random.random()

    want = run(True)
    got = run(False)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-6)
    np.testing.assert_allclose(got[1], want[1], rtol=1e-6)
    assert got[2:] == want[2:]
    if kind not in draws:
        assert max(want[2]) == 3 * (2 if kind == "slot" else 1)


@pytest.mark.parametrize("kind", ["global", "attribute", "item", "nested_list", "slot", "set_add"])
@pytest.mark.parametrize("how", ["jit", "withgradient", "gradient"])
def test_an_error_that_reaches_the_caller_leaves_the_side_effects_the_eager_call_leaves(kind, how):
    """A loss that advances what it reads and then raises its own error (not one after which the code
    runs again op by op): the error reaches the caller, and what the code changed before it stays
    changed, as in the eager call. Globals and closure variables were put back after any error while
    objects' contents were not: `global STEP` read 0 after the compiled call and 1 after the eager one."""
    losses, reset, read = _side_effects()

    def loss(mm, x):
        losses[kind](mm, x)
        raise ValueError("the loss's own error")

    def run(eager):
        reset()
        m = _model()
        f = {"jit": Flux.jit(loss), "withgradient": lambda *a: Flux.withgradient(loss, *a),
             "gradient": lambda *a: Flux.gradient(loss, *a)}[how]
        with Flux.eager() if eager else warnings.catch_warnings():
            for _ in range(2):
                with pytest.raises(ValueError, match="the loss's own error"):
                    f(m, X_DATA)
        return read()

    want = run(True)
    assert max(want) == 2 * (2 if kind == "slot" else 1)
    assert run(False) == want
