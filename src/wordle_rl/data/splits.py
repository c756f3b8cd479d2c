"""The answers cut into train / val / test, and the leakage check that keeps val and test out of
training.

    wordle-rl data split --seed 0 --out data/splits.json

Only **train** answers are ever the target of a generated game. The word lists themselves are
public, so val and test words may appear as guesses. Under the ``strict`` protocol no game may end
on a val or test word either.
"""

from __future__ import annotations

import hashlib
import json
import random
from dataclasses import asdict, dataclass
from pathlib import Path

from wordle_rl.data.files import DataError
from wordle_rl.engine.storage import write_atomic
from wordle_rl.engine.words import WordList, load_word_lists

__all__ = [
    "SPLIT_NAMES",
    "PROTOCOLS",
    "Splits",
    "held_out_answers",
    "make_splits",
    "check_protocol",
    "check_leakage",
    "check_made_with",
    "record_splits",
    "SPLITS_RECORD",
]


# --------------------------------------------------------------------------- splits
SPLIT_NAMES = ("train", "val", "test")


@dataclass
class Splits:
    """The answers cut into disjoint splits. ``train``: targets of SFT games and RL rows;
    ``val``/``test``: never a target."""

    seed: int
    fractions: tuple[float, float, float]
    train: list[str]
    val: list[str]
    test: list[str]
    word_lists: str = ""

    def split_of(self, word: str) -> str | None:
        for name in SPLIT_NAMES:
            if word in self._sets[name]:
                return name
        return None

    def answers(self, name: str) -> list[str]:
        """The answers of split ``name`` (one of :data:`SPLIT_NAMES`)."""
        if name not in SPLIT_NAMES:
            raise DataError(f"unknown split {name!r}; choose one of {', '.join(SPLIT_NAMES)}")
        return getattr(self, name)

    def digest(self) -> str:
        """The sha256 of the three answer lists: two splits files cut alike share it."""
        lists = json.dumps([self.train, self.val, self.test])
        return hashlib.sha256(lists.encode()).hexdigest()

    def held_out(self) -> set[str]:
        """The val and test answers: never a training target, never a word RL rewards."""
        return self._sets["val"] | self._sets["test"]

    @property
    def _sets(self) -> dict[str, set[str]]:
        cache = self.__dict__.get("_cached_sets")
        if cache is None:
            cache = {name: set(getattr(self, name)) for name in SPLIT_NAMES}
            self.__dict__["_cached_sets"] = cache
        return cache

    def save(self, path: str | Path) -> None:
        d = {k: v for k, v in asdict(self).items()}
        write_atomic(path, json.dumps(d, indent=1) + "\n")

    @classmethod
    def load(cls, path: str | Path, words: WordList | None = None) -> Splits:
        path = Path(path)
        if not path.is_file():
            raise DataError(f"{path}: splits file not found (make one with `wordle-rl data split`)")
        try:
            d = json.loads(path.read_text())
            if d.get("rl"):
                raise ValueError(
                    "it holds an rl split, which wordle-rl no longer makes; make a new one with "
                    "`wordle-rl data split`"
                )
            s = cls(
                seed=int(d["seed"]),
                fractions=tuple(d["fractions"]),
                train=list(d["train"]),
                val=list(d["val"]),
                test=list(d["test"]),
                word_lists=d.get("word_lists", ""),
            )
        except (json.JSONDecodeError, KeyError, TypeError, ValueError) as e:
            raise DataError(f"{path}: not a splits file ({type(e).__name__}: {e})") from e
        words = words or load_word_lists()
        all_words = s.train + s.val + s.test
        if len(set(all_words)) != len(all_words):
            raise DataError(f"{path}: a word appears in more than one split")
        unknown = [w for w in all_words if not words.is_answer(w)]
        if unknown:
            raise DataError(f"{path}: {len(unknown)} split word(s) are not answers: {unknown[:5]}")
        return s


def held_out_answers(path: str | Path | None, words: WordList | None = None) -> set[str]:
    """The val and test answers of the splits file at ``path`` (none when there is no such file):
    the words an RL term must never reward writing."""
    if not path or not Path(path).is_file():
        return set()
    return Splits.load(path, words).held_out()


