"""nplm toy-corpus: the built-in demo corpus with a known entropy."""
import math

import click

from nplmtk.io import open_output, read_lines
from nplmtk.toy import ToyGrammar
from nplmtk.vocab import sentence_tokens

from .options import SEED_MAX, Integer, example, option


@click.command("toy-corpus", epilog=example(
    "nplm toy-corpus -sentences 20000 -seed 1 -write train.txt",
    "nplm toy-corpus -score train.txt"))
@option("sentences", type=Integer(1), default=10000, help="Number of sentences to write.")
@option("seed", type=Integer(0, SEED_MAX), default=1, help="Random seed.")
@option("write", metavar="FILE", default="-", help="Output file ('-' is stdout).")
@option("score", metavar="FILE", default=None,
        help="Instead of writing, score FILE with the true grammar (the floor no model can pass).")
def command(sentences, seed, write, score):
    """English-like sentences from a small probabilistic grammar whose words of one
    class share roles (cat/dog, room/bedroom, walking/running, the/a) and whose
    entropy per token is known exactly."""
    grammar = ToyGrammar()
    if score is not None:
        lines = [sentence_tokens(line) for line in read_lines(score)]
        logprobs = [grammar.logprob(words) for words in lines if words]
        tokens = sum(len(words) + 1 for words in lines if words)
        click.echo(f"file {score}: {len(logprobs)} sentences, true model ppl= "
                   f"{math.exp(-sum(logprobs) / tokens):.6g}, entropy floor ppl= "
                   f"{grammar.perplexity_floor():.6g}")
        return
    with open_output(write) as out:
        for words in grammar.sentences(sentences, seed):
            out.write(" ".join(words) + "\n")
