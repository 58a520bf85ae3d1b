"""One function per benchmark section: (brown_dir, sgemm_peak) -> markdown lines."""
import os
import resource
import statistics
import subprocess
import sys
import time

from nplmtk.corpus import Corpus
from nplmtk.vocab import Vocabulary, count_words

NPLM = os.path.join(os.path.dirname(sys.executable), "nplm")


def median_seconds(fn, repeats=5):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def timed_command(args, repeats=3):
    """Median wall seconds and max peak RSS (MB) of a command run in a child process."""
    times, peaks = [], []
    for _ in range(repeats):
        before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        start = time.perf_counter()
        subprocess.run(args, check=True, stdout=subprocess.DEVNULL)
        times.append(time.perf_counter() - start)
        peaks.append(max(before, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss) / 1024)
    return statistics.median(times), max(peaks)


def corpus_encoding(brown, peak):
    train = os.path.join(brown, "train.txt")
    vocab = Vocabulary.from_counts(count_words([train]), min_count=4)
    corpus = Corpus.read(train, vocab)
    encode = median_seconds(lambda: Corpus.read(train, vocab))
    windows = median_seconds(lambda: corpus.windows(5))
    build, peak_mb = timed_command([NPLM, "vocab", "-text", train, "-min-count", "4", "-write-vocab", "/dev/null"])
    return ["## Vocabulary and corpus encoding (issue 2)", "",
            "| step | data | median | target |", "| --- | --- | --- | --- |",
            f"| `Corpus.read` (text to int32 ids + offsets) | Brown train, {corpus.num_words:,} words | "
            f"{encode:.3f} s ({corpus.num_words / encode / 1e6:.2f} M words/s) | < 1 s |",
            f"| `Corpus.windows(5)` (Cython, OpenMP) | {corpus.num_words + corpus.num_sentences:,} windows | "
            f"{windows * 1000:.1f} ms | |",
            f"| `nplm vocab -text train.txt -min-count 4 -write-vocab /dev/null` (whole command) | Brown train | "
            f"{build:.2f} s, peak RSS {peak_mb:.0f} MB | |",
            "", f"Vocabulary with `-min-count 4`: {len(vocab):,} entries."]


SECTIONS = [("corpus", corpus_encoding)]