def make_splits(
    words: WordList | None = None,
    seed: int = 0,
    fractions: tuple[float, float, float] = (0.8, 0.1, 0.1),
) -> Splits:
    """Shuffle the answers with ``seed`` and cut them into train / val / test (sorted within each
    split)."""
    words = words or load_word_lists()
    if len(fractions) != 3 or any(f < 0 for f in fractions) or abs(sum(fractions) - 1) > 1e-9:
        raise DataError(
            f"split fractions must be three non-negative numbers summing to 1, got {fractions}"
        )
    order = list(words.answers)
    random.Random(seed).shuffle(order)
    n = len(order)
    n_val, n_test = round(n * fractions[1]), round(n * fractions[2])
    n_train = n - n_val - n_test
    return Splits(
        seed,
        tuple(fractions),
        sorted(order[:n_train]),
        sorted(order[n_train : n_train + n_val]),
        sorted(order[n_train + n_val :]),
        words.digest[:20],
    )


# what SFT games may end on: see SftConfig.protocol and check_leakage
PROTOCOLS = (
    "open",
    "strict",
)


def check_protocol(protocol: str) -> None:
    if protocol not in PROTOCOLS:
        raise DataError(f"protocol must be one of {', '.join(PROTOCOLS)}, got {protocol!r}")


SPLITS_RECORD = "wordle_rl_splits.json"


def record_splits(folder: str | Path, splits: Splits) -> None:
    """Record in a data folder the splits its rows were made with (seed and digest)."""
    record = {"seed": splits.seed, "digest": splits.digest()}
    write_atomic(Path(folder) / SPLITS_RECORD, json.dumps(record) + "\n")


def check_made_with(data: str | Path, splits: Splits, splits_file: str | Path) -> None:
    """A one-line :class:`DataError` when the data folder of ``data`` (a folder, or a file in one)
    records other splits than ``splits``; nothing for data without a record.

    >>> import tempfile; d = Path(tempfile.mkdtemp())
    >>> record_splits(d, make_splits(seed=0)); check_made_with(d, make_splits(seed=0), "a.json")
    >>> check_made_with(d / "sft.jsonl", make_splits(seed=1), "b.json")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    wordle_rl.data.files.DataError: ...: made with other splits (seed 0) than b.json (seed 1); ...
    """
    folder = Path(data) if Path(data).is_dir() else Path(data).parent
    path = folder / SPLITS_RECORD
    if not path.is_file():
        return
    try:
        record = json.loads(path.read_text())
        made_with = record["digest"]
    except (ValueError, KeyError, TypeError) as e:
        raise DataError(f"{path}: not a splits record ({e})") from e
    if made_with != splits.digest():
        raise DataError(
            f"{folder}: made with other splits (seed {record.get('seed')}) than {splits_file} "
            f"(seed {splits.seed}); pass the splits file the data was made with, or make the data "
            "again with this one"
        )


def check_leakage(
    rows: list[dict],
    splits: Splits,
    source: str = "<rows>",
    allowed_split: str | tuple[str, ...] = "train",
    allow_outside: bool = False,
    protocol: str = "open",
) -> int:
    """Fail loudly if any row's target answer is outside ``allowed_split`` (a name or a tuple of
    names); returns the number of rows checked.

    ``allow_outside`` accepts targets that belong to no split (words outside the answer list, so
    never a val or test answer; check them with :func:`validate_rows`). Under the ``strict``
    protocol a game may not end on a val or test word either: a recall game recalling one, or a
    game whose last played guess is one, is refused.
    """
    check_protocol(protocol)
    allowed = (allowed_split,) if isinstance(allowed_split, str) else tuple(allowed_split)
    bad = []
    for k, row in enumerate(rows):
        where = f"{source}:{row.get('_line', k + 1)}"
        split = splits.split_of(row.get("answer", ""))
        if split not in allowed and not (allow_outside and split is None):
            bad.append(f"{where}: target {row.get('answer')!r} is in the {split or 'no'} split")
        last = (row.get("history") or [[None]])[-1][
            0
        ]  # a recall game's last guess is the word it recalls
        if protocol == "strict" and splits.split_of(last or "") in ("val", "test"):
            what = "recall game ends" if row.get("recall") else "ends"
            bad.append(
                f"{where}: {what} on {last!r}, a {splits.split_of(last)} answer (strict protocol)"
            )
    if bad:
        raise DataError(
            f"LEAKAGE: {len(bad)} row(s) target answers outside the {' / '.join(allowed)} split"
            + (" or end on a val/test word" if protocol == "strict" else "")
            + ":\n"
            + "\n".join(bad[:50])
        )
    return len(rows)
