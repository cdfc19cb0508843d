"""Class 3: whatever a trace reads that is not a traced input is in the cache key (or the call retraces):
named-Chain order, in-place reordering, static fields kept alive, closure cells, globals, random draws,
Flux's automatic train/test mode."""

import array
import collections
import dataclasses
import functools
import gc
import types

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import fluxjax as Flux
from fluxjax.core.plain import PLAIN_DEPTH
from fluxjax.losses import mse

X = jnp.arange(1.0, 7.0).reshape(3, 2)
_apply = Flux.jit(lambda m, x: m(x))


def test_named_chain_order_is_part_of_the_key():
    a, b = Flux.Dense(3, 3), Flux.Dense(3, 3, Flux.relu)
    for m in (Flux.Chain(a=a, b=b), Flux.Chain(b=b, a=a), Flux.Chain(a=a, b=b)):
        np.testing.assert_allclose(_apply(m, X), m(X), rtol=1e-6)


def test_reordering_layers_is_seen():
    m = Flux.Chain(Flux.Dense(3, 3, Flux.relu), Flux.Dense(3, 3), Flux.Dense(3, 3, jnp.tanh))
    named = Flux.Chain(a=Flux.Dense(3, 3, Flux.relu), b=Flux.Dense(3, 3), c=Flux.Dense(3, 3, jnp.tanh))
    for perm in ([2, 0, 1], [1, 2, 0], [0, 2, 1]):
        _apply(m, X)
        m.layers = tuple(m.layers[i] for i in perm)
        np.testing.assert_allclose(_apply(m, X), m(X), rtol=1e-6)
        _apply(named, X)
        items = list(named.layers.items())
        named.layers.clear()  # the same dict, reordered in place
        named.layers.update(items[i] for i in perm)
        np.testing.assert_allclose(_apply(named, X), named(X), rtol=1e-6)


@dataclasses.dataclass  # unhashable (eq without frozen)
class Config:
    scale: float


@Flux.layer
class Scaled:
    def __init__(self, cfg):
        self.w = jnp.ones(3)
        self.cfg = cfg

    def __call__(self, x):
        return self.w[:, None] * x * self.cfg.scale


def test_unhashable_static_fields_are_keyed_by_contents_and_kept_alive():
    for s in (2.0, 3.0, 5.0):
        lay = Scaled(Config(s))  # a fresh config each time: a freed one's address may be reused
        np.testing.assert_allclose(_apply(lay, X), X * s, rtol=1e-6)
        del lay
        gc.collect()
    lay = Scaled(Config(1.0))
    _apply(lay, X)
    lay.cfg.scale = 4.0  # mutated in place
    np.testing.assert_allclose(_apply(lay, X), X * 4.0, rtol=1e-6)


def _scaled_loss(s):
    def loss(m, x):
        return jnp.sum(m(x)) * s
    return loss


def test_closure_cells_of_a_function_argument():
    f = Flux.jit(lambda fn, m, x: fn(m, x))
    m = Flux.Dense(3, 2)
    loss = _scaled_loss(1.0)
    for s in (1.0, 2.0, -3.0):
        loss.__closure__[0].cell_contents = s
        np.testing.assert_allclose(f(loss, m, X), jnp.sum(m(X)) * s, rtol=1e-5)


BETA = 1.0
OFFSET = jnp.zeros(())


def _beta_loss(m, x, y):
    return BETA * mse(m(x), y) + OFFSET


def test_globals_read_by_the_function_and_by_what_it_calls():
    global BETA, OFFSET
    f = Flux.jit(lambda m, x: _beta_loss(m, x, 0.0))
    m = Flux.Dense(3, 2)
    for b, o in ((1.0, 0.0), (2.0, 0.0), (2.0, 5.0)):
        BETA, OFFSET = b, jnp.asarray(o)
        np.testing.assert_allclose(f(m, X), b * mse(m(X), 0.0) + o, rtol=1e-5)
    BETA, OFFSET = 1.0, jnp.zeros(())


