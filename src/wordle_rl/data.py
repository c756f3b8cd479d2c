"""Training data, generated offline and reproducibly: splits, solver traces for SFT, RL prompts, checks.

    wordle-rl data split --seed 0 --out data/splits.json [--rl-share 0.2]
    wordle-rl data sft --splits data/splits.json --games 20000 --style xml --out data/sft [--recall-share 0.2]
    wordle-rl data rl --splits data/splits.json --rows 4000 --depth-mix 0:0.4,1:0.3,2:0.2,3:0.1 --out data/rl
    wordle-rl data check data/sft/sft.jsonl --splits data/splits.json
    wordle-rl data stats data/sft/sft.jsonl

Honesty rules: only **train** answers are ever the target of a generated game (and, for RL rows, the answers of
the optional ``rl`` split: train answers held back from the SFT games, ``data split --rl-share``). The word lists
themselves are public, so solvers keep the whole answer list as candidates and val/test words may appear as guesses.
Recall games (``--recall-share``) target allowed words outside the answer list and stop where the solver
writes the only answer word that fits, every answer word alike (:func:`recall_games`). Word-pattern exercises
(``--lexicon-share``) are no games: each asks for any answer word with some letters in place, drawn alike from the
whole public answer list, and has no target.

Every ``<think>`` rationale is built from the real game state and states only checkable facts: what the
feedback proves (:class:`wordle_rl.prompts.Knowledge`), how many answers remain (re-scored), and why the
guess was chosen (how many groups it splits them into and its expected bits).
"""

from __future__ import annotations

import json
import random
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from wordle_rl.game import pattern_to_str, score, str_to_pattern
from wordle_rl.parser import parse
from wordle_rl.prompts import (
    DEFAULT_STYLE,
    STYLES,
    Knowledge,
    PromptStyle,
    format_answer,
    render_conversation,
    render_exercise,
)
from wordle_rl.solvers import SOLVERS, CandidateSolver, EntropySolver, entropies, make_solver
from wordle_rl.words import WordList, encode_words, load_word_lists, pattern_mask

__all__ = ["Splits", "SPLIT_NAMES", "RL_TARGET_SPLITS", "PROTOCOLS", "DataError", "SftConfig", "RlConfig",
           "make_splits",
           "rationale", "generate_sft", "recall_games", "lexicon_exercises", "is_exercise",
           "REFUSED_KINDS", "parse_refused_kinds", "check_refused_kinds",
           "generate_rl", "write_jsonl", "read_jsonl", "check_leakage", "stats", "save_dataset"]


class DataError(ValueError):
    """A data file is missing, malformed or leaks held-out answers; the message names file, line and reason."""


# --------------------------------------------------------------------------- splits
SPLIT_NAMES = ("train", "rl", "val", "test")
RL_TARGET_SPLITS = ("train", "rl")  # the splits whose answers an RL row may target


@dataclass
class Splits:
    """The answers cut into disjoint splits. ``train``: targets of SFT games (and of RL rows); ``rl``: answers held
    back from the SFT games, targets of RL rows only, so GRPO plays words the SFT model was never taught as
    answers, as val and test are (empty unless ``make_splits(rl_share=...)``); ``val``/``test``: never a target."""

    seed: int
    fractions: tuple[float, float, float]
    train: list[str]
    val: list[str]
    test: list[str]
    word_lists: str = ""
    rl: list[str] = field(default_factory=list)

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

    @property
    def _sets(self) -> dict[str, set[str]]:
        cache = self.__dict__.get("_cached_sets")
        if cache is None:
            cache = {name: set(getattr(self, name)) for name in SPLIT_NAMES}
            self.__dict__["_cached_sets"] = cache
        return cache

    def save(self, path: str | Path) -> None:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        d = {k: v for k, v in asdict(self).items()}
        path.write_text(json.dumps(d, indent=1) + "\n")

    @classmethod
    def load(cls, path: str | Path, words: WordList | None = None) -> Splits:
        path = Path(path)
        if not path.is_file():
            raise DataError(f"{path}: splits file not found (make one with `wordle-rl data split`)")
        try:
            d = json.loads(path.read_text())
            s = cls(seed=int(d["seed"]), fractions=tuple(d["fractions"]), train=list(d["train"]),
                    val=list(d["val"]), test=list(d["test"]), word_lists=d.get("word_lists", ""),
                    rl=list(d.get("rl", [])))
        except (json.JSONDecodeError, KeyError, TypeError, ValueError) as e:
            raise DataError(f"{path}: not a splits file ({type(e).__name__}: {e})") from e
        words = words or load_word_lists()
        all_words = s.train + s.rl + s.val + s.test
        if len(set(all_words)) != len(all_words):
            raise DataError(f"{path}: a word appears in more than one split")
        unknown = [w for w in all_words if not words.is_answer(w)]
        if unknown:
            raise DataError(f"{path}: {len(unknown)} split word(s) are not answers: {unknown[:5]}")
        return s


