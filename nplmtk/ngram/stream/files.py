"""The working files of the out-of-core estimate, each declared once: its
values, the stage that writes it and the stages that may read it last (row_files.py).
The stages, in the order an estimate runs them (fix-up only with cutoffs, pruning only
when pruned): rows (prefix and suffix rows), discounts, probabilities, fix-up (contexts
without probabilities, walks.py), pruning (prune.py), model (the model's rows, `f*`,
model.py), writing (writers.py)."""
import numpy as np

from ..row_files import WorkingFile, declared

# The back-off walk (backoff.backoff_walk) of a row: the probability it ends on and the sum of
# the back-off weights on the way, each a float32 sum in the walk's order.
WALK = np.dtype([("result", np.float32), ("weight", np.float32)])
NO_WALK = np.array((np.nan, np.nan), dtype=WALK)[()]

ROW, COUNT, LOGP, FLAG = np.dtype(np.int64), np.dtype(np.int64), np.dtype(np.float32), np.dtype(np.bool_)
LATER = ("probabilities", "fix-up", "pruning")  # read by the walks of every stage that runs

# the store's rows, as the passes hold them (not a working file: the store's or the unigrams')
GRAMS = WorkingFile("grams", np.int32, "counting", words=True)
# rows: where each row's prefix and suffix are among the order below, Kneser-Ney's counts
PREFIX = WorkingFile("prefix", ROW, "rows", ("model",))
SUFFIX = WorkingFile("suffix", ROW, "rows", LATER)
# at most the vocabulary's size: 4 bytes, so that the suffix search's window holds more rows
CONTINUATION = WorkingFile("continuation", np.int32, "rows", ("discounts",))
# each row's last word: the keys' part (suffix search, pruning; the model's keys when every row is kept)
WORD = WorkingFile("word", np.int32, "rows", ("rows", "pruning", "model"))
# what the discounts and probabilities passes ask of a row's words (rows.row_flags): a byte, not k words
FLAGS = WorkingFile("flags", np.uint8, "rows", ("probabilities",))
ADJUSTED = WorkingFile("adjusted", COUNT, "discounts", ("probabilities",))
# probabilities: the suffix's walk, each row's probability, each context's weight
LOWER = WorkingFile("lower", WALK, "probabilities", ("probabilities",))
LOGP_FILE = WorkingFile("logp", LOGP, "probabilities", ("model",))
PRESENT = WorkingFile("present", FLAG, "probabilities", ("model",), lag=1)
BOW = WorkingFile("bow", LOGP, "probabilities", ("model",))
NODE = WorkingFile("node", FLAG, "probabilities", ("model",))
WALKS = WorkingFile("walk", WALK, "probabilities", LATER, lag=1)
# fix-up (walks.py)
WANTED = WorkingFile("wanted", FLAG, "fix-up")
NEED = WorkingFile("need", FLAG, "fix-up")
REACH = WorkingFile("reach", WALK, "fix-up")  # and pruning's
FINAL_WALK = WorkingFile("final_walk", WALK, "fix-up", ("fix-up", "pruning"))
CONTEXT = WorkingFile("context", FLAG, "fix-up", ("model",))
# pruning (prune.py)
HISTORY = WorkingFile("history", LOGP, "pruning")
EMPTIED = WorkingFile("emptied", FLAG, "pruning")
BEHIND = WorkingFile("behind", FLAG, "pruning")
PRUNED_REACH = WorkingFile("preach", WALK, "pruning")
PRUNED_WALK = WorkingFile("pwalk", WALK, "pruning")
# the model (DiskModel): read by the writers
MODEL_GRAMS = WorkingFile("fgrams", np.int32, "model", ("writing",), words=True)
MODEL_KEYS = WorkingFile("fkeys", np.int64, "model", ("writing",))
MODEL_LOGP = WorkingFile("flogp", LOGP, "model", ("writing",))
MODEL_BOW = WorkingFile("fbow", LOGP, "model", ("writing",))
MODEL_NODE = WorkingFile("fnode", FLAG, "model", ("writing",))
MODEL_CONTEXT = WorkingFile("fcontext", FLAG, "model", ("writing",))
BACKWARD = WorkingFile("backward", ROW, "writing")  # each model row's place read backwards


def _new_version(prefix, file):
    """The file a stage writes to replace `file` (renamed over it when done)."""
    return WorkingFile(prefix + file.name, file.dtype, file.writer)


STREAM_FILES = declared(
    PREFIX, SUFFIX, WORD, FLAGS, CONTINUATION, ADJUSTED, LOWER, LOGP_FILE, PRESENT, BOW, NODE, WALKS, WANTED, NEED,
    REACH, FINAL_WALK, CONTEXT, HISTORY, EMPTIED, BEHIND, PRUNED_REACH, PRUNED_WALK, MODEL_GRAMS, MODEL_KEYS, MODEL_LOGP,
    MODEL_BOW, MODEL_NODE, MODEL_CONTEXT, BACKWARD,
    *(_new_version("fixed_", file) for file in (LOGP_FILE, PRESENT, WALKS)),
    *(_new_version("pruned_", file) for file in (PRESENT, LOGP_FILE, NODE, BOW)))
MODEL_FILES = (MODEL_GRAMS, MODEL_KEYS, MODEL_LOGP, MODEL_BOW, MODEL_NODE, MODEL_CONTEXT)


def last_stage(file, stages):
    """The stage of `stages` (those an estimate runs) after which `file` goes."""
    return max((stage for stage in file.last_readers if stage in stages), key=stages.index, default=None)
