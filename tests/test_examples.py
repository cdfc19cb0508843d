"""The examples run: each script in examples/ in a subprocess, in its quick mode (a couple of tiny epochs),
exits 0 and prints the lines a user is told to expect. The full runs, with the numbers the README
quotes, are marked slow.

The quick runs start together: most of their time is XLA compilation and Python, one core each. The
scripts that train over epochs save their loss/accuracy curves (examples/curves.py) into a pytest tmp dir,
never into the repository; one more run with `--plot ''` saves none.
"""

import importlib.util
import os
import re
import struct
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
NUMBER = r"(\d+\.\d+)"

# script -> (how quick mode is asked for, lines that must appear)
QUICK = {
    "mlp_digits.py": ("env", [
        r"Dense\(64 => 32, relu\)",
        r"^epoch  1  train_loss \d\.\d{4}  train_accuracy \d\.\d{3}  test_loss \d\.\d{4}  test_accuracy \d\.\d{3}",
        r"^epoch  2  ",
        rf"^final test accuracy: {NUMBER}%$",
    ]),
    "char_lstm.py": ("flag", [
        r"^\d+ characters; \d+ training and \d+ held-out sequences of 64$",
        r"LSTM\(\d+ => 128\)",
        rf"^uniform baseline: log\(\d+\) = {NUMBER} nats per character$",
        rf"^epoch 1  held-out loss {NUMBER} nats/char  next-char accuracy {NUMBER}",
        r"^sample:$",
        rf"^final held-out loss: {NUMBER} nats/char \(uniform {NUMBER}\), next-char accuracy: {NUMBER}%$",
    ]),
    "zygote_tutorial.py": ("flag", [
        r"^julia> gradient\(x -> 3x\^2 \+ 2x \+ 1, 5\)$",
        r"^  \(Array\(32\., dtype=float32(, weak_type=True)?\),\)$",
        r"^  ā = 3\.0$",
        r"^## Buffer",
        r"^zygote tutorial: (\d+) values checked against Zygote's docs$",
    ]),
    "porting_guide.py": ("env", [
        r"BatchNorm\(8, relu\)",
        rf"^epoch 1  test accuracy {NUMBER}",
        rf"^final test accuracy: {NUMBER}%  \(reloaded model agrees\)$",
    ]),
}


# the scripts that train over epochs and take `--plot PATH` (default `<script>_curves.png`, '' for none):
# the quick runs of these save their curves, and that of NO_PLOT (they share examples/curves.py) none
PLOTS = ["char_lstm.py", "porting_guide.py"]
NO_PLOT = "mlp_digits.py"
HAVE_MATPLOTLIB = importlib.util.find_spec("matplotlib") is not None


def _start(script, quick, args=(), cwd=None):
    env = dict(os.environ)
    env.pop("FLUXJAX_EXAMPLE_QUICK", None)
    # this checkout's fluxjax, from any working directory
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(EXAMPLES.parent), env.get("PYTHONPATH")) if p)
    argv = [sys.executable, str(EXAMPLES / script), *args]
    if quick == "env":
        env["FLUXJAX_EXAMPLE_QUICK"] = "1"
    elif quick == "flag":
        argv.append("--quick")
    return subprocess.Popen(argv, env=env, cwd=cwd or EXAMPLES.parent, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)


def _finish(proc, timeout):
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
        pytest.fail(f"timed out after {timeout} s:\n{out[-3000:]}")
    return proc.returncode, out


def _match(out, pattern):
    m = re.search(pattern, out, re.MULTILINE)
    assert m, f"expected a line matching {pattern!r} in the output:\n{out[-3000:]}"
    return m


@pytest.fixture(scope="module")
def plot_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("curves")


@pytest.fixture(scope="module")
def quick_runs(plot_dir, tmp_path_factory):
    # mlp_digits runs without curves, from an empty working directory that must stay empty
    empty = tmp_path_factory.mktemp("cwd")
    procs = {script: _start(script, how, ("--plot", str(plot_dir / f"{script[:-3]}.png")) if script in PLOTS
                            else ("--plot", "") if script == NO_PLOT else (), cwd=empty if script == NO_PLOT else None)
             for script, (how, _) in QUICK.items()}
    runs = {script: _finish(proc, timeout=600) for script, proc in procs.items()}
    runs["no plot cwd"] = sorted(os.listdir(empty))
    return runs