def make_splits(words: WordList | None = None, seed: int = 0,
                fractions: tuple[float, float, float] = (0.8, 0.1, 0.1), rl_share: float = 0.0) -> Splits:
    """Shuffle the answers with ``seed`` and cut them into train / val / test (sorted within each split).

    ``rl_share`` of the train part becomes the ``rl`` split (held back from SFT, RL targets only); val and test
    do not depend on it.
    """
    words = words or load_word_lists()
    if len(fractions) != 3 or any(f < 0 for f in fractions) or abs(sum(fractions) - 1) > 1e-9:
        raise DataError(f"split fractions must be three non-negative numbers summing to 1, got {fractions}")
    if not 0 <= rl_share < 1:
        raise DataError(f"rl_share must be at least 0 and below 1, got {rl_share}")
    order = list(words.answers)
    random.Random(seed).shuffle(order)
    n = len(order)
    n_val, n_test = round(n * fractions[1]), round(n * fractions[2])
    n_train = n - n_val - n_test
    n_rl = round(n_train * rl_share)
    return Splits(seed, tuple(fractions), sorted(order[n_rl:n_train]), sorted(order[n_train:n_train + n_val]),
                  sorted(order[n_train + n_val:]), words.digest[:20], sorted(order[:n_rl]))


# --------------------------------------------------------------------------- rationales
def rationale(solver: EntropySolver, history: list[tuple[str, int]], guess: str, reason: str = "solver") -> str:
    """A short, true explanation of ``guess`` in the state ``history``.

    Facts: what the feedback proves, how many answers remain (listed when at most 3), and how the guess splits
    them (groups and expected bits). ``reason="explore"`` marks a deliberately exploratory guess.
    """
    words = solver.words
    cands = solver.candidates(history)
    n = len(cands)
    parts = []
    known = Knowledge.from_history(history, words.length).describe()
    parts.extend(known if known else ["No feedback yet."])
    names = sorted(words.answers[i] for i in cands) if n <= 3 else []
    parts.append(f"Possible answers: {n}" + (f" ({', '.join(w.upper() for w in names)})." if n <= 3 else "."))
    gi = words.allowed_index[guess]
    ai = words.answer_index.get(guess)
    is_candidate = ai is not None and bool(np.any(cands == ai))
    groups = len(np.unique(solver.matrix[gi, cands]))
    bits = float(entropies(solver.matrix, solver.by_answer, cands, np.array([gi]))[0])
    if reason == "explore":
        parts.append(f"Exploring with {guess.upper()}: {groups} groups ({bits:.2f} bits).")
    elif n == 1:
        parts.append(f"Only {guess.upper()} fits.")
    elif is_candidate:
        parts.append(f"{guess.upper()} could be the answer and splits them into {groups} groups ({bits:.2f} bits).")
    else:
        parts.append(f"{guess.upper()} cannot be the answer but splits them into {groups} groups ({bits:.2f} bits).")
    return " ".join(parts)


