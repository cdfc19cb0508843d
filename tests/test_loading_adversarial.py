"""Loading and checkpoints under adversarial inputs: `loadmodel_` copies into the destination's own arrays
(no ties made), `False` is Flux's `false` only on a bias, lossy dtype conversions raise, checkpoints keep
64-bit NumPy arrays exact, `keep=` never deletes the step just written, odd dict keys are a clear error,
and loaded optimiser hyperparameters show on the rule."""

import os

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import fluxjax as Flux
from fluxjax.errors import StructureMismatch
from fluxjax.loading import InexactError


def _leaves(tree):
    return [np.asarray(jax.random.key_data(a) if jnp.issubdtype(a.dtype, jax.dtypes.prng_key) else a).copy()
            for a in jax.tree_util.tree_leaves(tree)]


def _unchanged(tree):
    before, ids = _leaves(tree), [id(a) for a in jax.tree_util.tree_leaves(tree)]

    def check():
        now = jax.tree_util.tree_leaves(tree)
        assert [id(a) for a in now] == ids
        assert all(np.array_equal(a, b) for a, b in zip(_leaves(tree), before))
    return check


# ---- 1: the destination never gets the source's array objects


@pytest.mark.parametrize("how", ["state", "model", "jit"])
def test_a_tied_source_does_not_tie_an_untied_destination(how):
    W = jnp.array([[1.0, 2.0], [3.0, 4.0]])
    A = Flux.Chain(Flux.Dense(W, False), Flux.Dense(W, False))
    B = Flux.Chain(Flux.Dense(2, 2, bias=False), Flux.Dense(2, 2, bias=False))
    src = A if how == "model" else Flux.state(A)
    if how == "jit":
        Flux.jit(lambda b, a: Flux.loadmodel_(b, Flux.state(a)) and None)(B, A)
    else:
        Flux.loadmodel_(B, src)
    assert B[0].weight is not B[1].weight and B[0].weight is not W and B[1].weight is not W
    assert len(Flux.params(B)) == 2
    np.testing.assert_array_equal(B[0].weight, W)
    np.testing.assert_array_equal(B[1].weight, W)
    x = jnp.array([[1.0], [-1.0]])
    o = Flux.setup(Flux.Descent(0.1), B)
    Flux.update_(o, B, Flux.gradient(lambda m: jnp.sum(m[0](x)), B)[0])  # only layer 0 is used
    np.testing.assert_array_equal(B[1].weight, W)  # layer 1 did not move with it
    np.testing.assert_allclose(B[0].weight, W - 0.1 * np.array([[1.0, -1.0], [1.0, -1.0]]))


def test_target_network_sync_leaves_the_two_independent():
    @Flux.layer
    class Agent:
        def __init__(self):
            self.q, self.q_target = Flux.Dense(3, 2), Flux.Dense(3, 2)

        def __call__(self, x):
            return self.q(x)

    agent = Agent()
    Flux.loadmodel_(agent.q_target, agent.q)
    assert agent.q_target.weight is not agent.q.weight and agent.q_target.bias is not agent.q.bias
    synced = np.asarray(agent.q_target.weight).copy()
    x = jnp.ones((3, 4))
    o = Flux.setup(Flux.Descent(0.1), agent)
    for _ in range(2):
        Flux.update_(o, agent, Flux.gradient(lambda a: jnp.sum(a.q(x) ** 2), agent)[0])
    np.testing.assert_array_equal(agent.q_target.weight, synced)
    assert not np.array_equal(agent.q.weight, synced)


def test_a_tied_destination_stays_tied_with_a_new_array():
    d = Flux.Dense(2, 2)
    C = Flux.Chain(d, d)
    src = Flux.Dense(2, 2)
    Flux.loadmodel_(C, Flux.Chain(src, src))
    assert C[0].weight is C[1].weight and C[0].weight is not src.weight
    np.testing.assert_array_equal(C[0].weight, src.weight)
    # NumPy destinations get copies too
    dst = {"a": np.zeros(2), "b": np.zeros(2)}
    v = np.array([1.0, 2.0])
    Flux.loadmodel_(dst, {"a": v, "b": v})
    assert dst["a"] is not v and dst["b"] is not v and dst["a"] is not dst["b"]


# ---- 2: False is Flux's `false` on a bias, `nothing` elsewhere


