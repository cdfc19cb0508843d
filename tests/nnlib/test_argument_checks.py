"""Wrong arguments to nnlib (and the `dims` of losses, mlutils and `WeightNorm`) raise clear errors,
never a quiet answer along another axis or an empty array; right ones keep their values.

- `dims` are 0-based axes; negative ones count from the end (`-1` is the last). An axis the array
  lacks raises `ValueError` naming the function, the array's shape and the 0-based rule; it used to
  wrap round (`softmax(x, dims=2)` on a matrix normalised axis 0).
- `conv`, `crosscor`, `depthwiseconv`, `conv_transpose`, the pools, `unfold` and `fold` check stride,
  padding and dilation as NNlib's `ConvDims` do (`check_spdf`): a kernel times dilation larger than
  the padded input raises `DimensionMismatch` (it used to give an empty array), and a zero stride or
  dilation a `ValueError` (a raw XLA error before). Negative padding crops, as in NNlib.
- Size errors of nnlib are `fluxjax.DimensionMismatch` (a `ValueError`), not a plain `ValueError`.
"""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import fluxjax as Flux
from fluxjax import DimensionMismatch
from fluxjax import nnlib as N
from fluxjax.losses import crossentropy, kldivergence, logitcrossentropy
from fluxjax.mlutils import chunk, topk, unstack

X23 = np.random.default_rng(0).standard_normal((2, 3)).astype(np.float32)


