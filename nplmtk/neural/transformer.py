"""The Transformer language model (issue 52): a decoder-only stack of `layers` pre-LayerNorm
blocks of causal multi-head self-attention and a GELU feed-forward layer (Vaswani et al.
2017; Radford et al. 2019's block order), over the token embeddings C scaled by sqrt(m)
plus positions (learned rows P, or the fixed sinusoids), or with Transformer-XL's relative
positions and a memory of the previous segment (Dai et al. 2019); then a final LayerNorm
and the output layers the other networks have (full, class, hierarchical), optionally tied
to C (cython_ext/transformer_network.pyx over transformer_kernels.pyx's stack).

Its examples are a recurrent model's: the text as (input, target) steps of parallel word
streams cut at sentence starts (recurrent.stream_rows), one update per segment of `bptt`
steps of every stream. Without a memory each segment is read on its own (positions 0 ..
bptt - 1); with one, each block also attends to its inputs of the last `memory` steps of
the stream. Scoring reads the text the same way, as SCORING_STREAMS streams that run on
across sentences; hypotheses (N-best lists, the word-at-a-time API) are each scored alone."""
import contextlib
from dataclasses import dataclass

import numpy as np

from ..corpus import Corpus
from ..errors import ParameterError
from ..lm import LanguageModel
from .blas import blas_threads, transposed_products_direct
from .declarations import OUTPUT_LAYERS, Capabilities, Option, Settings, declare
from .network import NeuralModel, check_fits, check_parameters_fit
from .optimizer import adam_of
from .recurrent import stream_rows, stream_segments
from .word_classes import class_lists

POSITIONS = ("learned", "sinusoidal", "relative")  # transformer_network.POSITIONS, by code
MAX_LAYERS = 64  # the stack's MAX_BLOCKS
SCORING_STREAMS = 16  # parts of a text scored side by side
SENTENCE_STREAMS = 64  # hypotheses scored side by side, each alone
NGRAM_ROWS = 4096  # n-grams read (each as a sentence) per pass
# each block's arrays and their shapes in m ("d") and the feed-forward width ("f"), suffixed
# with the block's number: transformer_kernels.BLOCK_PARAMETERS and RELATIVE_PARAMETERS
# (tests/test_transformer_model.py checks them), here so that opening a model loads no kernel
BLOCK_ARRAYS = (("ln1_gain", ("d",)), ("ln1_bias", ("d",)), ("qkv", ("d", "3d")), ("qkv_bias", ("3d",)),
                ("out", ("d", "d")), ("out_bias", ("d",)), ("ln2_gain", ("d",)), ("ln2_bias", ("d",)),
                ("ff1", ("d", "f")), ("ff1_bias", ("f",)), ("ff2", ("f", "d")), ("ff2_bias", ("d",)))
RELATIVE_ARRAYS = (("rel", ("d", "d")), ("rel_u", ("d",)), ("rel_v", ("d",)))
INITIAL_SD = 0.02  # the blocks' weights (GPT-2's), the residual branches' output scaled by 1 / sqrt(2 layers)

TRANSFORMER_OPTIONS = (
    Option("m", "int", "The width d of the embeddings and of every block.", 128, low=2, key="features"),
    Option("layers", "int", "Blocks of attention and feed-forward layer.", 2, low=1, high=MAX_LAYERS),
    Option("heads", "int", "Attention heads per block (they divide -m).", 4, low=1),
    Option("ff", "int", "The feed-forward layer's width [4 -m].", low=1),
    Option("positions", "choice", "learned: a row per position of a segment; sinusoidal: Vaswani et al.'s fixed "
           "sinusoids; relative: Transformer-XL's relative positions in the attention (with -memory).", "learned",
           choices=POSITIONS),
    Option("memory", "int", "-positions relative: each block also attends to its inputs of this many steps before "
           "the segment (Transformer-XL's memory; no gradient flows into it).", 0, low=0),
    Option("tie", "flag", "The output layer is the embeddings C."),
    Option("bptt", "int", "The segment's length: one update per this many steps of every stream; the context the "
           "model reads (with -memory, plus the memory).", 64, low=1, key="context"),
    Option("streams", "int", "The training text as this many parallel streams.", 16, low=1, target="settings"),
    Option("dropout", "real", "Dropout on the embeddings and on each residual branch.", 0.1, low=0, high=0.99,
           target="settings"),
    Option("dropout-attention", "real", "Dropout on the attention weights.", 0.0, low=0, high=0.99,
           target="settings"),
    Option("clip", "real", "Cap on the gradient's norm per word of a segment (0: none).", 1.0, low=0,
           target="settings"),
    Option("optimizer", "choice", "Plain SGD or Adam (-lr its step size, e.g. 1e-3; with -warmup).", "adam",
           choices=("sgd", "adam"), target="training"),
)


