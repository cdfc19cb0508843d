"""Inputs people get wrong, refused with a message that names the layer and says what to do, or accepted
as Flux accepts them (report adv2: items 1 and 4, and section C's layer items).

- A tuple, or a list of arrays, where a layer takes one array: NumPy would stack it on axis 0, which the
  layer reads as the feature axis (Flux: a Tuple is a MethodError; `eachslice(x, dims=2)` fails on a
  Vector of time steps). A list of numbers stays a literal array.
- `Embedding` takes integer indices or a bool one-hot array; float input is a `TypeError` (Flux's
  `gather` refuses float indices; only `Bool`/OneHot arrays take the `weight * x` path).
- Sizes are any integral number (`np.int64`, a 0-d integer array), probabilities any real number, as
  Flux's `Integer`/`Real`; `active` is `None`, `True` or `False` only, as Flux's `Union{Bool, Nothing}`.
"""

import operator
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import fluxjax as Flux
from fluxjax.errors import DimensionMismatch

RNG = np.random.default_rng(7)


def _f32(*shape):
    return jnp.asarray(RNG.standard_normal(shape), jnp.float32)


BATCH_FIX = re.escape("jnp.stack(xs, axis=-1)")
STEPS_FIX = re.escape("jnp.stack(steps, axis=1)")


# ---------------------------------------------------------------------------------------------
# Item 1: several arrays where one is expected


def test_dense_refuses_a_list_of_samples_and_the_fix_gives_each_sample():
    Flux.seed_(0)
    d = Flux.Dense(2, 3)
    x1, x2 = jnp.array([1.0, 2.0]), jnp.array([3.0, 4.0])
    msg = r"Layer Dense\(2 => 3\) expects one array, got a list of 2 items holding arrays of shapes \(2,\), \(2,\).*axis 0"
    with pytest.raises(TypeError, match=msg) as e:
        d([x1, x2])
    assert re.search(BATCH_FIX, str(e.value)) and "jnp.concatenate(xs, axis=0)" in str(e.value)
    y = d(jnp.stack([x1, x2], axis=-1))  # what the message says to do
    np.testing.assert_allclose(y, np.stack([d(x1), d(x2)], axis=-1), rtol=1e-6)
    # a literal list of numbers (also nested, of NumPy scalars or of 0-d arrays) is still one array
    np.testing.assert_array_equal(d([1.0, 2.0]), d(x1))
    np.testing.assert_array_equal(d([[1.0, 3.0], [2.0, 4.0]]), y)
    np.testing.assert_array_equal(d([np.float32(1), np.float32(2)]), d(x1))
    np.testing.assert_array_equal(d([jnp.array(1.0), jnp.array(2.0)]), d(x1))


def test_a_tuple_reaching_a_layer_is_refused():
    x1, x2 = jnp.ones(2), jnp.zeros(2)
    tuple_msg = r"Layer Dense\(2 => 3\) expects one array, got a tuple of 2 items.*Chain\(x, y\)"
    with pytest.raises(TypeError, match=tuple_msg):
        Flux.Chain(Flux.Dense(2, 3))(x1, x2)  # Flux: Chain(x, y) hands Dense the tuple (x, y)
    c = Flux.Chain(Flux.Parallel(lambda *o: o, Flux.Dense(2, 2), Flux.Dense(2, 2)), Flux.Dense(2, 3))
    msg = r"Dense\(2 => 3\) expects one array, got a tuple of 2 items holding arrays of shapes \(2, 5\), \(2, 5\)"
    with pytest.raises(TypeError, match=msg):
        c(jnp.ones((2, 5)))
    with pytest.raises(TypeError, match=r"got a tuple of 2 items: .*Instead, pass jnp.asarray\(x\), or a list"):
        Flux.Dense(2, 3)((1.0, 2.0))  # Flux: no Dense method for a Tuple


