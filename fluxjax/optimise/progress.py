"""`train_`'s progress display: a `tqdm.auto` bar at a terminal or in Jupyter, a plain line now and
then when standard error is a file (a log), nothing when turned off. tqdm is optional (the
`progress` extra): without it, a long loop writes the plain lines."""

from __future__ import annotations

import sys
import time
from typing import Any

LINE_EVERY = 30.0  # seconds between two plain progress lines in a log file
MIN_STEPS = 100  # the default (`progress=None`) shows a bar only on loops this long, at a terminal


class Lines:
    """Progress as plain lines (`train_: step 320/1000, loss 0.0123, 10.5 steps/s`), one every
    `every` seconds and one at the end (unless the last one was), for output that is not a terminal."""

    def __init__(self, total: int | None, file: Any = None, every: float | None = None, clock=time.monotonic):
        self.total, self.file, self.clock = total, file if file is not None else sys.stderr, clock
        self.every = LINE_EVERY if every is None else every
        self.n, self.loss, self.shown = 0, None, None
        self.start = self.last = clock()

    def update(self, n: int = 1) -> None:
        self.n += n
        now = self.clock()
        if now - self.last >= self.every:
            self.last = now
            self._write(now)

    def set_loss(self, loss: float) -> None:
        self.loss = loss

    def close(self) -> None:
        if self.shown != self.n:
            self._write(self.clock())

    def _write(self, now: float) -> None:
        self.shown = self.n
        step = f"{self.n}" if self.total is None else f"{self.n}/{self.total}"
        parts = [f"train_: step {step}"]
        if self.loss is not None:
            parts.append(f"loss {self.loss:.6g}")
        elapsed = now - self.start
        if elapsed > 0:
            parts.append(f"{self.n / elapsed:.3g} steps/s")
        print(", ".join(parts), file=self.file, flush=True)


class Bar:
    """A `tqdm.auto` bar whose postfix is the latest loss read."""

    def __init__(self, tqdm: Any, total: int | None):
        self.bar = tqdm(total=total, desc="train_", unit="step")

    def update(self, n: int = 1) -> None:
        self.bar.update(n)

    def set_loss(self, loss: float) -> None:
        self.bar.set_postfix(loss=f"{loss:.4g}", refresh=False)

    def close(self) -> None:
        self.bar.close()


def _tqdm() -> Any:
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return None
    return tqdm


def _interactive(tqdm: Any) -> bool:
    """A terminal, or Jupyter (where tqdm.auto gives its widget bar and stderr is not a tty)."""
    if tqdm is not None and tqdm.__module__.startswith("tqdm.notebook"):
        return True
    isatty = getattr(sys.stderr, "isatty", None)
    return bool(isatty and isatty())


def progress(data: Any, enabled: bool | None) -> Bar | Lines | None:
    """The display for a loop over `data`: `enabled=False` none; `None` (the default) a bar only for
    data with a length of `MIN_STEPS` or more at a terminal (or in Jupyter); `True` always: a bar
    there, else (a log file, or tqdm not installed) a plain line every `LINE_EVERY` seconds."""
    if enabled is False:
        return None
    try:
        n = len(data)
    except TypeError:
        n = None
    tqdm = _tqdm()
    interactive = _interactive(tqdm)
    if enabled is None and (n is None or n < MIN_STEPS or not interactive or tqdm is None):
        return None
    if interactive and tqdm is not None:
        return Bar(tqdm, n)
    return Lines(n)
