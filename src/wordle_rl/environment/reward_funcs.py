"""Reward functions in TRL's batched form ``(completions, **kwargs) -> list[float]``, one per
reward component of :mod:`wordle_rl.environment.rewards`.

In multi-turn GRPO the rollout passes per-game values as ``episode_<name>`` keyword arguments and
each function returns those instead, so TRL logs every component separately.

    >>> win_reward(["<think>x</think><guess>crane</guess>"], answer=["crane"], history=[[]])
    [1.5]
    >>> format_reward(["<think>x</think><guess>crane</guess> ok?"], answer=["crane"])
    [0.0]
    >>> partial_credit_reward(["<think></think><guess>trace</guess>"], answer=["crane"])
    [0.7]

"""

from __future__ import annotations

from wordle_rl.environment.prompts import PromptStyle
from wordle_rl.environment.rewards import (
    COMPONENTS,
    RewardContext,
    as_history,
    completion_text,
    default_context,
)

__all__ = [
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
