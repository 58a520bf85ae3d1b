"""Recurrent language models (survey, paper 002, sec. 2.2-2.3): the RNN s_t = f(U x_t +
W s_t-1 + b) and the LSTM (input, forget and output gates, cell c_t, s_t = o_t * f(c_t),
optional peepholes on c_t-1), y_t = V s_t + M x_t + d, stacked in `layers`, the output
layer optionally tied to the input features (cython_ext/rnn_kernels.pyx).

Their examples are time steps of parallel word streams: the text as one sequence of
(input, target) pairs, (<s>, w1), (w1, w2), ..., (wn, </s>) for each sentence, cut at
sentence starts into B streams of about equal length, one row per step holding the B
inputs and the B targets (padding: target -1). The trainer keeps the rows in order, and
each worker's network carries its streams' state from segment to segment (truncated
BPTT). With `reset_state` "sentence" every sentence starts from a zero state, in training
and in scoring; with "never" the state runs on through the whole text, and scoring reads
it as a single stream (validation during training as VALIDATION_STREAMS parts)."""
import contextlib
import functools
from dataclasses import dataclass

import numpy as np

from ..lm import LN10

from ..errors import ParameterError
from .blas import blas_threads, on_workers
from .declarations import CRITERIA, OPTIMIZERS, OUTPUT_LAYERS, Capabilities, Option, Settings, declare
from .network import ACTIVATION_CODES, NeuralModel, check_fits, check_parameters_fit, uniform_initialiser
from .optimizer import adam_of
from .output_draws import OutputLayer
from .regularisation import Regularisers, longest_segment, random_segment_lengths
from .word_classes import class_lists
from .mixture import MIXTURE_OPTIONS, check_mixture, mixture_shapes
from .recurrent_streams import RecurrentStreams, trie_states

RESET_STATES = ("sentence", "never")
MAX_LAYERS = 8
SCORING_STREAMS = 64  # sentences scored side by side when each starts from a zero state
VALIDATION_STREAMS = 10  # during training, a text whose state runs on: contiguous parts side by side
SCORING_ROWS = 512  # steps x streams per segment when scoring
NGRAM_STREAMS = 2048  # contexts of n-grams read side by side (ngram_logprobs)

RECURRENT_OPTIONS = (
    Option("layers", "int", "Stacked recurrent layers.", 1, low=1, high=MAX_LAYERS),
    Option("tie", "flag", "The output layer is the input features C: the last layer is -m wide (-h sets the "
           "layers below it; with one layer -h must equal -m)."),
    Option("reset-state", "choice", "Each sentence starts from a zero state, or the state runs on through the "
           "text; scoring follows the model's rule (the -valid text, during training: 10 parts side by side, as "
           "PyTorch's word_language_model and AWD-LSTM score it).", "sentence", choices=RESET_STATES),
    Option("bptt", "int", "Truncated BPTT: one update per this many steps of every stream.", 35, low=1,
           target="settings"),
    Option("streams", "int", "The training text as this many parallel streams (the state carried along each).",
           32, low=1, target="settings"),
    # the kernels keep a unit with probability 1 - p in float32: 0.99999999 rounds to 1 there
    Option("dropout", "real", "Dropout probability on the non-recurrent connections (input features, between "
           "layers, output), a mask per unit and step; the -dropout-input/-hidden/-output options replace it.", 0.0,
           low=0, high=0.99, target="settings"),
    # AWD-LSTM's regularisers (Merity et al. 2018; nplmtk/neural/regularisation.py)
    Option("dropout-input", "real", "Locked dropout on the input features: a mask per stream and segment, the same "
           "at every step (AWD-LSTM's dropouti).", 0.0, low=0, high=0.99, target="settings"),
    Option("dropout-hidden", "real", "Locked dropout between stacked layers (dropouth).", 0.0, low=0, high=0.99,
           target="settings"),
    Option("dropout-output", "real", "Locked dropout on the last layer's output (dropout).", 0.0, low=0,
           high=0.99, target="settings"),
    Option("dropout-embedding", "real", "Embedding dropout: whole words of the input features dropped for a "
           "segment, the others scaled by 1 / (1 - p) (dropoute).", 0.0, low=0, high=0.99, target="settings"),
    Option("weight-drop", "real", "DropConnect on the hidden-to-hidden weights W, a mask per segment (wdrop).", 0.0,
           low=0, high=0.99, target="settings"),
    Option("ar", "real", "Activation regularisation: this times the mean square of the last layer's dropped "
           "output, per step (alpha).", 0.0, low=0, target="settings"),
    Option("tar", "real", "Temporal activation regularisation: this times the mean square of s_t - s_t-1 of the "
           "last layer, per step within a sentence (beta).", 0.0, low=0, target="settings"),
    Option("random-bptt", "flag", "Segments of random lengths: -bptt, or half of it 5% of the time, plus normal "
           "noise of 5 steps (AWD-LSTM's).", target="settings"),
    Option("nonmono", "int", "-optimizer nt-asgd: start averaging when the valid ppl is worse than the best of "
           "the epochs more than this many before it.", 5, low=1, target="training"),
    Option("clip", "real", "Cap on the gradient's norm per word of a segment (PyTorch's clip_grad_norm_ of the "
           "mean loss; 0: none).", 0.25, low=0, target="settings"),
    Option("optimizer", "choice", "Plain SGD (the papers'), Adam (Kingma & Ba; -lr is then its step size, e.g. "
           "1e-3) or NT-ASGD (SGD, then the parameters averaged over the updates once the valid ppl stops "
           "improving, -nonmono; Merity et al. 2018).", "sgd", choices=OPTIMIZERS, target="training"),
)


