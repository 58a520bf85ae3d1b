"""The recurrent models' sections (issue 16): the survey's Table 1 on Brown from the runs of
`make brown-survey`, our best LSTM (`make brown-lstm`) alone and mixed, and the LSTM's
training speed beside PyTorch's, side by side."""
import json
import os
import resource
import statistics
import subprocess

from log_bilinear import KN5_TEST, LBL0_TEST, _kn5, _mixture
from runs import FAST_BUDGET, LSTM_RUNS, RUNS, RUNS_DIR, SURVEY_RUNS
from sections import NPLM, OUT, _ppl, _training_texts, _vocab_size

BEST = RUNS["lstm-best"]
SURVEY_PAPER = {"survey-fnn": 214.91, "survey-lstm": 228.91}  # its Table 1, Brown (its own split and vocabulary)
# the peer of the speed section: a Python with torch==2.13.0 (CPU), never a dependency of nplmtk
TORCH_PYTHON = os.environ.get("TORCH_PYTHON", "/tmp/torchenv/bin/python")
SPEED_SHAPES = [("m=100, h=200, 1 layer (the survey's LSTM, with biases)", ["-m", "100", "-h", "200"], []),
                ("m=h=256, tied, dropout 0.3 (our best LSTM's shape)",
                 ["-m", "256", "-h", "256", "-tie", "-dropout", "0.3"], ["--tie", "--dropout", "0.3"])]
SPEED_ROUNDS, STREAMS, BPTT = 3, 32, 35


def _records(run):
    return [json.loads(line) for line in open(run.log_path)]


def survey_table(brown, peak):
    test = os.path.join(brown, "test.txt")
    lines = ["## Recurrent models on Brown: the survey's Table 1 (issue 16)", "",
             f"Trained by `make brown-survey` (benchmarks/runs.py; {RUNS_DIR}/NAME.log and .nplm): m = 100, h = 200, "
             "no direct connections and no biases unless the row says so, at most 5 epochs with early stopping on "
             "Brown valid and `-lr-halve`, one thread each (two runs side by side on the 2 cores, so words/s is "
             "one core's); the recurrent models by Adam (`-optimizer adam -lr 0.002`, `-streams 32 -bptt 35 "
             "-clip 0.25`, each sentence from a zero state), the FNN (the MLP, n = 5) by SGD at batch 256, "
             "`-lr 0.003`. Test ppl: `nplm ppl -lm MODEL -text test.txt`; the survey's figures are on its own "
             "split and vocabulary.", "",
             "| model | direct | bias | valid ppl by epoch (kept: bold) | test ppl | words/s (median epoch) | "
             "the survey |", "| --- | --- | --- | --- | --- | --- | --- |"]
    if not any(os.path.exists(run.model_path) for run in SURVEY_RUNS):
        return lines[:2] + ["Not measured in this run: `make brown-survey` trains the models."]
    for run in SURVEY_RUNS:
        label = "FNN (n = 5)" if run.order else run.arch.upper()
        if not os.path.exists(run.model_path):
            lines.append(f"| {label} | {'yes' if run.direct else 'no'} | {'yes' if run.bias else 'no'} | "
                         "not trained | | | |")
            continue
        records = _records(run)
        best = min(range(len(records)), key=lambda i: records[i]["valid_ppl"])
        curve = ", ".join(f"**{r['valid_ppl']:.1f}**" if i == best else f"{r['valid_ppl']:.1f}"
                          for i, r in enumerate(records))
        speed = statistics.median(r["words_per_s"] for r in records)
        lines.append(f"| {label} | {'yes' if run.direct else 'no'} | {'yes' if run.bias else 'no'} | {curve} | "
                     f"{_ppl(run.model_path, test):.2f} | {speed:,.0f} | {SURVEY_PAPER.get(run.name, '-')} |")
    return lines + ["", f"KN5 alone: {KN5_TEST} (the n-gram section)."]