@pytest.mark.parametrize("script", list(QUICK))
def test_example_quick(quick_runs, script):
    rc, out = quick_runs[script]
    assert rc == 0, f"{script} exited {rc}:\n{out[-3000:]}"
    for pattern in QUICK[script][1]:
        _match(out, pattern)


def _png_size(path):
    """(width, height) of a PNG file, after checking its signature and header chunk."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    assert data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


@pytest.mark.parametrize("script", PLOTS)
def test_example_saves_curves(quick_runs, plot_dir, script):
    """`--plot PATH` writes the loss/accuracy curves as a PNG when matplotlib is installed (the `plot`
    extra); without it the script says nothing about curves and still passes."""
    rc, out = quick_runs[script]
    assert rc == 0, out[-3000:]
    path = plot_dir / f"{script[:-3]}.png"
    if not HAVE_MATPLOTLIB:
        assert not path.exists() and "saved the curves" not in out
        pytest.skip("matplotlib is not installed: the curves are optional")
    _match(out, rf"^saved the curves to {re.escape(str(path))}$")
    width, height = _png_size(path)
    assert width >= 400 and height >= 150 and path.stat().st_size > 5000


def test_example_runs_without_curves(quick_runs):
    """`--plot ''` saves no curves and writes nothing into the working directory."""
    rc, out = quick_runs[NO_PLOT]
    assert rc == 0, out[-3000:]
    _match(out, rf"^final test accuracy: {NUMBER}%$")
    assert "saved the curves" not in out
    assert quick_runs["no plot cwd"] == []


def test_quick_numbers(quick_runs):
    """What the quick runs reach (each script also asserts its own floor)."""
    out = quick_runs["mlp_digits.py"][1]
    assert float(_match(out, QUICK["mlp_digits.py"][1][-1]).group(1)) >= 60.0
    out = quick_runs["char_lstm.py"][1]
    loss, baseline, _ = (float(v) for v in _match(out, QUICK["char_lstm.py"][1][-1]).groups())
    assert baseline == pytest.approx(4.56, abs=0.2) and loss < 0.8 * baseline
    out = quick_runs["zygote_tutorial.py"][1]
    assert int(_match(out, QUICK["zygote_tutorial.py"][1][-1]).group(1)) >= 50
    out = quick_runs["porting_guide.py"][1]
    assert float(_match(out, QUICK["porting_guide.py"][1][-1]).group(1)) >= 50.0


def test_sample_is_text(quick_runs):
    """char_lstm prints a sampled string of 300 characters after the seed "The "."""
    out = quick_runs["char_lstm.py"][1]
    sample = out.split("sample:\n", 1)[1].split("\nfinal held-out loss", 1)[0]
    assert sample.startswith("The ") and len(sample) == 304


# The full runs: the numbers the README table quotes. Minutes each on two cores.
FULL = {
    "mlp_digits.py": (rf"^final test accuracy: {NUMBER}%$", 95.0),
    "porting_guide.py": (rf"^final test accuracy: {NUMBER}%", 93.0),
    "char_lstm.py": (rf"^final held-out loss: {NUMBER} nats/char", None),
}


@pytest.mark.slow
@pytest.mark.parametrize("script", list(FULL))
def test_example_full(script):
    rc, out = _finish(_start(script, None), timeout=1200)
    assert rc == 0, f"{script} exited {rc}:\n{out[-3000:]}"
    pattern, floor = FULL[script]
    value = float(_match(out, pattern).group(1))
    if floor is None:  # char_lstm: well below the uniform baseline log(vocab)
        baseline = float(_match(out, rf"^uniform baseline: log\(\d+\) = {NUMBER}").group(1))
        assert value < 0.4 * baseline
    else:
        assert value >= floor


def test_quickstart_reaches_the_accuracy_flux_docs_report():
    # Flux's quick-start reports "accuracy 94% so far!"; 300 of its 1000 epochs already get there.
    proc = subprocess.run([sys.executable, str(EXAMPLES / "quickstart.py"), "--epochs", "300"], cwd=EXAMPLES.parent,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    before = float(_match(proc.stdout, rf"^accuracy before training: {NUMBER}%").group(1))
    after = float(_match(proc.stdout, rf"^accuracy after training:  {NUMBER}%").group(1))
    assert 35 < before < 65  # an untrained classifier is near chance on XOR
    assert after >= 94.0