@pytest.mark.parametrize("kw", [{"affine": False}, {"track_stats": False}])
@pytest.mark.parametrize("direction", ["into arrays", "from arrays"])
def test_norm_layer_without_arrays_does_not_load_into_one_with_them(kw, direction):
    plain, without = Flux.BatchNorm(3), Flux.BatchNorm(3, **kw)
    plain.mu = jnp.array([1.0, 2.0, 3.0])
    dst, src = (plain, without) if direction == "into arrays" else (without, plain)
    check = _unchanged(dst)
    for s in (Flux.state(src), src):
        with pytest.raises(StructureMismatch, match="beta|mu") as e:
            Flux.loadmodel_(dst, s)
        assert "affine=False or track_stats=False" in str(e.value)
        check()
    with pytest.raises(StructureMismatch):
        Flux.loadmodel_(Flux.InstanceNorm(4, affine=True, track_stats=True), Flux.state(Flux.InstanceNorm(4, **kw)))
    if "affine" in kw:
        with pytest.raises(StructureMismatch, match="gamma|beta"):
            Flux.loadmodel_(Flux.GroupNorm(4, 2, affine=False), Flux.GroupNorm(4, 2))


def test_bias_false_still_zeroes_and_is_ignored():
    dst = Flux.Chain(Flux.Dense(2, 3), Flux.Conv((1, 1), (1, 2)))
    Flux.loadmodel_(dst, Flux.Chain(Flux.Dense(2, 3, bias=False), Flux.Conv((1, 1), (1, 2), bias=False)))
    assert dst[0].bias.shape == (3,) and not np.any(dst[0].bias) and not np.any(dst[1].bias)
    nob = Flux.GRUCell(2, 3, bias=False)
    Flux.loadmodel_(nob, Flux.GRUCell(2, 3))  # GRU's bias field is `b`
    assert nob.b is False


def test_checkpoint_of_affine_false_norm_into_affine_norm_raises(tmp_path):
    Flux.save(tmp_path / "ck", Flux.Chain(Flux.Dense(2, 3), Flux.BatchNorm(3, affine=False)))
    dst = Flux.Chain(Flux.Dense(2, 3), Flux.BatchNorm(3))
    check = _unchanged(dst)
    with pytest.raises(StructureMismatch, match=r"layers\[1\]\.beta"):
        Flux.load(tmp_path / "ck", dst)
    check()
    Flux.save(tmp_path / "ck2", dst)
    other = Flux.Chain(Flux.Dense(2, 3), Flux.BatchNorm(3, track_stats=False))
    with pytest.raises(StructureMismatch, match=r"layers\[1\]\.mu"):
        Flux.load(tmp_path / "ck2", other)


def test_npz_with_norm_arrays_into_affine_false_raises(tmp_path):
    src = Flux.Chain(Flux.Dense(2, 3), Flux.BatchNorm(3))
    path = tmp_path / "m.npz"
    Flux.export_npz(path, src)
    with pytest.raises(StructureMismatch, match="gamma"):
        Flux.import_npz_(Flux.Chain(Flux.Dense(2, 3), Flux.BatchNorm(3, affine=False)), path)


# ---- 3: dtype conversions that lose values raise


@pytest.mark.parametrize("dst, src, value", [
    (jnp.zeros(2, jnp.float32), jnp.array([1 + 0j, 3 - 1j], jnp.complex64), "(3-1j)"),
    (jnp.zeros(3, jnp.int32), np.array([1.0, -3.5, 2.0]), "-3.5"),
    (jnp.zeros(3, jnp.int32), np.array([1.0, 2.0**40, 2.0]), "1099511627776.0"),
    (jnp.zeros(2, jnp.int32), np.array([0, 2**31], np.int64), "2147483648"),
    (jnp.zeros(2, jnp.int8), jnp.array([1.0, jnp.nan]), "nan"),
    (jnp.zeros(2, jnp.uint8), jnp.array([3, -1], jnp.int32), "-1"),
    (jnp.zeros(2, jnp.bool_), jnp.array([1.0, 2.0]), "2.0"),
    (np.zeros(2, np.int16), np.array([7, 40000], np.int32), "40000"),
])
def test_lossy_dtype_conversion_raises_and_writes_nothing(dst, src, value):
    d = {"ok": jnp.zeros(2), "w": dst}
    check = _unchanged(d)
    with pytest.raises(InexactError) as e:
        Flux.loadmodel_(d, {"ok": jnp.ones(2), "w": src})
    msg = str(e.value)
    assert "w:" in msg and value in msg and str(jnp.dtype(src.dtype)) in msg and str(jnp.dtype(dst.dtype)) in msg
    assert isinstance(e.value, ValueError)
    check()


