"""SFT games: solver games rendered as TRL conversations, with varied starts and refused moves shown
as context.

    wordle-rl data sft --splits data/splits.json --games 140000 --no-think --recall-share 0.2 \\
        --out data/sft

Targets are **train** answers; a val or test answer is never a target. A share of the games are
recall games (:mod:`wordle_rl.data.recall`). Same seed, same bytes.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path

from wordle_rl.data.files import DataError, check_named_mix, check_share, parse_pairs
from wordle_rl.data.recall import reach_ranking, recall_games
from wordle_rl.data.splits import Splits, check_protocol
from wordle_rl.data.traces import outside_words, play_traced, strong_openers
from wordle_rl.engine.game import pattern_to_str
from wordle_rl.engine.solvers import SOLVERS, EntropySolver, make_solver
from wordle_rl.engine.words import WordList, load_word_lists
from wordle_rl.environment.parser import parse
from wordle_rl.environment.prompts import (
    DEFAULT_STYLE,
    STYLES,
    PromptStyle,
    format_answer,
    render_conversation,
)

__all__ = ["SftConfig", "generate_sft", "check_solver_mix", "parse_solver_mix"]
RECALL_TEACHERS = ("candidate", "mix")
MISSPELT_FROM = ("next", "other")


# --------------------------------------------------------------------------- SFT games
@dataclass
class SftConfig:
    """How solver games for SFT are generated."""

    games: int = field(default=140000, metadata={"help": "Number of games."})
    seed: int = field(default=0, metadata={"help": "Seed of every random choice."})
    style: str = field(
        default=DEFAULT_STYLE, metadata={"help": f"Prompt style: {' | '.join(STYLES)}."}
    )
    think: bool = field(
        default=False, metadata={"help": "Write a <think> rationale (xml/tiles/plain styles)."}
    )
    solver_mix: str = field(
        default="candidate:0.8,random:0.2",
        metadata={
            "help": "Share of games played by each solver, as solver:weight,... (entropy, search, "
            "candidate, ranked, random); weights are normalised."
        },
    )
    ranking: str | None = field(
        default=None,
        metadata={
            "help": "The ranked solver's ranking: a file of answer words, one a line, best first "
            "(`wordle-rl data rank` writes a model's own); none: the answer list's order."
        },
    )
    n_openers: int = field(
        default=12, metadata={"help": "Strong openers (top by entropy) to vary the start."}
    )
    opener_share: float = field(
        default=0.3, metadata={"help": "Share of games starting with a varied opener."}
    )
    random_first_share: float = field(
        default=0.2,
        metadata={
            "help": "Share of games whose first guess is a random allowed word (solver recovers)."
        },
    )
    random_second_share: float = field(
        default=0.1,
        metadata={"help": "Share of games whose second guess is a random remaining candidate."},
    )
    refused_share: float = field(
        default=0.15,
        metadata={
            "help": "Share of games showing one refused move, a misspelt next guess or (see "
            "repeat_share) a repeated one (context, never imitated), and the environment's reply, "
            "so the model learns to carry on after an invalid move: a different word, never the "
            "refused one."
        },
    )
    repeat_share: float = field(
        default=0.0,
        metadata={
            "help": "Share of the refused moves that repeat a guess the game has already played "
            "(in a game with one) instead of misspelling the next: after that refusal too the "
            "next move is a new word, never the refused text again."
        },
    )
    misspelt_from: str = field(
        default="next",
        metadata={
            "help": "What a misspelt refused move misspells: next: the game's next guess, so the "
            "move after the refusal is nearly the refused text; other: a train answer drawn at "
            "random, so the move after it differs from the refused text."
        },
    )
    recall_share: float = field(
        default=0.2,
        metadata={
            "help": "Share of the games that are recall games instead: a game on an allowed word "
            "outside the answer list (never a val or test answer) one or two letters away from an "
            "answer word W, played by the candidate solver (recall_teacher) and cut right after it "
            "writes W where W is the only answer word that fits. Every answer word alike under the "
            "open protocol: in the other games a held-out answer is never the only fitting word, "
            "the state where free play loses it."
        },
    )
    recall_teacher: str = field(
        default="candidate",
        metadata={
            "help": "Who plays the recall games: candidate: the candidate solver, from a strong "
            "opener or its own; mix: a solver drawn from solver_mix, from its own opener, ending "
            "where it writes W (the path that teacher takes on W), its target any outside word or "
            "train answer that gives the earlier guesses W's feedback."
        },
    )
    recall_reach: bool = field(
        default=False,
        metadata={
            "help": "With recall_teacher mix and a ranked solver: move the answer words whose "
            "recall game it cannot write (no other word shares its path's feedback) up its "
            "ranking, so that it writes them while one still does; the ranking then orders every "
            "game the ranked solver plays."
        },
    )
    protocol: str = field(
        default="open",
        metadata={
            "help": "open: recall games recall every public answer word alike; strict: only train "
            "answers, and no game ends on a val or test word (a lost game's trailing guesses of "
            "such words are cut), so no held-out word is ever the final move of a game (PROTOCOLS)."
        },
    )
    max_turns: int = field(default=6, metadata={"help": "Guesses per game."})

    def __post_init__(self) -> None:
        parse_solver_mix(self.solver_mix)  # a bad mix is refused when the config is made
        choices_of = {"misspelt_from": MISSPELT_FROM, "recall_teacher": RECALL_TEACHERS}
        for name, choices in choices_of.items():
            value = getattr(self, name)
            if value not in choices:
                raise ValueError(f"{name} must be one of {', '.join(choices)}, got {value!r}")
        if self.recall_reach and (
            self.recall_teacher != "mix" or "ranked" not in parse_solver_mix(self.solver_mix)
        ):
            raise ValueError(
                "recall_reach reranks the ranked solver of recall_teacher mix: set recall_teacher "
                f"to mix and put ranked in solver_mix (got {self.recall_teacher!r}, "
                f"{self.solver_mix!r})"
            )


def _misspelt(words: WordList, near: str, rng: random.Random) -> str:
    """``near`` cut short, or with one letter changed so that it is no allowed word."""
    letters = "abcdefghijklmnopqrstuvwxyz"
    bad = near[: rng.randrange(1, len(near))] if rng.random() < 0.3 else near
    for _ in range(100):
        if bad != near:
            break
        k = rng.randrange(len(near))
        cand = near[:k] + rng.choice(letters) + near[k + 1 :]
        if not words.is_allowed(cand):
            bad = cand
    return bad


def _refused_move(style: PromptStyle, words: WordList, played: list, word: str) -> tuple[str, str]:
    """``(assistant text, error message)`` of a move writing ``word`` (a misspelling, or a guess
    already played) that the environment refuses."""
    text = format_answer(style, word)
    result = parse(text, style, words=words, history=played)
    if result.ok:
        raise DataError(f"internal: refused move {text!r} was accepted")
    return text, result.message


def generate_sft(
    splits: Splits, config: SftConfig | None = None, words: WordList | None = None
) -> list[dict]:
    """Solver games rendered as TRL conversational ``messages`` rows.

    Targets are **train** answers; a val or test answer is never a target.
    """
    cfg = config or SftConfig()
    words = words or load_word_lists()
    style = PromptStyle(cfg.style, think=cfg.think, max_turns=cfg.max_turns, length=words.length)
    mix = parse_solver_mix(cfg.solver_mix)
    check_share("refused_share", cfg.refused_share)
    check_share("recall_share", cfg.recall_share)
    check_share("repeat_share", cfg.repeat_share)
    check_share("random_second_share", cfg.random_second_share)
    check_protocol(cfg.protocol)
    held_out = splits.held_out() if cfg.protocol == "strict" else set()
    entropy = EntropySolver(words)
    shared = {"seed": cfg.seed, "matrix": entropy.matrix, "by_answer": entropy.by_answer}
    ranking = {"ranking": read_ranking(cfg.ranking)} if cfg.ranking and "ranked" in mix else {}
    solvers = {
        name: entropy
        if name == "entropy"
        else make_solver(name, words, **shared, **(ranking if name == "ranked" else {}))
        for name in mix
    }
    openers = strong_openers(entropy, cfg.n_openers)
    train = list(splits.train)
    if not train:
        raise DataError("the train split is empty")
    recalled = splits.train if cfg.protocol == "strict" else None
    mixed = cfg.recall_teacher == "mix"  # its recall games take any word of stand_ins as target
    stand_ins = outside_words(words, "recall_share") + train if mixed else None
    if cfg.recall_reach:
        reach_ranking(solvers["ranked"], words, recalled or words.answers, stand_ins, cfg.max_turns)
    rows = []
    names, weights = list(mix), list(mix.values())
    n_recall = round(cfg.games * cfg.recall_share)
    for i in range(cfg.games - n_recall):
        rng = random.Random(f"{cfg.seed}:{i}")
        answer = train[i % len(train)] if i < len(train) else rng.choice(train)
        solver = solvers[rng.choices(names, weights)[0]]
        r = rng.random()
        first, random_second = None, False
        if solver.name != "search":  # the search solver plays clean games from its own opener
            if r < cfg.random_first_share:
                first = ("random_first", rng.choice(words.allowed))
            elif r < cfg.random_first_share + cfg.opener_share or solver.name == "random":
                # the random solver never opens with a random word
                first = ("opener", rng.choice(openers))
            random_second = rng.random() < cfg.random_second_share

        def policy(history, rng, first=first, random_second=random_second, solver=solver):
            if not history and first is not None:
                return first[1], ("explore" if first[0] == "random_first" else "solver"), entropy
            if len(history) == 1 and random_second:
                cands = entropy.candidates(history)
                return (
                    entropy.words.answers[int(cands[rng.randrange(len(cands))])],
                    "explore",
                    entropy,
                )
            return solver.guess(history, rng), "solver", entropy

        refuse_at = rng.randrange(4) if rng.random() < cfg.refused_share else None
        history, reasons = play_traced(answer, policy, rng, cfg.max_turns - (refuse_at is not None))
        played = list(history)
        # a refused move costs a turn (lose_turn)
        kind = None
        if refuse_at is not None and refuse_at < len(history):
            before = history[:refuse_at]
            repeat = cfg.repeat_share > 0 and refuse_at > 0 and rng.random() < cfg.repeat_share
            kind = "repeat" if repeat else "misspelt"
            if repeat:
                word = rng.choice(before)[0]
            else:
                near = history[refuse_at][0] if cfg.misspelt_from == "next" else rng.choice(train)
                word = _misspelt(words, near, rng)
            text, msg = _refused_move(style, words, before, word)
            history.insert(refuse_at, (text, None, msg))
            reasons.insert(refuse_at, ("refused", None))
        else:
            refuse_at = None
        thinks = [text for _, text in reasons] if style.uses_think else None
        messages = render_conversation(style, history, thinks=thinks)
        for k, (reason, _) in enumerate(reasons):
            # shown as context, never imitated (see the chat template)
            if reason in ("explore", "refused"):
                messages[2 + 2 * k]["train"] = False
        won = played[-1][0] == answer
        if won:
            messages = messages[:-1]  # the conversation ends on the winning guess
        if not won and held_out:
            played, history, messages = _cut_held_out(played, history, messages, held_out)
            if not played:
                continue
            refuse_at = refuse_at if refuse_at is not None and refuse_at < len(history) else None
        rows.append(
            {
                "messages": messages,
                "answer": answer,
                "split": "train",
                "solver": solver.name,
                "start": first[0] if first else "solver",
                "random_second": random_second,
                "refused_at": refuse_at,
                "refused_kind": kind if refuse_at is not None else None,
                "turns": len(history),
                "won": won,
                "history": [[g, pattern_to_str(p, words.length)] for g, p in played],
            }
        )
    teachers = {solvers[name]: weight for name, weight in mix.items()} if mixed else None
    return rows + recall_games(
        words,
        n_recall,
        style,
        cfg.seed,
        entropy,
        openers,
        cfg.max_turns,
        recalled=recalled,
        teachers=teachers,
        stand_ins=stand_ins,
    )


def read_ranking(path: str) -> list[str]:
    """The words of a ranking file, best first; a missing file is named."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as e:
        raise DataError(
            f"cannot read the ranking file {path!r} ({e.strerror}); write one with "
            "`wordle-rl data rank`"
        ) from e
    return [w.strip() for w in text.splitlines() if w.strip()]


