"""Corpora larger than memory (issue 20): a 200M-word stream (Brown train repeated and
shuffled, made on the fly by big_text.py) counted by `nplm ngram-count -memory 2G` and by
KenLM's lmplz (KENLM_BIN) in turn, and the data loading of one training epoch on it."""
import json
import os
import statistics
import subprocess
import sys
import time

from sections import NPLM, OUT, _vocabulary, peak_after

HERE = os.path.dirname(os.path.abspath(__file__))
WORDS = int(os.environ.get("LARGE_WORDS", 200_000_000))
ROUNDS = 2
TRAINING_SECONDS = int(os.environ.get("LARGE_TRAINING_SECONDS", 90))


def _generator(brown, vocab):
    return [sys.executable, os.path.join(HERE, "big_text.py"), "--brown", brown, "--vocab", vocab,
            "--words", str(WORDS)]


def _run_fed(generator, args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL):
    """Wall seconds and peak RSS (MB) of `args` reading the generator's output on stdin
    (the generator's own time and memory not counted in the peak)."""
    start = time.perf_counter()
    feed = subprocess.Popen(generator, stdout=subprocess.PIPE)
    proc = subprocess.Popen(args, stdin=feed.stdout, stdout=stdout, stderr=stderr)
    feed.stdout.close()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    feed.wait()
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        raise RuntimeError(f"{args[0]} failed with status {proc.returncode}")
    return seconds, usage.ru_maxrss / 1024


