"""Every device, and many machines: data and model parallelism over a `jax.sharding.Mesh`.

fluxjax does no collective communication of its own. It places arrays: model and optimiser arrays
replicated (or split along a mesh axis, for model parallelism), each batch split along its LAST axis
(Flux's observation axis) over the mesh's `"data"` axis. `jax.jit` of a step with such inputs is one
SPMD program (GSPMD): means over the batch, BatchNorm's batch statistics and the gradients are global,
computed across every device with the collectives XLA inserts, so the numbers are those of one device
up to float rounding.

```python
import fluxjax as Flux
from fluxjax import parallel

mesh = parallel.device_mesh()                       # every device, one axis "data"
Flux.train_(loss, model, loader, opt_state, mesh=mesh)

# model parallel: split the first (output) axis of every Dense weight over 2 devices
mesh = parallel.device_mesh(data=4, model=2)
opt_state = Flux.setup(Flux.Adam(), model)
parallel.shard_(model, mesh, rules={"weight": parallel.P("model", None), "bias": parallel.P("model")},
                opt_state=opt_state)                # Adam's moments follow their weights
```

Many machines: one process per host, `parallel.initialize()` first (a thin wrapper of
`jax.distributed.initialize`), every process builds the same model (same seed), loads its own part
of the data (`local_slice`) and passes its local batches; `shard_batch` assembles the global batch
with `jax.make_array_from_process_local_data`.
"""

from jax.sharding import PartitionSpec as P

from .batches import ShardedBatches, shard_batch, shard_batches
from .mesh import device_mesh
from .placement import shard_
from .processes import initialize, local_slice

__all__ = [
    "P",
    "device_mesh",
    "shard_",
    "shard_batch",
    "shard_batches",
    "ShardedBatches",
    "local_slice",
    "initialize",
]
