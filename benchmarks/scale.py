"""`make bench-scale`: KN5 of random Zipf text at 20M words and up, ours against KenLM's
lmplz (issue 35), written to BENCHMARKS.md.

For each size (--sizes, or $SCALE_WORDS: default 20M, 200M and 1B, each run only when
the scratch folder's disk has room for it): the text by benchmarks/zipf_text.py (seed 1)
and a held-out text of 200k words (seed 2) written once; `nplm ngram-count -order 5
-memory M` and `lmplz -o 5 -S M` (M = 1G at 20M words, 2G above), ours first, then
lmplz, --repeats times; each command's wall time, peak RSS and peak temporary disk, under
a cap on its address space (--cap-gb) so that a run that would exhaust the machine fails
and is recorded as such. The two ARPA files' `\\data\\` counts are compared. At sizes up
to --score-max-words the model is scored on the held-out text by `nplm ppl` and KenLM's
`query`, from the ARPA file and from each tool's binary (`nplm ppl -write-bin-lm`,
`build_binary`). The scratch folder is removed at the end.
"""
import argparse
import filecmp
import os
import re
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from run import machine_stamp, write_sections  # noqa: E402

HEADING = "## KN5 of large Zipf texts against lmplz (issue 35)"
ORDER = 5
# SRILM's default cutoffs (-gt3min 2 and up) and entropy pruning: the walks, fix-ups and pruning passes
PRUNED_OPTIONS = ["-gt3min", "2", "-gt4min", "2", "-gt5min", "2", "-prune", "1e-8"]
PRUNED_MAX = 20_000_000
RANKS = 2  # -mpi's row: ranks on this machine, each with half of -memory
SEED, HELDOUT_SEED, HELDOUT_WORDS = 1, 2, 200_000
GNU_TIME = "/usr/bin/time"
BYTES_PER_WORD = 4.6  # zipf_text.py's text at |V| = 200k, exponent 1.1 (4.52 measured at 20M)
DISK_PER_TEXT_BYTE = 60  # free disk a size needs: at 20M words each ARPA file is 23 times the text
POLL_SECONDS = 0.5
OWNERS = {"ours": "our", "lmplz": "lmplz's"}
MEMORY_FAILURES = ("MemoryError", "Unable to allocate", "bad_alloc", "Cannot allocate memory", "out of memory")


def parse_words(text):
    """20M, 1B, 500k or a plain number of words."""
    text = text.strip()
    scale = {"k": 10 ** 3, "m": 10 ** 6, "b": 10 ** 9}.get(text[-1:].lower(), 1)
    return int(float(text[:-1] if scale > 1 else text) * scale)


def spelt(words):
    return f"{words / 1e9:g}B" if words >= 10 ** 9 else f"{words / 1e6:g}M" if words >= 10 ** 6 else f"{words:,}"


def process_tree(pid):
    """`pid` and all its descendants, now."""
    parents = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    # the fields after the command's name, which may hold spaces; the parent's id is the second
                    parents[int(entry)] = int(f.read().rsplit(")", 1)[1].split()[1])
            except (FileNotFoundError, ProcessLookupError, IndexError):
                pass
    tree, grown = {pid}, True
    while grown:
        grown = False
        for child, parent in parents.items():
            if parent in tree and child not in tree:
                tree.add(child)
                grown = True
    return tree


def tree_rss(tree):
    """Resident bytes of the processes `tree`, now."""
    total = 0
    for pid in tree:
        try:
            with open(f"/proc/{pid}/statm") as f:
                total += int(f.read().split()[1]) * resource.getpagesize()
        except (FileNotFoundError, ProcessLookupError, IndexError):
            pass
    return total


