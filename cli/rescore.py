"""nplm rescore: re-rank an N-best list with any model (SRILM's `ngram -lm M -nbest LIST`)."""
import click

from nplmtk.io import check_readable, check_writable, open_output
from nplmtk.models import load
from nplmtk.rescore import read_nbest, rescore

from .options import Real, example, flag, option


@click.command("rescore", epilog=example(
    "nplm rescore -lm kn5.arpa -nbest utt1.nbest -lm-weight 8 -word-penalty 0",
    "nplm rescore -lm kn5-lstm.mix -nbest utt1.nbest -best"))
@option("lm", required=True, metavar="MODEL", help="Any model: ARPA, network, mixture.")
@option("nbest", required=True, metavar="FILE", help="The N-best list: SRILM's format (ascore lscore nwords words) "
        "or NBestList1.0 ((bytelog score) words, the score taken as the acoustic one).")
@option("lm-weight", type=Real(), default=8.0, help="w in ascore + w lscore + p nwords (SRILM's -rescore-lmw).")
@option("word-penalty", type=Real(), default=0.0, help="p in ascore + w lscore + p nwords (SRILM's -rescore-wtw).")
@option("rescore-output", metavar="FILE", default="-", help="Write the re-ranked list here, in SRILM's format.")
@flag("best", help="Write only the best hypothesis's words.")
@flag("allow-paths", help="A mixture may name components outside its folder.")
def command(lm, nbest, lm_weight, word_penalty, rescore_output, best, allow_paths):
    """Add each hypothesis's log10 score under MODEL (with </s>, after <s>) and re-rank by
    ascore + lm-weight * lscore + word-penalty * nwords, best first."""
    check_readable(nbest)
    check_writable(rescore_output)
    ranked = rescore(load(lm, allow_paths), read_nbest(nbest), lm_weight, word_penalty)
    with open_output(rescore_output) as out:
        if best:
            out.write(" ".join(ranked[0].words) + "\n" if ranked else "")
        else:
            out.write("".join(h.line() + "\n" for h in ranked))
