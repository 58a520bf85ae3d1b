"""The model `ngram -ppl` scores, built from a plain specification as SRILM's ngram.cc
builds it: read with -order and -limit-vocab, dynamic evaluation and a continuous cache
(over the adapted network's states) around a network, mixed (merged statically when every
component is a back-off n-gram), then -renorm, -prune, -prune-to-entries and -prune-lowprobs in SRILM's order, then
-classes. Parameters are named as the command's options (a ParameterError's `{name}`);
nothing here prints. What only some specifications need is imported where they ask for
it: plain scoring loads neither the estimator nor the networks."""
import time
from dataclasses import dataclass, field

from .errors import ParameterError
from .io import check_readable
from .models import load
from .ngram.backoff import BackoffModel

RMS_SEGMENT = 20  # -dynamic-eval auto with -dynamic-rms-text: the segments the RMS scale is taken over


@dataclass
class DynamicSpec:
    """Dynamic evaluation of a network (Krause et al. 2018) over segments of `length`
    predictions of `text` (nplmtk/neural/dynamic.py); `progress(total)` gives a progress
    bar or None."""
    length: int
    lr: float = None
    decay: float = 0.0
    rms_text: str = None
    rms_words: int = 20000
    epsilon: float = 1e-3
    text: str = None
    progress: object = None


@dataclass
class PplSpec:
    """What `nplm ppl` scores: the model file `lm` and what is done to it. `mix_lm` is
    mixed in with what the other weights leave (1 - main_weight - the rest), `mix_more`
    lists further models and their weights ((file, weight)); `vocab` the words of
    -limit-vocab (a file);
    `prune_to_entries` an n-gram budget."""
    lm: str
    allow_paths: bool = False
    map_unk: str = None
    order: int = None
    neural_cache: int = 0
    neural_cache_theta: float = 0.3
    neural_cache_lambda: float = 0.2
    dynamic: DynamicSpec = None
    vocab: str = None
    mix_lm: str = None
    mix_more: list = field(default_factory=list)
    main_weight: float = 0.5
    bayes: float = None
    renorm: bool = False
    prune: float = 0.0
    prune_to_entries: int = None
    minprune: int = 2
    prune_lowprobs: bool = False
    classes: str = None
    tune_text: str = None  # held-out text on which the settings given as "auto" are picked
    tune_max_time: float = None  # seconds the searches of those settings may take together (None: no limit)
    progress: object = None  # progress(total, what): a progress bar (update(n)) of a search, or None


class PplModel:
    """A built model: `model`, `names` (its files), `merged` (the mixture merged into one
    back-off model), `subject` (what the model is, for messages) and `threshold` (the
    -prune that -prune-to-entries found, or None)."""

    def __init__(self, model, names, mixed, merged, bayes, threshold, picks=(), deadline=None):
        self.model, self.names, self.mixed, self.merged = model, names, mixed, merged
        self.bayes, self.threshold = bayes, threshold
        self.picks = list(picks)  # (parameter, nplmtk.tuning.Pick) of each setting given as "auto"
        self.deadline = deadline  # when the searches of settings given as "auto" stop (time.monotonic())
        self.subject = names[0] if not mixed else f"the mixture of {' and '.join(names)}"

    def writable(self, parameter):
        """The model as one back-off model to write (`parameter`: the output's name),
        refused when it is a dynamic mixture or no back-off model."""
        if self.mixed and not self.merged:  # the mixture, not -lm alone, is what would be written
            why = "{bayes} 0 keeps it dynamic" if self.bayes is not None else \
                "only back-off n-gram models (ARPA or binary, without {classes}) merge into one"
            raise ParameterError(f"{{{parameter}}}: the mixture of {_braced(' and '.join(self.names))} cannot be "
                                 f"written as one back-off model: {why} (nplm mix -write keeps a mixture)")
        return self.backoff(f"{{{parameter}}} writes back-off n-gram models only", self.names[0])

    def backoff(self, why, subject=None):
        """The model, refused with `subject: why` unless it is a back-off n-gram model."""
        if not isinstance(self.model, BackoffModel):
            raise ParameterError(why, path=subject or self.subject)
        return self.model

    def with_cache(self, length, weight, unk_is_word, tune_text=None):
        """The model mixed with a unigram cache of the last `length` words (-cache); a
        length of "auto" picks the length and the weight on `tune_text`."""
        from .cache import with_cache
        if length == "auto":
            from .tuning import tune_cache
            pick = tune_cache(self.model, _tuning_corpus(tune_text, self.model.vocab, "cache"),
                              unk_is_word=unk_is_word, deadline=self.deadline)
            self.picks.append(("cache", pick))
            length, weight = pick.setting["length"], pick.setting["weight"]
        return with_cache(self.model, self.subject, length, weight, unk_is_word=unk_is_word)


