"""Pieces every solver trace shares: true rationales, strong openers, and targets outside the answer
list.

Every ``<think>`` rationale is built from the real game state and states only checkable facts: what
the feedback proves (:class:`wordle_rl.environment.prompts.Knowledge`), how many answers remain
(re-scored), and why the guess was chosen (how many groups it splits them into and its expected
bits).
"""

from __future__ import annotations

import random

import numpy as np

from wordle_rl.data.files import DataError, check_share
from wordle_rl.engine.entropy import entropies
from wordle_rl.engine.game import score
from wordle_rl.engine.solvers import CandidateSolver, EntropySolver
from wordle_rl.engine.words import WordList
from wordle_rl.environment.prompts import (
    Knowledge,
)

__all__ = [
    "rationale",
    "strong_openers",
    "play_traced",
    "wide_solver",
    "outside_words",
    "outside_targets",
]


# --------------------------------------------------------------------------- rationales
def rationale(
    solver: EntropySolver, history: list[tuple[str, int]], guess: str, reason: str = "solver"
) -> str:
    """A short, true explanation of ``guess`` in the state ``history``.

    Facts: what the feedback proves, how many answers remain (listed when at most 3), and how the
    guess splits them (groups and expected bits). ``reason="explore"`` marks a deliberately
    exploratory guess.
    """
    words = solver.words
    cands = solver.candidates(history)
    n = len(cands)
    parts = []
    known = Knowledge.from_history(history, words.length).describe()
    parts.extend(known if known else ["No feedback yet."])
    names = sorted(words.answers[i] for i in cands) if n <= 3 else []
    parts.append(
        f"Possible answers: {n}" + (f" ({', '.join(w.upper() for w in names)})." if n <= 3 else ".")
    )
    gi = words.allowed_index[guess]
    ai = words.answer_index.get(guess)
    is_candidate = ai is not None and bool(np.any(cands == ai))
    groups = len(np.unique(solver.matrix[gi, cands]))
    bits = float(entropies(solver.matrix, solver.by_answer, cands, np.array([gi]))[0])
    if reason == "explore":
        parts.append(f"Exploring with {guess.upper()}: {groups} groups ({bits:.2f} bits).")
    elif n == 1:
        parts.append(f"Only {guess.upper()} fits.")
    elif is_candidate:
        parts.append(
            f"{guess.upper()} could be the answer and splits them into {groups} groups ({bits:.2f} "
            f"bits)."
        )
    else:
        parts.append(
            f"{guess.upper()} cannot be the answer but splits them into {groups} groups "
            f"({bits:.2f} bits)."
        )
    return " ".join(parts)


def strong_openers(solver: EntropySolver, k: int) -> list[str]:
    h = solver.scores(np.arange(len(solver.words.answers)))
    return [solver.words.allowed[i] for i in np.argsort(-h, kind="stable")[:k]]


def play_traced(answer: str, policy_turns, rng: random.Random, max_turns: int):
    """Play ``answer``: ``policy_turns(history, rng) -> (guess, reason, solver)`` each turn."""
    history, reasons = [], []
    for _ in range(max_turns):
        guess, reason, solver = policy_turns(history, rng)
        reasons.append((reason, rationale(solver, history, guess, reason)))
        history.append((guess, score(guess, answer)))
        if guess == answer:
            break
    return history, reasons


def wide_solver(words: WordList) -> CandidateSolver:
    """The candidate solver over a pool where every allowed word is a possible answer (for
    ``wide_share`` games)."""
    pool = WordList(
        answers=words.allowed,
        allowed=words.allowed,
        length=words.length,
        name=f"{words.name}+allowed-as-answers",
    )
    return CandidateSolver(pool)


def outside_words(words: WordList, why: str) -> list[str]:
    """The allowed words outside the answer list (never a val or test answer); ``why`` names who
    needs them."""
    outside = [w for w in words.allowed if not words.is_answer(w)]
    if not outside:
        raise DataError(f"{why} needs allowed words outside the answer list; these lists have none")
    return outside


def outside_targets(words: WordList, wide_share: float) -> tuple[list[str], CandidateSolver | None]:
    """For ``wide_share`` > 0: the allowed words outside the answer list and the solver that plays
    them."""
    check_share("wide_share", wide_share)
    if wide_share == 0:
        return [], None
    return outside_words(words, "wide_share"), wide_solver(words)
