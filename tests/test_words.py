import hashlib
from pathlib import Path

import pytest

from wordle_rl.engine.words import WordList, WordListError, load_word_lists, read_word_file

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "wordle-reference"


def _sha(words) -> str:
    return hashlib.sha256(("\n".join(sorted(words)) + "\n").encode()).hexdigest()


def test_canonical_lists_pinned(words):
    assert len(words.answers) == 2315
    assert len(words.allowed) == 12972
    assert _sha(words.answers) == "f40e47975cf360ff9febe7d49c8e285054d8fa3fb9644cea575922060951d6ee"
    assert _sha(words.allowed) == "feacc549249b5dcb43e2799fbbcda14ebc33d55904fb15d043779104e60c1579"
    assert set(words.answers) <= set(words.allowed)
    assert all(len(w) == 5 and w.isalpha() and w.islower() for w in words.allowed)


@pytest.mark.skipif(not SHARED.is_dir(), reason="team reference copies not beside the checkout")
def test_lists_match_shared_reference(words):
    assert set(words.answers) == set((SHARED / "answers.txt").read_text().split())
    assert set(words.allowed) == set((SHARED / "allowed.txt").read_text().split())


def test_loaded_once():
    assert load_word_lists() is load_word_lists()


def test_user_list_errors_name_file_and_line(tmp_path):
    bad = tmp_path / "answers.txt"
    bad.write_text("crane\nab1de\nslate\ncrane\nhi\n")
    with pytest.raises(WordListError) as e:
        read_word_file(bad)
    msg = str(e.value)
    assert f"{bad}:2:" in msg and "not alphabetic" in msg
    assert f"{bad}:4:" in msg and "duplicate 'crane' (first on line 1)" in msg
    assert f"{bad}:5:" in msg and "has 2 letters, expected 5" in msg


def test_answers_missing_from_allowed_are_reported(tmp_path):
    ans = tmp_path / "a.txt"
    alw = tmp_path / "b.txt"
    ans.write_text("crane\nslate\n")
    alw.write_text("crane\ntrace\n")
    with pytest.raises(WordListError, match=r"a\.txt:2: answer 'slate' is not in the allowed list"):
        WordList.from_files(ans, alw)


def test_missing_file_and_other_lengths(tmp_path):
    with pytest.raises(WordListError, match="not found"):
        load_word_lists(tmp_path / "nope.txt")
    f = tmp_path / "six.txt"
    f.write_text("planet\nstrand\n# comment\n\nGarden\n")
    wl = load_word_lists(f)
    assert wl.length == 6 and wl.answers == ("garden", "planet", "strand")