def _braced(text):
    """`text` (file names) safe inside a ParameterError's message."""
    return text.replace("{", "{{").replace("}", "}}")


def _tuning_corpus(tune_text, vocab, parameter):
    """The held-out text a setting given as "auto" is picked on."""
    from .corpus import Corpus
    if tune_text is None:
        raise ParameterError(f"{{{parameter}}} auto picks its setting on held-out text: give {{tune_text}}")
    check_readable(tune_text)
    return Corpus.read(tune_text, vocab, unk=True)


def build_model(spec):
    """The PplModel of `spec` (a PplSpec); refuses what SRILM cannot do with the model.
    Settings given as "auto" (neural_cache, dynamic.length, main_weight) are picked on
    spec.tune_text, and the picks kept in the PplModel's `picks`."""
    lm = spec.lm
    picks = []
    deadline = None if spec.tune_max_time is None else time.monotonic() + spec.tune_max_time
    if spec.classes is not None:
        check_readable(spec.classes)
    if spec.map_unk is not None:
        from .container import is_container
        if is_container(lm):
            raise ParameterError("{map_unk} renames an ARPA model's unknown word only", path=lm)
    model = load(lm, spec.allow_paths, unk=spec.map_unk)
    backoff = isinstance(model, BackoffModel)
    if spec.order is not None:
        if not backoff:
            raise ParameterError("{order} applies to n-gram models only", path=lm)
        model = model.truncated(spec.order)
    if spec.neural_cache and not (isinstance(model, _neural_model()) and model.CAPABILITIES.recurrent_state):
        raise ParameterError("{neural_cache} keys on a recurrent network's states", path=lm)
    if spec.dynamic is not None:  # first: the continuous cache reads the adapted network's states
        model = _dynamic(model, lm, spec, picks, deadline)
    if spec.neural_cache:
        model = _with_neural_cache(model, spec, picks, deadline)
    if spec.prune and spec.prune_to_entries is not None:
        raise ParameterError("choose one of {prune} and {prune_to_entries}")
    if (spec.renorm or spec.prune or spec.prune_to_entries or spec.prune_lowprobs or spec.vocab is not None) \
            and not isinstance(model, BackoffModel):
        raise ParameterError("{limit_vocab}, {renorm} and {prune}* apply to back-off n-gram models (ARPA) only",
                             path=lm)
    kept = None
    if spec.vocab is not None:
        from .vocab import Vocabulary
        kept = Vocabulary.read(spec.vocab).words
        model = model.limited_to(kept)
    names, merged = [lm], False
    if spec.mix_more and spec.mix_lm is None:
        raise ParameterError("{mix_lm}2 and the like need {mix_lm}")
    if spec.mix_lm is not None:
        names += [spec.mix_lm] + [name for name, _ in spec.mix_more]
        components = [model] + [load(name, spec.allow_paths) for name in names[1:]]
        if spec.main_weight == "auto":  # every weight by EM on the held-out text
            from .tuning import tune_mixture
            pick = tune_mixture(components, names, _tuning_corpus(spec.tune_text, model.vocab, "lambda"))
            picks.append(("lambda", pick))
            weights = [pick.setting[name] for name in names]
        else:
            weights = [spec.main_weight, 1.0 - spec.main_weight] + [w for _, w in spec.mix_more]
            for w in weights[2:]:  # ngram.cc's order of subtraction
                weights[1] -= w
            if weights[1] < -1e-9:
                raise ParameterError("{lambda} and {mix_lambda}N add up to more than 1")
            weights = [max(w, 0.0) for w in weights]
        merged = spec.bayes is None and spec.classes is None and all(isinstance(m, BackoffModel) for m in components)
        if merged:  # SRILM's static mixture: each model read with -order and -limit-vocab, then merged
            from .ngram.merge import merge_backoff
            if spec.order is not None:
                components = [m.truncated(spec.order) for m in components]
            if kept is not None:
                components = components[:1] + [m.limited_to(kept) for m in components[1:]]
            model = merge_backoff(components, weights, kept or ())
    model, threshold = _pruned(model, spec)
    if spec.classes is not None:
        if not isinstance(model, BackoffModel):
            raise ParameterError("{classes} goes with a back-off n-gram model over classes (ARPA)", path=lm)
        from .ngram.classes import ClassNgramModel, WordClasses
        model = ClassNgramModel(model, WordClasses.read(spec.classes))
    if spec.mix_lm is not None and not merged:
        from .mixture import Mixture
        model = Mixture([model] + components[1:], weights, names)
    return PplModel(model, names, spec.mix_lm is not None, merged, spec.bayes, threshold, picks, deadline)


