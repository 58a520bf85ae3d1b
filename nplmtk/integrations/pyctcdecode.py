"""Any nplm model as pyctcdecode's language model (pyctcdecode.language_model.LanguageModel,
which wraps a `kenlm.Model`):

    from pyctcdecode import BeamSearchDecoderCTC, Alphabet
    from nplmtk.integrations.pyctcdecode import LanguageModel
    lm = LanguageModel(nplmtk.load("kn5.nplm"), unigrams=None, alpha=0.5, beta=1.0)
    decoder = BeamSearchDecoderCTC(Alphabet.build_alphabet(labels), language_model=lm)

The arguments are pyctcdecode's own, the nplm model in place of the KenLM model. The
decoder's arithmetic is pyctcdecode's (its LanguageModel, whose methods are inherited):
only the states it asks for are nplm's (nplmtk.State), written by the model's KenLM-named
calls, so with the same ARPA file the beams equal those over `kenlm.Model`."""
import math

from pyctcdecode.constants import LOG_BASE_CHANGE_FACTOR
from pyctcdecode.language_model import LanguageModel as KenlmLanguageModel

from ..incremental import State

__all__ = ["LanguageModel"]

# KenLM's log10 p of a word its model cannot score (an ARPA file without <unk>): a beam
# search takes -inf as a dead end, KenLM's decoders as a heavy cost, as here
KENLM_UNKNOWN_LOG10 = -100.0
# pyctcdecode merges beams that agree on the last `order` - 1 words; a model that reads the
# whole history (a recurrent network) has no such order: beams merge only when all agree
WHOLE_HISTORY = 1 << 30


class LanguageModel(KenlmLanguageModel):
    """pyctcdecode's LanguageModel over an nplm model (any kind `nplmtk.load` returns)."""

    @property
    def order(self):
        return self._kenlm_model.order or WHOLE_HISTORY

    def get_start_state(self):
        state = State()
        if self.score_boundary:
            self._kenlm_model.BeginSentenceWrite(state)
        else:
            self._kenlm_model.NullContextWrite(state)
        return state

    def _get_raw_end_score(self, start_state):
        if not self.score_boundary:
            return 0.0
        return self._base_score(start_state, "</s>", State())

    def _base_score(self, state, word, out_state):
        score = self._kenlm_model.BaseScore(state, word, out_state)
        return KENLM_UNKNOWN_LOG10 if score == -math.inf else score

    def score(self, prev_state, word, is_last_word=False):
        end_state = State()
        lm_score = self._base_score(prev_state, word, end_state)
        if len(self._unigram_set) > 0 and word not in self._unigram_set or word not in self._kenlm_model:
            lm_score += self.unk_score_offset
        if is_last_word:  # the state returned is the one before </s>, so that the beam can go on
            lm_score = lm_score + self._get_raw_end_score(end_state)
        return self.alpha * lm_score * LOG_BASE_CHANGE_FACTOR + self.beta, end_state

    def save_to_dir(self, filepath, unigram_encoding=None):
        raise NotImplementedError("an nplm model is saved by nplm (its own file), not in pyctcdecode's folder")
