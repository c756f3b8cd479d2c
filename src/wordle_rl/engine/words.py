"""Word lists: the canonical Wordle lists shipped with the package, and validated user lists.

The package ships the original (pre-NYT) Wordle lists as data files:
``answers.txt`` (2,315 possible answers) and ``allowed.txt`` (12,972 allowed
guesses, answers included), both sorted, one lowercase word per line.
Their provenance and licence are recorded in ``NOTICE``.

    >>> wl = load_word_lists()
    >>> len(wl.answers), len(wl.allowed), wl.length
    (2315, 12972, 5)
    >>> wl.allowed[wl.answer_to_allowed[0]] == wl.answers[0]
    True

User lists (``--answers FILE --allowed FILE``) go through :func:`read_word_file`,
which reports every bad entry with file and line instead of dropping it.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path

import numpy as np

__all__ = [
    "WordList",
    "WordListError",
    "load_word_lists",
    "read_word_file",
    "encode_words",
    "pattern_mask",
]


class WordListError(ValueError):
    """A word list file is missing or malformed; the message names file, line and reason."""


def read_word_file(path: str | Path, length: int | None = None) -> tuple[list[str], int]:
    """Read and validate a word file: one word per line, blank lines and ``#`` comments skipped.

    Words are lower-cased. Returns ``(words, length)``. Every problem (non-alphabetic
    entry, wrong length, duplicate) is collected and raised together as a
    :class:`WordListError` with ``file:line: reason`` lines.
    """
    path = Path(path)
    if not path.is_file():
        raise WordListError(f"{path}: word list file not found")
    problems: list[str] = []
    words: list[str] = []
    first_line: dict[str, int] = {}
    text = path.read_text(encoding="utf-8", errors="replace")
    for lineno, raw in enumerate(text.splitlines(), start=1):
        entry = raw.strip()
        if not entry or entry.startswith("#"):
            continue
        word = entry.lower()
        if not (word.isascii() and word.isalpha()):
            problems.append(f"{path}:{lineno}: {entry!r} is not alphabetic (letters a-z only)")
            continue
        if length is None:
            length = len(word)
        if len(word) != length:
            problems.append(
                f"{path}:{lineno}: {entry!r} has {len(word)} letters, expected {length}"
            )
            continue
        if word in first_line:
            problems.append(
                f"{path}:{lineno}: duplicate {word!r} (first on line {first_line[word]})"
            )
            continue
        first_line[word] = lineno
        words.append(word)
    if problems:
        raise WordListError(f"{len(problems)} problem(s) in {path}:\n" + "\n".join(problems))
    if not words:
        raise WordListError(f"{path}: no words found")
    assert length is not None
    return words, length


def encode_words(words: list[str] | tuple[str, ...]) -> np.ndarray:
    """Encode equal-length lowercase words as a ``(n, length)`` uint8 array of letters 0-25."""
    if not words:
        return np.zeros((0, 0), dtype=np.uint8)
    buf = "".join(words).encode("ascii")
    arr = np.frombuffer(buf, dtype=np.uint8).reshape(len(words), -1)
    return (arr - ord("a")).astype(np.uint8)


def pattern_mask(codes: np.ndarray, pattern: str) -> np.ndarray:
    """Mask of the encoded words (:func:`encode_words`) with the letters of ``pattern`` in place
    (``_``: any letter).

    >>> pattern_mask(encode_words(["crane", "crank", "pilot"]), "cra__").tolist()
    [True, True, False]
    """
    fits = np.ones(len(codes), dtype=bool)
    for j, c in enumerate(pattern):
        if c != "_":
            fits &= codes[:, j] == ord(c) - ord("a")
    return fits


@dataclass(frozen=True)
class WordList:
    """Answers and allowed guesses, sorted, with index maps; answers are a subset of allowed."""

    answers: tuple[str, ...]
    allowed: tuple[str, ...]
    length: int = 5
    name: str = "wordle-original"
    answer_index: dict[str, int] = field(init=False, repr=False, compare=False)
    allowed_index: dict[str, int] = field(init=False, repr=False, compare=False)
    answer_to_allowed: np.ndarray = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "answer_index", {w: i for i, w in enumerate(self.answers)})
        object.__setattr__(self, "allowed_index", {w: i for i, w in enumerate(self.allowed)})
        missing = [w for w in self.answers if w not in self.allowed_index]
        if missing:
            raise WordListError(
                f"{len(missing)} answer(s) missing from the allowed list: {missing[:10]}"
            )
        a2g = np.array([self.allowed_index[w] for w in self.answers], dtype=np.int64)
        object.__setattr__(self, "answer_to_allowed", a2g)

    @property
    def digest(self) -> str:
        """sha256 over both lists; keys on-disk caches (pattern matrix, openers)."""
        h = hashlib.sha256()
        h.update(f"{self.length}\n".encode())
        h.update(("\n".join(self.answers) + "\n#\n").encode())
        h.update(("\n".join(self.allowed) + "\n").encode())
        return h.hexdigest()

    def is_allowed(self, word: str) -> bool:
        return word in self.allowed_index

    def is_answer(self, word: str) -> bool:
        return word in self.answer_index

    @classmethod
    def from_files(
        cls, answers_path: str | Path, allowed_path: str | Path | None = None
    ) -> WordList:
        """Load user lists; without ``allowed_path`` the answers are the allowed list too.

        Answers missing from the allowed list are reported with file and line.
        """
        answers, length = read_word_file(answers_path)
        if allowed_path is None:
            allowed = list(answers)
        else:
            allowed, _ = read_word_file(allowed_path, length=length)
            allowed_set = set(allowed)
            missing = [
                f"{answers_path}:{ln}: answer {w!r} is not in the allowed list {allowed_path}"
                for ln, w in _line_numbers(answers_path, answers)
                if w not in allowed_set
            ]
            if missing:
                raise WordListError(
                    f"{len(missing)} problem(s) in {answers_path}:\n" + "\n".join(missing)
                )
        return cls(
            answers=tuple(sorted(answers)),
            allowed=tuple(sorted(allowed)),
            length=length,
            name=f"custom:{Path(answers_path).name}",
        )


def _line_numbers(path: str | Path, words: list[str]) -> list[tuple[int, str]]:
    wanted = set(words)
    out = []
    for lineno, raw in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), start=1):
        w = raw.strip().lower()
        if w in wanted:
            out.append((lineno, w))
    return out


def _read_packaged(name: str) -> tuple[str, ...]:
    text = (
        resources.files("wordle_rl")
        .joinpath("engine", "wordlists", name)
        .read_text(encoding="ascii")
    )
    return tuple(text.split())


@lru_cache(maxsize=1)
def _canonical() -> WordList:
    return WordList(answers=_read_packaged("answers.txt"), allowed=_read_packaged("allowed.txt"))


def load_word_lists(
    answers: str | Path | None = None, allowed: str | Path | None = None
) -> WordList:
    """The canonical lists (loaded once), or validated user lists when a path is given."""
    if answers is None and allowed is None:
        return _canonical()
    if answers is None:
        raise WordListError("--allowed was given without --answers; give both, or --answers alone")
    return WordList.from_files(answers, allowed)