@pytest.mark.parametrize(
    "make, x, name",
    [
        (lambda: Flux.Conv((2, 2), (3, 4)), [jnp.ones((5, 5, 3))] * 2, r"Conv\(\(2, 2\), 3 => 4\)"),
        (lambda: Flux.ConvTranspose((2, 2), (3, 4)), (jnp.ones((5, 5, 3, 1)),) * 2, r"ConvTranspose\(\(2, 2\), 3 => 4\)"),
        (lambda: Flux.MaxPool((2, 2)), [jnp.ones((4, 4, 1))] * 3, r"MaxPool\(\(2, 2\)\)"),
        (lambda: Flux.BatchNorm(3), [jnp.ones(3)] * 4, r"BatchNorm\(3\)"),
        (lambda: Flux.InstanceNorm(3), [jnp.ones((4, 3))] * 2, r"InstanceNorm\(3, affine=false\)"),
        (lambda: Flux.GroupNorm(4, 2), [jnp.ones((5, 4))] * 2, r"GroupNorm\(4, 2\)"),
        (lambda: Flux.LayerNorm(3), [jnp.ones(3)] * 2, r"LayerNorm\(3\)"),
        (lambda: Flux.Scale(3), [jnp.ones(3)] * 3, r"Scale\(3\)"),
        (lambda: Flux.Dropout(0.5, active=True), [jnp.ones(3)] * 2, r"Dropout\(0.5, active=true\)"),
        (lambda: Flux.AlphaDropout(0.5), (jnp.ones(3),) * 2, r"AlphaDropout\(0.5\)"),
        (lambda: Flux.Upsample(scale=2), [jnp.ones((2, 2, 1))] * 2, r"Upsample\(:nearest, scale = 2\)"),
        (lambda: Flux.PixelShuffle(2), [jnp.ones((2, 2, 4))] * 2, r"PixelShuffle\(2\)"),
        (lambda: Flux.RNNCell(2, 3), [jnp.ones((2, 5))] * 2, r"RNNCell\(2 => 3, tanh\)"),
        (lambda: Flux.Embedding(4, 3), [jnp.array([0, 1]), jnp.array([2, 3])], r"Embedding\(4 => 3\)"),
    ],
)
def test_every_layer_family_refuses_several_arrays(make, x, name):
    kind = "tuple" if isinstance(x, tuple) else "list"
    with pytest.raises(TypeError, match=rf"Layer {name} expects one array, got a {kind} of {len(x)} items holding arrays") as e:
        make()(x)
    assert re.search(BATCH_FIX, str(e.value)), str(e.value)


@pytest.mark.parametrize("kind", ["RNN", "LSTM", "GRU", "GRUv3"])
def test_recurrent_layers_refuse_a_list_of_time_steps(kind):
    Flux.seed_(1)
    r = getattr(Flux, kind)(2, 3)
    steps = [_f32(2, 5), _f32(2, 5)]  # Flux <= 0.14's habit; len(steps) == in: once read as (in, len, batch)
    with pytest.raises(TypeError, match=rf"Layer {kind}\(2 => 3.*expects one array, got a list of 2 items") as e:
        r(steps)
    assert re.search(STEPS_FIX, str(e.value)) and "(features, time, batch)" in str(e.value)
    with pytest.raises(TypeError, match=rf"{kind}\(2 => 3.*got a tuple of 3 items.*{STEPS_FIX}"):
        r(tuple(steps) + (steps[0],))  # len != in: the message still speaks of the list, not of a size
    # the fix: stepping the cell by hand over the list gives what the stacked sequence gives
    y = r(jnp.stack(steps, axis=1))
    state, outs = Flux.initialstates(r.cell), []
    for s in steps:
        out, state = r.cell(s, state)
        outs.append(out)
    np.testing.assert_allclose(y, np.stack(outs, axis=1), rtol=1e-5, atol=1e-6)


def test_recurrence_of_a_custom_cell_refuses_a_list():
    class Acc:
        def __call__(self, x, h):
            return h + x, h + x

        def initialstates(self):
            return jnp.zeros(2)

    m = Flux.Recurrence(Acc())
    with pytest.raises(TypeError, match=rf"Layer Recurrence\(Acc\) expects one array, got a list of 2 items.*{STEPS_FIX}"):
        m([jnp.ones((2, 5)), jnp.ones((2, 5))])
    np.testing.assert_array_equal(m(jnp.ones((2, 3))), [[1, 2, 3], [1, 2, 3]])


def test_containers_pass_tuples_on_purpose_but_a_list_is_one_input():
    Flux.seed_(2)
    xa, xb = _f32(2, 5), _f32(2, 5)
    p = Flux.Parallel(operator.add, Flux.Dense(2, 4), Flux.Dense(2, 4))
    with pytest.raises(TypeError, match=r"Layer Dense\(2 => 4\) expects one array, got a list of 2 items"):
        p([xa, xb])  # Flux: a Vector is ONE input, which Dense cannot take
    want = p[0](xa) + p[1](xb)
    np.testing.assert_allclose(p((xa, xb)), want, rtol=1e-6)  # a tuple is splatted
    np.testing.assert_allclose(p(xa, xb), want, rtol=1e-6)
    np.testing.assert_allclose(Flux.Chain(p)(xa, xb), want, rtol=1e-6)  # Chain(x, y) passes the tuple on
    f = Flux.PairwiseFusion(operator.add, Flux.Dense(2, 2), Flux.Dense(2, 2))
    assert [y.shape for y in f((xa, xb))] == [(2, 5), (2, 5)]


