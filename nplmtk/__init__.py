"""nplmtk: n-gram and neural probabilistic language models with SRILM-style tools."""
from .corpus import Corpus
from .errors import NplmError
from .models import load
from .vocab import Vocabulary

__version__ = "0.1.0"
__all__ = ["Corpus", "NplmError", "Vocabulary", "load"]
