"""Benchmark the environment and rewards: in-process ``step`` throughput, and reward computation for
1,000 completions with every component.

Run on an idle machine: ``python benchmarks/bench_env.py``. Prints JSON.

Steps replay solver games (entropy solver, random answers): each reset + every step of the game is
timed. Rewards: 1,000 completions laid out as GRPO sees them (125 states from solver games at depth
0-4, 8 completions per state: solver guess, random allowed words, a repeat, malformed text), all 8
components.
"""

from __future__ import annotations

import json
import random
import time

from wordle_rl.engine.game import pattern_to_str, play_game
from wordle_rl.engine.solvers import EntropySolver
from wordle_rl.environment.env import EnvConfig, WordleEnv
from wordle_rl.environment.prompts import PromptStyle
from wordle_rl.environment.reward_funcs import make_reward_funcs
from wordle_rl.environment.rewards import RewardContext


def main(n_games: int = 1000, seed: int = 0) -> None:
    ctx = RewardContext()
    words = ctx.words
    solver = EntropySolver(words, matrix=ctx.matrix)
    rng = random.Random(seed)
    games = [(a, play_game(solver, a).guesses) for a in rng.choices(words.answers, k=n_games)]
    out: dict = {}
    for info in (True, False):
        env = WordleEnv(
            EnvConfig(style=PromptStyle("xml", think=False), info_gain=info),
            ctx=RewardContext(words),
        )
        texts = [(a, [f"<guess>{g}</guess>" for g in gs]) for a, gs in games]
        steps = 0
        t = time.perf_counter()
        for a, gs in texts:
            env.reset(answer=a)
            for g in gs:
                env.step(g)
                steps += 1
        dt = time.perf_counter() - t
        key = "with_info_gain" if info else "without_info_gain"
        out[f"env_steps_per_s_{key}"] = round(steps / dt)
        out[f"env_games_per_s_{key}"] = round(len(games) / dt, 1)
    # rewards for 1,000 completions, fresh context (no memo carried over)
    ctx2 = RewardContext(words)
    funcs = make_reward_funcs("xml", ctx=ctx2)
    completions, answers, histories = [], [], []
    for a, gs in games[:125]:
        depth = rng.randint(0, min(4, len(gs) - 1))
        rec = play_game(solver, a)
        hist = [[g, pattern_to_str(p)] for g, p in zip(rec.guesses[:depth], rec.patterns[:depth])]
        options = [f"<think>best split</think><guess>{gs[depth]}</guess>"]
        options += [
            f"<think>try</think><guess>{rng.choice(words.allowed)}</guess>" for _ in range(5)
        ]
        options.append(f"<think>again</think><guess>{hist[0][0] if hist else 'qqqqq'}</guess>")
        options.append("I think the word is crane")
        for c in options:
            completions.append(c)
            answers.append(a)
            histories.append(hist)
    t = time.perf_counter()
    for f in funcs:
        f(completions, answer=answers, history=histories)
    out["reward_1000_completions_all_components_s"] = round(time.perf_counter() - t, 3)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
