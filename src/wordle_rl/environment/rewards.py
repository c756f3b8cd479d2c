"""Reward components, their weights and the strict game return; the batched TRL reward functions
built on them are in :mod:`wordle_rl.environment.reward_funcs`.

Each component is small, pure and bounded, and scores one turn: a completion played in a state
(``answer`` and the ``history`` of earlier ``(guess, pattern)`` turns).

| component | range | what it pays |
|---|---|---|
| ``win`` | 0 or 1..1.5 | 1 for the answer, plus an early-finish bonus shrinking with turns |
| ``format`` | 0..1 | strict shape: one think block (if the style thinks), the answer |
| ``valid`` | 0..1 | a legal move: an allowed, new word (and hard-mode legal) |
| ``partial`` | 0..1 | (2 x greens + yellows) / (2 x length) of the guess |
| ``repetition`` | -1..0 | -1 for repeating an earlier guess |
| ``consistency`` | 0..1 | share of earlier feedback tiles the guess reproduces |
| ``info_gain`` | 0..1 | expected bits over the remaining candidates / the best guess's |
| ``invalid`` | -1..0 | -1 for any refused move |

Weights combine components; :class:`RewardWeights` refuses any set under which a lost game could
out-score a won one, or a refused move out-score a legal one. :func:`game_return` orders whole
games strictly: every win above every loss, a shorter win above a longer one.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields
from functools import lru_cache

import numpy as np

from wordle_rl.engine.entropy import entropies
from wordle_rl.engine.game import (
    GREEN,
    YELLOW,
    candidate_indices,
    consistent_with,
    pattern_to_tiles,
    score,
    score_tiles,
    str_to_pattern,
)
from wordle_rl.engine.matrix import pattern_matrix
from wordle_rl.engine.words import WordList, load_word_lists
from wordle_rl.environment.parser import ParseResult, parse
from wordle_rl.environment.prompts import PromptStyle

__all__ = [
    "COMPONENTS",
    "RANGES",
    "RewardWeights",
    "PRESETS",
    "RewardContext",
    "turn_components",
    "combine",
    "episode_components",
    "game_return",
    "move_fits",
    "as_history",
    "completion_text",
    "default_context",
]

COMPONENTS = (
    "win",
    "format",
    "valid",
    "partial",
    "repetition",
    "consistency",
    "info_gain",
    "invalid",
)
RANGES = {
    "win": (0.0, 1.5),
    "format": (0.0, 1.0),
    "valid": (0.0, 1.0),
    "partial": (0.0, 1.0),
    "repetition": (-1.0, 0.0),
    "consistency": (0.0, 1.0),
    "info_gain": (0.0, 1.0),
    "invalid": (-1.0, 0.0),
}
EARLY_BONUS = 0.5


class RewardContext:
    """Word lists, pattern matrix and a memo of the best guess's bits per candidate set."""

    def __init__(
        self,
        words: WordList | None = None,
        matrix: np.ndarray | None = None,
        memo_size: int = 200_000,
    ):
        self.words = words or load_word_lists()
        self.matrix = matrix if matrix is not None else pattern_matrix(self.words)
        self.by_answer = np.ascontiguousarray(self.matrix.T)
        self.n_patterns = 3**self.words.length
        self._best: dict[bytes, float] = {}
        self._turns: dict[tuple, dict[str, float]] = {}
        self._memo_size = memo_size
        self.all_candidates = np.arange(len(self.words.answers))

    def candidates(self, history) -> np.ndarray:
        return candidate_indices(self.words, history, self.matrix)

    def warm_up(self) -> RewardContext:
        """Compile the entropy kernels and memoise the opening state, so first requests are not
        slow."""
        self.best_bits(self.all_candidates)
        self.best_bits(self.all_candidates[:3])
        return self

    def turn(
        self,
        text: str,
        answer: str,
        history: list[tuple[str, int]],
        style: PromptStyle,
        hard: bool,
        max_turns: int,
        info: bool = True,
    ) -> dict[str, float]:
        """Parse and score one completion; memoised so the batched functions of one batch share the
        work."""
        key = (text, answer, tuple(history), style, hard, max_turns)
        hit = self._turns.get((key, True)) or (None if info else self._turns.get((key, False)))
        if hit is not None:
            return hit
        pr = parse(text, style, words=self.words, history=history, hard=hard)
        comps = turn_components(pr, answer, history, self, max_turns, info=info)
        if len(self._turns) >= 65536:
            self._turns.clear()
        self._turns[(key, info)] = comps
        return comps

    def score(self, guess: str, answer: str) -> int:
        """``score`` through the matrix when both words are in the lists."""
        ai = self.words.answer_index.get(answer)
        gi = self.words.allowed_index.get(guess)
        if ai is None or gi is None:
            return score(guess, answer)
        return int(self.matrix[gi, ai])

    def bits(self, guess: str, cands: np.ndarray) -> float:
        pats = self.matrix[self.words.allowed_index[guess], cands]
        n = np.bincount(pats, minlength=self.n_patterns)
        n = n[n > 0]
        return float(math.log2(len(cands)) - (n * np.log2(n)).sum() / len(cands))

    def best_bits(self, cands: np.ndarray) -> float:
        s = len(cands)
        if s <= 1:
            return 0.0
        key = cands.tobytes()
        hit = self._best.get(key)
        if hit is not None:
            return hit
        top = math.log2(s)
        own = entropies(
            self.matrix, self.by_answer, cands, self.words.answer_to_allowed[cands], self.n_patterns
        )
        best = float(own.max())
        if best < top - 1e-9:
            best = float(entropies(self.matrix, self.by_answer, cands, None, self.n_patterns).max())
        if len(self._best) >= self._memo_size:
            self._best.clear()
        self._best[key] = best
        return best


