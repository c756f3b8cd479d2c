"""The recall probe: the chance a model gives the answer at the recall states of a fixed set of
played games, where held-out games are won or lost.

    wordle-rl probe runs/cpu-default/sft runs/cpu-default/grpo \\
        --games runs/cpu-default/eval/val/sft-free/games.jsonl

Nearly every lost held-out game reaches a recall state, a decision where exactly one answer word
fits the feedback, and then spells a neighbour of that word. Two models' games drift apart after
their first different move, so comparing their wins mixes recall with everything before it. The
probe replays one evaluation's games through the environment (refused moves and their replies
included, as in play), keeps every decision where the answer is the one fitting word, and asks
each model for the whole answer there, teacher-forced: its probability, and whether greedy
decoding writes it (the argmax at every token of the answer). Every model is asked at the same
states, so the comparison is paired and has none of the noise of play.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from wordle_rl.environment.env import EnvConfig, WordleEnv
from wordle_rl.environment.prompts import PromptStyle, format_answer
from wordle_rl.environment.rewards import RewardContext
from wordle_rl.evaluation.stats import mcnemar_p, read_games

__all__ = [
    "RecallState",
    "games_env_config",
    "recall_states",
    "probe_model",
    "probe_models",
    "probe_summary",
    "greedy_discordance",
    "PROBE_FILE",
]

PROBE_FILE = "recall_probe.json"  # the pipeline's probe of its models, beside each split's runs


@dataclass
class RecallState:
    """A decision of a played game where the answer is the one answer word that fits."""

    messages: list[dict[str, str]]  # the conversation up to the decision
    answer: str
    played_right: bool  # whether the game's own move there was the answer


def games_env_config(games_path: Path) -> EnvConfig:
    """The rules and prompt style the games were played under: those of the ``results.json``
    beside them (`wordle-rl eval` writes it), else the defaults."""
    results = games_path.with_name("results.json")
    if not results.is_file():
        return EnvConfig()
    cfg = json.loads(results.read_text()).get("config") or {}
    style = PromptStyle(cfg.get("style", "tiles"), think=bool(cfg.get("think", False)))
    return EnvConfig(hard=bool(cfg.get("hard", False)), style=style)


def recall_states(games_path: str | Path, ctx: RewardContext | None = None) -> list[RecallState]:
    """Every recall state of the games in ``games_path`` (a `wordle-rl eval` games.jsonl; its
    train-sample games left out, as :func:`wordle_rl.evaluation.stats.read_games` does), found by
    replaying each game's completions through :class:`WordleEnv`."""
    path = Path(games_path)
    try:
        games = read_games(path)
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: not a games file of `wordle-rl eval` ({e})") from e
    ctx, config = ctx or RewardContext(), games_env_config(path)
    out = []
    for n, game in enumerate(games, 1):
        try:
            answer, moves = game["answer"], game["moves"]
        except (KeyError, TypeError) as e:
            raise ValueError(f"{path}: game {n} is not a record of `wordle-rl eval` ({e})") from e
        env = WordleEnv(config, ctx=ctx)
        env.reset(answer=answer)
        for move in moves:
            fits = env.candidates()
            if len(fits) == 1 and ctx.words.answers[int(fits[0])] == answer:
                right = move.get("guess") == answer
                out.append(RecallState([dict(m) for m in env.messages], answer, right))
            env.step(move["completion"])
    return out


def probe_model(model, tok, states: list[RecallState], style: PromptStyle) -> dict:
    """The model's teacher-forced probability of the whole answer (its guess tags included) at
    each state, and whether greedy decoding writes the answer there."""
    import torch

    probs, greedy = [], []
    with torch.no_grad():
        for s in states:
            text = tok.apply_chat_template(s.messages, add_generation_prompt=True, tokenize=False)
            prompt = tok(text, add_special_tokens=False)["input_ids"]
            target = tok(format_answer(style, s.answer), add_special_tokens=False)["input_ids"]
            ids = torch.tensor([prompt + target], device=model.device)
            # the logit one position before a token predicts it
            logp = model(input_ids=ids).logits[0, len(prompt) - 1 : -1].float().log_softmax(-1)
            want = torch.tensor(target, device=logp.device)
            probs.append(math.exp(logp[torch.arange(len(target)), want].sum().item()))
            greedy.append(bool((logp.argmax(-1) == want).all()))
    p = np.array(probs)
    return {
        "states": len(states),
        "mean_p": float(p.mean()) if len(p) else float("nan"),
        "greedy_right": int(sum(greedy)),
        "below_half": int((p < 0.5).sum()),
        "p": probs,
        "greedy": greedy,
    }


def greedy_discordance(first: list[bool], second: list[bool]) -> tuple[int, int, float]:
    """States whose answer greedy decoding writes under only the first model, under only the
    second, and the exact McNemar p of that split.

    >>> greedy_discordance([True, True, False, False], [True, False, True, True])
    (1, 2, 1.0)
    """
    if len(first) != len(second):
        raise ValueError(f"{len(first)} states against {len(second)}: probe the same games")
    only_a = sum(a and not b for a, b in zip(first, second))
    only_b = sum(b and not a for a, b in zip(first, second))
    return only_a, only_b, mcnemar_p(only_a, only_b)


def probe_models(models: list[str | Path], games_path: str | Path, threads: int = 2) -> dict:
    """Every model (a folder trained on the games' prompt style) at the recall states of
    ``games_path``: ``{"games", "states", "models": [...]}``, each model with its mean chance of
    the answer, the states greedy decoding writes it at, those below 0.5, and against the first
    model the states only the first or only it writes (exact McNemar p)."""
    from wordle_rl.models.embedded import load_model
    from wordle_rl.models.prompt_record import check_prompt_style

    states = recall_states(games_path)
    style = games_env_config(Path(games_path)).style
    found = []
    for m in models:
        check_prompt_style(str(m), style)
        model, tok = load_model(str(m), threads=threads)
        model.eval()
        found.append(probe_model(model, tok, states, style))
    return probe_summary(models, found, games_path)


def probe_summary(models: list[str | Path], found: list[dict], games_path: str | Path) -> dict:
    """:func:`probe_models`'s record from each model's :func:`probe_model` at the same states."""
    rows = []
    for m, r in zip(models, found):
        only_first, only_it, p = greedy_discordance(found[0]["greedy"], r["greedy"])
        row = {k: r[k] for k in ("mean_p", "greedy_right", "below_half")}
        row.update(only_first=only_first, only_it=only_it, mcnemar_p=p)
        rows.append({"model": str(m), **row})
    return {"games": str(games_path), "states": found[0]["states"], "models": rows}
