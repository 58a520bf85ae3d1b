"""KN5 estimation on Brown against KenLM's lmplz (issue 21): `nplm ngram-count` and
`lmplz` taking turns, whole processes timed from outside; where our time goes, timed
inside one process; and whether our ARPA file is SRILM's, byte for byte."""
import filecmp
import json
import os
import statistics
import subprocess
import sys

from scoring import RUNS, alternately, measured_with_cpu
from sections import NPLM, OUT, _vocabulary, unkword_text

HEADING = "## KN5 estimation on Brown against lmplz (issue 21)"

# The phases of `nplm ngram-count -text train.txt -order 5 -vocab vocab.txt -unk -lm kn5.arpa`
# timed inside one process, as the command runs them.
PHASES = """
import json, sys, time
start = time.perf_counter()
import nplmtk.cli.group  # what `nplm ngram-count` imports, in its order (numpy first, cli/group.py)
import nplmtk.cli.ngram_count
from nplmtk.corpus import Corpus
from nplmtk.scratch import scratch_folder
from nplmtk.ngram.arpa import write_arpa
from nplmtk.ngram.count_runs import CountAccumulator
from nplmtk.ngram.estimate import estimate
from nplmtk.vocab import Vocabulary
imported = time.perf_counter()
vocabulary = Vocabulary.read(sys.argv[2])
with scratch_folder("counts") as folder:
    accumulator = CountAccumulator(vocabulary, 5, 2 << 30, folder)
    for chunk in Corpus.read_blocks(sys.argv[1], vocabulary, unk=True):
        accumulator.add_text(chunk)
    counted = time.perf_counter()
    counts = accumulator.result()
sorted_ = time.perf_counter()
model = estimate(counts)
estimated = time.perf_counter()
write_arpa(model, sys.argv[3])
done = time.perf_counter()
print(json.dumps({"imports": imported - start, "reading and counting the text": counted - imported,
                  "sorting the counts": sorted_ - counted, "estimating": estimated - sorted_,
                  "writing the ARPA file": done - estimated}))
"""


def kn5_against_lmplz(brown, peak):
    kenlm = os.environ.get("KENLM_BIN")
    if not kenlm:
        return [HEADING, "", "Not measured: set KENLM_BIN to the folder of KenLM's `lmplz`."]
    train = os.path.join(brown, "train.txt")
    vocab = _vocabulary(brown)
    unkword = unkword_text(brown, "train", vocab)
    ours, theirs = os.path.join(OUT, "kn5.arpa"), os.path.join(OUT, "kn5-lmplz.arpa")
    commands = {"nplm ngram-count": ([NPLM, "ngram-count", "-text", train, "-order", "5", "-vocab", vocab, "-unk",
                                      "-lm", ours], None, None),
                "lmplz": ([os.path.join(kenlm, "lmplz"), "-o", "5", "-S", "2G", "-T", OUT], unkword, theirs)}
    load_before = os.getloadavg()[0]
    results = alternately(commands, measure=measured_with_cpu)
    load_after = os.getloadavg()[0]
    mine, lmplz = results["nplm ngram-count"], results["lmplz"]
    lines = [HEADING, "",
             "`nplm ngram-count -text train.txt -order 5 -vocab vocab.txt -unk -lm kn5.arpa` against `lmplz -o 5 -S "
             "2G -T /tmp < train.unkword.txt > kn5.arpa` (rare words spelt UNKWORD: lmplz refuses `<unk>` in text), "
             f"whole processes timed from outside, {RUNS} pairs after a warm-up, the two in turn; medians, and the "
             f"median of the pairwise ratios. Load average {load_before:.2f} before, {load_after:.2f} after "
             f"({os.cpu_count()} cores).", "",
             "| tool | wall | CPU | peak memory |", "| --- | --- | --- | --- |"]
    for name, runs in results.items():
        lines.append(f"| {name} | {statistics.median(r[0] for r in runs):.2f} s "
                     f"| {statistics.median(r[1] for r in runs):.2f} s | {max(r[2] for r in runs):.0f} MB |")
    wall_ratio = statistics.median(a[0] / b[0] for a, b in zip(mine, lmplz))
    cpu_ratio = statistics.median(a[1] / b[1] for a, b in zip(mine, lmplz))
    memory_ratio = max(r[2] for r in mine) / max(r[2] for r in lmplz)
    lines.append(f"| ratio (ours / lmplz) | {wall_ratio:.2f}x | {cpu_ratio:.2f}x | {memory_ratio:.2f}x |")
    met = "met" if wall_ratio <= 1.0 and memory_ratio <= 1.0 else "not met"
    lines += ["", f"Aim (no slower than lmplz, at no more memory): {met}."]
    srilm = os.environ.get("SRILM_BIN")
    if srilm:
        reference = os.path.join(OUT, "kn5-srilm.arpa")
        subprocess.run([os.path.join(srilm, "ngram-count"), "-text", train, "-order", "5", "-vocab", vocab, "-unk",
                        "-kndiscount", "-interpolate", "-gt3min", "1", "-gt4min", "1", "-gt5min", "1",
                        "-lm", reference], check=True, capture_output=True)
        same = filecmp.cmp(ours, reference, shallow=False)
        lines += ["", f"Our ARPA file is {'the same as' if same else 'NOT the same as'} SRILM 1.7.3's (`ngram-count "
                  "-kndiscount -interpolate -gt3min 1 -gt4min 1 -gt5min 1`), byte for byte."]
    phases = [json.loads(subprocess.run([sys.executable, "-c", PHASES, train, vocab, os.path.join(OUT, "phases.arpa")],
                                        check=True, capture_output=True, text=True).stdout) for _ in range(RUNS)]
    start = statistics.median(measured_with_cpu([sys.executable, "-c", "pass"])[0] for _ in range(RUNS))
    lines += ["", f"Where our time goes (inside one process, medians of {RUNS}; the interpreter's own start, "
              f"`python -c pass`, {start * 1000:.0f} ms):", "", "| phase | median |", "| --- | --- |"]
    lines += [f"| {phase} | {statistics.median(p[phase] for p in phases) * 1000:.0f} ms |" for phase in phases[0]]
    return lines
