"""The core every other part of fluxjax builds on, importing nothing above it.

- `layer.py`: `@layer`, the pytree registration of layer classes, the structure version.
- `walk.py`: the walk over live arguments: each array's `Slot`, role, path and tie identity, and a
  signature of everything static; `rebuild`, the arguments made anew with new leaf values.
- `trainables.py`: Optimisers.jl's trainable view (the arrays reached through trainable fields).
- `plain.py`: plain objects (no `@layer`) that hold layers or float arrays, which the walk keeps static.
- `static_writes.py`: the log of fields set on the models while a program is traced (a program whose
  trace set one is not reused).
- `region.py`: the state thread: `Region`, `rebind`, `commit`, `is_active`, `current_region`, and the
  one region runner `run_in_region`.
- `keys.py`: what a compiled program depends on beside its inputs (`static_key`, `code_names`).
- `sharing.py`: which arrays share a buffer (ties) across a traced region.
- `lazy.py`: `autosize`'s placeholder `_` and the layer call that waits for it.

A stateful layer of your own rebinds its state through `rebind(self, "field", value)` and asks
`is_active(self)` for Flux's train/test decision, as the built-in BatchNorm and Dropout do.
"""

from .layer import is_layer, layer
from .region import commit, current_region, is_active, rebind, run_in_region
from .walk import Slot, rebuild, walk

__all__ = ["Slot", "commit", "current_region", "is_active", "is_layer", "layer", "rebind", "rebuild", "run_in_region", "walk"]
