"""Wordle as a tool-calling environment for TRL's ``GRPOTrainer(environment_factory=...)``.

    wordle-rl grpo --model Qwen/Qwen3-1.7B --data data/rl --rollout tools \\
        --output-dir runs/grpo-tools

For chat models whose template renders tool calls (Qwen3, Llama 3.1, ...): each rollout gets one
:class:`WordleToolEnv`; TRL calls ``reset`` with the row's fields, exposes ``guess`` to the model as
a tool, runs the model's tool calls until it answers without one (or
``max_tool_calling_iterations``), and scores the episode with ``get_reward``: the strict game return
of :func:`wordle_rl.environment.rewards.game_return` (a win in k turns ``7 - k``, a loss or an
unfinished game 0, a refused guess costs its turn). With ``--env-url`` each game is played on a
``wordle-rl serve`` server through OpenEnv's client instead of in-process. The embedded default
model has no tool-calling template and plays through the ``game`` or ``moves`` rollouts instead.
"""

from __future__ import annotations

from wordle_rl.environment.env import EnvConfig, WordleEnv
from wordle_rl.environment.rewards import RewardContext, game_return

__all__ = ["WordleToolEnv", "tool_env_factory", "TOOL_SYSTEM_PROMPT"]

TOOL_SYSTEM_PROMPT = (
    "You are playing Wordle. Find the secret 5-letter English word. Call the `guess` tool with one "
    "5-letter word per call; it answers with one mark per letter: G = right letter in the right "
    "spot, Y = in the word but in another spot, X = not in the word (no more copies of that "
    "letter). Keep guessing until the marks are GGGGG or no guesses are left."
)


class WordleToolEnv:
    """One Wordle game whose moves are calls of the ``guess`` tool; the secret is never in what the
    model sees. ``env_url``: play on that server (:class:`wordle_rl.environment.client.RemoteEnv`)
    instead of in-process."""

    def __init__(
        self,
        config: EnvConfig | None = None,
        ctx: RewardContext | None = None,
        env_url: str | None = None,
    ):
        self.config = config or EnvConfig()
        if env_url:
            from wordle_rl.environment.client import RemoteEnv

            self.game = RemoteEnv(env_url)
        else:
            self.game = WordleEnv(self.config, ctx=ctx)
        self.state: dict = {}
        self.won = False

    def reset(self, answer: str | None = None, history=None, **row) -> str:
        """Start the row's game (its ``answer`` and optional start ``history``); returns the text
        TRL appends to the user's message: the guesses left and the marks so far."""
        self.state = self.game.reset(
            answer=answer, history=[(g, p) for g, p in history or []]
        ).state
        self.won = False
        played = (
            "; ".join(f"{h['guess'].upper()} {h['pattern']}" for h in self.state["history"])
            or "none yet"
        )
        return f"\nGuesses so far: {played}. Guesses left: {self.state['guesses_left']}."

    def guess(self, word: str) -> str:
        """Guess the secret word.

        Args:
            word: A 5-letter English word.

        Returns:
            The marks for each letter (G, Y or X) and the guesses left, or why the guess was
            refused.
        """
        if self.state.get("done"):
            raise ValueError("the game is over: no more guesses")
        step = self.game.step(f"<guess>{str(word).strip().lower()}</guess>")
        info, self.state = step.info, step.observation.state
        left = self.state["guesses_left"]
        if info["error"]:
            reason = info["error"].replace("_", " ")
            text = f"Refused ({reason}); it cost a guess. Guesses left: {left}."
        else:
            text = f"{info['guess'].upper()}: {info['pattern']}. Guesses left: {left}."
        if step.done:
            self.won = bool(info.get("won"))
            text += (
                " You won!" if self.won else f" Game over; the word was {info['answer'].upper()}."
            )
        return text

    def get_reward(self) -> float:
        """The strict game return of the episode (0 unless the game was won)."""
        if not self.won:
            return 0.0
        return game_return(True, self.state["turn"], self.config.max_turns)


def tool_env_factory(
    config: EnvConfig | None = None, ctx: RewardContext | None = None, env_url: str | None = None
):
    """The ``environment_factory`` for TRL: a new :class:`WordleToolEnv` sharing one scoring context
    (or playing on the server at ``env_url``)."""
    ctx = ctx or (None if env_url else RewardContext())
    return lambda: WordleToolEnv(config, ctx, env_url)
