#!/usr/bin/env bash
# The demo pipeline on the built-in toy corpus: data, vocabulary, models, a short table.
# Usage: demo/run.sh OUT_DIR   (run by `make demo`, which installs first)
set -euo pipefail
out=${1:-demo/out}
mkdir -p "$out"
cd "$out"

nplm toy-corpus -sentences 20000 -seed 1 -write train.txt
nplm toy-corpus -sentences 2000 -seed 2 -write valid.txt
nplm toy-corpus -sentences 2000 -seed 3 -write test.txt
nplm vocab -text train.txt -write-vocab vocab.txt -write-counts counts.txt
for order in 2 3 5; do
  nplm ngram-count -text train.txt -order $order -vocab vocab.txt -unk -lm kn$order.arpa
done
nplm ngram-count -text train.txt -order 3 -vocab vocab.txt -unk -deleted-interpolation \
  -heldout valid.txt -lm di3.nplm 2>/dev/null
nplm train-nplm -text train.txt -valid valid.txt -vocab vocab.txt -order 4 -m 16 -h 32 \
  -epochs 6 -batch 16 -lr 0.01 -weight-decay 0 -lm mlp.nplm -log mlp.log
nplm train-nplm -arch lstm -text train.txt -valid valid.txt -vocab vocab.txt -m 16 -h 32 -epochs 3 \
  -streams 16 -bptt 20 -optimizer adam -lr 0.01 -lm lstm.nplm -log lstm.log
nplm mix -lm kn3.arpa -lm mlp.nplm -text valid.txt -write kn3-mlp.mix > mix.txt
nplm generate -lm lstm.nplm -n 3 -seed 1 -write samples.txt
nplm plot -log mlp.log -log lstm.log -out curves.png
nplm plot -lm lstm.nplm -embeddings -words 70 -out map.png

echo
echo "toy corpus: $(wc -l < train.txt) / $(wc -l < valid.txt) / $(wc -l < test.txt) sentences" \
     "(train/valid/test), $(wc -w < train.txt) training words, $(wc -l < vocab.txt) vocabulary entries"
echo
printf '%-28s %12s\n' "model" "test ppl"
printf '%-28s %12s\n' "----------------------------" "------------"
ppl() { nplm ppl -lm "$1" -text test.txt | sed -n 's/.* ppl= \([^ ]*\) .*/\1/p'; }
for order in 2 3 5; do
  printf '%-28s %12s\n' "KN$order (Kneser-Ney)" "$(ppl kn$order.arpa)"
done
printf '%-28s %12s\n' "deleted interpolation 3" "$(ppl di3.nplm)"
printf '%-28s %12s\n' "neural MLP (n=4 m=16 h=32)" "$(ppl mlp.nplm)"
printf '%-28s %12s\n' "KN3 + MLP (EM on valid)" "$(ppl kn3-mlp.mix)"
printf '%-28s %12s\n' "LSTM (m=16 h=32, Adam)" "$(ppl lstm.nplm)"
score=$(nplm toy-corpus -score test.txt)
printf '%-28s %12s\n' "true grammar (on test)" "$(sed 's/.*true model ppl= \([^,]*\),.*/\1/' <<<"$score")"
printf '%-28s %12s\n' "entropy floor (exact)" "$(sed 's/.*entropy floor ppl= //' <<<"$score")"
echo
echo "sentences sampled from the LSTM (nplm generate):"
sed 's/^/  /' samples.txt
echo
echo "figures: $PWD/curves.png (training curves), $PWD/map.png (the LSTM's word features)"