def temporary_bytes(folder, tree):
    """Disk blocks used under `folder` (as `du -s` counts them), and by the files under it
    that the processes `tree` hold open after removing them (lmplz's temporary files are
    removed as soon as they are made)."""
    total, prefix = 0, os.path.abspath(folder) + os.sep
    for root, _, files in os.walk(folder):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_blocks * 512
            except FileNotFoundError:
                pass
    seen = set()
    for pid in tree:
        try:
            descriptors = os.listdir(f"/proc/{pid}/fd")
        except (FileNotFoundError, PermissionError):
            continue
        for fd in descriptors:
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
                if target.startswith(prefix) and target.endswith(" (deleted)"):
                    info = os.stat(f"/proc/{pid}/fd/{fd}")
                    if (info.st_dev, info.st_ino) not in seen:
                        seen.add((info.st_dev, info.st_ino))
                        total += info.st_blocks * 512
            except (FileNotFoundError, PermissionError):
                pass
    return total


class Measured:
    """One command's run: wall seconds, peak RSS (MB: the larger of the kernel's peak of its
    largest process and the polled sum over its process tree), peak temporary disk (MB,
    polled), and None or why it failed."""

    def __init__(self, args, cap_bytes, temporary=None, stdin=None, stdout=None, env=None):
        self.args, self.failure = args, None
        peaks = {"rss": 0, "disk": 0}
        done = threading.Event()

        def limit():
            resource.setrlimit(resource.RLIMIT_AS, (cap_bytes, cap_bytes))

        # The kernel's peak of a process forked from this one starts at this process's own peak (the
        # copied memory's high-water mark): GNU time, small, forks the command and reports its own.
        gnu_time = GNU_TIME if os.access(GNU_TIME, os.X_OK) else None
        peak_file = tempfile.NamedTemporaryFile("r", suffix=".rss") if gnu_time else None
        command = [gnu_time, "-f", "%M", "-o", peak_file.name, *args] if gnu_time else args
        start = time.perf_counter()
        with open(stdin or os.devnull, "rb") as source, open(stdout or os.devnull, "wb") as sink, \
                tempfile.TemporaryFile("w+") as err:
            proc = subprocess.Popen(command, stdin=source, stdout=sink, stderr=err, env=env, preexec_fn=limit)

            def poll():
                while not done.wait(POLL_SECONDS):
                    tree = process_tree(proc.pid)
                    peaks["rss"] = max(peaks["rss"], tree_rss(tree))
                    if temporary:
                        peaks["disk"] = max(peaks["disk"], temporary_bytes(temporary, tree))

            watcher = threading.Thread(target=poll, daemon=True)
            watcher.start()
            _, status, usage = os.wait4(proc.pid, 0)
            self.seconds = time.perf_counter() - start
            done.set()
            watcher.join()
            proc.returncode = os.waitstatus_to_exitcode(status)
            err.seek(0)
            message = err.read()
        kernel_peak = usage.ru_maxrss * 1024
        if peak_file is not None:
            reported = peak_file.read().strip().splitlines()
            kernel_peak = int(reported[-1]) * 1024 if reported and reported[-1].isdigit() else 0
            peak_file.close()
        self.peak_mb = max(kernel_peak, peaks["rss"]) / 2 ** 20
        self.disk_mb = peaks["disk"] / 2 ** 20
        self.stderr = message
        if proc.returncode != 0:
            last = next((line for line in reversed(message.splitlines()) if line.strip()), "")
            if any(sign in message for sign in MEMORY_FAILURES) or proc.returncode == -signal.SIGKILL:
                self.failure = f"EXCEEDED the {cap_bytes / 2 ** 30:g} GB cap"
            else:
                self.failure = f"FAILED (status {proc.returncode}: {last.strip()[:120]})"


def data_counts(arpa):
    """{order: count} of an ARPA file's `\\data\\` section."""
    counts = {}
    with open(arpa, "rb") as f:
        for line in f:
            line = line.strip()
            if line.startswith(b"ngram "):
                order, count = line[6:].split(b"=")
                counts[int(order)] = int(count)
            elif line.startswith(b"\\1-grams:"):
                return counts
    return counts