@dataclass
class RecurrentSettings(Settings):
    """A recurrent model's own training settings (its options of target "settings"): truncated
    BPTT over `streams` parallel streams in segments of `bptt` steps (of random lengths with
    random_bptt), the gradient's norm per word capped at `clip` (0: no cap), dropout on the
    non-recurrent connections and AWD-LSTM's regularisers (regularisation.py)."""
    bptt: int = 35
    streams: int = 32
    dropout: float = 0.0
    clip: float = 0.25
    dropout_input: float = 0.0
    dropout_hidden: float = 0.0
    dropout_output: float = 0.0
    dropout_embedding: float = 0.0
    weight_drop: float = 0.0
    ar: float = 0.0
    tar: float = 0.0
    random_bptt: bool = False
    dropout_mos: float = 0.0  # the mixture's (mixture.py)

    def gradient_cap(self):
        return self.clip

    def segment_lengths(self, examples, per_update, seed, first_update):
        if not self.random_bptt:
            return None
        return random_segment_lengths(examples, per_update, np.random.default_rng([seed, first_update]))

    def gradient_scales(self):
        return tuple(name for name in ("ar", "tar") if getattr(self, name))


class RNNModel(NeuralModel):
    kind = "nplm-rnn"
    arch = "rnn"
    summary = ("recurrent network (survey sec. 2.2): s_t = act(U x_t + W s_t-1 + b), y_t = V s_t + M x_t + d, "
               "trained by truncated BPTT over -streams streams of -bptt steps")
    ARCHITECTURE = ("features", "hidden", "direct", "bias", "layers", "tie", "peephole", "reset_state", "classes",
                    "hs", "mos")
    ACTIVATIONS = tuple(ACTIVATION_CODES)
    CAPABILITIES = Capabilities(outputs=OUTPUT_LAYERS, criteria=CRITERIA, optimizers=OPTIMIZERS, worker_state=True,
                                recurrent_state=True)
    SETTINGS = RecurrentSettings
    # one update per segment of -bptt steps, each a window of every stream: no -order nor -batch;
    # -lr is per word: the gradient is summed over a segment
    OPTIONS = declare(NeuralModel.OPTIONS, *RECURRENT_OPTIONS, *MIXTURE_OPTIONS, drop=("order", "batch"),
                      defaults={"lr": 0.01, "weight-decay": 0.0})
    LSTM = False

    def __init__(self, vocab, params, order=None, activation="tanh", meta=None):
        super().__init__(vocab, params, None, activation, meta)

    @classmethod
    def initial(cls, vocab, order=None, features=100, hidden=200, direct=False, bias=True, activation="tanh",
                seed=1, layers=1, tie=False, peephole=False, reset_state="sentence", output="full", classes=None,
                counts=None, mos=0):
        """`output` "class": the class-factored output layer over `classes` classes (default
        sqrt |V|) by frequency from `counts` (each word's count in the training text, </s>
        included); "hs": the hierarchical softmax over the Huffman tree of `counts`."""
        if order is not None:
            raise ParameterError(f"{{order}} applies to the feed-forward models: {cls.arch} sees the whole history")
        if hidden < 1:
            raise ParameterError(f"{{arch}} {cls.arch} needs {{hidden}} 1 or more")
        if not 1 <= layers <= MAX_LAYERS:
            raise ParameterError(f"{{layers}} must be from 1 to {MAX_LAYERS}")
        if tie and layers == 1 and hidden != features:
            raise ParameterError(f"{{tie}} makes the output layer the word features, read from the last layer, which "
                                 f"is then {{features}} wide: with one layer {{hidden}} must equal {{features}} (here "
                                 f"{hidden} and {features}; with {{layers}} 2 or more, {{hidden}} sizes the layers "
                                 "below the last)")
        if peephole and not cls.LSTM:
            raise ParameterError("{peephole} applies to -arch lstm")
        if reset_state not in RESET_STATES:
            raise ParameterError(f"{{reset_state}}: unknown value '{reset_state}' (choose from "
                                 f"{', '.join(RESET_STATES)})")
        if output not in cls.CAPABILITIES.outputs:
            raise ParameterError(f"{{output}}: unknown value '{output}' (choose from {', '.join(OUTPUT_LAYERS)})")
        if output == "hs" and (direct or tie):
            raise ParameterError("{output} hs: its node vectors replace the output layer, so neither {direct} nor "
                                 "{tie} applies")
        if output == "class" and direct:
            raise ParameterError("{direct} connections with {classes}: not built (the class-factored output layer "
                                 "reads the hidden state only)")
        if activation not in ACTIVATION_CODES:
            raise ParameterError(f"{{activation}}: unknown '{activation}' (choose from {', '.join(ACTIVATION_CODES)})")
        check_mixture(mos, output, direct)
        meta = {"features": features, "hidden": hidden, "direct": direct, "bias": bias, "layers": layers,
                "tie": tie, "peephole": peephole, "reset_state": reset_state,
                **cls.output_meta(vocab, output, classes, counts), **({"mos": mos} if mos else {})}
        check_parameters_fit(cls, len(vocab), None, meta)
        uniform = uniform_initialiser(seed)
        params = {}
        biases = cls.bias_arrays(meta)
        for name, shape in cls.array_shapes(len(vocab), None, meta).items():
            if name in biases or name[0] == "P":  # biases and peepholes start at zero
                params[name] = np.zeros(shape, dtype=np.float32)
            else:
                params[name] = uniform(shape, shape[-1])
        if cls.LSTM and bias:  # forget gates start open (Gers et al. 2000; Jozefowicz et al. 2015)
            for layer, width in enumerate(cls.widths(meta)):
                params[f"b{layer}"][width:2 * width] = 1
        return cls(vocab, params, None, activation, meta)

    def top_width(self):
        """The width of the top state that predicts a word (a neural cache's keys)."""
        return self.widths(self.meta)[-1]

    @staticmethod
    def widths(shape):
        """Each layer's width: -h, but the last -m wide when the output layer is tied to C
        (AWD-LSTM's stacking, Merity et al. 2018)."""
        widths = [shape["hidden"]] * shape["layers"]
        if shape["tie"] and widths:
            widths[-1] = shape["features"]
        return widths

    @classmethod
    def bias_arrays(cls, shape):
        return {f"b{layer}" for layer in range(shape["layers"])} | {"d", "bn", "bc", "bk"}

    @classmethod
    def array_shapes(cls, vocab_size, order, shape):
        m, layers, gates = shape["features"], shape["layers"], 4 if cls.LSTM else 1
        if not 1 <= layers <= MAX_LAYERS or (shape["tie"] and layers == 1 and shape["hidden"] != m) \
                or (shape["peephole"] and not cls.LSTM):
            return {}  # no such network: any array is unexpected
        arrays = {"C": (vocab_size, m)}
        inputs = m
        for layer, h in enumerate(cls.widths(shape)):
            arrays.update({f"U{layer}": (gates * h, inputs), f"W{layer}": (gates * h, h)})
            if shape["bias"]:
                arrays[f"b{layer}"] = (gates * h,)
            if shape["peephole"]:
                arrays[f"P{layer}"] = (3, h)
            inputs = h
        arrays.update(mixture_shapes(shape.get("mos", 0), h))
        if shape["hs"]:  # the tree's node vectors and biases instead of V and d
            if shape["tie"] or shape["direct"] or shape["classes"] or shape.get("mos"):
                return {}
            arrays["Vn"] = (vocab_size - 1, h)
            if shape["bias"]:
                arrays["bn"] = (vocab_size - 1,)
            return arrays
        if not shape["tie"]:
            arrays["V"] = (vocab_size, h)
        if shape["bias"]:
            arrays["d"] = (vocab_size,)
        if shape["direct"]:
            arrays["M"] = (vocab_size, m)
        if shape["classes"]:
            if shape["direct"]:
                return {}
            arrays["Vc"] = (shape["classes"], h)
            if shape["bias"]:
                arrays["bc"] = (shape["classes"],)
        return arrays

    # -- the training protocol ----------------------------------------------------------
    def check_training(self, config):
        settings = config.settings_for(self)
        if config.criterion != "full" and self.output != "full":
            raise ParameterError(f"{{output}} {self.output} trains with its exact gradient: {{criterion}} "
                                 f"{config.criterion} samples the full softmax")
        if config.criterion != "full" and self.meta.get("mos"):
            raise ParameterError(f"{{mos}}: trains with its exact gradient, not {{criterion}} {config.criterion}")
        if config.batch != 1:
            raise ParameterError("{batch}: a recurrent model updates once per {bptt} steps of its {streams} streams")
        if settings.bptt < 1 or settings.streams < 1 or settings.clip < 0 or config.nonmono < 1:
            raise ParameterError("{bptt}, {streams} and {nonmono} must be at least 1, {clip} at least 0")
        for name in ("dropout", "dropout_input", "dropout_hidden", "dropout_output", "dropout_embedding",
                     "weight_drop"):
            if not 0 <= getattr(settings, name) < 1:
                raise ParameterError(f"{{{name}}} must be in [0, 1)")
        if settings.ar < 0 or settings.tar < 0:
            raise ParameterError("{ar} and {tar} must be at least 0")
        if settings.dropout_hidden and self.meta["layers"] == 1:
            raise ParameterError("{dropout_hidden} applies between stacked layers: with one layer give "
                                 "{dropout_output}")
        if settings.dropout > 0 and (settings.dropout_input or settings.dropout_hidden or settings.dropout_output):
            raise ParameterError("{dropout} draws a mask per step on every non-recurrent connection, "
                                 "{dropout_input}, {dropout_hidden} and {dropout_output} one per segment: give one "
                                 "kind")

    def training_examples(self, corpus, config):
        """The steps of `streams` parallel streams, gathered chunk by chunk from the corpus."""
        return corpus.stream_steps(config.settings_for(self).streams, self.vocab.unk)

    def example_order(self, rng, count):
        return np.arange(count)  # in order: each worker carries its streams' state

    def examples_per_update(self, config):
        return config.settings_for(self).bptt

    def example_words(self, rows):
        """Targets in the vocabulary: of a chunk's rows, or of all the steps (counted when made)."""
        return int(np.count_nonzero(rows[:, 1] >= 0)) if isinstance(rows, np.ndarray) else rows.words

    def check_training_buffers(self, config, workers):
        """Refuse streams and segments whose buffers cannot fit in memory: of each worker's,
        at least the inputs, the output scores and each layer's states and cells of every
        step of a segment."""
        meta, settings = self.meta, config.settings_for(self)
        mixture = meta.get("mos", 0)  # the components' scores and contexts
        per_step = meta["features"] + max(1, mixture) * len(self.vocab) + 2 * sum(self.widths(meta)) \
            + 3 * mixture * self.widths(meta)[-1]
        steps = longest_segment(settings.bptt, settings.random_bptt)
        check_fits(4 * workers * settings.streams * (steps + 1) * per_step,
                   f"{{streams}} {settings.streams} x {{bptt}} {settings.bptt} ({workers} worker{'s' if workers > 1 else ''})")

    def training_network(self, config, worker):
        settings = config.settings_for(self)
        return self._network(settings.streams, longest_segment(settings.bptt, settings.random_bptt), True,
                             Regularisers.of(settings), config.seed * 1000 + worker, adam_of(config),
                             settings.dropout_mos)

    def _network(self, streams, capacity, trainable=False, regularisers=None, seed=1, adam=None, mixture_drop=0.0):
        """A kernel network (rnn_kernels.RecurrentNetwork); `regularisers` (regularisation.
        Regularisers) those the network applies when training (None: none), `adam` Adam's
        numbers (optimizer.Adam; None: SGD)."""
        from .._ext.rnn_kernels import RecurrentNetwork
        meta = self.meta
        return RecurrentNetwork(self.params, meta["layers"], self.LSTM, ACTIVATION_CODES[self.activation], streams,
                                capacity, meta["reset_state"] == "sentence", self.vocab.bos, regularisers, seed,
                                trainable, adam, class_lists(meta["class_of"]) if meta.get("classes") else None,
                                self.hs_paths() if meta.get("hs") else None, mixture_drop)

    # -- scoring --------------------------------------------------------------------------
    def logprobs(self, corpus):
        """In order through the text: sentences side by side when each starts from a zero
        state, else one stream; a target outside the vocabulary is -inf (as input, <unk>)."""
        return self._logprobs(corpus, 1 if self.meta["reset_state"] == "never" else SCORING_STREAMS)

    def validation_logprobs(self, corpus):
        """As logprobs, but a text whose state runs on is scored as VALIDATION_STREAMS
        contiguous parts side by side (each from a zero state), as PyTorch's
        word_language_model and AWD-LSTM evaluate during training: products of that many
        columns, not one (4.7 s of CPU instead of 7.8 s for 500 sentences of Brown valid
        with two layers of 800 and 400 units)."""
        return self._logprobs(corpus, VALIDATION_STREAMS if self.meta["reset_state"] == "never" else SCORING_STREAMS)

    def _logprobs(self, corpus, streams):
        self.check_vocab(corpus)
        rows, positions = stream_rows(corpus, min(streams, corpus.num_sentences), self.vocab)
        return self._stream_logprobs(rows)[positions]

    def logprobs_and_states(self, corpus):
        """logprobs, and the top layer's output that predicted each token (tokens x its
        width, float32, in the same order): a neural cache's keys."""
        self.check_vocab(corpus)
        streams = 1 if self.meta["reset_state"] == "never" else min(SCORING_STREAMS, corpus.num_sentences)
        rows, positions = stream_rows(corpus, streams, self.vocab)
        out = np.full(rows.shape[0] * streams, -np.inf)
        states = np.zeros((rows.shape[0] * streams, self.widths(self.meta)[-1]), dtype=np.float32)
        if len(rows):
            with _one_column() if streams == 1 else contextlib.nullcontext():
                self._network(streams, max(1, SCORING_ROWS // streams)).logprobs(rows, out, states)
        return out[positions], states[positions]

    def adaptation_segments(self, corpus, length):
        """The text as one stream, `length` steps a segment: (rows, the index of each step's
        prediction in corpus order, -1 for none)."""
        self.check_vocab(corpus)
        return stream_segments(corpus, self.vocab, length)

    def adaptation(self, length):
        """As NeuralModel.adaptation, the state carried from segment to segment by the pass
        that scores each (the gradients start from the state before it); `states` (a row a
        step, the top layer's width), when given, gets the outputs that predicted each step
        (the continuous cache's keys of the adapted network)."""
        network = self._network(1, length, trainable=True)
        carried = network.carried

        def step(rows, grads, states=None):
            before = {name: array.copy() for name, array in carried.items()}
            logp = np.full(rows.shape[0], -np.inf)
            network.logprobs(rows, logp, states)
            after = {name: array.copy() for name, array in carried.items()}
            for name, array in carried.items():
                array[...] = before[name]
            network.gradients(rows, grads)
            for name, array in carried.items():
                array[...] = after[name]
            return logp
        return step

    def log10probs_sharing_prefixes(self, corpus):
        """log10 p of every token, each sentence from a zero state as if alone (for N-best
        hypotheses; a model whose state runs on across sentences too), the sentences' common
        beginnings run once (RecurrentStepper.sentences_alone)."""
        self.check_vocab(corpus)
        if corpus.num_sentences < 2:
            return self.log10probs(corpus)
        return self.stepper.sentences_alone(corpus)

    def step_pairs(self, pairs, parent, node_input, states, networks):
        from .steps import step_pairs  # (steps imports this module's neighbours)
        return step_pairs(self, pairs, parent, node_input, states, networks)

    def tiny_examples(self, examples, count, seed):
        """Algorithm 4's tiny set: the first steps of the streams, about `count` words, each
        stream from the start of one of its sentences (example_logprobs scores them so)."""
        return np.ascontiguousarray(examples[np.arange(min(len(examples), -(-count // examples[:1].shape[2])))])

    def example_logprobs(self, examples):
        """log p of the targets >= 0 of stream steps (steps, (inputs, targets), streams), step
        after step, each stream from a zero state."""
        rows = np.ascontiguousarray(examples, dtype=np.int32)
        if rows.ndim != 3 or rows.shape[1] != 2:
            raise ParameterError(f"{self.arch} models score whole texts or stream steps, not single windows")
        return self._stream_logprobs(rows)[rows[:, 1].reshape(-1) >= 0]

    def _stream_logprobs(self, rows):
        """log p of every target >= 0 of stream steps (steps, (inputs, targets), streams) at
        step * streams + stream (-inf elsewhere), each stream's steps in order; the streams
        shared among workers (as many as BLAS threads), each on a single-threaded BLAS."""
        steps, streams = rows.shape[0], rows.shape[2]
        out = np.full((steps, streams), -np.inf)
        if out.size == 0:
            return out.reshape(-1)
        workers = self.scoring_workers(streams, SCORING_ROWS)
        bounds = [streams * q // workers for q in range(workers + 1)]

        def score(q):
            lo, hi = bounds[q], bounds[q + 1]
            part = np.full(steps * (hi - lo), -np.inf)
            self._network(hi - lo, max(1, SCORING_ROWS // (hi - lo))).logprobs(
                np.ascontiguousarray(rows[:, :, lo:hi]), part)
            out[:, lo:hi] = part.reshape(steps, hi - lo)

        if streams == 1:
            with _one_column():
                score(0)
        else:
            on_workers(score, workers)
        return out.reshape(-1)

    def begin_state(self):  # a word at a time (nplmtk/incremental.py): the vectors and the next input
        return self.stepper.begin()

    def score_words(self, states, words):
        return self.stepper.steps(states, words)

    @functools.cached_property
    def output_layer(self):
        """The output layer in numpy (OutputLayer; full or class output), read from the top
        layer's state; the direct connections read the input word's features."""
        params, classes = self.params, self.output == "class"
        return OutputLayer(params.get("V", params["C"]), params.get("d"), params.get("M"),
                           self.meta["class_of"] if classes else None, params.get("Vc"), params.get("bc"))

    @functools.cached_property
    def stepper(self):
        from .steps import RecurrentStepper
        return RecurrentStepper(self)  # its kernel networks, made on first use

    def next_distribution(self, history):
        inputs = np.array([self.vocab.bos] + [self.vocab.unk if w < 0 else w for w in history], dtype=np.int32)
        rows = np.zeros((len(inputs), 2, 1), dtype=np.int32)
        rows[:, 0, 0] = inputs
        out = np.empty(len(self.vocab))
        with _one_column():
            self._network(1, len(inputs)).next_logprobs(rows, out)
        return np.exp(out)

    def ngram_logprobs(self, grams, progress=None):
        """Natural-log p(w | <s> h) of each row (h..., w) of `grams` (an n-gram model's rows,
        all of one length): the network reads <s> (unless h starts with it), then h, from a
        zero state. The contexts' words form a trie read level by level, each distinct prefix
        one step from its parent's state, NGRAM_STREAMS side by side. A recurrent network
        conditions on the whole sentence, so for h not at a sentence start this is its
        probability as if h began one."""
        if self.output == "hs" or self.meta.get("mos"):
            raise ParameterError("{output} hs and {mos}: scoring single n-grams is built for one softmax")
        grams = np.asarray(grams, dtype=np.int64)
        out = np.empty(len(grams))
        contexts, of_row = np.unique(grams[:, :-1], axis=0, return_inverse=True)
        of_row = of_row.reshape(-1)
        order = np.argsort(of_row, kind="stable")
        starts = np.searchsorted(of_row[order], np.arange(len(contexts) + 1))
        at_start = contexts[:, 0] == self.vocab.bos if contexts.shape[1] else np.zeros(len(contexts), dtype=bool)
        streams = RecurrentStreams(self, min(NGRAM_STREAMS, len(contexts)), [])
        for group in (np.flatnonzero(at_start), np.flatnonzero(~at_start)):
            if not len(group):
                continue
            paths = contexts[group][:, 1:] if at_start[group[0]] else contexts[group]
            states, inputs, node_of_path = trie_states(streams, paths)
            for lo in range(0, len(group), streams.count):
                chunk = np.arange(lo, min(lo + streams.count, len(group)))
                streams.load(states, inputs, node_of_path[chunk])
                contexts_here = group[chunk]
                rows = np.concatenate([order[starts[c]:starts[c + 1]] for c in contexts_here])
                stream_of = np.repeat(np.arange(len(chunk)), starts[contexts_here + 1] - starts[contexts_here])
                out[rows] = streams.log_probabilities(stream_of, grams[rows, -1])
                if progress is not None:
                    progress(len(rows))
        return out

    def sampling_streams(self, count, start):
        """`count` streams stepped together, each with its state (the hierarchical softmax
        draws through next_distribution, one stream)."""
        if self.output == "hs" or self.meta.get("mos"):  # through next_distribution
            return super().sampling_streams(count, start)
        return RecurrentStreams(self, count, start)


class LSTMModel(RNNModel):
    kind = "nplm-lstm"
    arch = "lstm"
    summary = ("LSTM network (survey sec. 2.3): gates i, f, o = logistic(U x_t + W s_t-1 [+ P * c_t-1] + b), "
               "c_t = f c_t-1 + i act(U_g x_t + W_g s_t-1 + b_g), s_t = o act(c_t), y_t = V s_t + M x_t + d")
    LSTM = True
    OPTIONS = declare(RNNModel.OPTIONS, Option("peephole", "flag", "The gates also read the previous cell c_t-1 "
                                               "(diagonal weights P)."))


def _one_column():
    """BLAS single-threaded for a pass of one stream: its products have one column a step,
    and threads only wait on each other (25x slower on a busy machine, 2 cores)."""
    return blas_threads(1)


def stream_segments(corpus, vocab, length):
    """The text as one stream, `length` steps a segment: (rows, the index of each step's
    prediction in corpus order, -1 for none), for dynamic evaluation."""
    rows, positions = stream_rows(corpus, 1, vocab)
    prediction = np.full(len(rows), -1, dtype=np.int64)
    prediction[positions] = np.arange(len(positions))
    for start in range(0, len(rows), length):
        yield np.ascontiguousarray(rows[start:start + length]), prediction[start:start + length]


def stream_rows(corpus, streams, vocab):
    """The text as (input, target) steps of `streams` streams cut at sentence starts:
    rows (steps, 2, streams) int32 (input ids, OOV inputs as <unk>; target ids, -1 for an
    OOV target and for padding), and for each predicted token in the order of
    corpus.windows (each word, then </s>) its flat index step * streams + stream."""
    steps = corpus.stream_steps(streams, vocab.unk)
    total = corpus.num_words + corpus.num_sentences
    stream = np.searchsorted(steps.bounds[:-1], np.arange(total), side="right") - 1
    step = np.arange(total) - steps.bounds[stream]
    return steps[:], step * streams + stream
