"""ngram-count -memory (counting in runs, the out-of-core estimate, the ARPA file's sorted
runs) ended by SIGINT or SIGTERM at each of its stages: it stops within a second or so
(its threads stop between two chunks), with one line on stderr and the project's status
for a signal, and leaves no temporary file and no partial output; what a SIGKILL leaves
is removed by the next run."""
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from conftest import NPLM

STOP_SECONDS = 2.5  # from the signal to the exit, on a busy 2-core machine


@pytest.fixture(scope="module")
def text(tmp_path_factory):
    """Zipf-like lines over 20k words: at -memory 1M about 90 sorted runs of counts, and
    every later stage cut into many windows and sorted runs (some 5 s in all)."""
    rng = np.random.default_rng(1)
    p = 1 / np.arange(1, 20001) ** 0.9
    words = rng.choice(20000, size=100000, p=p / p.sum())
    ends = np.cumsum(rng.integers(1, 20, 10000))
    path = tmp_path_factory.mktemp("text") / "t.txt"
    path.write_text("".join(" ".join(f"w{w}" for w in line) + "\n" for line in np.split(words, ends[ends < len(words)])))
    return path


def _work(temp):
    """The run's scratch folder in `temp` (None before it is made)."""
    folders = os.listdir(temp)
    return os.path.join(temp, folders[0]) if folders else None


def _made(*path):
    """A stage's marker: whether the run's scratch folder holds `path`."""
    return lambda work: work is not None and os.path.exists(os.path.join(work, *path))


# when each stage has begun: what the run has made in its scratch folder (not the output's
# temporary file: the check that the output can be written makes one at the start)
STAGES = {
    "counting": lambda work: work is not None,
    "merging the runs of counts": _made("counts"),
    "estimating": _made("estimate", "prefix3"),
    "sorting and writing the ARPA file": _made("estimate", "backward1"),
}


@pytest.mark.parametrize("stage", STAGES)
@pytest.mark.parametrize("signum, status, line", [(signal.SIGINT, 130, "nplm: interrupted"),
                                                  (signal.SIGTERM, 143, "nplm: terminated")])
