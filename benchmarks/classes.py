"""Class n-grams on Brown (issue 18): our exchange clustering beside SRILM's ngram-class,
in turn on the same data, and class 3- and 5-grams alone and mixed with KN5 and with our
best network."""
import json
import math
import os
import subprocess
import time

from log_bilinear import KN5_TEST, _kn5, _mixture
from runs import LSTM_RUNS
from sections import NPLM, OUT, _ppl, _vocabulary

from nplmtk.corpus import Corpus
from nplmtk.ngram.classes import WordClasses
from nplmtk.ngram.exchange import BigramCounts, ClassBigramState
from nplmtk.vocab import Vocabulary

CLASS_SIZES = (150, 500, 1000)
SRILM_SIZES = (150, 500)  # SRILM's -incremental takes about 4 and 14 minutes of one core for these
ORDERS = (3, 5)


def _seconds(args, **kwargs):
    start = time.perf_counter()
    result = subprocess.run(args, check=True, capture_output=True, text=True, **kwargs)
    return time.perf_counter() - start, result


def training_log10_likelihood(classes_path, train, vocab_path):
    """log10 of the class bigram model's training likelihood, p(w | v) = p(c(w) | c(v)) p(w | c(w))
    with maximum-likelihood estimates, over every word and </s> (the same measure for
    any classes file), and its perplexity."""
    vocab = Vocabulary.read(vocab_path)
    corpus = Corpus.read(train, vocab)
    classes = WordClasses.read(classes_path)
    names = {name: i for i, name in enumerate(sorted(set(classes.class_of.values())))}
    own = len(names)
    class_of = []
    for word in vocab.words:
        if word in classes.class_of:
            class_of.append(names[classes.class_of[word]])
        else:  # <s>, </s>, unclustered words: a class each
            class_of.append(own)
            own += 1
    log10 = ClassBigramState(BigramCounts.from_corpus(corpus), class_of, own).log_likelihood() / math.log(10)
    return log10, 10 ** (-log10 / (corpus.num_words + corpus.num_sentences))


def _srilm_text_with_unk(train, vocab_path):
    """Brown train with the words outside the vocabulary as <unk> (ngram-class's input)."""
    path = os.path.join(OUT, "train-unk.txt")
    words = set(Vocabulary.read(vocab_path).words)
    with open(train, encoding="utf-8") as f, open(path, "w", encoding="utf-8") as out:
        for line in f:
            out.write(" ".join(w if w in words else "<unk>" for w in line.split()) + "\n")
    return path


def class_models(brown, peak):
    train, valid, test = (os.path.join(brown, f"{name}.txt") for name in ("train", "valid", "test"))
    vocab = _vocabulary(brown)
    srilm = os.environ.get("SRILM_BIN")
    lines = ["## Class n-grams on Brown (issue 18)", "",
             "Classes: `nplm ngram-class -text train.txt -vocab vocab.txt -numclasses K -classes cK.classes` (the "
             "exchange algorithm, at most 20 passes, stopping when a pass gains less than 1e-5 relatively)"
             + (", and SRILM 1.7.3's `ngram-class -vocab vocab.txt -text train-unk.txt -numclasses K -incremental "
                "-classes sK.classes` (Brown et al.'s greedy merging; train-unk.txt has the words outside the "
                "vocabulary as <unk>), run in turn with ours" if srilm else "") + ". Likelihood: log10 of the "
             "class bigram model's training likelihood, p(w | v) = p(c(w) | c(v)) p(w | c(w)) with ML estimates, "
             "over the 835,753 words and </s> of Brown train, computed the same way for both tools' classes, and "
             "its perplexity. Time: the whole command, one core.", "",
             "| K | tool | seconds | training log10 likelihood | training ppl |", "| --- | --- | --- | --- | --- |"]
    classes = {}
    unk_text = _srilm_text_with_unk(train, vocab) if srilm else None
    for size in CLASS_SIZES:
        ours = os.path.join(OUT, f"c{size}.classes")
        log = os.path.join(OUT, f"c{size}.log")
        seconds, _ = _seconds([NPLM, "ngram-class", "-text", train, "-vocab", vocab, "-numclasses", str(size),
                               "-classes", ours, "-log", log, "-quiet"])
        passes = len(open(log).readlines()) - 1
        log10, ppl = training_log10_likelihood(ours, train, vocab)
        lines.append(f"| {size} | nplm ({passes} passes) | {seconds:.0f} | {log10:,.0f} | {ppl:.1f} |")
        classes[f"c{size}"] = ours
        if srilm and size in SRILM_SIZES:
            theirs = os.path.join(OUT, f"s{size}.classes")
            their_seconds, _ = _seconds([os.path.join(srilm, "ngram-class"), "-vocab", vocab, "-text", unk_text,
                                         "-numclasses", str(size), "-incremental", "-classes", theirs])
            log10, ppl = training_log10_likelihood(theirs, train, vocab)
            lines.append(f"| {size} | SRILM | {their_seconds:.0f} ({their_seconds / seconds:.1f}x ours) | "
                         f"{log10:,.0f} | {ppl:.1f} |")
            classes[f"s{size}"] = theirs
    kn5 = _kn5(brown)
    trained = [run for run in LSTM_RUNS if os.path.exists(run.model_path)]
    network = None
    if trained:
        def kept(run):
            return min(json.loads(line)["valid_ppl"] for line in open(run.log_path))
        network = min(trained, key=kept)
    lines += ["", "Class n-grams: `nplm ngram-count -text train.txt -vocab vocab.txt -classes cK.classes -order N "
              "-lm cK-knN.nplm` (interpolated modified Kneser-Ney over the classes), `nplm ppl -lm cK-knN.nplm "
              "-text test.txt`; mixed by `nplm mix` (EM weights on Brown valid) with KN5 (`nplm ngram-count "
              f"-order 5 -unk`, test ppl {KN5_TEST})" + (f" and with {network.name} (our best network, "
                                                         "`make brown-lstm`)" if network else "") + ".", "",
              "| classes | N | test ppl | mixed with KN5 (EM weights) | "
              + ("mixed with the network (EM weights) |" if network else ""),
              "| --- | --- | --- | --- |" + (" --- |" if network else "")]
    for name, path in classes.items():
        for order in ORDERS:
            model = os.path.join(OUT, f"{name}-kn{order}.nplm")
            subprocess.run([NPLM, "ngram-count", "-text", train, "-vocab", vocab, "-classes", path, "-order",
                            str(order), "-lm", model], check=True, capture_output=True)
            alone = _ppl(model, test)
            weights, with_kn5 = _mixture([kn5, model], valid, test, f"{name}-kn{order}-kn5.mix")
            row = f"| {name} | {order} | {alone:.2f} | {with_kn5:.2f} ({weights}) |"
            if network:
                weights, with_network = _mixture([network.model_path, model], valid, test,
                                                 f"{name}-kn{order}-{network.name}.mix")
                row += f" {with_network:.2f} ({weights}) |"
            lines.append(row)
    if network:
        lines += ["", f"{network.name} alone: {_ppl(network.model_path, test):.2f}."]
    if srilm and "s150" in classes:
        lines += ["", _srilm_class_trigram(train, test, vocab, classes["s150"], srilm)]
    return lines


