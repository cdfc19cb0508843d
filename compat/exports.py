"""Every name that Flux and Zygote export, mapped to its fluxjax spelling.

Sources (read from the repositories, not from memory):

- Flux.jl v0.16.11 ``src/Flux.jl``: its ``export`` lines, its ``@compat(public, ...)`` list, ``export gradient,
  withgradient`` (``src/gradient.jl``), ``@autosize``, ``get_device``, the distributed names, and the
  ``@reexport`` of NNlib, Optimisers, MLDataDevices and ADTypes; names that v0.14 / v0.15 still exported
  (the old ``Flux.Optimise`` rules, ``params``, ``@functor``...) are listed as such.
- Flux.jl ``src/losses/Losses.jl`` ``export`` (the ``Flux.Losses`` module, also public in Flux).
- NNlib.jl v0.9.36 ``src/NNlib.jl`` ``export`` lines (re-exported by Flux) and its ``public`` list.
- Optimisers.jl v0.4.8 ``src/Optimisers.jl`` ``export`` and ``@compat public`` (re-exported by Flux).
- Zygote.jl v0.7.12 ``src/Zygote.jl`` ``export`` lines, plus the Zygote API that Flux code calls qualified
  (``Zygote.hook``, ``Zygote.@ignore``, ``Zygote.Buffer``, ...).

Spelling rules (DESIGN.md): a trailing ``!`` becomes ``_``; Greek names get their ASCII aliases (``σ`` →
``sigmoid``, ``hardσ`` → ``hardsigmoid``, ``logσ`` → ``logsigmoid``); ``⊠`` is ``batched_mul``; a leading ``∇``
(NNlib's hand-written pullbacks) becomes ``grad_``; a macro ``@m`` becomes the function or decorator ``m``.
Each entry lists the fluxjax attribute paths (relative to ``fluxjax``) where the name may live; the first
is the canonical spelling.
"""

from __future__ import annotations

import dataclasses
import importlib
import types


@dataclasses.dataclass(frozen=True)
class Export:
    julia: str  # the name as Julia spells it
    group: str  # where Julia exports it
    paths: tuple[str, ...]  # fluxjax spellings, canonical first
    note: str = ""
    omitted: str = ""  # why fluxjax leaves the name out on purpose, and what to use instead

    @property
    def python(self) -> str:
        return "fluxjax." + self.paths[0]


FLUX = "Flux (export)"
FLUX_OLD = "Flux ≤0.15 (export, since removed or deprecated)"
FLUX_PUBLIC = "Flux (public)"
LOSSES = "Flux.Losses (export)"
NNLIB = "NNlib (export, re-exported by Flux)"
NNLIB_PUBLIC = "NNlib (public)"
OPTIMISERS = "Optimisers.jl (export, re-exported by Flux)"
OPTIMISERS_PUBLIC = "Optimisers.jl (public, re-exported by Flux)"
DEVICES = "MLDataDevices (re-exported by Flux)"
ADTYPES = "ADTypes (re-exported by Flux)"
MLUTILS = "MLUtils (export, reached as Flux.x: Flux does `using MLUtils`)"
ZYGOTE = "Zygote (export)"
ZYGOTE_QUALIFIED = "Zygote (qualified API used by Flux code)"


def _py(julia: str) -> str:
    """The fluxjax spelling of a Julia name."""
    greek = {"σ": "sigmoid", "hardσ": "hardsigmoid", "logσ": "logsigmoid", "⊠": "batched_mul"}
    name = greek.get(julia, julia).lstrip("@")
    if name.startswith("∇"):
        name = "grad_" + name[1:]
    return name.replace("!", "_")


def _entries(group: str, names: str, prefixes: tuple[str, ...] = ("",), note: str = "") -> list[Export]:
    out = []
    for julia in names.split():
        py = _py(julia)
        out.append(Export(julia, group, tuple(p + py for p in prefixes), note))
    return out


_NN = ("", "nnlib.")
_ZY = ("", "zygote.")
_OPT = ("", "optimise.")
_LOSS = ("", "losses.")  # Flux 0.16 makes every loss public as Flux.mse too