def test_bilinear_list_says_pass_a_tuple():
    Flux.seed_(3)
    B = Flux.Bilinear((3, 4), 2)
    x, y = _f32(3, 5), _f32(4, 5)
    with pytest.raises(TypeError, match=r"Layer Bilinear\(\(3, 4\) => 2\) expects one array, got a list of 2 items.*"
                                        r"pass the two inputs as a tuple, B\(\(x, y\)\), or as B\(x, y\)"):
        B([x, y])
    np.testing.assert_allclose(B((x, y)), B(x, y), rtol=1e-6)


def test_multihead_attention_tuple_says_pass_q_k_v():
    mha = Flux.MultiHeadAttention(4, nheads=2)
    q = jnp.ones((4, 3, 2))
    with pytest.raises(TypeError, match=r"MultiHeadAttention\(4; nheads=2\) expects one array, got a tuple of 3.*mha\(q, k, v\)"):
        mha((q, q, q))
    y, a = mha(q, q, q)
    assert y.shape == (4, 3, 2) and a.shape == (3, 3, 2, 2)


def test_several_arrays_are_refused_inside_jit_and_gradient():
    d = Flux.Dense(2, 3)
    x1, x2 = jnp.ones(2), jnp.zeros(2)
    with pytest.raises(TypeError, match=r"Dense\(2 => 3\) expects one array, got a list"):
        Flux.jit(lambda m, a, b: m([a, b]))(d, x1, x2)
    with pytest.raises(TypeError, match=r"Dense\(2 => 3\) expects one array, got a list"):
        jax.jit(lambda a, b: d([a, b]))(x1, x2)
    with pytest.raises(TypeError, match=r"Dense\(2 => 3\) expects one array, got a tuple"):
        Flux.gradient(lambda m: jnp.sum(m((x1, x2))), d)


# ---------------------------------------------------------------------------------------------
# Item 4: Embedding takes integers or bools, not floats


def test_embedding_refuses_float_ids():
    Flux.seed_(4)
    e = Flux.Embedding(4, 3)
    ids = jnp.array([0.0, 2.0, 1.0, 3.0])  # len == vocab: once silently W @ ids, a (3,) vector
    msg = r"layer Embedding\(4 => 3\) takes integer indices \(0-based\) or a bool one-hot array, got 4 Vector\{float32\}"
    with pytest.raises(TypeError, match=msg) as err:
        e(ids)
    assert "x.astype(int)" in str(err.value) and "x.astype(bool)" in str(err.value)
    np.testing.assert_array_equal(e(ids.astype(int)), e.weight[:, [0, 2, 1, 3]])  # the fix
    for bad in (2.0, np.float32(1), jnp.ones((4, 2), jnp.float16), jnp.ones((4, 2), jnp.bfloat16),
                jnp.ones(4, jnp.complex64), np.eye(4)):
        with pytest.raises(TypeError, match=r"Embedding\(4 => 3\) takes integer indices"):
            e(bad)
    with pytest.raises(TypeError, match=r"Embedding\(4 => 3\) takes integer indices"):
        jax.jit(e)(ids)
    # integers and bool one-hot arrays keep working
    np.testing.assert_array_equal(e(2), e.weight[:, 2])
    np.testing.assert_array_equal(e([0, 3]), e.weight[:, [0, 3]])
    hot = Flux.onehotbatch([3, 0], range(4))
    np.testing.assert_array_equal(e(hot), e.weight[:, [3, 0]])
    np.testing.assert_array_equal(e(np.eye(4).astype(bool)), e.weight)


def test_embedding_gradient_with_integer_ids_argument():
    # `gradient` first tries an integer argument as a float: Embedding now refuses that with a TypeError,
    # so the ids are held as integers (Zygote's `nothing`), and the float path never runs.
    Flux.seed_(5)
    e = Flux.Embedding(4, 3)
    ids = jnp.array([0, 2, 2, 3])
    with pytest.raises(TypeError, match="takes integer indices"):
        e(ids.astype(jnp.float32))
    ge, gi = Flux.gradient(lambda m, i: jnp.sum(m(i) ** 2), e, ids)
    assert gi is None
    want = np.zeros((3, 4), np.float32)
    for i in [0, 2, 2, 3]:
        want[:, i] += 2 * np.asarray(e.weight[:, i])
    np.testing.assert_allclose(ge.weight, want, rtol=1e-6)


