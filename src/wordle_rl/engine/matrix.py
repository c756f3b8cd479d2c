"""The guess x answer pattern matrix: built vectorised, cached on disk, kept in memory.

The full matrix (12,972 guesses x 2,315 answers, uint8) is built without a Python loop over pairs
and cached in the user cache directory (``WORDLE_RL_CACHE`` overrides it), keyed by a hash of both
word lists.

    >>> from wordle_rl.engine.words import load_word_lists
    >>> pattern_matrix(load_word_lists()).shape
    (12972, 2315)
"""

from __future__ import annotations

import io
import os
import time
from pathlib import Path

import numpy as np

from wordle_rl.engine.storage import write_atomic
from wordle_rl.engine.words import WordList, encode_words, load_word_lists

__all__ = [
    "pattern_dtype",
    "build_pattern_matrix",
    "cache_dir",
    "pattern_matrix",
    "clear_matrix_memo",
    "timed_build",
]


def pattern_dtype(length: int) -> type:
    """The smallest unsigned integer type that holds every pattern of ``length`` letters."""
    return np.uint8 if 3**length <= 256 else (np.uint16 if 3**length <= 65536 else np.uint32)


def build_pattern_matrix(
    allowed: tuple[str, ...] | list[str], answers: tuple[str, ...] | list[str], chunk: int = 512
) -> np.ndarray:
    """The ``(len(allowed), len(answers))`` pattern matrix, built without a Python loop over pairs.

    Yellow rule used: with ``cnt[l]`` the count of letter ``l`` in the answer, tile ``i`` is yellow
    when it is not green and ``cnt[g_i] - #greens of g_i > #earlier non-green g_i in the guess``.
    Guesses are grouped by which of their positions share a letter, so each group needs only the
    terms that can be non-zero.
    """
    G = encode_words(list(allowed))
    A = encode_words(list(answers))
    length = G.shape[1]
    dtype = pattern_dtype(length)
    out = np.empty((len(G), len(A)), dtype=dtype)
    counts = np.zeros((26, len(A)), dtype=np.uint8)
    for k in range(length):
        np.add.at(counts, (A[:, k], np.arange(len(A))), 1)
    a_cols = [A[:, k][None, :] for k in range(length)]
    # signature: position -> first position holding the same letter
    first = np.argmax(G[:, :, None] == G[:, None, :], axis=2)
    sigs, inverse = np.unique(first, axis=0, return_inverse=True)
    for s, sig in enumerate(sigs):
        rows = np.flatnonzero(inverse.ravel() == s)
        same = [[k for k in range(length) if sig[k] == sig[i]] for i in range(length)]
        for start in range(0, len(rows), chunk):
            r = rows[start : start + chunk]
            gc = G[r]
            green = [gc[:, i][:, None] == a_cols[i] for i in range(length)]
            pat = np.zeros((len(r), len(A)), dtype=dtype)
            for i in range(length):
                w = dtype(3**i)
                pat += green[i].astype(dtype) * dtype(2 * w)
                cnt = counts[gc[:, i]]
                if len(same[i]) == 1:
                    yellow = (cnt > 0) & ~green[i]
                else:
                    avail = cnt - sum(green[k].astype(np.uint8) for k in same[i])
                    prior = sum((~green[j]).astype(np.uint8) for j in same[i] if j < i)
                    yellow = ~green[i] & (avail > prior)
                pat += yellow.astype(dtype) * w
            out[r] = pat
    return out


def cache_dir() -> Path:
    """Where the pattern matrix and solver openers are cached: ``$WORDLE_RL_CACHE`` or the user
    cache dir."""
    env = os.environ.get("WORDLE_RL_CACHE")
    if env:
        return Path(env)
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("wordle-rl"))


_MATRICES: dict[str, np.ndarray] = {}


def pattern_matrix(words: WordList | None = None, use_cache: bool = True) -> np.ndarray:
    """The guess x answer pattern matrix for ``words`` (canonical lists by default).

    Kept in memory once loaded; on disk it is keyed by a hash of both lists, written atomically,
    and rebuilt if the file is unreadable or of the wrong shape.
    """
    words = words or load_word_lists()
    key = words.digest
    if key in _MATRICES:
        return _MATRICES[key]
    shape = (len(words.allowed), len(words.answers))
    path = cache_dir() / f"patterns-{key[:20]}.npy"
    mat = None
    if use_cache and path.is_file():
        try:
            loaded = np.load(path, allow_pickle=False)
            if loaded.shape == shape:
                mat = loaded
        except (OSError, ValueError):
            mat = None
    if mat is None:
        mat = build_pattern_matrix(words.allowed, words.answers)
        if use_cache:
            buf = io.BytesIO()
            np.save(buf, mat)
            write_atomic(path, buf.getvalue())
    mat.setflags(write=False)
    _MATRICES[key] = mat
    return mat


def clear_matrix_memo() -> None:
    """Forget matrices held in memory (the disk cache stays); for benchmarks and tests."""
    _MATRICES.clear()


def timed_build(words: WordList | None = None) -> tuple[np.ndarray, float]:
    """Build the matrix without any cache; returns it with the wall seconds taken (for
    benchmarks)."""
    words = words or load_word_lists()
    t0 = time.perf_counter()
    mat = build_pattern_matrix(words.allowed, words.answers)
    return mat, time.perf_counter() - t0