EXPORTS: list[Export] = [
    # Flux.jl src/Flux.jl `export Chain, Dense, ...` (v0.16.11)
    *_entries(
        FLUX,
        """Chain Dense Embedding EmbeddingBag Maxout SkipConnection Parallel PairwiseFusion
        RNNCell LSTMCell GRUCell GRUv3Cell RNN LSTM GRU GRUv3 Recurrence
        SamePad Conv CrossCor ConvTranspose DepthwiseConv
        AdaptiveMaxPool AdaptiveMeanPool GlobalMaxPool GlobalMeanPool MaxPool MeanPool
        Dropout AlphaDropout LayerNorm BatchNorm InstanceNorm GroupNorm WeightNorm
        MultiHeadAttention Upsample PixelShuffle
        fmap cpu gpu f32 f64 f16 bf16 BFloat16 rand32 randn32 zeros32 ones32 testmode! trainmode!""",
    ),
    *_entries(FLUX, "gradient withgradient"),  # src/gradient.jl
    *_entries(FLUX, "@autosize get_device"),
    *_entries(FLUX, "MPIBackend NCCLBackend DistributedUtils", ("", "parallel.")),
    # Flux.jl v0.14 / v0.15 exports that v0.16 dropped (Flux.Optimise rules, deprecated aliases)
    *_entries(FLUX_OLD, "InvDecay ExpDecay ClipValue Optimiser", _OPT),
    *_entries(FLUX_OLD, "reset!"),  # src/deprecations.jl: a no-op with a depwarn in v0.16
    # Flux.jl src/Flux.jl `@compat(public, (...))`
    Export("Losses", FLUX_PUBLIC, ("losses",)),
    Export("Train", FLUX_PUBLIC, ("optimise.train", "optimise")),
    *_entries(FLUX_PUBLIC, "Bilinear Scale outputsize"),
    Export("state", FLUX_PUBLIC, ("state", "serialize.state")),
    *_entries(FLUX_PUBLIC, "create_bias nfan", ("", "init.")),
    *_entries(FLUX_PUBLIC, "@layer initialstates normalise loadmodel! activations modules flatten rng_from_array"),
    *_entries(FLUX_PUBLIC, "onehot onehotbatch onecold"),
    *_entries(FLUX_PUBLIC, "setup train! trainstep! trainstep_withgradient!", _OPT),
    *_entries(FLUX_PUBLIC, "freeze! thaw! adjust! update! trainable", ("", "optimise.", "functors.")),
    *_entries(FLUX_PUBLIC, "hessian diaghessian jacobian withjacobian pullback", _ZY),
    *_entries(
        FLUX_PUBLIC,
        """glorot_uniform glorot_normal kaiming_uniform kaiming_normal truncated_normal lecun_normal orthogonal
        sparse_init identity_init""",
        ("", "init."),
    ),
    *_entries(FLUX_PUBLIC, "remove_weight_norms"),
    # Flux v0.14 / v0.15 public names and the Flux.X API scripts still call qualified
    *_entries(FLUX_PUBLIC, "functor @functor KeyPath haskeypath getkeypath", ("", "functors.")),
    *_entries(FLUX_PUBLIC, "destructure params trainables", ("", "optimise.", "zygote.")),
    Export("DataLoader", FLUX_PUBLIC, ("DataLoader", "data.DataLoader"), "MLUtils.DataLoader, reached as Flux.DataLoader"),
    # Flux.jl src/losses/Losses.jl `export ...`
    *_entries(
        LOSSES,
        """mse mae msle label_smoothing crossentropy logitcrossentropy binarycrossentropy logitbinarycrossentropy
        kldivergence huber_loss tversky_loss dice_coeff_loss poisson_loss hinge_loss squared_hinge_loss
        binary_focal_loss focal_loss siamese_contrastive_loss""",
        _LOSS,
    ),
    # NNlib.jl src/NNlib.jl `export ...` (Flux does `@reexport using NNlib`)
    *_entries(NNLIB, "ConvDims DenseConvDims PoolDims DepthwiseConvDims", _NN),
    *_entries(
        NNLIB,
        """σ hardσ hardtanh relu leakyrelu relu6 rrelu elu gelu_tanh gelu_sigmoid gelu_erf swish hardswish selu
        celu softplus softsign logσ logcosh mish tanhshrink softshrink trelu lisht tanh_fast sigmoid_fast""",
        _NN,
    ),
    *_entries(NNLIB, "sigmoid hardsigmoid logsigmoid thresholdrelu gelu", _NN),
    *_entries(NNLIB, "dot_product_attention dot_product_attention_scores make_causal_mask", ("", "nnlib.", "nnlib.attention.")),
    *_entries(NNLIB, "dropout dropout!", _NN),
    *_entries(NNLIB, "softmax softmax! ∇softmax ∇softmax! logsoftmax logsoftmax! ∇logsoftmax ∇logsoftmax! logsumexp", _NN),
    *_entries(NNLIB, "batched_mul batched_mul! ⊠ batched_vec batched_transpose batched_adjoint grid_sample ∇grid_sample", _NN),
    *_entries(
        NNLIB,
        """conv conv! ∇conv_data ∇conv_data! ∇conv_filter ∇conv_filter! depthwiseconv depthwiseconv!
        ∇depthwiseconv_data ∇depthwiseconv_data! ∇depthwiseconv_filter ∇depthwiseconv_filter!
        conv_bias_act conv_bias_act! bias_act! ctc_loss""",
        ("", "nnlib.", "losses."),
    ),
    *_entries(
        NNLIB,
        """maxpool maxpool! meanpool meanpool! lpnormpool lpnormpool! ∇maxpool ∇maxpool! ∇meanpool ∇meanpool!
        ∇lpnormpool ∇lpnormpool! pad_constant pad_repeat pad_reflect pad_zeros pad_symmetric pad_circular
        upsample_nearest ∇upsample_nearest upsample_linear ∇upsample_linear upsample_bilinear ∇upsample_bilinear
        upsample_trilinear ∇upsample_trilinear pixel_shuffle imrotate ∇imrotate
        stft istft hann_window hamming_window spectrogram melscale_filterbanks""",
        _NN,
    ),
    # public, not exported: reached as NNlib.gather, so fluxjax.nnlib.gather first
    *_entries(NNLIB_PUBLIC, "gather gather! scatter scatter! fold unfold glu within_gradient", ("nnlib.", "")),
    # Optimisers.jl src/Optimisers.jl `export ...` and `@compat public ...`
    Export("AbstractRule", OPTIMISERS, ("optimise.AbstractRule",)),
    *_entries(
        OPTIMISERS,
        """Descent Adam Momentum Nesterov Rprop RMSProp AdaGrad AdaMax AdaDelta AMSGrad NAdam AdamW RAdam OAdam
        AdaBelief WeightDecay SignDecay ClipGrad ClipNorm OptimiserChain Lion AccumGrad MixedPrecision""",
        _OPT,
    ),
    *_entries(OPTIMISERS_PUBLIC, "apply! init", ("optimise.",)),  # not fluxjax.init, the initialisers
    *_entries(OPTIMISERS_PUBLIC, "update make_reactant_compatible adjust Leaf", _OPT),
    # MLDataDevices, re-exported by Flux
    *_entries(
        DEVICES,
        """MLDataDevices supported_gpu_backends reset_gpu_device! default_device_rng gpu_device cpu_device
        reactant_device CPUDevice CUDADevice AMDGPUDevice MetalDevice oneAPIDevice ReactantDevice gpu_backend!
        get_device_type DeviceIterator""",
        ("", "devices."),
    ),
    # MLUtils.jl src/MLUtils.jl `export ...` (v0.4): Flux's `using MLUtils` makes them Flux.chunk, ...
    # (flatten, normalise and DataLoader are listed with Flux's own names above; `normalise` is Flux's)
    *_entries(
        MLUTILS,
        """unsqueeze unstack chunk rpad_constant batchseq batch_sequence numobs getobs shuffleobs splitobs
        group_counts group_indices zeros_like ones_like fill_like trues_like falses_like rand_like randn_like
        eachobs randobs kfolds rescale topk leavepout mapobs obsview filterobs joinobs""",
        ("", "mlutils."),
    ),
    *_entries(MLUTILS, "batch unbatch", ("", "data.")),
    *_entries(
        MLUTILS,
        """getobs! groupobs batchsize BatchView ObsView oversample undersample slidingwindow stack""",
        ("", "mlutils."),
    ),
    # ADTypes, re-exported by Flux: the backends that Flux.gradient documents
    *_entries(ADTYPES, "AutoZygote AutoEnzyme AutoMooncake AutoFiniteDifferences", ("", "zygote.")),
    # Zygote.jl src/Zygote.jl `export ...`
    *_entries(ZYGOTE, "withgradient gradient withjacobian jacobian hessian diaghessian pullback pushforward @code_adjoint", _ZY),
    *_entries(ZYGOTE, "rrule_via_ad Params", _ZY),
    # Zygote's API used qualified (Zygote.hook, Zygote.@ignore, ...) in Flux code, docs and tests
    *_entries(
        ZYGOTE_QUALIFIED,
        """Grads @adjoint hook ignore @ignore dropgrad ignore_derivatives checkpointed Buffer forwarddiff
        hessian_reverse isderiving @showgrad eager_update!""",
        _ZY,
    ),
]


