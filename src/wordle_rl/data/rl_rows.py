"""RL prompt rows: an answer and 0-4 earlier turns, rendered as the prompt GRPO starts from.

wordle-rl data rl --splits data/splits.json --rows 4000 --depth_mix 0:0.4,1:0.3,2:0.2,3:0.1 \
    --out data/rl
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from wordle_rl.data.files import DataError, check_weights, parse_pairs
from wordle_rl.data.splits import Splits
from wordle_rl.data.traces import outside_targets
from wordle_rl.engine.game import pattern_to_str, score
from wordle_rl.engine.solvers import EntropySolver
from wordle_rl.engine.words import WordList, load_word_lists
from wordle_rl.environment.prompts import (
    DEFAULT_STYLE,
    PromptStyle,
    render_conversation,
)

__all__ = ["RlConfig", "check_depth_mix", "parse_depth_mix", "generate_rl"]


# --------------------------------------------------------------------------- RL prompts
@dataclass
class RlConfig:
    """How RL prompt rows ``{answer, history, prompt}`` are generated."""

    rows: int = field(default=4000, metadata={"help": "Number of rows."})
    seed: int = field(default=0, metadata={"help": "Seed of every random choice."})
    depth_mix: str = field(
        default="0:0.4,1:0.3,2:0.2,3:0.1",
        metadata={
            "help": "Probability of each history depth (earlier turns already played, 0-4), as "
            "depth:weight,..."
        },
    )
    random_move_share: float = field(
        default=0.0,
        metadata={
            "help": "Share of history moves that are random candidates instead of solver moves "
            "(mixed histories)."
        },
    )
    wide_share: float = field(
        default=1.0,
        metadata={
            "help": "Share of rows whose target is an allowed word outside the answer list (never "
            "a val or test answer; histories from the candidate solver over every allowed word): "
            "games on words the model was never taught as answers, like the held-out ones, reach "
            "the recall states the moves rollout trains at."
        },
    )
    style: str = field(
        default=DEFAULT_STYLE, metadata={"help": "Prompt style for the rendered prompt."}
    )
    think: bool = field(default=False, metadata={"help": "Style expects <think>."})
    max_turns: int = field(default=6, metadata={"help": "Guesses per game."})

    def __post_init__(self) -> None:
        parse_depth_mix(self.depth_mix)  # a bad mix is refused when the config is made


def check_depth_mix(mix: dict[int, float]) -> dict[int, float]:
    """Validate ``{depth: weight}`` (depths 0-4) and normalise the weights, sorted by depth."""
    if any(d < 0 or d > 4 for d in mix):
        raise DataError(f"bad depth mix {mix}: depths must be 0-4")
    check_weights(mix, "depth", "depths 0-4")
    total = sum(mix.values())
    return {d: w / total for d, w in sorted(mix.items())}


def parse_depth_mix(text: str) -> dict[int, float]:
    """``"0:0.4,1:0.3,2:0.3"`` -> ``{0: 0.4, 1: 0.3, 2: 0.3}`` (weights are normalised)."""
    return check_depth_mix(parse_pairs(text, "depth", int, "0:0.5,1:0.5"))


def generate_rl(
    splits: Splits, config: RlConfig | None = None, words: WordList | None = None
) -> list[dict]:
    """RL prompt rows: a train answer (or, ``wide_share``, an allowed word outside
    the answer list) and 0-4 earlier turns (never already solved)."""
    cfg = config or RlConfig()
    words = words or load_word_lists()
    answers = splits.train
    if not answers:
        raise DataError("the train split is empty")
    mix = parse_depth_mix(cfg.depth_mix)
    style = PromptStyle(cfg.style, think=cfg.think, max_turns=cfg.max_turns, length=words.length)
    entropy = EntropySolver(words)
    outside, wide = outside_targets(words, cfg.wide_share)
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
        rows.append(
            {
                "answer": answer,
                "split": "outside" if is_wide else "train",
                "depth": len(history),
                "history": [[g, pattern_to_str(p, words.length)] for g, p in history],
                "prompt": prompt,
            }
        )
    return rows
