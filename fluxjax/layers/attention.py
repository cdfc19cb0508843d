"""`MultiHeadAttention`: Flux's `src/layers/attention.jl`, over `fluxjax.nnlib.dot_product_attention`."""

from __future__ import annotations

from collections.abc import Callable

import jax
import numpy as np

from .._checks import as_array, as_size, is_int, match_eltype
from ..core.layer import layer
from ..errors import DimensionMismatch, describe
from ..init import glorot_uniform
from ..nnlib.attention import dot_product_attention
from ..random import resolve_key
from .basic import Dense
from .normalise import Dropout

__all__ = ["MultiHeadAttention"]


def _normalize_dims(dims) -> dict[str, int]:
    """Flux's `normalize_mha_dims`, with `in => qkv => out` spelled `(in, qkv, out)`."""
    dims = as_size(dims)
    if is_int(dims):
        if dims <= 0:
            raise ValueError(f"MultiHeadAttention: sizes must be positive integers, got {dims!r}")
        dims = int(dims)
        return dict(q_in=dims, k_in=dims, v_in=dims, qk=dims, v=dims, out=dims)
    bad = ValueError(
        "MultiHeadAttention: dims must be an int, (in, qkv, out), (in, (qk, v), out) or "
        f"((q_in, k_in, v_in), (qk, v), out) -- Flux's `in => qkv => out` -- got {dims!r}"
    )
    if not isinstance(dims, (tuple, list)) or len(dims) != 3:
        raise bad
    ins, qkv, out = dims
    if is_int(ins):
        q_in = k_in = v_in = ins
    elif isinstance(ins, (tuple, list)) and len(ins) == 3 and all(map(is_int, ins)):
        q_in, k_in, v_in = ins
    else:
        raise bad
    if is_int(qkv):
        qk = v = qkv
    elif isinstance(qkv, (tuple, list)) and len(qkv) == 2 and all(map(is_int, qkv)):
        qk, v = qkv
    else:
        raise bad
    if not is_int(out):
        raise bad
    d = dict(q_in=q_in, k_in=k_in, v_in=v_in, qk=qk, v=v, out=out)
    if any(s <= 0 for s in d.values()):
        raise ValueError(f"MultiHeadAttention: sizes must be positive integers, got {dims!r}")
    return {k: int(s) for k, s in d.items()}


_QKV_HINT = "pass query, key and value as separate arguments, mha(q, k, v), each (features, length, batch)"


