"""`save` / `load`: atomic, numbered checkpoints of a model (and optimiser state) through orbax.

On-disk layout. `path` is a directory managed by `orbax.checkpoint.CheckpointManager`:

```
path/
  0/                 one finished checkpoint per step
    meta/            JSON: format tag, step, the structure of `state(model)` and of `state(opt_state)` as a
                     flat table of nodes (non-array values inline; see `_ckpt_tree.py`), dtype/shape/checksum
                     of every array
    arrays/          the arrays, written by orbax (tensorstore, OCDBT; each process writes its own shards),
                     as a flat tree keyed by readable names: `model.layers.0.weight`,
                     `opt_state.layers.0.weight.0`, ... (a plain `ocp.StandardCheckpointer().restore(
                     "path/3/arrays")` sees these names)
  1/
  2.orbax-checkpoint-tmp-1733150000/     a save that was interrupted: ignored, removed by the next save
  0.fluxjax-pruned/  a step being pruned (`keep=`): renamed out of its number first, then deleted
  .fluxjax-save.lock the lock a saving process holds (flock): a second writer gets `CheckpointBusy`
```

A save writes into a temporary directory and renames it to `<step>/` only once everything is on disk,
so a crash (SIGKILL, power loss after the rename is durable) leaves the previous steps readable;
`load` reads the newest finished step unless `step=` is given. A checksum of every array (computed
where the array lives, by XLA, so no host copy is made; orbax itself checksums only its indices) and the
sha256 of the metadata are checked on load, so corrupted files raise `CheckpointError` instead of
loading silently wrong numbers. The metadata is validated (dtypes, shapes, orbax's own record of them, the target
model's shapes) before any array is read, so a hostile checkpoint cannot make `load` allocate more than
it holds or the model wants.
"""

from __future__ import annotations

import atexit
import errno
import hashlib
import json
import math
import os
from typing import Any, NamedTuple

import jax
import numpy as np

from ._ckpt_checksum import checksum, digest
from ._ckpt_dir import CheckpointBusy, drop_pruned, lock_dir, os_errno, prune, remove_unfinished, step_numbers
from ._ckpt_tree import Encoder, array_refs, decode, from_v1
from ._flat import shape_of
from .errors import DimensionMismatch
from .loading import CheckpointError, StructureMismatch, array_paths, plan_load, show_path, state
from .random import is_typed_key

FORMAT = "fluxjax-checkpoint"
VERSION = 3  # 3: readable array names, device checksums; 2: flat node table, sha256 per array; 1: nested JSON
_ITEMS = ("arrays", "meta")
_MAX_META = 256 * 2**20  # the JSON metadata of a model with millions of arrays stays far below this


class Checkpoint(NamedTuple):
    """What `load` returns: `model` and `opt_state` (the objects passed in, now loaded, or the raw nested
    state when none was passed; `opt_state` is None when the checkpoint has none) and `step`.

    ```python
    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "ckpt")
    >>> fluxjax.save(path, Dense(2, 3), step=7)
    7
    >>> ck = fluxjax.load(path, Dense(2, 3))      # a Checkpoint: a NamedTuple
    >>> ck.step, ck.opt_state, type(ck.model).__name__
    (7, None, 'Dense')

    ```
    """

    model: Any
    opt_state: Any
    step: int


def _ocp():
    import orbax.checkpoint as ocp  # imported lazily: it takes seconds

    return ocp


def _manager(path: str, create: bool, async_: bool = False):
    ocp = _ocp()
    # pruning (`keep=`) is done by `_prune`, which renames a step out of its number before deleting it
    opts = ocp.CheckpointManagerOptions(enable_async_checkpointing=async_, create=create, max_to_keep=None,
                                        cleanup_tmp_directories=create)
    return ocp.CheckpointManager(os.path.abspath(path), options=opts, item_names=_ITEMS)


