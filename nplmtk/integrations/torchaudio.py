"""Any nplm model as the language model of torchaudio's CTC beam search (flashlight's
decoder, `torchaudio.models.decoder.ctc_decoder`), through its custom-LM interface
(`CTCDecoderLM`):

    from torchaudio.models.decoder import ctc_decoder
    from nplmtk.integrations.torchaudio import LanguageModel
    lm = LanguageModel(nplmtk.load("lstm.nplm"), lexicon="lexicon.txt")
    decoder = ctc_decoder(lexicon="lexicon.txt", tokens="tokens.txt", lm=lm, lm_weight=2.0)

The decoder scores words by their index in its word dictionary, which ctc_decoder builds
from its `lm_dict` if given, else from its `lexicon`; the adapter builds the same one from
the same arguments (for lexicon-free decoding, where words are tokens, from `tokens`).
Scores are log10 p, as those of torchaudio's built-in KenLM (flashlight's KenLM returns
KenLM's BaseScore unconverted, and lm_weight is tuned on that scale): with the same ARPA
file the hypotheses and their scores equal those of `ctc_decoder(lm="model.arpa")`.

The decoder compares language-model states by identity: it keeps a tree of them, one
child per word (`state.child(index)`), and merges two hypotheses only when they reach the
same node. The adapter grows the same tree as the built-in KenLM, so it merges what KenLM
merges, and maps each node to its nplm state and score (a child's score depends only on its
parent and word, so each is computed once). One adapter serves one decoder at a time."""
import math

from flashlight.lib.text.dictionary import Dictionary, create_word_dict, load_words
from torchaudio.models.decoder import CTCDecoderLM, CTCDecoderLMState

from ..errors import ParameterError

__all__ = ["LanguageModel"]

# KenLM's log10 p of a word its model cannot score (an ARPA file without <unk>): the
# decoder takes -inf as a dead end, KenLM as a heavy cost, as here
KENLM_UNKNOWN_LOG10 = -100.0
# flashlight's index for the state after </s> (KenLM::finish): no word has it
END_OF_SENTENCE = -1


def decoder_words(lexicon=None, tokens=None, lm_dict=None):
    """The words ctc_decoder scores, by index: its lm_dict's entries if given, else its
    lexicon's in the order flashlight's create_word_dict gives them, else its tokens
    (lexicon-free decoding scores tokens as words)."""
    if lm_dict is not None:
        dictionary = Dictionary(lm_dict)
    elif lexicon is not None:
        dictionary = create_word_dict(load_words(lexicon))
    elif tokens is not None:
        dictionary = Dictionary(tokens)
    else:
        raise ParameterError("give {lexicon}, {lm_dict} or {tokens}, as to ctc_decoder: the decoder's words come "
                             "from them")
    # an index may have several entries (a line of a tokens file): KenLM scores the first
    return [dictionary.get_entry(i) for i in range(dictionary.index_size())]


class LanguageModel(CTCDecoderLM):
    """torchaudio's CTCDecoderLM over an nplm model (any kind `nplmtk.load` returns).
    `lexicon`, `tokens` and `lm_dict` are those given to ctc_decoder (paths, or lists where
    ctc_decoder takes lists); `words` instead lists the decoder's words by index."""

    def __init__(self, model, lexicon=None, tokens=None, lm_dict=None, words=None):
        CTCDecoderLM.__init__(self)  # the C++ side (pybind11 needs it before any call)
        if not hasattr(model, "score_word"):
            raise ParameterError(f"{{model}} must be an nplm model (nplmtk.load), got {type(model).__name__}")
        if words is None:
            words = decoder_words(lexicon=lexicon, tokens=tokens, lm_dict=lm_dict)
        elif lexicon is not None or tokens is not None or lm_dict is not None:
            raise ParameterError("give {words} or the decoder's {lexicon}, {tokens} or {lm_dict}, not both")
        if not all(isinstance(word, str) for word in words):
            raise ParameterError("{words} must be strings, one per index of the decoder's word dictionary")
        self.model = model
        self.words = list(words)
        # CTCDecoderLMState -> (nplm state, log10 p of the word into it), keyed by the Python
        # object: pybind11 hands back the same object for a node while one is alive, and
        # the map keeps each alive until the next start()
        self._states = {}

    def _after(self, state, word):
        """(the nplm state after `word`, its log10 p) from the nplm state `state`."""
        score, after = self.model.score_word(state, word)
        return after, (KENLM_UNKNOWN_LOG10 if score == -math.inf else score)

    def start(self, start_with_nothing):
        # each utterance starts a new tree: the last one's nodes are no longer reachable
        self._states.clear()
        state = CTCDecoderLMState()
        self._states[state] = (self.model.null_state() if start_with_nothing else self.model.begin_state(), 0.0)
        return state

    def _child(self, state, index, word):
        child = state.child(index)
        known = self._states.get(child)
        if known is None:
            known = self._states[child] = self._after(self._states[state][0], word)
        return child, known[1]

    def score(self, state, usr_token_idx):
        if not 0 <= usr_token_idx < len(self.words):
            raise ParameterError(f"{{usr_token_idx}} {usr_token_idx} is none of the decoder's {len(self.words)} "
                                 "words: build the adapter from the decoder's lexicon, tokens or lm_dict")
        return self._child(state, usr_token_idx, self.words[usr_token_idx])

    def finish(self, state):
        return self._child(state, END_OF_SENTENCE, "</s>")
