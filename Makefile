# nplmtk: `make demo` and `make test` work on a fresh machine (they install first).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
BROWN  ?= ../shared/data/brown

.PHONY: install bytecode demo test wheel-check fuzz bench bench-vs outputs-vs clean sharded-lm brown-shards brown-mlp9 brown-mlp1 brown-is brown-lbl brown-lbl-outputs brown-survey brown-lstm brown-fast \
	brown-energy brown-energy-exact other-corpora brown-lattices brown-caches brown-best brown-ablation brown-convert bench-scale brown-ctc \
	brown-transformer

install: $(STAMP)

# The build needs Cython, numpy and scipy (for cython_blas) before setup.py runs.
$(STAMP): setup.py pyproject.toml $(wildcard cython_ext/*.pyx cython_ext/*.pxd nplmtk/_ext/*.pxd)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip 'setuptools>=68' wheel
	$(BIN)/python -m pip install -q 'cython>=3.0' 'numpy>=1.24' 'scipy>=1.11'
	$(BIN)/python -m pip install -q --no-build-isolation -e '.[mpi,test,plot]'
	# the decoders of tests/test_pyctcdecode.py: pyctcdecode 0.5 asks for numpy < 2 but runs on
	# numpy 2, so it comes without its requirements (pygtrie is the one it needs)
	$(BIN)/python -m pip install -q --no-deps 'pyctcdecode==0.5.0' 'pygtrie>=2.1,<3'
	$(MAKE) bytecode
	touch $@

# The modules' bytecode, as a wheel's install writes it: an editable install leaves it to the
# first run, which cannot write it where PYTHONDONTWRITEBYTECODE is set, and then every short
# command (scoring with an n-gram model) compiles its modules again (about 40 ms).
bytecode:
	$(BIN)/python -m compileall -q nplmtk cli

demo: install
	PATH="$(CURDIR)/$(BIN):$$PATH" bash demo/run.sh demo/out

# The tests on two workers (pytest-xdist): 359 s instead of 622 s on a 2-core AMD EPYC, where
# one worker put `make test` with its install at 14.8 min. TEST_WORKERS=0 runs them in one process.
test: install
	$(BIN)/python -m pytest -q -n $(or $(TEST_WORKERS),2) tests

# The wheel as users install it (`pip wheel .`): built once, installed into a fresh venv
# with no compiler (CC=false, binary packages only), then the toy corpus counted, trained
# and scored with it outside the source tree. CI runs it after `make test`.
wheel-check: install
	rm -rf dist build/wheel-venv
	$(BIN)/python -m pip wheel -q --no-build-isolation --no-deps -w dist .
	$(PYTHON) -m venv build/wheel-venv
	CC=false CXX=false build/wheel-venv/bin/python -m pip install -q --only-binary :all: dist/nplmtk-*.whl
	PATH="$(CURDIR)/build/wheel-venv/bin:$$PATH" bash demo/wheel-check.sh "$$(mktemp -d)"

# Every reader against generated hostile inputs, and every numeric option against random
# values (tests/fuzz.py; not part of `make test`): 20,000 per reader, about 25 minutes on one
# core; the figures go to BENCHMARKS.md.
fuzz: install
	$(BIN)/python -m pip install -q 'hypothesis>=6'
	$(BIN)/python tests/fuzz.py --inputs $(or $(FUZZ_INPUTS),20000) --out BENCHMARKS.md

# Peers measured when present: SRILM_BIN, KENLM_BIN, FASTER_RNNLM_BIN (folders of their tools);
# PYTORCH_PYTHON=/path/to/venv/bin/python with torch==2.13.0 (CPU) for MLP9 against PyTorch.
bench: install bytecode
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python benchmarks/run.py --brown $(BROWN) --out BENCHMARKS.md

# Training speed of this build against another, run alternately (benchmarks/side_by_side.py):
# make bench-vs BASELINE=/path/to/other/.venv/bin/nplm (say the previous commit, checked out
# and `make install`ed elsewhere). It replaces its own section of BENCHMARKS.md (~10 min).
# BENCH_VS_OPTIONS='--at-once --pairs 10': each pair's builds at once, a core each (~16 min).
BENCH_VS_OPTIONS ?=
ifneq ($(filter bench-vs outputs-vs,$(MAKECMDGOALS)),)
ifeq ($(BASELINE),)
$(error make bench-vs and outputs-vs need BASELINE=/path/to/other/.venv/bin/nplm, the build to compare against)
endif
ifeq ($(wildcard $(BASELINE)),)
$(error make $(filter bench-vs outputs-vs,$(MAKECMDGOALS)): BASELINE=$(BASELINE): no such file)
endif
endif
bench-vs: install
	$(BIN)/python benchmarks/side_by_side.py --baseline $(BASELINE) --nplm $(BIN)/nplm --brown $(BROWN) \
		--out BENCHMARKS.md $(BENCH_VS_OPTIONS)

# The models of this build against the baseline's (benchmarks/same_outputs.py): every
# architecture with each output layer, one epoch on a slice of Brown, test ppl of both (~3 min).
outputs-vs: install
	$(BIN)/python benchmarks/same_outputs.py --baseline $(BASELINE) --nplm $(BIN)/nplm --brown $(BROWN) \
		--out BENCHMARKS.md

# The papers' runs on Brown; their settings are the table in benchmarks/runs.py, which
# `make bench` reports from. brown-mlp9: Bengio et al.'s MLP9 (about 35 min on 2 cores);
# brown-mlp1: MLP1 of Table 1 (n=5, m=60, h=50, direct connections); brown-is: Bengio &
# Senecal (2003) sec. 4.2, the exact gradient against importance sampling (Algorithm 4,
# N0=100; then N0=200 and the ESS rule), a fixed 5 epochs and no validation set; brown-lbl:
# the log-bilinear Model 0 of Zhang, Mnih & Hinton (n=5, m=100; about 20 min); brown-lbl-outputs:
# Model 0 with -output class and hs, trained the same way (about 2 min each); brown-survey:
# the survey's Table 1 (FNN, RNN, LSTM at m=100, h=200; about 15 min each); brown-lstm: our
# best LSTMs (m=h=256, tied, dropout 0.3, Adam; full softmax about 45 min, -output class 15);
# brown-fast: the -output class LSTM for at most 194 s of wall time on 2 cores (-max-time), its state
# carried across sentences, with AR and TAR (about 4 min with scoring; test ppl 96.29, 0.656x KN5).
# brown-energy: Bengio & Senecal sec. 4.2 as the paper ran it, the energy network for 8 epochs
# by Algorithm 4 (about 10 min of one core: N grows to 1,600), and against the exact gradient
# on the first 1,000 sentences (about 10 min of one core); brown-energy-exact: the exact gradient
# on all of Brown train (about 5 hours).
brown-mlp9 brown-mlp1 brown-is brown-lbl brown-lbl-outputs brown-survey brown-lstm brown-fast brown-energy brown-energy-exact: install
	$(BIN)/python benchmarks/runs.py $@ --brown $(BROWN) --nplm $(BIN)/nplm

# nplm's models inside a CTC beam search (issue 48, benchmarks/brown_ctc.py): character-level
# CTC emissions of the first CTC_FIRST=100 sentences of Brown test by a seeded noise process,
# decoded by pyctcdecode with no LM, KN5 through KenLM's module and through nplm's adapter (the
# same words), brown-fast's LSTM (trained first when missing) and LSTM + KN5; WER and time.
brown-ctc: install
	$(BIN)/python benchmarks/brown_ctc.py --brown $(BROWN) --nplm $(BIN)/nplm --first $(or $(CTC_FIRST),100) \
		--out BENCHMARKS.md

# Lattice decoding on Brown (issue 37, benchmarks/lattices.py): lattices for the first
# LATTICES=100 sentences of Brown test by benchmarks/make_lattices.py's noise process, KN3
# and KN5 of Brown train, the 1-best of nplm lattice-tool (no -lm, KN3, KN5) and KN5's
# 100-best oracle, the lattices expanded to KN3 and KN5 (-write-htk) and decoded again, the
# LSTM LATTICE_LSTM (default runs/lstm-class.nplm of brown-lstm, trained first when missing)
# in the decoder by the n-gram history approximation of orders 3 to 6, KN5's 100-best
# lists rescored by nplm rescore with KN5, the LSTM and the two mixed, word error rates
# against the true sentences, and SRILM's lattice-tool on the same commands when SRILM_BIN
# holds it (outputs compared, both timed once); writes its section of BENCHMARKS.md (about
# 10 min on 2 cores with the LSTM trained, most of it the LSTM at orders 5 and 6).
LATTICES ?= 100
LATTICE_LSTM ?= runs/lstm-class.nplm
brown-lattices: install
	$(BIN)/python benchmarks/lattices.py --brown $(BROWN) --nplm $(BIN)/nplm --first $(LATTICES) \
	    --repeats 1 --lstm $(LATTICE_LSTM) --out BENCHMARKS.md

# Caches and dynamic evaluation on Brown (issue 36, benchmarks/caches.py): KN5 with SRILM's unigram
# cache, the LSTM of brown-lstm (lstm-class, trained first when missing: about 15 min) with the
# continuous cache of Grave et al. 2017 and with dynamic evaluation (Krause et al. 2018, SGD and
# RMS), each setting picked on Brown valid, then scored on test by the ppl command; SRILM's
# ngram -cache compared when SRILM_BIN is set (about 25 min on 2 cores).
brown-caches: install
	$(BIN)/python benchmarks/caches.py --brown $(BROWN) --nplm $(BIN)/nplm --out BENCHMARKS.md

# The best network this machine trains within 2 hours (issue 36, benchmarks/best.py): lstm-awd of
# benchmarks/runs.py, two LSTM layers with AWD-LSTM's regularisers, trained for at most 7,000 s of
# wall time on 2 cores (-max-time; first when runs/lstm-awd.nplm is missing), then scored alone,
# with the caches and dynamic evaluation of brown-caches and mixed with KN5, each setting picked on
# Brown valid; writes its section of BENCHMARKS.md, valid ppl by epoch included (about 2 hours of
# training and 45 min of scoring, most of it dynamic evaluation).
brown-best: install
	$(BIN)/python benchmarks/best.py --brown $(BROWN) --nplm $(BIN)/nplm --out BENCHMARKS.md

# The Transformer on Brown in 2 hours (issue 52, benchmarks/brown_transformer.py): its ablation
# (XL memory, positions, schedule: 6 runs of 900 s at dropout 0.1), the variant best on valid trained
# for 7,000 s at dropout 0.3, its rate halved when valid stalls; the model better on valid (that run or
# the ablation's) scored alone, mixed with KN5 and with brown-best's LSTM (runs/lstm-awd.nplm, trained
# first when missing), each weight picked on valid; about 4 hours on 2 cores. A smoke run on a cut of
# Brown: BROWN=cut TRANSFORMER_FLAGS='--budget-scale 0.01 --runs /tmp/tf-smoke --out /tmp/tf.md'.
# In two sittings: TRANSFORMER_FLAGS=--ablation-only (1.5 hours), then TRANSFORMER_FLAGS='--picked NAME'.
brown-transformer: install
	$(BIN)/python benchmarks/brown_transformer.py --brown $(BROWN) --nplm $(BIN)/nplm --out BENCHMARKS.md \
		$(TRANSFORMER_FLAGS)

# What each of brown-best's additions gives on its own (issue 36, benchmarks/best.py --ablation):
# lstm-class's network for 600 s on 2 cores, alone and with one addition each, then all (9 runs,
# about 95 min); each scored on Brown test, a table in BENCHMARKS.md.
brown-ablation: install
	$(BIN)/python benchmarks/best.py --ablation --brown $(BROWN) --nplm $(BIN)/nplm --out BENCHMARKS.md

# A neural model as a back-off n-gram for a decoder's first pass (issue 37, benchmarks/convert.py):
# the lstm-class LSTM of make brown-lstm (runs/lstm-class.nplm, trained first when missing:
# about 15 min) converted by nplm convert-lm, by CONVERT_WORDS words sampled from it and KN5
# (Deoras et al. 2011) and by KN5's n-grams given its probabilities (Arisoy et al. 2014), merged
# with KN5 (EM weights on Brown valid), pruned to KN5's size and at fixed thresholds; test ppl
# against entries; writes its section of BENCHMARKS.md (about 21 min; 30 on a busy 2-core machine).
CONVERT_WORDS ?= 5000000
brown-convert: install
	$(BIN)/python benchmarks/convert.py --brown $(BROWN) --nplm $(BIN)/nplm --words $(CONVERT_WORDS) --out BENCHMARKS.md

# A corpus counted in parts apart (on a cluster, each part's `ngram-count -write-binary` runs
# on the machine that holds it; here one after the other), then one merge of the binary
# counts, a block of rows at a time, into the model:
#   make sharded-lm TEXT=big.txt PARTS=4 VOCAB=vocab.txt ORDER=5 MEMORY=2G OUT=big.arpa
# Every part needs the same -vocab. `make brown-shards` checks on Brown that the merged model
# is the one-machine model byte for byte.
PARTS ?= 4
ORDER ?= 5
MEMORY ?= 2G
sharded-lm: install
	@test -n "$(TEXT)" -a -n "$(VOCAB)" -a -n "$(OUT)" || { echo "give TEXT=, VOCAB= and OUT="; exit 2; }
	set -e; parts=$$(mktemp -d); trap 'rm -rf "$$parts"' EXIT; \
	split -n l/$(PARTS) -d "$(TEXT)" "$$parts/part."; \
	for part in "$$parts"/part.*; do \
	  $(BIN)/nplm ngram-count -text "$$part" -order $(ORDER) -vocab "$(VOCAB)" -unk -memory $(MEMORY) \
	    -write-binary "$$part.counts"; \
	done; \
	$(BIN)/nplm ngram-count $$(for c in "$$parts"/*.counts; do printf -- '-read %s ' "$$c"; done) \
	  -order $(ORDER) -vocab "$(VOCAB)" -unk -memory $(MEMORY) -lm "$(OUT)"

brown-shards: install
	set -e; out=$$(mktemp -d); trap 'rm -rf "$$out"' EXIT; \
	$(BIN)/nplm vocab -text $(BROWN)/train.txt -min-count 4 -write-vocab "$$out/vocab.txt"; \
	$(MAKE) --no-print-directory sharded-lm TEXT=$(BROWN)/train.txt VOCAB="$$out/vocab.txt" OUT="$$out/merged.arpa"; \
	$(BIN)/nplm ngram-count -text $(BROWN)/train.txt -order $(ORDER) -vocab "$$out/vocab.txt" -unk -lm "$$out/one.arpa"; \
	cmp "$$out/merged.arpa" "$$out/one.arpa" && echo "brown-shards: the $(PARTS) parts merged give the one-machine model, byte for byte"

# KN5 of large random Zipf texts against KenLM's lmplz (issue 35, benchmarks/scale.py): the text by
# benchmarks/zipf_text.py (seeded; |V| = 200k, exponent 1.1) at SCALE_WORDS words (comma-separated;
# each size run only when the disk has 60 times its text free), `nplm ngram-count -order 5 -memory 1G`
# (2G above 20M words) then `lmplz -o 5 -S` the same when KENLM_BIN holds it, SCALE_REPEATS times;
# wall, peak RSS and peak temporary disk of each, every command under an address-space cap of
# SCALE_CAP_GB; at sizes up to SCALE_SCORE_MAX, 200k held-out words scored by nplm ppl and KenLM's
# query (ARPA and binary). SCALE_OURS_MAX runs ngram-count only up to that size. Writes its section
# of BENCHMARKS.md (20M words: about 10 min; 200M: lmplz alone about 20 min).
SCALE_WORDS ?= 20M,200M,1B
SCALE_REPEATS ?= 1
bench-scale: install
	SCALE_WORDS=$(SCALE_WORDS) SCALE_REPEATS=$(SCALE_REPEATS) $(BIN)/python benchmarks/scale.py --nplm $(BIN)/nplm \
	    --out BENCHMARKS.md

# The corpora besides Brown that issue 51 checks settings on (benchmarks/other_corpora.py): ABC
# and webtext from NLTK's data packages (NLTK_CORPORA holds abc.zip and webtext.zip, from a clone
# of github.com/nltk/nltk_data, packages/corpora/), tokenised as Brown and split by document.
NLTK_CORPORA ?= ../nltk_data/packages/corpora
CORPORA ?= bench/corpora
other-corpora: install
	$(BIN)/python benchmarks/other_corpora.py $(NLTK_CORPORA)/abc.zip $(NLTK_CORPORA)/webtext.zip $(CORPORA)

clean:
	rm -rf $(VENV) build dist *.egg-info demo/out bench/out nplmtk/_ext/*.so cython_ext/*.c
