"""Run every ```python block of the documentation pages, and compare shown output.

Each page runs in a fresh process (in a temporary directory), its blocks in order in one
namespace. A ```text block that directly follows a ```python block is that block's expected
stdout (`CHECK_SNIPPETS_SHOW=1` prints every block's output instead of comparing). A block that
only embeds a file (`--8<--`) is skipped. A page may set environment variables with a first-line
comment `<!-- check-env: NAME=value ... -->` (for example, simulated devices).

    PYTHONPATH=. python docs/check_snippets.py [docs/page.md ...]
"""

import contextlib
import io
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```\s*$", re.S | re.M)


def blocks(text: str) -> list[tuple[str, str | None]]:
    out, found = [], list(FENCE.finditer(text))
    for i, m in enumerate(found):
        if m.group(1) != "python" or m.group(2).lstrip().startswith("--8<--"):  # an embedded file
            continue
        expected = None
        if i + 1 < len(found) and found[i + 1].group(1) == "text" and not text[m.end():found[i + 1].start()].strip():
            expected = found[i + 1].group(2)
        out.append((m.group(2), expected))
    return out


def run_page(path: str) -> None:
    """Inside the child process: run the page's blocks, fail on the first error or output mismatch."""
    ns: dict = {"__name__": "__main__"}
    for k, (code, expected) in enumerate(blocks(Path(path).read_text())):
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            exec(compile(code, f"{path}[block {k}]", "exec"), ns)
        got = buf.getvalue()
        if os.environ.get("CHECK_SNIPPETS_SHOW"):
            print(f"--- block {k}\n{got}", end="", file=sys.stderr)
        elif expected is not None and got.strip() != expected.strip():
            sys.exit(f"{path} block {k}: output differs\n--- shown\n{expected}--- got\n{got}")


def main(pages: list[str]) -> int:
    root = Path(__file__).resolve().parent.parent
    pages = pages or sorted(str(p) for p in (root / "docs").rglob("*.md"))
    failed = 0
    for page in pages:
        page = str(Path(page).resolve())
        text = Path(page).read_text()
        if not blocks(text):
            continue
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")]))
        m = re.match(r"<!-- check-env: (.*?) -->", text)
        if m:
            env.update(kv.split("=", 1) for kv in m.group(1).split())
        with tempfile.TemporaryDirectory() as tmp:
            r = subprocess.run([sys.executable, __file__, "--page", page], cwd=tmp, env=env)
        print(("ok    " if r.returncode == 0 else "FAIL  ") + os.path.relpath(page, root), flush=True)
        failed += r.returncode != 0
    return 1 if failed else 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--page"]:
        run_page(sys.argv[2])
    else:
        sys.exit(main(sys.argv[1:]))
