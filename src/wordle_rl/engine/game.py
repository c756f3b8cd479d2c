"""The Wordle game engine: scoring, patterns, game state, hard mode.

Pure Python + numpy; this module never imports torch. Everything else in
wordle-rl (solvers, environment, rewards, data, training) builds on it.

Scoring uses the two-pass rule: greens first, then yellows limited by the
letters of the answer that are still unmatched, left to right.

    >>> pattern_to_str(score("speed", "abide"))
    'XXYXY'
    >>> pattern_to_str(score("lolly", "allow"))
    'YYGXX'

A pattern is an integer ``sum(tile_i * 3**i)`` with tile 0 = grey, 1 = yellow,
2 = green, so a 5-letter pattern lies in 0..242 and ``242`` is the win.
The guess x answer pattern matrix is :mod:`wordle_rl.engine.matrix`.

Try it: ``python -c "from wordle_rl.engine.game import *;
print(pattern_to_emoji(score('crane','react')))"``
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from wordle_rl.engine.matrix import pattern_dtype
from wordle_rl.engine.words import WordList, load_word_lists

__all__ = [
    "GREY",
    "YELLOW",
    "GREEN",
    "InvalidGuess",
    "Game",
    "GameRecord",
    "play_game",
    "score",
    "score_tiles",
    "score_pairs",
    "win_pattern",
    "pattern_to_str",
    "str_to_pattern",
    "pattern_to_tiles",
    "pattern_to_emoji",
    "pattern_to_ansi",
    "hard_mode_violation",
    "consistent_with",
    "candidate_indices",
]

GREY, YELLOW, GREEN = 0, 1, 2
_GREY_CHARS = set("X.-_B")
_TILE_CHAR = {GREY: "X", YELLOW: "Y", GREEN: "G"}
_TILE_EMOJI = {GREY: "\u2b1b", YELLOW: "\U0001f7e8", GREEN: "\U0001f7e9"}
_TILE_ANSI = {GREY: "\x1b[1;97;100m", YELLOW: "\x1b[1;30;43m", GREEN: "\x1b[1;97;42m"}
_ORDINALS = ["1st", "2nd", "3rd"] + [f"{i}th" for i in range(4, 33)]


# --------------------------------------------------------------------------- scoring
@lru_cache(maxsize=1 << 18)
def score_tiles(guess: str, answer: str) -> tuple[int, ...]:
    """Tiles (0 grey, 1 yellow, 2 green) of ``guess`` against ``answer``; both lowercase, same
    length.

    >>> score_tiles("eerie", "speed")
    (1, 1, 0, 0, 0)
    """
    if len(guess) != len(answer):
        raise ValueError(f"guess {guess!r} and answer {answer!r} differ in length")
    tiles = [GREY] * len(guess)
    unmatched: dict[str, int] = {}
    for i, (g, a) in enumerate(zip(guess, answer)):
        if g == a:
            tiles[i] = GREEN
        else:
            unmatched[a] = unmatched.get(a, 0) + 1
    for i, g in enumerate(guess):
        if tiles[i] != GREEN and unmatched.get(g, 0) > 0:
            tiles[i] = YELLOW
            unmatched[g] -= 1
    return tuple(tiles)


def tiles_to_pattern(tiles: tuple[int, ...] | list[int]) -> int:
    return sum(t * 3**i for i, t in enumerate(tiles))


def score(guess: str, answer: str) -> int:
    """Pattern integer of ``guess`` against ``answer``.

    >>> score("abide", "abide") == win_pattern(5)
    True
    """
    return tiles_to_pattern(score_tiles(guess, answer))


def win_pattern(length: int = 5) -> int:
    """The all-green pattern for words of ``length`` letters (242 for 5)."""
    return 3**length - 1


@lru_cache(maxsize=1 << 16)
def pattern_to_tiles(pattern: int, length: int = 5) -> tuple[int, ...]:
    if not 0 <= int(pattern) < 3**length:
        raise ValueError(f"pattern {pattern} out of range for length {length}")
    out, p = [], int(pattern)
    for _ in range(length):
        out.append(p % 3)
        p //= 3
    return tuple(out)


@lru_cache(maxsize=1 << 16)
def pattern_to_str(pattern: int, length: int = 5) -> str:
    """Readable form: ``G`` green, ``Y`` yellow, ``X`` grey.

    >>> pattern_to_str(str_to_pattern("GYXXG"))
    'GYXXG'
    """
    return "".join(_TILE_CHAR[t] for t in pattern_to_tiles(pattern, length))


def str_to_pattern(text: str) -> int:
    """Parse ``GYX..`` forms (``G``/``Y``; grey as ``X``, ``.``, ``-``, ``_`` or ``B``; spaces
    ignored)."""
    tiles = []
    for ch in text.replace(" ", "").upper():
        if ch == "G":
            tiles.append(GREEN)
        elif ch == "Y":
            tiles.append(YELLOW)
        elif ch in _GREY_CHARS:
            tiles.append(GREY)
        else:
            raise ValueError(
                f"bad tile {ch!r} in pattern {text!r}: use G, Y and X (or . - _ B for grey)"
            )
    if not tiles:
        raise ValueError("empty pattern")
    return tiles_to_pattern(tiles)


def pattern_to_emoji(pattern: int, length: int = 5) -> str:
    return "".join(_TILE_EMOJI[t] for t in pattern_to_tiles(pattern, length))


def pattern_to_ansi(guess: str, pattern: int) -> str:
    """The guess as coloured terminal tiles (ANSI escape codes)."""
    tiles = pattern_to_tiles(pattern, len(guess))
    return "".join(f"{_TILE_ANSI[t]} {c.upper()} \x1b[0m" for c, t in zip(guess, tiles))


# --------------------------------------------------------------------------- vectorised scoring
def score_pairs(guesses: np.ndarray, answers: np.ndarray) -> np.ndarray:
    """Vectorised ``score`` over pairs: encoded arrays ``(n, L)`` (see ``encode_words``) -> ``(n,)``
    patterns.

    Broadcasts like numpy, so ``(n, 1, L)`` against ``(1, m, L)`` gives an ``(n, m)`` block.
    """
    g = np.asarray(guesses)
    a = np.asarray(answers)
    length = g.shape[-1]
    green = g == a
    out = np.zeros(np.broadcast_shapes(g.shape, a.shape)[:-1], dtype=np.int64)
    for i in range(length):
        gi = g[..., i]
        avail = np.zeros_like(out)
        prior = np.zeros_like(out)
        for k in range(length):
            avail += (a[..., k] == gi) & ~green[..., k]
            if k < i:
                prior += (g[..., k] == gi) & ~green[..., k]
        yellow = ~green[..., i] & (avail > prior)
        out += (2 * green[..., i] + yellow) * 3**i
    return out.astype(pattern_dtype(length))


# --------------------------------------------------------------------------- rules
def hard_mode_violation(history: list[tuple[str, int]] | tuple, guess: str) -> str | None:
    """NYT hard-mode rule: greens stay in place, revealed letters are reused. Message or ``None``.

    >>> hard_mode_violation([("crane", str_to_pattern("XGXXY"))], "tough")
    '2nd letter must be R'
    >>> hard_mode_violation([("crane", str_to_pattern("XGXXY"))], "grout")
    'Guess must contain E'
    """
    for prev, pattern in history:
        tiles = pattern_to_tiles(pattern, len(prev))
        for i, (c, t) in enumerate(zip(prev, tiles)):
            if t == GREEN and guess[i] != c:
                return f"{_ORDINALS[i]} letter must be {c.upper()}"
        needed: dict[str, int] = {}
        for c, t in zip(prev, tiles):
            if t != GREY:
                needed[c] = needed.get(c, 0) + 1
        for c, n in needed.items():
            if guess.count(c) < n:
                return f"Guess must contain {c.upper()}" + (f" {n} times" if n > 1 else "")
    return None


def consistent_with(history: list[tuple[str, int]] | tuple, word: str) -> bool:
    """Could ``word`` be the answer given the feedback so far? (re-scoring, never letter sets)"""
    return all(score(g, word) == p for g, p in history)


class InvalidGuess(ValueError):
    """A guess the game refuses; ``code`` is machine-readable, the message is for people."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code