# --------------------------------------------------------------------------- SFT games
@dataclass
class SftConfig:
    """How solver games for SFT are generated."""

    games: int = field(default=20000, metadata={"help": "Number of games."})
    seed: int = field(default=0, metadata={"help": "Seed of every random choice."})
    style: str = field(default=DEFAULT_STYLE, metadata={
        "help": f"Prompt style: {' | '.join(STYLES)}."})
    think: bool = field(default=True, metadata={"help": "Write a <think> rationale (xml/tiles/plain styles)."})
    solver_mix: dict[str, float] = field(default_factory=lambda: {"candidate": 0.8, "random": 0.2}, metadata={
        "help": "Share of games played by each solver (entropy, search, candidate, random); weights are normalised."})
    n_openers: int = field(default=12, metadata={"help": "Strong openers (top by entropy) to vary the start."})
    opener_share: float = field(default=0.3, metadata={"help": "Share of games starting with a varied opener."})
    random_first_share: float = field(default=0.2, metadata={
        "help": "Share of games whose first guess is a random allowed word (solver recovers)."})
    random_second_share: float = field(default=0.1, metadata={
        "help": "Share of games whose second guess is a random remaining candidate."})
    refused_share: float = field(default=0.15, metadata={
        "help": "Share of games showing one refused move (context, never imitated) and the environment's reply, so "
                "the model learns to carry on after an invalid move: a different word, never the refused one."})
    refused_kinds: dict[str, float] = field(default_factory=lambda: {"misspelt": 1.0}, metadata={
        "help": "Which refused moves are shown (kind:weight). misspelt: the next guess with one letter changed, or "
                "cut short, in the first 4 turns; blend: a non-word spliced from two words that fit the feedback "
                "so far (the kind of word a model invents for an answer it was never taught), at any turn after "
                "the first; repeat: an earlier guess again."})
    balance_share: float = field(default=0.0, metadata={
        "help": "Share of games whose guesses after the first are the remaining candidate written least often so "
                "far in this data (ties at random): evens out how often each answer word is a trained output, so "
                "held-out answers (never targets) are not rare outputs."})
    wide_share: float = field(default=0.0, metadata={
        "help": "Share of games whose target is an allowed guess word outside the answer list (so never a val or "
                "test answer), played by the candidate solver with every allowed word as a possible answer: the "
                "model must find words that fit the feedback instead of recalling the train answers."})
    wide_answers_first: bool = field(default=False, metadata={
        "help": "wide_share games are played by the solver mix, like the others, while an answer word still fits "
                "the feedback, and only then by the solver over every allowed word: imitated guesses then agree "
                "with the soft letter targets (fitting answer words), and the states are new ones, where the "
                "fitting answers may all be held-out words (never a target)."})
    recall_share: float = field(default=0.0, metadata={
        "help": "Share of the games that are recall games instead: a game on an allowed word outside the answer "
                "list (never a val or test answer) one or two letters away from an answer word W, played by the "
                "candidate solver and cut right after it writes W where W is the only answer word that fits. Every "
                "answer word alike under the open protocol: in the other games a held-out answer is never the only "
                "fitting word, the state where free play loses it."})
    protocol: str = field(default="open", metadata={
        "help": "open: recall games recall every public answer word alike; strict: only train answers, and no game "
                "ends on a val or test word (a lost game's trailing guesses of such words are cut), so no held-out "
                "word is ever the final move of a game (PROTOCOLS)."})
    lexicon_share: float = field(default=0.0, metadata={
        "help": "Word-pattern exercises added, as a share of the games: each asks for any answer word with 2-4 "
                "letters in place (drawn from the whole public answer list, every word alike; no game, no target) "
                "and answers one of the fitting words; with soft targets the whole set of fitting words is the "
                "target. Teaches the word list as words to spell."})
    max_turns: int = field(default=6, metadata={"help": "Guesses per game."})


REFUSED_KINDS = ("misspelt", "blend", "repeat")
PROTOCOLS = ("open", "strict")  # what SFT games may end on: see SftConfig.protocol and check_leakage


def _misspelt(words: WordList, near: str, rng: random.Random) -> str:
    """``near`` cut short, or with one letter changed so that it is no allowed word."""
    letters = "abcdefghijklmnopqrstuvwxyz"
    bad = near[: rng.randrange(1, len(near))] if rng.random() < 0.3 else near
    for _ in range(100):
        if bad != near:
            break
        k = rng.randrange(len(near))
        cand = near[:k] + rng.choice(letters) + near[k + 1:]
        if not words.is_allowed(cand):
            bad = cand
    return bad


