"""Recall games: teaching the public answer list as words to write.

    wordle-rl data sft --recall-share 0.2

A recall game plays an allowed word outside the answer list (never a val or test answer) next to an
answer word W and stops right after the candidate solver writes W, at the moment W is the only
answer word that fits: the state in which free play must produce a word it was never shown as a
winning target.
"""

from __future__ import annotations

import random

import numpy as np

from wordle_rl.data.files import DataError
from wordle_rl.data.traces import outside_words, rationale, strong_openers
from wordle_rl.engine.game import pattern_to_str, score
from wordle_rl.engine.solvers import CandidateSolver, EntropySolver
from wordle_rl.engine.words import WordList, encode_words
from wordle_rl.environment.prompts import PromptStyle, render_conversation

__all__ = ["recall_games"]


def _outside_neighbours(words: WordList) -> dict[str, list[str]]:
    """For each answer word, the allowed words outside the answer list one letter away (else two;
    else none)."""
    outside = outside_words(words, "recall_share")
    codes = encode_words(outside)
    out = {}
    for word, code in zip(words.answers, encode_words(words.answers)):
        apart = (codes != code).sum(axis=1)
        for k in (1, 2):
            near = np.flatnonzero(apart == k)
            if len(near):
                out[word] = [outside[int(j)] for j in near]
                break
    return out


def recall_games(
    words: WordList,
    n: int,
    style: PromptStyle,
    seed: int = 0,
    entropy: EntropySolver | None = None,
    openers: list[str] | None = None,
    max_turns: int = 6,
    tries: int = 20,
    recalled: list[str] | None = None,
    teachers: dict | None = None,
) -> list[dict]:
    """``n`` recall games: each plays an allowed word T outside the answer list (never a val or test
    answer) that is one or two letters away from an answer word W, with the candidate solver (from a
    strong opener or its own), and ends right after the solver writes W in the state where W is the
    only answer word that fits the feedback.

    With ``teachers`` (``{solver: weight}``, the other games' mix) a game's teacher is drawn from
    them instead and plays from its own opener, ending where it writes W: while W fits, T's
    feedback is W's, so the game is the path that teacher takes on W.

    The words W are the whole public answer list (or only the answer words in ``recalled``: the
    strict protocol passes the train split) in an order shuffled with ``seed``, taken in turn, every
    word alike; a word is passed over when ``tries`` games all rule it out before it is the only
    fit. The state is the one where free play loses held-out answers: the other games, all on train
    answers, never reach a state where a held-out word is the only answer that fits.

    >>> from wordle_rl.engine.words import load_word_lists
    >>> rows = recall_games(load_word_lists(), 2, PromptStyle("tiles", think=False))
    >>> [(r["split"], r["won"], r["history"][-1][0] == r["recall"], r["answer"] != r["recall"])
    ...  for r in rows]
    [('outside', False, True, True), ('outside', False, True, True)]
    """
    if n == 0:
        return []
    entropy = entropy or EntropySolver(words)
    candidate = CandidateSolver(words)
    openers = openers or strong_openers(entropy, 12)
    near = _outside_neighbours(words)
    keep = set(recalled) if recalled is not None else None
    order = [w for w in words.answers if w in near and (keep is None or w in keep)]
    if not order:
        raise DataError(
            "recall_share needs allowed words outside the answer list one or two letters from an "
            "answer word; these lists have none"
        )
    # a stream of its own: the splits shuffle the same list with the same seed, and would set
    # every train word first
    random.Random(f"recall-order:{seed}").shuffle(order)
    rows: list[dict] = []
    k = last_found = 0
    while len(rows) < n:
        if k - last_found >= len(order):
            raise DataError(
                f"recall games: no answer word became the only fit within {max_turns} turns in "
                f"{tries} tries each over a whole pass of the {len(order)} words; raise max_turns"
            )
        word = order[k % len(order)]
        index = words.answer_index[word]
        k += 1
        for attempt in range(tries):
            rng = random.Random(f"recall:{seed}:{k}:{attempt}")
            target = rng.choice(near[word])
            teacher = candidate
            if teachers:
                teacher = rng.choices(list(teachers), list(teachers.values()))[0]
            history, found = [], False
            for turn in range(max_turns):
                if history:
                    fits = entropy.candidates(history)
                    if index not in fits:
                        break
                    found = len(fits) == 1
                if found:
                    guess = word
                elif turn == 0 and not teachers:
                    guess = rng.choice(openers) if rng.random() < 0.5 else teacher.guess([], rng)
                else:
                    guess = teacher.guess(history, rng)
                found = found or (bool(teachers) and guess == word)
                history.append((guess, score(guess, target)))
                if found:
                    break
            if found:
                break
        else:
            continue
        last_found = k
        thinks = (
            [rationale(entropy, history[:t], g) for t, (g, _) in enumerate(history)]
            if style.uses_think
            else None
        )
        rows.append(
            {
                "messages": render_conversation(style, history, thinks=thinks)[
                    :-1
                ],  # ends on W, before its feedback
                "answer": target,
                "split": "outside",
                "solver": "recall",
                "recall": word,
                "start": "solver",
                "random_second": False,
                "refused_at": None,
                "refused_kind": None,
                "turns": len(history),
                "won": False,
                "history": [[g, pattern_to_str(p, words.length)] for g, p in history],
            }
        )
    return rows