def _srilm_class_trigram(train, test, vocab, classes, srilm):
    """SRILM's recipe (Witten-Bell class trigram on SRILM's own 150 classes) through both
    tools: the class ARPA files compared, and the ppl reports."""
    ours_arpa, theirs_arpa = os.path.join(OUT, "s150-wb3.arpa"), os.path.join(OUT, "s150-wb3-srilm.arpa")
    subprocess.run([NPLM, "ngram-count", "-text", train, "-vocab", vocab, "-classes", classes, "-order", "3",
                    "-wbdiscount", "-interpolate", "-lm", ours_arpa], check=True, capture_output=True)
    word_classes = WordClasses.read(classes)
    words = set(Vocabulary.read(vocab).words)
    replaced = os.path.join(OUT, "train-s150.txt")  # what SRILM's replace-words-with-classes writes
    with open(train, encoding="utf-8") as f, open(replaced, "w", encoding="utf-8") as out:
        for line in f:
            tokens = [w if w in words else "<unk>" for w in line.split()]
            out.write(" ".join(word_classes.replace(tokens)) + "\n")
    subprocess.run([os.path.join(srilm, "ngram-count"), "-text", replaced, "-order", "3", "-wbdiscount",
                    "-interpolate", "-gt1min", "1", "-gt2min", "1", "-gt3min", "1", "-lm", theirs_arpa], check=True,
                   capture_output=True)
    same_arpa = open(ours_arpa, "rb").read() == open(theirs_arpa, "rb").read()
    ours = subprocess.run([NPLM, "ppl", "-lm", ours_arpa, "-classes", classes, "-text", test], check=True,
                          capture_output=True, text=True).stdout
    theirs = subprocess.run([os.path.join(srilm, "ngram"), "-lm", theirs_arpa, "-classes", classes, "-simple-classes",
                             "-unk", "-vocab", vocab, "-order", "3", "-ppl", test], check=True, capture_output=True,
                            text=True).stdout
    return (f"SRILM's recipe on SRILM's 150 classes (replace-words-with-classes, `ngram-count -order 3 -wbdiscount "
            f"-interpolate -gtNmin 1`, `ngram -classes -simple-classes -unk -vocab`) and ours (`nplm ngram-count "
            f"-classes s150.classes -order 3 -wbdiscount -interpolate`, `nplm ppl -classes`): the class ARPA files "
            f"are {'the same byte for byte' if same_arpa else 'different'}, and the reports "
            f"{'are the same' if ours == theirs else 'differ'}: `{ours.strip().splitlines()[-1]}`"
            + ("" if ours == theirs else f" against SRILM's `{theirs.strip().splitlines()[-1]}`") + ".")
