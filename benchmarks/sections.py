"""One function per benchmark section: (brown_dir, sgemm_peak) -> markdown lines."""
import json
import math
import os
import resource
import statistics
import subprocess
import sys
import time

import numpy as np

from nplmtk.corpus import Corpus
from nplmtk.vocab import Vocabulary, count_words
from runs import MLP9, QUALITY_RUNS, RUNS, RUNS_DIR, SAMPLING_RUNS, VOCAB_MIN_COUNT

NPLM = os.path.join(os.path.dirname(sys.executable), "nplm")
OUT = os.path.join("bench", "out")
# the thread counts of the BLAS (and OpenMP) libraries, set for runs that must not use more
BLAS_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


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
    vocab = Vocabulary.from_counts(count_words([train]), min_count=VOCAB_MIN_COUNT)
    corpus = Corpus.read(train, vocab)
    encode = median_seconds(lambda: Corpus.read(train, vocab))
    windows = median_seconds(lambda: corpus.windows(5))
    build, peak_mb = timed_command([NPLM, "vocab", "-text", train, "-min-count", str(VOCAB_MIN_COUNT),
                                    "-write-vocab", "/dev/null"])
    return ["## Vocabulary and corpus encoding (issue 2)", "",
            "| step | data | median | target |", "| --- | --- | --- | --- |",
            f"| `Corpus.read` (text to int32 ids + offsets) | Brown train, {corpus.num_words:,} words | "
            f"{encode:.3f} s ({corpus.num_words / encode / 1e6:.2f} M words/s) | < 1 s |",
            f"| `Corpus.windows(5)` (Cython, OpenMP) | {corpus.num_words + corpus.num_sentences:,} windows | "
            f"{windows * 1000:.1f} ms | |",
            f"| `nplm vocab -text train.txt -min-count {VOCAB_MIN_COUNT} -write-vocab /dev/null` (whole command) "
            f"| Brown train | {build:.2f} s, peak RSS {peak_mb:.0f} MB | |",
            "", f"Vocabulary with `-min-count {VOCAB_MIN_COUNT}`: {len(vocab):,} entries."]


def _vocabulary(brown):
    """bench/out/vocab.txt, the runs' vocabulary of Brown train, written afresh."""
    os.makedirs(OUT, exist_ok=True)
    vocab = os.path.join(OUT, "vocab.txt")
    subprocess.run([NPLM, "vocab", "-text", os.path.join(brown, "train.txt"), "-min-count", str(VOCAB_MIN_COUNT),
                    "-write-vocab", vocab], check=True)
    return vocab


def unkword_text(brown, split, vocab):
    """bench/out/SPLIT.unkword.txt: Brown's `split` with the words outside `vocab` spelt
    UNKWORD (KenLM's lmplz refuses `<unk>` in text; `-vocab V -unk` reads UNKWORD as <unk>)."""
    path = os.path.join(OUT, f"{split}.unkword.txt")
    words = set(open(vocab).read().split())
    with open(os.path.join(brown, f"{split}.txt")) as src, open(path, "w") as dst:
        for line in src:
            dst.write(" ".join(w if w in words else "UNKWORD" for w in line.split()) + "\n")
    return path


def _vocab_size(vocab):
    """|V| of the models trained with the vocabulary file `vocab`."""
    return len(Vocabulary.read(vocab))


def _ppl(model, text, *options):
    out = subprocess.run([NPLM, "ppl", "-lm", model, "-text", text, *options], check=True, capture_output=True,
                         text=True).stdout
    return float(out.split("ppl= ")[1].split()[0])


