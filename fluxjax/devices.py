"""`f32`, `f64`, `f16`, `bf16`, `cpu`, `gpu`: precision and placement of a whole model (Flux's `f32`/`gpu`),
and MLDataDevices' device objects `cpu_device()` / `gpu_device()` (callables that move a model or array)."""

from __future__ import annotations

import warnings
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from .core.layer import is_array
from .core.walk import walk
from .functors import fmap
from .layers.normalise import KEEP_FLOAT32
from .random import next_key

BFloat16 = jnp.bfloat16  # Julia's BFloat16 (BFloat16s.jl), which Flux re-exports


# Flux (src/functor.jl) converts complex float arrays too, to `Complex{T}`
_COMPLEX = {np.dtype(jnp.float32): np.dtype(np.complex64), np.dtype(jnp.float64): np.dtype(np.complex128)}


class _NoComplexHalf(TypeError):
    """A complex array met by `f16`/`bf16`: JAX has no complex float16 or bfloat16 type."""


def _cast(dtype):
    cdtype = _COMPLEX.get(np.dtype(dtype))

    def f(x):
        if not is_array(x):
            return x
        # jnp.issubdtype: numpy does not count bfloat16 (an ml_dtypes type) as floating
        if jnp.issubdtype(x.dtype, jnp.floating) and x.dtype != dtype:
            return jnp.asarray(x, dtype)
        if jnp.issubdtype(x.dtype, jnp.complexfloating):
            if cdtype is None:
                raise _NoComplexHalf(x.dtype)
            if x.dtype != cdtype:
                return jnp.asarray(x, cdtype)
        return x

    return f


def _complex_path(m: Any) -> str:
    """Where the first complex array in `m` is, for messages (`model[0].layers[1].weight`)."""
    w = walk([m], paths=True)
    for leaf, path in zip(w.leaves, w.paths):
        if is_array(leaf) and jnp.issubdtype(leaf.dtype, jnp.complexfloating):
            return f"model{path[1:]}" if path[1:] else "the argument"
    return "a complex array"


def f32(m: Any) -> Any:
    """Convert every float array in `m` to float32, and every complex one to complex64 (Flux's
    `Complex{Float32}`); integer arrays and RNG keys are left alone.

    ```python
    >>> f32(np.ones(2))
    Array([1., 1.], dtype=float32)
    >>> f32(f16(Dense(2, 3))).weight.dtype
    dtype('float32')

    ```
    """
    return fmap(_cast(jnp.float32), m)


def f64(m: Any) -> Any:
    """Convert every float array in `m` to float64, and every complex one to complex128. Needs
    `jax.config.update("jax_enable_x64", True)` (or a `with jax.enable_x64(True):` block): JAX's x64
    mode is off by default, and without it JAX has no float64 arrays, so `f64` raises rather than
    return float32.

    ```python
    >>> f64(Dense(2, 3))                           # x64 off (JAX's default)
    Traceback (most recent call last):
        ...
    RuntimeError: f64: float64 needs jax_enable_x64; ...
    >>> with jax.enable_x64(True):                 # on inside this block only
    ...     f64(Dense(2, 3)).weight.dtype
    dtype('float64')

    ```
    """
    if not jax.config.jax_enable_x64:
        raise RuntimeError("f64: float64 needs jax_enable_x64; call jax.config.update('jax_enable_x64', True) first")
    return fmap(_cast(jnp.float64), m)


def _half(m: Any, dtype) -> Any:
    """Flux's half-precision cast: `BatchNorm`, `InstanceNorm` and `GroupNorm` keep their statistics
    and affine parameters in float32 (mixed precision: the data through them stays half, see
    fluxjax/layers/normalise.py); every other float array becomes `dtype`."""
    keep = lambda v: isinstance(v, KEEP_FLOAT32)
    try:
        return fmap(lambda v: f32(v) if keep(v) else _cast(dtype)(v), m, exclude=lambda v: keep(v) or is_array(v))
    except _NoComplexHalf as e:
        fn, julia = ("f16", "ComplexF16") if np.dtype(dtype) == np.dtype(jnp.float16) else ("bf16", "Complex{BFloat16}")
        raise TypeError(
            f"{fn}: {_complex_path(m)} is {e.args[0]}; Flux would make it {julia}, "
            f"but JAX has no complex {np.dtype(dtype).name} type. Keep complex arrays in complex64 "
            f"(convert the model with fluxjax.f32), or split them into real and imaginary parts"
        ) from None


