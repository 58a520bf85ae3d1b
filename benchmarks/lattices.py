"""`make brown-lattices`: lattice decoding on Brown (issue 37), written to BENCHMARKS.md.

Lattices for the first N sentences of Brown test by benchmarks/make_lattices.py's noise
process (nplmtk/lattice/noise.py, seeded); KN3 and KN5 of Brown train; the 1-best of each
lattice by `nplm lattice-tool -viterbi-decode` without a language model (the lattice's
acoustic scores alone), with KN3 and with KN5, and SRILM's lattice-tool on the same
commands when present (--lattice-tool, or $SRILM_BIN/lattice-tool), their outputs
compared byte for byte and both timed (the whole process, median of --repeats runs); the
word error rate of each 1-best against the true sentences, and of the N-best oracle (the
best of KN5's -nbest-decode 100 hypotheses of each lattice); the lattices expanded to KN3
and KN5 (-lm with -write-htk, nplm's and lattice-tool's, timed, their links compared) and
decoded again without a model (the same 1-best as decoding with the model); the LSTM of
`make brown-lstm` (runs/lstm-class.nplm, trained first when missing) in the decoder by
the n-gram history approximation of orders 3 to 6 (-approx-order); then KN5's 100-best
lists rescored exactly by `nplm rescore -nbest-files` (lmscale 8, word penalty 0, the
lattices' scales) with KN5 itself (a check of the scales: it must give KN5's 1-best), with
the same LSTM and with the LSTM and KN5 mixed 0.5/0.5 (`nplm mix -lambda 0.5`).
"""
import argparse
import gzip
import os
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from run import machine_stamp, write_sections  # noqa: E402
from runs import RUNS, VOCAB_MIN_COUNT, model_or_trained  # noqa: E402

from nplmtk.lattice.htk import read_htk  # noqa: E402
from nplmtk.lattice.wer import word_error_rate, word_errors  # noqa: E402

HEADING = "## Lattice decoding on Brown (issue 37)"
NBEST = 100
LMSCALE, WDPENALTY = 8, 0  # the lattices' scales (nplmtk/lattice/noise.py)
LSTM = RUNS["lstm-class"]
APPROX_ORDERS = (3, 4, 5, 6)


def timed(args, repeats):
    """Median wall seconds of `args` over `repeats` runs, and its stdout (the last run's)."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        out = subprocess.run(args, check=True, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL).stdout
        times.append(time.perf_counter() - start)
    return statistics.median(times), out


def timed_expansion(args, out_dir, repeats):
    """As `timed`, the output folder removed before each run (lattice-tool refuses one
    that exists)."""
    times = []
    for _ in range(repeats):
        if os.path.exists(out_dir):
            shutil.rmtree(out_dir)
        start = time.perf_counter()
        subprocess.run(args, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def links(path):
    """A written lattice's links as (start time, end time, word, scores), counted: the
    lattice up to the numbering of its nodes."""
    lattice = read_htk(path)
    times = {node.number: node.time for node in lattice.nodes}
    return sorted((times[l.start], times[l.end], l.word or "", sorted(l.scores.items())) for l in lattice.links)


def one_best(stdout):
    """{lattice name: words} from lattice-tool's -viterbi-decode lines (NAME <s> ... </s>)."""
    best = {}
    for line in stdout.decode("utf-8").splitlines():
        name, *words = line.split()
        best[name] = [w for w in words if w not in ("<s>", "</s>")]
    return best


def nbest_files(directory, names):
    """{lattice name: [hypothesis words]} from -out-nbest-dir's NAME.gz files."""
    lists = {}
    for name in names:
        with gzip.open(os.path.join(directory, name + ".gz"), "rt", encoding="utf-8") as f:
            lists[name] = [[w for w in line.split()[3:] if w not in ("<s>", "</s>")] for line in f if line.strip()]
    return lists