def test_train_with_a_global_changed_between_epochs_matches_jit_false():
    global BETA
    Flux.seed_(0)
    m = Flux.Dense(3, 2)
    ref = Flux.fmap(lambda v: v, m)
    o, oref = Flux.setup(Flux.Descent(0.1), m), Flux.setup(Flux.Descent(0.1), ref)
    data = [(X, jnp.ones((2, 2)))] * 3
    for beta in (1.0, 0.0, 3.0):
        BETA = beta
        Flux.train_(_beta_loss, m, data, o)
        Flux.train_(_beta_loss, ref, data, oref, jit=False)
        np.testing.assert_allclose(m.weight, ref.weight, rtol=1e-5)
    BETA = 1.0


def test_a_closure_over_a_model_sees_its_updates():
    m = Flux.Dense(3, 2)
    f = Flux.jit(lambda x: m(x))
    f(X)
    m.weight = m.weight * 2  # rebinding through setattr
    np.testing.assert_allclose(f(X), m(X), rtol=1e-6)
    Flux.loadmodel_(m, Flux.Dense(3, 2))
    np.testing.assert_allclose(f(X), m(X), rtol=1e-6)


def test_random_draws_are_fresh_each_call_and_reproducible_from_the_seed():
    f = Flux.jit(lambda x: x + Flux.randn32(3))
    g = Flux.jit(lambda x: x + jax.random.normal(Flux.random.next_key(), (3,)))
    for h in (f, g):
        Flux.seed_(7)
        a, b = h(jnp.zeros(3)), h(jnp.zeros(3))
        assert not np.allclose(a, b)
        Flux.seed_(7)
        np.testing.assert_array_equal(h(jnp.zeros(3)), a)


def test_noise_in_a_loss_under_train_differs_per_step():
    seen = []

    def loss(m, x):
        eps = Flux.randn32(2, 2)
        return jnp.sum(m(x) * eps)

    m = Flux.Dense(3, 2)
    st = Flux.setup(Flux.Descent(0.0), m)  # no learning: only the noise changes the loss
    for _ in range(3):
        seen.append(float(Flux.trainstep_(loss, m, X, st)))
    assert len(set(seen)) == 3


def test_automatic_mode_is_part_of_the_key():
    Flux.seed_(0)
    bn, ref = Flux.BatchNorm(3), Flux.BatchNorm(3)
    x = jnp.arange(12.0).reshape(3, 4)
    f = Flux.jit(lambda m, x: m(x))
    np.testing.assert_allclose(f(bn, x), ref(x), rtol=1e-6)  # test mode outside gradient
    w = jnp.arange(12.0).reshape(3, 4) / 12
    g = Flux.gradient(lambda m: jnp.sum(jnp.sin(f(m, x)) * w), bn)[0]
    gref = Flux.gradient(lambda m: jnp.sum(jnp.sin(m(x)) * w), ref)[0]
    assert np.abs(gref.gamma).min() > 1e-3  # batch statistics (test mode would give other numbers)
    np.testing.assert_allclose(g.gamma, gref.gamma, rtol=1e-5)
    np.testing.assert_allclose(bn.mu, ref.mu, rtol=1e-6)  # and the statistics moved alike
    np.testing.assert_allclose(f(bn, x), ref(x), rtol=1e-6)


def test_an_equal_partial_and_lambda_share_one_program():
    def lossw(m, x, y, w):
        return w * mse(m(x), y)

    from fluxjax.optimise import train as train_mod

    m = Flux.Dense(3, 2)
    st = Flux.setup(Flux.Descent(0.1), m)
    before = set(train_mod._compiled._cache)  # (the cache may be full: it keeps the latest programs)
    for _ in range(3):
        Flux.train_(functools.partial(lossw, w=1.0), m, [(X, jnp.zeros((2, 2)))], st)
    assert len(set(train_mod._compiled._cache) - before) == 1
    Flux.train_(functools.partial(lossw, w=2.0), m, [(X, jnp.zeros((2, 2)))], st)  # another value: another program
    assert len(set(train_mod._compiled._cache) - before) == 2


@pytest.mark.parametrize("nest", [1, PLAIN_DEPTH, PLAIN_DEPTH + 1],
                         ids=["walked-plain-object", "walked-nested", "constant-plain-object"])
