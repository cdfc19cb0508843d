"""Flux-style printing of models: one line per layer with its parameter count, and a total."""

from __future__ import annotations

from typing import Any

from .functors import is_array, is_float_array, is_layer, trainable

_COMMENT_COL = 40


def _arrays(v, out):
    if is_array(v):
        out.append(v)
    elif is_layer(v):
        for e in v.__dict__.values():
            _arrays(e, out)
    elif isinstance(v, (list, tuple)):
        for e in v:
            _arrays(e, out)
    elif isinstance(v, dict):
        for e in v.values():
            _arrays(e, out)
    return out


def _dedup(xs):
    seen, out = set(), []
    for x in xs:
        if id(x) not in seen:
            seen.add(id(x))
            out.append(x)
    return out


def counts(m: Any) -> tuple[list, list]:
    """(trainable arrays, other arrays) of a layer tree, each array once."""
    train = []

    def go(v, seen):
        if is_layer(v):
            if id(v) in seen:
                return
            seen.add(id(v))
            for e in trainable(v).values():
                go(e, seen)
        elif is_array(v):
            if is_float_array(v):
                train.append(v)
        elif isinstance(v, (list, tuple)):
            for e in v:
                go(e, seen)
        elif isinstance(v, dict):
            for e in v.values():
                go(e, seen)

    go(m, set())
    train = _dedup(train)
    ids = {id(x) for x in train}
    other = [x for x in _dedup(_arrays(m, [])) if id(x) not in ids and is_float_array(x)]
    return train, other


def _count_comment(m) -> str:
    train, other = counts(m)
    n = sum(int(x.size) for x in train)
    if not train and not other:
        return ""
    s = f"# {n:,} parameters"
    if other:
        s += f", plus {sum(int(x.size) for x in other):,} non-trainable"
    return s


def sublayers(m) -> list[tuple[str | None, Any]]:
    """(label, child) pairs to print expanded; containers override `_show_children`."""
    if hasattr(m, "_show_children"):
        return m._show_children()
    out = []
    for v in m.__dict__.values():
        if is_layer(v):
            out.append((None, v))
        elif isinstance(v, (list, tuple)) and any(is_layer(e) for e in v):
            out.extend((None, e) for e in v)
    return out


def one_line(m) -> str:
    if hasattr(m, "_show"):
        return m._show()
    parts = []
    for k, v in m.__dict__.items():
        if is_array(v):
            parts.append(f"{k}={v.dtype}{list(v.shape)}")
        elif callable(v) and not is_layer(v):
            parts.append(f"{k}={getattr(v, '__name__', repr(v))}")
        elif isinstance(v, (int, float, bool, str, tuple)) or v is None:
            parts.append(f"{k}={v!r}")
    return f"{type(m).__name__}({', '.join(parts)})"


def _pad(s, c):
    return s + " " * max(1, _COMMENT_COL - len(s)) + c if c else s


def _lines(m, indent: int, label: str | None, top: bool) -> list[str]:
    pre = " " * indent + (f"{label} = " if label else "")
    subs = sublayers(m) if is_layer(m) else []
    if not is_layer(m):
        return [pre + getattr(m, "__name__", repr(m)) + ("" if top else ",")]
    if not subs:
        line = pre + one_line(m) + ("" if top else ",")
        return [line if top else _pad(line, _count_comment(m))]
    head = getattr(m, "_show_head", lambda: f"{type(m).__name__}(")()
    lines = [pre + head]
    for lab, c in subs:
        lines.extend(_lines(c, indent + 2, lab, False))
    lines.append(" " * indent + getattr(m, "_show_tail", lambda: ")")() + ("" if top else ","))
    return lines


def _total(m) -> str:
    """Flux's `_big_finale`: the total line, printed only for more than 2 trainable arrays."""
    train, other = counts(m)
    if len(train) <= 2:
        return ""
    n = sum(int(x.size) for x in train)
    nbytes = sum(int(x.nbytes) for x in train + other)
    s = f"# Total: {len(train)} arrays, {n:,} parameters"
    if other:
        s += f", plus {len(other)} non-trainable arrays with {sum(int(x.size) for x in other):,} parameters"
    return s + f", {nbytes:,} bytes."


def layer_repr(m) -> str:
    subs = sublayers(m)
    if not subs:
        line = one_line(m)
        c = _count_comment(m)
        return _pad(line, c) if c else line
    lines = _lines(m, 0, None, True)
    total = _total(m)
    if total:
        lines[-1] = _pad(lines[-1], total)
    return "\n".join(lines)