def save(path: str | os.PathLike, model: Any, opt_state: Any = None, step: int | None = None, *,
         keep: int | None = None, async_: bool = False) -> int:
    """Save `state(model)` (and `state(opt_state)`) as a new numbered checkpoint under directory `path`.

    - `path`: the checkpoint directory (created if needed); each call adds a subdirectory `<step>/`.
    - `opt_state`: the optimiser state from `setup`, saved with the model (moments, counters, hyperparameters;
      `load` restores them, and each leaf's rule shows the loaded values, as `loadmodel_`).
    - `step`: the step number; None means one more than the newest step in `path` (0 for the first).
      An existing step is never overwritten (`ValueError`).
    - `keep`: keep only the newest `keep` steps, the highest step numbers (older ones are renamed out of
      their number, then deleted, after a successful save, so a crash mid-prune never leaves a half-deleted
      numbered step). The step just written is never deleted: with `keep`, a `step` lower than one already
      in `path` raises `ValueError` before anything is written (it would be the first to go).
    - `async_`: return as soon as the arrays are copied off the accelerator (orbax's
      `enable_async_checkpointing`) and write them in the background; `wait_until_finished()` waits for
      it (and raises its error, if any). A later `save` or `load` of the same `path` waits first.

    The write is atomic (temporary directory, then rename): a crash mid-save leaves the earlier steps
    intact. A full disk (or any other OS error while writing) raises that `OSError` (`errno.ENOSPC`), removes
    what the failed save wrote, and never leaves a listed step that cannot be read. One process saves to
    a directory at a time: a second writer gets `CheckpointBusy` (an flock on `path/.fluxjax-save.lock`,
    released when the first finishes or dies). Sharded arrays are written shard by shard, each process
    its own (orbax); the arrays are stored under readable names (`model.layers.0.weight`). Models hundreds
    of layers deep save (the structure is stored flat). Returns the step written. Bit-exact round trip for
    parameters, BatchNorm statistics, RNG keys (raw or typed) and optimiser state.

    ```python
    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "ckpt")
    >>> model = Chain(Dense(2, 3))
    >>> opt_state = setup(Adam(), model)
    >>> fluxjax.save(path, model, opt_state, step=100)
    100
    >>> model, opt_state, step = fluxjax.load(path, model, opt_state)
    >>> step
    100

    ```
    """
    path = os.fspath(path)
    if keep is not None and (not isinstance(keep, (int, np.integer)) or isinstance(keep, bool) or keep < 1):
        raise ValueError(f"save: keep must be a positive integer (how many newest steps to keep), got {keep!r}")
    wait_until_finished(path)
    enc = Encoder(checksum)
    body = {"format": FORMAT, "version": VERSION, "model": enc.encode(state(model), "model"),
            "opt_state": None if opt_state is None else enc.encode(state(opt_state), "opt_state"),
            "nodes": enc.nodes, "arrays": enc.info}
    if os.path.exists(path) and not os.path.isdir(path):
        raise FileExistsError(f"save: {path!r} exists and is not a directory")
    lead = jax.process_index() == 0
    if lead:
        os.makedirs(path, exist_ok=True)
    lock = lock_dir(path) if lead else None
    mgr = None
    try:
        if lead:
            drop_pruned(path)
        mgr = _manager(path, create=True, async_=async_)
        if step is None:
            latest = mgr.latest_step()
            step = 0 if latest is None else latest + 1
        if not isinstance(step, (int, np.integer)) or step < 0:
            raise ValueError(f"save: step must be a non-negative integer, got {step!r}")
        step = int(step)
        steps = list(mgr.all_steps())
        if step in steps:
            raise ValueError(f"save: step {step} already exists in {path!r}; checkpoints are never overwritten")
        if keep is not None and steps and step < max(steps):
            raise ValueError(f"save: step {step} is lower than step {max(steps)} already in {path!r}; with keep={keep}, "
                             f"pruning keeps the highest step numbers and would delete what this save writes. "
                             f"Nothing was written: save with a step above {max(steps)} (or step=None), to another "
                             "directory, or without keep=")
        body["step"] = step
        text = json.dumps(body)
        meta = {"fluxjax": text, "sha256": hashlib.sha256(text.encode()).hexdigest()}
        ocp = _ocp()
        items = {"meta": ocp.args.JsonSave(meta)}
        if jax.process_count() > 1:  # a process's own unsharded arrays are the same in every process: saved once
            enc.arrays = {k: np.asarray(a) if isinstance(a, jax.Array) and a.is_fully_addressable else a
                          for k, a in enc.arrays.items()}
        if enc.arrays:
            items["arrays"] = ocp.args.PyTreeSave(enc.arrays)
        job = _Save(path, step, mgr, lock, keep)
        try:
            mgr.save(step, args=ocp.args.Composite(**items), force=True)
        except Exception as e:
            job.fail(e)
    except BaseException:
        if mgr is not None:
            mgr.close()
        if lock is not None:
            lock.close()
        raise
    if async_:
        _pending.append(job)
    else:
        job.finish()
    return step