def has_unigram(arpa, word):
    """Whether the ARPA file's unigrams hold `word`."""
    target = word.encode()
    with open(arpa, "rb") as f:
        inside = False
        for line in f:
            if line.startswith(b"\\1-grams:"):
                inside = True
            elif line.startswith(b"\\2-grams:") or line.startswith(b"\\end\\"):
                return False
            elif inside and line.split(b"\t")[1:2] == [target]:
                return True
    return False


def same_counts(ours, theirs, ours_has_unk):
    """Whether two `\\data\\` sections agree, lmplz's always-present <unk> aside."""
    adjusted = dict(ours)
    if not ours_has_unk and 1 in adjusted:
        adjusted[1] += 1
    return adjusted == theirs


def generate(words, seed, path, vocab_size, exponent):
    subprocess.run([sys.executable, os.path.join(HERE, "zipf_text.py"), "--words", str(words), "--seed", str(seed),
                    "--vocab-size", str(vocab_size), "--exponent", str(exponent), "--out", path], check=True)


def scoring(nplm, kenlm, arpa, heldout, work, cap):
    """Rows of scoring `heldout` with the ARPA file and each tool's binary."""
    binary, probing = os.path.join(work, "model.nplm"), os.path.join(work, "model.probing")
    runs = [("`nplm ppl -lm MODEL.arpa -text heldout.txt`", Measured([nplm, "ppl", "-lm", arpa, "-text", heldout],
                                                                       cap, stdout=os.path.join(work, "ppl.out")))]
    runs.append(("`nplm ppl -lm MODEL.arpa -write-bin-lm MODEL.nplm` (the binary)",
                 Measured([nplm, "ppl", "-lm", arpa, "-write-bin-lm", binary], cap)))
    if os.path.exists(binary):
        runs.append(("`nplm ppl -lm MODEL.nplm -text heldout.txt`",
                     Measured([nplm, "ppl", "-lm", binary, "-text", heldout], cap,
                              stdout=os.path.join(work, "ppl-binary.out"))))
    if kenlm:
        query = os.path.join(kenlm, "query")
        runs.append(("KenLM `query -v summary MODEL.arpa < heldout.txt`",
                     Measured([query, "-v", "summary", arpa], cap, stdin=heldout,
                              stdout=os.path.join(work, "query.out"))))
        runs.append(("KenLM `build_binary MODEL.arpa MODEL.probing`",
                     Measured([os.path.join(kenlm, "build_binary"), arpa, probing], cap)))
        if os.path.exists(probing):
            runs.append(("KenLM `query -v summary MODEL.probing < heldout.txt`",
                         Measured([query, "-v", "summary", probing], cap, stdin=heldout,
                                  stdout=os.path.join(work, "query-binary.out"))))
    reported = {}
    for name in ("ppl.out", "ppl-binary.out", "query.out", "query-binary.out"):
        path = os.path.join(work, name)
        if os.path.exists(path):
            text = open(path).read()
            if "ppl= " in text:
                reported[name] = float(text.split("ppl= ")[1].split()[0])
            elif "Perplexity excluding OOVs:" in text:
                reported[name] = float(text.split("Perplexity excluding OOVs:")[1].split()[0])
    for path in (binary, probing):
        if os.path.exists(path):
            os.remove(path)
    return runs, reported