def test_state_of_a_layer_read_through_plain_objects_moves_every_call(nest):
    """A BatchNorm the function reaches through plain objects: up to `PLAIN_DEPTH` levels down it is
    walked (an input), deeper it is a constant of the program, keyed by contents. Either way each call
    updates its running mean from the previous call's, as eagerly (a key taken after the program's own
    writes would keep the first constant)."""
    import types

    norm = Flux.BatchNorm(2)
    Flux.trainmode_(norm)
    holder = norm
    for _ in range(nest):
        holder = types.SimpleNamespace(inner=holder)

    def get(h):
        for _ in range(nest):
            h = h.inner
        return h

    f = Flux.jit(lambda x: get(holder)(x))
    x = jnp.arange(8.0).reshape(2, 4)
    mean = np.asarray(x).mean(1)
    for n in range(1, 5):
        f(x)
        np.testing.assert_allclose(norm.mu, (1 - 0.9 ** n) * mean, rtol=1e-5)
    if nest <= PLAIN_DEPTH:  # walked: the statistics are inputs, one program serves every call
        assert f.compilations == 1


OPT_MODEL = OPT_STATE = None


def _global_step(x):
    g = Flux.gradient(lambda m: jnp.sum(m[0](x) ** 2), OPT_MODEL)
    Flux.update_(OPT_STATE, OPT_MODEL, g[0])


@pytest.mark.parametrize("rule", [Flux.Momentum(0.1), Flux.Adam(0.05)], ids=["Momentum", "Adam"])
@pytest.mark.parametrize("reach", ["global", "closure", "plain object", "tuple model"])
def test_an_optimiser_state_the_function_reads_moves_every_call(rule, reach):
    """A model and its optimiser state reached through a global, a closure cell or a plain object
    (a list model's state is a list of `Tangent`s holding `Leaf`s): the state's arrays are inputs of
    the program, so each call's momentum follows the previous call's, as eagerly."""
    import types

    global OPT_MODEL, OPT_STATE

    def make():
        Flux.seed_(0)
        m = [Flux.Dense(jnp.ones((1, 2)), False), Flux.Dense(2, 1)]
        if reach == "tuple model":
            m = (m[0], m[1])
        return m, Flux.setup(rule, m)

    def stepper(m, o):
        if reach in ("global", "tuple model"):
            global OPT_MODEL, OPT_STATE
            OPT_MODEL, OPT_STATE = m, o
            return _global_step
        if reach == "closure":
            def closure_step(x):
                g = Flux.gradient(lambda m: jnp.sum(m[0](x) ** 2), m)
                Flux.update_(o, m, g[0])
            return closure_step
        trainer = types.SimpleNamespace(model=m, opt=o)

        def plain_step(x):
            g = Flux.gradient(lambda m: jnp.sum(m[0](x) ** 2), trainer.model)
            Flux.update_(trainer.opt, trainer.model, g[0])
        return plain_step

    x = jnp.ones((2, 1))
    try:
        m, o = make()
        with Flux.eager():
            step = stepper(m, o)
            for _ in range(4):
                step(x)
        m2, o2 = make()
        f = Flux.jit(stepper(m2, o2))
        for _ in range(4):
            f(x)
        for a, b in zip(jax.tree_util.tree_leaves((m, o)), jax.tree_util.tree_leaves((m2, o2))):
            np.testing.assert_allclose(np.asarray(b), np.asarray(a), rtol=1e-5, atol=1e-7)
        # inputs, not constants: no program per call (Adam's first step turns its Python-number step
        # counter into an array, a second structure)
        assert f.compilations <= 2
    finally:
        OPT_MODEL = OPT_STATE = None


# --- what a loss reads through attributes: modules, classes, methods, objects without a __dict__ ---

_CFG = types.ModuleType("user_cfg")  # stands for `import cfg` of the user's own module
_CFG.SCALE = 1.0
_CFG.W = jnp.ones(())
exec("def scaled(v):\n    return SCALE * v\n", _CFG.__dict__)


