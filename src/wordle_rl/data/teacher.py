"""Teacher traces: games played by any OpenAI-compatible chat endpoint (vLLM, llama.cpp, a hosted
API).

    wordle-rl data teacher --base-url http://127.0.0.1:8001/v1 --model Qwen/Qwen3-8B \\
        --splits data/splits.json --games-per-word 1 --out data/teacher/games.jsonl
    wordle-rl data teacher-sft data/teacher/games.jsonl --won-only --format-clean \\
        --out data/teacher-sft

Each finished game is appended to the JSONL and flushed at once, so a crash or Ctrl-C loses nothing;
a rerun skips games already finished. Requests go through the ``openai`` client, ``concurrency``
games at a time: its timeout, and its retries with exponential backoff (timeouts, dropped
connections, 408/409/429 and 5xx answers; a ``Retry-After`` header is honoured). A game whose
request still fails, or whose reply is not a chat completion, is recorded with ``status: "error"``
and played again on the next run. The API key comes from an environment variable
(``--api-key-env``), never a flag. Targets are **train** answers only.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import openai

from wordle_rl.engine.storage import repair_jsonl, whole_records
from wordle_rl.environment.env import EnvConfig, WordleEnv
from wordle_rl.environment.prompts import DEFAULT_STYLE, PromptStyle
from wordle_rl.environment.rewards import RewardContext

__all__ = [
    "TeacherConfig",
    "TeacherError",
    "make_client",
    "chat_completion",
    "play_teacher_games",
    "teacher_to_sft",
    "summarize_teacher",
]


class TeacherError(RuntimeError):
    """The endpoint failed one request after the client's retries, or answered with no chat
    completion."""


@dataclass
class TeacherConfig:
    base_url: str = field(
        metadata={"help": "OpenAI-compatible base URL, e.g. http://127.0.0.1:8001/v1."}
    )
    model: str = field(metadata={"help": "Model name sent with each request."})
    api_key_env: str = field(
        default="OPENAI_API_KEY", metadata={"help": "Environment variable with the key."}
    )
    concurrency: int = field(default=8, metadata={"help": "Games played at once."})
    timeout_s: float = field(default=60.0, metadata={"help": "Timeout of one request."})
    retries: int = field(
        default=3, metadata={"help": "Retries of a failed request (the openai client's backoff)."}
    )
    temperature: float = field(default=0.0, metadata={"help": "Sampling temperature."})
    max_tokens: int = field(default=1024, metadata={"help": "Max tokens per reply."})
    style: str = field(default=DEFAULT_STYLE, metadata={"help": "Prompt style."})
    think: bool = field(default=True, metadata={"help": "Ask for a <think> block."})


def make_client(cfg: TeacherConfig) -> openai.OpenAI:
    """The ``openai`` client for the endpoint, with the run's timeout and retries (the key from the
    environment)."""
    key = os.environ.get(cfg.api_key_env) or "none"  # local servers (vLLM, llama.cpp) take any key
    return openai.OpenAI(
        base_url=cfg.base_url, api_key=key, timeout=cfg.timeout_s, max_retries=cfg.retries
    )


def chat_completion(client: openai.OpenAI, cfg: TeacherConfig, messages: list[dict]) -> str:
    """One chat completion (the client retries transient failures); returns the reply text."""
    try:
        reply = client.chat.completions.create(
            model=cfg.model,
            temperature=cfg.temperature,
            max_tokens=cfg.max_tokens,
            messages=[{"role": m["role"], "content": m["content"]} for m in messages],
        )
        content = reply.choices[0].message.content
    except openai.APIError as e:
        raise TeacherError(f"{cfg.base_url}: {type(e).__name__}: {e}") from e
    except (
        ValueError,
        AttributeError,
        IndexError,
        TypeError,
    ) as e:  # a 200 answer that is no chat completion
        raise TeacherError(
            f"{cfg.base_url}: not a chat completion ({type(e).__name__}: {e})"
        ) from e
    if not isinstance(content, str):
        raise TeacherError(
            f"{cfg.base_url}: not a chat completion (message content is {type(content).__name__})"
        )
    return content


def _finished_keys(path: Path) -> set[str]:
    repair_jsonl(path)  # a line a crash cut short goes (its game is played again)
    return {row["key"] for row in whole_records(path)[0] if row.get("status") == "done"}


def play_teacher_games(
    cfg: TeacherConfig,
    answers: list[str],
    out: str | Path,
    games_per_word: int = 1,
    ctx: RewardContext | None = None,
    on_game: Callable[[dict], None] | None = None,
) -> dict:
    """Play every (answer, repeat) not yet finished in ``out``; append each game as it ends."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    ctx = ctx or RewardContext()
    todo = [(a, k) for a in answers for k in range(games_per_word)]
    done = _finished_keys(out)
    todo = [(a, k) for a, k in todo if f"{a}#{k}" not in done]
    lock = threading.Lock()
    style = PromptStyle(cfg.style, think=cfg.think)
    counts = {"skipped": len(answers) * games_per_word - len(todo), "played": 0, "errors": 0}

    def one(item: tuple[str, int], client: openai.OpenAI) -> None:
        answer, k = item
        env = WordleEnv(EnvConfig(style=style), ctx=ctx)
        obs = env.reset(answer=answer)
        completions, errors, status, error = [], [], "done", None
        step = None
        try:
            while not env.done:
                text = chat_completion(client, cfg, obs.messages)
                step = env.step(text)
                obs = step.observation
                completions.append(text)
                errors.append(step.info["error"])
        except TeacherError as e:
            status, error = "error", str(e)
        row = {
            "key": f"{answer}#{k}",
            "answer": answer,
            "model": cfg.model,
            "status": status,
            "error": error,
            "completions": completions,
            "errors": errors,
            "messages": obs.messages,
            "won": bool(step and step.done and step.info.get("won")),
            "turns": env.turns_used,
            "format_errors": sum(e is not None for e in errors),
        }
        with lock:
            with out.open("a", encoding="utf-8") as fh:
                fh.write(json.dumps(row, sort_keys=True, ensure_ascii=False) + "\n")
                fh.flush()
                os.fsync(fh.fileno())
            counts["played" if status == "done" else "errors"] += 1
        if on_game:
            on_game(row)

    with (
        make_client(cfg) as client,
        ThreadPoolExecutor(max_workers=max(1, cfg.concurrency)) as pool,
    ):
        for f in [pool.submit(one, item, client) for item in todo]:
            f.result()
    return counts