@dataclass
class TransformerSettings(Settings):
    """The Transformer's own training settings: `streams` parallel streams, the dropouts,
    the cap on the gradient's norm per word (0: none)."""
    streams: int = 16
    dropout: float = 0.1
    dropout_attention: float = 0.0
    clip: float = 1.0

    def gradient_cap(self):
        return self.clip


class TransformerModel(NeuralModel):
    kind = "nplm-transformer"
    arch = "transformer"
    summary = ("decoder-only Transformer (Vaswani et al. 2017; Transformer-XL's memory with -positions relative): "
               "-layers pre-LayerNorm blocks of causal attention and a GELU feed-forward layer, over segments of "
               "-bptt steps of -streams streams")
    ARCHITECTURE = ("features", "layers", "heads", "ff", "positions", "memory", "context", "tie", "classes", "hs")
    ACTIVATIONS = ("gelu",)
    CAPABILITIES = Capabilities(outputs=OUTPUT_LAYERS, optimizers=("sgd", "adam"), worker_state=True,
                                recurrent_state=True)
    SETTINGS = TransformerSettings
    OPTIONS = declare(NeuralModel.OPTIONS, *TRANSFORMER_OPTIONS,
                      drop=("order", "batch", "h", "direct", "activation", "no-bias"),
                      defaults={"lr": 1e-3, "weight-decay": 0.0, "lr-decay": 0.0})

    def __init__(self, vocab, params, order=None, activation="gelu", meta=None):
        super().__init__(vocab, params, None, "gelu", meta)

    @classmethod
    def initial(cls, vocab, order=None, features=128, layers=2, heads=4, ff=None, positions="learned", memory=0,
                tie=False, context=64, seed=1, output="full", classes=None, counts=None):
        """Random parameters: C ~ N(0, 1 / m) (scaled by sqrt(m) at the input), the blocks'
        weights ~ N(0, INITIAL_SD), LayerNorm gains 1 and every bias 0; `output` and
        `classes` as the other networks' (NeuralModel.output_meta)."""
        if order is not None:
            raise ParameterError(f"{{order}} applies to the feed-forward models: {cls.arch} reads {{bptt}} steps")
        ff = 4 * features if ff is None else ff
        if not 1 <= layers <= MAX_LAYERS:
            raise ParameterError(f"{{layers}} must be from 1 to {MAX_LAYERS}")
        if heads < 1 or features % heads:
            raise ParameterError(f"{{heads}} {heads} must divide {{features}} {features}")
        if positions not in POSITIONS:
            raise ParameterError(f"{{positions}}: unknown value '{positions}' (choose from {', '.join(POSITIONS)})")
        if memory and positions != "relative":
            raise ParameterError("{memory} needs {positions} relative (absolute positions would repeat)")
        if positions != "learned" and features % 2:
            raise ParameterError(f"{{positions}} {positions}: {{features}} must be even (sines, then cosines)")
        if ff < 1 or context < 1 or memory < 0:
            raise ParameterError("{ff} and {context} must be at least 1, {memory} at least 0")
        if output == "hs" and tie:
            raise ParameterError("{output} hs: its node vectors replace the output layer, so {tie} does not apply")
        meta = {"features": features, "layers": layers, "heads": heads, "ff": ff, "positions": positions,
                "memory": memory, "context": context, "tie": tie, **cls.output_meta(vocab, output, classes, counts)}
        check_parameters_fit(cls, len(vocab), None, meta)
        rng = np.random.default_rng(seed)
        params = {}
        for name, shape in cls.array_shapes(len(vocab), None, meta).items():
            if name.rstrip("0123456789").endswith("gain"):
                params[name] = np.ones(shape, dtype=np.float32)
            elif name in cls.bias_arrays(meta):
                params[name] = np.zeros(shape, dtype=np.float32)
            else:
                sd = features ** -0.5 if name in ("C", "P", "V", "Vc", "Vn") else INITIAL_SD
                if name.rstrip("0123456789") in ("out", "ff2"):
                    sd /= (2 * layers) ** 0.5
                params[name] = rng.normal(0, sd, shape).astype(np.float32)
        return cls(vocab, params, None, "gelu", meta)

    @classmethod
    def bias_arrays(cls, shape):
        names = {"d", "bn", "bc", "final_gain", "final_bias"}
        for b in range(shape["layers"]):
            names |= {f"{name}{b}" for name, dims in BLOCK_ARRAYS + RELATIVE_ARRAYS if len(dims) == 1}
        return names

    @classmethod
    def array_shapes(cls, vocab_size, order, shape):
        d, layers, relative = shape["features"], shape["layers"], shape["positions"] == "relative"
        if not 1 <= layers <= MAX_LAYERS or d % shape["heads"] or (shape["memory"] and not relative) \
                or (shape["positions"] != "learned" and d % 2) or (shape["hs"] and (shape["tie"] or shape["classes"])):
            return {}  # no such network: any array is unexpected
        sizes = {"d": d, "3d": 3 * d, "f": shape["ff"]}
        arrays = {"C": (vocab_size, d)}
        if shape["positions"] == "learned":
            arrays["P"] = (shape["context"], d)
        for b in range(layers):
            for name, dims in BLOCK_ARRAYS + (RELATIVE_ARRAYS if relative else ()):
                arrays[f"{name}{b}"] = tuple(sizes[dim] for dim in dims)
        arrays.update(final_gain=(d,), final_bias=(d,))
        if shape["hs"]:
            arrays.update(Vn=(vocab_size - 1, d), bn=(vocab_size - 1,))
            return arrays
        if not shape["tie"]:
            arrays["V"] = (vocab_size, d)
        arrays["d"] = (vocab_size,)
        if shape["classes"]:
            arrays.update(Vc=(shape["classes"], d), bc=(shape["classes"],))
        return arrays

    # -- the training protocol ----------------------------------------------------------
    def check_training(self, config):
        settings = config.settings_for(self)
        if config.batch != 1:
            raise ParameterError("{batch}: the Transformer updates once per {bptt} steps of its {streams} streams")
        if settings.streams < 1 or settings.clip < 0:
            raise ParameterError("{streams} must be at least 1, {clip} at least 0")
        for name in ("dropout", "dropout_attention"):
            if not 0 <= getattr(settings, name) < 1:
                raise ParameterError(f"{{{name}}} must be in [0, 1)")

    def training_examples(self, corpus, config):
        return corpus.stream_steps(config.settings_for(self).streams, self.vocab.unk)

    def example_order(self, rng, count):
        return np.arange(count)  # in order: each worker's streams run on from segment to segment

    def examples_per_update(self, config):
        return self.meta["context"]

    def example_words(self, rows):
        return int(np.count_nonzero(rows[:, 1] >= 0)) if isinstance(rows, np.ndarray) else rows.words

    def check_training_buffers(self, config, workers):
        """Refuse streams whose buffers cannot fit: per worker, at least the attention
        weights of every block and the output scores of a segment."""
        meta, settings = self.meta, config.settings_for(self)
        rows = settings.streams * meta["context"]
        keys = meta["context"] + meta["memory"]
        per_row = meta["layers"] * (meta["heads"] * keys * 2 + 12 * meta["features"] + 2 * meta["ff"]) \
            + (len(self.vocab) if self.output == "full" else 0)
        check_fits(4 * workers * rows * per_row, f"{{streams}} {settings.streams} x {{bptt}} {meta['context']} "
                                                 f"({workers} worker{'s' if workers > 1 else ''})")

    def threads_per_worker(self, config):
        """All of them: one worker, whose threads share each segment's passes (the stack's,
        the full softmax's and the update), as a PyTorch model's threads do."""
        return config.threads

    def training_network(self, config, worker):
        settings = config.settings_for(self)
        return self._network(settings.streams, True, settings, config.seed * 1000 + worker, adam_of(config),
                             self.threads_per_worker(config))

    def _network(self, streams, trainable=False, settings=None, seed=1, adam=None, threads=1):
        """A kernel network (transformer_network.TransformerNetwork) of `streams` streams;
        `settings` the dropouts it applies when training (None: none), `adam` Adam's numbers
        (None: SGD); `threads` share its passes (on a single-threaded BLAS)."""
        from .._ext.transformer_network import TransformerNetwork
        meta = self.meta
        drops = (settings.dropout, settings.dropout_attention, settings.dropout) if settings else (0, 0, 0)
        return TransformerNetwork(self.params, meta["layers"], meta["heads"], streams, meta["context"],
                                  POSITIONS.index(meta["positions"]), meta["memory"], self.vocab.bos, *drops, seed,
                                  trainable, adam, class_lists(meta["class_of"]) if meta.get("classes") else None,
                                  self.hs_paths() if meta.get("hs") else None, threads,
                                  trainable and transposed_products_direct())

    # -- scoring --------------------------------------------------------------------------
    def logprobs(self, corpus):
        """The text as SCORING_STREAMS parts side by side, each read in segments (as in
        training); a target outside the vocabulary is -inf (as input, <unk>)."""
        self.check_vocab(corpus)
        rows, positions = stream_rows(corpus, min(SCORING_STREAMS, corpus.num_sentences), self.vocab)
        return self._stream_logprobs(rows)[positions]

    def logprobs_and_states(self, corpus):
        """logprobs, and the top state that predicted each token (a neural cache's keys)."""
        self.check_vocab(corpus)
        streams = min(SCORING_STREAMS, corpus.num_sentences)
        rows, positions = stream_rows(corpus, streams, self.vocab)
        out = np.full(rows.shape[0] * streams, -np.inf)
        states = np.zeros((rows.shape[0] * streams, self.meta["features"]), dtype=np.float32)
        if len(rows):
            self._score_streams(rows, out, states)
        return out[positions], states[positions]

    def log10probs_sharing_prefixes(self, corpus):
        """log10 p of every token, each sentence read alone from its start (N-best
        hypotheses, and the word-at-a-time API's sentences)."""
        self.check_vocab(corpus)
        out = np.empty(corpus.num_words + corpus.num_sentences)
        offsets = np.asarray(corpus.offsets)
        for lo in range(0, corpus.num_sentences, SENTENCE_STREAMS):
            hi = min(lo + SENTENCE_STREAMS, corpus.num_sentences)
            part = Corpus(corpus.ids[offsets[lo]:offsets[hi]], offsets[lo:hi + 1] - offsets[lo], self.vocab,
                          name=corpus.name)
            rows, positions = stream_rows(part, hi - lo, self.vocab)
            out[offsets[lo] + lo:offsets[hi] + hi] = self._stream_logprobs(rows)[positions]
        return out / np.log(10)

    def example_logprobs(self, examples):
        """log p of the targets >= 0 of stream steps (steps, (inputs, targets), streams)."""
        rows = np.ascontiguousarray(examples, dtype=np.int32)
        if rows.ndim != 3 or rows.shape[1] != 2:
            raise ParameterError(f"{self.arch} models score whole texts or stream steps, not single windows")
        return self._stream_logprobs(rows)[rows[:, 1].reshape(-1) >= 0]

    def tiny_examples(self, examples, count, seed):
        return np.ascontiguousarray(examples[np.arange(min(len(examples), -(-count // examples[:1].shape[2])))])

    def _stream_logprobs(self, rows):
        """log p of every target >= 0 of stream steps at step * streams + stream (-inf
        elsewhere)."""
        out = np.full(rows.shape[0] * rows.shape[2], -np.inf)
        if out.size:
            self._score_streams(rows, out)
        return out

    def _score_streams(self, rows, out, states=None):
        """One network's logprobs of stream steps, its passes shared among threads (as many
        as scoring workers: BLAS threads), each on a single-threaded BLAS."""
        threads = self.scoring_workers(rows.shape[2], self.meta["context"])
        with blas_threads(1) if threads > 1 else contextlib.nullcontext():
            self._network(rows.shape[2], threads=threads).logprobs(rows, out, states)

    def next_distribution(self, history):
        """p of every word after <s> and `history`, of which the model reads the last
        {bptt} tokens."""
        inputs = [self.vocab.bos] + [self.vocab.unk if w < 0 else w for w in history]
        inputs = inputs[-self.meta["context"]:]
        rows = np.zeros((len(inputs), 2, 1), dtype=np.int32)
        rows[:, 0, 0] = inputs
        out = np.empty(len(self.vocab))
        self._network(1).next_logprobs(rows, out)
        return np.exp(out)

    def ngram_logprobs(self, grams, progress=None):
        """Natural-log p(w | <s> h) of each row (h..., w) of `grams` (an n-gram model's rows):
        each row read as a sentence alone, <s> (unless h starts with it), then h."""
        grams = np.asarray(grams, dtype=np.int64)
        out = np.empty(len(grams))
        bos, eos = self.vocab.bos, self.vocab.eos
        for lo in range(0, len(grams), NGRAM_ROWS):
            rows = grams[lo:lo + NGRAM_ROWS]
            contexts = [row[1:-1] if len(row) > 1 and row[0] == bos else row[:-1] for row in rows.tolist()]
            sentences = [context + ([] if row[-1] == eos else [row[-1]]) for context, row in zip(contexts, rows.tolist())]
            lengths = np.array([len(sentence) for sentence in sentences], dtype=np.int64)
            offsets = np.concatenate([[0], np.cumsum(lengths)])
            ids = np.array([w for sentence in sentences for w in sentence], dtype=np.int32)
            corpus = Corpus(ids, offsets, self.vocab, name="<n-grams>")
            at = offsets[:-1] + np.arange(len(rows)) + [len(context) for context in contexts]
            out[lo:lo + len(rows)] = self.log10probs_sharing_prefixes(corpus)[at] * np.log(10)
            if progress is not None:
                progress(len(rows))
        return out

    # -- dynamic evaluation (nplmtk.neural.dynamic) ---------------------------------------
    def adaptation_segments(self, corpus, length):
        """The text as one stream, `length` steps (at most {bptt}) a segment: (rows, the
        index of each step's prediction in corpus order, -1 for none)."""
        if length > self.meta["context"]:
            raise ParameterError(f"{{dynamic_eval}} segments of {length} steps: the Transformer reads at most its "
                                 f"{{bptt}} {self.meta['context']} at a time")
        self.check_vocab(corpus)
        return stream_segments(corpus, self.vocab, length)

    def adaptation(self, length):
        """A step of dynamic evaluation: each segment scored and its gradients taken in one
        pass (the memory, if any, moving on once)."""
        network = self._network(1, trainable=True)

        def step(rows, grads, states=None):
            logp = np.full(rows.shape[0], -np.inf)
            network.gradients(rows, grads, logp, states)
            return logp
        return step

    def sampling_streams(self, count, start):
        """`count` streams stepped together, each block's keys and values cached (a step
        costs one position); the hierarchical softmax draws through next_distribution."""
        if self.output == "hs":
            return super().sampling_streams(count, start)
        return TransformerStreams(self, count, start)

    def input_rows(self, words, positions):
        """The stack's input rows of `words` at `positions`: sqrt(m) C(w) plus the position's
        row (learned or sinusoidal; none with relative positions), float32."""
        d = self.meta["features"]
        rows = np.float32(np.sqrt(np.float32(d))) * self.params["C"][words]
        if self.meta["positions"] == "learned":
            rows += self.params["P"][positions]
        elif self.meta["positions"] == "sinusoidal":
            from .._ext.transformer_kernels import relative_positions
            rows += relative_positions(int(np.max(positions)) + 1, d)[positions]
        return np.ascontiguousarray(rows, dtype=np.float32)

    def window_logprobs(self, windows, rows, words, kept):
        """Natural-log p(words[k] | windows[rows[k]]), each window (word ids, <s> first at a
        sentence's start) read alone from position 0, its last {bptt} ids: the lattice
        decoder's n-gram history approximation (nplmtk/lattice/scores.py). The windows step
        side by side a position at a time (transformer_steps, its cache dropped after the
        call); the output layer in numpy, built once into `kept` (the caller's dict)."""
        from .._ext.transformer_steps import TransformerSteps
        meta = self.meta
        windows = [window[-meta["context"]:] for window in windows]
        lengths = np.array([len(window) for window in windows])
        steps = TransformerSteps(self.params, meta["layers"], meta["heads"], len(windows), int(lengths.max()),
                                 meta["positions"] == "relative")
        top = np.zeros((len(windows), meta["features"]), dtype=np.float32)
        with blas_threads(1):  # a step's products are small: threads only wait (80 against 1 ms CPU, 10 windows)
            for t in range(int(lengths.max())):
                here = np.flatnonzero(lengths > t).astype(np.int32)
                x = self.input_rows(np.array([windows[i][t] for i in here.tolist()], dtype=np.int64),
                                    np.full(len(here), t))
                steps.step(here, x)
                top[here] = x
        rows, words = np.asarray(rows, dtype=np.int64), np.asarray(words, dtype=np.int64)
        if meta.get("hs"):
            return self._tree_logprobs(top, rows, words)
        if "output" not in kept:
            from .output_draws import OutputLayer
            params = self.params
            kept["output"] = OutputLayer(params.get("V", params["C"]), params["d"], None,
                                         meta["class_of"] if meta.get("classes") else None, params.get("Vc"),
                                         params.get("bc"))
        return kept["output"].log_probabilities(top, None, rows, words)

    def _tree_logprobs(self, top, rows, words):
        """The hierarchical softmax's log p(words[k] | top[rows[k]]): log sigma(+-z) summed
        down each word's path (turn 0: +z)."""
        starts, points, turns = self.hs_paths()
        lengths = starts[words + 1] - starts[words]
        pair = np.repeat(np.arange(len(words)), lengths)
        at = np.arange(len(pair)) - np.repeat(np.cumsum(lengths) - lengths, lengths) + np.repeat(starts[words], lengths)
        nodes = points[at]
        z = np.einsum("ij,ij->i", top[rows[pair]], self.params["Vn"][nodes], dtype=np.float64)
        z += self.params["bn"][nodes]
        signed = np.where(turns[at] == 0, z, -z)
        return np.bincount(pair, weights=-np.logaddexp(0, -signed), minlength=len(words))

    def top_width(self):
        """The width of the top state that predicts a word (a neural cache's keys)."""
        return self.meta["features"]

    # the word-at-a-time API the generic way (each state the sentence so far, scored alone)
    begin_state = LanguageModel.begin_state
    score_words = LanguageModel.score_words


class TransformerStreams:
    """Streams of a Transformer for sampling (nplmtk/generate.py): each block's keys and
    values of every position read kept per stream (transformer_steps.TransformerSteps), so
    that a step reads one position; the output layer in numpy from the top state
    (OutputLayer). A stream whose cache is full (the model's {bptt}, plus its memory)
    reads its last half again from a fresh cache."""
    draws_words = True

    def __init__(self, model, count, start):
        from .._ext.transformer_steps import TransformerSteps
        from .output_draws import OutputLayer
        meta, params = model.meta, model.params
        check_fits(12 * count * len(model.vocab), f"{{batch}} {count} ({len(model.vocab):,} words)")
        self.model, self.count = model, count
        self.capacity = meta["context"] + meta["memory"]
        self.steps = TransformerSteps(params, meta["layers"], meta["heads"], count, self.capacity,
                                      meta["positions"] == "relative")
        self.start = [model.vocab.bos] + [model.vocab.unk if w < 0 else w for w in start]
        self.histories = [[] for _ in range(count)]
        self.top = np.zeros((count, meta["features"]), dtype=np.float32)
        self.output = OutputLayer(params.get("V", params["C"]), params["d"], None,
                                  meta["class_of"] if meta.get("classes") else None, params.get("Vc"), params.get("bc"))
        self.uniforms_per_draw = self.output.uniforms_per_draw
        self._read(np.arange(count), [self.start] * count)

    def _read(self, rows, words):
        """Streams `rows` (from an empty cache) read their `words` (a list each), a position
        at a time side by side."""
        self.steps.lengths[rows] = 0
        for row, sequence in zip(rows.tolist(), words):
            self.histories[row] = list(sequence)
        longest = max(len(sequence) for sequence in words)
        for t in range(longest):
            here = np.array([row for row, sequence in zip(rows.tolist(), words) if t < len(sequence)], dtype=np.int32)
            inputs = [sequence[t] for sequence in words if t < len(sequence)]
            self._step(here, np.array(inputs, dtype=np.int64))

    def _step(self, rows, words):
        x = self.model.input_rows(words, self.steps.lengths[rows])
        self.steps.step(rows, x)
        self.top[rows] = x

    def advance(self, words, restart):
        """Each stream takes its word, or (where `restart`) begins a sentence again."""
        again = np.flatnonzero(restart)
        going = np.flatnonzero(~restart)
        full = going[self.steps.lengths[going] >= self.capacity]
        if len(full):
            self._read(full, [self.histories[row][-(self.capacity // 2):] for row in full.tolist()])
        if len(going):
            for row, word in zip(going.tolist(), words[going].tolist()):
                self.histories[row].append(word)
            self._step(going.astype(np.int32), words[going])
        if len(again):
            self._read(again, [self.start] * len(again))

    def draw(self, rows, u):
        return self.output.draw(self.top[rows], None, u)

    def distributions(self, rows):
        return self.output.distributions(self.top[rows], None)
