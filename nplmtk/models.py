"""The one table of models (shared/DESIGN.md): which class opens each kind of model file,
and which class builds and trains each architecture of `nplm train-nplm -arch`. Adding a
model is a line here; nothing registers itself on import. Entries name their module, which
is imported when the entry is first used: scoring a back-off model never loads the networks."""
import importlib
from collections.abc import Mapping

from . import container
from .errors import InputError
from .vocab import UNK


class LazyTable(Mapping):
    """A read-only mapping whose values are written "module:attribute" (relative to
    nplmtk, the attribute possibly dotted) and imported on first use."""

    def __init__(self, entries):
        self._entries = dict(entries)

    def __getitem__(self, key):
        module, _, attribute = self._entries[key].partition(":")
        value = importlib.import_module(module, __package__)  # a dict lookup once imported
        for name in attribute.split("."):
            value = getattr(value, name)
        return value

    def __iter__(self):
        return iter(self._entries)

    def __len__(self):
        return len(self._entries)


# -arch name -> the class that builds (`initial`) and trains it (nplmtk.neural.network.NeuralModel)
ARCHITECTURES = LazyTable({
    "mlp": ".neural.mlp:MLPModel",
    "energy": ".neural.energy:EnergyModel",
    "lbl": ".neural.lbl:LBLModel",
    "lbl1": ".neural.lbl:GatedLBLModel",
    "lbl2": ".neural.lbl:HiddenTermLBLModel",
    "lbl3": ".neural.lbl:GatedHiddenTermLBLModel",
    "rnn": ".neural.recurrent:RNNModel",
    "lstm": ".neural.recurrent:LSTMModel",
})

CHECKPOINT_KIND = "nplm-checkpoint"


def checkpoint_model(model_file, best=True):
    """The network a training checkpoint holds: the best so far (`best.*` arrays, or the
    current ones before any validation), or the current parameters. Its meta names the
    architecture (checkpoints older than the energy network are MLPs)."""
    arrays = model_file.arrays
    saved_best = {k[len("best."):]: v for k, v in arrays.items() if k.startswith("best.")}
    current = {k: v for k, v in arrays.items() if not k.startswith(("best.", "worker."))}
    arch = model_file.meta.get("arch", "mlp")
    if not isinstance(arch, str) or arch not in ARCHITECTURES:
        raise InputError(f"architecture {arch!r} is not supported by this version", path=model_file.path)
    return ARCHITECTURES[arch].from_arrays(model_file.vocab, saved_best if best and saved_best else current,
                                           model_file.meta, model_file.path)


# container kind -> function(ModelFile) -> LanguageModel (each class's `kind` is its key: tested)
MODEL_KINDS = LazyTable({
    "nplm-mlp": ".neural.mlp:MLPModel.from_file",
    "nplm-energy": ".neural.energy:EnergyModel.from_file",
    "nplm-lbl": ".neural.lbl:LBLModel.from_file",
    "nplm-lbl1": ".neural.lbl:GatedLBLModel.from_file",
    "nplm-lbl2": ".neural.lbl:HiddenTermLBLModel.from_file",
    "nplm-lbl3": ".neural.lbl:GatedHiddenTermLBLModel.from_file",
    "nplm-rnn": ".neural.recurrent:RNNModel.from_file",
    "nplm-lstm": ".neural.recurrent:LSTMModel.from_file",
    "deleted-interpolation": ".ngram.deleted_interpolation:load_deleted_interpolation",
    "class-ngram": ".ngram.classes:ClassNgramModel.from_file",
    "backoff-ngram": ".ngram.binary:load_binary",  # an ARPA model's tables, memory-mapped (-write-bin-lm)
    "mixture": ".mixture:load_mixture",  # given `load` (and allow_paths) by `load`
    # A checkpoint scores as the best model so far, so `nplm ppl -lm DIR/checkpoint.nplm`
    # follows a run that is going on.
    CHECKPOINT_KIND: ".models:checkpoint_model",
})


def load(path, allow_paths=False, unk=None):
    """Open any model file: ARPA text (optionally gzipped) or an nplm container. A
    mixture's components must lie in its folder unless `allow_paths`. `unk` names the
    unknown word of an ARPA model (SRILM's -map-unk)."""
    if not container.is_container(path):
        from .ngram.arpa import read_arpa
        return read_arpa(path, unk=unk or UNK)
    if unk is not None:
        raise InputError("only an ARPA model's unknown word can be renamed", path=path)
    model_file = container.load(path)
    if model_file.kind not in MODEL_KINDS:
        raise InputError(f"model kind '{model_file.kind}' is not supported by this version", path=path)
    loader = MODEL_KINDS[model_file.kind]
    if model_file.kind == "mixture":
        return loader(model_file, lambda name: load(name, allow_paths), allow_paths)
    return loader(model_file)
