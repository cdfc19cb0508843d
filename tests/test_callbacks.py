"""Flux's callback helpers: `throttle`, `patience`, `early_stopping`, `plateau`.

Ported from Flux.jl test/utils.jl (testsets "Throttle" and "Patience triggers", Flux 0.16.1+, where
`init_score` defaults to `Inf`), with the expected values those tests assert. The throttle tests run on
a fake clock instead of `sleep`, and one runs on the real timer thread."""

import math
import time

import pytest

import fluxjax as Flux


class FakeClock:
    """`timer(seconds, fn)` for `throttle`: timers fire when `advance` moves the clock past them."""

    def __init__(self):
        self.now, self.pending = 0.0, []

    def timer(self, seconds, fn):
        clock = self

        class Timer:
            def start(self):
                clock.pending.append((clock.now + seconds, fn))

        return Timer()

    def advance(self, dt):
        end = self.now + dt
        while True:
            due = [p for p in self.pending if p[0] <= end]
            if not due:
                break
            p = min(due, key=lambda p: p[0])
            self.pending.remove(p)
            self.now = p[0]
            p[1]()
        self.now = end


@pytest.fixture
def clock():
    return FakeClock()


# ----------------------------------------------------------------------------------------------
# Throttle (Flux test/utils.jl: sleep(1.01) -> clock.advance(1.01))


def test_throttle_default_behaviour(clock):
    a = []
    f = Flux.throttle(lambda: a.append(clock.now), 1, leading=True, trailing=False, timer=clock.timer)
    f()
    f()
    f()
    clock.advance(1.01)
    assert len(a) == 1


def test_throttle_leading_behaviour(clock):
    a = []
    f = Flux.throttle(lambda: a.append(clock.now), 1, leading=True, trailing=False, timer=clock.timer)
    f()
    assert len(a) == 1
    f()
    assert len(a) == 1
    clock.advance(1.01)
    f()
    assert len(a) == 2


def test_throttle_trailing_behaviour(clock):
    a = []
    f = Flux.throttle(lambda: a.append(clock.now), 1, leading=False, trailing=True, timer=clock.timer)
    f()
    assert len(a) == 0
    f()
    assert len(a) == 0
    clock.advance(1.01)
    assert len(a) == 1
    assert a == [1.0]  # at the end of the timeout


def test_throttle_arguments(clock):
    a = []
    f = Flux.throttle(lambda x: a.append(x), 1, leading=True, trailing=True, timer=clock.timer)
    f(1)
    assert a == [1]
    f(2)
    assert a == [1]
    f(3)
    assert a == [1]
    clock.advance(1.01)
    assert a == [1, 3]


def test_throttle_counts_calls_over_a_long_run_and_returns_the_latest_result(clock):
    """100 calls, one a second, with a 10 s timeout. Leading only: every tenth call runs (the quiet
    period ends at a tick with no call waiting, and the call at that instant runs at once). With
    `trailing`: the first call, then the last call of each 10 s, at its end."""
    for trailing, n_runs in [(False, 10), (True, 11)]:
        runs = []
        f = Flux.throttle(lambda i, runs=runs: (runs.append((clock.now, i)), i)[1], 10, trailing=trailing,
                          timer=clock.timer)
        results = []
        for i in range(100):
            results.append(f(i))
            clock.advance(1)
        clock.advance(50)
        assert len(runs) == n_runs
        assert {b[0] - a[0] for a, b in zip(runs, runs[1:])} == {10}
        if trailing:
            assert [i for _, i in runs] == [0, 9, 19, 29, 39, 49, 59, 69, 79, 89, 99]
            assert results[-1] == 89 and f.result == 99  # a call returns the latest result so far
        else:
            assert [i for _, i in runs] == list(range(0, 100, 10))
            assert results[-1] == 90 and results[:12] == [0] * 10 + [10, 10]
        clock.pending.clear()


def test_throttle_on_the_real_timer_thread():
    a = []
    f = Flux.throttle(lambda x: a.append(x), 0.2, trailing=True)
    f(1)
    f(2)
    f(3)
    assert a == [1]
    deadline = time.monotonic() + 5
    while len(a) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert a == [1, 3]


def test_throttle_rejects_a_negative_timeout():
    with pytest.raises(ValueError, match="timeout"):
        Flux.throttle(print, -1)


# ----------------------------------------------------------------------------------------------
# Patience triggers


def test_patience():
    trigger = Flux.patience(lambda: True, 3)
    assert trigger() is False
    assert trigger() is False
    assert trigger() is True

    v = [False, True, False, True, True, True]
    trigger = Flux.patience(lambda i: v[i - 1], 3)  # Julia's 1-based v[i]
    n_iter = 0
    for i in range(1, len(v) + 1):
        if trigger(i):
            break
        n_iter += 1
    assert n_iter == 5


def _run_until(trigger, step, limit=99):
    n_iter = 0
    while n_iter < limit:
        if step(trigger, n_iter):
            break
        n_iter += 1
    return n_iter


def test_early_stopping_decreasing_score():
    es = Flux.early_stopping(lambda x: x, 10)
    assert _run_until(es, lambda es, n: es(-n)) == 99  # every iter improves


def test_early_stopping_increasing_score():
    es = Flux.early_stopping(lambda x: x, 10, distance=lambda best_score, score: score - best_score, init_score=-math.inf)
    assert _run_until(es, lambda es, n: es(n)) == 99  # every iter improves


def test_early_stopping_args_and_kwargs():
    es = Flux.early_stopping(lambda x, *, y: x + y, 10)
    assert _run_until(es, lambda es, n: es(-n, y=-n)) == 99  # every iter improves


def test_early_stopping_minimum_distance():
    es = Flux.early_stopping(lambda x: x, 10, min_dist=3)
    n_iter = 0
    while n_iter < 99:
        if es(-n_iter):
            break
        n_iter += 3
    assert n_iter == 99  # every iter improves by at least 3

    n_iter = 0
    while n_iter < 99:
        if es(-n_iter):
            break
        n_iter += 1
    assert n_iter == 9  # first iteration improves by at least 3; next ones don't


def test_early_stopping_docs_example():
    """Flux's docstring: a loss that increases from the first call stops at epoch 4 (`init_score=Inf`)."""
    state = {"l": 0}

    def loss():
        state["l"] += 1
        return state["l"]

    es = Flux.early_stopping(loss, 3)
    epochs = []
    for i in range(1, 11):
        epochs.append(i)
        if es():
            break
    assert epochs == [1, 2, 3, 4]


def test_plateau():
    state = {"v": 10}

    def f():  # -9, 8, -7, 6, ...
        state["v"] = state["v"] / abs(state["v"]) - state["v"]
        return state["v"]

    trigger = Flux.plateau(f, 3, init_score=10, min_dist=18)
    assert _run_until(trigger, lambda t, n: t()) == 3


def test_plateau_default_min_dist_is_flux_1f_minus_6():
    trigger = Flux.plateau(lambda x: x, 2)
    assert [trigger(x) for x in [1.0, 1.0, 1.0 + 5e-7, 1.0 + 5e-7 + 2e-6]] == [False, False, True, False]
