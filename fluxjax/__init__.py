"""fluxjax: the Flux.jl / Zygote.jl programming model on JAX.

`import fluxjax as Flux` makes a ported Flux script read naturally; `fluxjax.zygote` serves as Zygote,
`fluxjax.optimise` as Optimisers, `fluxjax.nnlib` as NNlib, `fluxjax.losses` as Flux.Losses.
"""

from . import losses as losses
from . import nnlib as nnlib
from . import optimise as optimise
from . import parallel as parallel
from . import zygote as zygote
from .data import DataLoader as DataLoader
from .data import flatten as flatten
from .data import onecold as onecold

# Data
from .data import onehot as onehot
from .data import onehotbatch as onehotbatch

# Optimisers.jl's flat views (re-exported by Flux)
from .destructure import Restructure as Restructure
from .destructure import destructure as destructure
from .destructure import trainables as trainables

# Precision and devices
from .devices import CPUDevice as CPUDevice
from .devices import cpu as cpu
from .devices import cpu_device as cpu_device
from .devices import f16 as f16
from .devices import f32 as f32
from .devices import f64 as f64
from .devices import gpu as gpu
from .devices import gpu_device as gpu_device

# Errors
from .errors import DimensionMismatch as DimensionMismatch
from .functors import children as children
from .functors import flux_modules as _flux_modules
from .functors import fmap as fmap

# Layer system
from .functors import layer as layer
from .functors import trainable as trainable
from .init import glorot_normal as glorot_normal

# Initialisers
from .init import glorot_uniform as glorot_uniform
from .init import identity_init as identity_init
from .init import kaiming_normal as kaiming_normal
from .init import kaiming_uniform as kaiming_uniform
from .init import lecun_normal as lecun_normal
from .init import ones32 as ones32
from .init import orthogonal as orthogonal
from .init import rand32 as rand32
from .init import randn32 as randn32
from .init import sparse_init as sparse_init
from .init import truncated_normal as truncated_normal
from .init import zeros32 as zeros32

# Layers: convolution, pooling, upsampling, containers, attention
from .layers.attention import MultiHeadAttention as MultiHeadAttention
from .layers.basic import Chain as Chain

# Layers: basic
from .layers.basic import Dense as Dense
from .layers.basic import activations as activations
from .layers.containers import Maxout as Maxout
from .layers.containers import PairwiseFusion as PairwiseFusion
from .layers.containers import Parallel as Parallel
from .layers.containers import SkipConnection as SkipConnection
from .layers.conv import Conv as Conv
from .layers.conv import ConvTranspose as ConvTranspose
from .layers.conv import CrossCor as CrossCor
from .layers.conv import DepthwiseConv as DepthwiseConv
from .layers.conv import SamePad as SamePad
from .layers.dense_like import Bilinear as Bilinear
from .layers.dense_like import Embedding as Embedding
from .layers.dense_like import Scale as Scale
from .layers.embedding_bag import EmbeddingBag as EmbeddingBag
from .layers.normalise import AlphaDropout as AlphaDropout

# Layers: normalisation
from .layers.normalise import BatchNorm as BatchNorm
from .layers.normalise import Dropout as Dropout
from .layers.normalise import GroupNorm as GroupNorm
from .layers.normalise import InstanceNorm as InstanceNorm
from .layers.normalise import LayerNorm as LayerNorm
from .layers.pooling import AdaptiveMaxPool as AdaptiveMaxPool
from .layers.pooling import AdaptiveMeanPool as AdaptiveMeanPool
from .layers.pooling import GlobalMaxPool as GlobalMaxPool
from .layers.pooling import GlobalMeanPool as GlobalMeanPool
from .layers.pooling import MaxPool as MaxPool
from .layers.pooling import MeanPool as MeanPool
from .layers.recurrent import GRU as GRU
from .layers.recurrent import LSTM as LSTM
from .layers.recurrent import RNN as RNN
from .layers.recurrent import GRUCell as GRUCell
from .layers.recurrent import GRUv3 as GRUv3
from .layers.recurrent import GRUv3Cell as GRUv3Cell
from .layers.recurrent import LSTMCell as LSTMCell
from .layers.recurrent import Recurrence as Recurrence

