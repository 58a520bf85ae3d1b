"""`make brown-ctc`: nplm's models inside a CTC beam search (issue 48), written to BENCHMARKS.md.

Character-level CTC emissions are made from the first N sentences of Brown test by a fixed
noise process (`emissions`, one numpy generator per sentence, seeded with the seed and the
sentence's number), then decoded by pyctcdecode's beam search (beam width 32, its default
alpha 0.5 and beta 1.0, unk_score_offset -10, the vocabulary's words as its unigrams; no
setting looked at on the test text) with no language model, with KN5 of Brown train through
KenLM's own Python module, with the same KN5 through nplm's adapter
(nplmtk.integrations.pyctcdecode; the two must give the same words), with the LSTM of
`make brown-fast` (runs/lstm-fast.nplm, trained first when missing) and with that LSTM and
KN5 mixed by weights fitted on Brown valid (`nplm mix`). Reported: the word error rate
against the true sentences, and the decoder's time per utterance (the median, the models
loaded before).

The noise process, per sentence (its words joined by single spaces, case kept), on logits
turned into log-probabilities by a softmax over the labels (the blank first):
- each character lasts 1 to 3 frames (uniformly), then one blank frame;
- every label's logit in every frame is N(0, 1), the true label's raised by PEAK (5);
- with probability CONFUSE (0.3) a frame also raises another label, drawn uniformly from the
  alphabet, by PEAK + N(-MARGIN, 1), MARGIN 1: about a third of those confusions sound better
  than the truth, so that the language model has to decide.
Its three numbers were set on the first 30 sentences of Brown valid, never on test (the
beam search of width 32: 74% WER without a model, 11% with KN5).
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from run import machine_stamp, write_sections  # noqa: E402
from runs import RUNS, VOCAB_MIN_COUNT, model_or_trained  # noqa: E402

from nplmtk.lattice.wer import word_error_rate  # noqa: E402

HEADING = "## CTC beam search with nplm's models on Brown (issue 48)"
LSTM = RUNS["lstm-fast"]
BEAM_WIDTH = 32
BLANK = ""
PEAK, CONFUSE, MARGIN = 5.0, 0.3, 1.0  # the noise process's numbers


def emissions(text, labels, seed, number):
    """(frames, labels) natural-log probabilities of `text` by the noise process above."""
    rng = np.random.default_rng([seed, number])
    index = {label: i for i, label in enumerate(labels)}
    truth = []
    for char in text:
        truth += [index[char]] * int(rng.integers(1, 4)) + [0]
    frames = len(truth)
    logits = rng.normal(0.0, 1.0, size=(frames, len(labels)))
    logits[np.arange(frames), truth] += PEAK
    confused = np.flatnonzero(rng.random(frames) < CONFUSE)
    other = rng.integers(1, len(labels), size=len(confused))
    logits[confused, other] += PEAK + rng.normal(-MARGIN, 1.0, size=len(confused))
    logits -= logits.max(axis=1, keepdims=True)  # a log-softmax with max-subtraction
    return (logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))).astype(np.float32)


def decode_all(decoder, frames):
    """The 1-best words of each utterance, and the median seconds of one decoding."""
    texts, seconds = [], []
    for logits in frames:
        start = time.perf_counter()
        texts.append(decoder.decode(logits, beam_width=BEAM_WIDTH))
        seconds.append(time.perf_counter() - start)
    return [text.split() for text in texts], statistics.median(seconds)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--brown", default="../shared/data/brown")
    parser.add_argument("--nplm", default=os.path.join(os.path.dirname(sys.executable), "nplm"))
    parser.add_argument("--first", type=int, default=100, help="utterances of the first N sentences of Brown test")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--lstm", default=LSTM.model_path,
                        help="the LSTM (default: make brown-fast's, trained when missing)")
    parser.add_argument("--work", default=os.path.join("bench", "out", "ctc"))
    parser.add_argument("--out", default="BENCHMARKS.md")
    args = parser.parse_args()
    from importlib.metadata import version

    import kenlm
    import pyctcdecode

    import nplmtk
    from nplmtk.integrations.pyctcdecode import LanguageModel

    train, valid, test = (os.path.join(args.brown, f"{name}.txt") for name in ("train", "valid", "test"))
    if os.path.exists(args.work):
        shutil.rmtree(args.work)
    os.makedirs(args.work)
    vocab = os.path.join(args.work, "vocab.txt")
    subprocess.run([args.nplm, "vocab", "-text", train, "-min-count", str(VOCAB_MIN_COUNT), "-write-vocab", vocab],
                   check=True)
    kn5 = os.path.join(args.work, "kn5.arpa")
    subprocess.run([args.nplm, "ngram-count", "-text", train, "-order", "5", "-vocab", vocab, "-unk", "-kndiscount",
                    "-interpolate", "-lm", kn5], check=True)
    trained = model_or_trained(LSTM, args.lstm, args.brown, args.nplm, "brown-ctc")
    lstm = os.path.join(args.work, "lstm.nplm")  # a mixture's components lie in its folder
    shutil.copyfile(args.lstm, lstm)
    mixture = os.path.join(args.work, "lstm-kn5.mix")
    fitted = subprocess.run([args.nplm, "mix", "-lm", lstm, "-lm", kn5, "-text", valid, "-write", mixture],
                            check=True, stdout=subprocess.PIPE, text=True).stdout

    with open(test, encoding="utf-8") as f:
        sentences = [line.split() for line in f][:args.first]
    sentences = [words for words in sentences if words]
    texts = [" ".join(words) for words in sentences]
    with open(train, encoding="utf-8") as f:
        characters = set(f.read()) | set("".join(texts))
    labels = [BLANK] + sorted(characters - {" ", "\n"}) + [" "]
    frames = [emissions(text, labels, args.seed, number) for number, text in enumerate(texts)]
    known = set(open(vocab, encoding="utf-8").read().split())
    unigrams = sorted(known - {"<unk>", "<s>", "</s>"})
    alphabet = pyctcdecode.Alphabet.build_alphabet(labels)

    def with_lm(model):
        return pyctcdecode.BeamSearchDecoderCTC(alphabet, model)

    decoders = [("no language model", lambda: pyctcdecode.BeamSearchDecoderCTC(alphabet)),
                ("KN5, KenLM's module", lambda: with_lm(pyctcdecode.LanguageModel(kenlm.Model(kn5), unigrams))),
                ("KN5, nplm", lambda: with_lm(LanguageModel(nplmtk.load(kn5), unigrams))),
                ("LSTM (brown-fast), nplm", lambda: with_lm(LanguageModel(nplmtk.load(lstm), unigrams))),
                ("LSTM + KN5 (weights fitted on valid), nplm",
                 lambda: with_lm(LanguageModel(nplmtk.load(mixture), unigrams)))]
    rows, outputs = [], {}
    for label, make in decoders:
        print(f"brown-ctc: {label} ...", file=sys.stderr)
        start = time.perf_counter()
        decoder = make()
        loading = time.perf_counter() - start
        best, seconds = decode_all(decoder, frames)
        outputs[label] = best
        rate, errors, words = word_error_rate(sentences, best)
        rows.append((label, rate, errors, words, seconds, loading))
    same = outputs["KN5, KenLM's module"] == outputs["KN5, nplm"]
    weights = " ".join(line for line in fitted.splitlines() if "weights" in line)

    body = [HEADING, "", machine_stamp(), "",
            f"The first {len(sentences)} sentences of Brown test as character-level CTC emissions "
            f"({len(labels)} labels with the blank, {sum(len(f) for f in frames):,} frames; "
            f"benchmarks/brown_ctc.py's noise process, seed {args.seed}), decoded by pyctcdecode "
            f"{version('pyctcdecode')} (beam width {BEAM_WIDTH}, "
            "alpha 0.5, beta 1.0, the vocabulary's words as unigrams). KenLM's module and nplm's adapter over the same "
            f"ARPA file give {'the same' if same else 'DIFFERENT'} 1-best words for every utterance.", "",
            "| decoder | WER | errors / words | decoding per utterance (median) | loading |",
            "| --- | --- | --- | --- | --- |"]
    for label, rate, errors, words, seconds, loading in rows:
        body.append(f"| {label} | {100 * rate:.2f}% | {errors} / {words} | {1000 * seconds:.1f} ms | {loading:.2f} s |")
    body += ["", f"LSTM: {LSTM.model_path}{trained}. Mixture (LSTM, KN5), by `nplm mix` on Brown valid: "
             f"{weights or 'weights as nplm mix fitted them'}.", "",
             "Commands:", "",
             f"    nplm ngram-count -text train.txt -order 5 -vocab vocab.txt -unk -kndiscount -interpolate -lm kn5.arpa",
             f"    nplm mix -lm lstm.nplm -lm kn5.arpa -text valid.txt -write lstm-kn5.mix",
             f"    make brown-ctc   # python benchmarks/brown_ctc.py --first {args.first} --seed {args.seed}", ""]
    write_sections(args.out, [body])
    print("\n".join(body))


if __name__ == "__main__":
    main()
