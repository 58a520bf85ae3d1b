"""Loading and scoring Brown test with KN5 (issue 21): `nplm ppl` from the ARPA file and
from its binary (`-write-bin-lm`), beside SRILM's `ngram -ppl` and KenLM's `query` on the
same files, the commands taking turns run after run; and where the binary's time goes."""
import json
import os
import statistics
import subprocess
import sys
import time

from sections import NPLM, OUT, _vocabulary

RUNS = 7
PYTHON = sys.executable

BINARY_AIM = 0.2  # seconds, load and score (issue 21)
# The phases of `nplm ppl -lm kn5.nplm -text test.txt` timed inside one process.
PHASES = """
import json, sys, time
start = time.perf_counter()
import nplmtk.cli.group  # what `nplm ppl` imports on its usual path, in its order (numpy first, cli/group.py)
import nplmtk.cli.ppl
from nplmtk.models import load
from nplmtk.ppl import read_scored_text, report
imported = time.perf_counter()
model = load(sys.argv[1])
loaded = time.perf_counter()
_, corpus = read_scored_text(sys.argv[2], model.vocab, words=False)
read = time.perf_counter()
log10 = model.log10probs(corpus)
scored = time.perf_counter()
report(model, None, corpus, log10, write=lambda line: None)
done = time.perf_counter()
print(json.dumps({"imports": imported - start, "opening the model": loaded - imported,
                  "reading the text": read - loaded, "scoring": scored - read, "the report": done - scored}))
"""


def _measured(args, stdin=None):
    """Wall seconds and peak RSS (MB) of one run of `args`, its output thrown away."""
    wall, _, peak = measured_with_cpu(args, stdin)
    return wall, peak


def measured_with_cpu(args, stdin=None, stdout=None):
    """Wall seconds, CPU seconds (user + system) and peak RSS (MB) of one run of `args`,
    its output written to the file `stdout` or thrown away. CPU and peak come from
    /usr/bin/time: a child forked from this process would count this process's memory as
    its own until it runs the command."""
    with (open(stdin) if stdin else open(os.devnull) as source,
          open(stdout, "wb") if stdout else open(os.devnull, "wb") as sink,
          open(os.path.join(OUT, "peak.txt"), "w+") as usage):
        start = time.perf_counter()
        subprocess.run(["/usr/bin/time", "-f", "%U %S %M", "-o", usage.name, *args], stdin=source, check=True,
                       stdout=sink, stderr=subprocess.DEVNULL)
        wall = time.perf_counter() - start
        user, system, peak = usage.read().split()[-3:]
        return wall, float(user) + float(system), int(peak) / 1024


def alternately(commands, runs=RUNS, measure=_measured):
    """name -> [measure(*command)] of `runs` runs of each command (args, stdin[, stdout]),
    after one warm-up run each (the files then in the page cache for all), the commands
    taking turns."""
    for command in commands.values():
        measure(*command)
    results = {name: [] for name in commands}
    for _ in range(runs):
        for name, command in commands.items():
            results[name].append(measure(*command))
    return results


def _aims(results, peers):
    """The issue's aims: the ARPA file no slower than SRILM's `ngram` at no more than twice
    its memory, the binary within 0.2 s."""
    def met(ok):
        return "met" if ok else "NOT met"
    binary = statistics.median(w for w, _ in results["ours, binary"])
    aims = [f"binary loaded and scored within {BINARY_AIM} s: {met(binary <= BINARY_AIM)} ({binary:.3f} s)"]
    if "ours, ARPA" in peers:
        ours, srilm = results["ours, ARPA"], results[peers["ours, ARPA"]]
        time = statistics.median(o[0] / s[0] for o, s in zip(ours, srilm))
        memory = max(m for _, m in ours) / max(m for _, m in srilm)
        aims.insert(0, f"ARPA no slower than SRILM: {met(time <= 1)} ({time:.2f}x), at no more than twice its "
                       f"memory: {met(memory <= 2)} ({memory:.2f}x)")
    return "Aims: " + "; ".join(aims) + "."