def _np_softmax(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def _np_logsumexp(x, axis):
    m = x.max(axis=axis, keepdims=True)
    return m + np.log(np.exp(x - m).sum(axis=axis, keepdims=True))


def _np_normalise(x, axis, eps=1e-5):
    mu = x.mean(axis=axis, keepdims=True)
    return (x - mu) / np.sqrt(((x - mu) ** 2).mean(axis=axis, keepdims=True) + eps)


# --- dims: out of range raises, never wraps (REPORT item 2) ----------------------------------------

DIMS_FNS = {
    "softmax": lambda x, d: N.softmax(x, dims=d),
    "logsoftmax": lambda x, d: N.logsoftmax(x, dims=d),
    "logsumexp": lambda x, d: N.logsumexp(x, dims=d),
    "normalise": lambda x, d: N.normalise(x, dims=d),
    "grad_softmax": lambda x, d: N.grad_softmax(jnp.ones_like(x), N.softmax(x), dims=d),
    "grad_logsoftmax": lambda x, d: N.grad_logsoftmax(jnp.ones_like(x), N.logsoftmax(x), dims=d),
    "glu": lambda x, d: N.glu(jnp.ones((4, 4)), d),
    "pad_zeros": lambda x, d: N.pad_zeros(x, 1, dims=d),
    "pad_constant": lambda x, d: N.pad_constant(x, 1, 7.0, dims=d),
    "pad_repeat": lambda x, d: N.pad_repeat(x, (1, 1), dims=d),
    "pad_reflect": lambda x, d: N.pad_reflect(x, (1, 1), dims=d),
    "pad_symmetric": lambda x, d: N.pad_symmetric(x, (1, 1), dims=d),
    "pad_circular": lambda x, d: N.pad_circular(x, (1, 1), dims=d),
    "dropout": lambda x, d: N.dropout(jax.random.PRNGKey(0), x, 0.5, dims=d),
    "make_causal_mask": lambda x, d: N.make_causal_mask(x, dims=d),
}


@pytest.mark.parametrize("fn", sorted(DIMS_FNS))
@pytest.mark.parametrize("dims", [2, 5, -3])
def test_dims_past_the_axes_raise_naming_the_function(fn, dims):
    # Julia's softmax(x; dims=2) ported without the 0-based shift used to normalise axis 0 (2 % 2).
    shape = re.escape("(4, 4)" if fn == "glu" else "(2, 3)")
    with pytest.raises(ValueError, match=rf"^{fn}: dims={dims} is not an axis of x, which has shape {shape}.*0-based"):
        DIMS_FNS[fn](jnp.asarray(X23), dims)


@pytest.mark.parametrize("fn", ["softmax", "logsoftmax", "logsumexp", "normalise", "pad_zeros", "dropout"])
def test_a_tuple_of_dims_is_checked_entry_by_entry(fn):
    with pytest.raises(ValueError, match=rf"^{fn}: dims=\(0, 2\) names 2, which is not an axis"):
        DIMS_FNS[fn](jnp.asarray(X23), (0, 2))
    with pytest.raises(ValueError, match=rf"^{fn}: dims=\[-3\] names -3"):
        DIMS_FNS[fn](jnp.asarray(X23), [-3])


@pytest.mark.parametrize("fn", ["softmax", "glu", "pad_zeros", "make_causal_mask"])
def test_dims_that_are_not_ints_raise_type_error(fn):
    # int(1.0) and True used to pass as axis 1
    for bad in (1.0, True, "1"):
        with pytest.raises(TypeError, match=rf"^{fn}: dims must be an int"):
            DIMS_FNS[fn](jnp.asarray(X23), bad)


def test_softmax_family_negative_and_tuple_dims_keep_numpy_values():
    x = np.random.default_rng(1).standard_normal((3, 4, 2)).astype(np.float32)
    with pytest.raises(ValueError, match="softmax: dims=3"):
        N.softmax(x, dims=3)
    for dims, axis in [(-1, -1), (-3, 0), ((-2, -1), (1, 2)), ((0, -3), 0), ((2, 0), (0, 2))]:
        np.testing.assert_allclose(N.softmax(x, dims=dims), _np_softmax(x, axis), rtol=1e-5, atol=1e-7)
        np.testing.assert_allclose(N.logsoftmax(x, dims=dims), np.log(_np_softmax(x, axis)), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(N.logsumexp(x, dims=dims), _np_logsumexp(x, axis), rtol=1e-5)
        np.testing.assert_allclose(N.normalise(x, dims=dims), _np_normalise(x, axis), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(N.normalise(x), _np_normalise(x, -1), rtol=1e-4, atol=1e-5)  # default: the last axis
    assert N.logsumexp(x, dims=5 - 6).shape == (3, 4, 1)


def test_softmax_dims_checked_under_jit_and_gradient():
    with pytest.raises(ValueError, match="softmax: dims=2 is not an axis"):
        jax.jit(lambda x: N.softmax(x, dims=2))(X23)
    with pytest.raises(ValueError, match="logsoftmax: dims=-3 is not an axis"):
        Flux.gradient(lambda x: N.logsoftmax(x, dims=-3).sum(), jnp.asarray(X23))
    g = jax.jit(lambda x: N.softmax(x, dims=-1))(X23)
    np.testing.assert_allclose(g, _np_softmax(X23, 1), rtol=1e-6)


def test_glu_checks_its_axis_and_keeps_negative_values():
    x = np.arange(24.0, dtype=np.float32).reshape(2, 4, 3) / 10
    with pytest.raises(ValueError, match=r"^glu: dims=3 is not an axis of x, which has shape \(2, 4, 3\)"):
        N.glu(x, 3)
    with pytest.raises(ValueError, match=r"^glu: dims=-4"):
        N.glu(x, -4)
    a, b = x[:, :2], x[:, 2:]
    want = a / (1 + np.exp(-b))
    np.testing.assert_allclose(N.glu(x, -2), want, rtol=1e-6)
    np.testing.assert_allclose(N.glu(x, 1), want, rtol=1e-6)


def test_padding_dims_checked_and_kept_in_order():
    x = np.arange(6.0, dtype=np.float32).reshape(2, 3)
    with pytest.raises(ValueError, match=r"^pad_zeros: dims=5 is not an axis of x, which has shape \(2, 3\)"):
        N.pad_zeros(x, 1, dims=5)  # used to pad axis 1
    with pytest.raises(ValueError, match=r"^pad_constant: dims=\(0, -2\) names an axis twice"):
        N.pad_constant(x, (1, 2), dims=(0, -2))
    np.testing.assert_array_equal(N.pad_constant(x, (1, 2, 3, 0), 9, dims=(-1, 0)),
                                  np.pad(x, [(3, 0), (1, 2)], constant_values=9))
    np.testing.assert_array_equal(N.pad_zeros(x, (2, 1), dims=-1), np.pad(x, [(0, 0), (2, 1)]))
    np.testing.assert_array_equal(N.pad_repeat(x, (1, 2), dims=-2), np.pad(x, [(1, 2), (0, 0)], mode="edge"))


def test_make_causal_mask_needs_the_axis():
    with pytest.raises(ValueError, match=r"^make_causal_mask: dims=1 is not an axis of x, which has shape \(3,\): its one axis"):
        N.make_causal_mask(jnp.ones(3))  # used to be a raw IndexError
    np.testing.assert_array_equal(N.make_causal_mask(jnp.ones(3), dims=0), np.triu(np.ones((3, 3), bool)))
    np.testing.assert_array_equal(N.make_causal_mask(jnp.ones((2, 4, 3)), dims=-2), np.triu(np.ones((4, 4), bool)))


def test_weight_norm_dims_checked_against_the_weight():
    d = Flux.Dense(3, 4)
    with pytest.raises(ValueError, match=r"^WeightNorm: dims=2 is not an axis of the 'weight' field, which has shape \(4, 3\)"):
        Flux.WeightNorm(d, dims=2)  # Flux's "in" axis dims=2, which used to normalise axis 0
    with pytest.raises(ValueError, match=r"^WeightNorm: dims=\(0, -3\) names -3"):
        Flux.WeightNorm(d, dims=(0, -3))
    w = np.asarray(d.weight)
    for dims, axis in [(-1, 1), (1, 1), (-2, 0), ((0, -1), (0, 1)), (None, (0, 1))]:
        wn = Flux.WeightNorm(d, dims=dims)
        np.testing.assert_allclose(wn.g, np.sqrt((w ** 2).sum(axis=axis, keepdims=True)), rtol=1e-5)
        np.testing.assert_allclose(wn(jnp.ones((3, 2))), d(jnp.ones((3, 2))), rtol=1e-5, atol=1e-6)


def test_loss_and_mlutils_dims_share_the_check():
    yhat, y = jnp.full((3, 2), 0.5), jnp.eye(3)[:, :2]
    with pytest.raises(ValueError, match=r"^crossentropy: dims=5 is not an axis of ŷ, which has shape \(3, 2\).*0-based"):
        crossentropy(yhat, y, dims=5)
    with pytest.raises(ValueError, match=r"^logitcrossentropy: dims=\(0, 4\) names 4"):
        logitcrossentropy(yhat, y, dims=(0, 4))
    np.testing.assert_allclose(crossentropy(yhat, y, dims=-2), crossentropy(yhat, y, dims=0), rtol=1e-6)
    x = jnp.arange(6).reshape(2, 3)
    with pytest.raises(ValueError, match=r"^chunk: dims=2 is not an axis of x, which has shape \(2, 3\)"):
        chunk(x, 2, dims=2)
    with pytest.raises(ValueError, match=r"^unstack: dims=-3 is not an axis"):
        unstack(x, -3)
    with pytest.raises(ValueError, match=r"^topk: dims=2 is not an axis"):
        topk(x, 1, 2)
    assert [np.asarray(c).tolist() for c in chunk(x, 2, dims=-2)] == [[[0, 1, 2]], [[3, 4, 5]]]
    assert [np.asarray(c).tolist() for c in unstack(x, -1)] == [[0, 3], [1, 4], [2, 5]]


# --- conv and pooling sizes are checked as NNlib's ConvDims check them (REPORT item 3) ---------------

X = jnp.ones((2, 2, 2, 1))
W = jnp.ones((3, 3, 2, 4))
KERNEL_TOO_BIG = {
    "conv": lambda: N.conv(X, W),
    "crosscor": lambda: N.crosscor(X, W),
    "depthwiseconv": lambda: N.depthwiseconv(X, jnp.ones((3, 3, 1, 2))),
    "maxpool": lambda: N.maxpool(X, (3, 3)),
    "meanpool": lambda: N.meanpool(X, (3, 3)),
    "lpnormpool": lambda: N.lpnormpool(X, 2, (3, 3)),
    "unfold": lambda: N.unfold(X, (3, 3, 2, 4)),
    "fold": lambda: N.fold(jnp.ones((0, 18, 1)), (2, 2, 2, 1), (3, 3, 2, 4)),
    "grad_conv_data": lambda: N.grad_conv_data(jnp.ones((0, 0, 4, 1)), W, X.shape),
    "conv_output_size": lambda: N.conv_output_size((2, 2), (3, 3)),
}


@pytest.mark.parametrize("fn", sorted(KERNEL_TOO_BIG))
def test_kernel_larger_than_padded_input_raises_dimension_mismatch(fn):
    # used to return an array of shape (0, 0, ...) (or sizes (0, 0))
    with pytest.raises(DimensionMismatch, match=rf"^{fn}: Kernel \* dilation \(\(3 - 1\) \* 1 \+ 1\) cannot be larger "
                                                rf"than input \+ padding \(2 \+ 0 \+ 0\)! That is spatial dim 0"):
        KERNEL_TOO_BIG[fn]()


def test_dilation_and_padding_decide_whether_the_kernel_fits():
    x = jnp.asarray(np.random.default_rng(2).standard_normal((5, 6, 2, 1)), jnp.float32)
    w = jnp.asarray(np.random.default_rng(3).standard_normal((3, 3, 2, 4)), jnp.float32)
    with pytest.raises(DimensionMismatch, match=r"^conv: Kernel \* dilation \(\(3 - 1\) \* 3 \+ 1\) .* \(5 \+ 0 \+ 0\)"):
        N.conv(x, w, dilation=3)  # 7 > 5
    with pytest.raises(DimensionMismatch, match=r"\(6 \+ 0 \+ 0\)! That is spatial dim 1 "):
        N.conv(x, w, dilation=(2, 4), pad=(1, 0))  # dim 0: 5 + 2 >= 5 fits; dim 1: 9 > 6
    with pytest.raises(DimensionMismatch, match=r"^maxpool: Kernel \* dilation \(\(2 - 1\) \* 5 \+ 1\)"):
        N.maxpool(x, 2, dilation=5)
    # where the kernel just fits, the keyword path equals the DenseConvDims / PoolDims path
    y = N.conv(x, w, pad=1, dilation=3)
    assert y.shape == (1, 2, 4, 1)
    np.testing.assert_array_equal(y, N.conv(x, w, N.DenseConvDims(x, w, padding=1, dilation=3)))
    np.testing.assert_array_equal(N.maxpool(x, 3, pad=(1, 0, 0, 0), stride=2),
                                  N.maxpool(x, N.PoolDims(x, 3, padding=(1, 0, 0, 0), stride=2)))
    assert N.conv_output_size((5, 6), (3, 3), pad=1, dilation=3) == (1, 2)


BAD_GEOMETRY = {
    "conv": lambda **kw: N.conv(jnp.ones((8, 8, 2, 1)), W, **kw),
    "crosscor": lambda **kw: N.crosscor(jnp.ones((8, 8, 2, 1)), W, **kw),
    "depthwiseconv": lambda **kw: N.depthwiseconv(jnp.ones((8, 8, 2, 1)), jnp.ones((3, 3, 1, 2)), **kw),
    "conv_transpose": lambda **kw: N.conv_transpose(jnp.ones((4, 4, 4, 1)), W, **kw),
    "maxpool": lambda **kw: N.maxpool(jnp.ones((8, 8, 2, 1)), (2, 2), **kw),
    "meanpool": lambda **kw: N.meanpool(jnp.ones((8, 8, 2, 1)), (2, 2), **kw),
    "lpnormpool": lambda **kw: N.lpnormpool(jnp.ones((8, 8, 2, 1)), 2, (2, 2), **kw),
    "unfold": lambda **kw: N.unfold(jnp.ones((8, 8, 2, 1)), (3, 3, 2, 4), **kw),
    "grad_conv_data": lambda **kw: N.grad_conv_data(jnp.ones((6, 6, 4, 1)), W, **kw),
    "grad_conv_filter": lambda **kw: N.grad_conv_filter(jnp.ones((8, 8, 2, 1)), jnp.ones((6, 6, 4, 1)), **kw),
}


@pytest.mark.parametrize("fn", sorted(BAD_GEOMETRY))
@pytest.mark.parametrize("kw, what", [
    (dict(stride=0), r"stride must be >= 1 in every spatial dim, got 0"),
    (dict(stride=(1, -2)), r"stride must be >= 1 in every spatial dim, got \(1, -2\)"),
    (dict(dilation=0), r"dilation must be >= 1 in every spatial dim, got 0"),
    (dict(dilation=(1, -1)), r"dilation must be >= 1 in every spatial dim, got \(1, -1\)"),
])
def test_zero_stride_or_dilation_raises(fn, kw, what):
    # used to be a raw XLA verifier error or a reduce_window TypeError
    with pytest.raises(ValueError, match=rf"^{fn}: {what}"):
        BAD_GEOMETRY[fn](**kw)


@pytest.mark.parametrize("fn", ["conv", "maxpool", "conv_transpose"])
def test_geometry_of_the_wrong_length_is_a_dimension_mismatch(fn):
    with pytest.raises(DimensionMismatch, match=rf"^{fn}: stride \(1, 2, 3\) has 3 entries, it should have 2: one per spatial dim"):
        BAD_GEOMETRY[fn](stride=(1, 2, 3))
    with pytest.raises(DimensionMismatch, match=rf"^{fn}: padding \(1, 2, 3\) has 3 entries, it should have 2 or 4"):
        BAD_GEOMETRY[fn](pad=(1, 2, 3))
    with pytest.raises(TypeError, match=rf"^{fn}: stride must be an int or a tuple of ints, got 1.5"):
        BAD_GEOMETRY[fn](stride=1.5)  # int(1.5) used to truncate it to 1


def test_conv_dims_objects_refuse_the_same_geometry():
    x = jnp.ones((8, 8, 2, 1))
    with pytest.raises(ValueError, match=r"^PoolDims: stride must be >= 1"):
        N.PoolDims(x, 2, stride=0)  # used to be a ZeroDivisionError
    with pytest.raises(ValueError, match=r"^DenseConvDims: stride must be >= 1 in every spatial dim, got \(1, 0\)"):
        N.DenseConvDims(x, W, stride=(1, 0))
    with pytest.raises(ValueError, match=r"^DepthwiseConvDims: dilation must be >= 1"):
        N.DepthwiseConvDims(x, jnp.ones((3, 3, 1, 2)), dilation=0)
    with pytest.raises(DimensionMismatch, match=r"^PoolDims: Kernel \* dilation"):
        N.PoolDims(x, 9)


def test_negative_padding_crops_as_nnlib_and_counts_in_the_fit():
    # NNlib's im2col reads x at (o-1)*s - pad + 1 + ...: a negative pad crops; Flux's ConvTranspose with
    # SamePad() and stride > kernel size makes one. The kernel must still fit in what is left.
    x = jnp.asarray(np.random.default_rng(4).standard_normal((8, 7, 2, 1)), jnp.float32)
    with pytest.raises(DimensionMismatch, match=r"^conv: Kernel \* dilation \(\(3 - 1\) \* 1 \+ 1\) .* \(4 \+ -1 \+ -1\)"):
        N.conv(x[:4], W, pad=-1)  # used to be an empty (0, 3, 4, 1) array
    with pytest.raises(DimensionMismatch, match=r"^maxpool: Kernel .* \(7 \+ -3 \+ -3\)! That is spatial dim 1"):
        N.maxpool(x, 2, pad=-3)
    np.testing.assert_allclose(N.conv(x, W, pad=-1), N.conv(x[1:-1, 1:-1], W), rtol=1e-6)
    np.testing.assert_allclose(N.conv(x, W, pad=-1), N.conv(x, W, N.DenseConvDims(x, W, padding=-1)), rtol=1e-6)
    np.testing.assert_array_equal(N.maxpool(x, 2, pad=(-1, 0, 0, -1)), N.maxpool(x[1:, :-1], 2))
    assert N.conv_transpose(jnp.ones((6, 2, 1)), jnp.ones((1, 3, 2)), stride=3, pad=-1).shape == (18, 3, 1)


def test_pool_window_must_be_positive():
    x = jnp.ones((4, 4, 1, 1))
    for k in (0, (2, -1)):
        with pytest.raises(ValueError, match=r"^maxpool: kernel size must be >= 1 in every spatial dim"):
            N.maxpool(x, k)
    with pytest.raises(ValueError, match=r"^meanpool: kernel size must be >= 1"):
        N.meanpool(x, (0, 2), stride=1)


def test_conv_transpose_padding_that_crops_everything_raises():
    x, w = jnp.ones((2, 2, 4, 1)), jnp.ones((3, 3, 2, 4))
    with pytest.raises(DimensionMismatch, match=r"^conv_transpose: padding 2 crops the whole output: .* give \(4, 4\)"):
        N.conv_transpose(x, w, pad=2)  # used to be a raw lax error about negative padding
    with pytest.raises(DimensionMismatch, match=r"^conv_transpose_output_size: padding \(0, 0, 3, 1\) crops"):
        N.conv_transpose_output_size((2, 2), (3, 3), pad=(0, 0, 3, 1))
    assert N.conv_transpose(x, w, pad=(1, 1, 2, 1)).shape == (2, 1, 2, 1)
    assert N.conv_transpose_output_size((2, 2), (3, 3), pad=(1, 1, 2, 1)) == (2, 1)
    with pytest.raises(DimensionMismatch, match=r"^conv_transpose needs 0 <= outpad < stride"):
        N.conv_transpose(x, w, stride=2, outpad=2)


@pytest.mark.parametrize("groups", [0, -2, 1.0, True])
def test_groups_must_be_a_positive_int(groups):
    x, w = jnp.ones((5, 5, 4, 1)), jnp.ones((3, 3, 2, 4))
    for fn, f in [("conv", lambda: N.conv(x, w, groups=groups)), ("crosscor", lambda: N.crosscor(x, w, groups=groups)),
                  ("conv_transpose", lambda: N.conv_transpose(jnp.ones((5, 5, 4, 1)), w, groups=groups)),
                  ("grad_conv_filter", lambda: N.grad_conv_filter(x, jnp.ones((3, 3, 4, 1)), groups=groups))]:
        with pytest.raises(ValueError, match=rf"^{fn}: groups must be a positive int, got {groups!r}"):
            f()


def test_jit_and_layers_see_the_same_checks():
    with pytest.raises(DimensionMismatch, match="^conv: Kernel"):
        jax.jit(lambda x: N.conv(x, W))(X)
    with pytest.raises(DimensionMismatch, match="^meanpool: Kernel"):
        jax.jit(lambda x: N.meanpool(x, 3))(X)
    # valid calls keep their values: the direct loop for a strided, padded, dilated 1-d conv
    x = np.arange(1.0, 9.0, dtype=np.float32).reshape(8, 1, 1)
    w = np.array([1.0, 10.0, 100.0], np.float32).reshape(3, 1, 1)
    xp = np.pad(x[:, 0, 0], (2, 1))
    want = [sum(xp[o * 2 + k * 2] * w[2 - k, 0, 0] for k in range(3)) for o in range(4)]  # (8 + 3 - 5) ÷ 2 + 1 outputs
    np.testing.assert_allclose(N.conv(x, w, stride=2, pad=(2, 1), dilation=2)[:, 0, 0], want)


# --- nnlib's size errors are DimensionMismatch (REPORT section C) -----------------------------------

SIZE_ERRORS = {
    "conv channels": lambda: N.conv(jnp.ones((8, 8, 3, 1)), W),
    "conv rank": lambda: N.conv(jnp.ones((8, 3, 1)), W),
    "conv stride entries": lambda: N.conv(jnp.ones((8, 8, 2, 1)), W, stride=(1, 1, 1)),
    "conv_bias_act biases": lambda: N.conv_bias_act(jnp.ones((8, 8, 2, 1)), W, jnp.ones(3)),
    "depthwiseconv weight": lambda: N.depthwiseconv(jnp.ones((8, 8, 2, 1)), jnp.ones((3, 3, 2, 3))),
    "conv_transpose channels": lambda: N.conv_transpose(jnp.ones((4, 4, 3, 1)), W),
    "maxpool rank": lambda: N.maxpool(jnp.ones((4, 4)), 2),
    "unfold rank": lambda: N.unfold(jnp.ones((4, 4)), (2, 2)),
    "unfold channels": lambda: N.unfold(jnp.ones((4, 4, 2, 1)), (2, 2, 3, 1)),
    "fold y": lambda: N.fold(jnp.ones((5, 8, 1)), (4, 4, 2, 1), (2, 2, 2, 1)),
    "grad_conv_data dy": lambda: N.grad_conv_data(jnp.ones((5, 5, 4, 1)), W, (8, 8)),
    "grad_conv_filter channels": lambda: N.grad_conv_filter(jnp.ones((7, 7, 3, 1)), jnp.ones((5, 5, 4, 1)), groups=2),
    "grad_maxpool dy": lambda: N.grad_maxpool(jnp.ones((3, 3, 1, 1)), jnp.ones((2, 2, 1, 1)), jnp.ones((4, 4, 1, 1)), 2),
    "grad_depthwiseconv_filter": lambda: N.grad_depthwiseconv_filter(jnp.ones((5, 5, 2, 1)), jnp.ones((3, 3, 3, 1)), (3, 3)),
    "grid_sample grid": lambda: N.grid_sample(jnp.ones((4, 4, 1, 1)), jnp.ones((3, 4, 4, 1))),
    "grad_imrotate dy": lambda: N.grad_imrotate(jnp.ones((3, 3, 1, 1)), jnp.ones((4, 4, 1, 1)), 0.5),
}


@pytest.mark.parametrize("case", sorted(SIZE_ERRORS))
def test_nnlib_size_errors_are_dimension_mismatch(case):
    with pytest.raises(DimensionMismatch) as e:
        SIZE_ERRORS[case]()
    assert not str(e.value).startswith("DimensionMismatch:")  # the class says it; the message names the function
    assert isinstance(e.value, ValueError)  # `except ValueError` keeps working


# --- padding and scalar labels -----------------------------------------------------------------------

@pytest.mark.parametrize("fn", ["pad_zeros", "pad_constant", "pad_repeat", "pad_reflect", "pad_symmetric", "pad_circular"])
def test_negative_padding_raises(fn):
    f = getattr(N, fn)
    x = jnp.ones((4, 4, 1, 1))
    with pytest.raises(ValueError, match=rf"^{fn}: padding must be >= 0, got -1; to crop"):
        f(x, -1)  # used to be numpy's "index can't contain negative values"
    with pytest.raises(ValueError, match=rf"^{fn}: padding must be >= 0, got \(1, -2\)"):
        f(x, (1, -2), dims=0)


def test_reflecting_modes_pad_at_most_what_the_axis_holds():
    x = np.arange(4.0, dtype=np.float32)
    # NNlib copies slices of x (a BoundsError past them); numpy's modes would reflect again, quietly
    for fn, most, mode in [("pad_reflect", 3, "reflect"), ("pad_symmetric", 4, "symmetric"), ("pad_circular", 4, "wrap")]:
        f = getattr(N, fn)
        with pytest.raises(ValueError, match=rf"^{fn}: padding \({most + 1}, 0\) on axis 0 .* more than its {most} available"):
            f(x, (most + 1, 0))
        np.testing.assert_array_equal(f(x, (most, 1)), np.pad(x, (most, 1), mode=mode))
    np.testing.assert_array_equal(N.pad_repeat(x, (9, 0)), np.pad(x, (9, 0), mode="edge"))


def test_kldivergence_with_a_scalar_label_says_what_to_pass():
    yhat = jnp.full((3, 4), 0.25)
    for y in (jnp.array(1.0), 0.5):
        with pytest.raises(DimensionMismatch, match=r"^kldivergence expects y of size\(ŷ\) = \(3, 4\).*got a scalar"):
            kldivergence(yhat, y)  # used to be "axis 0 is out of bounds for array of dimension 0"
    y = jnp.full((3, 4), 1 / 3)
    want = np.mean(np.sum(y * np.log(y), axis=0) - np.sum(y * np.log(yhat + np.finfo(np.float32).eps), axis=0))
    np.testing.assert_allclose(kldivergence(yhat, y), want, rtol=1e-5)
    np.testing.assert_allclose(kldivergence(yhat, jnp.broadcast_to(0.25, (3, 4)), dims=-2),
                               kldivergence(yhat, jnp.full((3, 4), 0.25)), rtol=1e-6)


X44 = jnp.arange(16.0).reshape(4, 4, 1, 1)


@pytest.mark.parametrize("call, name, what", [
    (lambda: N.upsample_nearest(X44, (1.5, 1.5)), "upsample_nearest", "scale"),  # was X44 unchanged
    (lambda: N.upsample_nearest(X44, (2.7, 2)), "upsample_nearest", "scale"),  # was (8, 8) output
    (lambda: N.upsample_nearest(X44, 2.7), "upsample_nearest", "scale"),  # was 'float' not iterable
    (lambda: N.upsample_nearest(X44, size=(8.0, 8)), "upsample_nearest", "size"),
    (lambda: N.upsample_bilinear(X44, size=(5.9, 5)), "upsample_linear", "size"),  # was (5, 5)
    (lambda: N.upsample_trilinear(X44[..., None], size=(5.5, 5, 1)), "upsample_linear", "size"),
    (lambda: N.pad_zeros(jnp.ones(3), (1.5, 1)), "pad_zeros", "pad"),  # was shape (5,)
    (lambda: N.pad_constant(jnp.ones(3), 1.5, 2.0), "pad_constant", "pad"),
    (lambda: N.pad_reflect(X44, (1.0, 1, 1, 1)), "pad_reflect", "pad"),
    (lambda: N.pad_circular(X44, 1.5), "pad_circular", "pad"),
    (lambda: N.scatter(jnp.add, jnp.ones(3), jnp.array([0, 1, 2]), dstsize=(5.5,)), "scatter", "dstsize"),
    (lambda: N.scatter(jnp.add, jnp.ones(3), jnp.array([0, 1, 2]), dstsize=5.5), "scatter", "dstsize"),
    (lambda: N.same_pad(2.5), "same_pad", "the kernel size"),
])
def test_sizes_scales_and_paddings_must_be_integers(call, name, what):
    """NNlib takes `Integer`s there (a float is a MethodError); fluxjax called `int()` on them and gave
    a truncated size, a plausible shape, with no error."""
    with pytest.raises(TypeError, match=rf"^{name}: {what} must be an int or a tuple of ints, got "):
        call()


def test_integer_sizes_of_every_kind_keep_their_values():
    x = np.asarray(X44)
    np.testing.assert_array_equal(N.upsample_nearest(X44, (np.int64(2), 1)), np.repeat(x, 2, axis=0))
    np.testing.assert_array_equal(N.upsample_nearest(X44, 2), np.repeat(np.repeat(x, 2, axis=0), 2, axis=1))
    assert N.upsample_nearest(X44, (2,)).shape == (8, 4, 1, 1)  # a 1-tuple scales the first axis only
    assert N.upsample_nearest(X44, size=[8, 12]).shape == (8, 12, 1, 1)
    assert N.upsample_bilinear(X44, (1.5, 1.5)).shape == (6, 6, 1, 1)  # a real scale is NNlib's too
    assert N.upsample_bilinear(X44, size=(jnp.array(5), 6)).shape == (5, 6, 1, 1)
    np.testing.assert_array_equal(N.pad_zeros(jnp.array([1.0, 2.0]), jnp.array(1)), [0, 1, 2, 0])
    np.testing.assert_array_equal(N.pad_zeros(jnp.array([1.0, 2.0]), [np.int32(1), 2]), [0, 1, 2, 0, 0])
    np.testing.assert_array_equal(N.scatter(jnp.add, jnp.ones(3), jnp.array([0, 1, 1]), dstsize=np.int64(4)),
                                  [1, 2, 0, 0])
    assert N.same_pad((4, np.int64(3))) == (2, 1, 1, 1)