def lstm_quality(brown, peak):
    valid, test = os.path.join(brown, "valid.txt"), os.path.join(brown, "test.txt")
    lines = ["## Our best LSTM on Brown, alone and mixed (issue 16)", "",
             "`make brown-lstm` trains two LSTMs (benchmarks/runs.py), m = h = 256, output layer tied to the "
             "features, dropout 0.3, Adam at 2e-3 with `-lr-halve`, 32 streams, BPTT 35, at most 12 epochs with "
             "early stopping on Brown valid, one thread each: with the full softmax "
             f"(`{' '.join(BEST.command('nplm', 'BROWN'))}`), and the same with `-output class`. The one of "
             "lower valid ppl is mixed by `nplm mix` (EM weights on Brown valid) and scored on Brown test; KN5 is "
             "the n-gram section's, the feed-forward network the best of runs/ that exists (MLP9, else the "
             "log-bilinear Model 3).", "",
             "| model | valid ppl by epoch (kept: bold) | words/s (median epoch, one thread) | test ppl | "
             "against KN5 |",
             "| --- | --- | --- | --- | --- |"]
    trained = [run for run in LSTM_RUNS if os.path.exists(run.model_path)]
    if not trained:
        return lines[:2] + [f"Not measured in this run: `make {BEST.make_target}` trains the models."]
    kept = {}
    for run in trained:
        records = _records(run)
        best = min(range(len(records)), key=lambda i: records[i]["valid_ppl"])
        kept[run.name] = records[best]["valid_ppl"]
        curve = ", ".join(f"**{r['valid_ppl']:.1f}**" if i == best else f"{r['valid_ppl']:.1f}"
                          for i, r in enumerate(records))
        alone = _ppl(run.model_path, test)
        output = "class-factored output" if "class" in run.extra else "full softmax"
        lines.append(f"| LSTM, {output} | {curve} | {statistics.median(r['words_per_s'] for r in records):,.0f} | "
                     f"{alone:.2f} | {1 - alone / KN5_TEST:.1%} |")
    chosen = min(trained, key=lambda run: kept[run.name])
    kn5 = _kn5(brown)
    network = next((run for run in (RUNS["mlp9"], RUNS["lbl3-h100"]) if os.path.exists(run.model_path)), None)
    lines += ["", f"Mixtures of {chosen.name} (lower valid ppl):", "",
              "| mixture | EM weights (in order) | test ppl | against KN5 |", "| --- | --- | --- | --- |"]
    mixtures = [("LSTM + KN5", [kn5, chosen.model_path])]
    if network:
        mixtures += [(f"LSTM + {network.name}", [network.model_path, chosen.model_path]),
                     (f"LSTM + KN5 + {network.name}", [kn5, network.model_path, chosen.model_path])]
    for label, components in mixtures:
        weights, mixed = _mixture(components, valid, test, label.replace(" + ", "-").lower() + ".mix")
        lines.append(f"| {label} | {weights} | {mixed:.2f} | {1 - mixed / KN5_TEST:.1%} |")
    lines += ["", f"Aims: alone <= 110 (0.75 x KN5's {KN5_TEST}), mixed <= 100."]
    fast = RUNS["lstm-fast"]
    if os.path.exists(fast.model_path):  # issue 21: time to quality
        records = _records(fast)
        seconds = sum(r["seconds"] for r in records)
        alone = _ppl(fast.model_path, test)
        lines += ["", f"Time to quality (issues 21 and 36): `make brown-fast` trains the class-output LSTM for at "
                  f"most {FAST_BUDGET} s of wall time, validation included (`-max-time {FAST_BUDGET}`), on "
                  f"{fast.threads} cores with its state carried across sentences: {len(records)} epochs, "
                  f"{seconds:.0f} s of training (validation apart), test ppl {alone:.2f}, "
                  f"{1 - alone / KN5_TEST:.1%} below KN5 (aims: 15%; at most 105 in no more than the 194 s that "
                  "3 epochs on one core took)."]
    return lines


