"""Evaluation harness: any policy plays every answer of a split; honest metrics with confidence
intervals.

    wordle-rl eval --model runs/sft --split test --decode free --out runs/sft/eval-free
    wordle-rl eval --solver entropy --split test --out runs/solver-entropy
    wordle-rl eval --base-url http://127.0.0.1:8001/v1 --endpoint-model NAME --split test \\
        --out runs/teacher

Policies: a solver, a local model (all games advance together, one batched ``generate`` per turn
with the KV cache, greedy or sampled) or an OpenAI-compatible endpoint. Local models decode in one
of three modes, always named in the results and never mixed: ``free`` (the headline), ``allowed``
(only words of the allowed list can be spelled inside the guess tag) and ``consistent`` (only
allowed words that fit all feedback so far), through a transformers ``LogitsProcessor``. A win
counts only when the exact answer is guessed. ``--force-second SOLVER`` lets a solver play every
game's second move and the policy the rest: paired against the same policy's free play, it says
which second move the policy can finish from on held-out words.

Metrics: win rate with a 95 % Wilson interval, mean guesses on wins, histogram, format-error,
invalid-word, repeated-guess and inconsistent-guess rates, mean information gain relative to the
best guess (what the entropy solver plays), and the same on an equal-sized sample of **train**
answers (the generalisation gap).
"""

from __future__ import annotations

import json
import random
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from wordle_rl.engine.game import str_to_pattern
from wordle_rl.engine.storage import write_atomic
from wordle_rl.engine.words import WordList, encode_words
from wordle_rl.environment.env import EnvConfig, WordleEnv
from wordle_rl.environment.prompts import DEFAULT_STYLE, PromptStyle, format_answer
from wordle_rl.environment.rewards import RewardContext
from wordle_rl.evaluation.audit import TrainingIndex, audit_games, audit_summary
from wordle_rl.evaluation.decoding import (
    GuessConstraint,
    fitting_prefixes,
    guess_prefixes,
)
from wordle_rl.evaluation.stats import wilson
from wordle_rl.evaluation.tables import report_markdown

__all__ = [
    "EvalConfig",
    "SolverPolicy",
    "ModelPolicy",
    "EndpointPolicy",
    "play_games",
    "metrics",
    "run_eval",
    "DECODE_MODES",
    "FORMAT_ERRORS",
]

DECODE_MODES = ("free", "allowed", "consistent")
FORMAT_ERRORS = ("no_guess", "multiple_guesses", "text_after_guess", "wrong_length", "not_alpha")


@dataclass
class EvalConfig:
    split: str = field(
        default="test", metadata={"help": "Split whose answers are played (train/val/test)."}
    )
    splits: str = field(default="data/splits.json", metadata={"help": "Splits file."})
    decode: str = field(
        default="free", metadata={"help": "free | allowed | consistent (local models)."}
    )
    temperature: float = field(default=0.0, metadata={"help": "0 = greedy."})
    seed: int = field(default=0, metadata={"help": "Sampling seed and train-sample seed."})
    batch_size: int = field(default=128, metadata={"help": "Games per generate call."})
    max_new_tokens: int = field(
        default=64, metadata={"help": "Tokens per reply (more with thinking)."}
    )
    train_sample: bool = field(
        default=True, metadata={"help": "Also play as many train answers (gap)."}
    )
    limit: int | None = field(
        default=None, metadata={"help": "Only the first N answers of the split."}
    )
    style: str | None = field(
        default=None,
        metadata={
            "help": "Prompt style (default: the one the model folder records, else "
            f"{DEFAULT_STYLE})."
        },
    )
    think: bool | None = field(
        default=None,
        metadata={"help": "Style expects <think> (default: as the model folder records, else no)."},
    )
    hard: bool = field(default=False, metadata={"help": "Hard mode."})
    threads: int = field(default=2, metadata={"help": "torch CPU threads."})
    env_url: str | None = field(
        default=None,
        metadata={
            "help": "Play on `wordle-rl serve` at this URL (not --blind; one session per game of "
            "the split)."
        },
    )

    def __post_init__(self) -> None:
        if self.decode not in DECODE_MODES:
            raise ValueError(f"--decode must be one of {DECODE_MODES}, got {self.decode!r}")


