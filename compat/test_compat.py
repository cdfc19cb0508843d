"""Run every compatibility case, then check that compat/MATRIX.md is what this run generates."""

import pathlib
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from compat._case import load_all, run_case  # noqa: E402
from compat.matrix import MATRIX_PATH, generate  # noqa: E402

CASES = load_all()
RESULTS: dict = {}


def _param(c):
    marks = [pytest.mark.xfail(strict=True, reason=c.xfail)] if c.xfail else []
    return pytest.param(c, id=c.id, marks=marks)


@pytest.mark.parametrize("c", [_param(c) for c in CASES.values()])
def test_case(c):
    err = run_case(c)
    RESULTS[c.id] = err
    if err is not None:
        pytest.fail(f"{c.source}: {err}\n--- Julia ---\n{c.julia}", pytrace=False)


def test_matrix_is_current():
    """MATRIX.md must equal the matrix generated from this run's outcomes (cases not yet run here are run now)."""
    fresh = generate(RESULTS)
    committed = MATRIX_PATH.read_text(encoding="utf-8") if MATRIX_PATH.exists() else ""
    assert committed == fresh, "compat/MATRIX.md is stale: regenerate it with `python -m compat.matrix`"
