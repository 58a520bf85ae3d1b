"""nplm ppl: score text with any model and report perplexity as SRILM does."""
import click

from nplmtk.errors import NplmError
from nplmtk.lm import load
from nplmtk.ppl import perplexity
from nplmtk.text import Normalizer

from .options import example, flag, option


@click.command("ppl", epilog=example(
    "nplm ppl -lm kn5.arpa -text test.txt",
    "nplm ppl -lm di3.nplm -ppl test.txt -debug 2 | less"))
@option("lm", metavar="MODEL", required=True, help="Model file: ARPA (.gz too) or an nplm model.")
@option("text", metavar="FILE", default=None, help="Text to score, one sentence per line.")
@option("ppl", "ppl_file", metavar="FILE", default=None, help="Same as -text (SRILM's spelling).")
@option("order", type=click.IntRange(min=1), default=None, help="Use n-grams up to this order only.")
@flag("unk", help="Accepted for SRILM compatibility: a model with an <unk> probability scores "
                  "out-of-vocabulary words with it; one without reports them as OOVs.")
@option("debug", type=click.IntRange(0, 2), default=0,
        help="0: totals; 1: each sentence too; 2: each word's probability too.")
@flag("lower", help="Lower-case the text first (as the model's training text was).")
@flag("map-numbers", help="Map numeric tokens to <num> (as the model's training text was).")
def command(lm, text, ppl_file, order, unk, debug, lower, map_numbers):
    """Report the perplexity of a model on a text in SRILM's `ngram -ppl` format."""
    if (text is None) == (ppl_file is None):
        raise NplmError("give the text to score with -text FILE (or -ppl FILE)")
    model = load(lm)
    if order is not None:
        if not hasattr(model, "truncated"):
            raise NplmError(f"{lm}: -order applies to n-gram models only")
        model = model.truncated(order)
    perplexity(model, text or ppl_file, debug=debug, write=click.echo,
               normalize=Normalizer(lower=lower, map_numbers=map_numbers))
