"""Recurrent models against faster-rnnlm (issue 16): yandex/faster-rnnlm (FASTER_RNNLM_BIN,
the folder holding its `rnnlm`, built with `make NVCC_TEST=`) and ours on Brown with rare
words as <unk>, hidden 200, hierarchical softmax, 2 threads, run in turn: wall-clock
training time (validation included) and test ppl over words and </s>."""
import json
import os
import subprocess
import time

from sections import NPLM, OUT, _ppl, _vocabulary

THEIRS = {"sigmoid RNN": ["-hidden-type", "sigmoid"], "GRU": ["-hidden-type", "gru"]}
# ours: the same output layer and size; epochs chosen to stay within faster-rnnlm's time
OURS = {"sigmoid RNN, `-output hs`": ["-arch", "rnn", "-activation", "sigmoid", "-m", "200", "-h", "200",
                                      "-output", "hs", "-optimizer", "adam", "-lr", "0.002", "-epochs", "4"],
        "LSTM, `-output hs`": ["-arch", "lstm", "-m", "200", "-h", "200", "-output", "hs", "-dropout", "0.2",
                               "-optimizer", "adam", "-lr", "0.002", "-lr-halve", "-epochs", "4"]}


def _unk_texts(brown, vocab):
    """train/valid/test with words outside `vocab` as <unk> (faster-rnnlm takes every
    training word into its vocabulary)."""
    words = set(open(vocab).read().split())
    paths = {}
    for split in ("train", "valid", "test"):
        paths[split] = os.path.join(OUT, f"{split}.unk.txt")
        with open(os.path.join(brown, f"{split}.txt")) as src, open(paths[split], "w") as dst:
            for line in src:
                if line.split():
                    dst.write(" ".join(w if w in words else "<unk>" for w in line.split()) + "\n")
    return paths


def _theirs(binary, texts, options):
    model = os.path.join(OUT, "frnn.model")
    for stale in (model, model + ".nnet"):
        if os.path.exists(stale):
            os.unlink(stale)
    start = time.perf_counter()
    subprocess.run([binary, "-rnnlm", model, "-train", texts["train"], "-valid", texts["valid"], "-hidden", "200",
                    "-threads", "2", *options], check=True, capture_output=True)
    seconds = time.perf_counter() - start
    err = subprocess.run([binary, "-rnnlm", model, "-test", texts["test"]], check=True, capture_output=True,
                         text=True).stderr
    return seconds, 2 ** float(err.split("Test entropy")[1].split()[0])


def _ours(texts, vocab, options):
    model, log = os.path.join(OUT, "ours-rnn.nplm"), os.path.join(OUT, "ours-rnn.jsonl")
    start = time.perf_counter()
    subprocess.run([NPLM, "train-nplm", "-text", texts["train"], "-valid", texts["valid"], "-vocab", vocab,
                    "-threads", "2", "-quiet", *options, "-log", log, "-lm", model], check=True, capture_output=True)
    seconds = time.perf_counter() - start
    history = [json.loads(line) for line in open(log)]
    return seconds, _ppl(model, texts["test"]), history


def faster_rnnlm(brown, peak):
    lines = ["## Recurrent models against faster-rnnlm (issue 16)", ""]
    folder = os.environ.get("FASTER_RNNLM_BIN")
    if not folder:
        return lines + ["Not measured in this run: set FASTER_RNNLM_BIN to the folder of faster-rnnlm's `rnnlm`."]
    vocab = _vocabulary(brown)
    texts = _unk_texts(brown, vocab)
    rows, verdicts, loads = [], [], []
    for (name, theirs), (our_name, ours) in zip(THEIRS.items(), OURS.items()):
        loads.append(os.getloadavg()[0])
        their_seconds, their_ppl = _theirs(os.path.join(folder, "rnnlm"), texts, theirs)
        loads.append(os.getloadavg()[0])
        rows.append(f"| faster-rnnlm, {name} | `rnnlm -hidden 200 -threads 2 {' '.join(theirs)}` (its defaults: "
                    f"hierarchical softmax, early stopping) | {their_seconds:.0f} s | {their_ppl:.2f} |")
        seconds, ppl, history = _ours(texts, vocab, ours)
        rows.append(f"| ours, {our_name} | `nplm train-nplm -threads 2 {' '.join(ours)}` ({len(history)} epochs, "
                    f"{history[-1]['words_per_s']:,.0f} words/s in the last) | {seconds:.0f} s | {ppl:.2f} |")
        met = ppl < their_ppl and seconds <= their_seconds
        verdicts.append(f"- Against its {name}: test ppl {ppl:.2f} against {their_ppl:.2f}, "
                        f"{seconds / their_seconds:.2f}x its time: aim {'met' if met else 'not met'}.")
    lines += ["Brown with the words outside our vocabulary (`nplm vocab -min-count 4`) spelt `<unk>` in all three "
              "texts, so both toolkits see the same |V| = 14,119 words; hidden (and embedding) size 200, "
              "hierarchical softmax over a Huffman tree of the training counts, 2 threads, validation on valid; "
              "run in turn on one machine. Time: the whole training command (validation included); test ppl over "
              "every word and `</s>` (faster-rnnlm's `-test` entropy in bits, as 2^H; ours `nplm ppl`).", "",
              "| model | command | training wall time | test ppl |", "| --- | --- | --- | --- |", *rows, "",
              "1-minute load average at the four runs' starts (2 cores; above 2, other jobs shared the machine): "
              + ", ".join(f"{load:.1f}" for load in loads) + ".", "",
              "Aim: a lower test ppl than each in no more wall-clock time.", *verdicts]
    return lines