_IN_PLACE = ("writes into a preallocated array, and JAX arrays are immutable: `{0}` returns the result "
             "(under `jit` XLA reuses the buffers)")
_BACKEND = ("JAX picks its backend when it is installed (`jax[cuda12]`, `jax[tpu]`): "
            "`gpu_device()`, `cpu_device()` and `get_device_type` are the portable part")
_REACTANT = "Reactant compiles Julia to XLA; fluxjax runs on XLA already: `fluxjax.jit`"

# Names fluxjax leaves out on purpose (status "omitted" in MATRIX.md), with what to use instead.
OMITTED: dict[str, str] = {
    **{f"{n}!": _IN_PLACE.format(_py(n)) for n in """dropout softmax ∇softmax logsoftmax ∇logsoftmax batched_mul conv
       ∇conv_data ∇conv_filter depthwiseconv ∇depthwiseconv_data ∇depthwiseconv_filter conv_bias_act maxpool meanpool
       lpnormpool ∇maxpool ∇meanpool ∇lpnormpool gather scatter""".split()},
    "bias_act!": _IN_PLACE.format("sigma(x + b)"),
    **dict.fromkeys(("CUDADevice", "AMDGPUDevice", "MetalDevice", "oneAPIDevice", "gpu_backend!", "reset_gpu_device!",
                     "supported_gpu_backends", "MLDataDevices"), _BACKEND),
    **dict.fromkeys(("ReactantDevice", "reactant_device", "make_reactant_compatible"), _REACTANT),
    **dict.fromkeys(("MPIBackend", "NCCLBackend", "DistributedUtils"),
                    "`jax.distributed.initialize()` and a device mesh take their place: `train_(..., mesh=)`, `fluxjax.parallel`"),
    "InvDecay": "removed in Flux 0.15: `adjust_(opt_state, eta)` between epochs, or an optax rule with a schedule "
                "(`setup(optax.adam(optax.polynomial_schedule(...)), m)`)",
    "ExpDecay": "removed in Flux 0.15: `adjust_(opt_state, eta)` between epochs, or an optax rule with a schedule "
                "(`setup(optax.adam(optax.exponential_decay(...)), m)`)",
    "ClipValue": "removed in Flux 0.15: `ClipGrad`",
    "Optimiser": "removed in Flux 0.15: `OptimiserChain`",
    "@code_adjoint": "prints Zygote's adjoint IR; `jax.make_jaxpr(lambda x: jax.vjp(f, x))` prints the program "
                     "fluxjax differentiates",
    "rrule_via_ad": "ChainRules' call back into AD from an `rrule`; inside `zygote.adjoint` or `jax.custom_vjp`, call `pullback`",
    "getobs!": _IN_PLACE.format("getobs"),
    "stack": "Julia's `Base.stack` (MLUtils re-exports it for old Julia): `jnp.stack(xs, axis=-1)`, or `batch(xs)`",
    "eager_update!": "updates each layer from a `hook` while the backward pass runs, to free its gradient early; under "
                     "`fluxjax.jit` the step is one XLA program, whose buffer assignment frees each gradient after its last use",
}
EXPORTS = [dataclasses.replace(e, omitted=OMITTED[e.julia], note="") if e.julia in OMITTED else e for e in EXPORTS]


def _resolve_path(path: str):
    mod = importlib.import_module("fluxjax")
    obj = mod
    for part in path.split("."):
        if not hasattr(obj, part):
            return None
        obj = getattr(obj, part)
    return obj


def resolve_path(e: Export) -> str | None:
    """The first of ``e.paths`` (relative to ``fluxjax``) where fluxjax has the name, or None.

    A Python module only counts for Julia modules (``Losses``, ``Train``): a module named like a Flux
    function is not that function.
    """
    julia_module = e.julia in {"Losses", "Train", "MLDataDevices", "DistributedUtils"}
    for path in e.paths:
        obj = _resolve_path(path)
        if obj is None:
            continue
        if isinstance(obj, types.ModuleType) and not callable(obj) and not julia_module:
            continue  # e.g. a submodule that merely shares the name
        if julia_module and not isinstance(obj, types.ModuleType):
            continue
        return path
    return None


def resolve(e: Export):
    """The fluxjax object for an export, or None when fluxjax lacks it."""
    path = resolve_path(e)
    return None if path is None else _resolve_path(path)


def by_julia_name() -> dict[str, list[Export]]:
    out: dict[str, list[Export]] = {}
    for e in EXPORTS:
        out.setdefault(e.julia, []).append(e)
    return out
