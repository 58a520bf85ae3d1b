"""threads.py: work computed side by side, given back in order."""
import inspect
import signal
import threading
import time

import pytest

from nplmtk.threads import computed_ahead, in_order


def test_in_order_gives_results_in_the_items_order_whatever_finishes_first():
    def slow_first(item):
        time.sleep(0.02 if item % 3 == 0 else 0)
        return item * item

    assert list(in_order(slow_first, range(20))) == [i * i for i in range(20)]


def test_in_order_holds_at_most_threads_plus_one_results():
    running, most, lock = [0], [0], threading.Lock()

    def tracked(item):
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        time.sleep(0.01)
        return item

    for _ in in_order(tracked, range(12), threads=2):
        with lock:
            running[0] -= 1
    assert most[0] <= 3


def test_in_order_raises_the_first_failure_in_the_callers_thread():
    def failing(item):
        if item == 5:
            raise ValueError("five")
        return item

    seen = []
    with pytest.raises(ValueError, match="five"):
        for result in in_order(failing, range(10)):
            seen.append(result)
    assert seen == [0, 1, 2, 3, 4]


def test_computed_ahead_gives_every_item_and_its_failure():
    assert list(computed_ahead(iter(range(5)))) == list(range(5))

    def items():
        yield 1
        raise OSError("disk")

    with pytest.raises(OSError, match="disk"):
        list(computed_ahead(items()))


def test_computed_ahead_stopped_by_a_signal_waits_for_the_item_under_way():
    """A signal's exception in the caller's wait (SIGTERM in ngram-count): the item under
    way is waited for before the exception goes on (an interrupted Thread.join would mark
    the thread ended, and the caller clean up beside a thread still at work)."""
    finished = []

    def items():
        time.sleep(0.5)
        finished.append(True)
        yield 1

    def alarm(signum, frame):
        raise TimeoutError

    before = signal.signal(signal.SIGALRM, alarm)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.1)
        with pytest.raises(TimeoutError):
            next(computed_ahead(items()))
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, before)
    assert finished


def test_computed_ahead_failed_inside_a_threads_start_waits_for_that_thread(monkeypatch):
    """A signal's exception inside Thread.start, after the thread began: closing waits for
    the item that thread computes (the caller would otherwise close `items` while it
    runs: "generator already executing"), and no item begins after the close."""
    started = []
    original_start = threading.Thread.start

    def start_then_fail(thread):
        original_start(thread)
        started.append(thread)
        if len(started) == 2:
            raise KeyboardInterrupt

    def items():
        yield 1
        time.sleep(0.3)
        yield 2

    source = items()
    monkeypatch.setattr(threading.Thread, "start", start_then_fail)
    with pytest.raises(KeyboardInterrupt):
        next(computed_ahead(source))
    assert inspect.getgeneratorstate(source) == inspect.GEN_SUSPENDED
    source.close()
