"""A property test of the compiled path: random sequences of edits to a model and to what the compiled
function reads (layers replaced, appended, reordered, tied and untied, arrays rebound with new values
or dtypes, a closure cell and a global changed, modes switched, batches passed bare, in lists and in
dicts, of new sizes), each compiled call compared with the eager call on a twin model that got the same
edits: the same output and the same model state (BatchNorm statistics) afterwards."""

import jax
import jax.numpy as jnp
import numpy as np
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

import fluxjax as Flux
from fluxjax.compiled import call
from tests.optimise.models import ActNorm

GLOBAL_SCALE = 1.0


def _forward_with_cell():
    s = 1.0

    def set_cell(v):
        nonlocal s
        s = v

    def forward(m, x):
        return m(x) * s * GLOBAL_SCALE

    return forward, set_cell


FORWARD, SET_CELL = _forward_with_cell()
COMPILED = {
    "bare": Flux.jit(lambda m, x: FORWARD(m, x)),
    "list": Flux.jit(lambda m, xs: FORWARD(m, xs[0])),
    "dict": Flux.jit(lambda m, d: FORWARD(m, d["x"])),
}
N = 3  # every layer maps 3 features to 3, so any order composes


def _layer(kind: int, seed: int):
    rng = seed
    if kind == 0:
        return Flux.Dense(N, N, Flux.relu, init=Flux.glorot_uniform(rng=rng))
    if kind == 1:
        return Flux.Dense(N, N, jnp.tanh, init=Flux.glorot_normal(rng=rng))
    if kind == 2:
        return Flux.BatchNorm(N)
    return ActNorm(N)  # its first call sets its arrays from the batch, and a Python flag


def _copy(lay):
    return Flux.fmap(lambda v: v, lay)


def _leaves(m):
    return [np.asarray(a) for a in jax.tree_util.tree_leaves(m)]


class CompiledMatchesEager(RuleBasedStateMachine):
    @initialize(kind=st.integers(0, 3), seed=st.integers(0, 3))
    def start(self, kind, seed):
        global GLOBAL_SCALE
        GLOBAL_SCALE = 1.0
        SET_CELL(1.0)
        lay = _layer(kind, seed)
        self.layers, self.twins = [lay], [_copy(lay)]
        self.m, self.ref = Flux.Chain(*self.layers), Flux.Chain(*self.twins)

    def _rebuild(self):
        # the very Chain objects stay: their field is rebound (a structure change between calls)
        self.m.layers = tuple(self.layers)
        self.ref.layers = tuple(self.twins)

    @rule(kind=st.integers(0, 3), seed=st.integers(0, 3), at=st.integers(0, 2))
    def replace_or_append(self, kind, seed, at):
        lay = _layer(kind, seed)
        if at < len(self.layers):
            self.layers[at], self.twins[at] = lay, _copy(lay)
        elif len(self.layers) < 3:
            self.layers.append(lay)
            self.twins.append(_copy(lay))
        self._rebuild()

    @rule(perm=st.permutations(range(3)))
    def reorder(self, perm):
        p = [i for i in perm if i < len(self.layers)]
        self.layers = [self.layers[i] for i in p]
        self.twins = [self.twins[i] for i in p]
        self._rebuild()

    @rule()
    def tie_first_to_last(self):
        if len(self.layers) > 1:
            self.layers[-1], self.twins[-1] = self.layers[0], self.twins[0]
            self._rebuild()

    @rule()
    def untie(self):
        self.layers = [_copy(lay) if any(lay is o for o in self.layers[:i]) else lay for i, lay in enumerate(self.layers)]
        self.twins = [_copy(lay) if any(lay is o for o in self.twins[:i]) else lay for i, lay in enumerate(self.twins)]
        self._rebuild()

    @rule(factor=st.sampled_from([0.5, 2.0]), half=st.booleans())
    def rebind_an_array(self, factor, half):
        for chain in (self.m, self.ref):
            for lay in chain.layers:
                if isinstance(lay, Flux.Dense):
                    w = lay.weight * factor
                    lay.weight = w.astype(jnp.bfloat16).astype(jnp.float32) if half else w
                    break

    @rule(v=st.sampled_from([1.0, -2.0, 0.5]))
    def change_the_closure_cell(self, v):
        SET_CELL(v)

    @rule(v=st.sampled_from([1.0, 3.0]))
    def change_the_global(self, v):
        global GLOBAL_SCALE
        GLOBAL_SCALE = v

    @rule(mode=st.sampled_from([True, False, "auto"]))
    def switch_mode(self, mode):
        for chain in (self.m, self.ref):
            Flux.testmode_(chain, mode)

    @rule(how=st.sampled_from(sorted(COMPILED)), batch=st.sampled_from([2, 4]), seed=st.integers(0, 2))
    def call(self, how, batch, seed):
        x = jnp.asarray(np.random.default_rng(seed).normal(size=(N, batch)), jnp.float32)
        arg = {"bare": x, "list": [x], "dict": {"x": x}}[how]
        got = COMPILED[how](self.m, arg)
        want = FORWARD(self.ref, x)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)

    @invariant()
    def same_state(self):
        if hasattr(self, "m"):
            for a, b in zip(_leaves(self.m), _leaves(self.ref)):
                np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
            flags = [[getattr(lay, "initialized", None) for lay in c.layers] for c in (self.m, self.ref)]
            assert flags[0] == flags[1]


def test_compiled_calls_match_eager_under_random_edits(monkeypatch):
    monkeypatch.setattr(call, "MAX_PROGRAMS", 4096)  # keep every structure compiled: the test is about keys
    run = settings(max_examples=1000, stateful_step_count=6, deadline=None, derandomize=True,
                   suppress_health_check=list(HealthCheck))(CompiledMatchesEager)
    run.TestCase().runTest()
