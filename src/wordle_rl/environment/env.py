"""The multi-turn text environment a language model plays against (in-process; ``server.py`` serves
it).

    >>> env = WordleEnv(EnvConfig(style=PromptStyle("xml", think=False)), seed=0)
    >>> obs = env.reset(answer="crane")
    >>> obs.messages[-1]["role"], "crane" in str(obs.state)
    ('user', False)
    >>> step = env.step("<guess>slate</guess>")
    >>> step.info["pattern"], step.done
    ('XXGXG', False)
    >>> env.step("<guess>crane</guess>").info["answer"]
    'crane'

``reset(seed=None, answer=None, history=None)`` starts a game (a random answer from the env's own
RNG, or the one given, optionally after earlier ``(guess, pattern)`` turns);
``step(completion_text)`` parses the completion strictly, plays it, and returns the next
observation, the weighted reward, ``done`` and an ``info`` dict (parsed guess, pattern, error, turn,
every reward component). The answer appears in ``info`` only once the game is over, and never in an
observation before that.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import numpy as np

from wordle_rl.engine.game import pattern_to_str, score, str_to_pattern
from wordle_rl.engine.words import WordList
from wordle_rl.environment.parser import parse
from wordle_rl.environment.prompts import (
    PromptStyle,
    feedback_message,
    first_user_message,
    format_answer,
    invalid_message,
    system_prompt,
)
from wordle_rl.environment.rewards import (
    RewardContext,
    RewardWeights,
    combine,
    episode_components,
    turn_components,
)

__all__ = ["EnvConfig", "Observation", "StepResult", "WordleEnv", "INVALID_POLICIES"]

INVALID_POLICIES = ("lose_turn", "retry_once")


@dataclass
class EnvConfig:
    """Rules and presentation of a game."""

    max_turns: int = field(default=6, metadata={"help": "Guesses per game."})
    hard: bool = field(
        default=False, metadata={"help": "NYT hard mode: greens stay, revealed letters reused."}
    )
    invalid_policy: str = field(
        default="lose_turn",
        metadata={
            "help": "lose_turn: a refused move costs a turn; retry_once: the first refused move of "
            "a turn is free."
        },
    )
    style: PromptStyle = field(
        default_factory=PromptStyle, metadata={"help": "Prompt style (default tiles)."}
    )
    reward_weights: RewardWeights | str | dict = field(
        default="default", metadata={"help": "Reward preset name or weights per component."}
    )
    info_gain: bool = field(
        default=True, metadata={"help": "Compute the information-gain component each step."}
    )

    def __post_init__(self) -> None:
        if self.invalid_policy not in INVALID_POLICIES:
            raise ValueError(
                f"invalid_policy must be one of {INVALID_POLICIES}, got {self.invalid_policy!r}"
            )
        if self.max_turns < 1:
            raise ValueError(f"max_turns must be >= 1, got {self.max_turns}")
        if isinstance(self.style, str):
            self.style = PromptStyle(self.style, max_turns=self.max_turns)
        elif self.style.max_turns != self.max_turns:
            self.style = PromptStyle(
                self.style.name,
                self.style.think,
                self.style.hints,
                self.max_turns,
                self.style.length,
            )
        self.reward_weights = RewardWeights.from_any(self.reward_weights)


@dataclass
class Observation:
    messages: list[dict[str, str]]
    state: dict
    done: bool = False


@dataclass
class StepResult:
    observation: Observation
    reward: float
    done: bool
    info: dict


class WordleEnv:
    """One game at a time, with its own RNG. Not thread-safe; make one per concurrent game."""

    def __init__(
        self,
        config: EnvConfig | None = None,
        words: WordList | None = None,
        answers: list[str] | None = None,
        seed: int | None = None,
        ctx: RewardContext | None = None,
    ):
        self.config = config or EnvConfig()
        self.ctx = ctx or RewardContext(words)
        self.words = self.ctx.words
        self.answers = list(answers) if answers is not None else list(self.words.answers)
        bad = [a for a in self.answers if not self.words.is_allowed(a)]
        if bad:
            raise ValueError(f"{len(bad)} answer(s) not in the word list: {bad[:5]}")
        if not self.answers:
            raise ValueError("the answer pool is empty")
        self.rng = random.Random(seed)
        self._answer: str | None = None

    # ------------------------------------------------------------------ API
    def reset(
        self, seed: int | None = None, answer: str | None = None, history=None
    ) -> Observation:
        if seed is not None:
            self.rng = random.Random(seed)
        if answer is None:
            answer = self.answers[self.rng.randrange(len(self.answers))]
        answer = answer.strip().lower()
        if not self.words.is_allowed(answer):
            raise ValueError(f"answer {answer!r} is not in the word list")
        turns = self._checked_history(answer, history or [])
        self._answer = answer
        self.played: list[tuple[str, int]] = []
        self.history_view: list[dict[str, str]] = []
        self.turns_used = 0
        self.retry_pending = False
        self.turn_log: list[dict[str, float]] = []
        self.won = False
        self.cands = self.ctx.all_candidates
        st = self.config.style
        self.messages = [
            {"role": "system", "content": system_prompt(st)},
            {"role": "user", "content": first_user_message(st, self._hint())},
        ]
        for g, p in turns:
            self._play(g, p)
            self.messages.append({"role": "assistant", "content": format_answer(st, g)})
            self.messages.append(
                {
                    "role": "user",
                    "content": feedback_message(st, self.played, self.turns_used, self._hint()),
                }
            )
        return self._observation()

    def step(self, completion: str) -> StepResult:
        if self._answer is None:
            raise RuntimeError("call reset() before step()")
        if self.done:
            raise RuntimeError("the game is over; call reset() to start a new one")
        text = completion if isinstance(completion, str) else str(completion)
        st = self.config.style
        pr = parse(text, st, words=self.words, history=self.played, hard=self.config.hard)
        comps = turn_components(
            pr,
            self._answer,
            self.played,
            self.ctx,
            self.config.max_turns,
            cands=self.cands,
            info=self.config.info_gain,
        )
        self.messages.append({"role": "assistant", "content": text})
        info: dict = {
            "turn": self.turns_used + 1,
            "guess": pr.guess,
            "pattern": None,
            "error": pr.error,
            "message": pr.message,
            "format_ok": pr.format_ok,
            "components": comps,
        }
        if pr.ok:
            p = self.ctx.score(pr.guess, self._answer)
            self._play(pr.guess, p)
            info["pattern"] = pattern_to_str(p, self.words.length)
            self.retry_pending = False
            reply = feedback_message(st, self.played, self.turns_used, self._hint())
        else:
            free = self.config.invalid_policy == "retry_once" and not self.retry_pending
            if free:
                self.retry_pending = True
            else:
                self.turns_used += 1
                self.retry_pending = False
            info["turn_lost"] = not free
            reply = invalid_message(st, pr.message, self.turns_used, turn_lost=not free)
        self.turn_log.append(comps)
        reward = combine(comps, self.config.reward_weights)
        done = self.done
        if done:
            ep = episode_components(self.turn_log)
            info.update(
                answer=self._answer,
                won=self.won,
                turns=self.turns_used,
                episode_components=ep,
                episode_reward=combine(ep, self.config.reward_weights),
            )
        else:
            self.messages.append({"role": "user", "content": reply})
        return StepResult(self._observation(), reward, done, info)

    # ------------------------------------------------------------------ internals
    def _checked_history(self, answer: str, history) -> list[tuple[str, int]]:
        """Validate earlier turns, each a word or a ``(word, pattern)`` pair, before touching the
        current game (a bad reset changes nothing)."""
        out = []
        for k, turn in enumerate(history):
            if isinstance(turn, str):
                turn = (turn, None)
            if not isinstance(turn, (list, tuple)) or len(turn) != 2:
                raise ValueError(
                    f"history turn {k + 1}: {turn!r} is neither a word nor a (word, pattern) pair"
                )
            g, p = turn
            g = str(g).strip().lower()
            if not self.words.is_allowed(g):
                raise ValueError(f"history turn {k + 1}: {g!r} is not in the word list")
            p = (
                score(g, answer)
                if p is None
                else (str_to_pattern(p) if isinstance(p, str) else int(p))
            )
            if p != score(g, answer):
                raise ValueError(
                    f"history turn {g!r} has pattern {pattern_to_str(p, len(g))}, which does not "
                    f"match the answer"
                )
            if g == answer or k + 1 >= self.config.max_turns:
                raise ValueError("history already ends the game")
            out.append((g, p))
        return out

    @property
    def done(self) -> bool:
        return self.won or self.turns_used >= self.config.max_turns

    def _play(self, guess: str, pattern: int) -> None:
        self.played.append((guess, pattern))
        self.turns_used += 1
        row = self.ctx.matrix[self.words.allowed_index[guess]]
        if len(self.cands) == len(row):
            self.cands = np.flatnonzero(row == pattern)
        else:
            self.cands = self.cands[row[self.cands] == pattern]
        self.history_view.append({"guess": guess, "pattern": pattern_to_str(pattern, len(guess))})
        self.won = guess == self._answer

    def _hint(self) -> int | None:
        return len(self.cands) if self.config.style.hints else None

    def _observation(self) -> Observation:
        state = {
            "turn": self.turns_used,
            "max_turns": self.config.max_turns,
            "guesses_left": self.config.max_turns - self.turns_used,
            "history": list(self.history_view),
            "hard": self.config.hard,
            "done": self.done,
        }
        if self.done:
            state.update(won=self.won, answer=self._answer)
        return Observation(messages=list(self.messages), state=state, done=self.done)

    def candidates(self) -> np.ndarray:
        """Indices of answers consistent with the feedback so far (for solver policies and
        hints)."""
        return self.cands