def test_exact_conversions_still_load():
    d = {"f": jnp.zeros(2, jnp.float32), "i": jnp.zeros(3, jnp.int32), "c": jnp.zeros(1, jnp.float32),
         "b": jnp.zeros(2, jnp.bool_), "h": jnp.zeros(1, jnp.bfloat16)}
    Flux.loadmodel_(d, {"f": np.array([np.pi, 1e40]), "i": np.array([1.0, -2.0, 2.0**31 - 1]),
                        "c": np.array([2 + 0j]), "b": np.array([1.0, 0.0]), "h": np.array([1 / 3])})
    assert d["f"].dtype == jnp.float32 and d["f"][0] == np.float32(np.pi) and np.isinf(d["f"][1])
    assert d["i"].tolist() == [1, -2, 2**31 - 1] and d["c"].tolist() == [2.0] and d["b"].tolist() == [True, False]
    assert d["h"].dtype == jnp.bfloat16


def test_lossy_conversion_cannot_be_checked_while_tracing():
    d = {"w": jnp.zeros(2, jnp.int32)}
    with pytest.raises(TypeError, match="tracing"):
        Flux.jit(lambda d, s: Flux.loadmodel_(d, s) and None)(d, {"w": jnp.array([1.0, 2.0])})


# ---- 4: 64-bit NumPy arrays round-trip exactly with x64 off


def test_checkpoint_keeps_64_bit_numpy_arrays_exact(tmp_path):
    assert not jax.config.jax_enable_x64

    @Flux.layer
    class Host:
        def __init__(self):
            self.a = np.array([np.pi, 1 / 3], np.float64)
            self.i = np.array([2**40 + 1, -(2**50) - 3], np.int64)
            self.c = np.array([1 / 3 + 1e-12j], np.complex128)

        def __call__(self, x):
            return x

    src = Host()
    Flux.save(tmp_path / "ck", src)
    dst = Host()
    for k in ("a", "i", "c"):
        getattr(dst, k)[:] = 0
    Flux.load(tmp_path / "ck", dst)
    for k in ("a", "i", "c"):
        got, want = getattr(dst, k), getattr(src, k)
        assert got.dtype == want.dtype and got.tobytes() == want.tobytes()
    raw = Flux.load(tmp_path / "ck").model
    for k in ("a", "i", "c"):
        assert raw[k].dtype == getattr(src, k).dtype and raw[k].tobytes() == getattr(src, k).tobytes()
    # into jax arrays: float64 -> float32 rounds as Flux; an int64 past int32 raises, nothing written
    dst32 = {"a": jnp.zeros(2), "i": jnp.zeros(2, jnp.int32), "c": jnp.zeros(1, jnp.complex64)}
    check = _unchanged(dst32)
    with pytest.raises(InexactError, match=r"i: .*int64 into int32.*1099511627777"):
        Flux.load(tmp_path / "ck", dst32)
    check()


# ---- 5: keep= never deletes the step just written


def test_keep_refuses_a_step_below_existing_ones(tmp_path):
    p = tmp_path / "ck"
    Flux.save(p, Flux.Dense(2, 2), step=5)
    with pytest.raises(ValueError, match="step 0 is lower than step 5"):
        Flux.save(p, Flux.Dense(2, 2), step=0, keep=1)
    assert sorted(n for n in os.listdir(p) if n.isdigit()) == ["5"]
    assert Flux.save(p, Flux.Dense(2, 2), step=3) == 3  # no keep: allowed, nothing pruned
    assert Flux.save(p, Flux.Dense(2, 2), step=9, keep=2) == 9
    assert sorted(int(n) for n in os.listdir(p) if n.isdigit()) == [5, 9]
    assert Flux.load(p).step == 9


# ---- 6: dict keys a checkpoint cannot store


@pytest.mark.parametrize("key", [(1, 2), frozenset({1}), ("a",)])
def test_unstorable_dict_key_names_the_field(tmp_path, key):
    @Flux.layer
    class Table:
        def __init__(self):
            self.table = {key: jnp.ones(2)}

        def __call__(self, x):
            return x

    with pytest.raises(TypeError, match=r"model: layers\[1\]\.table: a dict key .* str, int"):
        Flux.save(tmp_path / "ck", Flux.Chain(Flux.Dense(1, 1), Table()))
    assert not os.path.exists(tmp_path / "ck")  # raised before anything was written


# ---- 7: loaded hyperparameters show on the rule that uses them


