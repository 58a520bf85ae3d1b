"""nplm lattice-tool: decode HTK lattices with a language model as SRILM's lattice-tool
(its option names): the 1-best (-viterbi-decode), the words of least expected error
(-posterior-decode), the N-best (-nbest-decode N -out-nbest-dir DIR, SRILM's N-best
format, which `nplm rescore` reads), each lattice as a language model (-ppl FILE) and the
lattice expanded with the model's scores (-write-htk -out-lattice-dir DIR). A back-off n-gram
model is applied exactly (-order); a network by the n-gram history approximation
(-approx-order, exact for a feed-forward network of that order)."""
import sys

import click

from nplmtk.errors import NplmError
from nplmtk.lattice.decode import Scales
from nplmtk.lattice.tool import LatticeTool, LatticeToolSpec

from .options import Integer, Real, example, flag, option, spell


@click.command("lattice-tool", epilog=example(
    "nplm lattice-tool -read-htk -in-lattice-list lats.list -lm kn3.arpa -order 3 -unk -viterbi-decode",
    "nplm lattice-tool -read-htk -in-lattice utt1.lat.gz -lm kn3.arpa -unk -nbest-decode 10 -out-nbest-dir nbest"))
@flag("read-htk", help="Read HTK Standard Lattice Format (the only format read).")
@option("in-lattice", metavar="FILE", multiple=True, help="A lattice (gzip allowed); may be repeated.")
@option("in-lattice-list", metavar="FILE", help="A file naming one lattice a line.")
@option("lm", metavar="MODEL", help="A model whose scores replace the lattice's: a back-off n-gram model (ARPA, "
       "binary) or a network (nplm model file).")
@option("order", type=Integer(1, 10), default=3, help="A back-off -lm's order, and the decoder's context + 1.")
@option("approx-order", type=Integer(2, 20, auto=True), help="A network -lm: the n-gram history approximation's order "
        "K (Liu et al. 2016): paths into a lattice node whose last K-1 words agree merge, the best one's network "
        "state carried on, and the written lattice has a node per (node, last K-1 words). Exact for a "
        "feed-forward network of order K; a Transformer reads each path's last K-1 words alone. auto: the smallest K from 2 to 7 whose 1-best paths of the "
        "-tune-lattice-list lattices are within 0.5% word edits of K 7's (no references needed), printed on stderr. "
        "[a feed-forward network's order; 5 for a recurrent one or a Transformer]")
@option("tune-lattice-list", metavar="FILE", help="Held-out lattices (not the ones decoded), one a line, on which "
        "-approx-order auto is picked.")
@flag("unk", help="Words outside the model's vocabulary (and -vocab) are <unk>.")
@option("vocab", metavar="FILE", help="More known words, one a line (with -unk, not mapped to <unk>).")
@option("htk-lmscale", type=Real(-Scales.LIMIT, Scales.LIMIT), help="Override the lattices' lmscale.")
@option("htk-acscale", type=Real(-Scales.LIMIT, Scales.LIMIT), help="Override the lattices' acscale.")
@option("htk-wdpenalty", type=Real(-Scales.LIMIT, Scales.LIMIT), help="Override the lattices' wdpenalty (log10).")
@flag("viterbi-decode", help="Print each lattice's best path: NAME <s> words </s>.")
@flag("posterior-decode", help="Print each lattice's words of least expected word error (a word mesh's best): "
      "NAME <s> words </s>.")
@option("posterior-scale", type=Real(0, low_open=True), default=8.0,
        help="Divide the lattice's log scores by this for posteriors.")
@option("nbest-decode", type=Integer(0), default=0, help="Write the N best paths of each lattice.")
@option("out-nbest-dir", metavar="DIR", help="Where -nbest-decode writes NAME.gz (made if missing).")
@option("ppl", metavar="FILE", help="Score the sentences of FILE by each lattice taken as a language model (its best "
        "path of their words) and print the perplexity report.")
@flag("write-htk", help="Write the lattices in HTK format into -out-lattice-dir: with -lm, expanded so that each "
      "node has one context (the last -order-1 words; -approx-order-1 for a network) and each link the model's "
      "log10 probability as l= (base=10, the scales used in the header); without, as read.")
@option("out-lattice-dir", metavar="DIR", help="Where -write-htk writes NAME.lat.gz (made if missing).")
def command(read_htk, in_lattice, in_lattice_list, lm, order, approx_order, tune_lattice_list, unk, vocab, htk_lmscale,
            htk_acscale, htk_wdpenalty, viterbi_decode, posterior_decode, posterior_scale, nbest_decode, out_nbest_dir,
            ppl, write_htk, out_lattice_dir):
    """Each lattice in turn (one in memory at a time); a bad lattice is one line on stderr
    naming its file and line, the others go on, and the exit status is then 2."""
    if not read_htk:
        raise NplmError("only HTK lattices are read: give -read-htk")
    tool = LatticeTool(LatticeToolSpec(
        list(in_lattice), in_lattice_list, lm, order, approx_order, unk, vocab, htk_lmscale, htk_acscale,
        htk_wdpenalty, viterbi_decode, posterior_decode, posterior_scale, nbest_decode, out_nbest_dir, ppl,
        write_htk, out_lattice_dir, tune_lattice_list))
    if tool.approx_pick is not None:
        _print_approx_pick(tool.approx_pick, tune_lattice_list)

    def failed(err):  # as main.py prints an error, and on to the next lattice
        print(f"nplm: {err.render(lambda name: spell(name, 'lattice-tool'))}", file=sys.stderr)
    if tool.run(click.echo, failed):
        sys.stdout.flush()
        sys.exit(2)


def _print_approx_pick(pick, listing):
    """-approx-order auto's pick on stderr, with each order's 1-best differences from the largest's."""
    differences = ", ".join(f"{setting['order']}: {share:.2%}" for setting, share in pick.tried[1:])
    measured = f" (1-best word edits per word against order {pick.tried[0][0]['order']}'s: {differences})" \
        if pick.tried else ""
    click.echo(f"nplm lattice-tool: -approx-order auto on {listing}: {pick.setting['order']}{measured}", err=True)
    for note in pick.notes:
        click.echo(f"nplm lattice-tool: -approx-order auto: {note}", err=True)
