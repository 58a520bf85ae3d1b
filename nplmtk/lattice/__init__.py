"""Word lattices: HTK Standard Lattice Format (`htk`), decoding them with a language
model as SRILM's lattice-tool does (`decode`), and lattices made from text for tests
(`noise`)."""
