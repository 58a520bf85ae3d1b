"""Figures of what training did and what a network learned (matplotlib, an optional extra:
`pip install nplmtk[plot]`, drawn with the Agg backend, no display needed): train and
valid perplexity of several runs against epochs and against wall time, and a 2-D map
(principal components) of the features of a network's most frequent words."""
import io
import json
import math
import os

import numpy as np

from .embeddings import word_features
from .errors import InputError, NplmError
from .io import open_output, read_lines


def _pyplot():
    try:
        import matplotlib
    except ImportError:
        raise NplmError("plotting needs matplotlib: pip install 'nplmtk[plot]'") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


LOG_NUMBERS = ("epoch", "train_ppl", "seconds")  # what every record has; valid_ppl when there is a valid text


def read_log(path):
    """The records of a train-nplm -log file (JSON lines, each with an epoch and a train ppl),
    their numbers as floats."""
    records = []
    for number, line in enumerate(read_lines(path), 1):
        try:
            record = json.loads(line)
            if not isinstance(record, dict) or not all(isinstance(record.get(k), (int, float)) for k in LOG_NUMBERS) \
                    or not isinstance(record.get("valid_ppl", 0.0), (int, float)):
                raise ValueError
            try:  # an integer beyond float's range (10**400) overflows here, not in the figure
                record.update({k: float(record[k]) for k in (*LOG_NUMBERS, "valid_ppl") if k in record})
            except OverflowError:
                raise InputError("a number in the log record is beyond the range of a float (about 1.8e308)",
                                 path=path, line=number) from None
        except (ValueError, RecursionError):  # RecursionError: arrays nested thousands deep
            raise InputError("not a train-nplm log record (JSON with epoch, train_ppl, seconds as numbers)",
                             path=path, line=number) from None
        records.append(record)
    if not records:
        raise InputError("empty log", path=path)
    return records


def _save(figure, path, plt):
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=100)
    plt.close(figure)
    with open_output(path, binary=True) as out:
        out.write(buffer.getvalue())


def training_curves(logs, path):
    """Train (dashed) and valid (solid) ppl of each log against epochs and against minutes."""
    plt = _pyplot()
    runs = [(os.path.basename(log).rsplit(".", 1)[0], read_log(log)) for log in logs]
    figure, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharey=True)
    for name, records in runs:
        epochs = [r["epoch"] for r in records]
        minutes = np.cumsum([r["seconds"] for r in records]) / 60
        for axis, x in zip(axes, (epochs, minutes)):
            line, = axis.plot(x, [r["train_ppl"] for r in records], "--", label=f"{name} train")
            valid = [r.get("valid_ppl", math.nan) for r in records]
            if not all(math.isnan(v) for v in valid):
                axis.plot(x, valid, "-o", color=line.get_color(), markersize=3, label=f"{name} valid")
    for axis, label in zip(axes, ("epoch", "training time (minutes)")):
        axis.set_xlabel(label)
        axis.set_yscale("log")
        axis.grid(True, which="both", alpha=0.3)
    axes[0].set_ylabel("perplexity")
    axes[1].legend(fontsize=8)
    figure.tight_layout()
    _save(figure, path, plt)


def embedding_map(model, path, words=100):
    """The first principal components of the features of the `words` first words of the
    vocabulary after <unk>, <s>, </s> (`nplm vocab` lists them most frequent first), labelled."""
    plt = _pyplot()
    names, vectors = word_features(model)
    names, vectors = names[3:3 + words], np.asarray(vectors[3:3 + words], dtype=np.float64)
    centred = vectors - vectors.mean(axis=0)
    _, _, axes_of_variance = np.linalg.svd(centred, full_matrices=False)
    points = centred @ axes_of_variance[:2].T
    figure, axis = plt.subplots(figsize=(9, 7))
    axis.scatter(points[:, 0], points[:, 1], s=6, color="tab:blue")
    for (x, y), name in zip(points, names):
        axis.annotate(name, (x, y), fontsize=8, xytext=(2, 2), textcoords="offset points")
    axis.set_title(f"{model.kind}: features of {len(names)} words, first two principal components")
    figure.tight_layout()
    _save(figure, path, plt)
