#!/usr/bin/env bash
# `make wheel-check`: the installed wheel's nplm on the toy corpus, in folder $1 (outside
# the source tree, so that nothing is imported from the checkout).
set -euo pipefail
cd "$1"
python -c 'import nplmtk, sys; sys.exit("nplmtk imported from the checkout" if "/build/wheel-venv/" not in nplmtk.__file__ else 0)'
nplm --version
python -c 'import nplmtk.lattice.decode, nplmtk.integrations, nplmtk.incremental'  # every package is in the wheel
nplm toy-corpus -sentences 2000 -seed 1 -write train.txt
nplm toy-corpus -sentences 200 -seed 2 -write test.txt
nplm ngram-count -text train.txt -order 3 -lm kn3.arpa
nplm ppl -lm kn3.arpa -text test.txt
nplm train-nplm -text train.txt -order 3 -m 8 -h 16 -epochs 1 -batch 16 -quiet -lm mlp.nplm
nplm ppl -lm mlp.nplm -text test.txt
rm -rf "$1"
