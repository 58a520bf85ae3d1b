"""nplm vocab: build a vocabulary from text."""
import click

from nplmtk.errors import NplmError
from nplmtk.io import check_writable
from nplmtk.text import Normalizer
from nplmtk.vocab import UNK, Vocabulary, count_words

from .options import Integer, example, flag, option


@click.command("vocab", epilog=example(
    "nplm vocab -text train.txt -min-count 4 -write-vocab vocab.txt -write-counts counts.txt"))
@option("text", multiple=True, required=True, metavar="FILE",
        help="Training text, one sentence per line (repeatable; '-' is stdin).")
@option("write-vocab", metavar="FILE", default=None, help="Write the vocabulary, one word per line.")
@option("write-counts", metavar="FILE", default=None, help="Write 'word<TAB>count' lines in vocabulary order.")
@option("min-count", type=Integer(1), default=1, help="Rarer words map to the unknown word.")
@option("max-size", type=Integer(0), default=None,
        help="Keep at most N words besides <unk>, <s> and </s>.")
@flag("lower", help="Lower-case the text first.")
@flag("map-numbers", help="Map numeric tokens to one class token, <num>.")
@option("unk", metavar="TOKEN", default=UNK, help="Spelling of the unknown word.")
def command(text, write_vocab, write_counts, min_count, max_size, lower, map_numbers, unk):
    """Count the words of the text and keep the frequent ones.

    The vocabulary always holds <unk>, <s> and </s> (ids 0, 1, 2); the other words
    follow by count, descending, then byte order. Without -write-vocab or
    -write-counts the vocabulary is written to stdout.
    """
    if text.count("-") > 1:
        raise NplmError("-: stdin can be read only once")
    for path in (write_vocab, write_counts):
        check_writable(path)
    counts = count_words(text, Normalizer(lower=lower, map_numbers=map_numbers))
    vocab = Vocabulary.from_counts(counts, min_count=min_count, max_size=max_size, unk=unk)
    if write_vocab is None and write_counts is None:
        write_vocab = "-"
    if write_vocab is not None:
        vocab.write(write_vocab)
    if write_counts is not None:
        vocab.write(write_counts, with_counts=True)