@lru_cache(maxsize=1)
def default_context() -> RewardContext:
    """The context of the canonical lists, built on first use (not at import)."""
    return RewardContext()


def as_history(history) -> list[tuple[str, int]]:
    """Normalise a history column: ``[[guess, pattern], ...]`` with int or ``GYX..`` patterns, or
    dicts."""
    out = []
    for item in history or []:
        if isinstance(item, dict):
            g, p = item["guess"], item["pattern"]
        else:
            g, p = item[0], item[1]
        out.append((str(g).lower(), str_to_pattern(p) if isinstance(p, str) else int(p)))
    return out


def completion_text(completion) -> str:
    if isinstance(completion, str):
        return completion
    if isinstance(completion, list) and completion and isinstance(completion[-1], dict):
        return str(completion[-1].get("content", ""))
    if isinstance(completion, dict):
        return str(completion.get("content", ""))
    return "" if completion is None else str(completion)


# --------------------------------------------------------------------------- one turn
def turn_components(
    pr: ParseResult,
    answer: str,
    history: list[tuple[str, int]],
    ctx: RewardContext,
    max_turns: int = 6,
    cands: np.ndarray | None = None,
    info: bool = True,
) -> dict[str, float]:
    """Every component for one parsed move in the state ``history`` (``cands``: candidates before
    it).

    ``info=False`` skips the information-gain component (left at 0), the only costly one."""
    ok = pr.ok
    guess = pr.guess
    length = ctx.words.length
    out = dict.fromkeys(COMPONENTS, 0.0)
    out["format"] = 1.0 if pr.format_ok else 0.0
    out["repetition"] = -1.0 if pr.error == "repeated_guess" else 0.0
    out["invalid"] = 0.0 if ok else -1.0
    if not ok:
        return out
    out["valid"] = 1.0
    turn = len(history) + 1
    if guess == answer:
        out["win"] = 1.0 + (
            EARLY_BONUS * (max_turns - turn) / (max_turns - 1) if max_turns > 1 else 0.0
        )
    tiles = pattern_to_tiles(ctx.score(guess, answer), length)
    out["partial"] = (2 * tiles.count(GREEN) + tiles.count(YELLOW)) / (2 * length)
    if history:
        match = total = 0
        for g, p in history:
            want = pattern_to_tiles(p, len(g))
            got = score_tiles(g, guess)
            match += len(g) if want == got else sum(a == b for a, b in zip(want, got))
            total += len(g)
        out["consistency"] = match / total
    else:
        out["consistency"] = 1.0
    if not info:
        return out
    cands = ctx.candidates(history) if cands is None else cands
    if len(cands) <= 1:
        out["info_gain"] = 1.0 if len(cands) == 1 and ctx.words.answers[cands[0]] == guess else 0.0
    else:
        best = ctx.best_bits(cands)
        out["info_gain"] = min(1.0, ctx.bits(guess, cands) / best) if best > 0 else 0.0
    return out