@layer
class MultiHeadAttention:
    """Multi-head dot-product attention (Vaswani et al. 2017), Flux's `MultiHeadAttention`.

    `MultiHeadAttention(dims; nheads=8, bias=False, init=glorot_uniform, dropout_prob=0.0)`.
    `dims` is Flux's `in => qkv => out` written as a tuple (or as separate positional arguments):

    - `dim`: every size equal to `dim` (Flux `dims::Int`);
    - `(in, qkv, out)` or `MultiHeadAttention(in, qkv, out)`: Flux's `in => qkv => out`;
    - `(in, (qk, v), out)`: Flux's `in => (qk, v) => out`;
    - `((q_in, k_in, v_in), (qk, v), out)`: Flux's `(q_in, k_in, v_in) => (qk, v) => out`.

    `qk` and `v` must be divisible by `nheads`. The layer holds `Dense` projections `q_proj`
    (`q_in => qk`), `k_proj` (`k_in => qk`), `v_proj` (`v_in => v`) and `out_proj` (`v => out`), with
    bias only when `bias=True`. `attn_drop` is a `Dropout(dropout_prob)` on the attention scores
    (active in train mode, as every Dropout).

    Forward: `mha(q, k=None, v=None, bias=None, mask=None) -> (y, alpha)` with `q` of size
    `(q_in, q_len, batch)`, `k` `(k_in, kv_len, batch)`, `v` `(v_in, kv_len, batch)`; `mha(q)` is
    self-attention, `mha(q, kv)` uses `kv` as key and value. `bias` and `mask` broadcast (Julia-style,
    leading dims) to `(kv_len, q_len, nheads, batch)`; `mask == False` sets a score to `-Inf` (see
    `make_causal_mask`). Returns `y` `(out, q_len, batch)` and the scores `alpha`
    `(kv_len, q_len, nheads, batch)`, a softmax over axis 0.

    ```python
    >>> mha = MultiHeadAttention(64, nheads=8)
    >>> y, a = mha(jnp.ones((64, 10, 32)), jnp.ones((64, 20, 32)))
    >>> y.shape, a.shape
    ((64, 10, 32), (20, 10, 8, 32))

    ```
    """

    __fluxjax_autosize_dim__ = 0  # autosize reads `_` off the feature dimension

    def __init__(
        self,
        dims,
        *more: int,
        nheads: int = 8,
        bias: bool = False,
        init: Callable = glorot_uniform,
        dropout_prob: float = 0.0,
        rng=None,
    ):
        d = _normalize_dims((dims, *more) if more else dims)
        if not is_int(nheads) or nheads <= 0:
            raise ValueError(f"MultiHeadAttention: nheads must be a positive integer, got {nheads!r}")
        if d["qk"] % nheads:
            raise ValueError(
                f"MultiHeadAttention: qk_dim = {d['qk']} should be divisible by nheads = {nheads}"
            )
        if d["v"] % nheads:
            raise ValueError(f"MultiHeadAttention: v_dim = {d['v']} should be divisible by nheads = {nheads}")
        keys = [None] * 4 if rng is None else list(jax.random.split(resolve_key(rng), 4))
        self.nheads = int(nheads)
        self.q_proj = Dense(d["q_in"], d["qk"], init=init, bias=bias, rng=keys[0])
        self.k_proj = Dense(d["k_in"], d["qk"], init=init, bias=bias, rng=keys[1])
        self.v_proj = Dense(d["v_in"], d["v"], init=init, bias=bias, rng=keys[2])
        self.attn_drop = Dropout(dropout_prob, rng=rng)
        self.out_proj = Dense(d["v"], d["out"], init=init, bias=bias, rng=keys[3])

    def _check(self, x, proj: Dense, name: str):
        n = proj.weight.shape[1]
        if np.ndim(x) < 2 or x.shape[0] != n:
            raise DimensionMismatch(
                f"layer {self._show()} expects size({name}, 1) == {n}, but got {describe(x)}"
            )

    def __call__(self, q, k=None, v=None, bias=None, mask=None) -> tuple[jax.Array, jax.Array]:
        if k is None:
            k = q
        if v is None:
            v = k
        dtype = self.q_proj.weight.dtype
        q, k, v = (match_eltype(self, as_array(self, x, hint=_QKV_HINT), dtype) for x in (q, k, v))
        self._check(q, self.q_proj, "q_in")
        self._check(k, self.k_proj, "k_in")
        self._check(v, self.v_proj, "v_in")
        if k.shape[1:] != v.shape[1:]:
            raise DimensionMismatch(
                f"layer {self._show()}: key and value must have the same length and batch size, got "
                f"k {describe(k)} and v {describe(v)}"
            )
        if q.shape[2:] != k.shape[2:]:
            raise DimensionMismatch(
                f"layer {self._show()}: query and key must have the same batch size, got "
                f"q {describe(q)} and k {describe(k)}"
            )
        scores = (k.shape[1], q.shape[1], self.nheads, *q.shape[2:])
        for what, m in (("bias", bias), ("mask", mask)):
            shape = np.shape(m) if m is not None else None
            if shape is not None and (
                len(shape) > len(scores) or any(a not in (1, b) for a, b in zip(shape, scores))
            ):
                raise DimensionMismatch(
                    f"layer {self._show()}: {what} of size {tuple(shape)} does not broadcast (leading dims first, "
                    f"as Julia) to the attention scores (kv_len, q_len, nheads, batch...) = {scores}"
                )
        x, alpha = dot_product_attention(
            self.q_proj(q), self.k_proj(k), self.v_proj(v), bias,
            nheads=self.nheads, mask=mask, fdrop=self.attn_drop,
        )
        return self.out_proj(x), alpha

    def _show(self) -> str:
        qk, q_in = self.q_proj.weight.shape
        _, k_in = self.k_proj.weight.shape
        v, v_in = self.v_proj.weight.shape
        out = self.out_proj.weight.shape[0]
        if q_in == k_in == v_in == qk == v == out:
            s = f"{q_in}"
        elif q_in == k_in == v_in and qk == v:
            s = f"{q_in} => {qk} => {out}"
        elif q_in == k_in == v_in:
            s = f"{q_in} => ({qk}, {v}) => {out}"
        else:
            s = f"({q_in}, {k_in}, {v_in}) => ({qk}, {v}) => {out}"
        s = f"MultiHeadAttention({s}; nheads={self.nheads}"
        if self.q_proj.bias is not False:
            s += ", bias=true"
        p = getattr(self.attn_drop, "p", 0)
        if p != 0:
            s += f", dropout_prob={p!s}"
        return s + ")"

    def _show_children(self):
        return []  # Flux's `@layer :noexpand`: always one line, with the parameter count
