"""nplm ngram-class: word classes for class n-gram models (SRILM's ngram-class)."""
import json
import math
import sys

import click
import numpy as np

from nplmtk.corpus import Corpus
from nplmtk.errors import NplmError
from nplmtk.io import check_readable, check_writable, open_output
from nplmtk.ngram.classes import CLASS_NAME, WordClasses, token_ids, token_vocabulary
from nplmtk.ngram.counts import NgramCounts
from nplmtk.ngram.exchange import BigramCounts, brown_merging, exchange
from nplmtk.text import Normalizer
from nplmtk.vocab import Vocabulary, count_words

from .options import SEED_MAX, Integer, Real, example, flag, option


@click.command("ngram-class", epilog=example(
    "nplm ngram-class -text train.txt -vocab vocab.txt -numclasses 150 -classes brown150.classes",
    "nplm ngram-count -text train.txt -vocab vocab.txt -classes brown150.classes -order 3 -lm c3.arpa",
    "nplm ppl -lm c3.arpa -classes brown150.classes -text test.txt"))
@option("text", multiple=True, required=True, metavar="FILE", help="Training text (repeatable).")
@option("vocab", metavar="FILE", default=None, help="Vocabulary; other words count as <unk> (a word to cluster).")
@option("numclasses", type=Integer(1), required=True, metavar="K", help="Number of classes.")
@option("classes", "-write-classes", "--write-classes", "classes_out", metavar="FILE", default=None,
        help="Write the classes (SRILM's classes format: class p(word|class) word).")
@option("class-counts", "-write-counts", "--write-counts", "counts_out", metavar="FILE", default=None,
        help="Write the class unigram and bigram counts (for ngram-count -read).")
@flag("full", help="Brown et al. (1992)'s bottom-up merging instead (SRILM's -full): every word its own class, then "
      "the least harmful merge again and again; O(V^3), at most 2,000 words.")
@option("passes", type=Integer(1), default=20, help="At most this many exchange passes.")
@option("tolerance", type=Real(0), default=1e-5,
        help="Stop once a pass raises the log-likelihood by less than this, relatively.")
@option("seed", type=Integer(0, SEED_MAX), default=0, help="Seed of the order in which each pass visits the words.")
@option("log", metavar="FILE", default=None, help="Write the training log-likelihood after each pass (JSON lines).")
@flag("quiet", help="No progress bar.")
@flag("lower", help="Lower-case the text first.")
@flag("map-numbers", help="Map numeric tokens to <num>.")
def command(text, vocab, numclasses, classes_out, counts_out, full, passes, tolerance, seed, log, quiet, lower,
            map_numbers):
    """Cluster the words into classes by the exchange algorithm (Kneser & Ney 1993): each
    pass moves every word to the class that most raises the training likelihood of the
    class bigram model p(w | v) = p(c(w) | c(v)) p(w | c(w)); <s> and </s> stay alone.
    After each pass (with -full: every 100 merges) one line on stderr gives the model's
    training logprob and ppl in SRILM's terms (log10, over words and </s>)."""
    if classes_out is None and counts_out is None:
        raise NplmError("nothing to do: give -classes FILE and/or -class-counts FILE")
    for path in list(text) + ([vocab] if vocab else []):
        check_readable(path)
    for path in (classes_out, counts_out, log):
        check_writable(path)
    normalize = Normalizer(lower=lower, map_numbers=map_numbers)
    vocabulary = Vocabulary.read(vocab) if vocab else Vocabulary.from_counts(count_words(text, normalize))
    corpora = [Corpus.read(path, vocabulary, unk=True, normalize=normalize) for path in text]
    corpus = Corpus.concatenate(corpora) if len(corpora) > 1 else corpora[0]
    counts = np.bincount(corpus.ids, minlength=len(vocabulary))
    bigrams = BigramCounts.from_corpus(corpus)
    tokens = corpus.num_words + corpus.num_sentences
    history_file = [] if log else None

    def report(record):
        log10 = record["log_likelihood"] / math.log(10)
        step = f"{record['classes']} classes" if full else f"pass {record['pass']}"
        moved = "" if full else f" moved {record['moved']} words"
        click.echo(f"nplm ngram-class: {step}: logprob= {log10:.7g} "
                   f"ppl= {math.exp(-log10 / tokens * math.log(10)):.7g}{moved}", err=True)
        if history_file is not None:
            history_file.append(dict(record, log10_likelihood=log10))
            with open_output(log) as out:
                out.writelines(json.dumps(r) + "\n" for r in history_file)

    def progress(steps, number):
        if quiet or not sys.stderr.isatty():
            return steps
        from tqdm import tqdm
        return tqdm(steps, desc="merges" if full else f"pass {number}", unit="" if full else "w", leave=False,
                    file=sys.stderr)

    # words that never occur (in -vocab only) have nothing to place them by: no class
    fixed = [vocabulary.bos, vocabulary.eos]
    if full:
        class_of, _ = brown_merging(bigrams, counts, numclasses, fixed, progress=progress, log=report)
    else:
        class_of, _ = exchange(bigrams, counts, numclasses, fixed, passes=passes, seed=seed, tolerance=tolerance,
                               progress=progress, log=report)
    word_classes = classes_from_assignment(vocabulary, class_of, counts, numclasses)
    if classes_out is not None:
        word_classes.write(classes_out)
    if counts_out is not None:
        names = token_vocabulary(vocabulary, word_classes)
        ids = token_ids(vocabulary, word_classes, names)
        NgramCounts.from_corpus(Corpus(ids[corpus.ids], corpus.offsets, names), 2).write(counts_out)


def classes_from_assignment(vocabulary, class_of, counts, num_classes):
    """WordClasses from class ids 0..K-1 per word (others: no class), p(w | c) from the
    word counts; classes named CLASS-00001.. by falling frequency."""
    members = [w for w in range(len(vocabulary)) if class_of[w] < num_classes]
    totals = np.bincount(class_of[members], weights=counts[members], minlength=num_classes)
    rank = np.empty(num_classes, dtype=np.int64)
    rank[np.lexsort((np.arange(num_classes), -totals))] = np.arange(num_classes)
    words = vocabulary.words
    return WordClasses({words[w]: CLASS_NAME.format(rank[class_of[w]] + 1) for w in members},
                       {words[w]: float(counts[w] / totals[class_of[w]]) for w in members})
