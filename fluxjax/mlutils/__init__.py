"""MLUtils.jl's array and data helpers that Flux scripts reach through Flux (Flux does `using MLUtils`, so
`Flux.chunk`, `Flux.unsqueeze`, `Flux.splitobs` ... work): in Flux's layout, observations along the LAST
axis, and 0-based wherever Python indexes (`dims`, indices, group labels).

- `arrays`: `unsqueeze`, `unstack`, `chunk`, `rpad_constant`, `batchseq`, `batch_sequence`, `rescale`, `topk`
  (`batch`, `unbatch` live in `fluxjax.data`)
- `observations`: `numobs`, `getobs`, `shuffleobs`, `randobs`, `eachobs`, `mapobs`, `obsview`, `filterobs`,
  `joinobs`
- `views`: `ObsView`, `BatchView`, `batchsize`, `slidingwindow`
- `splits`: `splitobs`, `group_counts`, `group_indices`, `kfolds`, `leavepout`
- `resample`: `oversample`, `undersample`, `groupobs`
- `like`: `zeros_like`, `ones_like`, `fill_like`, `trues_like`, `falses_like`, `rand_like`, `randn_like`

A data container is an array (observations along the last axis), a tuple, named tuple or dict of them
(all with the same number of observations), a list / range (one observation per element), or one of the
views above.
"""

from .arrays import batch_sequence, batchseq, chunk, rescale, rpad_constant, topk, unsqueeze, unstack
from .like import falses_like, fill_like, ones_like, rand_like, randn_like, trues_like, zeros_like
from .observations import (
    MappedData,
    eachobs,
    filterobs,
    getobs,
    joinobs,
    mapobs,
    numobs,
    obsview,
    randobs,
    shuffleobs,
)
from .resample import groupobs, oversample, undersample
from .splits import group_counts, group_indices, kfolds, leavepout, splitobs
from .views import BatchView, ObsView, SlidingWindow, batchsize, slidingwindow

__all__ = [
    "unsqueeze", "unstack", "chunk", "rpad_constant", "batchseq", "batch_sequence", "numobs", "getobs",
    "shuffleobs", "splitobs", "group_counts", "group_indices", "zeros_like", "ones_like", "fill_like",
    "trues_like", "falses_like", "rand_like", "randn_like", "eachobs", "randobs", "kfolds", "rescale", "topk",
    "leavepout", "mapobs", "MappedData", "obsview", "filterobs", "joinobs", "ObsView", "BatchView", "batchsize",
    "SlidingWindow", "slidingwindow", "oversample", "undersample", "groupobs",
]  # fmt: skip
