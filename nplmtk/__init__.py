"""nplmtk: n-gram and neural probabilistic language models with SRILM-style tools."""
import importlib
import os

# The kernels' OpenMP threads spin this long (about 10 us) before they sleep at a barrier,
# not libgomp's default 300,000 turns: on a busy machine a spinning thread takes the core
# another needs, and a section of an ARPA file parsed a block at a time by two threads
# took 20-30x as long (18-24 s instead of 0.6-1.1 s) beside a training run. Read when
# libgomp starts, so set before any kernel loads; a value of the user's own is kept.
os.environ.setdefault("GOMP_SPINCOUNT", "10000")

__version__ = "0.1.0"
__all__ = ["Corpus", "NplmError", "State", "Vocabulary", "load"]

# name -> the module that defines it, imported when the name is first used: importing the
# package imports nothing else (so `nplm` sets up numpy before anything imports it, cli/main.py)
_EXPORTS = {"Corpus": "corpus", "NplmError": "errors", "State": "incremental", "Vocabulary": "vocab",
            "load": "models"}


def __getattr__(name):
    if name not in _EXPORTS:
        raise AttributeError(f"module 'nplmtk' has no attribute '{name}'")
    return getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
