"""The compiled call: `fluxjax.jit` (call.py, one program per structure in entry.py), the reuse of its
walk from one call to the next (plan.py, with the generated accessors of access.py), `train_`'s held
steps (held.py) and the XLA options (options.py)."""
