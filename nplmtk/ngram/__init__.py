"""N-gram models: counting, Kneser-Ney / Witten-Bell estimation, ARPA files, scoring."""
