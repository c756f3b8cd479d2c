"""Recall games: teaching the public answer list as words to write.

    wordle-rl data sft --recall-share 0.2

A recall game teaches an answer word W as a move: its guesses are a teacher's on W's feedback, and
it stops right after the teacher writes W, before W's own feedback. Its target, which only that
unseen feedback would reveal, is never a val or test answer: an allowed word outside the answer
list (or, with a stand-in list, a train answer) that gives every earlier guess W's feedback. The
candidate solver's recall games stop where W is the only answer word that fits; a teacher mix's
stop where that teacher writes W, the path it takes on W. A word that no other word stands in for
on that path has no game; :func:`reach_ranking` moves such words up a ranked teacher's ranking so
that it writes them sooner, while one still does.
"""

from __future__ import annotations

import random

import numpy as np

from wordle_rl.data.files import DataError
from wordle_rl.data.traces import outside_words, rationale, strong_openers
from wordle_rl.engine.game import pattern_to_str, score, score_pairs
from wordle_rl.engine.solvers import CandidateSolver, EntropySolver
from wordle_rl.engine.words import WordList, encode_words
from wordle_rl.environment.prompts import PromptStyle, render_conversation

__all__ = ["reach_ranking", "recall_games"]


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


def _neighbour_game(word, words, entropy, candidate, openers, near, rng, max_turns):
    """The candidate solver's game on an outside word one or two letters from ``word``, from a
    strong opener or its own, cut where it writes ``word`` as the only answer word that fits:
    ``(history, target)``, the target None where ``word`` was ruled out first."""
    index = words.answer_index[word]
    target = rng.choice(near)
    history, found = [], False
    for turn in range(max_turns):
        if history:
            fits = entropy.candidates(history)
            if index not in fits:
                return history, None
            found = len(fits) == 1
        if found:
            guess = word
        elif turn == 0:
            guess = rng.choice(openers) if rng.random() < 0.5 else candidate.guess([], rng)
        else:
            guess = candidate.guess(history, rng)
        history.append((guess, score(guess, target)))
        if found:
            return history, target
    return history, None


def _shared_start(path, word, pool, pool_codes) -> tuple[int, np.ndarray]:
    """How many of ``path``'s first guesses a word of ``pool`` other than ``word`` answers with the
    path's own feedback, and which words of ``pool`` answer that many so (a mask)."""
    fits = np.ones(len(pool), dtype=bool)
    for k, (guess, pattern) in enumerate(path):
        narrowed = fits & (score_pairs(encode_words([guess]), pool_codes) == pattern)
        if not any(pool[j] != word for j in np.flatnonzero(narrowed)):
            return k, fits
        fits = narrowed
    return len(path), fits


def _teacher_path(word, teachers, rng, max_turns, pool, pool_codes):
    """The path a teacher drawn from ``teachers`` takes on ``word``, up to where it writes it, and a
    stand-in target from ``pool`` that gives the same feedback to every guess before ``word``:
    ``(history, target)``, scored against the target; the target None where the teacher needs more
    than ``max_turns`` guesses or no stand-in fits. ``word`` itself stands in only where no other
    word does (a word of ``pool``, so a train answer)."""
    teacher = rng.choices(list(teachers), list(teachers.values()))[0]
    history: list = []
    for _ in range(max_turns):
        guess = teacher.guess(history, rng)
        history.append((guess, score(guess, word)))
        if guess == word:
            break
    else:
        return history, None
    cut, fits = _shared_start(history[:-1], word, pool, pool_codes)
    sharing = np.flatnonzero(fits).tolist()
    found = [j for j in sharing if pool[j] != word] if cut == len(history) - 1 else []
    if found:
        target = pool[rng.choice(found)]
    elif any(pool[j] == word for j in sharing):
        target = word
    else:
        return history, None
    return [(g, score(g, target)) for g, _ in history], target