def f16(m: Any) -> Any:
    """Convert the float arrays in `m` to float16 (Flux's `f16`); normalisation layers other than
    `LayerNorm` stay float32 (mixed precision, as Flux). A complex array raises `TypeError` (Flux makes
    it `ComplexF16`, which JAX lacks): keep such a model in `f32`.

    ```python
    >>> f16(Dense(2, 3)).weight.dtype
    dtype('float16')

    ```
    """
    return _half(m, jnp.float16)


def bf16(m: Any) -> Any:
    """Convert the float arrays in `m` to bfloat16 (Flux's `bf16`); normalisation layers other than
    `LayerNorm` stay float32 (mixed precision, as Flux). Same exponent range as float32, 8 bits of
    mantissa: `bf16(jnp.array([1, 1.5, -2.25, 96.]))` is exact. A complex array raises `TypeError`
    (JAX has no complex bfloat16).

    ```python
    >>> bf16(Dense(2, 3)).weight.dtype
    dtype(bfloat16)

    ```
    """
    return _half(m, jnp.bfloat16)


def cpu(m: Any) -> Any:
    """Move every array in `m` to the first CPU device.

    ```python
    >>> m = cpu(Dense(2, 3))
    >>> m.weight.devices() == {jax.devices('cpu')[0]}
    True

    ```
    """
    dev = jax.devices("cpu")[0]
    return fmap(lambda x: jax.device_put(x, dev) if is_array(x) else x, m)


_warned: set[str] = set()  # the one-time warnings already given in this session


def _warn_once(key: str, msg: str, category: type[Warning] = UserWarning, stacklevel: int = 3) -> None:
    """Warn with `msg` the first time `key` comes up in this session only (Julia's `maxlog=1`)."""
    if key not in _warned:
        _warned.add(key)
        warnings.warn(msg, category, stacklevel=stacklevel)


def gpu(m: Any) -> Any:
    """Move every array in `m` to the first accelerator (GPU or TPU); without one, warn once per
    session and return `m` unchanged, as Flux does (its `gpu_device()` warns with `maxlog=1`).

    ```python
    >>> import warnings
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")        # the warning when there is no GPU
    ...     m = gpu(Dense(2, 3))
    ...     dev = gpu_device()
    >>> type(m).__name__, m.weight.shape         # the same model, on the GPU if there is one
    ('Dense', (3, 2))
    >>> get_device(m) == dev
    True

    ```
    """
    try:
        dev = next(d for d in jax.devices() if d.platform != "cpu")
    except StopIteration:
        _warn_once("gpu", "gpu: no GPU or TPU is visible to JAX; the model stays on the CPU")
        return m
    return fmap(lambda x: jax.device_put(x, dev) if is_array(x) else x, m)


# ----------------------------------------------------------------------------------------------
# MLDataDevices' device objects, as re-exported by Flux: `dev = gpu_device(); model = dev(model)`


class AbstractDevice:
    """A device as a callable: `dev(x)` moves every array in `x` (a model, an array, a container) to
    `dev.device`, the JAX device; other leaves are kept. `dev(loader)` of a `DataLoader` is
    `DeviceIterator(dev, loader)`."""

    device: jax.Device

    def __call__(self, x: Any) -> Any:
        from .data import DataLoader

        if isinstance(x, DataLoader):  # as MLDataDevices: batches move as they are drawn
            return DeviceIterator(self, x)
        dev = self.device
        return fmap(lambda a: jax.device_put(a, dev) if is_array(a) else a, x)

    def __eq__(self, other):
        return type(self) is type(other) and self.device == other.device

    def __hash__(self):
        return hash((type(self), self.device))

    def __repr__(self):
        return f"{type(self).__name__}({self.device})"


