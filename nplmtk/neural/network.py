"""What every neural architecture shares: the training protocol's side of a model, its
model file and its checkpoint arrays. A feed-forward architecture (MLP, energy network,
log-bilinear) predicts each word from a window of the `order` - 1 previous words; its
training examples are those windows (docs/ARCHITECTURE.md: "adding an architecture")."""
import os
import resource

import numpy as np

from .. import container
from ..errors import InputError, ParameterError
from ..lm import LanguageModel
from .blas import blas_thread_count, on_workers
from .declarations import OUTPUT_LAYERS, TRAINING_OPTIONS, Capabilities, Option, Role, Settings
from .huffman import huffman_tree, tree_paths
from .word_classes import frequency_classes

SCORING_BATCH = 256
SCORING_MEMORY = 1 << 30  # bytes of scores (rows of |V| floats) the scoring workers may hold in all
MAX_ORDER = 20  # as train-nplm -order
MAX_UNITS = 1 << 20  # features or hidden units a file may declare
# The largest |w| a network file may hold. Trained parameters stay near the scale they
# start at (1/sqrt(fan-in)): weight decay, the learning rate's decay and the recurrent
# models' gradient clipping keep them there. nplm's models of Brown end within 7 (the
# largest |w|: mlp 1.72, lbl 2.86, rnn 2.97, lstm 6.41, an output bias), its toy models
# at -lr 0.1 within 15 (tests/test_hostile_models.py allows them 100); a value beyond 1e4
# is a damaged or crafted file, whose scores would be wrong with nothing said (1e20 in C:
# ppl 103.9 for 65.0).
MAX_PARAMETER = 1e4
# the meta keys of model files: their types (or the values allowed) and integer minima
META_TYPES = {"features": int, "hidden": int, "direct": bool, "bias": bool, "layers": int, "tie": bool,
              "peephole": bool, "reset_state": ("sentence", "never"), "classes": int, "hs": bool,
              "heads": int, "ff": int, "positions": ("learned", "sinusoidal", "relative"), "memory": int,
              "context": int, "mos": int}
META_MINIMUM = {"features": 1, "hidden": 0, "layers": 1, "classes": 0, "heads": 1, "ff": 1, "memory": 0,
                "context": 1, "mos": 0}
META_DEFAULTS = {"classes": 0, "hs": False}  # keys newer than some model files: the value those files mean
META_ONLY_WHEN_SET = {"mos"}  # keys a model file has only when they are not 0 (its meta is as it was written)


# The hidden activations the feed-forward and recurrent kernels switch on, by their codes.
# The kernels themselves (nplmtk._ext) load BLAS through scipy: each model imports its
# kernel when it first builds a network, so that opening any other model does not.
ACTIVATION_CODES = {"tanh": 0, "sigmoid": 1, "relu": 2, "linear": 3}


def distinct_rows(rows):
    """The distinct rows of an int32 matrix (in lexicographic order) and, for each row, the
    index of its own among them: np.unique(rows, axis=0, return_inverse=True), 3x faster
    (a lexicographic sort of the columns, not a sort of the rows as void records)."""
    if len(rows) == 0:
        return np.ascontiguousarray(rows, dtype=np.int32), np.zeros(0, dtype=np.int64)
    order = np.lexsort(rows.T[::-1])
    ordered = rows[order]
    starts = np.ones(len(rows), dtype=bool)
    starts[1:] = (ordered[1:] != ordered[:-1]).any(axis=1)
    where = np.empty(len(rows), dtype=np.int64)
    where[order] = np.cumsum(starts) - 1
    return np.ascontiguousarray(ordered[starts], dtype=np.int32), where


class _Recurrent:
    """NeuralModel.RECURRENT, of a class or a model: its CAPABILITIES.recurrent_state, the one
    place that says it (read by the lattice decoder)."""

    def __get__(self, model, model_class):
        return model_class.CAPABILITIES.recurrent_state


