import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from wordle_rl.engine.game import (
    Game,
    InvalidGuess,
    candidate_indices,
    consistent_with,
    hard_mode_violation,
    pattern_to_emoji,
    pattern_to_str,
    pattern_to_tiles,
    score,
    score_pairs,
    str_to_pattern,
    win_pattern,
)
from wordle_rl.engine.matrix import build_pattern_matrix, pattern_matrix
from wordle_rl.engine.words import encode_words, load_word_lists

CASES = [
    ("speed", "abide", "XXYXY"),
    ("eerie", "speed", "YYXXX"),
    ("speed", "eerie", "XXYYX"),
    ("lolly", "allow", "YYGXX"),
    ("allow", "lolly", "XYGYX"),
    ("abbey", "kebab", "YYGYX"),
    ("kebab", "abbey", "XYGYY"),
    ("geese", "those", "XXXGG"),
    ("mamma", "maxim", "GGYXX"),
    ("crane", "crane", "GGGGG"),
]
TRICKY = sorted({w for g, a, _ in CASES for w in (g, a)})

words5 = st.text(alphabet="abcde", min_size=5, max_size=5)


@pytest.mark.parametrize("guess,answer,expected", CASES)
def test_known_repeated_letter_cases(guess, answer, expected):
    assert pattern_to_str(score(guess, answer)) == expected


@given(words5)
def test_self_is_all_green(w):
    assert score(w, w) == win_pattern(5)


@given(words5, words5)
def test_coloured_tiles_never_exceed_letter_count(g, a):
    tiles = pattern_to_tiles(score(g, a))
    for letter in set(g):
        marked = sum(1 for c, t in zip(g, tiles) if c == letter and t > 0)
        assert marked <= a.count(letter)
        # and as many as possible are marked: min(count in guess, count in answer)
        assert marked == min(g.count(letter), a.count(letter))


@given(st.integers(0, 242))
def test_pattern_string_round_trip(p):
    assert str_to_pattern(pattern_to_str(p)) == p
    assert len(pattern_to_emoji(p)) == 5


@given(st.lists(st.tuples(words5, words5), min_size=1, max_size=40))
def test_vectorised_pairs_match_score(pairs):
    g = encode_words([p[0] for p in pairs])
    a = encode_words([p[1] for p in pairs])
    assert score_pairs(g, a).tolist() == [score(x, y) for x, y in pairs]


def test_str_to_pattern_rejects_bad_tiles():
    with pytest.raises(ValueError, match="bad tile"):
        str_to_pattern("GGZGG")


def test_matrix_agrees_with_score(words, matrix):
    assert matrix.shape == (12972, 2315) and matrix.dtype == np.uint8
    rng = np.random.default_rng(0)
    gi = rng.integers(0, len(words.allowed), 50_000)
    ai = rng.integers(0, len(words.answers), 50_000)
    expected = [score(words.allowed[g], words.answers[a]) for g, a in zip(gi, ai)]
    assert matrix[gi, ai].tolist() == expected
    tricky_allowed = [w for w in TRICKY if w in words.allowed_index]
    tricky_answers = [w for w in TRICKY if w in words.answer_index]
    for g in tricky_allowed:
        row = matrix[words.allowed_index[g]]
        assert row.tolist() == [score(g, a) for a in words.answers]
    for a in tricky_answers:
        col = matrix[:, words.answer_index[a]]
        assert col.tolist() == [score(g, a) for g in words.allowed]


def test_matrix_on_repeated_letter_words():
    ws = [
        "speed",
        "abide",
        "eerie",
        "lolly",
        "allow",
        "abbey",
        "kebab",
        "mamma",
        "geese",
        "aaaaa",
        "xxxxy",
    ]
    m = build_pattern_matrix(ws, ws)
    assert m.tolist() == [[score(g, a) for a in ws] for g in ws]


def test_matrix_cache_round_trip(words, matrix):
    from wordle_rl.engine.matrix import cache_dir, clear_matrix_memo

    clear_matrix_memo()
    pattern_matrix(words)
    files = list(cache_dir().glob("patterns-*.npy"))
    assert files, "matrix was not cached on disk"
    clear_matrix_memo()
    again = pattern_matrix(words)
    assert again is not matrix and np.array_equal(again, matrix)
    files[0].write_bytes(b"garbage")
    clear_matrix_memo()
    rebuilt = pattern_matrix(words)
    assert np.array_equal(rebuilt, matrix)


def test_game_flow_and_candidates(words, matrix):
    g = Game("abide", words=words)
    g.guess("speed")
    cands = g.candidates(matrix)
    assert "abide" in cands
    assert cands == g.candidates()  # same with and without the matrix
    assert all(consistent_with(g.history, c) for c in cands)
    assert all(score("speed", c) == g.history[0][1] for c in cands)
    with pytest.raises(InvalidGuess) as e:
        g.guess("zzzzz")
    assert e.value.code == "not_in_word_list" and g.turns_used == 1
    with pytest.raises(InvalidGuess) as e:
        g.guess("abc")
    assert e.value.code == "wrong_length"
    with pytest.raises(InvalidGuess) as e:
        g.guess("ab1de")
    assert e.value.code == "not_alpha"
    with pytest.raises(InvalidGuess) as e:
        g.guess("speed", allow_repeat=False)
    assert e.value.code == "repeated_guess"
    g.guess("ABIDE")
    assert g.won and g.over and not g.lost
    with pytest.raises(InvalidGuess, match="over"):
        g.guess("crane")


def test_game_lost_after_max_turns(words):
    g = Game("abide", words=words, max_turns=6)
    for w in ["crane", "slate", "pious", "dough", "lymph", "fizzy"]:
        g.guess(w)
    assert g.lost and not g.won and g.turns_used == 6


def test_hard_mode_messages(words):
    g = Game("abide", words=words, hard=True)
    g.guess("abbey")
    assert pattern_to_str(g.history[0][1]) == "GGXYX"
    with pytest.raises(InvalidGuess, match="^1st letter must be A$") as e:
        g.guess("crane")
    assert e.value.code == "hard_mode_violation"
    with pytest.raises(InvalidGuess, match="^Guess must contain E$"):
        g.guess("about")
    g.guess("abide")
    assert g.won


def test_hard_mode_counts_repeated_letters():
    assert (
        hard_mode_violation([("speed", str_to_pattern("XXYYX"))], "abide")
        == "Guess must contain E 2 times"
    )
    assert hard_mode_violation([("speed", str_to_pattern("XXYYX"))], "eerie") is None


def test_candidates_by_rescoring_handle_repeats(words, matrix):
    hist = [("eerie", score("eerie", "speed"))]
    idx = candidate_indices(words, hist, matrix)
    names = [words.answers[i] for i in idx]
    assert "speed" in names
    assert all(score("eerie", n) == hist[0][1] for n in names)
    # exactly the brute-force set
    assert names == [a for a in words.answers if score("eerie", a) == hist[0][1]]


def test_game_rejects_unknown_answer(words):
    with pytest.raises(ValueError, match="not in the word list"):
        Game("qqqqq", words=words)


def test_other_word_lengths(tmp_path):
    f = tmp_path / "w.txt"
    f.write_text("planet\nstrand\ngarden\nbanana\n")
    wl = load_word_lists(f)
    m = pattern_matrix(wl)
    assert m.dtype == np.uint16 and m.shape == (4, 4)
    assert m.tolist() == [[score(g, a) for a in wl.answers] for g in wl.allowed]
    g = Game("banana", words=wl)
    assert g.guess("banana") == win_pattern(6)
