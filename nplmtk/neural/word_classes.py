"""The classes of the class-factored output layer (`output` "class", Mikolov's;
cython_ext/class_output.pxd): each word's class by frequency, and the lists its kernel
reads. A model file keeps each word's class as `class_of`, checked on load."""
import numpy as np


def frequency_classes(counts, classes):
    """Each word's class, by frequency as RNNLM and faster-rnnlm bin them: the words by
    descending count, cut where the running sum of sqrt(count) crosses each 1/K of its
    total (classes left empty by a very frequent word are dropped)."""
    counts = np.asarray(counts, dtype=np.float64)
    order = np.argsort(-counts, kind="stable")
    mass = np.sqrt(counts[order])
    before = (np.cumsum(mass) - mass) / max(mass.sum(), 1e-300)
    ranked = np.minimum((before * classes).astype(np.int64), classes - 1)
    class_of = np.empty(len(counts), dtype=np.int64)
    class_of[order] = np.unique(ranked, return_inverse=True)[1]
    return class_of


def class_lists(class_of):
    """The class-factored output layer's lists for its kernel: the words of class 0, then
    of class 1, ... (each class in id order), the K + 1 offsets of the classes in that list,
    each word's class, and each word's place within its class (int32 arrays)."""
    class_of = np.asarray(class_of, dtype=np.int32)
    sizes = np.bincount(class_of)
    members = np.argsort(class_of, kind="stable").astype(np.int32)
    starts = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int32)
    slot_of = np.empty_like(members)
    slot_of[members] = np.arange(len(members)) - np.repeat(starts[:-1], sizes)
    return members, starts, class_of, slot_of
