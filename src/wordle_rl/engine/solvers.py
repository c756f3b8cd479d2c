"""Solver baselines and teachers, each usable as a policy.

All solvers see only the history of (guess, pattern) and the public word lists; candidates are
found by re-scoring through the pattern matrix. Each is deterministic (``random`` given a seed).

- ``random``: a uniformly random remaining candidate.
- ``entropy``: greedy maximum expected information (bits) over all allowed guesses, ties to
  candidates; ``candidate``: the same among the remaining candidates only.
- ``search``: for the best few entropy guesses, a lookahead that minimises the expected number of
  guesses (the leaves are valued by playing the greedy entropy policy out exactly).
- ``ranked``: the candidate solver's opener, then the best-ranked remaining candidate (a ranking
  of the answer words: a model's own preference, say; the answer list's order without one).

Openers are computed, not hard-coded, and cached on disk next to the pattern matrix.

Run: ``wordle-rl solve --all --solver search`` (figures in ``docs/results.md``).
"""

from __future__ import annotations

import json
import math
import random
from typing import Protocol

import numpy as np

from wordle_rl.engine.entropy import entropies
from wordle_rl.engine.game import GREEN, candidate_indices, pattern_to_tiles
from wordle_rl.engine.matrix import cache_dir, pattern_matrix
from wordle_rl.engine.storage import write_atomic
from wordle_rl.engine.words import WordList, encode_words, load_word_lists

__all__ = [
    "Policy",
    "RandomSolver",
    "EntropySolver",
    "SearchSolver",
    "CandidateSolver",
    "RankedSolver",
    "make_solver",
    "SOLVERS",
]

History = list[tuple[str, int]]


class Policy(Protocol):
    name: str

    def guess(self, history: History, rng: random.Random | None = None) -> str: ...


class _Base:
    """Shared state: word lists, matrix (and its transpose for fast candidate-row gathers), hard
    mode."""

    name = "base"

    def __init__(
        self,
        words: WordList | None = None,
        hard: bool = False,
        matrix: np.ndarray | None = None,
        by_answer: np.ndarray | None = None,
    ):
        self.words = words or load_word_lists()
        self.hard = hard
        self.matrix = matrix if matrix is not None else pattern_matrix(self.words)
        self.by_answer = by_answer if by_answer is not None else np.ascontiguousarray(self.matrix.T)
        self.n_patterns = 3**self.words.length
        self.win = self.n_patterns - 1
        self._enc = encode_words(list(self.words.allowed))
        self._letter_counts = np.zeros((len(self.words.allowed), 26), dtype=np.uint8)
        for k in range(self.words.length):
            np.add.at(self._letter_counts, (np.arange(len(self.words.allowed)), self._enc[:, k]), 1)
        self._is_answer = np.zeros(len(self.words.allowed), dtype=bool)
        self._is_answer[self.words.answer_to_allowed] = True

    def candidates(self, history: History) -> np.ndarray:
        return candidate_indices(self.words, history, self.matrix)

    def valid_guesses(self, history: History) -> np.ndarray | None:
        """Indices of allowed guesses legal under hard mode for ``history`` (``None`` = all are
        legal)."""
        if not self.hard or not history:
            return None
        ok = np.ones(len(self.words.allowed), dtype=bool)
        for prev, pattern in history:
            tiles = pattern_to_tiles(pattern, len(prev))
            need: dict[int, int] = {}
            for i, (c, t) in enumerate(zip(prev, tiles)):
                li = ord(c) - 97
                if t == GREEN:
                    ok &= self._enc[:, i] == li
                if t:
                    need[li] = need.get(li, 0) + 1
            for li, n in need.items():
                ok &= self._letter_counts[:, li] >= n
        return np.flatnonzero(ok)

    def _check_history(self, history: History) -> np.ndarray:
        cands = self.candidates(history)
        if len(cands) == 0:
            raise ValueError(f"no answer in the list is consistent with the history {history}")
        return cands


class RandomSolver(_Base):
    """Guesses a uniformly random remaining candidate (a weak but valid baseline)."""

    name = "random"

    def __init__(
        self,
        words: WordList | None = None,
        hard: bool = False,
        matrix: np.ndarray | None = None,
        by_answer: np.ndarray | None = None,
        seed: int = 0,
    ):
        super().__init__(words, hard, matrix, by_answer)
        self.rng = random.Random(seed)

    def guess(self, history: History, rng: random.Random | None = None) -> str:
        cands = self._check_history(history)
        r = rng or self.rng
        return self.words.answers[int(cands[r.randrange(len(cands))])]