def cell(run, field):
    if run.failure:
        return run.failure if field == "wall" else ""
    return {"wall": f"{run.seconds:,.1f} s", "rss": f"{run.peak_mb:,.0f} MB",
            "disk": f"{run.disk_mb:,.0f} MB" if run.disk_mb else "0"}[field]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nplm", default=os.path.join(os.path.dirname(sys.executable), "nplm"))
    parser.add_argument("--kenlm", default=os.environ.get("KENLM_BIN"),
                        help="the folder of KenLM's lmplz, query and build_binary (default $KENLM_BIN; "
                             "not run when absent)")
    parser.add_argument("--sizes", default=os.environ.get("SCALE_WORDS", "20M,200M,1B"),
                        help="words of text, comma-separated (20M, 1B, ...)")
    parser.add_argument("--repeats", type=int, default=int(os.environ.get("SCALE_REPEATS", 1)))
    parser.add_argument("--ours-max-words", default=os.environ.get("SCALE_OURS_MAX", ""),
                        help="run nplm ngram-count at sizes up to this only (a build known to need more memory)")
    parser.add_argument("--score-max-words", default=os.environ.get("SCALE_SCORE_MAX", "20M"),
                        help="score the held-out text at sizes up to this only")
    parser.add_argument("--cap-gb", type=float, default=float(os.environ.get("SCALE_CAP_GB", 18)),
                        help="address-space cap of every measured command (GB)")
    parser.add_argument("--vocab-size", type=int, default=200_000)
    parser.add_argument("--exponent", type=float, default=1.1)
    parser.add_argument("--work", default=os.path.join("bench", "out", "scale"))
    parser.add_argument("--out", default="BENCHMARKS.md")
    args = parser.parse_args()
    sizes = [parse_words(s) for s in args.sizes.split(",") if s.strip()]
    ours_max = parse_words(args.ours_max_words) if args.ours_max_words else max(sizes, default=0)
    score_max = parse_words(args.score_max_words)
    cap = int(args.cap_gb * 2 ** 30)
    lmplz = os.path.join(args.kenlm, "lmplz") if args.kenlm else None
    if lmplz and not os.access(lmplz, os.X_OK):
        sys.exit(f"scale.py: {lmplz}: no such program (--kenlm / KENLM_BIN)")
    os.makedirs(args.work, exist_ok=True)
    results, skipped = [], []
    try:
        for words in sizes:
            free = shutil.disk_usage(args.work).free
            needed = words * BYTES_PER_WORD * DISK_PER_TEXT_BYTE
            if free < needed:
                skipped.append(f"{spelt(words)} words: not run, it needs {needed / 1e9:,.0f} GB of free disk "
                               f"({DISK_PER_TEXT_BYTE} times its text) and {args.work} had {free / 1e9:,.0f} GB")
                continue
            results.append(measure_size(words, args, cap, lmplz, ours_max, score_max))
    finally:
        shutil.rmtree(args.work, ignore_errors=True)
    body = section(results, skipped, args, lmplz, ours_max, score_max)
    write_sections(args.out, [body])
    print("\n".join(body))


def other_run(result, name, label, words, cap, temp, arpa, command, done):
    """One of our other runs (`result[name]`): measured with TMPDIR in `temp`, then, when it
    succeeded, `done(run)` reads its ARPA file, which is then removed with `temp`."""
    os.makedirs(temp, exist_ok=True)
    run = Measured(command, cap, temporary=temp, env=dict(os.environ, TMPDIR=temp))
    result[name].append(run)
    print(f"{spelt(words)} {label}: {cell(run, 'wall')} {cell(run, 'rss')}", flush=True)
    if not run.failure:
        done(run)
    shutil.rmtree(temp, ignore_errors=True)
    if os.path.exists(arpa):
        os.remove(arpa)


