"""SFT games: solver games rendered as TRL conversations, with varied starts and refused moves shown
as context.

    wordle-rl data sft --splits data/splits.json --games 140000 --no-think --recall-share 0.2 \\
        --out data/sft

Targets are **train** answers, or (``wide_share``) allowed words that are no answer at all; a val or
test answer is never a target. A share of the games are recall games (:mod:`wordle_rl.recall`). Same
seed, same bytes.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import numpy as np

from wordle_rl.data import DataError, check_named_mix, check_share, parse_pairs
from wordle_rl.game import pattern_to_str
from wordle_rl.parser import parse
from wordle_rl.prompts import (
    DEFAULT_STYLE,
    STYLES,
    PromptStyle,
    format_answer,
    render_conversation,
)
from wordle_rl.recall import lexicon_exercises, recall_games
from wordle_rl.solvers import SOLVERS, EntropySolver, make_solver
from wordle_rl.splits import Splits, check_protocol
from wordle_rl.traces import outside_targets, play_traced, strong_openers
from wordle_rl.words import WordList, load_word_lists

__all__ = [
    "SftConfig",
    "REFUSED_KINDS",
    "generate_sft",
    "check_solver_mix",
    "parse_solver_mix",
    "check_refused_kinds",
    "parse_refused_kinds",
]


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
    solver_mix: dict[str, float] = field(
        default_factory=lambda: {"candidate": 0.8, "random": 0.2},
        metadata={
            "help": "Share of games played by each solver (entropy, search, candidate, random); "
            "weights are normalised."
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
    informative_second_share: float = field(
        default=0.0,
        metadata={
            "help": "Share of games whose second guess is, imitated, one of the allowed words "
            "that split the remaining answer words best (informative_width): information guesses "
            "the policy can sample and RL can choose between, and the states after them."
        },
    )
    informative_width: int = field(
        default=20,
        metadata={
            "help": "How many best-splitting words an informative second guess is drawn from."
        },
    )
    refused_share: float = field(
        default=0.15,
        metadata={
            "help": "Share of games showing one refused move (context, never imitated) and the "
            "environment's reply, so the model learns to carry on after an invalid move: a "
            "different word, never the refused one."
        },
    )
    refused_kinds: dict[str, float] = field(
        default_factory=lambda: {"misspelt": 1.0},
        metadata={
            "help": "Which refused moves are shown (kind:weight). misspelt: the next guess with "
            "one letter changed, or cut short, in the first 4 turns; blend: a non-word spliced "
            "from two words that fit the feedback so far (the kind of word a model invents for an "
            "answer it was never taught), at any turn after the first; repeat: an earlier guess "
            "again."
        },
    )
    balance_share: float = field(
        default=0.0,
        metadata={
            "help": "Share of games whose guesses after the first are the remaining candidate "
            "written least often so far in this data (ties at random): evens out how often each "
            "answer word is a trained output, so held-out answers (never targets) are not rare "
            "outputs."
        },
    )
    wide_share: float = field(
        default=0.0,
        metadata={
            "help": "Share of games whose target is an allowed guess word outside the answer list "
            "(so never a val or test answer), played by the candidate solver with every allowed "
            "word as a possible answer: the model must find words that fit the feedback instead of "
            "recalling the train answers."
        },
    )
    wide_answers_first: bool = field(
        default=False,
        metadata={
            "help": "wide_share games are played by the solver mix, like the others, while an "
            "answer word still fits the feedback, and only then by the solver over every allowed "
            "word: imitated guesses then agree with the soft letter targets (fitting answer "
            "words), and the states are new ones, where the fitting answers may all be held-out "
            "words (never a target)."
        },
    )
    recall_share: float = field(
        default=0.2,
        metadata={
            "help": "Share of the games that are recall games instead: a game on an allowed word "
            "outside the answer list (never a val or test answer) one or two letters away from an "
            "answer word W, played by the candidate solver and cut right after it writes W where W "
            "is the only answer word that fits. Every answer word alike under the open protocol: "
            "in the other games a held-out answer is never the only fitting word, the state where "
            "free play loses it."
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
    lexicon_share: float = field(
        default=0.0,
        metadata={
            "help": "Word-pattern exercises added, as a share of the games: each asks for any "
            "answer word with 2-4 letters in place (drawn from the whole public answer list, every "
            "word alike; no game, no target) and answers one of the fitting words; with soft "
            "targets the whole set of fitting words is the target. Teaches the word list as words "
            "to spell."
        },
    )
    max_turns: int = field(default=6, metadata={"help": "Guesses per game."})


REFUSED_KINDS = ("misspelt", "blend", "repeat")


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


def _blend(solver: EntropySolver, played: list, near: str, rng: random.Random) -> str | None:
    """A non-word spliced from ``near`` (or another answer word that fits ``played``) and a second
    fitting word.

    Where ``near`` is the only answer word that fits, the second word is an answer word that differs
    from it in at most two places. ``None`` when no splice is a non-word.
    """
    words = solver.words
    fits = [words.answers[int(i)] for i in solver.candidates(played)]
    if len(fits) < 2:
        fits = [w for w in words.answers if sum(a != b for a, b in zip(w, near)) <= 2]
    for _ in range(50):
        a = near if rng.random() < 0.5 or near not in fits else rng.choice(fits)
        b = rng.choice(fits)
        j = rng.randrange(1, len(near))
        text = a[:j] + b[j:]
        if not words.is_allowed(text):
            return text
    return None


def _refused_move(
    style: PromptStyle,
    solver: EntropySolver,
    played: list,
    near: str,
    kind: str,
    rng: random.Random,
) -> tuple[str, str, str]:
    """``(assistant text, error message, kind)`` of a plausible move that the environment refuses:
    of ``kind``, or misspelt where no blend exists."""
    words = solver.words
    bad = None
    if kind == "blend":
        bad = _blend(solver, played, near, rng)
    elif kind == "repeat" and played:
        bad = rng.choice(played)[0]
    if bad is None:
        bad, kind = _misspelt(words, near, rng), "misspelt"
    text = format_answer(style, bad)
    result = parse(text, style, words=words, history=played)
    if result.ok:
        raise DataError(f"internal: refused move {text!r} was accepted")
    return text, result.message, kind


def generate_sft(
    splits: Splits, config: SftConfig | None = None, words: WordList | None = None
) -> list[dict]:
    """Solver games rendered as TRL conversational ``messages`` rows.

    Targets are **train** answers, or (``wide_share``) allowed words that are no answer at all; a
    val or test answer is never a target.
    """
    cfg = config or SftConfig()
    words = words or load_word_lists()
    style = PromptStyle(cfg.style, think=cfg.think, max_turns=cfg.max_turns, length=words.length)
    mix = check_solver_mix(cfg.solver_mix)
    refused_kinds = check_refused_kinds(cfg.refused_kinds)
    kinds = list(refused_kinds)
    check_share("balance_share", cfg.balance_share)
    check_share("refused_share", cfg.refused_share)
    check_share("recall_share", cfg.recall_share)
    check_share("informative_second_share", cfg.informative_second_share)
    check_share(
        "random_second_share + informative_second_share",
        cfg.random_second_share + cfg.informative_second_share,
    )
    if cfg.lexicon_share < 0:
        raise DataError(f"lexicon_share must be at least 0, got {cfg.lexicon_share}")
    if cfg.informative_width < 1:
        raise DataError(f"informative_width must be at least 1, got {cfg.informative_width}")
    check_protocol(cfg.protocol)
    held_out = splits.held_out() if cfg.protocol == "strict" else set()
    entropy = EntropySolver(words)
    solvers = {
        name: entropy
        if name == "entropy"
        else make_solver(
            name, words, seed=cfg.seed, matrix=entropy.matrix, by_answer=entropy.by_answer
        )
        for name in mix
    }
    openers = strong_openers(entropy, cfg.n_openers)
    train = list(splits.train)
    if not train:
        raise DataError("the train split is empty")
    outside, wide = outside_targets(words, cfg.wide_share)
    rows = []
    names, weights = list(mix), list(mix.values())
    written = np.zeros(len(words.answers), dtype=np.int64)  # trained outputs per answer word so far
    n_recall = round(cfg.games * cfg.recall_share)
    for i in range(cfg.games - n_recall):
        rng = random.Random(f"{cfg.seed}:{i}")
        is_wide = wide is not None and rng.random() < cfg.wide_share
        if is_wide:
            answer = rng.choice(outside)
        else:
            answer = train[i % len(train)] if i < len(train) else rng.choice(train)
        if is_wide and not cfg.wide_answers_first:
            solver, teacher = wide, wide
        else:
            solver, teacher = solvers[rng.choices(names, weights)[0]], entropy
        balanced = not is_wide and cfg.balance_share > 0 and rng.random() < cfg.balance_share
        r = rng.random()
        first = None
        if solver.name == "search":  # the search solver plays clean games from its own opener
            random_second = informative = False
        else:
            if r < cfg.random_first_share:
                first = ("random_first", rng.choice(words.allowed))
            elif r < cfg.random_first_share + cfg.opener_share or solver.name == "random":
                # the random solver never opens with a random word
                first = ("opener", rng.choice(openers))
            u = rng.random()  # one draw decides both second-guess options, so neither adds a draw
            random_second = u < cfg.random_second_share
            informative = not random_second and u < (
                cfg.random_second_share + cfg.informative_second_share
            )

        def policy(
            history,
            rng,
            first=first,
            random_second=random_second,
            informative=informative,
            solver=solver,
            balanced=balanced,
            teacher=teacher,
            is_wide=is_wide,
        ):
            if is_wide and history and solver is not wide and len(entropy.candidates(history)) == 0:
                # no answer word fits any more: the solver over every allowed word finishes
                solver = teacher = wide
            if not history and first is not None:
                return first[1], ("explore" if first[0] == "random_first" else "solver"), teacher
            if len(history) == 1 and random_second:
                cands = teacher.candidates(history)
                return (
                    teacher.words.answers[int(cands[rng.randrange(len(cands))])],
                    "explore",
                    teacher,
                )
            if len(history) == 1 and informative:
                cands = entropy.candidates(history)
                if len(cands) > 2:  # where two or fewer fit, a candidate is the best move
                    top = np.argsort(-entropy.scores(cands), kind="stable")[: cfg.informative_width]
                    return words.allowed[int(top[rng.randrange(len(top))])], "solver", teacher
            if history and balanced:
                cands = entropy.candidates(history)
                rarest = cands[written[cands] == written[cands].min()]
                return words.answers[int(rarest[rng.randrange(len(rarest))])], "solver", entropy
            return solver.guess(history, rng), "solver", teacher

        refuse_at = rng.randrange(4) if rng.random() < cfg.refused_share else None
        history, reasons = play_traced(answer, policy, rng, cfg.max_turns - (refuse_at is not None))
        played = list(history)
        kind = kinds[0]
        # a single kind draws nothing: the same games as before
        if refuse_at is not None and len(kinds) > 1:
            kind = rng.choices(kinds, list(refused_kinds.values()))[0]
        # blends and repeats follow feedback: any later turn
        if refuse_at is not None and kind != "misspelt":
            refuse_at = rng.randrange(1, len(history)) if len(history) > 1 else None
        # a refused move costs a turn (lose_turn)
        if refuse_at is not None and refuse_at < len(history):
            text, msg, kind = _refused_move(
                style, entropy, history[:refuse_at], history[refuse_at][0], kind, rng
            )
            history.insert(refuse_at, (text, None, msg))
            reasons.insert(refuse_at, ("refused", None))
        else:
            refuse_at = None
        if cfg.balance_share > 0:  # only balanced games read the counts
            for turn, (reason, _) in zip(history, reasons):
                if reason == "solver" and words.is_answer(turn[0]):
                    written[words.answer_index[turn[0]]] += 1
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
                "split": "outside" if is_wide else "train",
                "solver": "wide"
                if is_wide
                else "balanced"
                if balanced and len(played) > 1
                else solver.name,
                "start": first[0] if first else "solver",
                "random_second": random_second,
                "refused_at": refuse_at,
                "refused_kind": kind if refuse_at is not None else None,
                "turns": len(history),
                "won": won,
                "history": [[g, pattern_to_str(p, words.length)] for g, p in played],
            }
        )
    recalled = splits.train if cfg.protocol == "strict" else None
    rows += recall_games(
        words, n_recall, style, cfg.seed, entropy, openers, cfg.max_turns, recalled=recalled
    )
    return rows + lexicon_exercises(words, round(cfg.games * cfg.lexicon_share), style, cfg.seed)


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


def check_refused_kinds(mix: dict[str, float]) -> dict[str, float]:
    """Validate ``{kind: weight}`` (kinds from :data:`REFUSED_KINDS`) and normalise the weights."""
    return check_named_mix(mix, "refused-move", REFUSED_KINDS)


def parse_refused_kinds(text: str) -> dict[str, float]:
    """``"blend:0.8,misspelt:0.2"`` -> ``{"blend": 0.8, "misspelt": 0.2}`` (weights are
    normalised)."""
    return check_refused_kinds(
        parse_pairs(text, "refused-move", str, "blend:0.7,misspelt:0.2,repeat:0.1")
    )