class _ClassCfg:
    SCALE = 1.0

    @staticmethod
    def static_scaled(v):
        return SCALE_G * v

    @classmethod
    def class_scaled(cls, v):
        return cls.SCALE * v


SCALE_G = 1.0  # a global read by methods reached through attributes
_SETTINGS = {"scale": 1.0}


class _GetattrCfg:  # attributes made by `__getattr__` from a global dict
    def __getattr__(self, name):
        try:
            return _SETTINGS[name]
        except KeyError:
            raise AttributeError(name) from None


_GETATTR_CFG = _GetattrCfg()
_LAZY = types.ModuleType("user_lazy")  # a module whose attributes come from its `__getattr__` (PEP 562)
exec("D = {'scale': 1.0}\ndef __getattr__(name):\n    if name not in D:\n        raise AttributeError(name)\n"
     "    return D[name]\n", _LAZY.__dict__)


class _Helper:
    def compute(self, v):
        return SCALE_G * v


class _Loss:  # a callable object as the loss
    def __call__(self, m):
        return SCALE_G * jnp.sum(m(X))


@dataclasses.dataclass(slots=True)
class _Slotted:
    scale: float = 1.0


@Flux.layer
class _WithHelper:
    def __init__(self, d):
        self.d = d

    def scale(self, v):
        return SCALE_G * v

    @property
    def gain(self):
        return SCALE_G

    def __call__(self, x):
        return self.gain * self.scale(self.d(x))


def _set_global(s):
    global SCALE_G
    SCALE_G = s


def _with_default(v, k=1.0):
    return k * v


def _loss_with_default(m, k=1.0):
    return k * jnp.sum(m(X))


def _set_defaults(s):
    _with_default.__defaults__ = (s,)  # a new tuple on the same function
    _loss_with_default.__defaults__ = (s,)


_HELPER, _SLOTTED, _DEQUE, _BYTES = _Helper(), _Slotted(), collections.deque([1.0]), bytearray([1])
_ARR = array.array("d", [1.0])
_LAYER_HELPED = _WithHelper(Flux.Dense(3, 1))
@dataclasses.dataclass(unsafe_hash=True)
class _HashedCfg:  # hashable by value, still mutable
    scale: float = 1.0


class _IdHashed:  # a class of the user's defining `__hash__`
    def __init__(self):
        self.scale = 1.0

    def __hash__(self):
        return id(self)


class _DictCfg(dict):  # an EasyDict-style configuration
    pass


class _Box:
    pass


@dataclasses.dataclass(frozen=True)
class _FrozenHolder:
    inner: _Box


def _chain(n):
    """A plain object holding another, `n` deep, the last one holding `.scale`."""
    top = cur = _Box()
    for _ in range(n):
        cur.n = _Box()
        cur = cur.n
    cur.scale = 1.0
    return top, cur


def _loss_with_attribute(m):
    return _loss_with_attribute.k * jnp.sum(m(X))


