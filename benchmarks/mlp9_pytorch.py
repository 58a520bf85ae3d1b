"""MLP9's training speed against PyTorch's (issue 21): ours (`nplm train-nplm`) and the same
network in PyTorch 2.13 (benchmarks/pytorch_mlp.py, run by the Python that PYTORCH_PYTHON
names), one epoch each on the same windows, in turn, at batch 256 and 32 (2 threads) and
batch 1 (1 and 2 threads)."""
import json
import os
import statistics
import subprocess
import sys

from recurrent import TORCH_PYTHON
from runs import MLP9
from scoring import _measured
from sections import BLAS_VARIABLES, NPLM, OUT, _flop_per_word, _train_record, _training_texts, _vocab_size

PEER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "pytorch_mlp.py")
ROUNDS = 5  # the machine's speed moves by up to 1.5x within minutes: medians of 5 rounds
# (batch, threads) -> the aim for ours / PyTorch
SETTINGS = {(256, 2): 1.8, (32, 2): 1.5, (1, 1): 8.0, (1, 2): None}
THREADS_AIM = 1.7  # ours at batch 1, 2 threads against 1
# PyTorch's OpenMP wait policy: its default (spinning) unless PYTORCH_WAIT_POLICY is given.
# Spinning made its 2-thread runs 10x slower whenever other jobs loaded the 2 cores (batch 32:
# about 300 words/s against 3,038 passive, at a load average of 6), but on a quiet machine
# passive made its batch-32 runs 1.4x slower (4,760 against 6,720 words/s): no handicap by default.
WAIT_POLICY = os.environ.get("PYTORCH_WAIT_POLICY")


def _torch_python():
    """The Python with torch==2.13.0: PYTORCH_PYTHON, else the LSTM section's TORCH_PYTHON
    when it exists; None without."""
    python = os.environ.get("PYTORCH_PYTHON") or TORCH_PYTHON
    return python if os.path.exists(python) else None


def _environment(threads, **variables):
    """This environment with the BLAS and OpenMP libraries limited to `threads` (-threads 1
    alone still lets OpenBLAS start a thread per core), and `variables`."""
    return {**os.environ, **{name: str(threads) for name in BLAS_VARIABLES}, **variables}


def _peer(python, text, vocab, batch, threads):
    out = subprocess.run([python, PEER, "--text", text, "--vocab", vocab, "--order", str(MLP9.order), "--m",
                          str(MLP9.features), "--h", str(MLP9.hidden), "--batch", str(batch), "--threads",
                          str(threads)], check=True, capture_output=True, text=True,
                         env=_environment(threads, **({"OMP_WAIT_POLICY": WAIT_POLICY} if WAIT_POLICY else {}))).stdout
    return json.loads(out)


def _ours(text, vocab, batch, threads):
    return _train_record(text, vocab, MLP9, batch, threads, env=_environment(threads))