class _Save:
    """A save under way: `finish` waits for orbax, then prunes (`keep`) and releases the directory's lock."""

    def __init__(self, path: str, step: int, mgr: Any, lock: Any, keep: int | None):
        self.path, self.step, self.mgr, self.lock, self.keep = path, step, mgr, lock, keep

    def fail(self, e: BaseException) -> None:
        try:
            self.mgr.close()
        except Exception:  # the save already failed; its own error is the one to report
            pass
        if self.lock is not None:
            remove_unfinished(self.path, self.step)
            self.lock.close()
        os_error = os_errno(e)
        if os_error is None:
            raise e
        what = "no space left on device" if os_error == errno.ENOSPC else os.strerror(os_error)
        raise OSError(os_error, f"save: {what} while writing step {self.step} to {self.path!r}; nothing of step "
                                f"{self.step} was kept and the earlier steps are intact (free space and save again)") from e

    def finish(self) -> None:
        try:
            self.mgr.wait_until_finished()
        except Exception as e:
            self.fail(e)
        self.mgr.close()
        try:
            if self.lock is not None and self.keep is not None:
                prune(self.path, self.keep, self.step)
        finally:
            if self.lock is not None:
                self.lock.close()


_pending: list[_Save] = []


def wait_until_finished(path: str | os.PathLike | None = None) -> None:
    """Wait for the background saves (`save(..., async_=True)`) to `path` (None: to every path) to be on
    disk, prune what their `keep=` asks, and raise the first one's error (e.g. `OSError` ENOSPC), if any.

    ```python
    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "ckpt")
    >>> model = Chain(Dense(2, 3))
    >>> fluxjax.save(path, model, async_=True)   # returns once the arrays are copied: step 0
    0
    >>> fluxjax.wait_until_finished()             # the step is now on disk
    >>> [d for d in sorted(os.listdir(path)) if not d.startswith(".")]
    ['0']

    ```

    """
    where = None if path is None else os.path.abspath(os.fspath(path))
    jobs = [j for j in _pending if where is None or os.path.abspath(j.path) == where]
    error = None
    for j in jobs:
        _pending.remove(j)
        try:
            j.finish()
        except Exception as e:
            error = error or e
    if error is not None:
        raise error


atexit.register(wait_until_finished)


