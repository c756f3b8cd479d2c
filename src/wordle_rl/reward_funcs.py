"""Reward functions in TRL's batched form ``(completions, **kwargs) -> list[float]``, one per
reward component of :mod:`wordle_rl.rewards`, and the curriculum that moves their weights.

In multi-turn GRPO the rollout passes per-game values as ``episode_<name>`` keyword arguments and
each function returns those instead, so TRL logs every component separately.

    >>> win_reward(["<think>x</think><guess>crane</guess>"], answer=["crane"], history=[[]])
    [1.5]
    >>> format_reward(["<think>x</think><guess>crane</guess> ok?"], answer=["crane"])
    [0.0]
    >>> partial_credit_reward(["<think></think><guess>trace</guess>"], answer=["crane"])
    [0.7]

:class:`RewardCurriculum` moves weights from format-heavy to strategy-heavy by step or by measured
format compliance.
"""

from __future__ import annotations

from dataclasses import dataclass

from wordle_rl.prompts import PromptStyle
from wordle_rl.rewards import (
    COMPONENTS,
    RewardContext,
    RewardWeights,
    as_history,
    completion_text,
    default_context,
)

__all__ = [
    "RewardCurriculum",
    "make_reward_funcs",
    "win_reward",
    "format_reward",
    "valid_word_reward",
    "partial_credit_reward",
    "repetition_reward",
    "consistency_reward",
    "info_gain_reward",
    "invalid_move_reward",
    "REWARD_FUNCS",
]


@dataclass
class RewardCurriculum:
    """Weights that move from ``start`` to ``end``: by training step, or by measured format
    compliance.

    >>> from wordle_rl.rewards import PRESETS
    >>> cur = RewardCurriculum("format", "strategy", mode="step", steps=100)
    >>> cur.weights(step=0) == PRESETS["format"], cur.weights(step=100) == PRESETS["strategy"]
    (True, True)
    """

    start: str | dict = "format"
    end: str | dict = "strategy"
    mode: str = "step"
    steps: int = 1000
    compliance_low: float = 0.5
    compliance_high: float = 0.95

    def __post_init__(self) -> None:
        if self.mode not in ("step", "compliance"):
            raise ValueError(f"curriculum mode must be 'step' or 'compliance', got {self.mode!r}")
        if self.steps <= 0 or not 0 <= self.compliance_low < self.compliance_high <= 1:
            raise ValueError(
                "curriculum needs steps > 0 and 0 <= compliance_low < compliance_high <= 1"
            )
        self._a = RewardWeights.from_any(self.start)
        self._b = RewardWeights.from_any(self.end)

    def progress(self, step: int = 0, compliance: float | None = None) -> float:
        if self.mode == "step":
            return min(1.0, max(0.0, step / self.steps))
        c = 0.0 if compliance is None else compliance
        return min(
            1.0, max(0.0, (c - self.compliance_low) / (self.compliance_high - self.compliance_low))
        )

    def weights(self, step: int = 0, compliance: float | None = None) -> RewardWeights:
        t = self.progress(step, compliance)
        a, b = self._a.as_dict(), self._b.as_dict()
        return RewardWeights(**{k: round((1 - t) * a[k] + t * b[k], 12) for k in a})


def _batched(
    name: str,
    style: PromptStyle | str = "xml",
    hard: bool = False,
    max_turns: int = 6,
    ctx: RewardContext | None = None,
):
    st = PromptStyle(style) if isinstance(style, str) else style

    def reward(completions, answer=None, history=None, **kwargs) -> list[float]:
        ep = kwargs.get(f"episode_{name}")
        if ep is not None:
            return [float(x) for x in ep]
        c = ctx or default_context()
        n = len(completions)
        answers = [answer] * n if answer is None or isinstance(answer, str) else list(answer)
        histories = [None] * n if history is None else list(history)
        if len(answers) != n or len(histories) != n:
            raise ValueError(
                f"{name}_reward: got {n} completions but {len(answers)} answers and "
                f"{len(histories)} histories; pass one per completion"
            )
        if name in ("win", "partial") and any(a is None for a in answers):
            raise ValueError(f"{name}_reward needs the 'answer' column")
        out = []
        for comp, ans, hist in zip(completions, answers, histories):
            comps = c.turn(
                completion_text(comp),
                ans or "",
                as_history(hist),
                st,
                hard,
                max_turns,
                info=name == "info_gain",
            )
            out.append(float(comps[name]))
        return out

    reward.__name__ = f"{name}_reward"
    return reward


def make_reward_funcs(
    style: PromptStyle | str = "xml",
    hard: bool = False,
    max_turns: int = 6,
    ctx: RewardContext | None = None,
    components=COMPONENTS,
) -> list:
    """Named batched reward functions, one per component, bound to a style and rules (for
    ``GRPOTrainer``)."""
    return [_batched(c, style, hard, max_turns, ctx) for c in components]


(
    win_reward,
    format_reward,
    valid_word_reward,
    partial_credit_reward,
    repetition_reward,
    consistency_reward,
    info_gain_reward,
    invalid_move_reward,
) = make_reward_funcs()
REWARD_FUNCS = [
    win_reward,
    format_reward,
    valid_word_reward,
    partial_credit_reward,
    repetition_reward,
    consistency_reward,
    info_gain_reward,
    invalid_move_reward,
]