def _blend(solver: EntropySolver, played: list, near: str, rng: random.Random) -> str | None:
    """A non-word spliced from ``near`` (or another answer word that fits ``played``) and a second fitting word.

    Where ``near`` is the only answer word that fits, the second word is an answer word that differs from it in at
    most two places. ``None`` when no splice is a non-word.
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


def _refused_move(style: PromptStyle, solver: EntropySolver, played: list, near: str, kind: str,
                  rng: random.Random) -> tuple[str, str, str]:
    """``(assistant text, error message, kind)`` of a plausible move that the environment refuses: of ``kind``, or
    misspelt where no blend exists."""
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


def _strong_openers(solver: EntropySolver, k: int) -> list[str]:
    h = solver.scores(np.arange(len(solver.words.answers)))
    return [solver.words.allowed[i] for i in np.argsort(-h, kind="stable")[:k]]


def _play_traced(answer: str, policy_turns, rng: random.Random, max_turns: int):
    """Play ``answer``: ``policy_turns(history, rng) -> (guess, reason, solver)`` each turn."""
    history, reasons = [], []
    for _ in range(max_turns):
        guess, reason, solver = policy_turns(history, rng)
        reasons.append((reason, rationale(solver, history, guess, reason)))
        history.append((guess, score(guess, answer)))
        if guess == answer:
            break
    return history, reasons


def wide_solver(words: WordList) -> CandidateSolver:
    """The candidate solver over a pool where every allowed word is a possible answer (for ``wide_share`` games)."""
    pool = WordList(answers=words.allowed, allowed=words.allowed, length=words.length,
                    name=f"{words.name}+allowed-as-answers")
    return CandidateSolver(pool)


def _outside_words(words: WordList, why: str) -> list[str]:
    """The allowed words outside the answer list (never a val or test answer); ``why`` names who needs them."""
    outside = [w for w in words.allowed if not words.is_answer(w)]
    if not outside:
        raise DataError(f"{why} needs allowed words outside the answer list; these lists have none")
    return outside


def _outside_targets(words: WordList, wide_share: float) -> tuple[list[str], CandidateSolver | None]:
    """For ``wide_share`` > 0: the allowed words outside the answer list and the solver that plays them."""
    _check_share("wide_share", wide_share)
    if wide_share == 0:
        return [], None
    return _outside_words(words, "wide_share"), wide_solver(words)


def _check_share(name: str, value: float) -> None:
    if not 0 <= value <= 1:
        raise DataError(f"{name} must be between 0 and 1, got {value}")


def generate_sft(splits: Splits, config: SftConfig | None = None, words: WordList | None = None) -> list[dict]:
    """Solver games rendered as TRL conversational ``messages`` rows.

    Targets are **train** answers, or (``wide_share``) allowed words that are no answer at all; a val or test
    answer is never a target.
    """
    cfg = config or SftConfig()
    words = words or load_word_lists()
    style = PromptStyle(cfg.style, think=cfg.think, max_turns=cfg.max_turns, length=words.length)
    mix = check_solver_mix(cfg.solver_mix)
    refused_kinds = check_refused_kinds(cfg.refused_kinds)
    kinds = list(refused_kinds)
    _check_share("balance_share", cfg.balance_share)
    _check_share("refused_share", cfg.refused_share)
    _check_share("recall_share", cfg.recall_share)
    if cfg.lexicon_share < 0:
        raise DataError(f"lexicon_share must be at least 0, got {cfg.lexicon_share}")
    _check_protocol(cfg.protocol)
    held_out = set(splits.val) | set(splits.test) if cfg.protocol == "strict" else set()
    entropy = EntropySolver(words)
    solvers = {name: entropy if name == "entropy" else
               make_solver(name, words, seed=cfg.seed, matrix=entropy.matrix, by_answer=entropy.by_answer)
               for name in mix}
    openers = _strong_openers(entropy, cfg.n_openers)
    train = list(splits.train)
    if not train:
        raise DataError("the train split is empty")
    outside, wide = _outside_targets(words, cfg.wide_share)
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
            random_second = False
        else:
            if r < cfg.random_first_share:
                first = ("random_first", rng.choice(words.allowed))
            elif r < cfg.random_first_share + cfg.opener_share or solver.name == "random":
                first = ("opener", rng.choice(openers))  # the random solver never opens with a random word
            random_second = rng.random() < cfg.random_second_share

        def policy(history, rng, first=first, random_second=random_second, solver=solver, balanced=balanced,
                   teacher=teacher, is_wide=is_wide):
            if is_wide and history and solver is not wide and len(entropy.candidates(history)) == 0:
                solver = teacher = wide  # no answer word fits any more: the solver over every allowed word finishes
            if not history and first is not None:
                return first[1], ("explore" if first[0] == "random_first" else "solver"), teacher
            if len(history) == 1 and random_second:
                cands = teacher.candidates(history)
                return teacher.words.answers[int(cands[rng.randrange(len(cands))])], "explore", teacher
            if history and balanced:
                cands = entropy.candidates(history)
                rarest = cands[written[cands] == written[cands].min()]
                return words.answers[int(rarest[rng.randrange(len(rarest))])], "solver", entropy
            return solver.guess(history, rng), "solver", teacher

        refuse_at = rng.randrange(4) if rng.random() < cfg.refused_share else None
        history, reasons = _play_traced(answer, policy, rng, cfg.max_turns - (refuse_at is not None))
        played = list(history)
        kind = kinds[0]
        if refuse_at is not None and len(kinds) > 1:  # a single kind draws nothing: the same games as before
            kind = rng.choices(kinds, list(refused_kinds.values()))[0]
        if refuse_at is not None and kind != "misspelt":  # blends and repeats follow feedback: any later turn
            refuse_at = rng.randrange(1, len(history)) if len(history) > 1 else None
        if refuse_at is not None and refuse_at < len(history):  # a refused move costs a turn (lose_turn)
            text, msg, kind = _refused_move(style, entropy, history[:refuse_at], history[refuse_at][0], kind, rng)
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
            if reason in ("explore", "refused"):  # shown as context, never imitated (see the chat template)
                messages[2 + 2 * k]["train"] = False
        won = played[-1][0] == answer
        if won:
            messages = messages[:-1]  # the conversation ends on the winning guess
        if not won and held_out:
            played, history, messages = _cut_held_out(played, history, messages, held_out)
            if not played:
                continue
            refuse_at = refuse_at if refuse_at is not None and refuse_at < len(history) else None
        rows.append({
            "messages": messages, "answer": answer, "split": "outside" if is_wide else "train",
            "solver": "wide" if is_wide else "balanced" if balanced and len(played) > 1 else solver.name,
            "start": first[0] if first else "solver", "random_second": random_second, "refused_at": refuse_at,
            "refused_kind": kind if refuse_at is not None else None,
            "turns": len(history), "won": won,
            "history": [[g, pattern_to_str(p, words.length)] for g, p in played],
        })
    recalled = splits.train if cfg.protocol == "strict" else None
    rows += recall_games(words, n_recall, style, cfg.seed, entropy, openers, cfg.max_turns, recalled=recalled)
    return rows + lexicon_exercises(words, round(cfg.games * cfg.lexicon_share), style, cfg.seed)


def _cut_held_out(played: list, history: list, messages: list[dict], held_out: set[str]) -> tuple[list, list, list]:
    """The strict protocol's lost game: its trailing guesses of held-out words cut, with any refused move after the
    last one kept, so that the game never ends on a val or test word.

    >>> h = [("crane", 0), ("bad", None, "not a word"), ("slate", 0)]
    >>> _cut_held_out([("crane", 0), ("slate", 0)], h, list(range(8)), {"slate"})
    ([('crane', 0)], [('crane', 0)], [0, 1, 2, 3])
    """
    while played and played[-1][0] in held_out:
        played, keep = played[:-1], 0
        if played:  # everything up to the last played guess left, refused moves before it included
            keep = 1 + max(i for i, t in enumerate(history) if len(t) == 2 and t[0] == played[-1][0])
        history, messages = history[:keep], messages[:2 + 2 * keep]
    return played, history, messages


def _outside_neighbours(words: WordList) -> dict[str, list[str]]:
    """For each answer word, the allowed words outside the answer list one letter away (else two; else none)."""
    outside = _outside_words(words, "recall_share")
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


def recall_games(words: WordList, n: int, style: PromptStyle, seed: int = 0, entropy: EntropySolver | None = None,
                 openers: list[str] | None = None, max_turns: int = 6, tries: int = 20,
                 recalled: list[str] | None = None) -> list[dict]:
    """``n`` recall games: each plays an allowed word T outside the answer list (never a val or test answer) that is
    one or two letters away from an answer word W, with the candidate solver (from a strong opener or its own), and
    ends right after the solver writes W in the state where W is the only answer word that fits the feedback.

    The words W are the whole public answer list (or only the answer words in ``recalled``: the strict protocol
    passes the train split) in an order shuffled with ``seed``, taken in turn, every word alike; a word is passed
    over when ``tries`` games all rule it out before it is the only fit.
    The state is the one where free play loses held-out answers: the other games, all on train answers, never
    reach a state where a held-out word is the only answer that fits.

    >>> rows = recall_games(load_word_lists(), 2, PromptStyle("tiles", think=False))
    >>> [(r["split"], r["won"], r["history"][-1][0] == r["recall"], r["answer"] != r["recall"]) for r in rows]
    [('outside', False, True, True), ('outside', False, True, True)]
    """
    if n == 0:
        return []
    entropy = entropy or EntropySolver(words)
    teacher = CandidateSolver(words)
    openers = openers or _strong_openers(entropy, 12)
    near = _outside_neighbours(words)
    keep = set(recalled) if recalled is not None else None
    order = [w for w in words.answers if w in near and (keep is None or w in keep)]
    if not order:
        raise DataError("recall_share needs allowed words outside the answer list one or two letters from an answer "
                        "word; these lists have none")
    random.Random(seed).shuffle(order)
    rows: list[dict] = []
    k = last_found = 0
    while len(rows) < n:
        if k - last_found >= len(order):
            raise DataError(f"recall games: no answer word became the only fit within {max_turns} turns in "
                            f"{tries} tries each over a whole pass of the {len(order)} words; raise max_turns")
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
        thinks = ([rationale(entropy, history[:t], g) for t, (g, _) in enumerate(history)]
                  if style.uses_think else None)
        rows.append({
            "messages": render_conversation(style, history, thinks=thinks)[:-1],  # ends on W, before its feedback
            "answer": target, "split": "outside", "solver": "recall", "recall": word, "start": "solver",
            "random_second": False, "refused_at": None, "refused_kind": None, "turns": len(history), "won": False,
            "history": [[g, pattern_to_str(p, words.length)] for g, p in history],
        })
    return rows


def is_exercise(row: dict) -> bool:
    """Whether a row is a word-pattern exercise (:func:`lexicon_exercises`) rather than a game."""
    return row.get("lexicon") is not None


def lexicon_exercises(words: WordList, n: int, style: PromptStyle, seed: int = 0) -> list[dict]:
    """``n`` word-pattern exercises: a word drawn from the whole answer list shows 2-4 of its letters in place (2 to
    all but one), and the answer is a random answer word with those letters (the drawn word or another one).

    The split plays no part: every public answer word is drawn and answered alike, and no exercise is a game.

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
        shown = set(rng.sample(range(words.length), rng.choice(range(min(2, words.length - 1), words.length))))
        pattern = "".join(c if j in shown else "_" for j, c in enumerate(drawn))
        fits = np.flatnonzero(pattern_mask(codes, pattern))
        word = words.answers[int(fits[rng.randrange(len(fits))])]
        rows.append({"messages": render_exercise(style, pattern, word), "lexicon": {"pattern": pattern, "word": word},
                     "history": [], "refused_at": None})
    return rows


