"""Saving, loading and moving models: Flux's `state` / `loadmodel!`, orbax checkpoints, `.npz` / `.safetensors`.

- `state(model)`, `loadmodel_(dst, src)`: Flux's `src/loading.jl` (in `loading.py`).
- `save(path, model, opt_state, step)`, `load(path, model, opt_state)`: atomic numbered orbax
  checkpoints with checksums, readable array names, restore into the model's shardings, async save
  (`wait_until_finished`), one writer per directory (`CheckpointBusy`) (in `_checkpoint.py`, which documents the on-disk layout).
- `export_npz`, `import_npz_`, `export_safetensors`, `import_safetensors_`: flat files keyed
  `layers.0.weight` in Flux's orientation, for Julia's NPZ.jl / SafeTensors.jl (in `_npz.py` and
  `_safetensors.py`, which documents the row-major / column-major rule; `_flat.py` is the model's flat view).

Every file is untrusted input: headers are checked (dtype, shape, size, against the model) before
anything is read or allocated.

Errors: `DimensionMismatch` (wrong array size), `StructureMismatch` (fields/lengths differ),
`CheckpointError` (damaged or foreign file) are all `ValueError`s naming the path or file;
a missing file or directory raises `FileNotFoundError`.
"""

from ._checkpoint import Checkpoint, CheckpointBusy, load, save, wait_until_finished
from ._flat import flat_state
from ._npz import export_npz, import_npz_
from ._safetensors import export_safetensors, import_safetensors_, read_safetensors, write_safetensors
from .errors import DimensionMismatch
from .loading import CheckpointError, StructureMismatch, array_paths, loadmodel_, state

__all__ = [
    "Checkpoint", "CheckpointBusy", "CheckpointError", "DimensionMismatch", "StructureMismatch", "array_paths", "export_npz",
    "export_safetensors", "flat_state", "import_npz_", "import_safetensors_", "load", "loadmodel_",
    "read_safetensors", "save", "state", "wait_until_finished", "write_safetensors",
]