class NeuralModel(LanguageModel):
    """A network whose parameters are `params` (name -> float32 array) and whose shape is
    `meta` (the keys in `ARCHITECTURE`). A subclass gives:

    - `arch` (its name in nplmtk.models.ARCHITECTURES), `kind` (its model file's kind),
      `summary` (one line for `train-nplm -arch`'s help);
    - `initial(vocab, order, features, hidden, direct, bias, activation, seed)`;
    - `network(capacity)`: a kernel object with `train(chunk, steps)` (a chunk of
      examples and its optimizer.Steps; returns the log-likelihood, the updates, the sum
      of the effective sample sizes) and `logprobs(examples, out)`;
    - `OPTIONS`, the options `train-nplm -arch` takes for it (nplmtk/neural/declarations.py:
      the trainer's and the network's, the latter keywords of its `initial`), and
      `CAPABILITIES`, what it has beyond this protocol (output layers, criteria, MPI modes,
      parameter blocks and their `output_block`, state carried by its training networks);
    - `SETTINGS`, the dataclass of its own training settings (declarations.Settings: the
      fields of its options of target "settings"), and `array_roles(settings)`, each array's
      role (declarations.Role) for the optimizer and the kernels;
    - optionally `check_training(config)`.
    """

    arch = None
    summary = ""
    RECURRENT = _Recurrent()  # examples are steps of word streams, not windows (CAPABILITIES.recurrent_state)
    FEATURES = "C"  # the array of the words' feature vectors (|V| x m)
    ARCHITECTURE = ("features", "hidden", "direct", "bias")  # the meta keys that shape the network
    ACTIVATIONS = ("tanh",)  # the hidden activations its files may name
    CAPABILITIES = Capabilities()
    SETTINGS = Settings  # none of its own
    OPTIONS = TRAINING_OPTIONS + (
        Option("order", "int", "n: the network sees the n-1 previous words.", 5, low=2, high=MAX_ORDER),
        Option("m", "int", "Word feature dimension.", 30, low=1, key="features"),
        Option("h", "int", "Hidden units.", 100, low=0, key="hidden"),
        Option("direct", "flag", "Direct connections from the input features to the output."),
        Option("activation", "choice", "Hidden layer activation.", "tanh", choices=tuple(ACTIVATION_CODES)),
        Option("no-bias", "flag", "No output and hidden biases.", key="bias", negated=True),
        Option("output", "choice", "The output layer: full: the softmax; class: Mikolov's class-factored softmax "
               "p(class) p(word | class) over -classes classes by frequency, O(K + |class|) per word; hs: the "
               "hierarchical softmax over the Huffman tree of the training counts, O(log |V|) per word. Both "
               "exactly normalised.", "full", choices=OUTPUT_LAYERS, choices_from="outputs"),
        Option("classes", "int", "-output class: the number of classes K [the square root of |V|].", low=1),
    )

    def __init__(self, vocab, params, order, activation="tanh", meta=None):
        self.vocab = vocab
        self.params = params
        self.order = order
        self.activation = activation
        self.meta = meta or {}
        self._paths = None

    @property
    def output(self):
        """The output layer: "full", "class" or "hs" (one of CAPABILITIES.outputs)."""
        return "hs" if self.meta.get("hs") else "class" if self.meta.get("classes") else "full"

    @classmethod
    def output_meta(cls, vocab, output, classes, counts):
        """The meta of the output layer `output` (one of CAPABILITIES.outputs): "hs", the Huffman
        tree of `counts` (each word's count in the training text, </s> included); "class",
        `classes` classes (default sqrt |V|) by frequency from `counts`; "full", neither."""
        outputs = cls.CAPABILITIES.outputs
        if output not in outputs:
            raise ParameterError(f"{{output}}: unknown value '{output}' (choose from {', '.join(outputs)})")
        if classes is not None and output != "class":
            raise ParameterError("{classes} applies to {output} class")
        if output != "full" and counts is None:
            raise ParameterError(f"{{output}} {output} needs the training counts of the words")
        if classes is not None and not 1 <= classes <= len(vocab):
            raise ParameterError(f"{{classes}} must be from 1 to |V| = {len(vocab)}")
        meta = {"classes": 0, "hs": output == "hs"}
        if output == "hs":
            meta["tree"] = huffman_tree(counts)
        if output == "class":
            class_of = frequency_classes(counts, classes or max(1, round(len(vocab) ** 0.5)))
            meta.update(classes=int(class_of.max()) + 1, class_of=class_of.tolist())
        return meta

    @classmethod
    def bias_arrays(cls, shape):
        """The names of its bias arrays (every other array is a weight), for a network of `shape` (meta)."""
        return {"b", "d", "bn", "bc"}

    def array_roles(self, settings):
        """Each array's role (declarations.Role) under the architecture's `settings`: the
        weights decayed, the biases (bias_arrays) not, none frozen."""
        biases = self.bias_arrays(self.meta)
        return {name: Role(bias=name in biases, decayed=name not in biases) for name in self.params}

    def output_touches_few_rows(self):
        """Whether an update reads and steps only a few rows of the output layer (the
        trainer then decays the dense weights in bulk less often)."""
        return False

    def hs_paths(self):
        """The paths of the hierarchical softmax's Huffman tree (meta "tree"), for its kernel."""
        if self._paths is None:
            self._paths = tree_paths(self.meta["tree"], len(self.vocab))
        return self._paths

    # -- the training protocol ----------------------------------------------------------
    def training_examples(self, corpus, config):
        """The examples the trainer shuffles and shares out: one window of `order` word ids
        per predicted token whose target is in the vocabulary (context OOVs read as <unk>),
        gathered chunk by chunk from the corpus (`examples[index]`)."""
        return corpus.window_examples(self.order, self.vocab.unk)

    def example_order(self, rng, count):
        """The order of the examples in an epoch: shuffled (int32 where it fits: 4 bytes an
        example; the same order as rng.permutation). A recurrent model keeps its streams in
        order, so that each worker's kernel carries its state from chunk to chunk."""
        order = np.arange(count, dtype=np.int32 if count < 2 ** 31 else np.int64)
        rng.shuffle(order)
        return order

    def examples_per_update(self, config):
        return config.batch

    def example_words(self, examples):
        """The predicted words in an array of examples (for words/s and the running ppl)."""
        return len(examples)

    def training_network(self, config, worker):
        """Worker `worker`'s kernel object over the shared parameter arrays; with threads
        sharing each update (threads_per_worker), a kernel of that many parts."""
        parts = self.threads_per_worker(config)
        if parts > 1:
            return self.network(capacity=config.batch, parts=parts)
        return self.network(capacity=config.batch)

    def threads_per_worker(self, config):
        """Of config.threads, how many share each worker (and each of its updates); the
        workers, config.threads // this, train lock-free side by side."""
        return 1

    def tiny_examples(self, examples, count, seed):
        """Algorithm 4's tiny set, whose exact perplexity (example_logprobs) importance
        sampling checks: `count` training examples at random, in their order."""
        pick = np.random.default_rng(seed).choice(len(examples), min(count, len(examples)), replace=False)
        return np.ascontiguousarray(examples[np.sort(pick)])

    def example_logprobs(self, examples):
        """Exact natural-log probability of each example's target, the batches of
        SCORING_BATCH shared among workers (as many as BLAS threads, each then on a
        single-threaded BLAS: the softmax runs in parallel too), each batch as one worker
        alone would score it."""
        scores = np.empty(len(examples))
        if len(examples) == 0:
            return scores
        examples = np.ascontiguousarray(examples)
        batches = -(-len(examples) // SCORING_BATCH)
        workers = self.scoring_workers(batches, SCORING_BATCH)
        bounds = [SCORING_BATCH * (batches * q // workers) for q in range(workers)] + [len(examples)]

        def score(q):
            self.network().logprobs(examples[bounds[q]:bounds[q + 1]], scores[bounds[q]:bounds[q + 1]])

        on_workers(score, workers)
        return scores

    def ngram_logprobs(self, grams, progress=None):
        """Natural-log p(w | h) of each row (h..., w) of `grams` (an n-gram model's rows): the
        window is the row's last `order` words, a row shorter than the window padded on the
        left with <s> (exact for rows at least as long as the window, or starting with <s>);
        `progress(k)`: told of each k rows scored."""
        grams = np.asarray(grams, dtype=np.int32)
        width = grams.shape[1]
        if width >= self.order:
            windows = grams[:, width - self.order:]
        else:
            windows = np.concatenate([np.full((len(grams), self.order - width), self.vocab.bos, dtype=np.int32),
                                      grams], axis=1)
        out = self.example_logprobs(np.ascontiguousarray(windows))
        if progress is not None:
            progress(len(grams))
        return out

    def scoring_workers(self, jobs, rows):
        """How many workers score `jobs` (batches, streams): one a BLAS thread, at most one
        a job, and no more than SCORING_MEMORY holds of `rows` rows of scores each."""
        fit = SCORING_MEMORY // max(1, 4 * rows * len(self.vocab))
        return min(blas_thread_count(), jobs, max(1, fit))

    def check_training(self, config):
        """Raise a ParameterError for training settings this architecture cannot take."""

    def check_training_buffers(self, config, workers):
        """Refuse a batch whose buffers cannot fit in memory: of each worker's, at least the
        inputs, hidden units and (full softmax) scores of every window of a batch."""
        meta = self.meta
        per_window = (self.order - 1) * meta.get("features", 0) + meta.get("hidden", 0) \
            + (len(self.vocab) if self.output == "full" else 0)
        check_fits(4 * workers * config.batch * per_window,
                   f"{{batch}} {config.batch} ({workers} worker{'s' if workers > 1 else ''})")

    def initialise_from(self, source, names=None):
        """Start from `source`'s parameters: every array it has under a name this network
        has (or those of `names`), of the same shape (Zhang et al. sec. 3: Model 1 takes
        Model 0's R, C_i and biases and so predicts exactly as Model 0; Model 2 takes
        those and a trained Model 1's A). Returns the names copied."""
        if not isinstance(source, NeuralModel):
            raise ParameterError("{init_from}: not a neural model")
        if source.order != self.order or list(source.vocab.words) != list(self.vocab.words):
            raise ParameterError(f"{{init_from}}: a model of order {source.order} over {len(source.vocab)} words; "
                                 f"this one has order {self.order} and {len(self.vocab)} words (the same vocabulary "
                                 "is needed)")
        shared = [name for name in self.params if name in source.params and (names is None or name in names)]
        for name in set(names or ()) - set(shared):
            raise ParameterError(f"{{init_from}}: no block '{name}' in both networks")
        for layout, blocks in (("tree", ("Vn", "bn")), ("class_of", ("Vc", "bc"))):  # rows that mean nodes or classes
            if set(blocks) & set(shared) and source.meta.get(layout) != self.meta.get(layout):
                raise ParameterError(f"{{init_from}}: its {' and '.join(blocks)} belong to another "
                                     f"{'tree' if layout == 'tree' else 'set of classes'} than this network's")
        for name in shared:
            if source.params[name].shape != self.params[name].shape:
                raise ParameterError(f"{{init_from}}: its {name} is {'x'.join(map(str, source.params[name].shape))}, "
                                     f"this network's {'x'.join(map(str, self.params[name].shape))}")
        if not shared:
            raise ParameterError(f"{{init_from}}: no parameter in common with {self.arch}")
        for name in shared:
            self.params[name][...] = source.params[name]
        return shared

    # -- dynamic evaluation (nplmtk.neural.dynamic) ---------------------------------------
    def adaptation_segments(self, corpus, length):
        """The text's predictions in order, `length` a segment: (windows, the index of each
        among corpus.windows' rows); a target outside the vocabulary is left out."""
        usable, rows = self._predicted_windows(corpus)
        for start in range(0, len(usable), length):
            yield np.ascontiguousarray(rows[start:start + length]), usable[start:start + length]

    def adaptation(self, length):
        """A step of dynamic evaluation on a segment: the log p of its windows' targets, and
        the gradients of -sum log p written into `grads` (arrays shaped like the parameters)."""
        network = self.network(capacity=length)

        def step(rows, grads):
            logp = np.empty(len(rows))
            network.logprobs(rows, logp)
            network.gradients(rows, grads)
            return logp
        return step

    # -- scoring --------------------------------------------------------------------------
    def _predicted_windows(self, corpus):
        """The indices of corpus.windows' rows whose target is in the vocabulary, and those
        rows (int32): a target outside it has no probability; as context it reads as <unk>."""
        self.check_vocab(corpus)
        windows = corpus.windows(self.order)
        usable = np.flatnonzero(windows[:, -1] >= 0)
        return usable, np.where(windows[usable] < 0, self.vocab.unk, windows[usable]).astype(np.int32)

    def logprobs(self, corpus):
        usable, rows = self._predicted_windows(corpus)
        out = np.full(corpus.num_words + corpus.num_sentences, -np.inf)
        # each distinct window scored once: N-best hypotheses share most of theirs
        distinct, where = distinct_rows(rows)
        out[usable] = self.example_logprobs(distinct)[where]
        return out

    def validation_logprobs(self, corpus):
        """logprobs of the validation text during training (a model may score it faster
        than `logprobs`, as its peers do)."""
        return self.logprobs(corpus)

    def begin_state(self):
        """A word at a time (nplmtk/incremental.py): the state is the window of order - 1 ids."""
        return (self.vocab.bos,) * (self.order - 1)

    def score_words(self, states, words):
        from .steps import window_steps
        return window_steps(self, states, words)

    def next_distribution(self, history):
        history = ([self.vocab.bos] * self.order + list(history))[-(self.order - 1):]
        rows = np.array([history + [w] for w in range(len(self.vocab))], dtype=np.int32)
        return np.exp(self.example_logprobs(rows))

    # -- files ----------------------------------------------------------------------------
    def file_meta(self):
        """What a model file or checkpoint records besides the arrays and the vocabulary."""
        return {"order": self.order, "arch": self.arch, "activation": self.activation, **self.meta}

    @classmethod
    def array_shapes(cls, vocab_size, order, shape):
        """The arrays a network of this architecture has: name -> shape, from the vocabulary
        size, the order and the `ARCHITECTURE` meta values in `shape`."""
        raise NotImplementedError

    @classmethod
    def from_arrays(cls, vocab, params, meta, path=None):
        """A model from stored arrays and the meta of a model file or checkpoint, checked
        first against what the architecture promises (the kernels do not check sizes): an
        InputError naming `path` for anything else."""
        order, activation, shape = cls._checked_meta(vocab, meta, path)
        expected = cls.array_shapes(len(vocab), order, shape)
        for name in sorted(set(expected) ^ set(params)):
            raise InputError(f"{cls.arch} network with {'an unexpected' if name in params else 'no'} array '{name}'",
                             path=path)
        for name, dims in expected.items():
            array = params[name]
            if array.dtype != np.float32 or tuple(array.shape) != tuple(dims):
                raise InputError(f"{cls.arch} network: array '{name}' is {array.dtype} {tuple(array.shape)}, its "
                                 f"shape says float32 {tuple(dims)}", path=path)
            if array.size and not -MAX_PARAMETER <= array.min() <= array.max() <= MAX_PARAMETER:  # NaN fails
                if not np.isfinite(array).all():
                    raise InputError(f"{cls.arch} network: array '{name}' holds non-finite values", path=path)
                at = np.unravel_index(np.argmax(np.abs(array)), array.shape)
                raise InputError(f"{cls.arch} network: array '{name}' holds {array[at]:g} at {list(map(int, at))}, "
                                 f"beyond the {MAX_PARAMETER:g} that no trained parameter nears", path=path)
        return cls(vocab, {k: np.array(v) for k, v in params.items()}, order, activation, shape)

    @classmethod
    def _checked_meta(cls, vocab, meta, path):
        """(order, activation, the ARCHITECTURE values) of a file's meta, or an InputError."""
        if vocab is None or len(vocab) < 3:
            raise InputError(f"{cls.arch} network without a vocabulary", path=path)
        order = meta.get("order")
        recurrent = cls.CAPABILITIES.recurrent_state
        if recurrent and order is not None:
            raise InputError(f"{cls.arch} network with an order ({order!r}): recurrent models have none", path=path)
        if not recurrent and (type(order) is not int or not 2 <= order <= MAX_ORDER):
            raise InputError(f"{cls.arch} network of order {order!r} (an integer from 2 to {MAX_ORDER})", path=path)
        activation = meta.get("activation", "tanh")
        if activation not in cls.ACTIVATIONS:
            raise InputError(f"{cls.arch} network with activation {activation!r} "
                             f"(expected {' or '.join(cls.ACTIVATIONS)})", path=path)
        shape = {}
        for key in cls.ARCHITECTURE:
            if key in META_ONLY_WHEN_SET and key not in meta:
                continue
            value, kind = meta.get(key, META_DEFAULTS.get(key)), META_TYPES[key]
            if isinstance(kind, tuple):
                if type(value) is not str or value not in kind:
                    raise InputError(f"{cls.arch} network with {key} {value!r} (expected {' or '.join(kind)})",
                                     path=path)
            elif type(value) is not kind or (kind is int and not META_MINIMUM[key] <= value <= MAX_UNITS):
                raise InputError(f"{cls.arch} network with {key} {value!r} (expected "
                                 + ("true or false)" if kind is bool else
                                    f"an integer from {META_MINIMUM[key]} to {MAX_UNITS:,})"), path=path)
            shape[key] = value
        if shape.get("classes"):
            count, class_of = shape["classes"], meta.get("class_of")
            if (type(class_of) is not list or len(class_of) != len(vocab)
                    or any(type(c) is not int or not 0 <= c < count for c in class_of) or len(set(class_of)) != count):
                raise InputError(f"{cls.arch} network whose class_of is not one of its {count} classes for each of its "
                                 f"{len(vocab)} words, every class used", path=path)
            shape["class_of"] = class_of
        if shape.get("hs"):
            tree = meta.get("tree")
            try:
                if type(tree) is not list or any(type(child) is not int for child in tree):
                    raise ValueError("not a list of node ids")
                tree_paths(tree, len(vocab))
            except ValueError as error:
                raise InputError(f"{cls.arch} network whose hierarchical softmax tree is broken: {error}",
                                 path=path) from None
            shape["tree"] = tree
        return order, activation, shape

    @classmethod
    def from_file(cls, model_file):
        return cls.from_arrays(model_file.vocab, model_file.arrays, model_file.meta, model_file.path)

    def save(self, path, extra_meta=None):
        container.save(path, self.kind, self.params, meta={**self.file_meta(), **(extra_meta or {})},
                       vocab=self.vocab)


def memory_bytes():
    """The most a process here can allocate: the machine's memory, or less under a limit
    of its address space (ulimit -v)."""
    physical = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    limit = resource.getrlimit(resource.RLIMIT_AS)[0]
    return physical if limit == resource.RLIM_INFINITY else min(physical, limit)


def check_fits(needed, what):
    """Refuse, before anything is allocated, `what` (a ParameterError message naming the
    `{parameters}` that set its size) that would take `needed` bytes, more than memory_bytes()."""
    available = memory_bytes()
    if needed > available:
        raise ParameterError(f"{what} would need {needed:,} bytes ({needed / 2 ** 30:,.1f} GiB), more than the "
                             f"{available / 2 ** 30:,.1f} GiB of memory this process can have")


def check_parameters_fit(cls, vocab_size, order, meta):
    """Refuse a network (of class `cls`) whose float32 parameters cannot fit in memory."""
    sizes = [int(np.prod(shape, dtype=np.float64)) for shape in cls.array_shapes(vocab_size, order, meta).values()]
    shape = ", ".join(f"{{{name}}} {meta[name]}" for name in ("features", "hidden", "classes") if meta.get(name))
    check_fits(4 * sum(sizes), f"the parameters of {{arch}} {cls.arch} ({shape}, {vocab_size:,} words)")


def uniform_initialiser(seed):
    """Small uniform weights scaled by each layer's fan-in, as Bengio et al. did."""
    rng = np.random.default_rng(seed)

    def uniform(shape, fan_in):
        bound = 1.0 / np.sqrt(fan_in)
        return rng.uniform(-bound, bound, size=shape).astype(np.float32)
    return uniform