# --------------------------------------------------------------------------- policies
class SolverPolicy:
    def __init__(self, solver, style: PromptStyle):
        self.solver, self.style, self.name = solver, style, f"solver:{solver.name}"

    def act(self, envs: list[WordleEnv]) -> list[str]:
        return [format_answer(self.style, self.solver.guess(e.played)) for e in envs]


class ModelPolicy:
    """A local causal LM; the games of a batch advance together, one ``generate`` per turn."""

    def __init__(
        self,
        model,
        tokenizer,
        style: PromptStyle,
        words: WordList,
        decode: str = "free",
        temperature: float = 0.0,
        max_new_tokens: int = 64,
        batch_size: int = 128,
        seed: int = 0,
        name: str = "model",
    ):
        self.model, self.tok, self.style, self.words = model, tokenizer, style, words
        self.decode, self.temperature, self.max_new_tokens = decode, temperature, max_new_tokens
        self.batch_size, self.seed, self.name = batch_size, seed, name
        self.calls = 0
        self._carry = None
        self._allowed_prefixes = guess_prefixes(words.allowed, style) if decode != "free" else None
        self._enc = encode_words(list(words.allowed))

    def _prefix_set(self, env: WordleEnv) -> set[str]:
        if self.decode == "allowed" or not env.played:
            return self._allowed_prefixes
        return fitting_prefixes(self.words.allowed, self._enc, env.played, self.style)

    def act(self, envs: list[WordleEnv]) -> list[str]:
        """One reply per game; each batch of games carries its KV cache from turn to turn
        (:mod:`wordle_rl.evaluation.carry`), so a turn encodes only the new feedback."""
        import torch
        from transformers import LogitsProcessorList, set_seed

        from wordle_rl.evaluation.carry import CarriedTurns

        if self._carry is None:
            self._carry = CarriedTurns(self.model, self.tok, self.batch_size)
        texts = [
            self.tok.apply_chat_template(e.messages, add_generation_prompt=True, tokenize=False)
            for e in envs
        ]
        out: list[str] = [""] * len(envs)
        for batch in self._carry.inputs(envs, texts):
            kw = {"max_new_tokens": self.max_new_tokens, "pad_token_id": self.tok.pad_token_id}
            kw |= {"eos_token_id": self.tok.eos_token_id, "use_cache": True}
            kw |= {"return_dict_in_generate": True, "do_sample": self.temperature > 0}
            if self.temperature > 0:
                set_seed(self.seed * 100_003 + self.calls)
                kw |= {"temperature": self.temperature, "top_k": 0, "top_p": 1.0}
            if self.decode != "free":
                prefixes = [self._prefix_set(envs[p]) for p in batch.positions]
                constraint = GuessConstraint(self.tok, self.style, batch.prompt_length, prefixes)
                kw["logits_processor"] = LogitsProcessorList([constraint])
            self.calls += 1
            with torch.no_grad():
                gen = self.model.generate(**batch.kwargs, **kw)
            cache = getattr(gen, self._carry.cache_name)
            replies = self._carry.record(batch, gen.sequences, cache)
            for p, ids in zip(batch.positions, replies):
                out[p] = self.tok.decode(ids, skip_special_tokens=True)
        return out


class EndpointPolicy:
    """An OpenAI-compatible chat endpoint through the ``openai`` client
    (:func:`wordle_rl.data.teacher.make_client`)."""

    def __init__(self, cfg, concurrency: int = 8):
        from wordle_rl.data.teacher import make_client

        self.cfg, self.name = cfg, f"endpoint:{cfg.model}"
        self.client = make_client(cfg)
        self.concurrency = concurrency

    def act(self, envs: list[WordleEnv]) -> list[str]:
        from concurrent.futures import ThreadPoolExecutor

        from wordle_rl.data.teacher import TeacherError, chat_completion

        def one(e):
            try:
                return chat_completion(self.client, self.cfg, e.messages)
            except TeacherError as err:
                return f"[endpoint error: {err}]"

        with ThreadPoolExecutor(self.concurrency) as pool:
            return list(pool.map(one, envs))


