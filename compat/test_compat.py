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


def _matrix_rows():
    """(julia, fluxjax spelling, status) for every row of the committed MATRIX.md's name tables."""
    import re

    row = re.compile(r"^\| `(?P<julia>.+?)` \| `(?P<python>fluxjax(?:\.[A-Za-z_][A-Za-z0-9_]*)*)` \| (?P<status>\w+) \|")
    return [m.group("julia", "python", "status") for ln in MATRIX_PATH.read_text(encoding="utf-8").splitlines()
            if (m := row.match(ln))]


def _lookup(spelling: str):
    import importlib

    obj = importlib.import_module("fluxjax")
    for part in spelling.split(".")[1:]:
        if not hasattr(obj, part):
            return None
        obj = getattr(obj, part)
    return obj


def test_matrix_spellings_exist():
    """Every name MATRIX.md lists as supported (or partial) exists at the spelling it lists, read from the
    file itself; an omitted or missing one does not exist there ("a name exists only when it works")."""
    rows = _matrix_rows()
    assert len(rows) > 300, "could not read the name tables of compat/MATRIX.md"
    absent = [f"{j} -> {p}" for j, p, s in rows if s in ("supported", "partial") and _lookup(p) is None]
    assert not absent, f"MATRIX.md lists these as present, but fluxjax lacks them there: {absent}"
    stray = [f"{j} -> {p}" for j, p, s in rows if s in ("omitted", "missing") and _lookup(p) is not None]
    assert not stray, f"MATRIX.md lists these as absent, but fluxjax has them: {stray}"
