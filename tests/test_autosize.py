"""`autosize`: Flux's `@autosize` (Flux's own cases are in compat/cases_conv.py `case_autosize`)."""

import copy
import inspect
import pickle

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import fluxjax as Flux
from fluxjax import BatchNorm, Chain, Conv, Dense, autosize, relu
from fluxjax.autosize import LazyLayer


def _walk(x):
    yield x
    if Flux.functors.is_layer(x):
        for v in vars(x).values():
            yield from _walk(v)
    elif isinstance(x, (tuple, list)):
        for v in x:
            yield from _walk(v)
    elif isinstance(x, dict):
        for v in x.values():
            yield from _walk(v)


def test_same_weights_as_the_sizes_written_out():
    Flux.seed_(3)
    a = autosize((3, 7), lambda _: Chain(Dense(_, 4, relu), Dense(_, 2)))
    Flux.seed_(3)
    b = Chain(Dense(3, 4, relu), Dense(4, 2))
    for la, lb in zip(a, b):
        np.testing.assert_array_equal(la.weight, lb.weight)
        np.testing.assert_array_equal(la.bias, lb.bias)
    assert repr(a) == repr(b)


def test_model_holds_real_layers_and_trains():
    m = autosize((8, 8, 2, 4), lambda _: Chain(Conv((3, 3), (_, 3), relu), BatchNorm(_), Flux.flatten, Dense(_, 5)))
    assert not any(isinstance(v, LazyLayer) for v in _walk(m))
    assert all(not isinstance(a, jax.core.Tracer) for a in jax.tree_util.tree_leaves(m))
    assert m[0].weight.shape == (3, 3, 2, 3) and m[1].mu.shape == (3,) and m[3].weight.shape == (5, 108)
    np.testing.assert_array_equal(m[1].mu, np.zeros(3))  # running the abstract input left the state alone
    np.testing.assert_array_equal(m[1].sigma2, np.ones(3))
    x = jnp.asarray(np.random.default_rng(0).standard_normal((8, 8, 2, 4)), jnp.float32)
    opt_state = Flux.setup(Flux.Adam(0.01), m)
    losses = [float(Flux.trainstep_(lambda m, x: jnp.mean(m(x) ** 2), m, x, opt_state)) for _ in range(5)]
    assert losses[-1] < losses[0]


@pytest.mark.parametrize(
    ("size", "build", "field", "want"),
    [
        ((10, 3, 2), lambda _: Conv((3,), (_, 4)), "weight", (3, 3, 4)),  # channels: the 2nd-last dim
        ((5,), lambda _: Flux.Scale(_), "scale", (5,)),
        ((3, 10, 4), lambda _: Flux.LSTM(_, 5), None, None),  # features: the first dim (x.shape[0])
        ((16, 5, 2), lambda _: Flux.MultiHeadAttention(_, nheads=4), None, None),
        ((6, 4), lambda _: Flux.LayerNorm(_), "diag", None),
    ],
)
def test_which_dimension_fills_the_placeholder(size, build, field, want):
    m = autosize(size, build)
    if isinstance(m, Flux.LSTM):
        assert m.cell.Wi.shape == (20, 3)
    elif isinstance(m, Flux.MultiHeadAttention):
        assert m.q_proj.weight.shape == (16, 16)
    elif isinstance(m, Flux.LayerNorm):
        assert m(jnp.ones(size)).shape == size
    else:
        assert getattr(m, field).shape == want


def test_own_layer_chooses_the_feature_dimension():
    @Flux.layer
    class Gate:
        __fluxjax_autosize_dim__ = 0

        def __init__(self, n):
            self.w = jnp.ones(n)

        def __call__(self, x):
            return x * self.w[:, None, None]

    assert autosize((6, 5, 4), lambda _: Gate(_)).w.shape == (6,)


def test_placeholder_arithmetic():
    m = autosize((12, 1), lambda _: Chain(Dense(_, 2 * _ - 4), Dense(_, (_ + 4) // 5), Dense(_, 30 // _)))
    assert [d.weight.shape for d in m] == [(20, 12), (4, 20), (7, 4)]


def test_placeholder_is_not_a_number():
    with pytest.raises(TypeError, match=r"autosize: _ is a size not known until the model runs.*Dense\(_, 10\)"):
        autosize((3, 1), lambda _: Dense(int(_), 4))
    with pytest.raises(TypeError, match=r"autosize: \(_ // 2\) is a size"):
        autosize((3, 1), lambda _: Chain(Dense(3, 4), lambda x: x[: _ // 2]))
    assert Dense(3, 4).weight.shape == (4, 3)  # a failed autosize leaves constructors as they were


def test_layer_never_called_is_an_error():
    @Flux.layer
    class FirstOnly:
        def __init__(self, a, b):
            self.a, self.b = a, b

        def __call__(self, x):
            return self.a(x)

    with pytest.raises(ValueError, match=r"LazyLayer\(Dense\(_, 2\)\) was never called .* size \(3, 1\)"):
        autosize((3, 1), lambda _: FirstOnly(Dense(_, 4), Dense(_, 2)))


def test_bad_arguments():
    with pytest.raises(TypeError, match="build must take one argument, the placeholder `_`"):
        autosize((3, 1), lambda: Dense(3, 4))
    with pytest.raises(TypeError, match="build must be a function of `_`"):
        autosize((3, 1), Dense(3, 4))
    with pytest.raises(TypeError, match=r"autosize: input sizes must be tuples of non-negative ints, got 3"):
        autosize(3, lambda _: Dense(_, 4))
    with pytest.raises(Flux.DimensionMismatch, match="Conv"):
        autosize((3, 1), lambda _: Chain(Dense(_, 4), Conv((3, 3), (_, 2))))


def test_layers_keep_their_signatures_and_still_copy_and_pickle():
    assert list(inspect.signature(Dense).parameters)[:3] == ["a", "b", "c"]  # not autosize's (*args, **kwargs)
    d = Dense(2, 3)
    for c in (copy.copy(d), copy.deepcopy(d), pickle.loads(pickle.dumps(d))):
        assert type(c) is Dense
        np.testing.assert_array_equal(c.weight, d.weight)