# Layers: recurrent
from .layers.recurrent import RNNCell as RNNCell
from .layers.recurrent import initialstates as initialstates
from .layers.upsample import PixelShuffle as PixelShuffle
from .layers.upsample import Upsample as Upsample
from .nnlib import batched_adjoint as batched_adjoint
from .nnlib import batched_mul as batched_mul
from .nnlib import batched_transpose as batched_transpose
from .nnlib import celu as celu
from .nnlib import conv as conv
from .nnlib import conv_output_size as conv_output_size
from .nnlib import conv_transpose as conv_transpose
from .nnlib import conv_transpose_output_size as conv_transpose_output_size
from .nnlib import crosscor as crosscor
from .nnlib import depthwiseconv as depthwiseconv
from .nnlib import elu as elu
from .nnlib import gelu as gelu
from .nnlib import gelu_erf as gelu_erf
from .nnlib import gelu_sigmoid as gelu_sigmoid
from .nnlib import gelu_tanh as gelu_tanh
from .nnlib import hardsigmoid as hardsigmoid
from .nnlib import hardswish as hardswish
from .nnlib import hardtanh as hardtanh
from .nnlib import leakyrelu as leakyrelu
from .nnlib import lisht as lisht
from .nnlib import logcosh as logcosh
from .nnlib import logsigmoid as logsigmoid
from .nnlib import logsoftmax as logsoftmax
from .nnlib import logsumexp as logsumexp
from .nnlib import lpnormpool as lpnormpool
from .nnlib import maxpool as maxpool
from .nnlib import meanpool as meanpool
from .nnlib import mish as mish
from .nnlib import pad_circular as pad_circular
from .nnlib import pad_constant as pad_constant
from .nnlib import pad_reflect as pad_reflect
from .nnlib import pad_repeat as pad_repeat
from .nnlib import pad_symmetric as pad_symmetric
from .nnlib import pad_zeros as pad_zeros
from .nnlib import pixel_shuffle as pixel_shuffle
from .nnlib import relu as relu
from .nnlib import relu6 as relu6
from .nnlib import rrelu as rrelu
from .nnlib import same_pad as same_pad
from .nnlib import selu as selu

# NNlib
from .nnlib import sigmoid as sigmoid
from .nnlib import sigmoid_fast as sigmoid_fast
from .nnlib import softmax as softmax
from .nnlib import softplus as softplus
from .nnlib import softshrink as softshrink
from .nnlib import softsign as softsign
from .nnlib import swish as swish
from .nnlib import tanh as tanh
from .nnlib import tanh_fast as tanh_fast
from .nnlib import tanhshrink as tanhshrink
from .nnlib import trelu as trelu
from .nnlib import upsample_bilinear as upsample_bilinear
from .nnlib import upsample_linear as upsample_linear
from .nnlib import upsample_nearest as upsample_nearest
from .nnlib import upsample_trilinear as upsample_trilinear
from .optimise import AccumGrad as AccumGrad
from .optimise import AdaBelief as AdaBelief
from .optimise import AdaDelta as AdaDelta
from .optimise import AdaGrad as AdaGrad
from .optimise import Adam as Adam
from .optimise import AdaMax as AdaMax
from .optimise import AdamW as AdamW
from .optimise import AMSGrad as AMSGrad
from .optimise import ClipGrad as ClipGrad
from .optimise import ClipNorm as ClipNorm

# Optimisers.jl
from .optimise import Descent as Descent
from .optimise import Leaf as Leaf
from .optimise import Lion as Lion
from .optimise import Momentum as Momentum
from .optimise import NAdam as NAdam
from .optimise import Nesterov as Nesterov
from .optimise import NonFiniteLoss as NonFiniteLoss
from .optimise import OAdam as OAdam
from .optimise import OptimiserChain as OptimiserChain
from .optimise import RAdam as RAdam
from .optimise import RMSProp as RMSProp
from .optimise import Rprop as Rprop
from .optimise import SignDecay as SignDecay
from .optimise import WeightDecay as WeightDecay
from .optimise import adjust as adjust
from .optimise import adjust_ as adjust_
from .optimise import freeze_ as freeze_
from .optimise import setup as setup
from .optimise import thaw_ as thaw_
from .optimise import train_ as train_
from .optimise import update as update
from .optimise import update_ as update_
from .outputsize import outputsize as outputsize

# RNG
from .random import seed_ as seed_

# Saving and loading (importing serialize also makes the module `fluxjax.state` callable: `fluxjax.state(model)`)
from .serialize import Checkpoint as Checkpoint
from .serialize import CheckpointError as CheckpointError
from .serialize import StructureMismatch as StructureMismatch
from .serialize import export_npz as export_npz
from .serialize import export_safetensors as export_safetensors
from .serialize import import_npz_ as import_npz_
from .serialize import import_safetensors_ as import_safetensors_
from .serialize import load as load
from .serialize import loadmodel_ as loadmodel_
from .serialize import save as save
from .state import functional as functional

# State thread
from .state import jit as jit
from .state import testmode_ as testmode_
from .state import trainmode_ as trainmode_
from .state import within_gradient as within_gradient
from .zygote import Buffer as Buffer
from .zygote import Grads as Grads
from .zygote import Params as Params
from .zygote import adjoint as adjoint
from .zygote import checkpointed as checkpointed
from .zygote import diaghessian as diaghessian
from .zygote import dropgrad as dropgrad
from .zygote import forwarddiff as forwarddiff

# Zygote's API
from .zygote import gradient as gradient
from .zygote import hessian as hessian
from .zygote import hook as hook
from .zygote import ignore as ignore
from .zygote import jacobian as jacobian
from .zygote import params as params
from .zygote import pullback as pullback
from .zygote import pushforward as pushforward
from .zygote import withgradient as withgradient
from .zygote import withjacobian as withjacobian

# Flux's `modules` (layers and their containers); `fluxjax.functors.modules` is the layers-only walk used inside
modules = _flux_modules