def ngram_models(brown, peak):
    """Issue 3: KN orders 2-5 and the deleted-interpolation trigram on Brown, speed and
    memory of KN5 on Brown and on Brown x 20, and the reference tools when present."""
    train, valid, test = (os.path.join(brown, f"{s}.txt") for s in ("train", "valid", "test"))
    vocab = _vocabulary(brown)
    common = ["-vocab", vocab, "-unk"]
    rows = []
    for order in (2, 3, 4, 5):
        model = os.path.join(OUT, f"kn{order}.arpa")
        subprocess.run([NPLM, "ngram-count", "-text", train, "-order", str(order), *common, "-lm", model], check=True)
        rows.append((f"KN{order} (interpolated modified Kneser-Ney)",
                     f"`nplm ngram-count -text train.txt -order {order} -vocab vocab.txt -unk -lm kn{order}.arpa`",
                     _ppl(model, valid), _ppl(model, test)))
    model = os.path.join(OUT, "kn5-always.arpa")
    subprocess.run([NPLM, "ngram-count", "-text", train, "-order", "5", *common, "-always-interpolate",
                    "-lm", model], check=True)
    rows.append(("KN5 `-always-interpolate` (KenLM's estimate)", "as KN5, plus `-always-interpolate`",
                 _ppl(model, valid), _ppl(model, test)))
    model = os.path.join(OUT, "di3.nplm")
    subprocess.run([NPLM, "ngram-count", "-text", train, "-order", "3", *common, "-deleted-interpolation",
                    "-heldout", valid, "-lm", model], check=True, stderr=subprocess.DEVNULL)
    rows.append(("deleted-interpolation trigram (Bengio et al. sec. 4.1)",
                 "`nplm ngram-count ... -order 3 -deleted-interpolation -heldout valid.txt -lm di3.nplm`",
                 _ppl(model, valid), _ppl(model, test)))
    lines = ["## N-gram models on Brown (issue 3)", "",
             f"Vocabulary `nplm vocab -text train.txt -min-count {VOCAB_MIN_COUNT}` ({_vocab_size(vocab):,} "
             "entries), `-unk`; ppl as "
             "`nplm ppl -lm MODEL -text FILE` reports it (SRILM's ppl: words + `</s>`, no OOVs with `-unk`). "
             "The deleted-interpolation weights are fitted on valid, so its valid ppl is not held out.", "",
             "| model | command | valid ppl | test ppl |", "| --- | --- | --- | --- |"]
    lines += [f"| {name} | {command} | {v:.2f} | {t:.2f} |" for name, command, v, t in rows]

    big = os.path.join(OUT, "brown-x20.txt")
    with open(big, "w") as f:
        text = open(train).read()
        for _ in range(20):
            f.write(text)
    kn5 = [NPLM, "ngram-count", "-text", train, "-order", "5", *common, "-lm", os.path.join(OUT, "t.arpa")]
    kn5_big = [NPLM, "ngram-count", "-text", big, "-order", "5", *common, "-lm", os.path.join(OUT, "t.arpa")]
    small_time, small_mem = timed_command(kn5)
    big_time, big_mem = timed_command(kn5_big)
    lines += ["", "| job | data | median wall (3 runs) | peak RSS | target |", "| --- | --- | --- | --- | --- |",
              f"| `nplm ngram-count -order 5 ... -lm` (KN5, count + estimate + ARPA) | Brown train, 800k words "
              f"| {small_time:.2f} s | {small_mem:.0f} MB | < 5 s |",
              f"| same | Brown train x 20, 16.0M words (order-5 counts-of-counts degenerate: fallback "
              f"discounts 0.5/1/1.5) | {big_time:.2f} s | {big_mem:.0f} MB | < 30 s, < 2 GB |"]
    srilm = os.environ.get("SRILM_BIN")
    kenlm = os.environ.get("KENLM_BIN")
    if srilm or kenlm:
        lines += ["", "Reference tools built locally from their public sources, same machine, same run:", "",
                  "| tool | KN5 build wall (median of 3) | test ppl |", "| --- | --- | --- |"]
    if srilm:
        arpa = os.path.join(OUT, "srilm5.arpa")
        seconds, _ = timed_command([os.path.join(srilm, "ngram-count"), "-text", train, "-order", "5",
                                    "-vocab", vocab, "-unk", "-kndiscount", "-interpolate", "-gt3min", "1",
                                    "-gt4min", "1", "-gt5min", "1", "-lm", arpa])
        report = subprocess.run([os.path.join(srilm, "ngram"), "-lm", arpa, "-order", "5", "-unk", "-ppl", test],
                                capture_output=True, text=True).stdout
        ours = subprocess.run([NPLM, "ppl", "-lm", os.path.join(OUT, "kn5.arpa"), "-text", test],
                              capture_output=True, text=True).stdout
        lines.append(f"| SRILM 1.7.3 `ngram-count -kndiscount -interpolate -gt3min 1 -gt4min 1 -gt5min 1` "
                     f"| {seconds:.2f} s | {float(report.split('ppl= ')[1].split()[0]):.4f} "
                     f"(report {'identical to' if report == ours else 'DIFFERENT from'} `nplm ppl`'s) |")
    if kenlm:
        arpa = os.path.join(OUT, "kenlm5.arpa")
        mapped = {s: unkword_text(brown, s, vocab) for s in ("train", "test")}
        with open(mapped["train"]) as src:
            seconds = statistics.median(_timed_stdin([os.path.join(kenlm, "lmplz"), "-o", "5", "-S", "2G",
                                                       "-T", OUT], src, arpa) for _ in range(3))
        query = subprocess.run([os.path.join(kenlm, "query"), "-v", "summary", arpa], stdin=open(mapped["test"]),
                               capture_output=True, text=True).stdout
        kenlm_ppl = float(query.split("Perplexity including OOVs:")[1].split()[0])
        ours = os.path.join(OUT, "kn5-unkword.arpa")
        subprocess.run([NPLM, "ngram-count", "-text", mapped["train"], "-order", "5", "-always-interpolate",
                        "-lm", ours], check=True)
        lines.append(f"| KenLM lmplz `-o 5` (rare words spelt UNKWORD: lmplz refuses `<unk>` in text) "
                     f"| {seconds:.2f} s | {kenlm_ppl:.4f}; `nplm ngram-count -always-interpolate` on the same "
                     f"text: {_ppl(ours, mapped['test']):.4f} |")
    return lines


