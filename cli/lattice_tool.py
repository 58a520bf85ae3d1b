"""nplm lattice-tool: decode HTK lattices with a language model as SRILM's lattice-tool
(its option names): the 1-best (-viterbi-decode), the words of least expected error
(-posterior-decode), the N-best (-nbest-decode N -out-nbest-dir DIR, SRILM's N-best
format, which `nplm rescore` reads), each lattice as a language model (-ppl FILE) and the
lattice expanded with the model's scores (-write-htk -out-lattice-dir DIR). A back-off n-gram
model is applied exactly (-order); a network by the n-gram history approximation
(-approx-order, exact for a feed-forward network of that order)."""
import io
import os
import sys
import warnings

import click

from nplmtk.errors import NplmError, NplmWarning
from nplmtk.io import check_readable, read_lines
from nplmtk.io import OutputBatch
from nplmtk.lattice import htk
from nplmtk.lattice.decode import Graph, Scales, check_scales, srilm_graph
from nplmtk.lattice.expand import expanded_graph, from_decoder, write_expanded, written_form
from nplmtk.lattice.lattice_lm import text_stats
from nplmtk.lattice.posterior import posterior_words
from nplmtk.lattice.scores import BackoffScores, NetworkScores
from nplmtk.lattice.search import decode, expand
from nplmtk.vocab import sentence_tokens

from .options import Integer, Real, example, flag, option, spell


def _neural_model():
    """The networks' base class, imported only for a model that is not a back-off one (it
    loads scipy's BLAS, some 80 ms)."""
    from nplmtk.neural.network import NeuralModel
    return NeuralModel


@click.command("lattice-tool", epilog=example(
    "nplm lattice-tool -read-htk -in-lattice-list lats.list -lm kn3.arpa -order 3 -unk -viterbi-decode",
    "nplm lattice-tool -read-htk -in-lattice utt1.lat.gz -lm kn3.arpa -unk -nbest-decode 10 -out-nbest-dir nbest"))
@flag("read-htk", help="Read HTK Standard Lattice Format (the only format read).")
@option("in-lattice", metavar="FILE", multiple=True, help="A lattice (gzip allowed); may be repeated.")
@option("in-lattice-list", metavar="FILE", help="A file naming one lattice a line.")
@option("lm", metavar="MODEL", help="A model whose scores replace the lattice's: a back-off n-gram model (ARPA, "
       "binary) or a network (nplm model file).")
