"""The Flux compatibility suite: cases ported from Flux's, Zygote's, NNlib's and Optimisers.jl's tests."""