def measure_size(words, args, cap, lmplz, ours_max, score_max):
    """The runs at one size: {"words", "memory", "text_mb", "ours": [Measured], "lmplz":
    [Measured], "counts": {tool: {order: count}}, "arpa_mb", "scoring": rows, "ppl"}."""
    work = os.path.join(args.work, spelt(words))
    os.makedirs(work, exist_ok=True)
    text, heldout = os.path.join(work, "text.txt"), os.path.join(work, "heldout.txt")
    start = time.perf_counter()
    generate(words, SEED, text, args.vocab_size, args.exponent)
    generated = time.perf_counter() - start
    generate(HELDOUT_WORDS, HELDOUT_SEED, heldout, args.vocab_size, args.exponent)
    memory = "1G" if words <= 20_000_000 else "2G"
    scored = words <= score_max
    result = {"words": words, "memory": memory, "text_mb": os.path.getsize(text) / 2 ** 20, "generated": generated,
              "ours": [], "lmplz": [], "mpi": [], "pruned": [], "counts": {}, "arpa_mb": {}, "scoring": [], "ppl": {}}
    ours_arpa, lmplz_arpa = os.path.join(work, "ours.arpa"), os.path.join(work, "lmplz.arpa")
    ours_temp, lmplz_temp = os.path.join(work, "tmp-ours"), os.path.join(work, "tmp-lmplz")
    ours_has_unk = False
    for _ in range(args.repeats):
        if words <= ours_max:
            os.makedirs(ours_temp, exist_ok=True)
            run = Measured([args.nplm, "ngram-count", "-text", text, "-order", str(ORDER), "-memory", memory,
                            "-lm", ours_arpa, "-debug", "2"], cap, temporary=ours_temp,
                           env=dict(os.environ, TMPDIR=ours_temp))
            result["ours"].append(run)
            result["stages"] = stages(run.stderr)
            print(f"{spelt(words)} nplm ngram-count: {cell(run, 'wall')} {cell(run, 'rss')}", flush=True)
            if not run.failure:
                result["counts"]["ours"] = data_counts(ours_arpa)
                result["arpa_mb"]["ours"] = os.path.getsize(ours_arpa) / 2 ** 20
                ours_has_unk = has_unigram(ours_arpa, "<unk>")
            shutil.rmtree(ours_temp, ignore_errors=True)
            ours_failed = run.failure
            if words <= PRUNED_MAX and not ours_failed:  # SRILM's cutoffs and pruning, out of core too
                pruned_arpa = os.path.join(work, "pruned.arpa")

                def pruned_counts(run):
                    result["counts"]["pruned"] = data_counts(pruned_arpa)
                    result["arpa_mb"]["pruned"] = os.path.getsize(pruned_arpa) / 2 ** 20

                other_run(result, "pruned", "nplm ngram-count (pruned)", words, cap, ours_temp, pruned_arpa,
                          [args.nplm, "ngram-count", "-text", text, "-order", str(ORDER), "-memory", memory,
                           *PRUNED_OPTIONS, "-lm", pruned_arpa], pruned_counts)
            mpiexec = os.path.join(os.path.dirname(args.nplm), "mpiexec")
            if os.access(mpiexec, os.X_OK) and not ours_failed:
                mpi_arpa = os.path.join(work, "mpi.arpa")
                result["mpi_memory"] = half = f"{int(memory[:-1]) * 1024 // RANKS}M"

                def same_as_ours(run):
                    result["mpi_same"] = filecmp.cmp(mpi_arpa, ours_arpa, shallow=False)

                other_run(result, "mpi", "nplm ngram-count -mpi", words, cap, ours_temp, mpi_arpa,
                          [mpiexec, "-n", str(RANKS), args.nplm, "ngram-count", "-text", text, "-order", str(ORDER),
                           "-memory", half, "-mpi", "-lm", mpi_arpa], same_as_ours)
            if os.path.exists(ours_arpa) and not scored:
                os.remove(ours_arpa)  # the disk for lmplz's turn
        if lmplz:
            os.makedirs(lmplz_temp, exist_ok=True)
            run = Measured([lmplz, "-o", str(ORDER), "-S", memory, "-T", lmplz_temp, "--discount_fallback"], cap,
                           temporary=lmplz_temp, stdin=text, stdout=lmplz_arpa)
            result["lmplz"].append(run)
            print(f"{spelt(words)} lmplz: {cell(run, 'wall')} {cell(run, 'rss')}", flush=True)
            if not run.failure:
                result["counts"]["lmplz"] = data_counts(lmplz_arpa)
                result["arpa_mb"]["lmplz"] = os.path.getsize(lmplz_arpa) / 2 ** 20
            shutil.rmtree(lmplz_temp, ignore_errors=True)
            if os.path.exists(lmplz_arpa) and (not scored or "ours" in result["counts"]):
                os.remove(lmplz_arpa)
    result["same_counts"] = (same_counts(result["counts"]["ours"], result["counts"]["lmplz"], ours_has_unk)
                             if "ours" in result["counts"] and "lmplz" in result["counts"] else None)
    result["ours_has_unk"] = ours_has_unk
    if scored:
        model = ours_arpa if os.path.exists(ours_arpa) else lmplz_arpa if os.path.exists(lmplz_arpa) else None
        if model:
            result["scored_model"] = "ours" if model == ours_arpa else "lmplz"
            result["scoring"], result["ppl"] = scoring(args.nplm, args.kenlm if lmplz else None, model, heldout,
                                                       work, cap)
            for row, run in result["scoring"]:
                print(f"{spelt(words)} {row}: {cell(run, 'wall')} {cell(run, 'rss')}", flush=True)
    shutil.rmtree(work, ignore_errors=True)
    return result