# --------------------------------------------------------------------------- RL prompts
@dataclass
class RlConfig:
    """How RL prompt rows ``{answer, history, prompt}`` are generated."""

    rows: int = field(default=4000, metadata={"help": "Number of rows."})
    seed: int = field(default=0, metadata={"help": "Seed of every random choice."})
    split: str = field(default="train", metadata={
        "help": "Which split's answers are targets: train, or rl (train answers held back from the SFT games)."})
    depth_mix: dict[int, float] = field(default_factory=lambda: {0: 0.4, 1: 0.3, 2: 0.2, 3: 0.1}, metadata={
        "help": "Probability of each history depth (earlier turns already played), 0-4."})
    random_move_share: float = field(default=0.0, metadata={
        "help": "Share of history moves that are random candidates instead of solver moves (mixed histories)."})
    wide_share: float = field(default=0.0, metadata={
        "help": "Share of rows whose target is an allowed word outside the answer list (never a val or test "
                "answer; histories from the candidate solver over every allowed word): games on words the model "
                "was never taught as answers, like the held-out ones."})
    style: str = field(default=DEFAULT_STYLE, metadata={"help": "Prompt style for the rendered prompt."})
    think: bool = field(default=True, metadata={"help": "Style expects <think>."})
    max_turns: int = field(default=6, metadata={"help": "Guesses per game."})


