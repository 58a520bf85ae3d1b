"""The one table of models (shared/DESIGN.md): which class opens each kind of model file,
and which class builds and trains each architecture of `nplm train-nplm -arch`. Adding a
model is a line here; nothing registers itself on import."""
from . import container
from .errors import InputError
from .mixture import Mixture, load_mixture
from .neural.energy import EnergyModel
from .neural.lbl import GatedHiddenTermLBLModel, GatedLBLModel, HiddenTermLBLModel, LBLModel
from .neural.mlp import MLPModel
from .neural.recurrent import LSTMModel, RNNModel
from .ngram.arpa import read_arpa
from .ngram.binary import BINARY_KIND, load_binary
from .ngram.classes import ClassNgramModel
from .ngram.deleted_interpolation import DeletedInterpolation, load_deleted_interpolation
from .vocab import UNK

# -arch name -> the class that builds (`initial`) and trains it (nplmtk.neural.network.NeuralModel)
ARCHITECTURES = {
    "mlp": MLPModel,
    "energy": EnergyModel,
    "lbl": LBLModel,
    "lbl1": GatedLBLModel,
    "lbl2": HiddenTermLBLModel,
    "lbl3": GatedHiddenTermLBLModel,
    "rnn": RNNModel,
    "lstm": LSTMModel,
}

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


# container kind -> function(ModelFile) -> LanguageModel
MODEL_KINDS = {
    MLPModel.kind: MLPModel.from_file,
    EnergyModel.kind: EnergyModel.from_file,
    LBLModel.kind: LBLModel.from_file,
    GatedLBLModel.kind: GatedLBLModel.from_file,
    HiddenTermLBLModel.kind: HiddenTermLBLModel.from_file,
    GatedHiddenTermLBLModel.kind: GatedHiddenTermLBLModel.from_file,
    RNNModel.kind: RNNModel.from_file,
    LSTMModel.kind: LSTMModel.from_file,
    DeletedInterpolation.kind: load_deleted_interpolation,
    ClassNgramModel.kind: ClassNgramModel.from_file,
    BINARY_KIND: load_binary,  # an ARPA model's tables, memory-mapped (-write-bin-lm)
    Mixture.kind: load_mixture,  # given `load` (and allow_paths) by `load`
    # A checkpoint scores as the best model so far, so `nplm ppl -lm DIR/checkpoint.nplm`
    # follows a run that is going on.
    CHECKPOINT_KIND: checkpoint_model,
}


def load(path, allow_paths=False, unk=None):
    """Open any model file: ARPA text (optionally gzipped) or an nplm container. A
    mixture's components must lie in its folder unless `allow_paths`. `unk` names the
    unknown word of an ARPA model (SRILM's -map-unk)."""
    if not container.is_container(path):
        return read_arpa(path, unk=unk or UNK)
    if unk is not None:
        raise InputError("only an ARPA model's unknown word can be renamed", path=path)
    model_file = container.load(path)
    loader = MODEL_KINDS.get(model_file.kind)
    if loader is None:
        raise InputError(f"model kind '{model_file.kind}' is not supported by this version", path=path)
    if loader is load_mixture:
        return load_mixture(model_file, lambda name: load(name, allow_paths), allow_paths)
    return loader(model_file)