def summarize_teacher(rows: list[dict]) -> dict[str, dict]:
    """Per word: games, wins, mean turns, format errors (finished games only)."""
    per: dict[str, dict] = {}
    for r in rows:
        if r.get("status") != "done":
            continue
        d = per.setdefault(r["answer"], {"games": 0, "wins": 0, "turns": 0, "format_errors": 0})
        d["games"] += 1
        d["wins"] += int(r["won"])
        d["turns"] += r["turns"]
        d["format_errors"] += r["format_errors"]
    for d in per.values():
        d["mean_turns"] = round(d.pop("turns") / d["games"], 3)
    return per


def teacher_to_sft(
    rows: list[dict], won_only: bool = True, format_clean: bool = True, max_turns: int | None = None
) -> list[dict]:
    """Filter finished teacher games into SFT ``messages`` rows (the conversation as played, ending
    on the win)."""
    out = []
    for r in rows:
        if r.get("status") != "done":
            continue
        if won_only and not r["won"]:
            continue
        if format_clean and r["format_errors"]:
            continue
        if max_turns is not None and r["turns"] > max_turns:
            continue
        msgs = list(r["messages"])
        if msgs and msgs[-1]["role"] == "user":
            msgs = msgs[:-1]
        out.append(
            {
                "messages": msgs,
                "answer": r["answer"],
                "split": "train",
                "source": f"teacher:{r['model']}",
                "turns": r["turns"],
                "won": r["won"],
                "history": [],
            }
        )
    return out