class CPUDevice(AbstractDevice):
    """MLDataDevices' `CPUDevice`: `cpu_device()`; `CPUDevice()(x)` is `cpu(x)`.

    ```python
    >>> CPUDevice()(Dense(2, 3)).weight.shape
    (3, 2)

    ```
    """

    def __init__(self):
        self.device = jax.devices("cpu")[0]


class AcceleratorDevice(AbstractDevice):
    """The accelerator `gpu_device()` returns when JAX sees one (a GPU or TPU; MLDataDevices'
    `CUDADevice`, `AMDGPUDevice`, ...): `dev(x)` is `gpu(x)` onto that device."""

    def __init__(self, device: jax.Device):
        self.device = device


def cpu_device() -> CPUDevice:
    """MLDataDevices' `cpu_device()`: a `CPUDevice`, callable on a model or array.

    ```python
    >>> dev = cpu_device()
    >>> dev
    CPUDevice(cpu:0)
    >>> dev(jnp.ones(2)).devices() == {jax.devices('cpu')[0]}
    True

    ```
    """
    return CPUDevice()


def gpu_device(ordinal: int | None = None, *, force: bool = False) -> AbstractDevice:
    """MLDataDevices' `gpu_device()`: the first accelerator (or the `ordinal`-th, 0-based) as a callable
    device; without one, warn (once per session, with `gpu`) and return `cpu_device()`, or raise with
    `force=True`.

    ```python
    >>> import warnings
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")        # the warning when there is no GPU
    ...     dev = gpu_device()
    >>> x = dev(jnp.ones(2))                       # a callable: moves arrays and models there
    >>> x.shape, get_device(x) == dev
    ((2,), True)

    ```
    """
    accel = [d for d in jax.devices() if d.platform != "cpu"]
    if not accel:
        if force:
            raise RuntimeError("gpu_device(force=True): no GPU or TPU is visible to JAX")
        _warn_once("gpu", "gpu_device: no GPU or TPU is visible to JAX; defaulting to the CPU")  # maxlog=1, as Flux
        return CPUDevice()
    if ordinal is None:
        return AcceleratorDevice(accel[0])
    if not 0 <= ordinal < len(accel):
        raise ValueError(f"gpu_device: ordinal {ordinal} is out of range; JAX sees {len(accel)} accelerator(s)")
    return AcceleratorDevice(accel[ordinal])


_NO_ARG = object()


def get_device(x: Any = _NO_ARG, idx: int = 0, *, verbose: bool = False) -> AbstractDevice | None:
    """MLDataDevices' `get_device(x)`: the device holding every array in `x` (a model, an array, a
    container), as the callable device object `cpu_device()`/`gpu_device()` return; `None` when `x`
    holds no arrays. NumPy arrays count as the CPU. Arrays on several devices raise a ValueError.

    Flux 0.16 keeps two deprecated forms, which warn once (`DeprecationWarning`) and work as there:
    `get_device()` is `gpu_device()` (the CPU device, with a warning, when JAX sees no accelerator), and
    `get_device(backend, idx=0)` with a backend name is `cpu_device()` for `"CPU"`, else
    `gpu_device(idx, force=True)` (`idx` is 0-based, as Flux's).

    ```python
    >>> get_device(cpu(Dense(2, 3)))
    CPUDevice(cpu:0)
    >>> get_device(np.zeros(3)), get_device([1, 2])   # NumPy is the CPU; no arrays: None
    (CPUDevice(cpu:0), None)

    ```
    """
    if x is _NO_ARG:
        _warn_once("get_device()", "get_device() is deprecated. Use `gpu_device()` instead.", DeprecationWarning)
        return gpu_device()
    if isinstance(x, str):
        _warn_once("get_device(backend)", "get_device(backend::String, idx::Int) is deprecated. "
                   "Use `gpu_device(idx)` (or `cpu_device()`) instead.", DeprecationWarning)
        if x == "CPU":
            return cpu_device()
        return gpu_device(idx, force=True)
    found: set = set()
    for a in jax.tree_util.tree_leaves(x):
        if isinstance(a, jax.Array):
            found |= set(a.devices())
        elif isinstance(a, np.ndarray):
            found.add(jax.devices("cpu")[0])
    if not found:
        return None
    if len(found) > 1:
        names = ", ".join(sorted(f"{d.platform}:{d.id}" for d in found))
        raise ValueError(f"get_device: the arrays are on {len(found)} devices ({names}); "
                         "move them to one with cpu_device() or gpu_device(), or read the shardings directly")
    (dev,) = found
    return CPUDevice() if dev.platform == "cpu" else AcceleratorDevice(dev)


