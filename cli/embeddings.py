"""nplm embeddings: a network's word features in word2vec's formats, and nearest words."""
import click

from nplmtk.embeddings import FORMATS, nearest, word_features, write_embeddings
from nplmtk.errors import NplmError
from nplmtk.io import check_writable
from nplmtk.models import load

from .options import Integer, example, option


@click.command("embeddings", epilog=example(
    "nplm embeddings -lm lstm.nplm -write vectors.txt",
    "nplm embeddings -lm mlp9.nplm -neighbours Monday -count 5"))
@option("lm", required=True, metavar="MODEL", help="A network (any -arch) or its training checkpoint.")
@option("write", metavar="FILE", default=None, help="Write every word's feature vector here ('-': stdout).")
@option("format", "fmt", type=click.Choice(FORMATS), default="word2vec",
        help="word2vec text (gensim's KeyedVectors.load_word2vec_format), its binary form, or word<TAB>values.")
@option("neighbours", metavar="WORD", default=None, help="Print the words nearest to WORD by cosine.")
@option("count", type=Integer(1), default=10, help="-neighbours: how many.")
def command(lm, write, fmt, neighbours, count):
    """The word feature vectors a network learned (C; R for the log-bilinear models)."""
    if write is None and neighbours is None:
        raise NplmError("nothing to do: give -write FILE and/or -neighbours WORD")
    check_writable(write)
    words, vectors = word_features(load(lm))
    if neighbours is not None:
        for word, cosine in nearest(words, vectors, neighbours, count):
            click.echo(f"{word}\t{cosine:.4f}")
    if write is not None:
        write_embeddings(write, words, vectors, fmt)
