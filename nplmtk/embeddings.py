"""The word features a network learned, as word2vec's text and binary formats (what gensim's
KeyedVectors.load_word2vec_format reads) or a TSV table, and the nearest words by cosine."""
import numpy as np

from .errors import ParameterError
from .io import open_output

FORMATS = ("word2vec", "word2vec-binary", "tsv")


def word_features(model):
    """(words, |V| x m float32 array): the network's input feature vectors (C; R for the
    log-bilinear models, whose C_i are matrices)."""
    name = getattr(model, "FEATURES", None)
    if name is None or name not in getattr(model, "params", {}):
        raise ParameterError(f"{{lm}}: {model.described} has no word features (networks have)")
    return list(model.vocab.words), model.params[name]


def write_embeddings(path, words, vectors, fmt="word2vec"):
    if fmt not in FORMATS:
        raise ParameterError(f"{{format}}: unknown '{fmt}' (choose from {', '.join(FORMATS)})")
    with open_output(path, binary=True) as out:
        if fmt != "tsv":
            out.write(f"{len(words)} {vectors.shape[1]}\n".encode())
        for word, vector in zip(words, vectors):
            if fmt == "word2vec-binary":  # the word, a space, m little-endian float32s, a newline
                out.write(word.encode() + b" " + np.asarray(vector, dtype="<f4").tobytes() + b"\n")
            else:
                separator = "\t" if fmt == "tsv" else " "
                out.write((word + separator + separator.join(f"{x:.6g}" for x in vector) + "\n").encode())


def nearest(words, vectors, word, count=10):
    """The `count` words whose vectors have the highest cosine with `word`'s, with it."""
    index = {w: i for i, w in enumerate(words)}
    if word not in index:
        raise ParameterError(f"{{neighbours}}: '{word}' is not in the model's vocabulary")
    norms = np.linalg.norm(vectors, axis=1).astype(np.float64)
    cosine = vectors @ vectors[index[word]] / np.maximum(norms * norms[index[word]], 1e-30)
    cosine[index[word]] = -np.inf
    best = np.argsort(-cosine, kind="stable")[:count]
    return [(words[i], float(cosine[i])) for i in best]