def _timed_stdin(args, stdin, output):
    stdin.seek(0)
    start = time.perf_counter()
    with open(output, "w") as out:
        subprocess.run(args, stdin=stdin, stdout=out, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - start


def _train_words_per_second(text, vocab, run, batch, threads, extra=()):
    """Words/s of one epoch of `run`'s network at `batch` with `threads` (other options:
    `extra`, else train-nplm's defaults)."""
    return _train_record(text, vocab, run, batch, threads, extra)["words_per_s"]


def _train_record(text, vocab, run, batch, threads, extra=(), env=None):
    """The log record of one epoch of `run`'s network at `batch` with `threads` (other
    options: `extra`, else train-nplm's defaults; the environment `env`, else this one's)."""
    log = os.path.join(OUT, "train.log")
    subprocess.run([NPLM, "train-nplm", "-text", text, "-vocab", vocab, *run.shape_options(), "-epochs", "1",
                    "-batch", str(batch), "-threads", str(threads), "-quiet", *extra,
                    "-lm", os.path.join(OUT, f"{run.name}.nplm"), "-log", log], check=True, env=env)
    return json.loads(open(log).readline())


def _peak_training_memory(train, vocab, run, seconds=25):
    """VmHWM of `run` on all of `train`, sampled after `seconds` of its first epoch."""
    proc = subprocess.Popen([NPLM, "train-nplm", "-text", train, "-vocab", vocab, *run.shape_options(),
                             "-epochs", "1", "-batch", str(run.batch), "-threads", str(run.threads), "-quiet",
                             "-lm", os.path.join(OUT, "unused.nplm")])
    return peak_after(proc, seconds)


def peak_after(proc, seconds):
    """The peak RSS (VmHWM, MB) of the running `proc` after `seconds`; then it is killed."""
    time.sleep(seconds)
    peak = 0
    with open(f"/proc/{proc.pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                peak = int(line.split()[1]) / 1024
    proc.kill()
    proc.wait()
    return peak


def _training_texts(brown):
    """The vocabulary and the Brown-train prefixes the speed sections train on."""
    train = os.path.join(brown, "train.txt")
    vocab = _vocabulary(brown)
    lines = open(train).read().splitlines(keepends=True)
    texts = {}
    for name, count in (("short", 400), ("long", 1500)):
        texts[name] = os.path.join(OUT, f"train-{name}.txt")
        with open(texts[name], "w") as f:
            f.writelines(lines[:count])
    return train, vocab, texts


def _shared_flop_per_word(run):
    """FLOP per training word below the output layer (no direct connections): 6(n-1)mh."""
    return 6 * (run.order - 1) * run.features * run.hidden


def _flop_per_word(run, vocab_size):
    """FLOP per training word, forward and backward, full softmax: 6|V|h + 6(n-1)mh."""
    return 6 * vocab_size * run.hidden + _shared_flop_per_word(run)


def mlp_training_speed(brown, peak):
    """Issue 4: MLP9 training speed at batch 1, 32, 256 with 1 and 2 threads."""
    train, vocab, texts = _training_texts(brown)
    size = _vocab_size(vocab)
    flop_per_word = _flop_per_word(MLP9, size)
    table = ["## MLP9 training speed (issue 4)", "",
             f"Bengio et al.'s MLP9 ({MLP9.architecture} connections), full softmax over |V| = {size:,}, "
             f"plain SGD (`-lr 1e-3`, weight decay 1e-4); `nplm train-nplm {' '.join(MLP9.shape_options())} -epochs 1 "
             "-batch K -threads T`, words/s from the epoch log, median of 5 runs with 1 and 2 threads alternating "
             "(the ratio is the median of the 5 side-by-side ratios), on the first 400 (batch 1, 9.1k words) "
             "or 1,500 (batch 32, 256) sentences of Brown train. FLOP per word = 6|V|h + 6(n-1)mh = "
             f"{flop_per_word / 1e6:.2f} M; the fraction is of the numpy sgemm peak above ({peak:.1f} GFLOP/s). "
             "Each thread runs a single-threaded BLAS, so T threads use T cores. At batch 1 the threads share "
             "each window, each on 1/T of the output rows; at batch 32 and 256 they are lock-free workers, each "
             "on its own batches.", "",
             "| batch | threads | words/s | GFLOP/s | of sgemm peak | 2 threads / 1 |",
             "| --- | --- | --- | --- | --- | --- |"]
    speeds, ratios = {}, {}
    for batch in (1, 32, 256):
        text = texts["short"] if batch == 1 else texts["long"]
        runs = [(_train_words_per_second(text, vocab, MLP9, batch, 1),
                 _train_words_per_second(text, vocab, MLP9, batch, 2)) for _ in range(5)]
        ratios[batch] = statistics.median(two / one for one, two in runs)
        for threads in (1, 2):
            speeds[batch, threads] = statistics.median(r[threads - 1] for r in runs)
            rate = speeds[batch, threads] * flop_per_word / 1e9
            table.append(f"| {batch} | {threads} | {speeds[batch, threads]:,.0f} | {rate:.1f} | {rate / peak:.0%} | "
                         + (f"{ratios[batch]:.2f}x |" if threads == 2 else " |"))
    table += ["", f"2 threads against 1 at batch 1: {ratios[1]:.2f}x (target 1.7x); at batch 256: "
              f"{ratios[256]:.2f}x.",
              f"Peak memory of MLP9 training on all of Brown train (batch {MLP9.batch}, {MLP9.threads} threads; "
              f"VmHWM after 25 s of the first epoch): {_peak_training_memory(train, vocab, MLP9):.0f} MB "
              "(target < 1 GB)."]
    return table


MPIEXEC = os.path.join(os.path.dirname(sys.executable), "mpiexec")
NETWORKS = {  # name: (latency alpha in s, bandwidth in bytes/s) of one MPI message
    "10 GbE (TCP)": (50e-6, 1.1e9),
    "InfiniBand EDR": (1.5e-6, 12e9),
}


def _mpi_run(ranks, text, vocab, run, batch):
    log = os.path.join(OUT, f"mpi-{ranks}.log")
    subprocess.run([MPIEXEC, "-n", str(ranks), NPLM, "train-nplm", "-mpi", "param", "-text", text, "-vocab", vocab,
                    *run.shape_options(), "-epochs", "1", "-batch", str(batch), "-threads", "1",
                    "-quiet", "-lm", os.path.join(OUT, "mpi.nplm"), "-log", log], check=True)
    return json.loads(open(log).readline())


def _allreduce_seconds(size, ranks, alpha, bandwidth):
    """Rabenseifner/recursive-doubling model: 2 log2(R) latencies + 2 (R-1)/R of the data."""
    return 2 * math.ceil(math.log2(ranks)) * alpha + 2 * (ranks - 1) / ranks * size / bandwidth


def mpi_scaling(brown, peak):
    """Issue 7: -mpi param with 1 and 2 ranks on this machine, and a model of larger runs."""
    _, vocab, texts = _training_texts(brown)
    flop_per_word = _flop_per_word(MLP9, _vocab_size(vocab))
    width = MLP9.hidden + (MLP9.order - 1) * MLP9.features  # of dL/da and dL/dx, the shared layers' input
    shared_share = _shared_flop_per_word(MLP9) / flop_per_word
    table = ["## MPI: the parameter-parallel output layer (issue 7)", "",
             f"`mpiexec -n R nplm train-nplm -mpi param {' '.join(MLP9.shape_options())} -epochs 1 -batch K "
             "-threads 1` (MLP9, "
             "full softmax, one BLAS thread per rank, mpich from PyPI over shared memory), on the first 400 (K=1) or "
             "1,500 sentences of Brown train; words/s and the time inside Allreduce from the epoch log, median of 3 "
             "runs alternating R=1 and R=2. Rank i owns output rows from i*ceil(|V|/R); per batch three "
             f"Allreduces: the maxima (4 bytes per example), the normalisers and target scores (16), dL/da and "
             f"dL/dx ({4 * width}): {20 + 4 * width} bytes per example and rank.", "",
             "| batch K | R=1 words/s | R=2 words/s | R=2 / R=1 | R=2 time in Allreduce | R=1 GFLOP/s (of peak) |",
             "| --- | --- | --- | --- | --- | --- |"]
    per_example = {}
    for batch in (1, 32, 256):
        text = texts["short"] if batch == 1 else texts["long"]
        runs = [(_mpi_run(1, text, vocab, MLP9, batch), _mpi_run(2, text, vocab, MLP9, batch)) for _ in range(3)]
        one = statistics.median(r[0]["words_per_s"] for r in runs)
        two = statistics.median(r[1]["words_per_s"] for r in runs)
        ratio = statistics.median(r[1]["words_per_s"] / r[0]["words_per_s"] for r in runs)
        share = statistics.median(r[1]["communication_seconds"] / r[1]["seconds"] for r in runs)
        per_example[batch] = 1 / one
        rate = one * flop_per_word / 1e9
        table.append(f"| {batch} | {one:,.0f} | {two:,.0f} | {ratio:.2f}x | {share:.1%} | {rate:.1f} ({rate / peak:.0%}) |")
    table += ["", "Target: R=2 at least 1.7x R=1 at K >= 32.", "",
              "Modelled scaling for R = 4 ... 64 ranks (one core each): per example, the measured R=1 compute time "
              f"split by FLOPs into the shared layers ({shared_share:.1%}, every rank) and the output layer (divided "
              "by R), plus per batch three Allreduces costed as 2 log2(R) alpha + 2 (R-1)/R bytes / bandwidth "
              + ", ".join(f"({name}: alpha = {a * 1e6:g} us, {b / 1e9:g} GB/s)" for name, (a, b) in NETWORKS.items())
              + ". Speed-up over one rank, and the share of time communicating:", "",
              "| network | batch K | " + " | ".join(f"R={r}" for r in (4, 8, 16, 32, 64)) + " |",
              "| --- | --- | " + " | ".join("---" for _ in range(5)) + " |"]
    for name, (alpha, bandwidth) in NETWORKS.items():
        for batch in (1, 32, 256):
            t1 = per_example[batch]
            cells = []
            for ranks in (4, 8, 16, 32, 64):
                compute = t1 * shared_share + t1 * (1 - shared_share) / ranks
                communicate = (_allreduce_seconds(4 * batch, ranks, alpha, bandwidth)
                               + _allreduce_seconds(16 * batch, ranks, alpha, bandwidth)
                               + _allreduce_seconds(4 * width * batch, ranks, alpha, bandwidth)) / batch
                cells.append(f"{t1 / (compute + communicate):.1f}x ({communicate / (compute + communicate):.0%})")
            table.append(f"| {name} | {batch} | " + " | ".join(cells) + " |")
    table += ["", "The paper (sec. 3.2) measured communication at about 1/15 of the time on its 40-CPU cluster."]
    return table


def mlp_quality(brown, peak):
    """Issue 4: test ppl of MLP9 and MLP1 (trained by `make brown-mlp9`, `make brown-mlp1`)
    beside KN5."""
    lines = ["## MLP9 and MLP1 quality on Brown (issue 4)", ""]
    test, valid = os.path.join(brown, "test.txt"), os.path.join(brown, "valid.txt")
    kn5 = os.path.join(OUT, "kn5.arpa")
    kn5_test = _ppl(kn5, test) if os.path.exists(kn5) else float("nan")
    for run in QUALITY_RUNS:
        name, log, model, paper = run.name, run.log_path, run.model_path, run.paper_test_ppl
        lines += [f"### {name.upper()} ({run.architecture})", ""]
        if not (os.path.exists(log) and os.path.exists(model)):
            lines += [f"Not measured in this run: `make {run.make_target}` trains it.", ""]
            continue
        records = [json.loads(line) for line in open(log)]
        best = min(records, key=lambda r: r["valid_ppl"])
        mlp_test, mlp_valid = _ppl(model, test), _ppl(model, valid)
        lines += [f"Trained by `make {run.make_target}`: `nplm train-nplm -text train.txt -valid valid.txt -vocab "
                  f"vocab.txt {' '.join(run.options())}` (weight decay 1e-4, r = 1e-8), early stopping on valid; "
                  f"scored with `nplm ppl -lm {model} -text FILE`.", "",
                  "| epoch | train ppl | valid ppl | words/s |", "| --- | --- | --- | --- |"]
        lines += [f"| {r['epoch']} | {r['train_ppl']:.1f} | {r['valid_ppl']:.2f} | {r['words_per_s']:,.0f} |"
                  for r in records]
        lines += ["", f"Kept: epoch {best['epoch']}. Valid ppl {mlp_valid:.2f}; **test ppl {mlp_test:.2f}** against "
                  f"KN5's {kn5_test:.2f}: {1 - mlp_test / kn5_test:.1%} lower (target 10%, aim 15%; the paper: "
                  f"{paper} against 321, {1 - paper / 321:.0%})."]
        if best is records[-1] and len(records) < run.epochs:
            lines += [f"The run was stopped after epoch {best['epoch']} (a session's time limit) while its valid ppl "
                      "still fell: early stopping had not ended it, and more epochs would likely lower it further."]
        lines += ["Words/s are from the training log of a long run that shared the machine with other work at "
                  "times; the speed section above measures speed."]
        lines += [""]
    return lines[:-1]


def _scored(model, path, vocab=None):
    """Natural-log scores of a text's tokens (as `nplm ppl` reads it) and its corpus."""
    from nplmtk.ppl import read_scored_text
    raw, corpus = read_scored_text(path, vocab or model.vocab)
    return model.logprobs(corpus), raw, corpus


def mixtures(brown, peak):
    """Issue 6: each MLP mixed with the deleted-interpolation trigram and with KN5."""
    from nplmtk.lm import LN10
    from nplmtk.models import load
    from nplmtk.mixture import Mixture, fit_weights
    from nplmtk.ppl import report
    train, valid, test = (os.path.join(brown, f"{s}.txt") for s in ("train", "valid", "test"))
    lines = ["## Mixtures on Brown (issue 6)", "",
             "As `nplm mix -lm NGRAM -lm MLP -text valid.txt [-lambda 0.5 | -bins 6 -bin-text train.txt] "
             "-write M.mix` then `nplm ppl -lm M.mix -text test.txt` compute them (EM on valid, test held out), "
             "through the same library calls with each model's scores computed once. N-gram models from the "
             f"n-gram section ({OUT}), networks from {' / '.join(f'`make {r.make_target}`' for r in QUALITY_RUNS)} "
             f"({RUNS_DIR}/). Per-bin "
             "weights: the deleted-interpolation bins of the two-word context's training frequency, grouped into "
             "at most 6 bins of equal valid mass.", "",
             "| network | n-gram | network test ppl | n-gram test ppl | 0.5 / 0.5 | EM weights (network's) | "
             "per-bin EM | beats both |", "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    ngrams = {"DI3": os.path.join(OUT, "di3.nplm"), "KN5": os.path.join(OUT, "kn5.arpa")}
    missing = [p for p in ngrams.values() if not os.path.exists(p)]
    if missing:
        return lines[:2] + [f"Not measured in this run: {', '.join(missing)} missing (run the ngram section)."]
    ngram_models = {name: load(path) for name, path in ngrams.items()}
    ngram_scores = {(name, text): _scored(model, text) for name, model in ngram_models.items()
                    for text in (valid, test)}
    measured = False
    for run in QUALITY_RUNS:
        name, path = run.name, run.model_path
        if not os.path.exists(path):
            continue
        measured = True
        network = load(path)
        network_scores = {text: _scored(network, text)[0] for text in (valid, test)}
        for ngram_name, ngram in ngram_models.items():
            mixture = Mixture([ngram, network], [0.5, 0.5], [ngrams[ngram_name], path])
            logp = {text: np.array([ngram_scores[ngram_name, text][0], network_scores[text]])
                    for text in (valid, test)}
            _, raw_test, test_corpus = ngram_scores[ngram_name, test]

            def test_ppl(weights):
                mixture.weights = weights
                log10 = mixture.log10probs_from(logp[test], test_corpus)
                return report(mixture, raw_test, test_corpus, log10, write=lambda line: None).ppl

            def alone(row):
                return report(mixture, raw_test, test_corpus, logp[test][row] / LN10, write=lambda line: None).ppl

            half = test_ppl(np.array([[0.5, 0.5]]))
            em, _ = fit_weights(logp[valid], np.zeros(logp[valid].shape[1], dtype=np.int64), 1)
            em_ppl = test_ppl(em)
            valid_corpus = ngram_scores[ngram_name, valid][2]
            mixture.use_bins(Corpus.read(train, mixture.vocab), valid_corpus, 6)
            binned, _ = fit_weights(logp[valid], mixture.token_bins(valid_corpus), mixture.num_bins)
            binned_ppl = test_ppl(binned)
            mixture.bins = None
            network_ppl, ngram_ppl = alone(1), alone(0)
            beats = max(half, em_ppl, binned_ppl) < min(network_ppl, ngram_ppl)
            lines.append(f"| {name.upper()} | {ngram_name} | {network_ppl:.2f} | {ngram_ppl:.2f} | {half:.2f} | "
                         f"{em_ppl:.2f} ({em[0, 1]:.3f}) | {binned_ppl:.2f} | {'yes' if beats else 'NO'} |")
    if not measured:
        return lines[:2] + [f"Not measured in this run: no trained network in {RUNS_DIR}/ "
                            f"(`make {MLP9.make_target}`)."]
    lines += ["", f"The paper (Table 1, Brown test): MLP9 alone {MLP9.paper_test_ppl}, the deleted-interpolation "
              "trigram 336, their 50/50 mixture (MLP10) 252."]
    return lines


EXACT, ALGORITHM_4 = RUNS["is-full"], RUNS["is-adaptive"]  # the paper's pair, N0 = 100


def importance_sampling(brown, peak):
    """Issue 5: the exact gradient against is-adaptive, same epochs (`make brown-is`), and
    the two training steps side by side on a prefix of Brown train."""
    lines = ["## Importance sampling on Brown (issue 5)", ""]
    runs = [run for run in SAMPLING_RUNS if os.path.exists(run.log_path) and os.path.exists(run.model_path)]
    if EXACT not in runs or ALGORITHM_4 not in runs:
        return lines + [f"Not measured in this run: `make {EXACT.make_target}` trains the models (about 45 minutes, "
                        "one core)."]
    test = os.path.join(brown, "test.txt")
    logs = {run: [json.loads(line) for line in open(run.log_path)] for run in runs}
    seconds = {run: sum(r["seconds"] for r in records) for run, records in logs.items()}
    ppl = {run: _ppl(run.model_path, test) for run in runs}
    common = EXACT.shape_options() + EXACT.training_options()
    n0 = ALGORITHM_4.samples
    lines += [f"`make {EXACT.make_target}`: `nplm train-nplm {' '.join(common)} OPTIONS` on Brown "
              f"train, one thread (one core), no validation set (Bengio & Senecal's setting: {EXACT.order - 1} words "
              f"of context, plain per-example SGD, a fixed number of epochs, unigram proposal, N0 = {n0}, the tiny "
              "set 1,000 training examples checked every 200,000), run one after another; test ppl from `nplm ppl "
              "-lm MODEL -text test.txt`. Training seconds are the epochs' wall-clock time (tiny-set checks and "
              "blocks trained again included).", "",
              "| OPTIONS | training seconds | words/s (mean) | N at the end | mean ESS, last epoch | test ppl | "
              "speed-up | test ppl against exact |", "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for run in runs:
        words = sum(r["seconds"] * r["words_per_s"] for r in logs[run])
        last = logs[run][-1]
        ess = f"{last['mean_ess']:.1f}" if "mean_ess" in last else ""
        lines.append(f"| `{' '.join(run.criterion_options())}` | {seconds[run]:,.0f} | {words / seconds[run]:,.0f} | "
                     f"{last.get('samples', 'all words')} | {ess} | {ppl[run]:.2f} | "
                     f"{seconds[EXACT] / seconds[run]:.1f}x | {ppl[run] / ppl[EXACT] - 1:+.2%} |")
    lines += ["", f"Algorithm 4 as in the paper (N0 = {n0}): speed-up "
              f"**{seconds[EXACT] / seconds[ALGORITHM_4]:.1f}x** (target 15x, aim 25x; the paper 15x), test ppl "
              f"{ppl[ALGORITHM_4] / ppl[EXACT] - 1:+.2%} against the exact gradient (target within 2%).", ""]
    _, vocab, texts = _training_texts(brown)
    lines += sampled_step_side_by_side(EXACT, ALGORITHM_4, logs[ALGORITHM_4][-1]["samples"], vocab, texts["long"],
                                       "1,500")[0]
    lines += [""] + samples_trajectory(ALGORITHM_4, logs[ALGORITHM_4])
    return lines


def sampled_step_side_by_side(exact, algorithm_4, final_samples, vocab, text, sentences, rounds=3):
    """Words/s of `exact`'s step and of the sampled step (N0 and the run's last N) in
    alternating one-epoch runs on `text` (the first `sentences` of Brown train): the lines
    of a table, and each step's median words/s and median ratio to the exact one."""
    sample_sizes = sorted({algorithm_4.samples, final_samples})
    settings = [("full", ("-criterion", "full"))] + [
        (f"is, N = {n}", ("-criterion", "is", "-samples", str(n))) for n in sample_sizes]
    runs = [[_train_words_per_second(text, vocab, exact, exact.batch, 1, extra) for _, extra in settings]
            for _ in range(rounds)]
    lines = [f"Side by side (same shape, batch {exact.batch}, one thread; {rounds} alternating runs of one epoch over "
             f"the first {sentences} sentences of Brown train; median words/s, and the median of the per-run ratios "
             "to the exact step):", "", "| step | words/s | against exact |", "| --- | --- | --- |"]
    speeds, ratios = {}, {}
    for k, (name, _) in enumerate(settings):
        speeds[name] = statistics.median(run[k] for run in runs)
        ratios[name] = statistics.median(run[k] / run[0] for run in runs)
        lines.append(f"| {name} | {speeds[name]:,.0f} | {ratios[name]:.1f}x |")
    return lines, speeds, ratios


def samples_trajectory(run, records):
    """The table of N under Algorithm 4 through `run`'s training, from its log `records`."""
    lines = [f"Trajectory of N under Algorithm 4, N0 = {run.samples} (plot-ready; the same events, with every field, "
             f"are the `samples_trajectory` of each epoch's record in `{run.log_path}`): examples seen, "
             "wall-clock seconds since training began, N from then on, the tiny set's exact ppl, what happened.",
             "", "| examples | seconds | N | tiny-set ppl | event |", "| --- | --- | --- | --- | --- |"]
    for record in records:
        for event in record["samples_trajectory"]:
            lines.append(f"| {event['examples']:,} | {event.get('seconds', float('nan')):.1f} | {event['samples']} | "
                         f"{event.get('tiny_ppl', float('nan')):.2f} | {event['reason']} |")
    return lines


SECTIONS = [("corpus", corpus_encoding), ("ngram", ngram_models), ("mlp", mlp_training_speed),
            ("mpi", mpi_scaling), ("quality", mlp_quality), ("mixtures", mixtures),
            ("importance-sampling", importance_sampling)]
