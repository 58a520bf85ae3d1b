"""lattice-tool's job as one object (SRILM's lattice-tool, its control flow per lattice):
`LatticeTool(LatticeToolSpec(...)).run(echo, failed)` reads each lattice in turn (one in
memory at a time), decodes, expands, scores and writes what the spec asks, and hands a bad
lattice's error to `failed` and goes on. Parameters are named as the command's options
(a ParameterError's `{name}`); nothing here knows of flags."""
import io
import os
import warnings
from dataclasses import dataclass, field

import numpy as np

from ..errors import NplmError, NplmWarning, ParameterError
from ..io import OutputBatch, check_readable, read_lines
from ..vocab import sentence_tokens
from . import htk
from .decode import Graph, Scales, check_scales, id_logprobs, srilm_graph
from .expand import expanded_bytes, expanded_graph, from_decoder, write_expanded, written_form
from .lattice_lm import text_stats
from .posterior import posterior_words
from .scores import BackoffScores, NetworkScores
from .search import decode, expand

RECURRENT_APPROX_ORDER = 5  # -approx-order's default for a recurrent network
NBEST_BATCH = 64  # lattices whose N-best sentences the model scores in one call


@dataclass
class LatticeToolSpec:
    """What lattice-tool does: the lattices (`in_lattice` files, then those `in_lattice_list`
    names), the model `lm` (None: the lattices' own scores) read to `order` or, a network,
    by the history approximation of `approx_order`; `unk` maps words outside the model's
    vocabulary (and the words of `vocab`) to <unk>; the scales override the lattices'; then
    each output asked for."""
    in_lattice: list = field(default_factory=list)
    in_lattice_list: str = None
    lm: str = None
    order: int = 3
    approx_order: int = None
    unk: bool = False
    vocab: str = None
    htk_lmscale: float = None
    htk_acscale: float = None
    htk_wdpenalty: float = None
    viterbi_decode: bool = False
    posterior_decode: bool = False
    posterior_scale: float = 8.0
    nbest_decode: int = 0
    out_nbest_dir: str = None
    ppl: str = None
    write_htk: bool = False
    out_lattice_dir: str = None
    tune_lattice_list: str = None  # held-out lattices on which an approx_order of "auto" is picked


def _neural_model():
    """The networks' base class, imported only for a model that is not a back-off one (it
    loads scipy's BLAS, some 80 ms)."""
    from ..neural.network import NeuralModel
    return NeuralModel