def _check_info(info: Any, where: str) -> None:
    """The metadata's table of arrays, validated before anything is read: plain numeric dtypes, shapes of
    non-negative ints whose byte count int64 can hold, a checksum each (`checksum`, or the `sha256` of
    format versions 1 and 2)."""
    if not isinstance(info, dict):
        raise CheckpointError(f"load: {where!r}: the metadata's array table is not a mapping")
    for k, d in info.items():
        if not isinstance(d, dict) or (set(d) not in ({"dtype", "shape", "checksum"}, {"dtype", "shape", "sha256"})
                or not isinstance(d.get("checksum", d.get("sha256")), str)):
            raise CheckpointError(f"load: {where!r}: array {k!r} has a malformed metadata entry {d!r:.80}")
        try:
            dt = np.dtype(d["dtype"]) if isinstance(d["dtype"], str) else None
        except TypeError:
            dt = None
        if dt is None or dt.hasobject or dt.fields or dt.subdtype:
            raise CheckpointError(f"load: {where!r}: array {k!r} has dtype {d['dtype']!r}, not a plain numeric dtype")
        shape = d["shape"]
        if not isinstance(shape, list) or not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in shape):
            raise CheckpointError(f"load: {where!r}: array {k!r} has an invalid shape {shape!r:.80}")
        if math.prod(shape) * dt.itemsize >= 2**63:
            raise CheckpointError(f"load: {where!r}: array {k!r} claims shape {shape}, past what int64 can count")


def _check_on_disk(where: str, info: dict) -> None:
    """orbax's own record of the arrays (read from tensorstore's metadata, no data) must be what the
    metadata says, before any array is restored."""
    from etils import epath

    handler = _ocp().PyTreeCheckpointHandler()
    try:
        tree = handler.metadata(epath.Path(where) / "arrays").tree
    finally:
        handler.close()
    disk = {k: (tuple(m.shape), np.dtype(m.dtype)) for k, m in dict(tree).items()}
    want = {k: (tuple(d["shape"]), np.dtype(d["dtype"])) for k, d in info.items()}
    if disk != want:
        bad = sorted(k for k in set(disk) | set(want) if disk.get(k) != want.get(k))
        raise CheckpointError(f"load: {where!r}: the arrays on disk do not match the metadata (arrays {bad[:8]})")


def _needed(body: dict, info: dict, targets: tuple, where: str) -> tuple[set[str], dict[str, Any]]:
    """The arrays `load` must read, decided from the metadata alone: for a target `(key, dst, name)` with a
    `dst`, the arrays at paths where `dst` holds an array, each of `dst`'s shape there (else
    `DimensionMismatch`, before anything is read); with no `dst`, all of that part. Arrays at paths where
    `dst` has no array are never read: `loadmodel_` ignores them (`bias=False`) or reports them from
    their shape alone. The structure must name exactly the arrays of the table. Also returns, for each
    array whose place in a `dst` holds a jax array, that array's sharding: it is restored into it."""
    refs = {key: array_refs(body["nodes"], body[key], where) for key in ("model", "opt_state")
            if body.get(key) is not None}
    named = {n for r in refs.values() for _, n in r}
    if named != set(info):
        odd = sorted(named ^ set(info), key=str)[:8]
        raise CheckpointError(f"load: {where!r}: the structure and the array table disagree (arrays {odd})")
    needed: set[str] = set()
    shardings: dict[str, Any] = {}
    for key, dst, name in targets:
        if key not in refs:
            continue
        if dst is None:
            needed.update(n for _, n in refs[key])
            continue
        leaves = dict(array_paths(dst))
        want = {p: shape_of(a) for p, a in leaves.items()}
        for p, n in refs[key]:
            if p not in want:
                continue
            if tuple(info[n]["shape"]) != want[p]:
                raise DimensionMismatch(f"load: {where!r}: {name}: {show_path(p)}: tried to load size "
                                        f"{tuple(info[n]['shape'])} array into size {want[p]}")
            needed.add(n)
            a = leaves[p]
            a = jax.random.key_data(a) if is_typed_key(a) else a
            if isinstance(a, jax.Array) and not isinstance(a, jax.core.Tracer):
                shardings.setdefault(n, a.sharding)
    return needed, shardings


def _jax_holds(dtype: str) -> bool:
    """Whether a jax array can have this stored dtype now (float64 cannot with x64 off)."""
    dt = np.dtype(dtype)
    return jax.dtypes.canonicalize_dtype(dt) == dt