@dataclass
class Game:
    """One game: the secret, the history of (guess, pattern), remaining candidates by re-scoring.

    >>> g = Game(answer="abide")
    >>> pattern_to_str(g.guess("speed")), g.over
    ('XXYXY', False)
    >>> g.guess("abide") == win_pattern(), g.won, g.turns_used
    (True, True, 2)
    """

    answer: str
    words: WordList = field(default_factory=load_word_lists)
    max_turns: int = 6
    hard: bool = False
    history: list[tuple[str, int]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.answer = self.answer.strip().lower()
        if not self.words.is_answer(self.answer) and not self.words.is_allowed(self.answer):
            raise ValueError(f"answer {self.answer!r} is not in the word list")
        if self.max_turns < 1:
            raise ValueError(f"max_turns must be >= 1, got {self.max_turns}")

    @property
    def length(self) -> int:
        return self.words.length

    @property
    def turns_used(self) -> int:
        return len(self.history)

    @property
    def won(self) -> bool:
        return bool(self.history) and self.history[-1][0] == self.answer

    @property
    def over(self) -> bool:
        return self.won or self.turns_used >= self.max_turns

    @property
    def lost(self) -> bool:
        return self.over and not self.won

    def check(self, word: str, allow_repeat: bool = True) -> str:
        """Validate a guess without playing it; returns the normalised word or raises
        InvalidGuess."""
        if self.over:
            raise InvalidGuess("game_over", "the game is over")
        w = word.strip().lower()
        if not w:
            raise InvalidGuess("no_guess", "empty guess")
        if not (w.isascii() and w.isalpha()):
            raise InvalidGuess("not_alpha", f"{word.strip()!r} must contain letters a-z only")
        if len(w) != self.length:
            raise InvalidGuess(
                "wrong_length", f"{w!r} has {len(w)} letters; guesses have {self.length}"
            )
        if not self.words.is_allowed(w):
            raise InvalidGuess("not_in_word_list", f"{w!r} is not in the word list")
        if not allow_repeat and any(w == g for g, _ in self.history):
            raise InvalidGuess("repeated_guess", f"{w!r} was already guessed")
        if self.hard:
            msg = hard_mode_violation(self.history, w)
            if msg:
                raise InvalidGuess("hard_mode_violation", msg)
        return w

    def guess(self, word: str, allow_repeat: bool = True) -> int:
        """Play a guess; returns its pattern. Raises InvalidGuess (costing no turn) if it is
        refused."""
        w = self.check(word, allow_repeat=allow_repeat)
        p = score(w, self.answer)
        self.history.append((w, p))
        return p

    def candidates(self, matrix: np.ndarray | None = None) -> list[str]:
        """Answers still consistent with every (guess, pattern) so far, found by re-scoring."""
        idx = candidate_indices(self.words, self.history, matrix)
        return [self.words.answers[i] for i in idx]


def candidate_indices(words: WordList, history, matrix: np.ndarray | None = None) -> np.ndarray:
    """Indices into ``words.answers`` consistent with ``history``; uses the pattern matrix when
    given."""
    idx = np.arange(len(words.answers))
    for g, p in history:
        if matrix is not None and g in words.allowed_index:
            row = matrix[words.allowed_index[g]]
            idx = idx[row[idx] == p]
        else:
            idx = np.array([i for i in idx if score(g, words.answers[i]) == p], dtype=np.int64)
    return idx


@dataclass
class GameRecord:
    answer: str
    guesses: list[str]
    patterns: list[int]
    won: bool

    @property
    def turns(self) -> int:
        return len(self.guesses)


def play_game(
    policy,
    answer: str,
    max_turns: int = 6,
    rng: random.Random | None = None,
    words: WordList | None = None,
) -> GameRecord:
    """Let a solver policy play one game against ``answer``."""
    words = words or getattr(policy, "words", None) or load_word_lists()
    history: list[tuple[str, int]] = []
    for _ in range(max_turns):
        g = policy.guess(history, rng)
        p = score(g, answer)
        history.append((g, p))
        if g == answer:
            break
    return GameRecord(
        answer, [g for g, _ in history], [p for _, p in history], history[-1][0] == answer
    )