# --------------------------------------------------------------------------- play + metrics
class ServedGame:
    """One game on a ``wordle-rl serve`` server (:class:`wordle_rl.environment.client.RemoteEnv`),
    with what the policies and :func:`play_games` read of an in-process game: ``messages``,
    ``played``, ``done``, ``won``, ``turns_used``."""

    def __init__(self, url: str, answer: str):
        from wordle_rl.environment.client import RemoteEnv

        self.remote, self._answer, self.won = RemoteEnv(url), answer, False
        self._sync(self.remote.reset(answer=answer))

    def _sync(self, obs) -> None:
        self.messages, self.done, self.turns_used = obs.messages, obs.done, obs.state["turn"]
        self.played = [(h["guess"], str_to_pattern(h["pattern"])) for h in obs.state["history"]]

    def step(self, text: str):
        res = self.remote.step(text)
        self._sync(res.observation)
        if res.done:
            self.won = bool(res.info.get("won"))
            self.remote.close()
        return res


def play_games(
    policy,
    answers: list[str],
    env_config: EnvConfig,
    ctx: RewardContext,
    progress=None,
    env_url: str | None = None,
) -> list[dict]:
    """Every answer played to the end (on the server at ``env_url`` when given); one record per game
    with every turn. A model plays ``batch_size`` games at a time (one batch's KV caches held)."""
    size = getattr(policy, "batch_size", None) or max(len(answers), 1)
    games = []
    for i in range(0, len(answers), size):
        games += _play_together(policy, answers[i : i + size], env_config, ctx, progress, env_url)
    return games


def _play_together(policy, answers, env_config, ctx, progress, env_url) -> list[dict]:
    """``answers`` played to the end, every game advancing one turn per ``policy.act`` call."""
    envs = []
    for a in answers:
        if env_url:
            envs.append(ServedGame(env_url, a))
            continue
        e = WordleEnv(env_config, ctx=ctx)
        e.reset(answer=a)
        envs.append(e)
    turns: list[list[dict]] = [[] for _ in envs]
    while True:
        active = [i for i, e in enumerate(envs) if not e.done]
        if not active:
            break
        texts = policy.act([envs[i] for i in active])
        for i, text in zip(active, texts):
            res = envs[i].step(text)
            info = res.info
            turns[i].append(
                {
                    "turn": info["turn"],
                    "completion": text,
                    "guess": info["guess"],
                    "pattern": info["pattern"],
                    "error": info["error"],
                    "reward": res.reward,
                    "components": info["components"],
                }
            )
            if progress and res.done:
                progress()
    return [
        {"answer": e._answer, "won": e.won, "turns": e.turns_used, "moves": t}
        for e, t in zip(envs, turns)
    ]


def _mean(xs: list[float]) -> float:
    return float(np.mean(xs)) if xs else 0.0


