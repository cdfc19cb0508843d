"""The package's import rules (DESIGN.md, ARCHITECTURE.md): no import cycle between fluxjax's modules, also
through imports inside functions; no `_`-name imported from a module of another package; the core imports
nothing of fluxjax above it. Read from the source with `ast`, nothing is run."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "fluxjax"
CORE_MAY_IMPORT = {"fluxjax.random", "fluxjax.mode_warning"}  # leaf modules importing nothing of fluxjax


def _modules() -> dict[str, Path]:
    out = {}
    for f in ROOT.rglob("*.py"):
        parts = f.relative_to(ROOT.parent).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = f
    return out


MODULES = _modules()


def _imports(name: str, path: Path) -> list[tuple[str, str | None]]:
    """(module imported, name imported from it or None) for every import at any depth of `path`."""
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            target = ".".join(base + ([node.module] if node.module else []))
            for a in node.names:
                sub = f"{target}.{a.name}"
                out.append((sub, None) if sub in MODULES else (target, a.name))
        elif isinstance(node, ast.Import):
            out.extend((a.name, None) for a in node.names)
    return out


def _owner(target: str) -> str | None:
    while target and target not in MODULES:
        target = target.rpartition(".")[0]
    return target or None


def _edges() -> dict[str, set[str]]:
    edges: dict[str, set[str]] = {}
    for name, path in MODULES.items():
        for target, _ in _imports(name, path):
            t = _owner(target)
            # a package's __init__ re-exports; importing a parent package is how Python reaches a submodule
            if t and t != name and not name.startswith(t + ".") and MODULES[t].name != "__init__.py":
                edges.setdefault(name, set()).add(t)
    return edges


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan's algorithm, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out = []
    for start in MODULES:
        if start in index:
            continue
        work = [(start, iter(sorted(edges.get(start, ()))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on.add(start)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges.get(w, ())))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def test_no_import_cycles():
    assert _cycles(_edges()) == []


def test_cycle_finder_finds_a_cycle():
    edges = _edges()
    a, b = "fluxjax.core.layer", "fluxjax.core.walk"
    assert b not in edges.get(a, set())
    edges.setdefault(a, set()).add(b)  # walk imports layer; this closes the loop
    assert any(a in c and b in c for c in _cycles(edges))  # the cycle found may pass through more modules


def test_no_private_imports_across_packages():
    bad = []
    for name, path in MODULES.items():
        for target, imported in _imports(name, path):
            owner = _owner(target)
            if imported is None or owner is None or not imported.startswith("_") or imported.startswith("__"):
                continue
            if owner.split(".")[:2] != name.split(".")[:2]:
                bad.append(f"{name} imports {imported} from {owner}")
    assert bad == []


@pytest.mark.parametrize("name", sorted(n for n in MODULES if n.startswith("fluxjax.core.")))
def test_core_imports_nothing_above_it(name):
    above = {_owner(t) for t, _ in _imports(name, MODULES[name])} - {None}
    above = {t for t in above if not t.startswith("fluxjax.core")}
    assert above <= CORE_MAY_IMPORT
