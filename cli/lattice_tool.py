"""nplm lattice-tool: decode HTK lattices with a language model as SRILM's lattice-tool
(its option names): the 1-best (-viterbi-decode), the words of least expected error
(-posterior-decode) and the N-best (-nbest-decode N -out-nbest-dir DIR, SRILM's N-best
format, which `nplm rescore` reads); -ppl scores a text by each lattice taken as a
language model."""
import os
import sys

import click

from nplmtk.errors import NplmError
from nplmtk.io import check_readable, open_output, read_lines
from nplmtk.vocab import sentence_tokens
from nplmtk.lattice import htk
from nplmtk.lattice.decode import Graph, Scales, best_words, check_scales, nbest_lines, srilm_graph, viterbi
from nplmtk.lattice.lattice_lm import text_stats
from nplmtk.lattice.posterior import posterior_words
from nplmtk.lattice.scores import BackoffScores

from .options import Integer, Real, example, flag, option, spell


@click.command("lattice-tool", epilog=example(
    "nplm lattice-tool -read-htk -in-lattice-list lats.list -lm kn3.arpa -order 3 -unk -viterbi-decode",
    "nplm lattice-tool -read-htk -in-lattice utt1.lat.gz -lm kn3.arpa -unk -nbest-decode 10 -out-nbest-dir nbest"))
@flag("read-htk", help="Read HTK Standard Lattice Format (the only format read).")
@option("in-lattice", metavar="FILE", multiple=True, help="A lattice (gzip allowed); may be repeated.")
@option("in-lattice-list", metavar="FILE", help="A file naming one lattice a line.")
@option("lm", metavar="MODEL", help="A back-off n-gram model (ARPA) whose scores replace the lattice's.")
@option("order", type=Integer(1, 10), default=3, help="The model's order, and the decoder's context + 1.")
@flag("unk", help="Words outside the model's vocabulary (and -vocab) are <unk>.")
@option("vocab", metavar="FILE", help="More known words, one a line (with -unk, not mapped to <unk>).")
@option("htk-lmscale", type=Real(), help="Override the lattices' lmscale.")
@option("htk-acscale", type=Real(), help="Override the lattices' acscale.")
@option("htk-wdpenalty", type=Real(), help="Override the lattices' wdpenalty (log10).")
@flag("viterbi-decode", help="Print each lattice's best path: NAME <s> words </s>.")
@flag("posterior-decode", help="Print each lattice's words of least expected word error (a word mesh's best): "
      "NAME <s> words </s>.")
@option("posterior-scale", type=Real(0, low_open=True), default=8.0,
        help="Divide the lattice's log scores by this for posteriors.")
@option("nbest-decode", type=Integer(0), default=0, help="Write the N best paths of each lattice.")
@option("out-nbest-dir", metavar="DIR", help="Where -nbest-decode writes NAME.gz.")
@option("ppl", metavar="FILE", help="Score the sentences of FILE by each lattice taken as a language model (its best "
        "path of their words) and print the perplexity report.")
@flag("write-htk", help="Write the lattices in HTK format into -out-lattice-dir, as read (not yet with the "
      "model's scores).")
@option("out-lattice-dir", metavar="DIR", help="Where -write-htk writes NAME.lat.gz.")
def command(read_htk, in_lattice, in_lattice_list, lm, order, unk, vocab, htk_lmscale, htk_acscale,
            htk_wdpenalty, viterbi_decode, posterior_decode, posterior_scale, nbest_decode, out_nbest_dir, ppl, write_htk,
            out_lattice_dir):
    """Each lattice in turn (one in memory at a time); a bad lattice is one line on stderr
    naming its file and line, the others go on, and the exit status is then 2."""
    if not read_htk:
        raise NplmError("only HTK lattices are read: give -read-htk")
    if nbest_decode and not out_nbest_dir:
        raise NplmError("-nbest-decode needs -out-nbest-dir")
    if (posterior_decode or ppl) and lm:  # lattice-tool works on the lattice expanded to the model's order
        raise NplmError("-posterior-decode and -ppl use the lattices' own scores: not yet with -lm")
    if write_htk and not out_lattice_dir:
        raise NplmError("-write-htk needs -out-lattice-dir")
    paths = list(in_lattice)
    if in_lattice_list:
        check_readable(in_lattice_list)
        paths += [line.strip() for line in read_lines(in_lattice_list) if line.strip()]
    scores = None
    if lm:
        from nplmtk.models import load
        from nplmtk.ngram.backoff import BackoffModel
        model = load(lm)
        if not isinstance(model, BackoffModel):  # the network's history approximation is not built yet
            raise NplmError("-lm: lattices are rescored with back-off n-gram models only, so far", path=lm)
        scores = BackoffScores(model.truncated(order))
    known = {line.strip() for line in read_lines(vocab) if line.strip()} if vocab else set()
    known |= set(scores.index) if scores else set()
    unk_word = scores.model.vocab.unk_word if scores else "<unk>"
    vocabulary = known | {"<unk>", "<s>", "</s>", "-pau-"}  # and SRILM's own words
    if ppl:
        check_readable(ppl)
        sentences = [words for words in map(sentence_tokens, read_lines(ppl)) if words]

    def word_of(word):
        return word if not unk or word in known else unk_word

    scales, failed = Scales(htk_acscale, htk_lmscale, htk_wdpenalty), False
    for path in paths:
        try:
            lattice = htk.read_htk(path)
            settings = scales.of(lattice)
            if viterbi_decode or nbest_decode:
                check_scales(lattice, settings, bool(nbest_decode) or scores is not None)
                nodes, finals = viterbi(lattice, settings, word_of, scores and scores.logprob, order,
                                        nbest=bool(nbest_decode), use_lm=scores is not None,
                                        prefetch=scores and scores.prefetch)
            if viterbi_decode:
                words = best_words(nodes, finals)
                click.echo(lattice.name + (" " + " ".join(words) if words else ""))
            graph = Graph(*srilm_graph(lattice, settings, word_of)) if posterior_decode or ppl else None
            if posterior_decode:
                click.echo(" ".join([lattice.name] + posterior_words(graph, posterior_scale)))
            if ppl:  # the vocabulary grows by each lattice's words, as SRILM's does
                vocabulary.update(node.word for node in graph.nodes if node.word is not None)
                click.echo(f"file {ppl}: " + "\n".join(text_stats(graph, sentences, vocabulary).lines()))
            if nbest_decode:
                with open_output(os.path.join(out_nbest_dir, lattice.name + ".gz")) as out:
                    out.writelines(line + "\n" for line in nbest_lines(nodes, finals, nbest_decode,
                                                                      scores and scores.model))
            if write_htk:
                with open_output(os.path.join(out_lattice_dir, lattice.name + ".lat.gz")) as out:
                    htk.write_htk(lattice, out)
        except NplmError as err:
            print(f"nplm: {err.render(lambda name: spell(name, 'lattice-tool'))}", file=sys.stderr)  # as cli/main.py
            failed = True
    if failed:
        sys.stdout.flush()
        sys.exit(2)