@option("order", type=Integer(1, 10), default=3, help="A back-off -lm's order, and the decoder's context + 1.")
@option("approx-order", type=Integer(2, 20), help="A network -lm: the n-gram history approximation's order K "
        "(Liu et al. 2016): paths into a lattice node whose last K-1 words agree merge, the best one's network "
        "state carried on, and the written lattice has a node per (node, last K-1 words). Exact for a "
        "feed-forward network of order K. [a feed-forward network's order; 5 for a recurrent one]")
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
def command(read_htk, in_lattice, in_lattice_list, lm, order, approx_order, unk, vocab, htk_lmscale, htk_acscale,
            htk_wdpenalty, viterbi_decode, posterior_decode, posterior_scale, nbest_decode, out_nbest_dir, ppl,
            write_htk, out_lattice_dir):
    """Each lattice in turn (one in memory at a time); a bad lattice is one line on stderr
    naming its file and line, the others go on, and the exit status is then 2."""
    if not read_htk:
        raise NplmError("only HTK lattices are read: give -read-htk")
    if nbest_decode and not out_nbest_dir:
        raise NplmError("-nbest-decode needs -out-nbest-dir")
    if write_htk and not out_lattice_dir:
        raise NplmError("-write-htk needs -out-lattice-dir")
    for directory in (out_nbest_dir if nbest_decode else None, out_lattice_dir if write_htk else None):
        if directory is not None:
            try:
                os.makedirs(directory, exist_ok=True)
            except OSError as err:
                raise NplmError(f"cannot create the folder ({err.strerror})", path=directory) from None
    paths = list(in_lattice)
    if in_lattice_list:
        check_readable(in_lattice_list)
        paths += [line.strip() for line in read_lines(in_lattice_list) if line.strip()]
    scores, model, context_order = None, None, order
    if lm:
        from nplmtk.models import load
        from nplmtk.ngram.backoff import BackoffModel
        model = load(lm)
        if isinstance(model, BackoffModel):
            if approx_order is not None:
                raise NplmError("-approx-order applies to a network -lm (a back-off model's is -order)")
            model = model.truncated(order)
            scores = BackoffScores(model)
        elif isinstance(model, _neural_model()):
            context_order = approx_order or (5 if model.RECURRENT else model.order)
            scores = NetworkScores(model)
        else:
            raise NplmError(f"-lm: a {model.kind} model cannot score lattice paths (a back-off n-gram model or a "
                            "single network can)", path=lm)
    known = {line.strip() for line in read_lines(vocab) if line.strip()} if vocab else set()
    known |= set(scores.index) if scores else set()
    unk_word = model.vocab.unk_word if scores else "<unk>"
    vocabulary = known | {"<unk>", "<s>", "</s>", "-pau-"}  # and SRILM's own words
    if ppl:
        check_readable(ppl)
        sentences = [words for words in map(sentence_tokens, read_lines(ppl)) if words]

    def word_of(word):
        return word if not unk or word in known else unk_word

    scales, failed = Scales(htk_acscale, htk_lmscale, htk_wdpenalty), False
    written = {}  # each output name, the lattice it was written from
    with OutputBatch() as outputs:
        for path in paths:
            try:
                lattice = htk.read_htk(path)
                settings = scales.of(lattice)
                if nbest_decode or write_htk:
                    name = htk.file_name(lattice)
                    if name in written:
                        raise NplmError(f"a lattice named '{name}' was written already in this run (from "
                                        f"{written[name]}): not replaced", path=lattice.path)
                unscored = False  # no path with a probability above 0 under -lm
                if scores is not None:
                    scores.forget()  # one lattice's scores at a time
                expanding = scores is not None and (write_htk or posterior_decode or ppl)
                by_decoder = expanding and not isinstance(scores, BackoffScores)  # a network's expansion: the decoder's
                if viterbi_decode or nbest_decode or by_decoder:
                    check_scales(lattice, settings, nbest=bool(nbest_decode), with_model=scores is not None)
                    decoding = decode(lattice, settings, word_of, scores, context_order,
                                      nbest=bool(nbest_decode) or by_decoder)
                    unscored = scores is not None and decoding.best_words() is None
                if viterbi_decode:
                    words = decoding.best_words()
                    click.echo(lattice.name + (" " + " ".join(words) if words else ""))
                expanded = None
                if expanding:
                    expanded = from_decoder(decoding.nodes, decoding.finals) if by_decoder else \
                        expand(lattice, settings, word_of, scores)
                    if posterior_decode and not unscored:
                        unscored = (expanded.form() if expanded.form else written_form(expanded)) is None
                if unscored and (viterbi_decode or nbest_decode or posterior_decode):
                    warnings.warn(f"{lattice.path}: no path through the lattice has a probability above 0 with -lm: "
                                  "the result is empty", NplmWarning)
                if posterior_decode or ppl:  # as lattice-tool: on the expanded lattice's model scores, with -lm
                    graph = expanded_graph(expanded) if expanded else Graph(*srilm_graph(lattice, settings, word_of))
                if posterior_decode:
                    click.echo(" ".join([lattice.name] + ([] if unscored else posterior_words(graph, posterior_scale))))
                if ppl:  # the vocabulary grows by each lattice's words, as SRILM's does
                    vocabulary.update(node.word for node in graph.nodes if node.word is not None)
                    click.echo(f"file {ppl}: " + "\n".join(text_stats(graph, sentences, vocabulary).lines()))
                if nbest_decode:
                    lines = decoding.nbest_lines(nbest_decode, model)
                    outputs.write(os.path.join(out_nbest_dir, name + ".gz"),
                                  "".join(line + "\n" for line in lines).encode("utf-8"))
                if write_htk:
                    text = io.StringIO()
                    if expanded is None:
                        htk.write_htk(lattice, text)
                    elif not write_expanded(lattice, settings, expanded, text):
                        raise NplmError("no path through the lattice has a probability above 0 with -lm: nothing "
                                        "to write", path=lattice.path)
                    outputs.write(os.path.join(out_lattice_dir, name + ".lat.gz"),
                                  text.getvalue().encode("utf-8"))
                if nbest_decode or write_htk:
                    written[name] = lattice.path
            except NplmError as err:
                print(f"nplm: {err.render(lambda name: spell(name, 'lattice-tool'))}", file=sys.stderr)  # as main.py
                failed = True
    if failed:
        sys.stdout.flush()
        sys.exit(2)