def _cut_held_out(
    played: list, history: list, messages: list[dict], held_out: set[str]
) -> tuple[list, list, list]:
    """The strict protocol's lost game: its trailing guesses of held-out words cut, with any refused
    move after the last one kept, so that the game never ends on a val or test word.

    >>> h = [("crane", 0), ("bad", None, "not a word"), ("slate", 0)]
    >>> _cut_held_out([("crane", 0), ("slate", 0)], h, list(range(8)), {"slate"})
    ([('crane', 0)], [('crane', 0)], [0, 1, 2, 3])
    """
    while played and played[-1][0] in held_out:
        played, keep = played[:-1], 0
        if played:  # everything up to the last played guess left, refused moves before it included
            keep = 1 + max(
                i for i, t in enumerate(history) if len(t) == 2 and t[0] == played[-1][0]
            )
        history, messages = history[:keep], messages[: 2 + 2 * keep]
    return played, history, messages


def check_solver_mix(mix: dict[str, float]) -> dict[str, float]:
    """Validate ``{solver: weight}`` and normalise the weights (order kept, zero weights
    dropped)."""
    return check_named_mix(mix, "solver", SOLVERS)


def parse_solver_mix(text: str) -> dict[str, float]:
    """``"candidate:0.7,random:0.3"`` -> ``{"candidate": 0.7, "random": 0.3}`` (weights are
    normalised)."""
    return check_solver_mix(parse_pairs(text, "solver", str, "entropy:0.75,search:0.25"))