class EntropySolver(_Base):
    """Greedy maximum expected information over all allowed guesses; ties go to candidates, then to
    order."""

    name = "entropy"

    def __init__(
        self,
        words: WordList | None = None,
        hard: bool = False,
        matrix: np.ndarray | None = None,
        by_answer: np.ndarray | None = None,
    ):
        super().__init__(words, hard, matrix, by_answer)
        self._memo: dict[bytes, int] = {}

    def scores(self, cands: np.ndarray, valid: np.ndarray | None = None) -> np.ndarray:
        return entropies(self.matrix, self.by_answer, cands, valid, self.n_patterns)

    def best(
        self, cands: np.ndarray, valid: np.ndarray | None = None, history: History | None = None
    ) -> int:
        """Index (into allowed) of the greedy guess for candidate set ``cands``."""
        if len(cands) <= 2:
            return int(self.words.answer_to_allowed[cands[0]])
        key = cands.tobytes() + (repr(history).encode() if valid is not None else b"")
        hit = self._memo.get(key)
        if hit is not None:
            return hit
        h = self.scores(cands, valid)
        pool = valid if valid is not None else np.arange(len(h))
        top = h >= h.max() - 1e-9
        is_cand = np.isin(pool, self.words.answer_to_allowed[cands])
        pick = np.flatnonzero(top & is_cand)
        if len(pick) == 0:
            pick = np.flatnonzero(top)
        best = int(pool[pick[0]])
        self._memo[key] = best
        return best

    def opener(self) -> str:
        return _cached_opener(
            self, lambda: self.words.allowed[self.best(np.arange(len(self.words.answers)))]
        )

    def guess(self, history: History, rng: random.Random | None = None) -> str:
        if not history:
            return self.opener()
        cands = self._check_history(history)
        return self.words.allowed[self.best(cands, self.valid_guesses(history), history)]


class SearchSolver(EntropySolver):
    """Lookahead over the ``width`` best entropy guesses (plus the best candidates), minimising
    expected guesses.

    ``value(S, d)`` is the expected number of guesses still needed when the answer is uniform over
    ``S``: ``1 + sum_p |S_p|/|S| * value(S_p, d-1)`` for the best guess, with the win pattern
    costing nothing more; at depth 0 the greedy entropy policy is played out exactly. ``depth=2`` is
    a 2-ply search.
    """

    name = "search"

    def __init__(
        self,
        words: WordList | None = None,
        hard: bool = False,
        matrix: np.ndarray | None = None,
        by_answer: np.ndarray | None = None,
        width: int = 8,
        depth: int = 2,
        opener_width: int = 24,
    ):
        super().__init__(words, hard, matrix, by_answer)
        self.width, self.depth, self.opener_width = width, depth, opener_width
        self._greedy_val: dict[bytes, float] = {}
        self._val: dict[tuple[bytes, int], tuple[float, int]] = {}

    def _parts(self, g: int, cands: np.ndarray) -> list[np.ndarray]:
        pats = self.matrix[g, cands]
        order = np.argsort(pats, kind="stable")
        sp = pats[order]
        cuts = np.flatnonzero(np.diff(sp)) + 1
        return [
            cands[idx] for idx, p in zip(np.split(order, cuts), sp[np.r_[0, cuts]]) if p != self.win
        ]

    def _hist(self, history: History | None, g: int, part: np.ndarray) -> History | None:
        if not self.hard or history is None:
            return None
        return history + [(self.words.allowed[g], int(self.matrix[g, part[0]]))]

    def greedy_value(self, cands: np.ndarray, history: History | None = None) -> float:
        n = len(cands)
        if n == 1:
            return 1.0
        key = cands.tobytes() + (repr(history).encode() if self.hard else b"")
        v = self._greedy_val.get(key)
        if v is None:
            valid = self.valid_guesses(history) if self.hard else None
            g = self.best(cands, valid, history)
            v = 1.0 + sum(
                len(p) / n * self.greedy_value(p, self._hist(history, g, p))
                for p in self._parts(g, cands)
            )
            self._greedy_val[key] = v
        return v

    def shortlist(self, cands: np.ndarray, history: History | None, width: int) -> list[int]:
        valid = self.valid_guesses(history) if self.hard else None
        h = self.scores(cands, valid)
        pool = valid if valid is not None else np.arange(len(h))
        bonus = np.isin(pool, self.words.answer_to_allowed[cands]) * 1e-6
        order = np.argsort(-(h + bonus), kind="stable")
        picks = [int(pool[i]) for i in order[:width]]
        cand_pos = [i for i in order if bonus[i] > 0][:2]
        picks += [int(pool[i]) for i in cand_pos if int(pool[i]) not in picks]
        return picks

    def value(
        self, cands: np.ndarray, depth: int, history: History | None = None
    ) -> tuple[float, int]:
        """(expected guesses, best guess index) for candidates ``cands`` with ``depth`` plies of
        search."""
        n = len(cands)
        if n <= 2:
            return (1.0 if n == 1 else 1.5), int(self.words.answer_to_allowed[cands[0]])
        key = (cands.tobytes() + (repr(history).encode() if self.hard else b""), depth)
        hit = self._val.get(key)
        if hit is not None:
            return hit
        best = (math.inf, -1)
        for g in self.shortlist(cands, history, self.width):
            total = 1.0
            for p in self._parts(g, cands):
                sub_hist = self._hist(history, g, p)
                sub = (
                    self.value(p, depth - 1, sub_hist)[0]
                    if depth > 1
                    else self.greedy_value(p, sub_hist)
                )
                total += len(p) / n * sub
                if total >= best[0]:
                    break
            if total < best[0] - 1e-12:
                best = (total, g)
        self._val[key] = best
        return best

    def opener(self) -> str:
        def compute() -> str:
            allc = np.arange(len(self.words.answers))
            hist: History | None = [] if self.hard else None
            best = (math.inf, -1)
            for g in self.shortlist(allc, hist, self.opener_width):
                v = 1.0 + sum(
                    len(p) / len(allc) * self.greedy_value(p, self._hist(hist, g, p))
                    for p in self._parts(g, allc)
                )
                if v < best[0]:
                    best = (v, g)
            return self.words.allowed[best[1]]

        return _cached_opener(self, compute)

    def guess(self, history: History, rng: random.Random | None = None) -> str:
        if not history:
            return self.opener()
        cands = self._check_history(history)
        return self.words.allowed[
            self.value(cands, self.depth, list(history) if self.hard else None)[1]
        ]


