import json
import random

import numpy as np
import pytest

from wordle_rl.engine.entropy import entropies
from wordle_rl.engine.game import consistent_with, hard_mode_violation, play_game
from wordle_rl.engine.matrix import cache_dir
from wordle_rl.engine.solvers import (
    EntropySolver,
    RandomSolver,
    RankedSolver,
    SearchSolver,
    make_solver,
)
from wordle_rl.engine.words import WordList


@pytest.fixture(scope="module")
def small_words(words):
    rng = random.Random(1)
    answers = sorted(rng.sample(words.answers, 120))
    extra = rng.sample([w for w in words.allowed if w not in words.answer_index], 1500)
    return WordList(
        answers=tuple(answers), allowed=tuple(sorted(set(answers) | set(extra))), name="small"
    )


def _reference_bits(column):
    _, n = np.unique(column, return_counts=True)
    p = n / n.sum()
    return -(p * np.log2(p)).sum()


def test_entropies_match_definition():
    m = np.array([[0, 0, 1, 2], [1, 2, 2, 2]], dtype=np.uint8)  # 2 guesses x 4 answers
    h = entropies(m, np.ascontiguousarray(m.T), np.arange(4), n_patterns=3)
    assert h[0] == pytest.approx(1.5)  # patterns 0,0,1,2 -> 1/2,1/4,1/4
    assert h[1] == pytest.approx(-(0.25 * np.log2(0.25) + 0.75 * np.log2(0.75)))
    # 30 guesses x 500 answers
    big = np.random.default_rng(0).integers(0, 243, size=(30, 500)).astype(np.uint8)
    by_answer = np.ascontiguousarray(big.T)
    # small kernel, large kernel, trivial
    for cands in (
        np.arange(20),
        np.arange(0, 500, 3),
        np.array([7]),
    ):
        ref = [_reference_bits(big[g, cands]) for g in range(30)]
        assert entropies(big, by_answer, cands) == pytest.approx(ref)
        sub = np.array([3, 1, 29])
        assert entropies(big, by_answer, cands, sub) == pytest.approx([ref[i] for i in sub])


def test_entropy_solver_wins_and_is_deterministic(words, matrix):
    s = EntropySolver(words, matrix=matrix)
    assert s.opener() in words.allowed_index
    # the opener is the argmax of expected information over all allowed guesses
    h = s.scores(np.arange(len(words.answers)))
    assert h[words.allowed_index[s.opener()]] == pytest.approx(h.max())
    games = [play_game(s, a) for a in words.answers[::20]]
    assert all(g.won for g in games)
    assert np.mean([g.turns for g in games]) < 3.7
    again = [play_game(EntropySolver(words, matrix=matrix), a) for a in words.answers[::20]]
    assert [g.guesses for g in games] == [g.guesses for g in again]


def test_random_solver_is_seeded_and_plays_candidates(words, matrix):
    a = [
        play_game(RandomSolver(words, matrix=matrix, seed=3), w).guesses for w in words.answers[:40]
    ]
    b = [
        play_game(RandomSolver(words, matrix=matrix, seed=3), w).guesses for w in words.answers[:40]
    ]
    assert a == b
    s = RandomSolver(words, matrix=matrix, seed=3)
    rec = play_game(s, "speed")
    hist = []
    for g, p in zip(rec.guesses, rec.patterns):
        assert consistent_with(hist, g)
        hist.append((g, p))


def test_search_beats_or_ties_greedy_and_caches_opener(small_words):
    ent = EntropySolver(small_words)
    srch = SearchSolver(small_words, width=4, opener_width=6)
    e = [play_game(ent, a) for a in small_words.answers]
    s = [play_game(srch, a) for a in small_words.answers]
    assert all(g.won for g in s)
    assert np.mean([g.turns for g in s]) <= np.mean([g.turns for g in e]) + 1e-9
    table = json.loads((cache_dir() / f"openers-{small_words.digest[:20]}.json").read_text())
    assert srch.opener() in table.values()
    assert SearchSolver(small_words, width=4, opener_width=6).opener() == srch.opener()


@pytest.mark.parametrize("name", ["random", "entropy", "search", "ranked"])
def test_hard_mode_guesses_are_legal(small_words, name):
    extra = {"width": 3, "opener_width": 4} if name == "search" else {}
    s = make_solver(name, small_words, hard=True, seed=0, **extra)
    for a in small_words.answers[:40]:
        rec = play_game(s, a)
        hist = []
        for g, p in zip(rec.guesses, rec.patterns):
            assert hard_mode_violation(hist, g) is None
            hist.append((g, p))


def test_unknown_solver_and_impossible_history(words, matrix):
    with pytest.raises(ValueError, match="unknown solver"):
        make_solver("oracle", words)
    with pytest.raises(ValueError, match="no answer"):
        EntropySolver(words, matrix=matrix).guess([("crane", 242), ("slate", 242)])


def test_candidate_solver_only_guesses_words_that_fit_the_feedback(words, matrix):
    s = make_solver("candidate", words, matrix=matrix)
    assert s.opener() in words.answer_index  # even the opener could be the answer
    games = [play_game(s, a) for a in words.answers[::5]]
    for g in games:
        hist = list(zip(g.guesses, g.patterns))
        for k in range(1, len(hist)):
            assert hist[k][0] in words.answer_index and consistent_with(hist[:k], hist[k][0])
    assert np.mean([g.won for g in games]) >= 0.99
    # the best-informed candidate: no remaining candidate splits the rest better
    hist = [(games[0].guesses[0], games[0].patterns[0])]
    cands = s.candidates(hist)
    h = s.scores(cands, words.answer_to_allowed[cands])
    assert h[
        list(words.answer_to_allowed[cands]).index(words.allowed_index[s.guess(hist)])
    ] == pytest.approx(h.max())


def test_ranked_solver_plays_the_best_ranked_word_that_fits(words, matrix):
    ranking = random.Random(3).sample(words.answers, 1500)  # the rest follow in list order
    s = make_solver("ranked", words, matrix=matrix, ranking=ranking)
    rank = {
        w: ranking.index(w) if w in ranking else 10_000 + words.answer_index[w]
        for w in words.answers
    }
    assert s.guess([]) == make_solver("candidate", words, matrix=matrix).opener()
    games = [play_game(s, a) for a in words.answers[::20]]
    for g in games:
        hist = list(zip(g.guesses, g.patterns))
        for k in range(1, len(hist)):
            fits = [w for w in words.answers if consistent_with(hist[:k], w)]
            assert hist[k][0] == min(fits, key=rank.__getitem__)
    assert np.mean([g.won for g in games]) >= 0.97
    # no ranking: the answer list's order
    first = RankedSolver(words, matrix=matrix)
    hist = hist[:1]
    assert first.guess(hist) == next(w for w in words.answers if consistent_with(hist, w))
    with pytest.raises(ValueError, match="'zzzzz', which is no answer word"):
        RankedSolver(words, matrix=matrix, ranking=["crane", "zzzzz"])
