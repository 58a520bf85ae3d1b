"""nplmtk: n-gram and neural probabilistic language models with SRILM-style tools."""
import importlib

__version__ = "0.1.0"
__all__ = ["Corpus", "NplmError", "Vocabulary", "load"]

# name -> the module that defines it, imported when the name is first used: importing the
# package imports nothing else (so `nplm` sets up numpy before anything imports it, cli/main.py)
_EXPORTS = {"Corpus": "corpus", "NplmError": "errors", "Vocabulary": "vocab", "load": "models"}


def __getattr__(name):
    if name not in _EXPORTS:
        raise AttributeError(f"module 'nplmtk' has no attribute '{name}'")
    return getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