def lstm_speed(brown, peak):
    """Words/s of one epoch of our LSTM and of PyTorch's word-language-model LSTM on the same
    text, shape, streams, BPTT length and full softmax, in turn."""
    _, vocab, texts = _training_texts(brown)
    lines = ["## LSTM training speed against PyTorch (issue 16)", ""]
    if not os.path.exists(TORCH_PYTHON):
        return lines + [f"Not measured in this run: no PyTorch at {TORCH_PYTHON} (`python -m venv /tmp/torchenv && "
                        "/tmp/torchenv/bin/pip install torch==2.13.0 numpy`, or TORCH_PYTHON=...)."]
    text, size = texts["long"], _vocab_size(vocab)
    peer = os.path.join(os.path.dirname(os.path.abspath(__file__)), "pytorch_lstm.py")
    lines += [f"One epoch on the first 1,500 sentences of Brown train (|V| = {size:,}, full softmax), {STREAMS} "
              f"streams, BPTT {BPTT}, plain SGD with clipping 0.25, the two in turn, {SPEED_ROUNDS} rounds (median; "
              "the ratio is the median of the rounds' ratios). Ours: `nplm train-nplm -arch lstm SHAPE -text "
              "train-long.txt -vocab vocab.txt -epochs 1 -threads T -quiet` (words/s from its log; -threads 1 gives "
              "BLAS both cores, -threads 2 runs two lock-free workers); PyTorch 2.13 (CPU): "
              "`benchmarks/pytorch_lstm.py --text train-long.txt --vocab vocab.txt SHAPE --threads 2` (its "
              "examples/word_language_model LSTM, timed inside the training loop).", "",
              "| shape | PyTorch, 2 threads | ours, -threads 1 | ours, -threads 2 | ratio (-threads 2 / PyTorch) | "
              "ours, -output class, -threads 2 |",
              "| --- | --- | --- | --- | --- | --- |"]
    log = os.path.join(OUT, "lstm-speed.log")
    for label, ours, theirs in SPEED_SHAPES:
        rounds = []
        for _ in range(SPEED_ROUNDS):
            shape = ours + ["-streams", str(STREAMS), "-bptt", str(BPTT)]
            torch_out = subprocess.run([TORCH_PYTHON, peer, "--text", text, "--vocab", vocab, "--m", ours[1], "--h",
                                        ours[3], "--streams", str(STREAMS), "--bptt", str(BPTT), "--threads", "2",
                                        *theirs], check=True, capture_output=True, text=True).stdout
            mine = []
            for threads, output in (("1", "full"), ("2", "full"), ("2", "class")):
                subprocess.run([NPLM, "train-nplm", "-arch", "lstm", *shape, "-text", text, "-vocab", vocab,
                                "-epochs", "1", "-threads", threads, "-output", output, "-quiet", "-log", log,
                                "-lm", os.path.join(OUT, "lstm-speed.nplm")], check=True)
                mine.append(json.loads(open(log).readline())["words_per_s"])
            rounds.append((json.loads(torch_out)["words_per_s"], *mine))
        torch_speed, one, two, classes = (statistics.median(r[i] for r in rounds) for i in range(4))
        ratio = statistics.median(r[2] / r[0] for r in rounds)
        lines.append(f"| {label} | {torch_speed:,.0f} | {one:,.0f} | {two:,.0f} | {ratio:.2f}x | {classes:,.0f} |")
    return lines


OUTPUT_LAYERS = ("full", "class", "hs")
OUTPUT_SHAPES = {"lstm": ["-arch", "lstm", "-m", "200", "-h", "200", "-streams", str(STREAMS), "-bptt", str(BPTT)],
                 "mlp": ["-arch", "mlp", "-order", "5", "-m", "30", "-h", "100"]}
OUTPUT_ROUNDS = 3


def _output_speeds(shape, text, vocab, threads=1):
    """For each output layer, the medians of OUTPUT_ROUNDS epochs on `text`, the outputs in
    turn: words/s from the log, and the CPU seconds of the whole command."""
    log = os.path.join(OUT, "output-layers.log")
    speeds, seconds = ({output: [] for output in OUTPUT_LAYERS} for _ in range(2))
    for _ in range(OUTPUT_ROUNDS):
        for output in OUTPUT_LAYERS:
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            subprocess.run([NPLM, "train-nplm", *shape, "-text", text, "-vocab", vocab, "-epochs", "1", "-threads",
                            str(threads), "-output", output, "-quiet", "-log", log,
                            "-lm", os.path.join(OUT, "output-layers.nplm")], check=True)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            seconds[output].append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
            speeds[output].append(json.loads(open(log).readline())["words_per_s"])
    return ({output: statistics.median(values[output]) for output in OUTPUT_LAYERS} for values in (speeds, seconds))


def output_layers(brown, peak):
    """Words/s of an LSTM and of the MLP with each output layer on the same text, in turn
    (and the CPU seconds of each whole command), and the test ppl of the LSTMs after one
    epoch on the whole of Brown train."""
    train, vocab, texts = _training_texts(brown)
    test = os.path.join(brown, "test.txt")
    lines = ["## Output layers: full, class, hierarchical softmax (issue 16)", "",
             f"An LSTM m = h = 200, {STREAMS} streams, BPTT {BPTT}, and the MLP n = 5, m = 30, h = 100 at batch 1, one "
             f"thread, |V| = {_vocab_size(vocab):,}, plain SGD at the default rates. Speed: one epoch on the first "
             "1,500 sentences of Brown train, `nplm train-nplm SHAPE -text train-long.txt -vocab vocab.txt -epochs 1 "
             f"-threads 1 -output OUTPUT -quiet`, the three outputs in turn, {OUTPUT_ROUNDS} rounds (medians): "
             "words/s from the log (wall-clock time of the training loop, on a machine others share), and the CPU "
             "seconds of the whole command (user + system, from its rusage: start-up and reading included, about "
             "a second). Quality: the LSTM after one epoch on the whole of Brown train with Adam (`-optimizer adam "
             "-lr 0.002 -clip 0.25`), `nplm ppl -lm MODEL -text test.txt` (every output exactly normalised).", "",
             "| model | output | words/s | against full | CPU s of the command | against full | test ppl after one "
             "epoch |", "| --- | --- | --- | --- | --- | --- | --- |"]
    for arch, shape in OUTPUT_SHAPES.items():
        speeds, seconds = _output_speeds(shape, texts["long"], vocab)
        for output in OUTPUT_LAYERS:
            quality = ""
            if arch == "lstm":
                model = os.path.join(OUT, f"lstm-1epoch-{output}.nplm")
                subprocess.run([NPLM, "train-nplm", *shape, "-text", train, "-vocab", vocab, "-epochs", "1",
                                "-threads", "1", "-output", output, "-optimizer", "adam", "-lr", "0.002", "-clip",
                                "0.25", "-quiet", "-lm", model], check=True)
                quality = f"{_ppl(model, test):.2f}"
            lines.append(f"| {arch.upper()} | {output} | {speeds[output]:,.0f} | "
                         f"{speeds[output] / speeds['full']:.2f}x | {seconds[output]:.2f} | "
                         f"{seconds[output] / seconds['full']:.2f} | {quality} |")
    return lines