def metrics(games: list[dict], max_turns: int = 6) -> dict:
    n = len(games)
    wins = [g for g in games if g["won"]]
    moves = [m for g in games for m in g["moves"]]
    later_valid = [m for m in moves if m["turn"] > 1 and m["error"] is None]
    hist = Counter(g["turns"] for g in wins)

    def rate(xs, pred) -> float:
        return sum(pred(x) for x in xs) / len(xs) if xs else 0.0

    lo, hi = wilson(len(wins), n)
    by_turn: dict[str, dict] = {}
    for t in range(1, max_turns + 1):
        mt = [m for m in moves if m["turn"] == t]
        if mt:
            by_turn[str(t)] = {
                "moves": len(mt),
                "format_error": rate(mt, lambda m: m["error"] in FORMAT_ERRORS),
                "invalid_word": rate(mt, lambda m: m["error"] == "not_in_word_list"),
                "repeated": rate(mt, lambda m: m["error"] == "repeated_guess"),
            }
    return {
        "games": n,
        "wins": len(wins),
        "win_rate": len(wins) / n if n else 0.0,
        "win_rate_ci95": [lo, hi],
        "mean_guesses_on_wins": float(np.mean([g["turns"] for g in wins])) if wins else None,
        "mean_guesses_per_game": float(
            np.mean([g["turns"] if g["won"] else max_turns + 1 for g in games])
        )
        if games
        else None,  # a loss counts as max_turns + 1
        "histogram": {str(k): hist.get(k, 0) for k in range(1, max_turns + 1)}
        | {"X": n - len(wins)},
        "moves": len(moves),
        "format_error_rate": rate(moves, lambda m: m["error"] in FORMAT_ERRORS),
        "invalid_word_rate": rate(moves, lambda m: m["error"] == "not_in_word_list"),
        "repeated_guess_rate": rate(moves, lambda m: m["error"] == "repeated_guess"),
        "inconsistent_rate": rate(later_valid, lambda m: m["components"]["consistency"] < 1.0),
        "mean_info_gain_vs_best": _mean(
            [m["components"]["info_gain"] for m in moves if m["error"] is None]
        ),
        "by_turn": by_turn,
    }


def run_eval(
    policy,
    answers: list[str],
    cfg: EvalConfig,
    out: str | Path | None,
    words: WordList,
    train_answers: list[str] | None = None,
    meta: dict | None = None,
    progress=None,
    index: TrainingIndex | None = None,
) -> dict:
    """Play, measure, and write ``results.json``, ``games.jsonl`` and ``report.md`` to ``out``.

    With ``index`` (what the model was trained on) every game is audited
    (:mod:`wordle_rl.evaluation.audit`): ``results.json`` gets ``audit`` (``by_answer``: metrics
    of the games whose answer is a trained guess somewhere, and of the rest), and each game in
    ``games.jsonl`` says which of its moves replay an imitated state."""
    ctx = RewardContext(words).warm_up()
    style = PromptStyle(cfg.style or DEFAULT_STYLE, think=bool(cfg.think))
    env_cfg = EnvConfig(style=style, hard=cfg.hard)
    t0 = time.perf_counter()
    games = play_games(policy, answers, env_cfg, ctx, progress, cfg.env_url)
    wall = time.perf_counter() - t0
    result = {
        "policy": policy.name,
        "decode": getattr(policy, "decode", "n/a"),
        "split": cfg.split,
        "config": asdict(cfg),
        "metrics": metrics(games),
        "wall_s": round(wall, 2),
        **(meta or {}),
    }
    if index is not None:
        audit_games(games, index, words)
        result["audit"] = audit_summary(games, index)
        result["audit"]["by_answer"] = {
            key: metrics([g for g in games if g["audit"]["answer_imitated"] is written])
            for key, written in (("written", True), ("never_written", False))
        }
    train_games = []
    if cfg.train_sample and train_answers:
        sample = random.Random(cfg.seed).sample(
            train_answers, min(len(answers), len(train_answers))
        )
        train_games = play_games(policy, sample, env_cfg, ctx, progress, cfg.env_url)
        result["train_sample_metrics"] = metrics(train_games)
        result["generalisation_gap"] = (
            result["train_sample_metrics"]["win_rate"] - result["metrics"]["win_rate"]
        )
    if out is not None:
        out = Path(out)
        out.mkdir(parents=True, exist_ok=True)
        lines = [json.dumps(g | {"split": cfg.split}) + "\n" for g in games]
        lines += [json.dumps(g | {"split": "train-sample"}) + "\n" for g in train_games]
        write_atomic(out / "games.jsonl", "".join(lines))
        write_atomic(out / "report.md", report_markdown(result, games))
        write_atomic(out / "results.json", json.dumps(result, indent=1))
    return result
