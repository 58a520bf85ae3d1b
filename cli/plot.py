"""nplm plot: training curves of runs, or a map of a network's word features (matplotlib)."""
import click

from nplmtk.errors import NplmError
from nplmtk.io import check_readable, check_writable
from nplmtk.models import load
from nplmtk.plots import embedding_map, training_curves

from .options import Integer, example, flag, option


@click.command("plot", epilog=example(
    "nplm plot -log mlp9.log -log lstm.log -out curves.png",
    "nplm plot -lm lstm.nplm -embeddings -out map.png"))
@option("log", metavar="FILE", multiple=True, help="A train-nplm -log file; repeat to compare runs.")
@option("lm", metavar="MODEL", default=None, help="With -embeddings: the network whose features to map.")
@flag("embeddings", help="A 2-D map (principal components) of the features of the most frequent words.")
@option("words", type=Integer(2), default=100, help="-embeddings: how many words.")
@option("out", metavar="FILE.png", required=True, help="The figure (PNG).")
def command(log, lm, embeddings, words, out):
    """Train and valid perplexity against epochs and time, or a map of word features."""
    if bool(log) == (lm is not None and embeddings):
        raise NplmError("give -log FILE ... (training curves) or -lm MODEL -embeddings (a feature map)")
    for path in log:
        check_readable(path)
    check_writable(out)
    if log:
        training_curves(log, out)
    else:
        embedding_map(load(lm), out, words)