def ngram_scoring(brown, peak):
    train, test = (os.path.join(brown, f"{s}.txt") for s in ("train", "test"))
    vocab = _vocabulary(brown)
    arpa, binary = os.path.join(OUT, "kn5.arpa"), os.path.join(OUT, "kn5.nplm")
    subprocess.run([NPLM, "ngram-count", "-text", train, "-order", "5", "-vocab", vocab, "-unk", "-lm", arpa,
                    "-write-bin-lm", binary], check=True)
    back = os.path.join(OUT, "kn5-from-binary.arpa")
    subprocess.run([NPLM, "ppl", "-lm", binary, "-write-lm", back], check=True)
    with open(arpa, "rb") as a, open(back, "rb") as b:
        same = a.read() == b.read()
    srilm, kenlm = os.environ.get("SRILM_BIN"), os.environ.get("KENLM_BIN")
    commands = {"ours, ARPA": ([NPLM, "ppl", "-lm", arpa, "-text", test], None),
                "ours, binary": ([NPLM, "ppl", "-lm", binary, "-text", test], None)}
    shown = {"ours, ARPA": "`nplm ppl -lm kn5.arpa -text test.txt`",
             "ours, binary": "`nplm ppl -lm kn5.nplm -text test.txt`"}
    peers = {}
    if srilm:
        commands["SRILM, ARPA"] = ([os.path.join(srilm, "ngram"), "-lm", arpa, "-order", "5", "-unk", "-ppl", test],
                                   None)
        shown["SRILM, ARPA"] = "SRILM 1.7.3 `ngram -lm kn5.arpa -order 5 -unk -ppl test.txt`"
        peers["ours, ARPA"] = "SRILM, ARPA"
    if kenlm:
        probing = os.path.join(OUT, "kn5.probing")
        subprocess.run([os.path.join(kenlm, "build_binary"), arpa, probing], check=True, capture_output=True)
        commands["KenLM, ARPA"] = ([os.path.join(kenlm, "query"), "-v", "summary", arpa], test)
        commands["KenLM, binary"] = ([os.path.join(kenlm, "query"), "-v", "summary", probing], test)
        shown["KenLM, ARPA"] = "KenLM `query -v summary kn5.arpa < test.txt`"
        shown["KenLM, binary"] = "KenLM `query -v summary kn5.probing < test.txt` (`build_binary`'s probing format)"
        peers["ours, binary"] = "KenLM, binary"
    results = alternately(commands)
    sizes = {name: os.path.getsize(path) / 2 ** 20 for name, path in (("ARPA", arpa), ("binary", binary))}
    lines = ["## Loading and scoring Brown test with KN5 (issue 21)", "",
             f"KN5 of Brown train (`nplm ngram-count -text train.txt -order 5 -vocab vocab.txt -unk -lm kn5.arpa "
             f"-write-bin-lm kn5.nplm`: {sizes['ARPA']:.0f} MB of ARPA text, {sizes['binary']:.0f} MB binary, whose "
             f"`nplm ppl -lm kn5.nplm -write-lm` gives back {'the same' if same else 'ANOTHER'} ARPA file, byte for "
             "byte), "
             "scoring Brown test (161,059 words, 10,121 sentences; every tool reports ppl 146.84). Whole commands, "
             f"from start to exit, load and score; each row the median of {RUNS} runs after a warm-up, the "
             "commands taking turns run after run; the ratio is the median of the runs' ratios to the peer in the "
             "same round. SRILM needs `-order 5` (its default order is 3).", "",
             "| command | median wall | peak RSS | against the peer on the same file kind |",
             "| --- | --- | --- | --- |"]
    for name, runs in results.items():
        wall = statistics.median(w for w, _ in runs)
        memory = max(m for _, m in runs)
        against = ""
        if name in peers:
            ratio = statistics.median(ours[0] / theirs[0] for ours, theirs in zip(runs, results[peers[name]]))
            memory_ratio = memory / max(m for _, m in results[peers[name]])
            against = f"{ratio:.2f}x {peers[name].split(',')[0]}'s time, {memory_ratio:.2f}x its memory"
        lines.append(f"| {shown[name]} | {wall:.3f} s | {memory:.0f} MB | {against} |")
    lines += ["", _aims(results, peers)]
    phases = [json.loads(subprocess.run([PYTHON, "-c", PHASES, binary, test], check=True, capture_output=True,
                                        text=True).stdout) for _ in range(RUNS)]
    start = statistics.median(_measured([PYTHON, "-c", "pass"])[0] for _ in range(RUNS))
    lines += ["", "Where the binary's time goes (inside one process, medians of "
              f"{RUNS}; the interpreter's own start, `python -c pass`, {start * 1000:.0f} ms). Opening the model: "
              "its header and vocabulary, every array's XXH64, and the tables' checks, the keys' in the pass that "
              "finds the children runs; scoring: the back-off walk, the sentences shared among OpenMP threads (one "
              "a core); the report: each sentence's totals from a kernel. The command then ends the process without "
              "tearing the interpreter down:", "",
              "| phase | median |", "| --- | --- |"]
    milliseconds = {phase: statistics.median(p[phase] for p in phases) * 1000 for phase in phases[0]}
    lines += [f"| {phase} | {ms:.{1 if ms < 10 else 0}f} ms |" for phase, ms in milliseconds.items()]
    return lines