# --------------------------------------------------------------------------- weights
@dataclass(frozen=True)
class RewardWeights:
    """Weights per component. Validated so that shaping can never beat winning, nor a refused move a
    legal one."""

    win: float = 1.0
    format: float = 0.1
    valid: float = 0.1
    partial: float = 0.1
    repetition: float = 0.1
    consistency: float = 0.15
    info_gain: float = 0.15
    invalid: float = 0.15

    def __post_init__(self) -> None:
        for f in fields(self):
            v = getattr(self, f.name)
            if not (isinstance(v, int | float) and math.isfinite(v) and v >= 0):
                raise ValueError(
                    f"reward weight {f.name!r} must be a finite number >= 0, got {v!r}"
                )
        span = sum(
            getattr(self, c) * (RANGES[c][1] - RANGES[c][0]) for c in COMPONENTS if c != "win"
        )
        if self.win <= 0 and span > 0:
            raise ValueError("reward weight 'win' must be > 0")
        if span > 0 and span >= self.win:  # a win pays at least 1.0 x win
            raise ValueError(
                f"shaping weights span {span:.3f} >= win weight {self.win}: a lost game could "
                "out-score a won one; lower the shaping weights or raise 'win'"
            )
        if self.format > 0 and self.valid + self.invalid <= self.format:
            raise ValueError(
                "valid + invalid weights must exceed the format weight, or a well-formed refused "
                "move could out-score a legal one"
            )

    def as_dict(self) -> dict[str, float]:
        return asdict(self)

    def as_list(self) -> list[float]:
        """In the order of :data:`REWARD_FUNCS` (for ``GRPOConfig.reward_weights``)."""
        return [getattr(self, c) for c in COMPONENTS]

    @classmethod
    def from_any(cls, value: RewardWeights | str | dict) -> RewardWeights:
        if isinstance(value, RewardWeights):
            return value
        if isinstance(value, str):
            if value not in PRESETS:
                raise ValueError(
                    f"unknown reward preset {value!r}; choose one of {sorted(PRESETS)}"
                )
            return PRESETS[value]
        unknown = set(value) - set(COMPONENTS)
        if unknown:
            raise ValueError(
                f"unknown reward component(s) {sorted(unknown)}; known: {list(COMPONENTS)}"
            )
        return cls(**value)


PRESETS = {
    "default": RewardWeights(),
    "format": RewardWeights(
        format=0.3,
        valid=0.2,
        invalid=0.2,
        partial=0.05,
        repetition=0.1,
        consistency=0.05,
        info_gain=0.05,
    ),
    "strategy": RewardWeights(
        format=0.05,
        valid=0.05,
        invalid=0.1,
        partial=0.05,
        repetition=0.1,
        consistency=0.25,
        info_gain=0.3,
    ),
    "win_only": RewardWeights(
        format=0, valid=0, partial=0, repetition=0, consistency=0, info_gain=0, invalid=0
    ),
}


def combine(components: dict[str, float], weights: RewardWeights) -> float:
    """Weighted sum of the components."""
    return float(sum(w * components.get(c, 0.0) for c, w in zip(COMPONENTS, weights.as_list())))


def episode_components(turns: list[dict[str, float]]) -> dict[str, float]:
    """Per-game components: ``win`` from the final turn, every other component averaged over
    turns."""
    if not turns:
        return dict.fromkeys(COMPONENTS, 0.0)
    out = {c: sum(t[c] for t in turns) / len(turns) for c in COMPONENTS}
    out["win"] = float(turns[-1]["win"])
    return out


def game_return(won: bool, turns: int, max_turns: int = 6) -> float:
    """One number per game that orders outcomes strictly: a win in ``turns`` turns (refused moves
    count, as they cost a turn in the game) scores ``max_turns + 1 - turns``, a loss 0, so every
    win beats every loss, and a win in k turns beats every win in k + 1.

    >>> [game_return(True, k) for k in (1, 3, 6)], game_return(False, 6)
    ([6.0, 4.0, 1.0], 0.0)
    """
    if not 1 <= turns <= max_turns:
        raise ValueError(f"turns must be 1-{max_turns}, got {turns}")
    return float(max_turns + 1 - turns if won else 0)


def move_fits(guess: str | None, history, words: WordList, played: float = 0.0) -> float:
    """1.0 when ``guess`` is a public answer word that fits every feedback in ``history`` (it could
    still be the answer); ``played`` for any other word the game plays (an allowed word the feedback
    rules out, or one outside the answer list: it costs a turn but earns feedback); 0.0 for a
    refused move (``None``, or no allowed word). Fitting is found by re-scoring. It does not depend
    on which answer the game has, so every word that could still be the answer earns the same.

    >>> words = load_word_lists()
    >>> history = [["crane", "XXGXG"]]
    >>> [move_fits(g, history, words) for g in ("shake", "shame", "snake", "ahake", None)]
    [1.0, 1.0, 0.0, 0.0, 0.0]
    >>> [move_fits(g, history, words, played=0.5) for g in ("shake", "snake", "ahake", None)]
    [1.0, 0.5, 0.0, 0.0]
    """
    if guess is None or not words.is_allowed(guess):
        return 0.0
    if guess in words.answer_index and consistent_with(as_history(history), guess):
        return 1.0
    return played