_loss_with_attribute.k = 1.0
_HASHED, _ID_HASHED, _DICT_CFG, _LIST_CFG = _HashedCfg(), _IdHashed(), _DictCfg(scale=1.0), type("L", (list,), {})([1.0])
_OPTS, _NP_ARR = {"scale": 1.0}, np.ones(3, np.float32)
_GET, _NP_SUM = _OPTS.get, _NP_ARR.sum
_BIG = _Box()
_BIG.table = np.ones(5000, np.float32)  # past what is keyed by its bytes: by a digest
_MASKED = np.ma.array(np.ones(3, np.float32), mask=[False, True, False])
_FROZEN = _FrozenHolder(_Box())
_FROZEN.inner.scale = 1.0
_DEEP, _DEEP_END = _chain(10)
# name -> (loss of a Dense(3, 1) `m` whose gradient's bias is 2 * scale (or scale**2 for the layer), the
# setter of scale)
READS = {
    "module attribute": (lambda m: _CFG.SCALE * jnp.sum(m(X)), lambda s: setattr(_CFG, "SCALE", s)),
    "module array attribute": (lambda m: _CFG.W * jnp.sum(m(X)), lambda s: setattr(_CFG, "W", jnp.asarray(s))),
    "module function reading its module": (lambda m: _CFG.scaled(jnp.sum(m(X))), lambda s: setattr(_CFG, "SCALE", s)),
    "class attribute": (lambda m: _ClassCfg.SCALE * jnp.sum(m(X)), lambda s: setattr(_ClassCfg, "SCALE", s)),
    "staticmethod through the class": (lambda m: _ClassCfg.static_scaled(jnp.sum(m(X))), _set_global),
    "classmethod reading the class": (lambda m: _ClassCfg.class_scaled(jnp.sum(m(X))),
                                      lambda s: setattr(_ClassCfg, "SCALE", s)),
    "method of a plain object": (lambda m: _HELPER.compute(jnp.sum(m(X))), _set_global),
    "callable object": (_Loss(), _set_global),
    "dataclass with slots": (lambda m: _SLOTTED.scale * jnp.sum(m(X)), lambda s: setattr(_SLOTTED, "scale", s)),
    "deque item": (lambda m: _DEQUE[0] * jnp.sum(m(X)), lambda s: _DEQUE.__setitem__(0, s)),
    "bytearray item": (lambda m: _BYTES[0] * jnp.sum(m(X)), lambda s: _BYTES.__setitem__(0, int(abs(s)) + 1)),
    "defaults of a function it calls": (lambda m: _with_default(jnp.sum(m(X))), _set_defaults),
    "defaults of the loss itself": (_loss_with_default, _set_defaults),
    "array.array item": (lambda m: _ARR[0] * jnp.sum(m(X)), lambda s: _ARR.__setitem__(0, s)),
    "attribute of the loss itself": (_loss_with_attribute, lambda s: setattr(_loss_with_attribute, "k", s)),
    "dataclass(unsafe_hash=True)": (lambda m: _HASHED.scale * jnp.sum(m(X)), lambda s: setattr(_HASHED, "scale", s)),
    "object defining __hash__": (lambda m: _ID_HASHED.scale * jnp.sum(m(X)),
                                 lambda s: setattr(_ID_HASHED, "scale", s)),
    "dict subclass item": (lambda m: _DICT_CFG["scale"] * jnp.sum(m(X)), lambda s: _DICT_CFG.__setitem__("scale", s)),
    "list subclass item": (lambda m: _LIST_CFG[0] * jnp.sum(m(X)), lambda s: _LIST_CFG.__setitem__(0, s)),
    "bound dict.get": (lambda m: _GET("scale") * jnp.sum(m(X)), lambda s: _OPTS.__setitem__("scale", s)),
    "bound ndarray.sum": (lambda m: _NP_SUM() / 3 * jnp.sum(m(X)), lambda s: _NP_ARR.__setitem__(slice(None), s)),
    "large NumPy array in an object": (lambda m: _BIG.table[4999] * jnp.sum(m(X)),
                                       lambda s: _BIG.table.__setitem__(4999, s)),
    "masked array": (lambda m: float(_MASKED[0]) * jnp.sum(m(X)), lambda s: _MASKED.__setitem__(0, s)),
    "object in a frozen dataclass": (lambda m: _FROZEN.inner.scale * jnp.sum(m(X)),
                                     lambda s: setattr(_FROZEN.inner, "scale", s)),
    "object's __getattr__ reading a global": (lambda m: _GETATTR_CFG.scale * jnp.sum(m(X)),
                                              lambda s: _SETTINGS.__setitem__("scale", s)),
    "module's __getattr__": (lambda m: _LAZY.scale * jnp.sum(m(X)), lambda s: _LAZY.D.__setitem__("scale", s)),
    "ten objects deep": (lambda m: _DEEP.n.n.n.n.n.n.n.n.n.n.scale * jnp.sum(m(X)),
                         lambda s: setattr(_DEEP_END, "scale", s)),
}


