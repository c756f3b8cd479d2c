"""Recall games and word-pattern exercises: teaching the public answer list as words to write.

    wordle-rl data sft --recall-share 0.2 [--lexicon-share 0.25]

A recall game plays an allowed word outside the answer list (never a val or test answer) next to an
answer word W and stops right after the candidate solver writes W, at the moment W is the only
answer word that fits: the state in which free play must produce a word it was never shown as a
winning target. A word-pattern exercise is no game: it asks for any answer word with some letters in
place and has no target.
"""

from __future__ import annotations

import random

import numpy as np

from wordle_rl.data import DataError
from wordle_rl.game import pattern_to_str, score
from wordle_rl.prompts import (
    PromptStyle,
    render_conversation,
    render_exercise,
)
from wordle_rl.solvers import CandidateSolver, EntropySolver
from wordle_rl.traces import outside_words, rationale, strong_openers
from wordle_rl.words import WordList, encode_words, pattern_mask

__all__ = ["recall_games", "lexicon_exercises"]


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
) -> list[dict]:
    """``n`` recall games: each plays an allowed word T outside the answer list (never a val or test
    answer) that is one or two letters away from an answer word W, with the candidate solver (from a
    strong opener or its own), and ends right after the solver writes W in the state where W is the
    only answer word that fits the feedback.

    The words W are the whole public answer list (or only the answer words in ``recalled``: the
    strict protocol passes the train split) in an order shuffled with ``seed``, taken in turn, every
    word alike; a word is passed over when ``tries`` games all rule it out before it is the only
    fit. The state is the one where free play loses held-out answers: the other games, all on train
    answers, never reach a state where a held-out word is the only answer that fits.

    >>> from wordle_rl.words import load_word_lists
    >>> rows = recall_games(load_word_lists(), 2, PromptStyle("tiles", think=False))
    >>> [(r["split"], r["won"], r["history"][-1][0] == r["recall"], r["answer"] != r["recall"])
    ...  for r in rows]
    [('outside', False, True, True), ('outside', False, True, True)]
    """
    if n == 0:
        return []
    entropy = entropy or EntropySolver(words)
    teacher = CandidateSolver(words)
    openers = openers or strong_openers(entropy, 12)
    near = _outside_neighbours(words)
    keep = set(recalled) if recalled is not None else None
    order = [w for w in words.answers if w in near and (keep is None or w in keep)]
    if not order:
        raise DataError(
            "recall_share needs allowed words outside the answer list one or two letters from an "
            "answer word; these lists have none"
        )
    random.Random(seed).shuffle(order)
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
            history, found = [], False
            for turn in range(max_turns):
                if turn == 0:
                    guess = rng.choice(openers) if rng.random() < 0.5 else teacher.guess([], rng)
                else:
                    fits = entropy.candidates(history)
                    if index not in fits:
                        break
                    found = len(fits) == 1
                    guess = word if found else teacher.guess(history, rng)
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


def lexicon_exercises(words: WordList, n: int, style: PromptStyle, seed: int = 0) -> list[dict]:
    """``n`` word-pattern exercises: a word drawn from the whole answer list shows 2-4 of its
    letters in place (2 to all but one), and the answer is a random answer word with those letters
    (the drawn word or another one).

    The split plays no part: every public answer word is drawn and answered alike, and no exercise
    is a game.

    >>> from wordle_rl.words import load_word_lists
    >>> rows = lexicon_exercises(load_word_lists(), 3, PromptStyle("tiles", think=False))
    >>> all(all(p in "_" + w[i] for i, p in enumerate(r["lexicon"]["pattern"]))
    ...     for r in rows for w in [r["lexicon"]["word"]])
    True
    """
    rng = random.Random(f"lexicon:{seed}")
    codes = encode_words(words.answers)
    rows = []
    for _ in range(n):
        drawn = words.answers[rng.randrange(len(words.answers))]
        shown = set(
            rng.sample(
                range(words.length), rng.choice(range(min(2, words.length - 1), words.length))
            )
        )
        pattern = "".join(c if j in shown else "_" for j, c in enumerate(drawn))
        fits = np.flatnonzero(pattern_mask(codes, pattern))
        word = words.answers[int(fits[rng.randrange(len(fits))])]
        rows.append(
            {
                "messages": render_exercise(style, pattern, word),
                "lexicon": {"pattern": pattern, "word": word},
                "history": [],
                "refused_at": None,
            }
        )
    return rows
