# nplmtk: `make demo` and `make test` work on a fresh machine (they install first).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
BROWN  ?= ../shared/data/brown

.PHONY: install demo test bench clean brown-mlp9 brown-mlp1 brown-is

install: $(STAMP)

# The build needs Cython, numpy and scipy (for cython_blas) before setup.py runs.
$(STAMP): setup.py pyproject.toml $(wildcard cython_ext/*.pyx cython_ext/*.pxd)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip 'setuptools>=68' wheel
	$(BIN)/python -m pip install -q 'cython>=3.0' 'numpy>=1.24' 'scipy>=1.11'
	$(BIN)/python -m pip install -q --no-build-isolation -e '.[mpi,test]'
	touch $@

demo: install
	PATH="$(CURDIR)/$(BIN):$$PATH" bash demo/run.sh demo/out

test: install
	$(BIN)/python -m pytest -q tests

bench: install
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python benchmarks/run.py --brown $(BROWN) --out BENCHMARKS.md

# Bengio et al.'s MLP9 on Brown (about 35 min on 2 cores); `make bench` then reports it.
brown-mlp9: install
	mkdir -p runs
	$(BIN)/nplm vocab -text $(BROWN)/train.txt -min-count 4 -write-vocab runs/vocab.txt
	$(BIN)/nplm train-nplm -text $(BROWN)/train.txt -valid $(BROWN)/valid.txt -vocab runs/vocab.txt \
	  -order 5 -m 30 -h 100 -epochs 20 -patience 2 -batch 256 -threads 2 -lr 0.003 \
	  -checkpoint runs/mlp9-ckpt -log runs/mlp9.log -lm runs/mlp9.nplm

# MLP1 of Bengio et al. (2003) Table 1: n=5, m=60, h=50, direct connections.
brown-mlp1: install
	mkdir -p runs
	$(BIN)/nplm vocab -text $(BROWN)/train.txt -min-count 4 -write-vocab runs/vocab.txt
	$(BIN)/nplm train-nplm -text $(BROWN)/train.txt -valid $(BROWN)/valid.txt -vocab runs/vocab.txt \
	  -order 5 -m 60 -h 50 -direct -epochs 20 -patience 2 -batch 256 -threads 2 -lr 0.003 \
	  -checkpoint runs/mlp1-ckpt -log runs/mlp1.log -lm runs/mlp1.nplm

# Bengio & Senecal (2003) sec. 4.2: 3 words of context, m=30, h=80, per-example SGD, the
# exact gradient against importance sampling (Algorithm 4, unigram proposal, N0=100), a
# fixed number of epochs and no validation set, as in the paper.
IS_RUN = -order 4 -m 30 -h 80 -epochs 5 -batch 1 -lr 0.001 -vocab runs/vocab.txt
brown-is: install
	mkdir -p runs
	$(BIN)/nplm vocab -text $(BROWN)/train.txt -min-count 4 -write-vocab runs/vocab.txt
	$(BIN)/nplm train-nplm -text $(BROWN)/train.txt $(IS_RUN) -criterion full -log runs/is-full.log -lm runs/is-full.nplm
	$(BIN)/nplm train-nplm -text $(BROWN)/train.txt $(IS_RUN) -criterion is-adaptive -samples 100 \
	  -log runs/is-adaptive.log -lm runs/is-adaptive.nplm
	# Two points further along the speed / perplexity curve: N0 = 200, and the ESS rule.
	$(BIN)/nplm train-nplm -text $(BROWN)/train.txt $(IS_RUN) -criterion is-adaptive -samples 200 \
	  -log runs/is-adaptive-n200.log -lm runs/is-adaptive-n200.nplm
	$(BIN)/nplm train-nplm -text $(BROWN)/train.txt $(IS_RUN) -criterion is-adaptive -samples 100 -ess-min 50 \
	  -log runs/is-adaptive-ess50.log -lm runs/is-adaptive-ess50.nplm

clean:
	rm -rf $(VENV) build *.egg-info demo/out bench/out nplmtk/_ext/*.so cython_ext/*.c