def get_device_type(x: Any) -> type | None:
    """MLDataDevices' `get_device_type(x)`: the class of `get_device(x)` (`CPUDevice` or
    `AcceleratorDevice`), `None` when `x` holds no arrays.

    ```python
    >>> get_device_type(cpu(Dense(2, 3)))
    <class 'fluxjax.devices.CPUDevice'>
    >>> get_device_type(np.zeros(3)) is CPUDevice
    True

    ```
    """
    dev = get_device(x)
    return None if dev is None else type(dev)


def default_device_rng(dev: AbstractDevice) -> jax.Array:
    """MLDataDevices' `default_device_rng(dev)`: the next key of the global stream (`seed_`), placed on
    `dev`. JAX has one kind of key for every device, so this is where a Flux script's device RNG goes:
    an initialiser's or a layer's `rng=` (`glorot_uniform(3, 4, rng=default_device_rng(dev))`).

    ```python
    >>> key = default_device_rng(cpu_device())
    >>> glorot_uniform(3, 4, rng=key).shape
    (3, 4)

    ```
    """
    if not isinstance(dev, AbstractDevice):
        raise TypeError(f"default_device_rng expects a device from cpu_device()/gpu_device(), got {type(dev).__name__}")
    return jax.device_put(next_key(), dev.device)


def rng_from_array(x: Any) -> jax.Array:
    """Flux's `rng_from_array(x)`: `default_device_rng(get_device(x))`, the next key of the global stream
    on the device holding `x` (the CPU when `x` holds no arrays). Inside `gradient` or `jit`, where `x` is
    traced, the key is a constant of the program, which places it with the rest.

    ```python
    >>> key = rng_from_array(jnp.ones(3))
    >>> jax.random.normal(key, (2,)).shape
    (2,)

    ```
    """
    if any(isinstance(a, jax.core.Tracer) for a in jax.tree_util.tree_leaves(x)):
        return next_key()
    return default_device_rng(get_device(x) or CPUDevice())


class DeviceIterator:
    """MLDataDevices' `DeviceIterator(dev, iterator)`: iterating it moves each element (an array, a tuple
    of them, a model) to `dev` first, so a training loop reads batches already on the device:
    `for x, y in DeviceIterator(gpu_device(), DataLoader((X, Y), batchsize=64)): ...`. `dev(x)` is
    `jax.device_put`, asynchronous, so the next batch's transfer overlaps the current step.

    ```python
    >>> data = DataLoader((jnp.ones((2, 10)), jnp.zeros(10)), batchsize=4)
    >>> [x.shape for x, y in DeviceIterator(cpu_device(), data)]
    [(2, 4), (2, 4), (2, 2)]

    ```
    """

    def __init__(self, dev: AbstractDevice, iterator: Any):
        if not isinstance(dev, AbstractDevice):
            raise TypeError(f"DeviceIterator(dev, iterator): dev must be cpu_device() or gpu_device(), got {type(dev).__name__}")
        self.dev, self.iterator = dev, iterator

    def __iter__(self):
        return (self.dev(batch) for batch in self.iterator)

    def __len__(self) -> int:
        return len(self.iterator)

    def __repr__(self) -> str:
        return f"DeviceIterator({self.dev!r}, {self.iterator!r})"
