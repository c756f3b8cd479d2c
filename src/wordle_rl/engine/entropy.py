"""Expected information of guesses: compiled (numba) histograms of feedback patterns over a
candidate set, the measure the entropy solver maximises and the info-gain reward divides by.

    entropies(matrix, by_answer, cands)             # bits of every allowed guess
    entropies(matrix, by_answer, cands, guesses)    # bits of the given guess indices
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

__all__ = ["entropies"]


@njit(cache=True, nogil=True)
def _nlogn_table(s: int) -> np.ndarray:
    t = np.zeros(s + 1)
    for n in range(1, s + 1):
        t[n] = n * math.log2(n)
    return t


@njit(cache=True, nogil=True)
def _entropy_cols(cols: np.ndarray, n_patterns: int) -> np.ndarray:  # pragma: no cover - compiled
    """cols: (s candidates, g guesses) patterns -> bits per guess. Best for small s (contiguous
    rows)."""
    s, g = cols.shape
    out = np.empty(g)
    counts = np.zeros(n_patterns, np.int32)
    nlogn = _nlogn_table(s)
    base = math.log2(s)
    for k in range(g):
        for i in range(s):
            counts[cols[i, k]] += 1
        acc = 0.0
        for i in range(s):
            p = cols[i, k]
            if counts[p]:
                acc += nlogn[counts[p]]
                counts[p] = 0
        out[k] = base - acc / s
    return out


@njit(cache=True, nogil=True)
def _entropy_rows(
    matrix: np.ndarray, cands: np.ndarray, guesses: np.ndarray, n_patterns: int
) -> np.ndarray:  # pragma: no cover - compiled
    """Same, reading each guess's row of the (guesses x answers) matrix; best for large candidate
    sets."""
    s = cands.shape[0]
    out = np.empty(guesses.shape[0])
    counts = np.zeros(n_patterns, np.int32)
    nlogn = _nlogn_table(s)
    base = math.log2(s)
    for k in range(guesses.shape[0]):
        row = matrix[guesses[k]]
        for c in cands:
            counts[row[c]] += 1
        acc = 0.0
        for p in range(n_patterns):
            if counts[p]:
                acc += nlogn[counts[p]]
                counts[p] = 0
        out[k] = base - acc / s
    return out


def entropies(
    matrix: np.ndarray,
    by_answer: np.ndarray,
    cands: np.ndarray,
    guesses: np.ndarray | None = None,
    n_patterns: int = 243,
) -> np.ndarray:
    """Expected information (bits) of each guess (all allowed, or ``guesses``) over candidate set
    ``cands``.

    ``matrix`` is the (allowed x answers) pattern matrix and ``by_answer`` its C-contiguous
    transpose. A compiled histogram per guess: O(guesses x candidates).
    """
    cands = np.asarray(cands, dtype=np.int64)
    s = len(cands)
    n = matrix.shape[0] if guesses is None else len(guesses)
    if s <= 1:
        return np.zeros(n)
    if s <= 64:
        cols = by_answer[cands] if guesses is None else by_answer[np.ix_(cands, guesses)]
        return _entropy_cols(np.ascontiguousarray(cols), n_patterns)
    g = (
        np.arange(matrix.shape[0], dtype=np.int64)
        if guesses is None
        else np.asarray(guesses, dtype=np.int64)
    )
    return _entropy_rows(matrix, np.sort(cands), g, n_patterns)