def test_a_signal_at_any_stage_stops_at_once_and_leaves_nothing(tmp_path, text, stage, signum, status, line):
    temp, out = tmp_path / "temp", tmp_path / "out"
    temp.mkdir()
    out.mkdir()
    # Ctrl-C as a terminal sends it: a test run in the background of a shell hands its
    # children SIGINT ignored, which Python keeps ignored
    proc = subprocess.Popen([NPLM, "ngram-count", "-text", text, "-order", "3", "-memory", "1M", "-temp", temp,
                             "-lm", out / "lm.arpa"], stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    begun, deadline = STAGES[stage], time.monotonic() + 60
    while not begun(_work(temp)) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    assert proc.poll() is None, f"ended before {stage}: {proc.stderr.read()}"
    proc.send_signal(signum)
    sent = time.monotonic()
    try:
        returncode = proc.wait(30)
    finally:
        proc.kill()
    stopped, err = time.monotonic() - sent, proc.stderr.read()
    assert (returncode, err) == (status, line + "\n")
    assert stopped < STOP_SECONDS, f"{stopped:.1f} s"
    left = [os.path.join(folder, name) for folder, _, names in os.walk(temp) for name in names]
    assert (os.listdir(temp), os.listdir(out)) == ([], []), left


def test_what_a_killed_run_left_is_removed_by_the_next_run(tmp_path, text):
    temp, out = tmp_path / "temp", tmp_path / "out"
    temp.mkdir()
    out.mkdir()
    proc = subprocess.Popen([NPLM, "ngram-count", "-text", text, "-order", "3", "-memory", "1M", "-temp", temp,
                             "-lm", out / "lm.arpa"], stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while not STAGES["sorting and writing the ARPA file"](_work(temp)) and time.monotonic() < deadline:
        time.sleep(0.005)
    proc.kill()
    proc.wait()
    assert os.listdir(temp) and os.listdir(out)  # SIGKILL: nothing could clean up
    rerun = [NPLM, "ngram-count", "-text", text, "-order", "3", "-temp", temp, "-lm", out / "lm.arpa"]
    subprocess.run(rerun, check=True)  # in memory: quicker
    assert (os.listdir(temp), os.listdir(out)) == ([], ["lm.arpa"])


def test_a_signal_whose_exception_python_swallows_still_stops_the_work_quietly(tmp_path, monkeypatch):
    """SIGTERM handled inside a weakref callback (a thread object's, as computed_ahead's
    threads end): Python would print "Exception ignored" and go on; the work still stops at
    its next chunk with the signal's status, and nothing is printed."""
    import weakref

    from nplmtk.errors import Interrupted
    from nplmtk.scratch import scratch_folder
    from nplmtk.threads import raise_if_stopping

    class Thing:
        pass

    def terminate_inside(ref):
        os.kill(os.getpid(), signal.SIGTERM)
        for _ in range(1000):  # the handler runs here, between two bytecodes of the callback
            pass

    printed = []  # what Python's hook would print as "Exception ignored ..."
    monkeypatch.setattr(sys, "unraisablehook", printed.append)
    with pytest.raises(Interrupted) as stopped:
        with scratch_folder("signal-test", root=str(tmp_path)):
            thing = Thing()
            watch = weakref.ref(thing, terminate_inside)  # noqa: F841 (the callback needs the ref alive)
            del thing
            raise_if_stopping()  # as the work does between two chunks
    assert stopped.value.code == 128 + signal.SIGTERM
    assert printed == [] and os.listdir(tmp_path) == []


def test_a_signal_is_raised_where_the_work_checks_not_where_it_strikes(tmp_path):
    """Within the block the handler only notes the signal: the code it interrupted runs on
    (a signal's exception inside threading's or a queue's locks once hung the process), and
    the work ends at its next check between chunks with the signal's status."""
    from nplmtk.errors import Interrupted
    from nplmtk.scratch import scratch_folder
    from nplmtk.threads import raise_if_stopping

    ran_on = []
    with pytest.raises(Interrupted) as stopped:
        with scratch_folder("signal-test", root=str(tmp_path)):
            os.kill(os.getpid(), signal.SIGTERM)
            for _ in range(1000):  # the handler runs in here
                pass
            ran_on.append(True)
            raise_if_stopping()
            ran_on.append(False)
    assert ran_on == [True] and stopped.value.code == 128 + signal.SIGTERM
    assert os.listdir(tmp_path) == []


def test_a_signal_after_the_last_check_still_ends_with_its_status(tmp_path):
    """A signal in the last moments of the work, after its last check between chunks, and
    handled where Python swallows exceptions (a weakref callback, as a finished thread's):
    raised when the block ends, the folder removed first (it once ended with status 0)."""
    import weakref

    from nplmtk.errors import Interrupted
    from nplmtk.scratch import scratch_folder

    class Thing:
        pass

    def interrupt_inside(ref):  # SIGTERM: a pytest-xdist worker may hold SIGINT ignored, which the block keeps
        os.kill(os.getpid(), signal.SIGTERM)
        for _ in range(1000):  # the handler runs here
            pass

    with pytest.raises(Interrupted) as stopped:
        with scratch_folder("signal-test", root=str(tmp_path)):
            thing = Thing()
            watch = weakref.ref(thing, interrupt_inside)  # noqa: F841 (the callback needs the ref alive)
            del thing
    assert stopped.value.code == 128 + signal.SIGTERM and stopped.value.reason == "terminated"
    assert os.listdir(tmp_path) == []


def test_an_output_written_when_a_signal_came_is_not_put_in_place(tmp_path):
    """A signal noted while an output was written: the old file stays (the partial model
    never replaces it), and once the block has ended later work is not stopped."""
    from nplmtk.errors import Interrupted
    from nplmtk.io import open_output
    from nplmtk.scratch import scratch_folder
    from nplmtk.threads import raise_if_stopping

    model = tmp_path / "lm.arpa"
    model.write_text("old\n")
    work = tmp_path / "temp"
    work.mkdir()
    with pytest.raises(Interrupted):
        with scratch_folder("signal-test", root=str(work)):
            with open_output(str(model)) as out:
                out.write("new\n")
                os.kill(os.getpid(), signal.SIGTERM)
    assert model.read_text() == "old\n" and sorted(os.listdir(tmp_path)) == ["lm.arpa", "temp"]
    assert os.listdir(work) == []
    raise_if_stopping()


def test_a_signal_just_before_a_wait_on_input_ends_the_wait(tmp_path):
    """A signal noted after the folder was made but before the open of a FIFO no one writes
    (the handler only notes it there): the wait raises it as it begins, and does not block
    for good (the CI of 0e65b3a saw ngram-count -text FIFO hang on SIGTERM so)."""
    import threading

    from nplmtk.errors import Interrupted
    from nplmtk.io.reading import read_bytes
    from nplmtk.scratch import scratch_folder

    fifo = tmp_path / "text"
    os.mkfifo(fifo)
    work = tmp_path / "temp"
    work.mkdir()
    blocked = []

    def writer():  # ends a wait that hangs, to tell of it: a FIFO opens for writing only with a reader
        try:
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
            blocked.append(True)
        except OSError:
            pass

    unblock = threading.Timer(3, writer)
    unblock.start()
    try:
        with pytest.raises(Interrupted) as stopped:
            with scratch_folder("signal-test", root=str(work)):
                os.kill(os.getpid(), signal.SIGTERM)
                for _ in range(1000):  # the handler runs in here, and only notes it
                    pass
                read_bytes(str(fifo))
    finally:
        unblock.cancel()
    assert blocked == [] and stopped.value.code == 128 + signal.SIGTERM and os.listdir(work) == []