LBL_OUTPUT_RUNS = {"full": RUNS["lbl0"], "class": RUNS["lbl0-class"], "hs": RUNS["lbl0-hs"]}


def lbl_output_layers(brown, peak):
    """The log-bilinear Model 0 with each output layer: words/s on the same text in turn, and
    the test ppl of the runs of `make brown-lbl` (full) and `make brown-lbl-outputs`."""
    train, vocab, texts = _training_texts(brown)
    test = os.path.join(brown, "test.txt")
    zero = LBL_OUTPUT_RUNS["full"]
    shape = zero.shape_options() + ["-batch", str(zero.batch), "-lr", str(zero.lr)]
    lines = ["## The log-bilinear Model 0 with each output layer (issue 16)", "",
             f"Model 0 of Zhang, Mnih & Hinton, n = {zero.order}, m = {zero.features}, |V| = {_vocab_size(vocab):,}, "
             f"mini-batches of {zero.batch}, {zero.threads} threads, plain SGD at {zero.lr}. `-output hs`: the "
             "hierarchical softmax over the predicted features p (the hierarchical log-bilinear model of Mnih & Hinton "
             "2009, with the Huffman tree of the training counts); `-output class`: p(class) p(word | class) over "
             "sqrt |V| classes by frequency, the words' rows staying R's. Speed: one epoch on the first 1,500 "
             f"sentences of Brown train, `nplm train-nplm {' '.join(shape)} -threads {zero.threads} -text "
             f"train-long.txt -vocab vocab.txt -epochs 1 -output OUTPUT -quiet`, the outputs in turn, {OUTPUT_ROUNDS} "
             "rounds (medians; words/s from the log). Quality: the runs of `make brown-lbl` (full) and `make "
             "brown-lbl-outputs` (the same recipe with each output: up to 20 epochs, early stopping on Brown valid), "
             "`nplm ppl -lm MODEL -text test.txt` (every output exactly normalised).", "",
             "| output | words/s | against full | CPU s of the command | valid ppl by epoch (kept: bold) | "
             "training seconds | test ppl | against full |", "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    speeds, seconds = _output_speeds(shape, texts["long"], vocab, zero.threads)
    tests = {output: _ppl(run.model_path, test) for output, run in LBL_OUTPUT_RUNS.items()
             if os.path.exists(run.model_path)}
    for output, run in LBL_OUTPUT_RUNS.items():
        quality = f"not trained here (`make {run.make_target}`) | | |"
        if output == "full" and output not in tests:  # `make brown-lbl` trains Models 1-3 too (20 min and more)
            tests["full"] = LBL0_TEST
            quality = f"not trained here: the log-bilinear section's run of `make {run.make_target}` | | {LBL0_TEST} |"
        elif output in tests:
            records = [json.loads(line) for line in open(run.log_path)]
            best = min(range(len(records)), key=lambda i: records[i]["valid_ppl"])
            curve = ", ".join(f"**{r['valid_ppl']:.1f}**" if i == best else f"{r['valid_ppl']:.1f}"
                              for i, r in enumerate(records))
            against = f"{tests[output] / tests['full'] - 1:+.1%}" if "full" in tests else ""
            quality = f"{curve} | {sum(r['seconds'] for r in records):,.0f} | {tests[output]:.2f} | {against}"
        lines.append(f"| {output} | {speeds[output]:,.0f} | {speeds[output] / speeds['full']:.2f}x | "
                     f"{seconds[output]:.2f} | {quality} |")
    return lines
