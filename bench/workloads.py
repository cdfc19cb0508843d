"""Workload definitions: shapes, fixed on-device data in every layout a contender may want, optimiser.

Every contender of a workload gets *the same numbers*, only laid out differently:

* MLPs: ``"batch_major"`` x is (batch, features); ``"feature_major"`` x is (features, batch) (Flux).
* CNN:  ``"NHWC"`` (Flax, pure JAX), ``"NCHW"`` (Equinox), ``"WHCN"`` (Flux/fluxjax:
  (width, height, channels, batch)).
* LSTM: ``"BTF"`` (batch, time, features), ``"TBF"`` (time-major, for lax.scan), ``"FTB"`` (Flux 0.15+).

Labels are integer class ids of shape (batch,), plus one-hot in both orientations.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from types import SimpleNamespace

import jax
import jax.numpy as jnp
import numpy as np
import optax

NUM_CLASSES = 10


def adam() -> optax.GradientTransformation:
    return optax.adam(1e-3)


@dataclass(frozen=True)
class Workload:
    name: str
    title: str
    kind: str  # "mlp" | "cnn" | "lstm"
    batch: int
    baseline: str  # contender name that ratios are taken against
    sizes: tuple[int, ...] = ()  # MLP layer widths, input first
    trains: bool = True  # False: the step only computes a gradient (loss must not decrease)
    eager: bool = False  # True: contenders must NOT jit the step
    same_init: bool = False  # True: all contenders start from the same weights (--check compares loss)
    optimizer: Callable[[], optax.GradientTransformation] = field(default=adam)
    # LSTM / CNN shape constants
    image: tuple[int, int, int] = (28, 28, 1)  # H, W, C
    seq_len: int = 32
    input_size: int = 32
    hidden: int = 64

    def seed(self) -> int:
        return zlib.crc32(self.name.encode())

    def data(self, layout: str | None = None) -> SimpleNamespace:
        """Fixed device-resident data for this workload.

        Returns a namespace with ``x`` (in ``layout``), ``y`` (int32 labels, (batch,)),
        ``onehot`` ((batch, 10), float32) and ``onehot_fm`` ((10, batch), feature-major).
        """
        rng = np.random.RandomState(self.seed())
        b = self.batch
        if self.kind == "mlp":
            base = rng.randn(b, self.sizes[0]).astype(np.float32)  # (B, F)
            layouts = {"batch_major": base, "feature_major": base.T}
            default = "batch_major"
        elif self.kind == "cnn":
            h, w, c = self.image
            base = rng.randn(b, h, w, c).astype(np.float32)  # NHWC
            layouts = {
                "NHWC": base,
                "NCHW": base.transpose(0, 3, 1, 2),
                "WHCN": base.transpose(2, 1, 3, 0),
            }
            default = "NHWC"
        elif self.kind == "lstm":
            base = rng.randn(b, self.seq_len, self.input_size).astype(np.float32)  # (B, T, F)
            layouts = {"BTF": base, "TBF": base.transpose(1, 0, 2), "FTB": base.transpose(2, 1, 0)}
            default = "BTF"
        else:  # pragma: no cover
            raise ValueError(self.kind)
        layout = layout or default
        if layout not in layouts:
            raise ValueError(f"workload {self.name!r}: unknown layout {layout!r}; have {sorted(layouts)}")
        y = rng.randint(0, NUM_CLASSES, size=b).astype(np.int32)
        onehot = np.eye(NUM_CLASSES, dtype=np.float32)[y]
        dev = jax.devices()[0]
        put = lambda a: jax.device_put(np.ascontiguousarray(a), dev)
        out = SimpleNamespace(
            x=put(layouts[layout]), y=put(y), onehot=put(onehot), onehot_fm=put(onehot.T), layout=layout
        )
        jax.block_until_ready((out.x, out.y, out.onehot, out.onehot_fm))
        return out


PURE_JAX = "pure JAX + optax"
NHWC = "JAX batch-major (NHWC)"
WHCN = "JAX feature-major (WHCN)"
WHCN_VIA_NHWC = "JAX WHCN in, NHWC inside"

WORKLOADS: dict[str, Workload] = {
    w.name: w
    for w in [
        Workload("mlp_tiny", "MLP 8→16→10, relu, batch 4, Adam (overhead-bound)", "mlp", 4, PURE_JAX,
                 sizes=(8, 16, 10)),
        Workload("mlp_medium", "MLP 784→256→256→10, relu, batch 128, Adam", "mlp", 128, PURE_JAX,
                 sizes=(784, 256, 256, 10)),
        Workload("cnn_bn", "LeNet-5 + BatchNorm (train mode), 28×28×1, batch 64, Adam", "cnn", 64, PURE_JAX),
        Workload("lstm", "LSTM 32→64 over 32 steps (lax.scan), Dense 64→10 on last h, batch 16, Adam",
                 "lstm", 16, PURE_JAX),
        Workload("eager_grad", "Un-jitted value+gradient of MLP 784→256→256→10, batch 32 (no update)",
                 "mlp", 32, PURE_JAX, sizes=(784, 256, 256, 10), trains=False, eager=True),
        Workload("layout_mlp", "Layout: MLP 784→256→256→10 batch 128, feature-major vs batch-major",
                 "mlp", 128, NHWC, sizes=(784, 256, 256, 10), same_init=True),
        Workload("layout_cnn", "Layout: LeNet-5 + BN batch 64, WHCN vs NHWC", "cnn", 64, NHWC, same_init=True),
    ]
}

# Names accepted by --workloads that expand to several workloads.
GROUPS: dict[str, tuple[str, ...]] = {"layout": ("layout_mlp", "layout_cnn")}


def resolve(names: str | None) -> list[Workload]:
    if not names:
        return list(WORKLOADS.values())
    out: list[Workload] = []
    for n in (s.strip() for s in names.split(",") if s.strip()):
        for m in GROUPS.get(n, (n,)):
            if m not in WORKLOADS:
                raise SystemExit(f"unknown workload {m!r}; choose from {', '.join([*WORKLOADS, *GROUPS])}")
            if WORKLOADS[m] not in out:
                out.append(WORKLOADS[m])
    return out


def glorot_uniform(key: jax.Array, shape: tuple[int, ...], fan_in: int, fan_out: int) -> jax.Array:
    lim = float(np.sqrt(6.0 / (fan_in + fan_out)))
    return jax.random.uniform(key, shape, jnp.float32, -lim, lim)