# ---------------------------------------------------------------------------------------------
# Section C: NumPy scalars and 0-d arrays as sizes and probabilities; `active`

N6 = np.prod((2, 3))  # np.int64, the flattened size of an image


@pytest.mark.parametrize(
    "make, text",
    [
        (lambda: Flux.Dense(N6, 3), "Dense(6 => 3)"),
        (lambda: Flux.Dense((N6, np.int32(3)), Flux.relu), "Dense(6 => 3, relu)"),
        (lambda: Flux.BatchNorm(N6), "BatchNorm(6)"),
        (lambda: Flux.InstanceNorm(N6), "InstanceNorm(6, affine=false)"),
        (lambda: Flux.LayerNorm(N6), "LayerNorm(6)"),
        (lambda: Flux.GroupNorm(N6, np.int64(3)), "GroupNorm(6, 3)"),
        (lambda: Flux.Scale(N6, np.int64(2)), "Scale(6, 2)"),
        (lambda: Flux.Embedding(N6, 3), "Embedding(6 => 3)"),
        (lambda: Flux.EmbeddingBag(N6, 3), "EmbeddingBag(6 => 3)"),
        (lambda: Flux.Bilinear(N6, np.int64(4), np.int64(2)), "Bilinear((6, 4) => 2)"),
        (lambda: Flux.Bilinear((N6, 2)), "Bilinear(6 => 2)"),
        (lambda: Flux.MultiHeadAttention(N6, nheads=2), "MultiHeadAttention(6; nheads=2)"),
        (lambda: Flux.PixelShuffle(np.int64(2)), "PixelShuffle(2)"),
        (lambda: Flux.Upsample(scale=np.int64(2)), "Upsample(:nearest, scale = 2)"),
        (lambda: Flux.Upsample("bilinear", scale=(np.float32(1.5), np.int64(2))), "Upsample(:bilinear, scale = (1.5, 2))"),
        (lambda: Flux.Dropout(np.float32(0.5)), "Dropout(0.5)"),
        (lambda: Flux.Dropout(np.float32(0.1), active=True), "Dropout(0.1, active=true)"),
        (lambda: Flux.AlphaDropout(np.float32(0.25)), "AlphaDropout(0.25)"),
        (lambda: Flux.MultiHeadAttention(4, nheads=2, dropout_prob=np.float32(0.1)),
         "MultiHeadAttention(4; nheads=2, dropout_prob=0.1)"),
        (lambda: Flux.Dense(jnp.array(3), 4), "Dense(3 => 4)"),
        (lambda: Flux.Dense(np.array(3), jnp.array(4, jnp.int32)), "Dense(3 => 4)"),
        (lambda: Flux.Embedding(jnp.array(26), 4), "Embedding(26 => 4)"),
        (lambda: Flux.Bilinear(jnp.array(3), 2), "Bilinear(3 => 2)"),
    ],
)
def test_numpy_scalars_and_0d_arrays_are_numbers(make, text):
    m = make()
    assert Flux.show.one_line(m) == text
    # sizes are stored as Python ints (static configuration)
    for v in vars(m).values():
        if isinstance(v, (int, np.integer)) and not isinstance(v, bool):
            assert type(v) is int, (text, v)


def test_layers_built_from_numpy_sizes_compute():
    Flux.seed_(6)
    m = Flux.Chain(Flux.Dense(N6, np.int64(4), Flux.relu), Flux.LayerNorm(np.int64(4)), Flux.Dense(4, 2))
    x = _f32(2, 3, 5)
    assert m(x.reshape(int(N6), -1)).shape == (2, 5)
    d = Flux.trainmode_(Flux.Dropout(np.float32(0.5)))
    y = np.asarray(d(jnp.ones((100,))))
    assert set(np.unique(y)) <= {0.0, 2.0} and 0 < (y == 0).sum() < 100
    assert Flux.Maxout(lambda: Flux.Dense(2, 3), np.int64(3))(jnp.ones(2)).shape == (3,)
    assert len(Flux.Maxout(lambda: Flux.Dense(2, 3), np.int64(3)).layers) == 3


