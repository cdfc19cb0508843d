"""A checkpoint directory's numbered steps: the save lock, pruning by rename, cleaning up after a failed
save, and reading the OS error behind one."""

from __future__ import annotations

import errno
import fcntl
import os
import re
import shutil
from typing import Any

LOCK = ".fluxjax-save.lock"
PRUNED = ".fluxjax-pruned"


class CheckpointBusy(RuntimeError):
    """`save` found another process saving to the same checkpoint directory (it holds the directory's lock);
    nothing was written. Save to another directory, or wait for the other writer and save again.

    ```python
    >>> import fcntl, os, tempfile
    >>> path = tempfile.mkdtemp()
    >>> lock = open(os.path.join(path, ".fluxjax-save.lock"), "a")
    >>> fcntl.flock(lock, fcntl.LOCK_EX)           # held, as by another process saving to path
    >>> fluxjax.save(path, Dense(2, 3))
    Traceback (most recent call last):
        ...
    fluxjax._ckpt_dir.CheckpointBusy: save: another process is saving to ...
    >>> lock.close()                                # released: the save goes through
    >>> fluxjax.save(path, Dense(2, 3))
    0

    ```
    """


def lock_dir(path: str) -> Any:
    """Hold `path`'s save lock (an flock: the kernel releases it if this process dies), or `CheckpointBusy`."""
    f = open(os.path.join(path, LOCK), "a")
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        f.close()
        raise CheckpointBusy(f"save: another process is saving to {path!r} (it holds {LOCK}); nothing was written. "
                             "Save from one process at a time, or to another directory") from None
    return f


def drop_pruned(path: str) -> None:
    """Delete what an interrupted prune left (steps already renamed out of their number)."""
    for n in os.listdir(path):
        if n.endswith(PRUNED):
            shutil.rmtree(os.path.join(path, n), ignore_errors=True)


def prune(path: str, keep: int, written: int | None = None) -> None:
    """Keep the newest `keep` steps: each older step is first renamed to `<step>.fluxjax-pruned` (one atomic
    rename: `load` never sees it again), then deleted. The step just `written` is never deleted."""
    for s in step_numbers(path)[:-keep]:
        if s == written:
            continue
        gone = os.path.join(path, f"{s}{PRUNED}")
        os.rename(os.path.join(path, str(s)), gone)
        shutil.rmtree(gone)


def os_errno(e: BaseException) -> int | None:
    """The errno of the OS error behind a failed save: an `OSError` (Python writes, e.g. the metadata) or
    tensorstore's `ValueError("RESOURCE_EXHAUSTED: ... [os_error_code='28']")` (the arrays), anywhere in
    the exception's chain; None when it was not an OS error."""
    seen = set()
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if isinstance(e, OSError) and e.errno:
            return e.errno
        m = re.search(r"os_error_code='(\d+)'", str(e))
        if m:
            return int(m.group(1))
        if "No space left on device" in str(e):
            return errno.ENOSPC
        e = e.__cause__ or e.__context__
    return None


def remove_unfinished(path: str, step: int) -> None:
    """Remove what a failed save of `step` left (orbax's `<step>.orbax-checkpoint-tmp*` directory, or
    `<step>/` itself if the failure came after orbax's rename: `save` checked that it did not exist), so
    the space is freed and no step that `save` did not report is ever listed."""
    for n in os.listdir(path):
        if n == str(step) or re.fullmatch(rf"{step}\.orbax-checkpoint-tmp.*", n):
            shutil.rmtree(os.path.join(path, n), ignore_errors=True)


def step_numbers(path: str) -> list[int]:
    return sorted(int(n) for n in os.listdir(path) if re.fullmatch(r"\d+", n) and os.path.isdir(os.path.join(path, n)))
