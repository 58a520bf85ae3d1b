"""Back-off n-gram models in the nplm container (`-write-bin-lm`): for each order the
sorted keys of nplmtk/ngram/index.py, the float32 log10 probabilities and back-off weights
(-99 for log 0, as in ARPA files), and which n-grams carry a back-off weight and which are
contexts of the back-off walk. The arrays load by memory map: opening a model parses no
text and sorts nothing. Every array is checked before the scoring kernel sees it, since
the kernel trusts the tables."""
import numpy as np

from .. import container
from .._ext.backoff_kernels import checked_log10s, children_runs
from ..errors import InputError, NplmError
from .backoff import MAX_LOG10_BACKOFF, PSEUDO_ZERO, BackoffModel, log10_fault
from .counts import MAX_ORDER
from .index import NgramIndex
from .layout import BINARY_KIND, TABLES



def check_binary_name(path):
    """Refuse, before any work, a name that `write_binary` would compress (`.gz`): a binary
    model is read by memory map."""
    if path is not None and str(path).endswith(".gz"):
        raise NplmError("a binary model is memory-mapped, not compressed: give a name without .gz", path=path)


def write_binary(model, path):
    """`model` (a BackoffModel) as a container that `nplmtk.load` opens, its values those
    of its ARPA file (an estimated model's are rounded as that file rounds them, a model
    read from a file keeps the values read), so that the two score alike. The tables are
    written from the model's arrays, the values a piece at a time: no copy of a table."""
    check_binary_name(path)
    arrays = {}
    for k in range(1, model.order + 1):
        arrays[f"keys.{k}"] = model.index.keys[k - 1]
        for name, values in (("logp", model.logp), ("bow", model.bow)):
            arrays[f"{name}.{k}"] = container.PiecedArray(
                "<f4", (len(values[k - 1]),),
                lambda values=values[k - 1]: stored_log10s(values, printed=not model.as_read))
        arrays[f"has_bow.{k}"] = np.asarray(model.has_bow[k - 1], dtype=bool)
        arrays[f"node.{k}"] = np.asarray(model.node[k - 1], dtype=bool)
    container.save(path, BINARY_KIND, arrays, meta={"order": model.order}, vocab=model.vocab)


STORED_PIECE = 1 << 20  # values converted at a time


def stored_log10s(values, printed):
    """Pieces of the float32 log10 `values` as a binary model stores them: log 0 as -99, each
    value rounded as an ARPA file prints it when `printed`."""
    from .._ext.arpa_format import as_printed  # here: opening a binary model parses no ARPA text
    for start in range(0, len(values), STORED_PIECE):
        piece = np.ascontiguousarray(values[start:start + STORED_PIECE], dtype=np.float32)
        if printed:
            piece = as_printed(piece)
        yield np.where(np.isneginf(piece), np.float32(PSEUDO_ZERO), piece)


def load_binary(model_file):
    """The BackoffModel of a container written by `write_binary`, refused unless every
    array has its dtype and length, the keys of each order are increasing and name an
    n-gram of the order below (word ids within the vocabulary), and the log10 values are
    those an estimator writes (nplmtk/ngram/backoff.py: `log10_fault`)."""
    path, arrays, vocab = model_file.path, model_file.arrays, model_file.vocab

    def refuse(what):
        raise InputError(f"back-off n-gram model {what}", path=path)

    if vocab is None:
        refuse("without a vocabulary")
    order = model_file.meta.get("order")
    if type(order) is not int or not 1 <= order <= MAX_ORDER:
        refuse(f"with order {order!r} (expected 1 to {MAX_ORDER})")
    expected = {f"{name}.{k}" for name in TABLES for k in range(1, order + 1)}
    for name in sorted(expected - set(arrays)):
        refuse(f"with no array '{name}'")
    for name in sorted(set(arrays) - expected):
        refuse(f"with an unexpected array '{name}'")
    vocab_size, parents = len(vocab), 1
    keys, children, values = [], [], {"logp": [], "bow": [], "has_bow": [], "node": []}
    for k in range(1, order + 1):
        if arrays[f"keys.{k}"].ndim != 1:
            refuse(f"whose array 'keys.{k}' has the shape {arrays[f'keys.{k}'].shape}, not one dimension")
        count = len(arrays[f"keys.{k}"])
        for name, dtype in TABLES.items():
            array = arrays[f"{name}.{k}"]
            if array.dtype.str != dtype or array.shape != (count,):
                refuse(f"whose array '{name}.{k}' is {array.dtype} {array.shape}, expected {np.dtype(dtype)} "
                       f"({count},)")
        key = arrays[f"keys.{k}"]
        # keys[i] = row of the prefix * V + word: increasing, and every prefix a row below
        runs = children_runs(parents, key, vocab_size)
        if runs is None:
            refuse(f"whose {k}-gram keys are not increasing keys of n-grams of its {vocab_size} words"
                   + (f" and {parents} {k - 1}-grams" if k > 1 else ""))
        keys.append(key)
        if k > 1:
            children.append(runs)
        for name in ("logp", "bow"):
            array = arrays[f"{name}.{k}"]
            highest = MAX_LOG10_BACKOFF if name == "bow" else 0.0
            valid, holds_zero = checked_log10s(array, PSEUDO_ZERO, highest, PSEUDO_ZERO)
            if not valid:
                # -inf counts here (unlike in an ARPA file's tables): a binary model writes log 0 as -99
                row = np.flatnonzero(~((array >= PSEUDO_ZERO) & (array <= highest)))[0]
                what = "back-off weight" if name == "bow" else "probability"
                refuse(f"whose array '{name}.{k}' gives the {k}-gram '{_ngram_words(keys, vocab, row)}' the log10 "
                       f"{what} {array[row]:g}: {log10_fault(array[row], name == 'bow')}")
            # -99 is log 0; a copy only where it occurs (the 1-grams' <s>), else the memory map itself
            values[name].append(np.where(array == PSEUDO_ZERO, np.float32(-np.inf), array) if holds_zero else array)
        values["has_bow"].append(arrays[f"has_bow.{k}"])
        values["node"].append(arrays[f"node.{k}"])
        parents = count
    return BackoffModel(vocab, None, values["logp"], values["bow"], values["has_bow"],
                        NgramIndex(vocab_size, [], keys), node=values["node"], children=children, as_read=True)


def _ngram_words(keys, vocab, row):
    """The words of row `row` of the highest order in `keys` (checked keys), as text."""
    words = []
    for level in reversed(keys):
        row, word = divmod(int(level[row]), len(vocab))
        words.append(vocab.words[word])
    return " ".join(reversed(words))