def _parse_pairs(text: str, what: str, key, example: str) -> dict:
    """``"a:1,b:2"`` -> ``{key("a"): 1.0, key("b"): 2.0}``; a clear :class:`DataError` when it does not parse."""
    try:
        return {key(k.strip()): float(v) for k, v in (part.split(":") for part in text.split(",") if part.strip())}
    except ValueError as e:
        raise DataError(f"bad {what} mix {text!r}: use {what}:weight pairs like {example}") from e


def _check_weights(mix: dict, what: str, rule: str) -> None:
    if not mix or any(w < 0 for w in mix.values()) or sum(mix.values()) <= 0:
        raise DataError(f"bad {what} mix {mix}: {rule}, weights >= 0, not all zero")


def _check_named_mix(mix: dict[str, float], what: str, known) -> dict[str, float]:
    """Validate ``{name: weight}`` against the ``known`` names and normalise the weights (order kept, zeros dropped)."""
    unknown = sorted(set(mix) - set(known))
    if unknown:
        raise DataError(f"bad {what} mix {mix}: unknown {what}(s) {', '.join(unknown)}; known: {sorted(known)}")
    _check_weights(mix, what, f"{what}s from {sorted(known)}")
    total = sum(mix.values())
    return {k: w / total for k, w in mix.items() if w > 0}


def check_solver_mix(mix: dict[str, float]) -> dict[str, float]:
    """Validate ``{solver: weight}`` and normalise the weights (order kept, zero weights dropped)."""
    return _check_named_mix(mix, "solver", SOLVERS)


def parse_solver_mix(text: str) -> dict[str, float]:
    """``"candidate:0.7,random:0.3"`` -> ``{"candidate": 0.7, "random": 0.3}`` (weights are normalised)."""
    return check_solver_mix(_parse_pairs(text, "solver", str, "entropy:0.75,search:0.25"))


def check_refused_kinds(mix: dict[str, float]) -> dict[str, float]:
    """Validate ``{kind: weight}`` (kinds from :data:`REFUSED_KINDS`) and normalise the weights."""
    return _check_named_mix(mix, "refused-move", REFUSED_KINDS)


def parse_refused_kinds(text: str) -> dict[str, float]:
    """``"blend:0.8,misspelt:0.2"`` -> ``{"blend": 0.8, "misspelt": 0.2}`` (weights are normalised)."""
    return check_refused_kinds(_parse_pairs(text, "refused-move", str, "blend:0.7,misspelt:0.2,repeat:0.1"))


def check_depth_mix(mix: dict[int, float]) -> dict[int, float]:
    """Validate ``{depth: weight}`` (depths 0-4) and normalise the weights, sorted by depth."""
    if any(d < 0 or d > 4 for d in mix):
        raise DataError(f"bad depth mix {mix}: depths must be 0-4")
    _check_weights(mix, "depth", "depths 0-4")
    total = sum(mix.values())
    return {d: w / total for d, w in sorted(mix.items())}


def parse_depth_mix(text: str) -> dict[int, float]:
    """``"0:0.4,1:0.3,2:0.3"`` -> ``{0: 0.4, 1: 0.3, 2: 0.3}`` (weights are normalised)."""
    return check_depth_mix(_parse_pairs(text, "depth", int, "0:0.5,1:0.5"))


