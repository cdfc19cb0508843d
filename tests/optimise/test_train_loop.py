"""`train_`'s result (a `TrainHistory` of per-step losses) and its progress display (a `tqdm.auto` bar,
plain lines in a log file, nothing with `progress=False`)."""

import jax
import numpy as np
import pytest

import fluxjax as Flux
from fluxjax.optimise import Adam, Descent, TrainHistory, setup, train_, update_
from fluxjax.optimise import progress as display
from fluxjax.optimise.train import CHECK_EVERY
from tests.optimise.regression import X, Y, mse
from tests.optimise.regression import mlp as _mlp

STEPS = CHECK_EVERY + 7  # more than one window of compiled steps


def _batches(n=STEPS):
    k = jax.random.split(jax.random.PRNGKey(3), n)
    return [(X + 0.1 * jax.random.normal(ki, X.shape), Y) for ki in k]


def _eager_losses(batches, rule):
    """The loss before each step of a plain eager loop of `withgradient` and `update_`."""
    ref = _mlp()
    st = setup(rule, ref)
    out = []
    for x, y in batches:
        val, (g, _, _) = Flux.withgradient(mse, ref, x, y)
        update_(st, ref, g)
        out.append(float(val))
    return out, ref


@pytest.mark.parametrize("jit", [True, False])
@pytest.mark.parametrize("kind", ["list", "generator"])
def test_history_holds_the_loss_of_every_step_as_an_eager_loop_computes_it(jit, kind):
    batches = _batches()
    expected, ref = _eager_losses(batches, Adam(0.05))
    m = _mlp()
    data = list(batches) if kind == "list" else (b for b in batches)
    h = train_(mse, m, data, setup(Adam(0.05), m), jit=jit, progress=False)
    assert isinstance(h, TrainHistory)
    assert h.steps == STEPS == len(h.losses)
    assert all(type(v) is float for v in h.losses)
    np.testing.assert_allclose(h.losses, expected, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(m[0].weight, ref[0].weight, rtol=1e-5, atol=1e-6)
    assert repr(h) == f"TrainHistory({STEPS} steps, last loss {h.losses[-1]:.6g})"


def test_history_of_an_aux_loss_holds_the_first_element_and_empty_data_gives_no_steps():
    batches = _batches(3)
    expected, _ = _eager_losses(batches, Descent(0.1))
    m = _mlp()
    aux = lambda m, x, y: (mse(m, x, y), {"n": x.shape[1]})
    h = train_(aux, m, batches, setup(Descent(0.1), m), progress=False)
    np.testing.assert_allclose(h.losses, expected, rtol=1e-5, atol=1e-7)
    empty = train_(mse, m, [], setup(Descent(0.1), m), progress=False)
    assert empty.steps == 0 and empty.losses == [] and repr(empty) == "TrainHistory(0 steps)"


def test_implicit_train_returns_a_history_too():
    batches = _batches(4)
    expected, _ = _eager_losses(batches, Descent(0.1))
    m = _mlp()
    h = train_(lambda x, y: mse(m, x, y), Flux.params(m), batches, Descent(0.1), progress=False)
    np.testing.assert_allclose(h.losses, expected, rtol=1e-5, atol=1e-7)


# ----------------------------------------------------------------------------------------------
# progress


class FakeTqdm:
    """Records what `train_` asks of a tqdm bar."""

    made: list = []
    __module__ = "tqdm.std"

    def __init__(self, total=None, **kw):
        self.total, self.kw, self.n, self.postfix, self.closed = total, kw, 0, [], False
        FakeTqdm.made.append(self)

    def update(self, n=1):
        self.n += n

    def set_postfix(self, refresh=True, **kw):
        self.postfix.append(kw)

    def close(self):
        self.closed = True


@pytest.fixture
def fake_bar(monkeypatch):
    FakeTqdm.made = []
    monkeypatch.setattr(display, "_tqdm", lambda: FakeTqdm)
    monkeypatch.setattr(display, "_interactive", lambda tqdm: True)
    return FakeTqdm.made


@pytest.mark.parametrize("jit", [True, False])
def test_a_bar_counts_every_step_and_shows_the_latest_loss(fake_bar, jit):
    batches = _batches()
    m = _mlp()
    h = train_(mse, m, (b for b in batches), setup(Adam(0.05), m), jit=jit, progress=True)
    (bar,) = fake_bar
    assert bar.total is None and bar.n == STEPS and bar.closed and bar.kw["desc"] == "train_"
    if jit:  # read once per window of compiled steps: the window's last loss
        assert bar.postfix == [{"loss": f"{h.losses[CHECK_EVERY - 1]:.4g}"}]
    else:
        assert bar.postfix == [{"loss": f"{v:.4g}"} for v in h.losses]


def test_the_default_shows_a_bar_only_on_long_loops_with_a_length(fake_bar):
    m = _mlp()
    st = setup(Descent(0.01), m)
    train_(mse, m, _batches(5), st)
    train_(mse, m, (b for b in _batches(display.MIN_STEPS)), st)
    assert fake_bar == []
    train_(mse, m, [(X, Y)] * display.MIN_STEPS, st)
    assert len(fake_bar) == 1 and fake_bar[0].total == display.MIN_STEPS == fake_bar[0].n
    train_(mse, m, [(X, Y)] * display.MIN_STEPS, st, progress=False)
    assert len(fake_bar) == 1


def test_a_bar_is_closed_when_the_loop_raises(fake_bar):
    m = _mlp()
    bad = lambda m, x, y: mse(m, x, y) * np.nan
    with pytest.raises(Flux.NonFiniteLoss):
        train_(bad, m, _batches(3), setup(Descent(0.1), m), progress=True)
    assert fake_bar[0].closed


def test_progress_false_and_the_default_in_a_log_file_write_nothing(capsys):
    m = _mlp()
    st = setup(Descent(0.01), m)
    train_(mse, m, [(X, Y)] * display.MIN_STEPS, st)  # capsys: stderr is not a terminal
    train_(mse, m, [(X, Y)] * 3, st, progress=False)
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("no_tqdm", [False, True])
def test_progress_in_a_log_file_writes_a_plain_line_now_and_then(capsys, monkeypatch, no_tqdm):
    if no_tqdm:
        monkeypatch.setattr(display, "_tqdm", lambda: None)
    clock = iter(range(0, 10_000, 10))  # every read of the clock is 10 s later
    monkeypatch.setattr(display, "Lines", _lines_with(lambda: next(clock)))
    m = _mlp()
    h = train_(mse, m, (b for b in _batches(40)), setup(Adam(0.05), m), progress=True, jit=False)
    lines = capsys.readouterr().err.splitlines()
    # a line every 30 s (every third step), and one at the end
    assert len(lines) == 13 + 1
    assert lines[0] == f"train_: step 3, loss {h.losses[2]:.6g}, 0.1 steps/s"
    assert lines[-1] == f"train_: step 40, loss {h.losses[-1]:.6g}, 0.0976 steps/s"  # 40 steps in 410 s


def test_plain_lines_count_against_a_known_length():
    out = []
    t = iter([0.0, 5.0, 31.0, 40.0, 62.0, 70.0])
    lines = display.Lines(4, file=_Writer(out), clock=lambda: next(t))
    for _ in range(4):
        lines.set_loss(0.5)
        lines.update()
    lines.close()
    assert out == ["train_: step 2/4, loss 0.5, 0.0645 steps/s", "train_: step 4/4, loss 0.5, 0.0645 steps/s"]


def _lines_with(clock, lines=display.Lines):
    return lambda total: lines(total, clock=clock)


class _Writer:
    def __init__(self, out):
        self.out = out

    def write(self, s):
        if s.strip():
            self.out.append(s.rstrip("\n"))

    def flush(self):
        pass
