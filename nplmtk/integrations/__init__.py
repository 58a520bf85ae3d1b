"""nplm's models inside other people's decoders (`pip install 'nplmtk[decode]'` for
pyctcdecode, `'nplmtk[decode-torchaudio]'` for torchaudio's): each module adapts the
incremental scoring API (nplmtk/incremental.py) to one decoder's language-model
interface, and imports that decoder only when it is imported."""