def generate_rl(splits: Splits, config: RlConfig | None = None, words: WordList | None = None) -> list[dict]:
    """RL prompt rows: an answer of the chosen split (or, ``wide_share``, an allowed word outside the answer list)
    and 0-4 earlier turns (never already solved)."""
    cfg = config or RlConfig()
    words = words or load_word_lists()
    answers = splits.answers(cfg.split)
    if not answers:
        raise DataError(f"split {cfg.split!r} is empty" + (" (make one with `wordle-rl data split --rl-share`)"
                                                           if cfg.split == "rl" else ""))
    mix = check_depth_mix(cfg.depth_mix)
    style = PromptStyle(cfg.style, think=cfg.think, max_turns=cfg.max_turns, length=words.length)
    entropy = EntropySolver(words)
    outside, wide = _outside_targets(words, cfg.wide_share)
    rows = []
    depths, weights = list(mix), list(mix.values())
    for i in range(cfg.rows):
        rng = random.Random(f"rl:{cfg.seed}:{i}")
        is_wide = wide is not None and rng.random() < cfg.wide_share
        if is_wide:
            answer, solver, pool = rng.choice(outside), wide, words.allowed
        else:
            answer = answers[i % len(answers)] if i < len(answers) else rng.choice(answers)
            solver, pool = entropy, words.answers
        depth = rng.choices(depths, weights)[0]
        history: list[tuple[str, int]] = []
        for _ in range(depth):
            if history and rng.random() < cfg.random_move_share:
                cands = solver.candidates(history)
                guess = pool[int(cands[rng.randrange(len(cands))])]
            else:
                guess = solver.guess(history)
            if guess == answer:
                break  # a history never contains the win
            history.append((guess, score(guess, answer)))
        prompt = render_conversation(style, history)
        rows.append({"answer": answer, "split": "outside" if is_wide else cfg.split, "depth": len(history),
                     "history": [[g, pattern_to_str(p, words.length)] for g, p in history], "prompt": prompt})
    return rows