def _unreached(teacher, words: WordList, targets, pool, pool_codes, max_turns: int) -> dict:
    """The words of ``targets`` whose path by ``teacher`` can be no recall game, each with the
    teacher's move at the longest start of that path that a word of ``pool`` shares (None where
    not even the first guess is shared)."""
    in_pool, left = set(pool), {}
    for word in targets:
        path: list = []
        while len(path) < max_turns and (not path or path[-1][0] != word):
            guess = teacher.guess(path)
            path.append((guess, score(guess, word)))
        reached = path[-1][0] == word
        before = path[:-1] if reached else path
        cut, _ = _shared_start(before, word, pool, pool_codes)
        if not (reached and (cut == len(before) or word in in_pool)):
            left[word] = path[min(cut, max_turns - 1)][0] if cut else None
    return left


def reach_ranking(teacher, words: WordList, targets, pool, max_turns: int = 6, rounds: int = 12):
    """Rerank a ranked ``teacher`` (in place) so that its path on more words of ``targets`` can be
    a recall game, and return the words whose path still cannot.

    A path can be one when the teacher writes W within ``max_turns`` guesses and a word of ``pool``
    other than W gives every earlier guess W's feedback (a train answer W in ``pool`` stands in for
    itself). Each of ``rounds`` rounds moves every word that fails just above the teacher's move at
    the longest start of its path that a word of ``pool`` shares, so that the teacher writes W
    there, while W still has a stand-in; a move changes other words' paths, hence the rounds. Every
    guess is still the best-ranked answer word that fits, so the teacher stays a candidate solver.
    """
    pool_codes = encode_words(pool)
    for _ in range(rounds):
        left = _unreached(teacher, words, targets, pool, pool_codes, max_turns)
        rank = teacher.rank.astype(float)
        for word, above in left.items():
            if above is not None:
                rank[words.answer_index[word]] = rank[words.answer_index[above]] - 0.5
        teacher.rank = np.argsort(np.argsort(rank))
    return list(_unreached(teacher, words, targets, pool, pool_codes, max_turns))


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
    stand_ins: list[str] | None = None,
) -> list[dict]:
    """``n`` recall games: each plays an allowed word T outside the answer list (never a val or test
    answer) that is one or two letters away from an answer word W, with the candidate solver (from a
    strong opener or its own), and ends right after the solver writes W in the state where W is the
    only answer word that fits the feedback.

    With ``teachers`` (``{solver: weight}``, the other games' mix) a game's teacher is drawn from
    them instead and plays W from its own opener, ending where it writes W: the path that teacher
    takes on W. T is then any word of ``stand_ins`` (default: the allowed words outside the answer
    list; never a val or test answer, and an answer word among them is taken for a train answer)
    that gives each earlier guess W's feedback, W itself only where it is the one such word.

    The words W are the whole public answer list (or only the answer words in ``recalled``: the
    strict protocol passes the train split) in an order shuffled with ``seed``, taken in turn, every
    word alike; a word is passed over when ``tries`` games all fail to reach it with a target T.
    The state is the one where free play loses held-out answers: the other games, all on train
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
    keep = set(recalled) if recalled is not None else None
    if teachers:
        order = [w for w in words.answers if keep is None or w in keep]
        pool = list(stand_ins) if stand_ins is not None else outside_words(words, "recall_share")
        pool_codes = encode_words(pool)
    else:
        candidate = CandidateSolver(words)
        openers = openers or strong_openers(entropy, 12)
        near = _outside_neighbours(words)
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
        k += 1
        for attempt in range(tries):
            rng = random.Random(f"recall:{seed}:{k}:{attempt}")
            if teachers:
                history, target = _teacher_path(word, teachers, rng, max_turns, pool, pool_codes)
            else:
                history, target = _neighbour_game(
                    word, words, entropy, candidate, openers, near[word], rng, max_turns
                )
            if target is not None:
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
                "split": "outside" if not words.is_answer(target) else "train",
                "solver": "recall",
                "recall": word,
                "start": "solver",
                "random_second": False,
                "refused_at": None,
                "refused_kind": None,
                "turns": len(history),
                "won": target == word,
                "history": [[g, pattern_to_str(p, words.length)] for g, p in history],
            }
        )
    return rows
