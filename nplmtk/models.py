"""The one table of models (shared/DESIGN.md): which class builds and trains each
architecture of `nplm train-nplm -arch`, and which opens each kind of model file (an
architecture's files are of kind "nplm-ARCH"). Adding a model is a line here, or, from another
package, an entry point of the group "nplmtk.architectures" (name = "module:Class"), read only
when a name is not built in or the whole list is wanted; nothing registers itself on import.
Entries name their module, which is imported when the entry is first used: scoring a back-off
model never loads the networks."""
import importlib
from collections.abc import Mapping

from . import container
from .errors import InputError, ParameterError
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

    def __contains__(self, key):
        return key in self._entries


class Architectures(LazyTable):
    """The built-in architectures, then those other packages register (ENTRY_POINT_GROUP)."""
    ENTRY_POINT_GROUP = "nplmtk.architectures"

    def __init__(self, entries):
        super().__init__(entries)
        self._registered = None

    def registered(self):
        """name -> entry point of the other packages' architectures (not yet imported)."""
        if self._registered is None:
            from importlib.metadata import entry_points
            self._registered = {entry.name: entry for entry in entry_points(group=self.ENTRY_POINT_GROUP)
                                if entry.name not in self._entries}  # a built-in name stays built in
        return self._registered

    def __getitem__(self, key):
        if key in self._entries:
            return super().__getitem__(key)
        entry = self.registered()[key]
        try:
            model_class = entry.load()
        except Exception as error:  # noqa: B902 (another package's import: any error)
            raise ParameterError(f"{{arch}} {key}: its entry point {entry.value} fails to load "
                                 f"({type(error).__name__}: {error})") from None
        if getattr(model_class, "arch", None) != key or getattr(model_class, "kind", None) != f"nplm-{key}":
            raise ParameterError(f"{{arch}} {key}: its entry point {entry.value} is not a model class of arch "
                                 f"'{key}' and kind 'nplm-{key}'")
        return model_class

    def __iter__(self):
        yield from self._entries
        yield from self.registered()

    def __len__(self):
        return len(self._entries) + len(self.registered())

    def __contains__(self, key):
        return key in self._entries or (isinstance(key, str) and key in self.registered())


# -arch name -> the class that builds (`initial`) and trains it (nplmtk.neural.network.NeuralModel)
ARCHITECTURES = Architectures({
    "mlp": ".neural.mlp:MLPModel",
    "energy": ".neural.energy:EnergyModel",
    "lbl": ".neural.lbl:LBLModel",
    "lbl1": ".neural.lbl:GatedLBLModel",
    "lbl2": ".neural.lbl:HiddenTermLBLModel",
    "lbl3": ".neural.lbl:GatedHiddenTermLBLModel",
    "rnn": ".neural.recurrent:RNNModel",
    "lstm": ".neural.recurrent:LSTMModel",
    "transformer": ".neural.transformer:TransformerModel",
})

CHECKPOINT_KIND = "nplm-checkpoint"


def checkpoint_model(model_file, best=True):
    """The network a training checkpoint holds: the best so far (`best.*` arrays, or the
    current ones before any validation), or the current parameters (not NT-ASGD's
    `average.*`). Its meta names the
    architecture (checkpoints older than the energy network are MLPs)."""
    arrays = model_file.arrays
    saved_best = {k[len("best."):]: v for k, v in arrays.items() if k.startswith("best.")}
    current = {k: v for k, v in arrays.items() if not k.startswith(("best.", "worker.", "average."))}
    arch = model_file.meta.get("arch", "mlp")
    if not isinstance(arch, str) or arch not in ARCHITECTURES:
        raise InputError(f"architecture {arch!r} is not supported by this version", path=model_file.path)
    return ARCHITECTURES[arch].from_arrays(model_file.vocab, saved_best if best and saved_best else current,
                                           model_file.meta, model_file.path)


# container kind -> function(ModelFile) -> LanguageModel, besides the architectures' "nplm-ARCH"
OTHER_KINDS = LazyTable({
    "deleted-interpolation": ".ngram.deleted_interpolation:load_deleted_interpolation",
    "class-ngram": ".ngram.classes:ClassNgramModel.from_file",
    "backoff-ngram": ".ngram.binary:load_binary",  # an ARPA model's tables, memory-mapped (-write-bin-lm)
    "mixture": ".mixture:load_mixture",  # given `load` (and allow_paths) by `load`
    # A checkpoint scores as the best model so far, so `nplm ppl -lm DIR/checkpoint.nplm`
    # follows a run that is going on.
    CHECKPOINT_KIND: ".models:checkpoint_model",
})


class ModelKinds(Mapping):
    """container kind -> loader: "nplm-ARCH", the class of ARCHITECTURES[ARCH] (its `kind`),
    and OTHER_KINDS."""
    PREFIX = "nplm-"

    def __getitem__(self, kind):
        if kind in OTHER_KINDS:
            return OTHER_KINDS[kind]
        if kind in self:
            return ARCHITECTURES[kind[len(self.PREFIX):]].from_file
        raise KeyError(kind)

    def __iter__(self):
        yield from (self.PREFIX + arch for arch in ARCHITECTURES)
        yield from OTHER_KINDS

    def __len__(self):
        return len(ARCHITECTURES) + len(OTHER_KINDS)

    def __contains__(self, kind):
        return kind in OTHER_KINDS or (isinstance(kind, str) and kind.startswith(self.PREFIX)
                                       and kind[len(self.PREFIX):] in ARCHITECTURES)


MODEL_KINDS = ModelKinds()


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
