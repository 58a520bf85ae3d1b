"""`nplm ppl`'s model pipeline built from a plain specification (nplmtk/ppl_model.py),
without the command: the same reports as SRILM's (tests/data/srilm), the same refusals."""
import io
import os

import pytest

from nplmtk.errors import ParameterError
from nplmtk.mixture import Mixture
from nplmtk.ngram.backoff import BackoffModel
from nplmtk.ngram.classes import ClassNgramModel
from nplmtk.ppl import perplexity
from nplmtk.ppl_model import DynamicSpec, PplSpec, build_model
from test_srilm_reference import DATA

KN, WB, KB = (os.path.join(DATA, name) for name in ("kn3-unk.arpa.gz", "wb3-unk.arpa.gz", "kn3-backoff.arpa.gz"))
TEXT = os.path.join(DATA, "test.txt")


def report(model, debug=0):
    """The report of `model` on test.txt, named as SRILM's reference names the file."""
    out = io.StringIO()
    perplexity(model, TEXT, debug=debug, write=lambda line: print(line, file=out))
    return out.getvalue().replace(TEXT, "test.txt")


def reference(name):
    with open(os.path.join(DATA, name), encoding="utf-8") as f:
        return f.read()


@pytest.mark.parametrize("spec, name", [
    (PplSpec(KN, mix_lm=WB, main_weight=0.3), "ppl-merge-kn3-wb3-debug0.txt"),
    (PplSpec(KN, mix_lm=WB, main_weight=0.5, mix_more=[(KB, 0.2)]), "ppl-merge3-debug0.txt"),
    (PplSpec(KN, mix_lm=WB, main_weight=0.3, order=2), "ppl-merge-kn3-wb3-order2-debug0.txt"),
    (PplSpec(KN, mix_lm=WB, main_weight=0.3, prune=1e-5), "ppl-merge-kn3-wb3-prune1e-5-debug0.txt"),
    (PplSpec(KN, mix_lm=WB, main_weight=0.3, vocab=os.path.join(DATA, "limit-vocab.txt")),
     "ppl-merge-kn3-wb3-limited-debug0.txt"),
])
def test_merged_models_score_as_srilms(spec, name):
    built = build_model(spec)
    assert built.merged and isinstance(built.model, BackoffModel)
    assert built.writable("write_lm") is built.model
    assert report(built.model) == reference(name)


def test_bayes_0_keeps_the_mixture_dynamic_and_unwritable():
    built = build_model(PplSpec(KN, mix_lm=WB, main_weight=0.3, bayes=0))
    assert isinstance(built.model, Mixture) and not built.merged
    assert built.subject == f"the mixture of {KN} and {WB}"
    assert report(built.model) == reference("ppl-mix-kn3-wb3-debug0.txt")
    with pytest.raises(ParameterError) as error:
        built.writable("write_lm")
    rendered = error.value.render(lambda name: "-" + name.replace("_", "-"))
    assert rendered.startswith("-write-lm: the mixture of ") and "-bayes 0 keeps it dynamic" in rendered


def test_order_and_classes():
    assert build_model(PplSpec(KN, order=2)).model.order == 2
    built = build_model(PplSpec(os.path.join(DATA, "class20-wb3.arpa.gz"),
                                classes=os.path.join(DATA, "class20.classes")))
    assert isinstance(built.model, ClassNgramModel)
    assert report(built.model, debug=2) == reference("ppl-class20-wb3-simple-debug2.txt")
    with pytest.raises(ParameterError, match="writes back-off n-gram models only"):
        built.writable("write_bin_lm")


@pytest.mark.parametrize("spec, message", [
    (PplSpec(KN, prune=1e-5, prune_to_entries=100), "choose one of {prune} and {prune_to_entries}"),
    (PplSpec(KN, mix_more=[(WB, 0.2)]), "{mix_lm}2 and the like need {mix_lm}"),
    (PplSpec(KN, mix_lm=WB, main_weight=0.9, mix_more=[(KB, 0.2)]), "{lambda} and {mix_lambda}N add up"),
    (PplSpec(KN, neural_cache=10), "{neural_cache} keys on a recurrent network's states"),
    (PplSpec(KN, dynamic=DynamicSpec(10, 0.1, text=TEXT)), "{dynamic_eval} adapts neural models"),
])
def test_refusals_name_the_parameters(spec, message):
    with pytest.raises(ParameterError) as error:
        build_model(spec)
    assert message in error.value.message
