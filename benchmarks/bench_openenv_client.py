"""OpenEnv's typed client against ``wordle-rl serve``: G whole games, each in its own session
(``WordleClient(base_url=...).sync()``: connect, reset, steps, close), S sessions at a time, guesses
from the entropy solver. Reports errors (any exception, refused move or unfinished game), throughput
and latency.

Run on an idle machine: ``python benchmarks/bench_openenv_client.py --games 1000 --sessions 8``.
Prints JSON. The server runs as its own process on 127.0.0.1.
"""

from __future__ import annotations

import argparse
import json
import time
from concurrent.futures import ThreadPoolExecutor

from bench_server import _rss_mb, served

from wordle_rl.engine.game import str_to_pattern
from wordle_rl.engine.solvers import EntropySolver
from wordle_rl.environment.client import WordleAction, WordleClient


def play_one(url: str, solver: EntropySolver, seed: int) -> dict:
    """One game in a fresh session; returns its outcome or the error that ended it."""
    t0 = time.perf_counter()
    try:
        with WordleClient(base_url=url).sync() as env:
            result = env.reset(seed=seed)
            history: list[tuple[str, int]] = []
            steps = refused = 0
            while not result.done:
                guess = solver.guess(history)
                result = env.step(WordleAction(message=f"<think></think><guess>{guess}</guess>"))
                info = result.observation.info
                refused += info["error"] is not None
                if info["pattern"]:
                    history.append((guess, str_to_pattern(info["pattern"])))
                steps += 1
            state = env.state()
        won = bool(result.observation.info.get("won"))
        ok = refused == 0 and state.done and state.turn == steps
        return {
            "won": won,
            "steps": steps,
            "error": None if ok else f"refused={refused} state={state}",
            "s": time.perf_counter() - t0,
        }
    except Exception as e:  # noqa: BLE001 -- every failure is counted and reported, not hidden
        return {
            "won": False,
            "steps": 0,
            "error": f"{type(e).__name__}: {e}",
            "s": time.perf_counter() - t0,
        }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--games", type=int, default=1000)
    ap.add_argument(
        "--sessions", type=int, default=8, help="Games played at once (one session each)."
    )
    args = ap.parse_args()
    with served(args.sessions + 8) as (port, proc):
        solver = EntropySolver()
        solver.opener()
        url = f"http://127.0.0.1:{port}"
        t = time.perf_counter()
        with ThreadPoolExecutor(args.sessions) as pool:
            games = list(pool.map(lambda s: play_one(url, solver, s), range(args.games)))
        wall = time.perf_counter() - t
        errors = [g["error"] for g in games if g["error"]]
        per_game = sorted(g["s"] for g in games)
        print(
            json.dumps(
                {
                    "games": len(games),
                    "sessions": args.sessions,
                    "errors": len(errors),
                    "first_errors": errors[:5],
                    "wins": sum(g["won"] for g in games),
                    "steps": sum(g["steps"] for g in games),
                    "wall_s": round(wall, 1),
                    "games_per_s": round(len(games) / wall, 1),
                    "game_seconds": {
                        "p50": round(per_game[len(per_game) // 2], 3),
                        "max": round(per_game[-1], 3),
                    },
                    "server_rss_mb_end": round(_rss_mb(proc.pid), 1),
                },
                indent=1,
            )
        )


if __name__ == "__main__":
    main()
