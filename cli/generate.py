"""nplm generate: sample sentences from any model (SRILM's `ngram -lm M -gen N -seed S`)."""
import click

from nplmtk.generate import DEFAULT_BATCH, sample_sentences
from nplmtk.io import check_writable, open_output
from nplmtk.models import load

from .options import SEED_MAX, Integer, Real, example, option


@click.command("generate", epilog=example(
    "nplm generate -lm kn5.arpa -n 5 -seed 7",
    "nplm generate -lm lstm.nplm -n 3 -temperature 0.8 -prefix \"The jury\""))
@option("lm", required=True, metavar="MODEL", help="Any model with a next-word distribution (ARPA or network).")
@option("n", type=Integer(0), default=10, help="Sentences to sample (SRILM's -gen N).")
@option("seed", type=Integer(0, SEED_MAX), default=1, help="Seed of the sampling: the same seed, the same sentences.")
@option("temperature", type=Real(0, low_open=True), default=1.0,
        help="Sample from p^(1/T), renormalised: below 1 sharper, above 1 flatter.")
@option("prefix", default="", help="Words every sentence starts with (its next words are sampled after them).")
# SRILM's bound on a generated sentence (its -gen stops at 50,000 words, as srilm_sentences)
@option("max-words", type=Integer(1, 50_000), default=100, help="Stop a sentence without </s> at this length.")
@option("batch", type=Integer(1, 1 << 20), default=DEFAULT_BATCH,
        help="Sentences drawn side by side by a recurrent network or an MLP (one product per layer for all); the "
        "sentences are the same whatever the batch.")
@option("write", metavar="FILE", default="-", help="Write the sentences here, one per line ('-': stdout).")
def command(lm, n, seed, temperature, prefix, max_words, batch, write):
    """Sample sentences from a model: each word from P(w | <s>, the words so far), until </s>."""
    check_writable(write)
    sentences = sample_sentences(load(lm), n, seed, temperature, prefix, max_words, batch)
    with open_output(write) as out:
        for words in sentences:
            out.write(" ".join(words) + "\n")
