"""SRILM's everyday options on Brown (issue 17): each model and report of ours beside SRILM
1.7.3's own, compared byte for byte, with the time of each (the two in turn)."""
import filecmp
import os
import subprocess
import time

from log_bilinear import _kn5
from sections import NPLM, OUT, _vocabulary

# (label, nplm ngram-count options, SRILM ngram-count options); SRILM's cutoffs made ours (1)
ESTIMATES = [
    ("Good-Turing 5-gram (SRILM's default)", ["-order", "5", "-unk", "-gtdiscount"], ["-order", "5", "-unk"]),
    ("Good-Turing trigram, -gt2max 3 -gt3max 2", ["-order", "3", "-unk", "-gtdiscount", "-gt2max", "3", "-gt3max", "2"],
     ["-order", "3", "-unk", "-gt2max", "3", "-gt3max", "2"]),
    ("original Kneser-Ney 4-gram, interpolated", ["-order", "4", "-unk", "-ukndiscount", "-interpolate"],
     ["-order", "4", "-unk", "-ukndiscount", "-interpolate"]),
    ("absolute discounting 0.8 trigram, interpolated, pruned at 1e-7",
     ["-order", "3", "-unk", "-cdiscount", "0.8", "-interpolate", "-prune", "1e-7"],
     ["-order", "3", "-unk", "-cdiscount", "0.8", "-interpolate", "-prune", "1e-7"]),
    ("additive smoothing 0.01 bigram", ["-order", "2", "-unk", "-addsmooth", "0.01"],
     ["-order", "2", "-unk", "-addsmooth", "0.01"]),
    ("modified KN 5-gram, -map-unk UNK", ["-order", "5", "-unk", "-map-unk", "UNK"],
     ["-order", "5", "-unk", "-map-unk", "UNK", "-kndiscount", "-interpolate"]),
]
CUTOFFS = ["-gt3min", "1", "-gt4min", "1", "-gt5min", "1"]


def _timed(args):
    start = time.perf_counter()
    result = subprocess.run(args, check=True, capture_output=True)
    return time.perf_counter() - start, result.stdout


def srilm_options(brown, peak):
    srilm = os.environ.get("SRILM_BIN")
    lines = ["## SRILM's everyday options on Brown, against SRILM itself (issue 17)", ""]
    if not srilm:
        return lines + ["Not measured in this run: set SRILM_BIN to SRILM 1.7.3's binaries "
                        "(`../shared/tools/build-srilm.sh`)."]
    train, test = os.path.join(brown, "train.txt"), os.path.join(brown, "test.txt")
    vocab = _vocabulary(brown)
    lines += ["Each model estimated from Brown train with `-vocab vocab.txt` by `nplm ngram-count OPTIONS` and by "
              f"SRILM's `ngram-count OPTIONS {' '.join(CUTOFFS)}` (SRILM's cutoffs made ours), the two in turn; "
              "the ARPA files compared with `cmp`. Time: the whole command.", "",
              "| model | options | same file | nplm | SRILM |", "| --- | --- | --- | --- | --- |"]
    for label, ours, theirs in ESTIMATES:
        mine, peer = os.path.join(OUT, "options-nplm.arpa"), os.path.join(OUT, "options-srilm.arpa")
        our_seconds, _ = _timed([NPLM, "ngram-count", "-text", train, "-vocab", vocab, *ours, "-lm", mine])
        their_seconds, _ = _timed([os.path.join(srilm, "ngram-count"), "-text", train, "-vocab", vocab, *theirs,
                                   *CUTOFFS, "-lm", peer])
        same = filecmp.cmp(mine, peer, shallow=False)
        lines.append(f"| {label} | `{' '.join(ours)}` | {'yes' if same else '**no**'} | {our_seconds:.1f} s | "
                     f"{their_seconds:.1f} s |")
    kn5 = _kn5(brown)
    counts = os.path.join(OUT, "test3.counts")
    subprocess.run([NPLM, "ngram-count", "-text", test, "-order", "3", "-write", counts], check=True)
    reports = [("`-counts test3.counts -debug 1` (Brown test's counts of all orders up to 3)",
                ["-counts", counts, "-debug", "1"], ["-counts", counts, "-debug", "1", "-order", "5"]),
               ("`-ppl test.txt -unk-prob -5 -debug 1`", ["-ppl", test, "-unk-prob", "-5", "-debug", "1"],
                ["-ppl", test, "-unk-prob", "-5", "-debug", "1", "-order", "5"]),
               ("`-gen 100 -seed 7 -unk`", ["-gen", "100", "-seed", "7", "-unk"],
                ["-gen", "100", "-seed", "7", "-unk", "-order", "5"])]
    lines += ["", "Reports of KN5 (`nplm ngram-count -order 5 -vocab vocab.txt -unk`) by `nplm ppl -lm kn5.arpa "
              "OPTIONS` and SRILM's `ngram -lm kn5.arpa -order 5 OPTIONS`, in turn; stdout compared.", "",
              "| options | same output | nplm | SRILM |", "| --- | --- | --- | --- |"]
    for label, ours, theirs in reports:
        our_seconds, our_out = _timed([NPLM, "ppl", "-lm", kn5, *ours])
        their_seconds, their_out = _timed([os.path.join(srilm, "ngram"), "-lm", kn5, *theirs])
        lines.append(f"| {label} | {'yes' if our_out == their_out else '**no**'} | {our_seconds:.1f} s | "
                     f"{their_seconds:.1f} s |")
    return lines
