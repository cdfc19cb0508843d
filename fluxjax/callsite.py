"""Where a warning about the user's code points: the first frame outside fluxjax and JAX.

A warning raised while a program is traced is many frames deep in JAX's tracing machinery, so a fixed
`stacklevel` names a line of JAX's (`pjit.py`). `stacklevel()` counts the frames up to the user's.
"""

from __future__ import annotations

import os
import sys

import jax

_OURS = (os.path.dirname(os.path.abspath(__file__)) + os.sep, os.path.dirname(os.path.abspath(jax.__file__)) + os.sep)


def stacklevel() -> int:
    """The `stacklevel` for a `warnings.warn` made by the caller that names the first frame outside
    fluxjax and JAX (the user's call of the compiled function)."""
    f, level = sys._getframe(1), 1
    while f is not None and f.f_code.co_filename.startswith(_OURS):
        f, level = f.f_back, level + 1
    return level