@pytest.mark.parametrize("name", sorted(READS))
def test_what_a_loss_reads_through_attributes_is_read_afresh(name):
    """A value the loss reads through a module, a class, a method reached by attribute, or an object
    without a `__dict__`, changed between calls: the compiled gradient, `Flux.jit` and `train_` use the
    new value, as the op-by-op call does (the first call's value was a constant of the program)."""
    loss, set_scale = READS[name]
    m, stepped = Flux.Dense(3, 1), Flux.Dense(3, 1)  # the same objects at every call: a call reuses its plan
    st = Flux.setup(Flux.Descent(1.0), stepped)
    step = Flux.jit(lambda m, st: Flux.update_(st, m, Flux.gradient(loss, m)[0]))
    try:
        for s in (1.0, 1.0, 2.0, 2.0, -0.5, 2.0):
            set_scale(s)
            with Flux.eager():
                want = Flux.gradient(loss, m)[0].bias
            np.testing.assert_allclose(Flux.gradient(loss, m)[0].bias, want, rtol=1e-6)
            b = stepped.bias
            step(stepped, st)
            np.testing.assert_allclose(stepped.bias, b - want, rtol=1e-6)
    finally:
        set_scale(1.0)


def test_a_layer_method_and_property_reading_a_global():
    m = _LAYER_HELPED
    loss = lambda m: jnp.sum(m(X))  # noqa: E731
    try:
        for s in (1.0, 2.0, -0.5):
            _set_global(s)
            with Flux.eager():
                want = Flux.gradient(loss, m)[0].d.bias
            np.testing.assert_allclose(want, 2 * s * s, rtol=1e-6)
            np.testing.assert_allclose(Flux.gradient(loss, m)[0].d.bias, want, rtol=1e-6)
            np.testing.assert_allclose(_apply(m, X), m(X), rtol=1e-6)
    finally:
        _set_global(1.0)


class _Gain:
    K = 1.0


def _act_module(z):
    return _CFG.SCALE * z


def _act_class(z):
    return _Gain.K * z


def _act_attribute(z):
    return _act_attribute.k * z


_act_attribute.k = 1.0
ACTIVATIONS = {
    "module attribute": (_act_module, lambda s: setattr(_CFG, "SCALE", s)),
    "class attribute": (_act_class, lambda s: setattr(_Gain, "K", s)),
    "its own attribute": (_act_attribute, lambda s: setattr(_act_attribute, "k", s)),
}


@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
def test_an_activation_in_a_layer_reading_a_module_class_or_attribute(name):
    """A function held in a layer's field (not walked: keyed) is keyed by what it reads through a
    user's module or class and by its own attributes."""
    act, set_scale = ACTIVATIONS[name]
    m = Flux.Dense(jnp.ones((1, 3)), False, act)
    loss = lambda m: jnp.sum(m(X))  # noqa: E731
    try:
        for s in (1.0, 3.0, 3.0, -0.5):
            set_scale(s)
            np.testing.assert_allclose(Flux.gradient(loss, m)[0].weight, s * jnp.sum(X, axis=1)[None], rtol=1e-6)
            np.testing.assert_allclose(_apply(m, X), s * jnp.sum(X, axis=0, keepdims=True), rtol=1e-6)
    finally:
        set_scale(1.0)


_FRESH = _HashedCfg()


def _read_fresh(m):
    return _FRESH.scale * jnp.sum(m(X))


def test_equal_value_objects_made_afresh_share_a_program():
    """An object that says it is a value (defines `__hash__`) made anew before each call with the same
    fields reuses the program; with other fields it gets another."""
    global _FRESH
    m, g = Flux.Dense(3, 1), Flux.jit(_read_fresh)
    try:
        for s in (1.0, 1.0, 2.0, 2.0):
            _FRESH = _HashedCfg(s)
            np.testing.assert_allclose(g(m), s * jnp.sum(m(X)), rtol=1e-6)
        assert g.compilations == 2
    finally:
        _FRESH = _HashedCfg()


def test_a_cycle_is_keyed_and_what_hangs_off_it_is_watched():
    a, b = _Box(), _Box()
    a.other, b.other, a.scale = b, a, 1.0  # a <-> b
    loss = lambda m: a.other.other.scale * jnp.sum(m(X))  # noqa: E731
    m = Flux.Dense(3, 1)
    for s in (1.0, 2.0, 2.0, -1.0):
        a.scale = s
        np.testing.assert_allclose(Flux.gradient(loss, m)[0].bias, 2 * s, rtol=1e-6)


