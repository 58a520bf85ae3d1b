"""nplm's models inside other people's decoders (`pip install 'nplmtk[decode]'`): each
module adapts the incremental scoring API (nplmtk/incremental.py) to one decoder's
language-model interface, and imports that decoder only when it is imported."""