class CandidateSolver(EntropySolver):
    """Greedy maximum expected information among the remaining candidates only: every guess could be
    the answer.

    A teacher a small model can imitate: it never makes an information guess, so each move is a word
    that fits all feedback so far (3.52 guesses on average from SALET against 3.43 for the
    unrestricted greedy solver).
    """

    name = "candidate"

    def valid_guesses(self, history: History) -> np.ndarray:
        pool = self.words.answer_to_allowed[self.candidates(history)]
        hard = super().valid_guesses(history)
        return pool if hard is None else np.intersect1d(pool, hard)

    def opener(self) -> str:
        allc = np.arange(len(self.words.answers))
        return _cached_opener(
            self, lambda: self.words.allowed[self.best(allc, self.words.answer_to_allowed, [])]
        )


class RankedSolver(CandidateSolver):
    """The candidate solver's opener, then the remaining candidate first in ``ranking`` (answer
    words, best first; the words it leaves out follow in the answer list's order). With a model's
    own preference as the ranking, a student imitating it learns which words fit, not a choice.

    >>> from wordle_rl.engine.game import score
    >>> history = [("raise", score("raise", "tiger"))]
    >>> RankedSolver().guess(history), RankedSolver(ranking=["tiger"]).guess(history)
    ('cider', 'tiger')
    """

    name = "ranked"

    def __init__(self, words=None, hard: bool = False, ranking: list[str] | None = None, **kw):
        super().__init__(words, hard, **kw)
        n = len(self.words.answers)
        self.rank = np.arange(n, 2 * n)
        for r, word in enumerate(ranking or []):
            i = self.words.answer_index.get(word)
            if i is None:
                raise ValueError(f"the ranking holds {word!r}, which is no answer word")
            self.rank[i] = min(self.rank[i], r)

    def guess(self, history: History, rng: random.Random | None = None) -> str:
        if not history:
            return self.opener()
        cands = self._check_history(history)  # each one keeps hard mode's rules too
        return self.words.answers[int(cands[np.argmin(self.rank[cands])])]


def _cached_opener(solver: _Base, compute) -> str:
    """Openers are computed once per (word lists, solver settings) and kept in a JSON file in the
    cache dir."""
    settings = {
        k: getattr(solver, k) for k in ("width", "depth", "opener_width") if hasattr(solver, k)
    }
    key = f"{solver.name}|hard={solver.hard}|{json.dumps(settings, sort_keys=True)}"
    memo = solver.__dict__.setdefault("_opener", {})
    if key in memo:
        return memo[key]
    path = cache_dir() / f"openers-{solver.words.digest[:20]}.json"
    table: dict[str, str] = {}
    if path.is_file():
        try:
            table = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError):
            table = {}
    word = table.get(key)
    if word not in solver.words.allowed_index:
        word = compute()
        table[key] = word
        write_atomic(path, json.dumps(table, indent=1, sort_keys=True))
    memo[key] = word
    return word


SOLVERS = {
    "random": RandomSolver,
    "entropy": EntropySolver,
    "search": SearchSolver,
    "candidate": CandidateSolver,
    "ranked": RankedSolver,
}


def make_solver(name: str, words: WordList | None = None, hard: bool = False, seed: int = 0, **kw):
    """Build a solver by name (``random``, ``entropy``, ``search``, ``candidate``, ``ranked``)."""
    if name not in SOLVERS:
        raise ValueError(f"unknown solver {name!r}; choose one of {sorted(SOLVERS)}")
    if name == "random":
        return RandomSolver(words, hard, seed=seed, **kw)
    return SOLVERS[name](words, hard, **kw)