def test_a_value_nested_too_deep_to_key_is_compiled_again_with_a_warning():
    top, end = _chain(20)

    def read(o):
        for _ in range(20):
            o = o.n
        return o.scale

    loss = lambda m: read(top) * jnp.sum(m(X))  # noqa: E731
    m = Flux.Dense(3, 1)
    with pytest.warns(UserWarning, match="cannot tell whether a _Box"):
        for s in (1.0, 2.0, -1.0):
            end.scale = s
            np.testing.assert_allclose(Flux.gradient(loss, m)[0].bias, 2 * s, rtol=1e-6)


def _loss_naming_abs(m):
    return abs(jnp.sum(m(X)))  # the builtin, until the module defines `abs`


def test_a_builtin_shadowed_later_by_a_global_is_seen():
    """The loss names `abs`, the builtin at the first calls; a global `abs` defined later (a notebook
    cell, `from numpy import *`) is what the eager call runs from then on. The reuse check looked only
    at globals the module had, so the compiled calls kept the builtin (21 where the eager call gives
    -210)."""
    m, stepped = Flux.Dense(jnp.full((1, 3), -1.0), False), Flux.Dense(jnp.full((1, 3), -1.0), False)
    f = Flux.jit(_loss_naming_abs)
    s = Flux.setup(Flux.Descent(0.01), stepped)

    def calls():
        with Flux.eager():
            want = Flux.withgradient(_loss_naming_abs, m)
            want_step = Flux.withgradient(_loss_naming_abs, stepped)
        np.testing.assert_allclose(f(m), want[0], rtol=1e-6)
        got = Flux.withgradient(_loss_naming_abs, m)
        np.testing.assert_allclose(got[0], want[0], rtol=1e-6)
        np.testing.assert_allclose(got[1][0].weight, want[1][0].weight, rtol=1e-6)
        value, g = Flux.withgradient(_loss_naming_abs, stepped)  # the fused eager loop
        np.testing.assert_allclose(value, want_step[0], rtol=1e-6)
        Flux.update_(s, stepped, g[0])
        return float(want[0])

    assert [calls() for _ in range(3)] == [21.0] * 3
    try:
        globals()["abs"] = lambda v: 10.0 * v
        assert [calls() for _ in range(3)] == [-210.0] * 3
    finally:
        del globals()["abs"]
    assert calls() == 21.0  # the builtin again


@Flux.layer
class _Scaled:
    def __init__(self):
        self.w = jnp.ones((3,))

    def __call__(self, x):
        return self.w @ x


def _edited_call(self, x):
    return 7.0 * (self.w @ x)


def test_code_replaced_in_place_is_seen():
    """IPython's `%autoreload` updates an edited function by setting `f.__code__` on the very object:
    a layer's method, the loss itself, or a function the loss calls. The reuse check held functions by
    identity, so the compiled calls ran the old code."""
    m = _Scaled()
    loss = lambda mm: jnp.sum(mm(X))  # noqa: E731
    f = Flux.jit(loss)
    plain = _Scaled.__call__.__code__
    try:
        for code, k in ((plain, 1.0), (_edited_call.__code__, 7.0), (plain, 1.0)):
            _Scaled.__call__.__code__ = code
            f(m)
            np.testing.assert_allclose(f(m), k * jnp.sum(X), rtol=1e-6)
            np.testing.assert_allclose(Flux.gradient(loss, m)[0].w, k * jnp.sum(X, axis=1), rtol=1e-6)
    finally:
        _Scaled.__call__.__code__ = plain

    def g(mm):
        return jnp.sum(mm(X))
    fg = Flux.jit(g)
    np.testing.assert_allclose(fg(m), jnp.sum(X), rtol=1e-6)
    g.__code__ = (lambda mm: -jnp.sum(mm(X))).__code__
    np.testing.assert_allclose(fg(m), -jnp.sum(X), rtol=1e-6)
    np.testing.assert_allclose(Flux.gradient(g, m)[0].w, -jnp.sum(X, axis=1), rtol=1e-6)
