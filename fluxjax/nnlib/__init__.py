"""NNlib for fluxjax: activations, softmax, conv/pool/upsample/padding and batched products.

Everything is in Flux's layout (batch last, WHCN images, conv weights `(k..., Cin/groups, Cout)`)
and Flux's semantics (`conv` flips the kernel, `SamePad` puts the extra pixel first, bilinear
upsampling aligns corners), over `jax.numpy` / `jax.lax`. `dims` arguments are 0-based:
Flux's `softmax(x; dims=1)` is `softmax(x, dims=0)`, the default; a negative one counts from the end,
and one the array does not have raises (never wraps round). Sizes that do not fit (a kernel larger
than the padded input, a channel count) raise `fluxjax.DimensionMismatch`, as NNlib.
"""

from .activations import (
    celu,
    elu,
    gelu,
    gelu_erf,
    gelu_sigmoid,
    gelu_tanh,
    hardsigmoid,
    hardswish,
    hardtanh,
    leakyrelu,
    lisht,
    logcosh,
    logsigmoid,
    mish,
    relu,
    relu6,
    rrelu,
    selu,
    sigmoid,
    sigmoid_fast,
    softplus,
    softshrink,
    softsign,
    swish,
    tanh,
    tanh_fast,
    tanhshrink,
    thresholdrelu,
    trelu,
)
from .attention import dot_product_attention, dot_product_attention_scores, make_causal_mask
from .audio import (
    db_to_power,
    hamming_window,
    hann_window,
    istft,
    melscale_filterbanks,
    power_to_db,
    spectrogram,
    stft,
)
from .batched import batched_adjoint, batched_mul, batched_transpose, batched_vec
from .conv import (
    conv,
    conv_bias_act,
    conv_output_size,
    conv_transpose,
    conv_transpose_output_size,
    crosscor,
    depthwiseconv,
    grad_conv_data,
    grad_conv_filter,
    same_pad,
)
from .dims import ConvDims, DenseConvDims, DepthwiseConvDims, PoolDims
from .dropout import dropout
from .fold import fold, unfold
from .gather import gather, scatter
from .glu import glu
from .gradients import (
    grad_depthwiseconv_data,
    grad_depthwiseconv_filter,
    grad_lpnormpool,
    grad_maxpool,
    grad_meanpool,
    grad_upsample_bilinear,
    grad_upsample_linear,
    grad_upsample_nearest,
    grad_upsample_trilinear,
)
from .normalise import normalise
from .padding import pad_circular, pad_constant, pad_reflect, pad_repeat, pad_symmetric, pad_zeros
from .pooling import lpnormpool, maxpool, meanpool
from .sampling import grad_grid_sample, grad_imrotate, grid_sample, imrotate
from .softmax import grad_logsoftmax, grad_softmax, logsoftmax, logsumexp, softmax
from .upsample import pixel_shuffle, upsample_bilinear, upsample_linear, upsample_nearest, upsample_trilinear

__all__ = [
    # activations
    "sigmoid", "sigmoid_fast", "hardsigmoid", "logsigmoid", "hardtanh", "relu", "leakyrelu",
    "relu6", "rrelu", "elu", "gelu", "gelu_tanh", "gelu_erf", "gelu_sigmoid", "swish",
    "hardswish", "lisht", "selu", "celu", "trelu", "softplus", "softsign", "logcosh", "mish",
    "tanhshrink", "softshrink", "tanh_fast", "tanh", "thresholdrelu", "glu",
    # softmax, normalise
    "softmax", "logsoftmax", "logsumexp", "grad_softmax", "grad_logsoftmax", "normalise",
    # convolution
    "conv", "conv_bias_act", "crosscor", "depthwiseconv", "conv_transpose", "same_pad", "conv_output_size",
    "conv_transpose_output_size", "grad_conv_data", "grad_conv_filter", "unfold", "fold",
    "grad_depthwiseconv_data", "grad_depthwiseconv_filter",
    "ConvDims", "DenseConvDims", "DepthwiseConvDims", "PoolDims",
    # attention
    "dot_product_attention", "dot_product_attention_scores", "make_causal_mask",
    # audio
    "hann_window", "hamming_window", "stft", "istft", "spectrogram", "power_to_db", "db_to_power",
    "melscale_filterbanks",
    # sampling
    "grid_sample", "grad_grid_sample", "imrotate", "grad_imrotate",
    # gather / scatter
    "gather", "scatter",
    # pooling
    "maxpool", "meanpool", "lpnormpool", "grad_maxpool", "grad_meanpool", "grad_lpnormpool",
    # upsampling
    "upsample_nearest", "upsample_linear", "upsample_bilinear", "upsample_trilinear", "pixel_shuffle",
    "grad_upsample_nearest", "grad_upsample_linear", "grad_upsample_bilinear", "grad_upsample_trilinear",
    # padding
    "pad_zeros", "pad_constant", "pad_repeat", "pad_reflect", "pad_symmetric", "pad_circular",
    # dropout
    "dropout",
    # batched
    "batched_mul", "batched_vec", "batched_transpose", "batched_adjoint",
]