def stages(stderr):
    """[(stage, seconds)] from ngram-count -debug 2's timing lines ("nplm ngram-count:
    NAME: S s", several to a line joined by "; ")."""
    found = []
    for line in stderr.splitlines():
        if line.startswith("nplm ngram-count: "):
            for part in line[len("nplm ngram-count: "):].split("; "):
                match = re.fullmatch(r"(.+): ([0-9.]+) s", part)
                if match:
                    found.append((match.group(1), float(match.group(2))))
    return found


def median_run(runs):
    """(median wall, largest peak RSS, largest peak disk) of the runs, or None when one failed."""
    if not runs or any(r.failure for r in runs):
        return None
    return (statistics.median(r.seconds for r in runs), max(r.peak_mb for r in runs), max(r.disk_mb for r in runs))


def section(results, skipped, args, lmplz, ours_max, score_max):
    lines = [HEADING, "", machine_stamp(), "",
             f"Random Zipf text by `python benchmarks/zipf_text.py --words N --seed {SEED} --out text.txt`: each word "
             f"drawn on its own, p(rank r) proportional to r^-{args.exponent:g} over |V| = {args.vocab_size:,} words "
             "spelt w0, w1, ...; sentences of 1 + Poisson(19) words (mean 20). Held-out text: "
             f"{HELDOUT_WORDS:,} words, `--seed {HELDOUT_SEED}`. Each size's text is written once to a scratch file, "
             f"then the tools run one after the other, ours first, {args.repeats} "
             f"time{'s' if args.repeats > 1 else ''} "
             "each (the median wall time; the largest peaks):", "",
             f"    nplm ngram-count -text text.txt -order {ORDER} -memory M -lm ours.arpa      (TMPDIR=DIR)",
             f"    mpiexec -n {RANKS} nplm ngram-count -text text.txt -order {ORDER} -memory M/{RANKS} -mpi -lm mpi.arpa",
             f"    nplm ngram-count -text text.txt -order {ORDER} -memory M {' '.join(PRUNED_OPTIONS)} -lm pruned.arpa"
             f"      (up to {spelt(PRUNED_MAX)} words)",
             f"    lmplz -o {ORDER} -S M -T DIR --discount_fallback < text.txt > lmplz.arpa", "",
             f"(`-mpi`: {RANKS} ranks on this machine, each counting a share of the text and estimating the n-grams of "
             "its first words within half the memory; run after ours when mpi4py's mpiexec is installed, its ARPA "
             "file compared with ours.)", "",
             "M = 1G at 20M words, 2G above. lmplz needs `--discount_fallback` at 200M words (a Kneser-Ney discount "
             "out of range: it stops, where ours falls back to 0.5, 1, 1.5 with a warning); where the discounts are "
             "in range it changes nothing. Wall time from start to exit; peak RSS the larger of the kernel's peak of "
             "the command (GNU time's %M: a process forked from the benchmark's own starts from its high-water mark, "
             "so wait4's figure is the benchmark's size when that is larger) and the sum over its process tree polled "
             "every "
             f"{POLL_SECONDS:g} s; temporary disk the peak of DIR's blocks (as `du -s` counts them) plus those of "
             "the files in it "
             "that the process holds open after removing them (as lmplz does with all of its own), polled every "
             f"{POLL_SECONDS:g} s (the ARPA file itself not counted). Every command ran under an address-space cap "
             f"of {args.cap_gb:g} GB (RLIMIT_AS), so that a run that would exhaust the machine fails instead. "
             f"MB = 2^20 bytes, GB = 2^30."]
    if not lmplz:
        lines += ["", "KenLM not measured: set KENLM_BIN to the folder of its `lmplz`, `query` and `build_binary`."]
    if ours_max < max((r["words"] for r in results), default=0):
        lines += ["", f"`nplm ngram-count` was run only up to {spelt(ours_max)} words in this run "
                  f"(`SCALE_OURS_MAX={args.ours_max_words}`: the build measured needs more memory than the machine has "
                  "above that)."]
    lines += ["", "| words | text | job | wall | peak RSS | peak temporary disk | ARPA file |",
              "| --- | --- | --- | --- | --- | --- | --- |"]
    for r in results:
        data = f"{spelt(r['words'])} | {r['text_mb']:,.0f} MB (generated in {r['generated']:.1f} s)"
        for tool, command in (("ours", f"`nplm ngram-count ... -memory {r['memory']}`"),
                              ("mpi", f"`mpiexec -n {RANKS} nplm ngram-count ... -memory {r.get('mpi_memory')} -mpi`"),
                              ("pruned", f"`nplm ngram-count ... -memory {r['memory']} {' '.join(PRUNED_OPTIONS)}`"),
                              ("lmplz", f"KenLM `lmplz -o {ORDER} -S {r['memory']}`")):
            if r[tool]:
                summary = median_run(r[tool])
                if summary:
                    wall, rss, disk = summary
                    cells = f"{wall:,.1f} s | {rss:,.0f} MB | {disk:,.0f} MB"
                else:
                    failed = next(x for x in r[tool] if x.failure)
                    cells = (f"{failed.failure} after {failed.seconds:,.0f} s | {failed.peak_mb:,.0f} MB | "
                             f"{failed.disk_mb:,.0f} MB")
                arpa = f"{r['arpa_mb'][tool]:,.0f} MB" if tool in r["arpa_mb"] else ""
                lines.append(f"| {data} | {command} | {cells} | {arpa} |")
    lines += [""]
    for r in results:
        counts = r["counts"]
        for tool, name in (("ours", "ours"), ("lmplz", "lmplz's"), ("pruned", "the pruned model's")):
            if tool in counts:
                lines.append(f"- {spelt(r['words'])} words, {name} `\\data\\`: "
                             + ", ".join(f"{n}-grams {c:,}" for n, c in sorted(counts[tool].items())) + ".")
        if "mpi_same" in r:
            lines.append(f"- {spelt(r['words'])} words: `-mpi` on {RANKS} ranks (each estimating the n-grams of its "
                         "first words) wrote " + ("the one-process ARPA file byte for byte" if r["mpi_same"] else
                                                  "A DIFFERENT ARPA FILE from the one process's") + ".")
        if r["same_counts"] is not None:
            lines.append(f"- {spelt(r['words'])} words: the two ARPA files hold "
                         + ("the same numbers of n-grams of every order" if r["same_counts"] else
                            "DIFFERENT NUMBERS OF N-GRAMS")
                         + ("" if r["ours_has_unk"] else " (lmplz's unigrams counted without its `<unk>`, which it "
                            "always writes and ours writes only with `-unk`)") + ".")
    for r in results:
        if r.get("stages"):
            total = median_run(r["ours"])
            lines += ["", f"Where `nplm ngram-count`'s time goes at {spelt(r['words'])} words (its `-debug 2` lines, "
                      "last run; the rest of the wall time is reading the vocabulary's words, start-up and "
                      "removing the temporary files):", "", "| stage | seconds |", "| --- | --- |"]
            lines += [f"| {name} | {seconds:.1f} |" for name, seconds in r["stages"]]
            if total:
                lines.append(f"| (whole command) | {total[0]:.1f} |")
    scored = [r for r in results if r["scoring"]]
    for r in scored:
        ppl = r["ppl"]
        lines += ["", f"Scoring the {HELDOUT_WORDS:,}-word held-out text with the {spelt(r['words'])}-word model "
                  f"(MODEL.arpa: {OWNERS[r['scored_model']]} ARPA file; every tool reads "
                  "the same file; one run each, whole commands from start to exit). The perplexities reported, "
                  "OOVs left out (nplm's as SRILM's `ngram -ppl`, KenLM's \"excluding OOVs\")"
                  + (": " + ", ".join(f"{name} {value:.2f}" for name, value in
                                      (("nplm ARPA", ppl.get("ppl.out")), ("nplm binary", ppl.get("ppl-binary.out")),
                                       ("query ARPA", ppl.get("query.out")),
                                       ("query binary", ppl.get("query-binary.out"))) if value) if ppl else "")
                  + ".", "", "| command | wall | peak RSS |", "| --- | --- | --- |"]
        lines += [f"| {row} | {cell(run, 'wall')} | {cell(run, 'rss')} |" for row, run in r["scoring"]]
    lines += ["", "Goals (issue 35):"]
    by_size = {r["words"]: r for r in results}
    small = by_size.get(20_000_000)
    if small and small["ours"]:
        ours, theirs = median_run(small["ours"]), median_run(small["lmplz"])
        rss_goal = 1.2 * 1024
        lines.append("- 20M words, `-memory 1G`: peak RSS at most 1.2 GB: "
                     + (f"{'met' if ours[1] <= rss_goal else 'UNMET'} ({ours[1] / 1024:.2f} GB)" if ours else
                        "UNMET (failed)")
                     + "; wall time at most lmplz's: "
                     + (f"{'met' if ours[0] <= theirs[0] else 'UNMET'} ({ours[0]:,.1f} s against {theirs[0]:,.1f} s, "
                        f"{ours[0] / theirs[0]:.2f}x)" if ours and theirs else
                        "not compared (lmplz not run)" if ours else "UNMET (failed)") + ".")
    else:
        lines.append("- 20M words, `-memory 1G`: not measured in this run.")
    large = by_size.get(200_000_000)
    if large and large["ours"]:
        ours = median_run(large["ours"])
        lines.append("- 200M words, `-memory 2G`: completes within 2.5 GB of RSS: "
                     + (f"{'met' if ours[1] <= 2.5 * 1024 else 'UNMET'} ({ours[1] / 1024:.2f} GB, {ours[0]:,.0f} s)"
                        if ours else f"UNMET ({large['ours'][0].failure})") + ".")
    else:
        lines.append("- 200M words, `-memory 2G`: not measured in this run.")
    for r in scored:
        runs = dict(r["scoring"])
        arpa, binary = runs.get("`nplm ppl -lm MODEL.arpa -text heldout.txt`"), \
            runs.get("`nplm ppl -lm MODEL.nplm -text heldout.txt`")
        query = runs.get("KenLM `query -v summary MODEL.arpa < heldout.txt`")
        if arpa and not arpa.failure:
            lines.append(f"- {spelt(r['words'])} words, reading the ARPA file (`nplm ppl`): no slower than KenLM's "
                         "`query`: "
                         + (f"{'met' if arpa.seconds <= query.seconds else 'UNMET'} ({arpa.seconds:,.1f} s against "
                            f"{query.seconds:,.1f} s, {arpa.seconds / query.seconds:.2f}x)"
                            if query and not query.failure else "not compared (query not run)")
                         + "; in no more memory than the binary model takes: "
                         + (f"{'met' if arpa.peak_mb <= binary.peak_mb else 'UNMET'} ({arpa.peak_mb:,.0f} MB against "
                            f"{binary.peak_mb:,.0f} MB)" if binary and not binary.failure else "not compared") + ".")
    lines += [f"- {line}." for line in skipped]
    return lines


if __name__ == "__main__":
    main()