def test_sizes_that_are_not_integers_are_still_refused():
    with pytest.raises(ValueError, match=r"Dense: sizes must be positive integers, got \(2.5, 3\)"):
        Flux.Dense(2.5, 3)
    with pytest.raises(ValueError, match=r"Dense\(W, ...\): W must be a matrix"):
        Flux.Dense(jnp.array(3.0), 4)  # a 0-d FLOAT array is neither a size nor a weight matrix
    with pytest.raises(ValueError, match=r"Dense: sizes must be positive integers"):
        Flux.Dense(np.int64(0), 3)
    with pytest.raises(ValueError, match=r"BatchNorm: the number of channels must be a positive integer, got np.float64\(2.0\)"):
        Flux.BatchNorm(np.float64(2.0))
    with pytest.raises(ValueError, match=r"GroupNorm: chs and G must be positive integers"):
        Flux.GroupNorm(np.int64(4), 0)
    with pytest.raises(ValueError, match=r"Dropout: the drop probability p must be a number in \[0, 1\]"):
        Flux.Dropout(np.float32(1.5))
    with pytest.raises(ValueError, match=r"Dropout: the drop probability"):
        Flux.Dropout(np.True_)
    # and NumPy sizes are accepted exactly where Python ints are
    assert Flux.Dense(np.int64(6), 3).weight.shape == Flux.Dense(6, 3).weight.shape == (3, 6)


@pytest.mark.parametrize(
    "make",
    [
        lambda: Flux.Parallel(jnp.concatenate, Flux.Dense(3, 4), Flux.Dense(3, 2)),
        lambda: Flux.Parallel(np.concatenate, Flux.Dense(3, 4), Flux.Dense(3, 2)),
        lambda: Flux.Parallel(jnp.stack, Flux.Dense(3, 4), Flux.Dense(3, 4)),
        lambda: Flux.SkipConnection(Flux.Dense(3, 4), jnp.concatenate),
        lambda: Flux.PairwiseFusion(jnp.concatenate, Flux.Dense(3, 4), Flux.Dense(7, 2)),
    ],
)
def test_a_sequence_taking_connection_says_how_to_write_it(make):
    m = make()
    fn = "np" if m.connection is np.concatenate else "jnp"
    fn += "." + m.connection.__name__
    msg = (rf"{type(m).__name__}: the connection {re.escape(fn)} takes one sequence of arrays, but it is called with 2 "
           rf"arrays as separate arguments.*lambda \*ys: {re.escape(fn)}\(ys\)")
    with pytest.raises(TypeError, match=msg):
        m(jnp.ones((3, 5)))


def test_the_suggested_connection_works():
    Flux.seed_(8)
    a, b = Flux.Dense(3, 4), Flux.Dense(3, 2)
    x = _f32(3, 5)
    y = Flux.Parallel(lambda *ys: jnp.concatenate(ys), a, b)(x)
    np.testing.assert_array_equal(y, jnp.concatenate([a(x), b(x)]))
    with pytest.raises(TypeError, match="lambda"):
        Flux.Parallel(jnp.concatenate, a, b)(x)


@pytest.mark.parametrize(
    "make",
    [
        lambda active: Flux.BatchNorm(3, active=active),
        lambda active: Flux.InstanceNorm(3, active=active),
        lambda active: Flux.GroupNorm(4, 2, active=active),
        lambda active: Flux.Dropout(0.5, active=active),
        lambda active: Flux.AlphaDropout(0.5, active=active),
    ],
)
def test_active_is_none_true_or_false_only(make):
    for bad in (1, 0, 1.0, np.int64(1), "yes", "auto"):
        with pytest.raises(ValueError, match=r"active must be None \(automatic, Flux's nothing\), True or False, got"):
            make(bad)
    for ok, want in ((None, None), (True, True), (False, False), (np.bool_(True), True), (np.bool_(False), False)):
        m = make(ok)
        assert m.active is want  # a Python bool (or None), whatever was given


def test_dimension_errors_are_unchanged_for_bool_one_hot():
    # the one-hot path still checks its length (a bool array of the wrong number of rows)
    with pytest.raises(DimensionMismatch, match=r"Embedding\(5 => 3\).*size\(input, 1\) == 5"):
        Flux.Embedding(5, 3)(jnp.ones((4, 2), bool))
    with pytest.raises(TypeError, match=r"Embedding\(5 => 3\) takes integer indices"):
        Flux.Embedding(5, 3)(jnp.ones((4, 2)))  # float: the type is refused first