def _read(path: str, step: int | None, targets: tuple) -> tuple[dict, dict, int, set[str]]:
    """Read step `step` (None: the newest): the metadata first, validated (`_check_info`, orbax's record of
    the arrays, `_needed` for `targets`, `[(key, dst, name)]`), and only then the arrays it needs.
    Returns the metadata, the arrays, the step and the names of the arrays left unread."""
    wait_until_finished(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"load: no checkpoint directory {path!r}")
    if not os.path.isdir(path):
        raise CheckpointError(f"load: {path!r} is a file, not a fluxjax checkpoint directory (see fluxjax.save)")
    steps = step_numbers(path)
    if not steps:
        raise CheckpointError(f"load: {path!r} holds no finished fluxjax checkpoint (no numbered step directory)")
    if step is None:
        step = steps[-1]
    elif step not in steps:
        raise CheckpointError(f"load: {path!r} has no step {step}; it has steps {steps}")
    where = os.path.join(os.path.abspath(path), str(step))  # (orbax reads absolute paths only)
    if not os.path.isdir(os.path.join(where, "meta")):
        raise CheckpointError(f"load: {where!r} is not a fluxjax checkpoint (no meta item)")
    meta_file = os.path.join(where, "meta", "metadata")
    if os.path.isfile(meta_file) and os.path.getsize(meta_file) > _MAX_META:
        raise CheckpointError(f"load: {where!r}: the metadata file is {os.path.getsize(meta_file)} bytes, "
                              f"more than the {_MAX_META} a fluxjax checkpoint writes")
    ocp = _ocp()
    mgr = None
    try:
        mgr = _manager(path, create=False)  # reads every step's metadata, which may be damaged too
        meta = mgr.restore(step, args=ocp.args.Composite(meta=ocp.args.JsonRestore())).meta
        if not isinstance(meta, dict) or not isinstance(meta.get("fluxjax"), str):
            raise CheckpointError(f"load: {where!r} is not a fluxjax checkpoint")
        text = meta["fluxjax"]
        if hashlib.sha256(text.encode()).hexdigest() != meta.get("sha256"):
            raise CheckpointError(f"load: {where!r}: the metadata is corrupted (checksum mismatch)")
        body = json.loads(text)
        if body.get("format") != FORMAT:
            raise CheckpointError(f"load: {where!r} is not a fluxjax checkpoint")
        if body.get("version") not in (1, VERSION):
            raise CheckpointError(f"load: {where!r} has format version {body.get('version')}; this fluxjax reads 1 and "
                                  f"{VERSION}")
        if body["version"] == 1:
            body["nodes"], (body["model"], body["opt_state"]) = from_v1([body["model"], body.get("opt_state")], where)
        info = body["arrays"]
        _check_info(info, where)
        if info:
            _check_on_disk(where, info)
        needed, shardings = _needed(body, info, targets, where)
        arrays: dict[str, Any] = {}
        if needed:
            # into a destination's sharding only where jax holds the stored dtype as it is (with x64 off a
            # float64 array would be narrowed on restore): the rest is read to the host, exact
            restore_args = {k: ocp.ArrayRestoreArgs(sharding=shardings[k], global_shape=tuple(info[k]["shape"]),
                                                    dtype=np.dtype(info[k]["dtype"]))
                            if k in shardings and _jax_holds(info[k]["dtype"]) else ocp.RestoreArgs(restore_type=np.ndarray)
                            for k in info if k in needed}
            item = {k: np.empty(0) for k in restore_args}  # the structure to read; the values are not used
            arrays = dict(mgr.restore(step, args=ocp.args.Composite(arrays=ocp.args.PyTreeRestore(
                item=item, restore_args=restore_args, partial_restore=needed != set(info)))).arrays)
    except (CheckpointError, DimensionMismatch):
        raise
    except Exception as e:  # orbax/tensorstore/json raise many types for damaged files
        raise CheckpointError(f"load: cannot read checkpoint {where!r}: {type(e).__name__}: {e}") from e
    finally:
        if mgr is not None:
            mgr.close()
    if set(arrays) != needed:
        raise CheckpointError(f"load: {where!r}: the arrays on disk do not match the metadata")
    for k in needed:
        a, d = arrays[k], info[k]
        if (np.dtype(a.dtype).name != d["dtype"] or list(a.shape) != d["shape"]
                or (checksum(a) != d["checksum"] if "checksum" in d else digest(np.asarray(a)) != d["sha256"])):
            raise CheckpointError(f"load: {where!r}: array {k} is corrupted (dtype, shape or checksum mismatch)")
    for k in set(info) - needed:  # never read: a stand-in of the right shape that allocates nothing
        arrays[k] = np.broadcast_to(np.zeros((), np.dtype(info[k]["dtype"])), tuple(info[k]["shape"]))
    return body, arrays, step, set(info) - needed