@pytest.mark.parametrize("via", ["loadmodel_", "checkpoint"])
def test_loaded_hyperparameters_show_on_the_rule(tmp_path, via):
    m = Flux.Dense(jnp.ones((1, 2)), False)
    saved = Flux.setup(Flux.Momentum(0.1, 0.5), m)
    o = Flux.setup(Flux.Momentum(0.001), m)
    if via == "loadmodel_":
        Flux.loadmodel_(o, Flux.state(saved))
    else:
        Flux.save(tmp_path / "ck", m, saved)
        Flux.load(tmp_path / "ck", m, o)
    assert o.weight.rule == Flux.Momentum(0.1, 0.5)
    g = Flux.gradient(lambda m: jnp.sum(m(jnp.ones((2, 1)))), m)[0]
    Flux.update_(o, m, g)
    np.testing.assert_allclose(m.weight, 1 - 0.1, rtol=1e-6)  # the step the rule shows
    # equal hyperparameters leave the rule object as it was
    rule = Flux.Adam(0.01)
    o2 = Flux.setup(rule, m)
    Flux.loadmodel_(o2, Flux.state(Flux.setup(Flux.Adam(0.01), m)))
    assert o2.weight.rule is rule


@pytest.mark.parametrize("via", ["loadmodel_", "checkpoint"])
def test_loaded_hyperparameters_show_on_each_member_of_a_chain(tmp_path, via):
    """Resuming after `adjust_` with the model-zoo's chains (ClipNorm or WeightDecay before Adam): the
    checkpoint's learning rate loads into the chain's member and shows on the rule; it used to raise."""
    m = Flux.Dense(jnp.ones((1, 2)), False)
    chain = lambda eta: Flux.OptimiserChain(Flux.ClipNorm(10.0), Flux.WeightDecay(0.5), Flux.Momentum(eta, 0.5))  # noqa: E731
    saved = Flux.setup(chain(0.1), m)
    Flux.adjust_(saved, 0.05)
    Flux.adjust_(saved, lambda_=0.25)
    o = Flux.setup(chain(0.1), m)
    if via == "loadmodel_":
        Flux.loadmodel_(o, Flux.state(saved))
    else:
        Flux.save(tmp_path / "ck", m, saved)
        Flux.load(tmp_path / "ck", m, o)
    assert o.weight.rule == Flux.OptimiserChain(Flux.ClipNorm(10.0), Flux.WeightDecay(0.25), Flux.Momentum(0.05, 0.5))
    g = Flux.gradient(lambda m: jnp.sum(m(jnp.ones((2, 1)))), m)[0]
    Flux.update_(o, m, g)
    np.testing.assert_allclose(m.weight, 1 - 0.05 * (1 + 0.25 * 1), rtol=1e-6)  # Momentum's first step: η·(g + λw)
    # a chain whose hyperparameters are equal keeps its rule object
    rule = chain(0.1)
    o2 = Flux.setup(rule, m)
    Flux.loadmodel_(o2, Flux.state(Flux.setup(chain(0.1), m)))
    assert o2.weight.rule is rule


def test_hyperparameters_no_rule_can_show_raise():
    m = {"w": jnp.ones(2)}
    o = Flux.setup(Flux.MixedPrecision(jnp.float32, Flux.Descent(0.1)), m)
    check = _unchanged(o)
    with pytest.raises(StructureMismatch, match=r"w\.state\.state\.hyper\.eta.*MixedPrecision"):
        Flux.loadmodel_(o, Flux.state(Flux.setup(Flux.MixedPrecision(jnp.float32, Flux.Descent(0.3)), m)))
    check()
    # a schedule keeps its rule; the loaded moments still load
    sched = optax.linear_schedule(0.1, 0.0, 10)
    o = Flux.setup(Flux.Adam(sched), m)
    Flux.loadmodel_(o, Flux.state(Flux.setup(Flux.Adam(sched), m)))
    assert o["w"].rule.hyperparameters["eta"] is sched


def test_a_tied_destination_under_jit_takes_one_source_or_raises():
    """Eagerly, two different sources for one tied array raise unless their values agree; while tracing
    the values are unknown, so two different source arrays raise, and one source array at both places
    (a tied source) loads."""
    d = Flux.Dense(2, 2)
    c = Flux.Chain(d, d)
    before = np.asarray(d.weight)
    load = Flux.jit(lambda c, s: Flux.loadmodel_(c, s))
    untied = Flux.state(Flux.Chain(Flux.Dense(2, 2), Flux.Dense(2, 2)))
    with pytest.raises(StructureMismatch):
        Flux.loadmodel_(c, untied)
    with pytest.raises(TypeError, match="tied destination"):
        load(c, untied)
    np.testing.assert_array_equal(d.weight, before)  # nothing written
    e = Flux.Dense(2, 2)
    load(c, Flux.state(Flux.Chain(e, e)))
    assert c[0] is c[1]
    np.testing.assert_array_equal(d.weight, e.weight)
    assert d.weight is not e.weight
