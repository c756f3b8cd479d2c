"""Training-overlap audit: which evaluated moves replay a state that the model imitated in training.

    wordle-rl eval --model runs/x/sft --split test \\
        --train-data runs/x/data/sft --train-data runs/x/data/rl

No val or test answer is ever a game's target, but the answer list is public and taught: a held-out
word can be an imitated guess, and a recall game ends where the solver writes it as the only fitting
answer word. This module says, for every evaluated game, how much of it the model saw in training:

- a **state** is the sequence of scored guesses so far (refused moves leave it unchanged);
- an **imitated pair** is a (state -> guess) move of an SFT row that the loss trains on (an
  assistant turn not marked ``"train": false``), or a recall state of a GRPO run (a state of the
  policy's own game where one answer word fits, whose moves the RL term rewarded for writing it:
  ``<grpo output>/rl_recall_states``); an **RL state** is the history an RL row starts from;
- a game's **endgame** is the first state before a move in which its answer is the only answer word
  that fits.

Each game falls in one class: ``endgame_imitated`` (its endgame -> answer was an imitated pair),
``endgame_new`` (it reached an endgame never imitated), ``won_before_endgame`` (won while other
answer words still fitted) or ``lost_no_endgame`` (lost without reaching an endgame).
:func:`audit_summary` counts wins in each class with 95 % Wilson intervals and the share of winning
moves that replay an imitated pair.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from wordle_rl.data.files import DataError, iter_jsonl
from wordle_rl.engine.game import pattern_to_str, score, score_pairs, str_to_pattern
from wordle_rl.engine.words import WordList, encode_words
from wordle_rl.environment.parser import parse
from wordle_rl.environment.prompts import detect_style

__all__ = [
    "TrainingIndex",
    "state_key",
    "audit_games",
    "audit_summary",
    "AUDIT_CLASSES",
    "training_files",
]

AUDIT_CLASSES = ("endgame_imitated", "endgame_new", "won_before_endgame", "lost_no_endgame")


def state_key(history: Iterable[tuple[str, str]]) -> str:
    """A game state as text: its scored guesses in order.

    >>> state_key([("crane", "XXYXG"), ("slate", "GGGGG")]), state_key([])
    ('crane:XXYXG slate:GGGGG', '')
    """
    return " ".join(f"{g}:{p}" for g, p in history)


@dataclass
class TrainingIndex:
    """What a model was trained on, as game states: imitated (state -> guess) pairs, states, guess
    words and RL start states, with the files they came from."""

    pairs: set[str] = field(default_factory=set)
    states: set[str] = field(default_factory=set)
    words: set[str] = field(default_factory=set)
    rl_states: set[str] = field(default_factory=set)
    sources: list[str] = field(default_factory=list)
    rows: int = 0

    def add_move(self, state: str, guess: str) -> None:
        self.pairs.add(f"{state}>{guess}")
        self.states.add(state)
        self.words.add(guess)

    def imitated(self, state: str, guess: str) -> bool:
        return f"{state}>{guess}" in self.pairs

    def add_sft_row(self, row: dict, words: WordList) -> None:
        """Every trained assistant turn of one SFT conversation."""
        if "messages" not in row:
            return
        assistant = [m for m in row["messages"] if m.get("role") == "assistant"]
        for state, guess, trained in _sft_moves(row, assistant, words):
            if trained:
                self.add_move(state, guess)
        self.rows += 1

    def add_rl_row(self, row: dict) -> None:
        self.rl_states.add(state_key(row.get("history") or []))
        self.rows += 1

    @classmethod
    def from_paths(cls, paths: Iterable[str | Path], words: WordList) -> TrainingIndex:
        """Read SFT conversations, RL rows and GRPO recall states (``wordle-rl data sft`` / ``data
        rl`` / ``rl_recall_states`` folders, their JSONL files, or teacher SFT files); a row with a
        ``prompt`` is an RL row, one with ``recall_word`` a recall state, one with ``messages`` an
        SFT row."""
        index = cls()
        for path in paths:
            for f in training_files(path):
                index.sources.append(str(f))
                for row in iter_jsonl(f):
                    if "prompt" in row:
                        index.add_rl_row(row)
                    elif "recall_word" in row:
                        index.add_move(state_key(row["history"]), row["recall_word"])
                        index.rows += 1
                    elif "messages" in row:
                        index.add_sft_row(row, words)
                    else:
                        raise DataError(
                            f"{f}:{row['_line']}: neither an SFT row (messages), an RL row "
                            f"(prompt) nor a recall state (recall_word)"
                        )
        return index

    def extended(self, paths: Iterable[str | Path], words: WordList) -> TrainingIndex:
        """A copy with the rows of more training files added (a GRPO run's recall states)."""
        more = TrainingIndex.from_paths(paths, words)
        return TrainingIndex(
            self.pairs | more.pairs,
            self.states | more.states,
            self.words | more.words,
            self.rl_states | more.rl_states,
            self.sources + more.sources,
            self.rows + more.rows,
        )


def training_files(path: str | Path) -> list[Path]:
    """The JSONL files of a training-data path: the file itself, or a data folder's ``sft.jsonl`` /
    ``rl.jsonl`` / other ``*.jsonl`` files."""
    p = Path(path)
    if p.is_file():
        return [p]
    files = sorted(p.glob("*.jsonl")) if p.is_dir() else []
    if not files:
        raise DataError(
            f"{p}: no training data here (a JSONL file, or a folder from `wordle-rl data sft` / "
            f"`data rl`)"
        )
    return files


def _sft_moves(
    row: dict, assistant: list[dict], words: WordList
) -> Iterator[tuple[str, str, bool]]:
    """``(state before the move, guess, trained)`` for each assistant turn that is a played guess.

    Rows written by ``wordle-rl data sft`` carry their ``history`` (played guesses) and
    ``refused_at`` (where a refused move sits among the assistant turns); other conversations
    (teacher traces) are parsed and scored."""
    history, refused = row.get("history"), row.get("refused_at")
    if isinstance(history, list) and len(assistant) == len(history) + (refused is not None):
        played = 0
        for k, msg in enumerate(assistant):
            if k == refused:
                continue
            guess = history[played][0]
            yield state_key(history[:played]), guess, msg.get("train", True) is not False
            played += 1
        return
    style = (detect_style([row["messages"]]) or ("xml", False))[0]
    answer, state = row.get("answer", ""), []
    for msg in assistant:
        res = parse(msg.get("content", ""), style, words=words, history=[(g, 0) for g, _ in state])
        if not res.ok:
            continue
        yield state_key(state), res.guess, msg.get("train", True) is not False
        if len(answer) == len(res.guess):
            state.append((res.guess, pattern_to_str(score(res.guess, answer), len(answer))))


def _fits(words: WordList, codes: np.ndarray, state: list[tuple[str, str]]) -> np.ndarray:
    """Indices of the answer words that fit every scored guess of ``state`` (found by
    re-scoring)."""
    ok = np.ones(len(words.answers), dtype=bool)
    for guess, pattern in state:
        g = encode_words([guess])
        ok &= score_pairs(np.broadcast_to(g, codes.shape), codes) == str_to_pattern(pattern)
    return np.flatnonzero(ok)


def audit_games(games: list[dict], index: TrainingIndex, words: WordList) -> None:
    """Annotate evaluated games in place: each move gets ``audit`` (``state_seen``: the state before
    it was a state of an imitated move; ``imitated``: that exact (state -> guess) was imitated;
    ``rl_state``: an RL row started there) and each game ``audit`` (its class, its endgame turn,
    whether its answer was an imitated guess anywhere)."""
    codes = encode_words(words.answers)
    for g in games:
        state: list[tuple[str, str]] = []
        endgame_turn, endgame_imitated = None, False
        for move in g["moves"]:
            key = state_key(state)
            if endgame_turn is None and g["answer"] in words.answer_index:
                fits = _fits(words, codes, state)
                if len(fits) == 1 and words.answers[int(fits[0])] == g["answer"]:
                    endgame_turn, endgame_imitated = move["turn"], index.imitated(key, g["answer"])
            guess = move.get("guess")
            move["audit"] = {
                "state_seen": key in index.states,
                "rl_state": key in index.rl_states,
                "imitated": bool(guess) and index.imitated(key, guess),
            }
            if guess and move.get("pattern"):
                state.append((guess, move["pattern"]))
        if endgame_turn is not None:
            cls = "endgame_imitated" if endgame_imitated else "endgame_new"
        else:
            cls = "won_before_endgame" if g["won"] else "lost_no_endgame"
        g["audit"] = {
            "class": cls,
            "endgame_turn": endgame_turn,
            "answer_imitated": g["answer"] in index.words,
        }


def audit_summary(games: list[dict], index: TrainingIndex) -> dict:
    """Wins per audit class (with 95 % Wilson intervals) and how many winning moves replay an
    imitated pair, from games annotated by :func:`audit_games`.

    >>> from wordle_rl.engine.words import load_word_lists
    >>> idx = TrainingIndex()
    >>> idx.add_move("crane:GXYYG", "canoe")  # after CRANE, only CANOE fits GXYYG
    >>> games = [{"answer": a, "won": True, "turns": 2, "moves": [
    ...     {"turn": 1, "guess": "crane", "pattern": p},
    ...     {"turn": 2, "guess": a, "pattern": "GGGGG"}]}
    ...     for a, p in (("canoe", "GXYYG"), ("moist", "XXXXX"))]
    >>> audit_games(games, idx, load_word_lists())
    >>> [g["audit"]["class"] for g in games]
    ['endgame_imitated', 'won_before_endgame']
    >>> s = audit_summary(games, idx)
    >>> s["classes"]["endgame_imitated"]["wins"], s["winning_moves_imitated"]
    (1, 1)
    >>> s["answers_imitated_as_guess"]
    1
    """
    from wordle_rl.evaluation.stats import wilson

    out: dict = {"classes": {}}
    for cls in AUDIT_CLASSES:
        members = [g for g in games if g["audit"]["class"] == cls]
        wins = sum(g["won"] for g in members)
        out["classes"][cls] = {
            "games": len(members),
            "wins": wins,
            "win_rate": wins / len(members) if members else None,
            "win_rate_ci95": list(wilson(wins, len(members))),
        }
    won = [g for g in games if g["won"]]
    out["wins"] = len(won)
    out["winning_moves_imitated"] = sum(g["moves"][-1]["audit"]["imitated"] for g in won)
    out["winning_moves_imitated_share"] = out["winning_moves_imitated"] / len(won) if won else None
    out["answers_imitated_as_guess"] = sum(g["audit"]["answer_imitated"] for g in games)
    out["moves_replaying_imitated_pair"] = sum(
        m["audit"]["imitated"] for g in games for m in g["moves"]
    )
    out["moves"] = sum(len(g["moves"]) for g in games)
    out["training_rows"], out["training_files"] = index.rows, list(index.sources)
    return out
