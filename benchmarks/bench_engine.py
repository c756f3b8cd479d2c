"""Benchmark the game engine: pattern matrix cold build, load from the disk cache, vectorised score
throughput.

Run on an idle machine: ``python benchmarks/bench_engine.py``. Prints JSON.
"""

from __future__ import annotations

import json
import os
import tempfile
import time

import numpy as np

from wordle_rl.engine.game import score, score_pairs
from wordle_rl.engine.matrix import build_pattern_matrix, clear_matrix_memo, pattern_matrix
from wordle_rl.engine.words import encode_words, load_word_lists


def main() -> None:
    words = load_word_lists()
    out: dict[str, float] = {}
    builds = []
    for _ in range(3):
        t = time.perf_counter()
        build_pattern_matrix(words.allowed, words.answers)
        builds.append(time.perf_counter() - t)
    out["matrix_cold_build_s_best_of_3"] = round(min(builds), 3)
    with tempfile.TemporaryDirectory() as d:
        os.environ["WORDLE_RL_CACHE"] = d
        clear_matrix_memo()
        pattern_matrix(words)  # builds and writes the cache
        loads = []
        for _ in range(5):
            clear_matrix_memo()
            t = time.perf_counter()
            pattern_matrix(words)
            loads.append(time.perf_counter() - t)
        out["matrix_cache_load_s_best_of_5"] = round(min(loads), 4)
    G, A = encode_words(list(words.allowed)), encode_words(list(words.answers))
    rng = np.random.default_rng(0)
    n = 2_000_000
    gi, ai = rng.integers(0, len(G), n), rng.integers(0, len(A), n)
    g, a = G[gi], A[ai]
    t = time.perf_counter()
    score_pairs(g, a)
    out["score_pairs_per_s"] = round(n / (time.perf_counter() - t))
    cells = len(words.allowed) * len(words.answers)
    out["matrix_build_pairs_per_s"] = round(cells / min(builds))
    t = time.perf_counter()
    for x, y in zip(words.allowed[:20000], words.answers * 9):
        score(x, y)
    out["score_scalar_per_s"] = round(min(20000, len(words.allowed)) / (time.perf_counter() - t))
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
