"""Docstring example coverage: which public names of `fluxjax` carry a `>>>` example (the examples
themselves run as doctests in the default pytest run, `--doctest-modules` over `fluxjax/`).

`python tests/test_docstring_coverage.py` prints the coverage and the names without an example."""

import inspect
import types

import fluxjax

# The core: every name here must have an example (issue #25).
CORE = [
    "gradient", "withgradient", "pullback", "jacobian", "hessian", "Params", "Grads",
    "setup", "update", "update_", "train_", "trainstep_", "state", "loadmodel_", "save", "load",
    "functional", "jit", "testmode_", "trainmode_", "accuracy",
]  # fmt: skip


def public_names(mod=fluxjax) -> list[str]:
    """The public, non-module names of `mod` (its `__all__` if it has one, else `dir`)."""
    names = getattr(mod, "__all__", None) or [n for n in dir(mod) if not n.startswith("_")]
    return sorted(n for n in names if not isinstance(getattr(mod, n), types.ModuleType))


def has_example(obj) -> bool:
    return ">>>" in (inspect.getdoc(obj) or "")


def _defined_in(prefix: str) -> list[str]:
    return [n for n in public_names() if (getattr(getattr(fluxjax, n), "__module__", None) or "").startswith(prefix)]


def layer_names() -> list[str]:
    """The layer types: public classes defined in `fluxjax.layers`."""
    return [n for n in _defined_in("fluxjax.layers.") if inspect.isclass(getattr(fluxjax, n))]


def rule_names() -> list[str]:
    """The optimiser rules: public capitalised constructors defined in `fluxjax.optimise`'s rule modules."""
    mods = ("fluxjax.optimise._adam_family", "fluxjax.optimise._basic_rules", "fluxjax.optimise._composite")
    return [n for n in public_names() if n[:1].isupper() and getattr(getattr(fluxjax, n), "__module__", "") in mods]


def coverage() -> tuple[int, int, list[str]]:
    names = public_names()
    missing = [n for n in names if not has_example(getattr(fluxjax, n))]
    return len(names) - len(missing), len(names), missing


def test_core_names_have_examples():
    missing = [n for n in CORE if not has_example(getattr(fluxjax, n))]
    assert not missing, f"core public names without a >>> example in their docstring: {missing}"


def test_every_layer_and_rule_has_an_example():
    layers, rules = layer_names(), rule_names()
    assert "Dense" in layers and "Adam" in rules  # the discovery itself works
    missing = [n for n in layers + rules if not has_example(getattr(fluxjax, n))]
    assert not missing, f"layers/optimiser rules without a >>> example: {missing}"


# Measured 2026-12-06: 300 of 327 public names (92%); the floor leaves room for a few new names.
COVERAGE_FLOOR = 0.85


def test_docstring_coverage_floor():
    have, total, missing = coverage()
    assert have / total >= COVERAGE_FLOOR, (
        f"{have}/{total} public names have a >>> example ({have / total:.0%}), below {COVERAGE_FLOOR:.0%}; "
        f"without one: {' '.join(missing)}"
    )


if __name__ == "__main__":
    have, total, missing = coverage()
    print(f"{have}/{total} public names of fluxjax have a >>> example ({100 * have / total:.0f}%)")
    print("without:", " ".join(missing))