def load(path: str | os.PathLike, model: Any = None, opt_state: Any = None, *, step: int | None = None) -> Checkpoint:
    """Read a checkpoint written by `save`; returns `Checkpoint(model, opt_state, step)`.

    - `path`: the checkpoint directory given to `save`.
    - `model`: when given, loaded in place with `loadmodel_` (same validation: a mismatch raises before
      anything is written) and returned; when None, the raw nested state (dicts/tuples/jax arrays, as
      `state(model)` gave) is returned instead, bit-exact: an array whose dtype jax would narrow (float64,
      int64, complex128 with x64 off) comes back as a NumPy array.
    - `opt_state`: likewise for the optimiser state (build it with `setup(rule, model)` first): moments,
      counters and hyperparameters; each leaf's `rule` then shows the loaded hyperparameters (see `loadmodel_`).
    - `step`: which step to read; None reads the newest finished one.

    Raises `FileNotFoundError` for a missing path, `CheckpointError` (a `ValueError`) for a directory that is
    not a (readable, uncorrupted) fluxjax checkpoint, `StructureMismatch` / `DimensionMismatch` (naming the
    path, e.g. `model: layers[0].weight`) when the checkpoint does not fit `model` / `opt_state`. Either
    everything (model and optimiser state) is loaded or nothing is.

    ```python
    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "ckpt")
    >>> model = Chain(Dense(2, 3))
    >>> opt_state = setup(Adam(), model)
    >>> fluxjax.save(path, model, opt_state, step=7)
    7
    >>> model, opt_state, step = fluxjax.load(path, model, opt_state)
    >>> step
    7
    >>> raw, _, _ = fluxjax.load(path)
    >>> raw["layers"][0]["weight"].shape
    (3, 2)

    ```
    """
    path = os.fspath(path)
    body, arrays, step, unread = _read(path, step, (("model", model, "model"), ("opt_state", opt_state, "opt_state")))
    where = os.path.join(path, str(step))
    dev: dict[str, Any] = dict(arrays)
    try:
        m_state, o_state = decode(body["nodes"], [body["model"], body.get("opt_state")], dev, where, unread)
    except CheckpointError:
        raise
    except Exception as e:
        raise CheckpointError(f"load: {where!r}: malformed checkpoint structure: {type(e).__name__}: {e}") from e
    if opt_state is not None and o_state is None:
        raise StructureMismatch(f"load: {where!r} holds no optimiser state, but opt_state was given")
    plans = []
    for name, dst, src in (("model", model, m_state), ("opt_state", opt_state, o_state)):
        if dst is None:
            continue
        try:
            plans.append(plan_load(dst, src))
        except ValueError as e:
            raise type(e)(f"load: {where!r}: {name}: {str(e).removeprefix('loadmodel_: ')}") from e
    for p in plans:
        p.commit()
    return Checkpoint(m_state if model is None else model, o_state if opt_state is None else opt_state, step)


__all__ = ["Checkpoint", "CheckpointBusy", "save", "load", "wait_until_finished"]