def compare_nbest(ours, theirs, names):
    """(files identical byte for byte, files holding the same lines in another order)."""
    identical = reordered = 0
    for name in names:
        with gzip.open(os.path.join(ours, name + ".gz"), "rb") as a, \
                gzip.open(os.path.join(theirs, name + ".gz"), "rb") as b:
            x, y = a.read(), b.read()
        identical += x == y
        reordered += x != y and sorted(x.splitlines()) == sorted(y.splitlines())
    return identical, reordered


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--brown", default="../shared/data/brown")
    parser.add_argument("--nplm", default=os.path.join(os.path.dirname(sys.executable), "nplm"))
    parser.add_argument("--lattice-tool", default=None,
                        help="SRILM's lattice-tool (default: $SRILM_BIN/lattice-tool; skipped when absent)")
    parser.add_argument("--first", type=int, default=500, help="lattices for the first N sentences of Brown test")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3, help="timed runs of each decoding (the median)")
    parser.add_argument("--rescore-repeats", type=int, default=1,
                        help="timed runs of each N-best rescoring and of each decoding with the LSTM")
    parser.add_argument("--lstm", default=LSTM.model_path,
                        help="the LSTM (default: make brown-lstm's -output class one, trained when missing)")
    parser.add_argument("--work", default=os.path.join("bench", "out", "lattices"))
    parser.add_argument("--out", default="BENCHMARKS.md")
    args = parser.parse_args()
    tool = args.lattice_tool or (os.path.join(os.environ["SRILM_BIN"], "lattice-tool")
                                 if os.environ.get("SRILM_BIN") else None)
    if tool and not os.path.exists(tool):
        print(f"lattices: {tool}: no such file, SRILM's lattice-tool skipped", file=sys.stderr)
        tool = None
    train, test = os.path.join(args.brown, "train.txt"), os.path.join(args.brown, "test.txt")
    work = args.work
    if os.path.exists(work):
        shutil.rmtree(work)
    os.makedirs(work)

    start = time.perf_counter()
    subprocess.run([sys.executable, os.path.join(HERE, "make_lattices.py"), train, test, os.path.join(work, "lat"),
                    "-first", str(args.first), "-seed", str(args.seed)], check=True)
    making = time.perf_counter() - start
    lattice_list = os.path.join(work, "lat", "list")
    count = sum(1 for line in open(lattice_list) if line.strip())
    names = [os.path.basename(line.strip())[:-len(".lat.gz")] for line in open(lattice_list) if line.strip()]
    with open(test, encoding="utf-8") as f:
        sentences = [line.split() for line in f][:args.first]
    references = {f"sent{k:05d}": words for k, words in enumerate(sentences) if words}

    vocab = os.path.join(work, "vocab.txt")
    subprocess.run([args.nplm, "vocab", "-text", train, "-min-count", str(VOCAB_MIN_COUNT), "-write-vocab", vocab],
                   check=True)
    known = set(open(vocab, encoding="utf-8").read().split())
    models = {}
    for order in (3, 5):
        models[order] = os.path.join(work, f"kn{order}.arpa")
        subprocess.run([args.nplm, "ngram-count", "-text", train, "-order", str(order), "-vocab", vocab, "-unk",
                        "-kndiscount", "-interpolate", "-lm", models[order]], check=True)

    def mapped(words):
        # as the decoders read the lattices with -unk: a word outside the vocabulary is <unk>
        return [w if w in known else "<unk>" for w in words]

    refs = [mapped(references[name]) for name in names]
    oov = sum(w == "<unk>" for r in refs for w in r) / sum(len(r) for r in refs)
    read = ["lattice-tool", "-read-htk", "-in-lattice-list", lattice_list]
    first_list = os.path.join(work, "first")
    with open(first_list, "w") as f:
        f.write(open(lattice_list).readline())
    rows, fixed = [], []
    for label, order in (("acoustic scores alone (no `-lm`)", None), ("KN3", 3), ("KN5", 5)):
        lm = [] if order is None else ["-lm", models[order], "-order", str(order), "-unk"]
        print(f"lattices: {label} ...", file=sys.stderr)
        ours_seconds, ours = timed([args.nplm, *read, *lm, "-viterbi-decode"], args.repeats)
        theirs_seconds, theirs = timed([tool, *read[1:], *lm, "-viterbi-decode"], args.repeats) if tool else (None, None)
        best = one_best(ours)
        rate, errors, words = word_error_rate(refs, [mapped(best[name]) for name in names])
        same = None if theirs is None else ("yes, byte for byte" if ours == theirs else "NO")
        if order is not None:
            one = ["-read-htk", "-in-lattice-list", first_list, *lm, "-viterbi-decode"]
            fixed.append((f"KN{order}", timed([args.nplm, "lattice-tool", *one], args.repeats)[0],
                          timed([tool, *one], args.repeats)[0] if tool else None))
        rows.append((label, rate, errors, words, ours_seconds, theirs_seconds, same))

    print("lattices: N-best oracle ...", file=sys.stderr)
    ours_dir, theirs_dir = os.path.join(work, "nbest-nplm"), os.path.join(work, "nbest-srilm")
    nbest = ["-lm", models[5], "-order", "5", "-unk", "-nbest-decode", str(NBEST)]
    os.makedirs(ours_dir)
    ours_seconds, _ = timed([args.nplm, *read, *nbest, "-out-nbest-dir", ours_dir], args.repeats)
    theirs_seconds, same = None, None
    if tool:
        os.makedirs(theirs_dir)
        theirs_seconds, _ = timed([tool, *read[1:], *nbest, "-out-nbest-dir", theirs_dir], args.repeats)
        identical, reordered = compare_nbest(ours_dir, theirs_dir, names)
        same = "yes, byte for byte" if identical == count else (
            f"{identical} of {count} files byte for byte"
            + (f"; {reordered} with the same lines, tied hypotheses in another order" if reordered else "")
            + ("" if identical + reordered == count else "; OTHERS DIFFER"))
    lists = nbest_files(ours_dir, names)
    oracle = [min((mapped(h) for h in lists[name]), key=lambda h: word_errors(ref, h))
              for name, ref in zip(names, refs)]
    rate, errors, words = word_error_rate(refs, oracle)
    rows.append((f"KN5 N-best oracle (best of `-nbest-decode {NBEST}`)", rate, errors, words, ours_seconds,
                 theirs_seconds, same))

    for order in (3, 5):
        print(f"lattices: expanding to KN{order} ...", file=sys.stderr)
        lm = ["-lm", models[order], "-order", str(order), "-unk"]
        ours_out, theirs_out = os.path.join(work, f"expanded{order}-nplm"), os.path.join(work, f"expanded{order}-srilm")
        ours_seconds = timed_expansion([args.nplm, *read, *lm, "-write-htk", "-out-lattice-dir", ours_out], ours_out,
                                       args.repeats)
        written = os.path.join(work, f"expanded{order}-list")
        with open(written, "w") as f:
            f.writelines(os.path.join(ours_out, name + ".lat.gz") + "\n" for name in names)
        best = one_best(timed([args.nplm, "lattice-tool", "-read-htk", "-in-lattice-list", written,
                               "-viterbi-decode"], 1)[1])
        on_the_fly = one_best(timed([args.nplm, *read, *lm, "-viterbi-decode"], 1)[1])
        agree = sum(best[name] == on_the_fly[name] for name in names)
        rate, errors, words = word_error_rate(refs, [mapped(best[name]) for name in names])
        theirs_seconds, same = None, None
        if tool:
            theirs_seconds = timed_expansion([tool, *read[1:], *lm, "-write-htk", "-out-lattice-dir", theirs_out],
                                             theirs_out, args.repeats)
            equal = sum(links(os.path.join(ours_out, name + ".lat.gz"))
                        == links(os.path.join(theirs_out, name + ".lat.gz")) for name in names)
            same = f"{equal} of {count} lattices the same links"
        rows.append((f"KN{order} expanded (`-write-htk`), decoded without `-lm` (1-best = on-the-fly's for {agree} of "
                     f"{count})", rate, errors, words, ours_seconds, theirs_seconds, same))

    trained = model_or_trained(LSTM, args.lstm, args.brown, args.nplm, "lattices")
    lstm = os.path.join(work, "lstm.nplm")  # a mixture's components lie in its folder
    shutil.copyfile(args.lstm, lstm)
    mixture = os.path.join(work, "lstm-kn5.mix")
    subprocess.run([args.nplm, "mix", "-lm", lstm, "-lm", models[5], "-lambda", "0.5", "-text",
                    os.path.join(args.brown, "valid.txt"), "-write", mixture], check=True, stdout=subprocess.DEVNULL)
    for order in APPROX_ORDERS:
        print(f"lattices: the LSTM by the {order}-gram history approximation ...", file=sys.stderr)
        seconds, out = timed([args.nplm, *read, "-lm", lstm, "-unk", "-approx-order", str(order), "-viterbi-decode"],
                             args.rescore_repeats)
        best = one_best(out)
        rate, errors, words = word_error_rate(refs, [mapped(best[name]) for name in names])
        rows.append((f"LSTM in the decoder, {order}-gram history approximation (`-approx-order {order}`)", rate,
                     errors, words, seconds, None, None))
    nbest_list = os.path.join(work, "nbest-list")
    with open(nbest_list, "w") as f:
        f.writelines(os.path.join(ours_dir, name + ".gz") + "\n" for name in names)
    rescored = {}
    for label, model in (("KN5", models[5]), ("LSTM", lstm), ("LSTM + KN5", mixture)):
        print(f"lattices: rescoring by {label} ...", file=sys.stderr)
        seconds, out = timed([args.nplm, "rescore", "-lm", model, "-nbest-files", nbest_list, "-lm-weight",
                              str(LMSCALE), "-word-penalty", str(WDPENALTY), "-best"], args.rescore_repeats)
        best = one_best(out)
        best = {name[:-len(".gz")] if name.endswith(".gz") else name: words for name, words in best.items()}
        rescored[label] = best
        rate, errors, words = word_error_rate(refs, [mapped(best[name]) for name in names])
        rows.append((f"KN5 {NBEST}-best rescored by {label}", rate, errors, words, seconds, None, None))
    kn5_best = one_best(timed([args.nplm, *read, "-lm", models[5], "-order", "5", "-unk", "-viterbi-decode"], 1)[1])
    agree = sum(rescored["KN5"][name] == kn5_best[name] for name in names)

    srilm = "SRILM 1.7.3's lattice-tool built from BitSpeech/SRILM" if tool else "SRILM's lattice-tool absent"
    body = [HEADING, "", machine_stamp(srilm), "",
            f"`make brown-lattices` (benchmarks/lattices.py): lattices for the first {args.first} sentences of Brown "
            f"test ({count} lattices, {sum(len(r) for r in refs):,} words; made in {making:.1f} s) by "
            f"benchmarks/make_lattices.py's noise process with seed {args.seed} (nplmtk/lattice/noise.py): each "
            "sentence's true words form a chain of links, and each position gets two substitutions by words of "
            "similar frequency in Brown train (drawn from the 20 words nearest in the frequency ranking), with "
            "probability 0.1 a `!NULL` link (a deletion) and with probability 0.1 an inserted word before the true "
            "one; log10 acoustic scores are drawn from N(-10, 1.5) for a true word, N(-11, 1.5) for a confusion and "
            "N(-12, 1.5) for a deletion (about a third of the confusions sound better than the truth, so the "
            "language model has to decide), lmscale 8, wdpenalty 0, no language scores in the lattices. The "
            "models: KN3 and KN5 of Brown train, every n-gram kept (nplm's default cutoffs, 1), vocabulary "
            f"`nplm vocab -min-count {VOCAB_MIN_COUNT}` ({len(known):,} words):", "",
            f"    python benchmarks/make_lattices.py train.txt test.txt lat -first {args.first} -seed {args.seed}",
            f"    nplm vocab -text train.txt -min-count {VOCAB_MIN_COUNT} -write-vocab vocab.txt",
            "    nplm ngram-count -text train.txt -order K -vocab vocab.txt -unk -kndiscount -interpolate -lm knK.arpa",
            "    nplm lattice-tool -read-htk -in-lattice-list lat/list [-lm knK.arpa -order K -unk] -viterbi-decode",
            f"    nplm lattice-tool -read-htk -in-lattice-list lat/list -lm kn5.arpa -order 5 -unk -nbest-decode {NBEST} "
            "-out-nbest-dir nbest", "",
            "and SRILM's `lattice-tool` with the same options. WER: word-level Levenshtein distance (substitutions, "
            "deletions, insertions) summed over the sentences, over the reference words; `<s>`, `</s>` dropped, and "
            "the words outside the vocabulary written `<unk>` on both sides, as the decoders read the lattices with "
            f"`-unk` ({oov:.1%} of the reference words; the acoustic-only path is mapped the same way). The oracle: "
            f"for each lattice the hypothesis of KN5's {NBEST} best with the fewest errors. Time: the whole process "
            f"(reading the model included), median of {args.repeats} runs, divided by the {count} lattices. "
            "lattice-tool given `-lm` also expands each lattice to the model after decoding it (unless "
            "`-no-expansion`), so its decoding times include an expansion.", "",
            "The expanded rows: each lattice expanded to the model and written with the model's log10 probabilities "
            "as language scores (SRILM's expandToLM: a node per lattice node and context, each context cut to the "
            "longest the model uses next), then decoded again without a model; the time is the expansion's "
            "(reading and writing included); identical output: lattices whose written links (times, word, scores) "
            "are lattice-tool's, the nodes numbered otherwise:", "",
            "    nplm lattice-tool -read-htk -in-lattice-list lat/list -lm knK.arpa -order K -unk -write-htk "
            "-out-lattice-dir expanded",
            "    nplm lattice-tool -read-htk -in-lattice-list expanded/list -viterbi-decode", "",
            "The LSTM rows: the LSTM's log10 probabilities in the decoder in place of an n-gram's, by the n-gram "
            "history approximation of Liu et al. (2016): paths into a lattice node whose last K-1 words agree merge, "
            "the best one's network state carried on; each lattice node's paths scored in one batch. Time: one run "
            "(the LSTM and lattice-tool do not meet: SRILM has no neural models):", "",
            "    nplm lattice-tool -read-htk -in-lattice-list lat/list -lm lstm.nplm -unk -approx-order K "
            "-viterbi-decode", "",
            f"The rescored rows: KN5's {NBEST}-best lists above re-ranked exactly, each hypothesis by its acoustic "
            f"score from the list plus {LMSCALE} times the new model's log10 probability of its words (with `</s>`) "
            f"plus {WDPENALTY} per word, the lattices' scales:", "",
            f"    nplm rescore -lm MODEL -nbest-files nbest-list -lm-weight {LMSCALE} -word-penalty {WDPENALTY} -best",
            "    nplm mix -lm lstm.nplm -lm kn5.arpa -lambda 0.5 -text valid.txt -write lstm-kn5.mix", "",
            f"MODEL: kn5.arpa (a check of the scales: its best hypothesis is KN5's Viterbi 1-best for {agree} of the "
            f"{count} lattices); " + (f"the LSTM of `make {LSTM.make_target}` ({LSTM.name} in benchmarks/runs.py: "
                                      f"{LSTM.architecture}, `{' '.join(LSTM.options())}`, Brown train{trained})"
                                      if args.lstm == LSTM.model_path else f"the LSTM {args.lstm}") + "; "
            "and the two interpolated word by word with weights 0.5 and 0.5. Their time: the whole `nplm rescore` "
            f"process over the {count} lists (reading the model included; the N-best decoding not counted), "
            f"median of {args.rescore_repeats} run{'s' if args.rescore_repeats > 1 else ''}, divided by the "
            f"{count} lattices (the lattice-tool column is empty: SRILM rescores N-best lists with `ngram -nbest`, "
            "n-gram models only).", "",
            "| model | WER (errors / words) | nplm per lattice | lattice-tool per lattice | identical output |",
            "| --- | --- | --- | --- | --- |"]
    for label, rate, errors, words, ours_seconds, theirs_seconds, same in rows:
        rescoring = "rescored by" in label or label.startswith("LSTM")
        body.append(f"| {label} | {rate:.2%} ({errors:,} / {words:,}) | {ours_seconds / count * 1000:.2f} ms | "
                    + (f"{theirs_seconds / count * 1000:.2f} ms" if theirs_seconds is not None
                       else "—" if rescoring else "not run")
                    + f" | {'—' if rescoring else same or 'not compared'} |")
    body += ["", "The fixed cost (reading the model and one lattice): the same commands on the first lattice alone "
             "take " + "; ".join(f"{label} {ours:.2f} s (nplm), " + (f"{theirs:.2f} s (lattice-tool)" if theirs else "")
                                 for label, ours, theirs in fixed) + "."]
    write_sections(args.out, [body])
    print("\n".join(body))


if __name__ == "__main__":
    main()