class LatticeTool:
    """The spec checked, its folders made, its model and words read."""

    def __init__(self, spec):
        self.spec = spec
        if spec.nbest_decode and not spec.out_nbest_dir:
            raise ParameterError("{nbest_decode} needs {out_nbest_dir}")
        if spec.write_htk and not spec.out_lattice_dir:
            raise ParameterError("{write_htk} needs {out_lattice_dir}")
        for directory in (spec.out_nbest_dir if spec.nbest_decode else None,
                          spec.out_lattice_dir if spec.write_htk else None):
            if directory is not None:
                try:
                    os.makedirs(directory, exist_ok=True)
                except OSError as err:
                    raise NplmError(f"cannot create the folder ({err.strerror})", path=directory) from None
        self.paths = list(spec.in_lattice)
        if spec.in_lattice_list:
            check_readable(spec.in_lattice_list)
            self.paths += [line.strip() for line in read_lines(spec.in_lattice_list) if line.strip()]
        self.scores, self.model, self.context_order = None, None, spec.order
        if spec.lm:
            self._load_model(spec)
        known = {line.strip() for line in read_lines(spec.vocab) if line.strip()} if spec.vocab else set()
        self.known = known | (set(self.scores.index) if self.scores else set())
        self.unk_word = self.model.vocab.unk_word if self.scores else "<unk>"
        self.vocabulary = self.known | {"<unk>", "<s>", "</s>", "-pau-"}  # and SRILM's own words
        self.sentences = None
        if spec.ppl:
            check_readable(spec.ppl)
            self.sentences = [words for words in map(sentence_tokens, read_lines(spec.ppl)) if words]
        self.scales = Scales(spec.htk_acscale, spec.htk_lmscale, spec.htk_wdpenalty)
        self.approx_pick = None  # nplmtk.tuning.Pick of an approx_order of "auto"
        if (spec.approx_order == "auto") != (spec.tune_lattice_list is not None):
            raise ParameterError("{approx_order} auto picks the order on held-out lattices ({tune_lattice_list}); "
                                 "they go together")
        if spec.approx_order == "auto" and self.model is not None:
            self._tune_approx_order(spec.tune_lattice_list)

    def _tune_approx_order(self, listing):
        """The history approximation's order picked on the lattices `listing` names
        (nplmtk.tuning.tune_approx_order: their 1-best paths, no references); a
        feed-forward network's is its own order (exact)."""
        from ..tuning import Pick, tune_approx_order
        check_readable(listing)
        if not self.model.RECURRENT:
            self.approx_pick = Pick({"order": self.context_order}, 0.0, notes=["exact: a feed-forward network's own "
                                                                               "order"])
            return
        paths = [line.strip() for line in read_lines(listing) if line.strip()]
        if not paths:
            raise ParameterError("{tune_lattice_list}: no lattice named", path=listing)
        lattices = [htk.read_htk(path) for path in paths]

        def one_bests(order):
            found = []
            for lattice in lattices:
                settings = self.scales.of(lattice)
                check_scales(lattice, settings, nbest=False, with_model=True)
                self.scores.forget()
                found.append(decode(lattice, settings, self.word_of, self.scores, order).best_words())
            return found
        self.approx_pick = tune_approx_order(one_bests)
        self.context_order = self.approx_pick.setting["order"]

    def _load_model(self, spec):
        from ..models import load
        from ..ngram.backoff import BackoffModel
        model = load(spec.lm)
        if isinstance(model, BackoffModel):
            if spec.approx_order is not None:
                raise ParameterError("{approx_order} applies to a network {lm} (a back-off model's is {order})")
            self.model = model.truncated(spec.order)
            self.scores = BackoffScores(self.model)
        elif isinstance(model, _neural_model()):
            self.model = model
            given = spec.approx_order if spec.approx_order != "auto" else None
            self.context_order = given or (RECURRENT_APPROX_ORDER if model.RECURRENT else model.order)
            self.scores = NetworkScores(model)
        else:
            raise ParameterError(f"{{lm}}: a {model.kind} model cannot score lattice paths (a back-off n-gram model "
                                 "or a single network can)", path=spec.lm)

    def word_of(self, word):
        return word if not self.spec.unk or word in self.known else self.unk_word

    def run(self, echo, failed):
        """Every lattice in turn: each output line to `echo`, a bad lattice's NplmError to
        `failed` (the others go on). Returns whether any lattice failed."""
        written = {}  # each output name, the lattice it was written from
        waiting = []  # (N-best file, Hypotheses) whose language scores are still to come
        any_failed = False
        with OutputBatch() as outputs:
            try:
                for path in self.paths:
                    try:
                        self._one(path, echo, outputs, written, waiting)
                    except NplmError as err:
                        failed(err)
                        any_failed = True
                    if len(waiting) >= NBEST_BATCH:
                        any_failed = self._write_nbest(waiting, outputs, failed) or any_failed
            finally:
                any_failed = self._write_nbest(waiting, outputs, failed) or any_failed
        return any_failed

    def _write_nbest(self, waiting, outputs, failed):
        """Write the N-best files `waiting`, their model's language scores computed in one
        call. Returns whether a file could not be written (its NplmError to `failed`)."""
        scored = [hypotheses for _, hypotheses in waiting if hypotheses.ids is not None]
        languages = iter(())
        if scored:
            languages = iter(id_logprobs(self.model, np.concatenate([h.ids for h in scored]),
                                         np.concatenate([h.lengths for h in scored])))
        any_failed = False
        for name, hypotheses in waiting:
            lines = hypotheses.lines([next(languages) for _ in hypotheses.sentences]
                                     if hypotheses.ids is not None else None)
            try:
                outputs.write(name, "".join(line + "\n" for line in lines).encode("utf-8"))
            except NplmError as err:
                failed(err)
                any_failed = True
        waiting.clear()
        return any_failed

    def _one(self, path, echo, outputs, written, waiting):
        spec, scores = self.spec, self.scores
        lattice = htk.read_htk(path)
        settings = self.scales.of(lattice)
        if spec.nbest_decode or spec.write_htk:
            name = htk.file_name(lattice)
            if name in written:
                raise NplmError(f"a lattice named '{name}' was written already in this run (from "
                                f"{written[name]}): not replaced", path=lattice.path)
        unscored = False  # no path with a probability above 0 under the model
        if scores is not None:
            scores.forget()  # one lattice's scores at a time
        expanding = scores is not None and (spec.write_htk or spec.posterior_decode or spec.ppl)
        by_decoder = expanding and not isinstance(scores, BackoffScores)  # a network's expansion: the decoder's
        if spec.viterbi_decode or spec.nbest_decode or by_decoder:
            check_scales(lattice, settings, nbest=bool(spec.nbest_decode), with_model=scores is not None)
            decoding = decode(lattice, settings, self.word_of, scores, self.context_order,
                              nbest=bool(spec.nbest_decode) or by_decoder)
            unscored = scores is not None and decoding.best_words() is None
        if spec.viterbi_decode:
            words = decoding.best_words()
            echo(lattice.name + (" " + " ".join(words) if words else ""))
        expanded = None
        if expanding:
            expanded = from_decoder(decoding.nodes, decoding.finals) if by_decoder else \
                expand(lattice, settings, self.word_of, scores)
            if spec.posterior_decode and not unscored:
                unscored = (expanded.form() if expanded.form else written_form(expanded)) is None
        if unscored and (spec.viterbi_decode or spec.nbest_decode or spec.posterior_decode):
            warnings.warn(f"{lattice.path}: no path through the lattice has a probability above 0 with -lm: "
                          "the result is empty", NplmWarning)
        if spec.posterior_decode or spec.ppl:  # as lattice-tool: on the expanded lattice's model scores
            graph = expanded_graph(expanded) if expanded else Graph(*srilm_graph(lattice, settings, self.word_of))
        if spec.posterior_decode:
            echo(" ".join([lattice.name] + ([] if unscored else posterior_words(graph, spec.posterior_scale))))
        if spec.ppl:  # the vocabulary grows by each lattice's words, as SRILM's does
            self.vocabulary.update(node.word for node in graph.nodes if node.word is not None)
            echo(f"file {spec.ppl}: " + "\n".join(text_stats(graph, self.sentences, self.vocabulary).lines()))
        if spec.nbest_decode:
            waiting.append((os.path.join(spec.out_nbest_dir, name + ".gz"),
                            decoding.nbest(spec.nbest_decode, self.model)))
        if spec.write_htk:
            outputs.write(os.path.join(spec.out_lattice_dir, name + ".lat.gz"), self._slf(lattice, settings, expanded))
        if spec.nbest_decode or spec.write_htk:
            written[name] = lattice.path

    @staticmethod
    def _slf(lattice, settings, expanded):
        """-write-htk's text of `lattice` (as read when `expanded` is None), UTF-8."""
        if expanded is not None and expanded.text is not None:  # the compiled expansion's: bytes already
            data = expanded_bytes(lattice, settings, expanded)
        else:
            text = io.StringIO()
            if expanded is None:
                htk.write_htk(lattice, text)
            written = expanded is None or write_expanded(lattice, settings, expanded, text)
            data = text.getvalue().encode("utf-8") if written else None
        if data is None:
            raise NplmError("no path through the lattice has a probability above 0 with -lm: nothing to write",
                            path=lattice.path)
        return data
