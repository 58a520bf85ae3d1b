"""KenLM's Python calls on nplm's models against KenLM's own module (issue 48): BaseScore per
call with the same KN5 (nplm's binary model and KenLM's probing binary of the same ARPA
file), the first 3,000 sentences of Brown test word by word (each from BeginSentenceWrite,
then </s>), the two alternating, 5 runs each, 3 rounds, medians; then score_words of a
beam (64 states x 32 words in one call). Prints the figures for BENCHMARKS.md.

    python benchmarks/base_score.py KN5.nplm KN5.probing ../shared/data/brown/test.txt"""
import statistics
import sys
import time


def sentence_scores(model, state_class, sentences):
    total = 0.0
    for words in sentences:
        state, out = state_class(), state_class()
        model.BeginSentenceWrite(state)
        for word in words + ["</s>"]:
            total += model.BaseScore(state, word, out)
            state, out = out, state
    return total


def timed(function, repeats):
    times, value = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        value = function()
        times.append(time.perf_counter() - start)
    return statistics.median(times), value


def main():
    import kenlm

    import nplmtk
    ours_path, theirs_path, text = sys.argv[1:4]
    with open(text, encoding="utf-8") as f:
        sentences = [line.split() for line in f][:3000]
    calls = sum(len(words) + 1 for words in sentences)
    theirs, ours = kenlm.Model(theirs_path), nplmtk.load(ours_path)
    rounds = []
    for _ in range(3):
        rounds.append((timed(lambda: sentence_scores(theirs, kenlm.State, sentences), 5),
                       timed(lambda: sentence_scores(ours, nplmtk.State, sentences), 5)))
    kenlm_seconds = statistics.median(r[0][0] for r in rounds)
    nplm_seconds = statistics.median(r[1][0] for r in rounds)
    print(f"{calls} calls: KenLM {1e6 * kenlm_seconds / calls:.3f} us a call (log10 P {rounds[0][0][1]:.4f}), "
          f"nplm {1e6 * nplm_seconds / calls:.3f} us (log10 P {rounds[0][1][1]:.4f}), "
          f"{nplm_seconds / kenlm_seconds:.2f}x")
    state = ours.begin_state()
    for word in "the jury said".split():
        _, state = ours.score_word(state, word)
    words = [w for s in sentences for w in s][:32]
    states = [state for _ in range(64) for _ in words]
    seconds, _ = timed(lambda: ours.score_words(states, words * 64), 20)
    print(f"score_words of {len(states)} pairs: {1e6 * seconds / len(states):.3f} us a pair")


if __name__ == "__main__":
    main()