# --------------------------------------------------------------------------- files, checks, stats
def write_jsonl(rows: list[dict], path: str | Path) -> None:
    """Deterministic JSONL (sorted keys, no floats formatting surprises): same rows -> same bytes."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row, sort_keys=True, ensure_ascii=False) + "\n")


def read_jsonl(path: str | Path) -> list[dict]:
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: file not found")
    rows = []
    for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            raise DataError(f"{path}:{lineno}: not valid JSON ({e.msg})") from e
        if not isinstance(row, dict):
            raise DataError(f"{path}:{lineno}: expected a JSON object, got {type(row).__name__}")
        row["_line"] = lineno
        rows.append(row)
    return rows


def validate_rows(rows: list[dict], source: str, words: WordList | None = None, allow_outside: bool = False) -> None:
    """Schema and word checks: every row needs an ``answer`` in the answer list and a well-formed history.

    ``allow_outside`` also accepts targets that are allowed words outside the answer list (SFT games and RL rows
    made with ``wide_share``; no split's answer, so never a val or test answer).
    """
    words = words or load_word_lists()
    problems = []
    for k, row in enumerate(rows):
        where = f"{source}:{row.get('_line', k + 1)}"
        if is_exercise(row):
            problems += _exercise_problems(row["lexicon"], where, words)
            continue
        ans = row.get("answer")
        if not isinstance(ans, str):
            problems.append(f"{where}: missing 'answer' (string)")
            continue
        if not (words.is_answer(ans) or (allow_outside and words.is_allowed(ans))):
            problems.append(f"{where}: answer {ans!r} is not in the answer list"
                            + (" nor the allowed list" if allow_outside else ""))
        hist = row.get("history", [])
        if not isinstance(hist, list):
            problems.append(f"{where}: 'history' must be a list of [guess, pattern]")
            continue
        for turn in hist:
            if not (isinstance(turn, list | tuple) and len(turn) == 2 and isinstance(turn[0], str)):
                problems.append(f"{where}: history entry {turn!r} is not [guess, pattern]")
                break
            if not words.is_allowed(turn[0]):
                problems.append(f"{where}: history guess {turn[0]!r} is not in the word list")
                break
            try:
                str_to_pattern(turn[1]) if isinstance(turn[1], str) else int(turn[1])
            except (ValueError, TypeError):
                problems.append(f"{where}: history pattern {turn[1]!r} is not a pattern like GYXXG")
                break
        if "messages" in row and not (isinstance(row["messages"], list) and all(
                isinstance(m, dict) and "role" in m and "content" in m for m in row["messages"])):
            problems.append(f"{where}: 'messages' must be a list of {{role, content}} objects")
    if problems:
        raise DataError(f"{len(problems)} problem(s):\n" + "\n".join(problems[:50]))


def _exercise_problems(lex, where: str, words: WordList) -> list[str]:
    """What is wrong with a word-pattern exercise's ``lexicon`` field (nothing: ``[]``)."""
    if not (isinstance(lex, dict) and isinstance(lex.get("pattern"), str) and isinstance(lex.get("word"), str)):
        return [f"{where}: 'lexicon' must be {{pattern, word}} strings, got {lex!r}"]
    pattern, word = lex["pattern"], lex["word"]
    if not words.is_answer(word):
        return [f"{where}: exercise word {word!r} is not in the answer list"]
    if len(pattern) != len(word) or any(p not in ("_", c) for p, c in zip(pattern, word)):
        return [f"{where}: exercise word {word!r} does not fit its pattern {pattern!r}"]
    return []


def _check_protocol(protocol: str) -> None:
    if protocol not in PROTOCOLS:
        raise DataError(f"protocol must be one of {', '.join(PROTOCOLS)}, got {protocol!r}")


def check_leakage(rows: list[dict], splits: Splits, source: str = "<rows>",
                  allowed_split: str | tuple[str, ...] = "train", allow_outside: bool = False,
                  protocol: str = "open") -> int:
    """Fail loudly if any row's target answer is outside ``allowed_split`` (a name or a tuple of names); returns
    the number of rows checked.

    ``allow_outside`` accepts targets that belong to no split (words outside the answer list, so never a val or
    test answer; check them with :func:`validate_rows`). Word-pattern exercises have no target and pass. Under the
    ``strict`` protocol a game may not end on a val or test word either: a recall game recalling one, or a game
    whose last played guess is one, is refused.
    """
    _check_protocol(protocol)
    allowed = (allowed_split,) if isinstance(allowed_split, str) else tuple(allowed_split)
    bad = []
    for k, row in enumerate(rows):
        if is_exercise(row):
            continue
        where = f"{source}:{row.get('_line', k + 1)}"
        split = splits.split_of(row.get("answer", ""))
        if split not in allowed and not (allow_outside and split is None):
            bad.append(f"{where}: target {row.get('answer')!r} is in the {split or 'no'} split")
        last = (row.get("history") or [[None]])[-1][0]  # a recall game's last guess is the word it recalls
        if protocol == "strict" and splits.split_of(last or "") in ("val", "test"):
            what = "recall game ends" if row.get("recall") else "ends"
            bad.append(f"{where}: {what} on {last!r}, a {splits.split_of(last)} answer (strict protocol)")
    if bad:
        raise DataError(f"LEAKAGE: {len(bad)} row(s) target answers outside the {' / '.join(allowed)} split"
                        + (" or end on a val/test word" if protocol == "strict" else "") + ":\n"
                        + "\n".join(bad[:50]))
    return len(rows)


def stats(rows: list[dict], splits: Splits | None = None) -> dict:
    """Counts, turn distribution, history-depth mix, split membership, win rate, solver mix (of the games; word-pattern
    exercises are only counted)."""
    out: dict = {"rows": len(rows)}
    games = [r for r in rows if not is_exercise(r)]
    if len(games) < len(rows):
        out["exercises"] = len(rows) - len(games)
    rows = games
    out["distinct_answers"] = len({r.get("answer") for r in rows})
    if rows and "turns" in rows[0]:
        out["turns"] = dict(sorted(Counter(r["turns"] for r in rows).items()))
        out["won"] = sum(bool(r.get("won")) for r in rows)
    if rows and "refused_at" in rows[0]:
        out["refused_move_shown"] = sum(r["refused_at"] is not None for r in rows)
    if rows and "refused_kind" in rows[0]:
        out["refused_kind"] = dict(sorted(Counter(r["refused_kind"] for r in rows if r["refused_kind"]).items()))
    if rows and "depth" in rows[0]:
        out["history_depth"] = dict(sorted(Counter(r["depth"] for r in rows).items()))
    for key in ("solver", "start", "status"):
        if rows and key in rows[0]:
            out[key] = dict(sorted(Counter(str(r[key]) for r in rows).items()))
    if splits is not None:
        out["split_membership"] = dict(sorted(Counter(splits.split_of(r.get("answer", "")) or "none"
                                                      for r in rows).items()))
    return out


def save_dataset(rows: list[dict], out_dir: str | Path, name: str) -> Path:
    """Write ``out_dir/name.jsonl`` and a Hugging Face ``datasets`` copy in ``out_dir/hf`` (save_to_disk)."""
    from datasets import Dataset
    from datasets.utils.logging import disable_progress_bar

    disable_progress_bar()
    out_dir = Path(out_dir)
    write_jsonl(rows, out_dir / f"{name}.jsonl")
    keys = list(dict.fromkeys(k for r in rows for k in r if not k.startswith("_")))  # games and exercises alike
    Dataset.from_list([{k: r.get(k) for k in keys} for r in rows]).save_to_disk(str(out_dir / "hf"))
    return out_dir / f"{name}.jsonl"