def _pruned(model, spec):
    """(the model after -renorm, -prune, -prune-to-entries and -prune-lowprobs, in SRILM's
    order; the threshold -prune-to-entries found, or None)."""
    threshold = None
    if spec.renorm or spec.prune or spec.prune_lowprobs:
        from .ngram.estimate import prune as prune_model, prune_low_probs, renormalise
    if spec.renorm:
        model = renormalise(model)
    if spec.prune:
        model = prune_model(model, spec.prune, spec.minprune)
    if spec.prune_to_entries is not None:
        from .convert import prune_to_entries
        model, threshold = prune_to_entries(model, spec.prune_to_entries, spec.minprune)
    if spec.prune_lowprobs:
        model = prune_low_probs(model, spec.minprune)
    return model, threshold


def _neural_model():
    from .neural.network import NeuralModel  # here: plain scoring loads no network
    return NeuralModel


def _bar(spec, what):
    """A progress bar factory (total -> bar or None) for the search `what`, or None."""
    return None if spec.progress is None else lambda total: spec.progress(total, what)


def _with_neural_cache(model, spec, picks, deadline):
    """The continuous cache around the recurrent network `model` (a DynamicModel: over
    the adapted network's states); a window of "auto" picks window, theta and weight on
    spec.tune_text, after dynamic evaluation's pick when that is auto too."""
    from .cache import ContinuousCache
    window, theta, weight = spec.neural_cache, spec.neural_cache_theta, spec.neural_cache_lambda
    if window == "auto":
        from .tuning import tune_neural_cache
        pick = tune_neural_cache(model, _tuning_corpus(spec.tune_text, model.vocab, "neural_cache"),
                                 progress=_bar(spec, "-neural-cache auto"), deadline=deadline)
        if model.kind == "dynamic":
            pick.notes.insert(0, "over the states of the network adapted by dynamic evaluation (its setting "
                              "first: the cache reads the adapted states, the adaptation does not see the cache)")
        picks.append(("neural_cache", pick))
        window, theta, weight = pick.setting["window"], pick.setting["theta"], pick.setting["weight"]
    return ContinuousCache(model, window, theta, weight)


def _dynamic(model, lm, spec, picks, deadline):
    """The network `model` scored by dynamic evaluation; a length of "auto" picks the
    length, rate and decay on spec.tune_text (the model as trained when nothing beats it)."""
    from .corpus import Corpus
    from .neural.dynamic import DynamicEvaluation, DynamicModel, gradient_scale
    dynamic, tune_text = spec.dynamic, spec.tune_text
    if not isinstance(model, _neural_model()):
        raise ParameterError("{dynamic_eval} adapts neural models (a network's gradients move it)", path=lm)
    auto = dynamic.length == "auto"
    if dynamic.lr is None and not auto:
        raise ParameterError("{dynamic_eval} needs {dynamic_lr} (e.g. 0.1; with {dynamic_rms_text} about 0.003)")
    if dynamic.text is None:
        raise ParameterError("{dynamic_eval} scores a text ({text} or {ppl})")
    length = RMS_SEGMENT if auto else dynamic.length
    scale = None
    if dynamic.rms_text is not None:
        check_readable(dynamic.rms_text)
        corpus = Corpus.read(dynamic.rms_text, model.vocab, unk=True).within_words(dynamic.rms_words)
        scale = gradient_scale(model, corpus, length)
    if auto:
        from .tuning_dynamic import DYNAMIC_LENGTHS, OFF, tune_dynamic
        # the RMS step's scale is of segments of one length: its grid keeps that length
        pick = tune_dynamic(model, _tuning_corpus(tune_text, model.vocab, "dynamic_eval"),
                            lengths=(length,) if scale is not None else DYNAMIC_LENGTHS, scale=scale,
                            epsilon=dynamic.epsilon, workers=2, progress=_bar(spec, "-dynamic-eval auto"),
                            deadline=deadline)
        picks.append(("dynamic_eval", pick))
        if pick.setting == OFF:
            return model
        length, lr, decay = pick.setting["length"], pick.setting["lr"], pick.setting["decay"]
    else:
        lr, decay = dynamic.lr, dynamic.decay
    return DynamicModel(model, DynamicEvaluation(length, lr, decay, dynamic.epsilon), scale, dynamic.progress)
