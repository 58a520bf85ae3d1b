"""Work split over threads, for work that lets go of the GIL (numpy's loops, the kernels'
nogil loops): items computed ahead of their use, one at a time or several side by side,
given back in order; the one malloc arena that such threads share; and the flag that
stops them all between two chunks when the process ends on a signal."""
import collections
import contextlib
import ctypes
import os
import threading
from concurrent.futures import ThreadPoolExecutor

from .errors import Interrupted

# glibc's mallopt parameters
M_ARENA_MAX, M_MMAP_THRESHOLD, M_TRIM_THRESHOLD = -8, -3, -1
HEAP_BLOCKS_UP_TO = 32 << 20  # glibc's largest mmap threshold: larger blocks are always mapped afresh
FREED_HEAP_KEPT = 256 << 20

_stopping = []  # the signal's Interrupted, once stop_threads was called
_input_waits = [0]  # how deep the main thread is in calls that wait on input (input_wait)


class Stopped(Interrupted):
    """Work given up in a thread because the process ends on a signal (stop_threads):
    wherever it surfaces, the signal's status and line."""


def stop_threads(interrupted):
    """From a signal's handler (`interrupted`: the Interrupted it raises): every thread's
    work stops at its next chunk (raise_if_stopping), so that the caller, waiting for a
    thread to finish its item before cleaning up, waits a chunk and not a whole pass."""
    _stopping[:] = [interrupted]


def allow_threads():
    """A new job begins: work runs again (after stop_threads in an earlier job)."""
    _stopping.clear()


@contextlib.contextmanager
def input_wait():
    """Around a call that may wait on input for good (opening a FIFO no one writes, reading
    a pipe that sends nothing): a stopping signal's handler raises at once there, where
    nothing else is under way, instead of waiting for the next chunk (which may never come)."""
    main = threading.current_thread() is threading.main_thread()
    _input_waits[0] += main
    try:
        if main:  # a signal noted just before the wait began (the handler did not raise): now
            raise_if_stopping()
        yield
    finally:
        _input_waits[0] -= main


def waiting_on_input():
    """Whether the main thread is within input_wait (the handler asks, in the main thread)."""
    return _input_waits[0] > 0


def raise_if_stopping():
    """Called between chunks (each read or write of a working file): Stopped once
    stop_threads was called."""
    if _stopping:
        raise Stopped(_stopping[0].code - 128, _stopping[0].reason)


def reuse_freed_memory():
    """Makes glibc's malloc hand freed memory back out, for chunked passes in threads:
    - every thread allocates from the one main arena (by default each gets an arena of its
      own, whose freed blocks no other thread reuses: at 20M words, -memory 1G, the
      side-by-side merge then raised ngram-count's peak from 0.95 to 1.39 GB);
    - blocks up to 32 MiB come from the heap, and up to 256 MiB of it freed is kept, where
      a fresh memory map each time costs a page fault and a zeroed page for every 4 KiB
      (at 20M words: 887k page faults became 290k, 0.96x the time, the same peak).
    Elsewhere than glibc, nothing is done."""
    try:
        libc = ctypes.CDLL(None)
        libc.mallopt(M_ARENA_MAX, 1)
        libc.mallopt(M_MMAP_THRESHOLD, HEAP_BLOCKS_UP_TO)
        libc.mallopt(M_TRIM_THRESHOLD, FREED_HEAP_KEPT)
    except (OSError, AttributeError):
        pass


def give_back_freed_memory():
    """Hands the heap's free pages back to the system (glibc's malloc_trim), once a job's
    chunks are done and another's, of other sizes, begin: the heap keeps what was freed
    below its top and reuses it only in part (at 200M words, -memory 2G: 1.4 GB resident
    after the counts' merge, 77 MiB of it in use). Not after every stage: the pages handed
    back are faulted in again. Elsewhere than glibc, nothing is done."""
    try:
        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):
        pass


_highest_seen, _seeing = 0, threading.Lock()


def peak_resident_bytes():
    """The most memory this process has held resident so far (Linux's VmHWM), or None where
    /proc does not say: what -memory bounds, as /usr/bin/time's maximum resident set size.
    Never below a figure it gave before: Linux records the mark only at some events and
    otherwise shows the larger of it and the current set, whose per-thread counts are
    summed late (36 MiB read after 37)."""
    global _highest_seen
    try:
        with open("/proc/self/status", "rb") as status:
            for line in status:
                if line.startswith(b"VmHWM:"):
                    with _seeing:
                        _highest_seen = max(_highest_seen, int(line.split()[1]) * 1024)
                        return _highest_seen
    except (OSError, ValueError, IndexError):
        pass
    return None


def usable_cores(most):
    """`most`, or fewer: the processors this process may run on."""
    return max(1, min(most, len(os.sched_getaffinity(0))))


def computed_ahead(items):
    """The items of the iterator `items`, each computed in a thread of its own while the
    caller works on the one before (one at a time: their memory); an error raised in the
    caller's thread. Closed early (the caller failed), it waits for the item under way, so
    that nothing is still in `items` when the caller cleans up. A signal's exception can
    strike anywhere in the caller's thread, even inside Thread.start or Thread.join (an
    interrupted join marks the thread ended: CPython 3.11's _wait_for_tstate_lock), so
    the wait is a lock that each thread holds while it is in `items`, and a thread that
    takes it after the close computes nothing (SIGTERM while the ARPA file was written
    once gave exit status 1, "generator already executing")."""
    done = object()
    in_items, closed = threading.Lock(), []

    def start():
        box, finished = {}, threading.Event()

        def compute():
            try:
                with in_items:
                    box["item"] = done if closed else next(items, done)
            except BaseException as err:
                box["failure"] = err
            finally:
                finished.set()

        threading.Thread(target=compute, daemon=True).start()
        return finished, box

    pending = start()
    try:
        while True:
            finished, box = pending
            finished.wait()
            if "failure" in box:
                raise box["failure"]
            if box["item"] is done:
                return
            pending = start()
            yield box["item"]
    finally:
        with in_items:
            closed.append(True)


def in_order(function, items, threads=2):
    """function(item) of each of `items`, computed by `threads` threads at once (numpy lets
    go of the GIL in its loops), given back in the items' order: at most threads + 1
    results are held at a time (the one given back and those under way)."""
    threads = usable_cores(threads)
    with ThreadPoolExecutor(threads) as pool:
        pending = collections.deque()
        try:
            for item in items:
                if len(pending) == threads:
                    yield pending.popleft().result()
                pending.append(pool.submit(function, item))
            while pending:
                yield pending.popleft().result()
        finally:
            for future in pending:
                future.cancel()
