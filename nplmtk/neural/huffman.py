"""The Huffman tree of the hierarchical softmax (`output` "hs", cython_ext/hs_output.pxd),
built from the training counts as word2vec and faster-rnnlm build it, and its paths.

A tree over |V| words is stored as `tree`: for each internal node i (0 .. |V|-2) its two
children, flat (children of node i at 2i and 2i+1), a child c < |V| the word c and
c >= |V| the internal node c - |V|; the root is the last internal node. A model file
keeps that list; `tree_paths` checks it (every child in range, each node the child of
exactly one node, every word reaching the root) before a kernel reads it."""
import heapq

import numpy as np

MAX_DEPTH = 64  # the longest path a model may have (Huffman trees of real counts: ~40)


def huffman_tree(counts):
    """The Huffman tree of `counts` (one per word) as the flat list of children: the two
    lightest nodes merged again and again, ties broken by the lower node id (words first,
    then the internal nodes in the order made), the lighter one child 0."""
    words = len(counts)
    heap = [(float(count), word) for word, count in enumerate(counts)]
    heapq.heapify(heap)
    children = []
    for node in range(words, 2 * words - 1):
        (first_count, first), (second_count, second) = heapq.heappop(heap), heapq.heappop(heap)
        children += [first, second]
        heapq.heappush(heap, (first_count + second_count, node))
    return children


def tree_paths(tree, words):
    """Each word's path from the root as (starts, points, turns): word w's internal nodes
    points[starts[w]:starts[w + 1]] and the child (0 or 1) taken at each. A ValueError
    saying what is wrong for anything but a binary tree over the words with paths of at
    most MAX_DEPTH nodes."""
    nodes = words - 1
    children = np.asarray(tree, dtype=np.int64) if len(tree) else np.zeros(0, np.int64)
    if words < 2 or children.shape != (2 * nodes,):
        raise ValueError(f"a tree over {words} words has {2 * nodes} children, not {len(tree)}")
    root = 2 * words - 2
    if children.min() < 0 or children.max() >= root:
        raise ValueError(f"a child outside 0..{root - 1} (the root {root} is no one's child)")
    if np.bincount(children, minlength=root).max() > 1:
        raise ValueError("a node that is the child of two nodes")
    parent = np.empty(root + 1, dtype=np.int64)
    parent[children] = np.arange(2 * nodes) // 2 + words  # each non-root node is a child exactly once
    parent[root] = root
    turn = np.empty(root + 1, dtype=np.int8)
    turn[children] = np.arange(2 * nodes) % 2
    # all words' paths at once, a step up the tree at a time: trail[s] = the node s steps above
    # (rows past the deepest path are never written, so never given memory)
    trail = np.empty((MAX_DEPTH, words), dtype=np.int32)
    lengths = np.full(words, -1, dtype=np.int64)
    node = np.arange(words, dtype=np.int64)
    for step in range(MAX_DEPTH + 1):
        lengths[(lengths < 0) & (node == root)] = step
        if lengths.min() >= 0:
            break
        if step == MAX_DEPTH:
            word = int(np.flatnonzero(lengths < 0)[0])
            raise ValueError(f"word {word}'s path does not reach the root in {MAX_DEPTH} nodes")
        trail[step] = node
        node = parent[node]
    starts = np.concatenate([[0], np.cumsum(lengths)])
    word_of = np.repeat(np.arange(words), lengths)
    on_path = trail[lengths[word_of] - 1 - (np.arange(starts[-1]) - starts[word_of]), word_of]  # from the root down
    return starts.astype(np.int32), (parent[on_path] - words).astype(np.int32), turn[on_path]