LOADING = """
import json, resource, sys, time
import numpy as np
from nplmtk.corpus import Corpus
from nplmtk.neural.train import ROUND
from nplmtk.vocab import Vocabulary
vocab = Vocabulary.read(sys.argv[1])
start = time.perf_counter()
corpus = Corpus.read("-", vocab, unk=True, memory_map=True)
read = time.perf_counter() - start
examples = corpus.window_examples(5, vocab.unk)
order = np.arange(len(examples), dtype=np.int32)
np.random.default_rng(1).shuffle(order)
shuffled = time.perf_counter() - start - read
checksum = 0
for first in range(0, len(order), ROUND):
    checksum += int(examples[order[first:first + ROUND]][:, -1].sum())
gathered = time.perf_counter() - start - read - shuffled
print(json.dumps({"words": corpus.num_words, "sentences": corpus.num_sentences, "examples": len(examples),
                  "read": read, "shuffle": shuffled, "gather": gathered, "checksum": checksum,
                  "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


NETWORKS = {"mlp": ["-order", "5", "-m", "30", "-h", "100", "-batch", "256"],
            "lstm": ["-arch", "lstm", "-m", "200", "-h", "200", "-output", "hs"]}


def _training_peak(generator, vocab, seconds, network):
    """VmHWM (MB) of `nplm train-nplm` (`network`, 2 threads) on the stream, `seconds`
    after the stream has been read."""
    feed = subprocess.Popen(generator, stdout=subprocess.PIPE)
    log = os.path.join(OUT, "large-train.err")
    with open(log, "w") as err:
        proc = subprocess.Popen([NPLM, "train-nplm", "-text", "-", "-vocab", vocab, *NETWORKS[network], "-threads",
                                 "2", "-epochs", "1", "-quiet", "-lm", os.path.join(OUT, "large-unused.nplm")],
                                stdin=feed.stdout, stderr=err)
    feed.stdout.close()
    feed.wait()
    return peak_after(proc, seconds)


def large_corpora(brown, peak):
    vocab = _vocabulary(brown)
    generator = _generator(brown, vocab)
    ours_cmd = [NPLM, "ngram-count", "-text", "-", "-order", "5", "-vocab", vocab, "-unk", "-memory", "2G",
                "-lm", os.path.join(OUT, "large-kn5.arpa")]
    small_cmd = ours_cmd[:-4] + ["-memory", "256M", "-debug", "2", "-lm", os.path.join(OUT, "large-kn5-256M.arpa")]
    kenlm = os.environ.get("KENLM_BIN")
    lmplz_cmd = ([os.path.join(kenlm, "lmplz"), "-o", "5", "-S", "2G", "-T", OUT, "--discount_fallback"]
                 if kenlm else None)
    figures = {"ours": [], "small": [], "lmplz": []}
    for _ in range(ROUNDS):  # in turn, so that both see the same machine
        figures["ours"].append(_run_fed(generator, ours_cmd))
        if lmplz_cmd:
            with open(os.path.join(OUT, "large-lmplz.arpa"), "w") as out:
                figures["lmplz"].append(_run_fed(generator, lmplz_cmd, stdout=out))
    with open(os.path.join(OUT, "large-256M.err"), "w") as err:
        figures["small"].append(_run_fed(generator, small_cmd, stderr=err))
    spilled = [line.split(": ")[-1].strip() for line in open(os.path.join(OUT, "large-256M.err"))
               if "sorted runs on disk" in line]
    same = open(ours_cmd[-1], "rb").read() == open(small_cmd[-1], "rb").read()
    feed = subprocess.Popen(generator, stdout=subprocess.PIPE)
    loading = json.loads(subprocess.run([sys.executable, "-c", LOADING, vocab], stdin=feed.stdout, check=True,
                                        capture_output=True, text=True).stdout)
    feed.wait()
    train_peaks = {network: _training_peak(generator, vocab, TRAINING_SECONDS, network) for network in NETWORKS}

    def row(name, command, runs):
        return (f"| {name} | {command} | {statistics.median(s for s, _ in runs):.1f} s | "
                f"{max(m for _, m in runs):,.0f} MB |")

    lines = ["## Corpora larger than memory (issue 20)", "",
             f"A {WORDS / 1e6:.0f}M-word stream: Brown train repeated and shuffled, made on the fly by "
             f"`python benchmarks/big_text.py --vocab vocab.txt --words {WORDS}` (words outside the "
             "vocabulary spelt UNKWORD, which lmplz needs and `-vocab vocab.txt -unk` reads as `<unk>`) and piped "
             f"to each tool; {ROUNDS} runs of each, in turn; median wall time, largest peak RSS of the tool's "
             "process (the generator not counted).", "",
             "| job | command | wall | peak RSS |", "| --- | --- | --- | --- |",
             row("KN5 count + estimate + ARPA", "`nplm ngram-count -text - -order 5 -vocab vocab.txt -unk "
                 "-memory 2G -lm kn5.arpa`", figures["ours"])]
    if lmplz_cmd:
        lines.append(row("KenLM lmplz (4cb443e)", "`lmplz -o 5 -S 2G -T DIR --discount_fallback > kn5.arpa` (repeated "
                         "text: its discounts need the fallback, as ours do)", figures["lmplz"]))
        ratio = statistics.median(s for s, _ in figures["ours"]) / statistics.median(s for s, _ in figures["lmplz"])
    lines.append(row("the same, counts spilled to disk and merged", "`... -memory 256M ...`", figures["small"]))
    lines += ["", f"- The `-memory 256M` run writes {'the same ARPA file, byte for byte' if same else 'A DIFFERENT FILE'} "
              f"as the `-memory 2G` run, which kept its counts in memory; with 256M the tables went to disk past a "
              f"third of it ({spilled[0] if spilled else 'NO RUNS: not spilled'}, by its `-debug 2`)."]
    if lmplz_cmd:
        lines.append(f"- Ours against lmplz, wall time: {ratio:.2f}x (median against median).")
    lines += [f"- One training epoch's data loading, the same stream on stdin (`Corpus.read(\"-\", memory_map=True)`, "
              f"order-5 windows made on demand, an int32 shuffle, every chunk of {4096:,} windows gathered as the "
              f"trainer does): {loading['words']:,} words in {loading['sentences']:,} sentences; reading "
              f"{loading['read']:.1f} s, shuffling {loading['shuffle']:.1f} s, gathering all "
              f"{loading['examples']:,} windows {loading['gather']:.1f} s; peak RSS {loading['peak_mb']:,.0f} MB "
              f"(the windows themselves would take {loading['examples'] * 20 / 2 ** 20:,.0f} MB).",
              *[f"- `nplm train-nplm -text - -vocab vocab.txt {' '.join(NETWORKS[network])} -threads 2` on the "
                f"stream: peak RSS {peak:,.0f} MB {TRAINING_SECONDS} s into its first epoch."
                for network, peak in train_peaks.items()]]
    return lines