def mlp9_against_pytorch(brown, peak):
    lines = ["## MLP9 training speed against PyTorch (issue 21)", ""]
    python = _torch_python()
    if python is None:
        return lines + ["Not measured in this run: set PYTORCH_PYTHON to a Python with torch 2.13 (`python -m venv "
                        "DIR && DIR/bin/pip install torch==2.13.0 numpy`, the CPU wheel)."]
    start_load = os.getloadavg()
    _, vocab, texts = _training_texts(brown)
    size = _vocab_size(vocab)
    flop = _flop_per_word(MLP9, size)
    _ours(texts["short"], vocab, 32, 1)  # warm-ups, not counted
    _peer(python, texts["short"], vocab, 32, 1)
    records, loads = {setting: [] for setting in SETTINGS}, []
    for r in range(ROUNDS):
        for batch, threads in SETTINGS:
            text = texts["short"] if batch == 1 else texts["long"]
            pair = {}
            for side in (("ours", "peer") if r % 2 == 0 else ("peer", "ours")):  # who goes first alternates
                loads.append(os.getloadavg()[0])
                pair[side] = (_ours(text, vocab, batch, threads) if side == "ours"
                              else _peer(python, text, vocab, batch, threads))
            records[batch, threads].append((pair["ours"], pair["peer"]))
    words = {batch: records[batch, 2][0][1]["words"] for batch, _ in SETTINGS}
    lines += [f"MLP9 ({MLP9.architecture} connections), full softmax over |V| = {size:,}, plain SGD at the rate "
              "1e-3 on the batch's summed gradient, weight decay 1e-4 on the weights; one epoch on the first 400 "
              f"sentences of Brown train at batch 1 ({words[1]:,} windows) or the first 1,500 at batch 32 and "
              f"256 ({words[32]:,}). Ours: `nplm train-nplm -text TEXT -vocab vocab.txt "
              f"{' '.join(MLP9.shape_options())} -epochs 1 -batch K -threads T -quiet -log L` (words/s from the "
              "log). PyTorch 2.13.0+cpu: `benchmarks/pytorch_mlp.py --text TEXT --vocab vocab.txt --batch K "
              "--threads T` (nn.Embedding, nn.Linear, F.cross_entropy summed, torch.optim.SGD, the same windows "
              "shuffled; timed inside its training loop). Both run with OPENBLAS_NUM_THREADS, OMP_NUM_THREADS and "
              "MKL_NUM_THREADS set to T (so with T = 1 each has one core; ours runs T lock-free workers at batch 32 "
              "and 256, each on a single-threaded BLAS, and at batch 1 T threads sharing each window, each on 1/T "
              "of the output rows; PyTorch T OpenMP threads, "
              + (f"with OMP_WAIT_POLICY={WAIT_POLICY}, as PYTORCH_WAIT_POLICY asked" if WAIT_POLICY else
                 "with OpenMP's default wait policy (PYTORCH_WAIT_POLICY=PASSIVE asks for passive threads on a loaded "
                 "machine, where spinning made its 2-thread runs 10x slower)")
              + f"). The two in turn, "
              f"{ROUNDS} rounds, who goes first alternating; medians, the ratio the median of the rounds' ratios. "
              "FLOP per word = 6|V|h + "
              f"6(n-1)mh = {flop / 1e6:.2f} M; the fraction is of the numpy sgemm peak above ({peak:.1f} GFLOP/s, "
              "both cores). Train ppl: after the epoch, as each logs it (different initial weights and "
              "shuffles).", "",
              "| batch | threads | ours words/s | PyTorch words/s | ours / PyTorch | aim | ours GFLOP/s (of peak) | "
              "PyTorch GFLOP/s (of peak) | train ppl ours / PyTorch |",
              "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    speed = {}
    for (batch, threads), aim in SETTINGS.items():
        rounds = records[batch, threads]
        ours = statistics.median(o["words_per_s"] for o, _ in rounds)
        theirs = statistics.median(p["words_per_s"] for _, p in rounds)
        ratio = statistics.median(o["words_per_s"] / p["words_per_s"] for o, p in rounds)
        speed[batch, threads] = [o["words_per_s"] for o, _ in rounds], [p["words_per_s"] for _, p in rounds]
        rates = [value * flop / 1e9 for value in (ours, theirs)]
        met = "" if aim is None else f">= {aim}x ({'met' if ratio >= aim else 'not met'})"
        lines.append(f"| {batch} | {threads} | {ours:,.0f} | {theirs:,.0f} | **{ratio:.2f}x** | {met} | "
                     f"{rates[0]:.1f} ({rates[0] / peak:.0%}) | {rates[1]:.1f} ({rates[1] / peak:.0%}) | "
                     f"{rounds[0][0]['train_ppl']:.0f} / {rounds[0][1]['train_ppl']:.0f} |")
    ours_two = statistics.median(two / one for one, two in zip(speed[1, 1][0], speed[1, 2][0]))
    peer_two = statistics.median(two / one for one, two in zip(speed[1, 1][1], speed[1, 2][1]))
    lines += ["", f"2 threads against 1 at batch 1 (the rounds' ratios, median): ours **{ours_two:.2f}x** (aim "
              f"{THREADS_AIM}x: {'met' if ours_two >= THREADS_AIM else 'not met'}), PyTorch {peer_two:.2f}x.",
              f"1-minute load average: {start_load[0]:.2f} at the section's start; at the runs' starts min "
              f"{min(loads):.2f}, median {statistics.median(loads):.2f}, max {max(loads):.2f} (2 cores; above "
              "about 2, other jobs shared the cores, which slows every run and ratios measured in turn less)."]
    return lines


# Ours' side of the scoring race: log p(target) of every window of the text (no window
# scored once for several, as `nplm ppl` does), timed inside the process as PyTorch's is.
OURS_SCORING = """
import json, sys, time
import numpy as np
import nplmtk
from nplmtk.ppl import read_scored_text
model = nplmtk.load(sys.argv[1])
_, corpus = read_scored_text(sys.argv[2], model.vocab, words=False)
windows = corpus.windows(model.order)
rows = np.ascontiguousarray(np.where(windows < 0, model.vocab.unk, windows), dtype=np.int32)
start = time.perf_counter()
logp = model.example_logprobs(rows)
seconds = time.perf_counter() - start
print(json.dumps({"words": len(rows), "seconds": seconds, "words_per_s": len(rows) / seconds,
                  "logp_sum": float(logp.sum())}))
"""
SCORING_THREADS = (2, 1)


def mlp9_scoring_against_pytorch(brown, peak):
    """Scoring Brown test with MLP9 (issue 21: a neural model's scoring batched across
    sentences at the sgemm rate), ours against PyTorch's forward pass, in turn."""
    lines = ["## Scoring with MLP9 against PyTorch (issue 21)", ""]
    python = _torch_python()
    if python is None:
        return lines + ["Not measured in this run: set PYTORCH_PYTHON to a Python with torch 2.13."]
    _, vocab, texts = _training_texts(brown)
    test = os.path.join(brown, "test.txt")
    model = os.path.join(OUT, f"{MLP9.name}.nplm")
    if not os.path.exists(model):  # the weights do not change the work: any MLP9 will do
        _ours(texts["short"], vocab, 256, 2)
    size = _vocab_size(vocab)
    flop = 2 * size * MLP9.hidden + 2 * (MLP9.order - 1) * MLP9.features * MLP9.hidden

    def ours(threads):
        out = subprocess.run([sys.executable, "-c", OURS_SCORING, model, test], check=True, capture_output=True,
                             text=True, env=_environment(threads)).stdout
        return json.loads(out)

    def peer(threads):
        return json.loads(subprocess.run([python, PEER, "--score", "--text", test, "--vocab", vocab, "--batch", "256",
                                          "--threads", str(threads)], check=True, capture_output=True, text=True,
                                         env=_environment(threads)).stdout)

    records = {threads: [] for threads in SCORING_THREADS}
    for r in range(ROUNDS):
        for threads in SCORING_THREADS:
            pair = {}
            for side in (("ours", "peer") if r % 2 == 0 else ("peer", "ours")):
                pair[side] = ours(threads) if side == "ours" else peer(threads)
            records[threads].append((pair["ours"], pair["peer"]))
    commands = [_measured([NPLM, "ppl", "-lm", model, "-text", test])[0] for _ in range(ROUNDS)]
    words = records[2][0][0]["words"]
    lines += [f"log p(target) of each of the {words:,} windows of Brown test (one a word and </s>), MLP9 "
              f"({' '.join(MLP9.shape_options())}, |V| = {size:,}, full softmax), batches of 256 windows. Ours: "
              f"`{MLP9.name}.nplm` (the weights do not change the work), `model.example_logprobs(windows)` inside "
              "the process (what `nplm ppl` calls, there on the distinct windows only): the batches shared among "
              "T workers, each on a single-threaded BLAS. PyTorch 2.13.0+cpu: `benchmarks/pytorch_mlp.py --score "
              "--text test.txt --vocab vocab.txt --batch 256 --threads T` (F.log_softmax of the network's output "
              "under torch.inference_mode, the target's value gathered). OPENBLAS_NUM_THREADS, OMP_NUM_THREADS and "
              f"MKL_NUM_THREADS = T for both; the two in turn, {ROUNDS} rounds; medians, the ratio the median of "
              f"the rounds' ratios. FLOP per window = 2|V|h + 2(n-1)mh = {flop / 1e6:.2f} M; the fraction is of "
              f"the sgemm peak above ({peak:.1f} GFLOP/s, both cores; one thread: of half of it).", "",
              "| threads | ours words/s | PyTorch words/s | ours / PyTorch | ours GFLOP/s (of peak) | "
              "PyTorch GFLOP/s (of peak) |", "| --- | --- | --- | --- | --- | --- |"]
    for threads in SCORING_THREADS:
        rounds = records[threads]
        rates = [statistics.median(r[side]["words_per_s"] for r in rounds) for side in (0, 1)]
        ratio = statistics.median(o["words_per_s"] / p["words_per_s"] for o, p in rounds)
        share = peak * threads / 2
        gflops = [rate * flop / 1e9 for rate in rates]
        lines.append(f"| {threads} | {rates[0]:,.0f} | {rates[1]:,.0f} | **{ratio:.2f}x** | {gflops[0]:.1f} "
                     f"({gflops[0] / share:.0%}) | {gflops[1]:.1f} ({gflops[1] / share:.0%}) |")
    lines += ["", f"The whole command, `nplm ppl -lm {MLP9.name}.nplm -text test.txt` (start-up, reading, the "
              f"distinct windows, the report; {ROUNDS} runs): median {statistics.median(commands):.2f} s."]
    return lines
