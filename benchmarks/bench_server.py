"""Load test of the environment server on loopback: N concurrent WebSocket clients play whole games
with the entropy solver until G games are done. Reports errors, throughput, step latency percentiles
and the server's resident memory over time.

Run on an idle machine: ``python benchmarks/bench_server.py --clients 256 --games 10000``. Prints
JSON. The server runs as its own process (``wordle-rl serve``); requests go to 127.0.0.1 only and
stop by themselves.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request

from websockets.asyncio.client import connect

from wordle_rl.engine.game import str_to_pattern
from wordle_rl.engine.solvers import EntropySolver


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


async def _client(url: str, solver: EntropySolver, stats: dict, budget: dict, cid: int) -> None:
    async with connect(url, max_size=2**22, open_timeout=60, ping_interval=None) as ws:
        game = 0
        while budget["left"] > 0:
            budget["left"] -= 1
            await ws.send(json.dumps({"type": "reset", "data": {"seed": cid * 100_000 + game}}))
            reply = json.loads(await ws.recv())
            if reply["type"] != "observation":
                stats["errors"] += 1
                continue
            history: list[tuple[str, int]] = []
            done = False
            while not done:
                guess = solver.guess(history)
                t = time.perf_counter()
                step = {
                    "type": "step",
                    "data": {"message": f"<think></think><guess>{guess}</guess>"},
                }
                await ws.send(json.dumps(step))
                reply = json.loads(await ws.recv())
                stats["lat"].append(time.perf_counter() - t)
                if reply["type"] != "observation":
                    stats["errors"] += 1
                    break
                data = reply["data"]
                info = data["observation"]["info"]
                if info["error"]:
                    stats["errors"] += 1
                history.append((guess, str_to_pattern(info["pattern"])))
                done = data["done"]
                stats["steps"] += 1
            stats["games"] += 1
            stats["wins"] += int(bool(done and reply["data"]["observation"]["info"].get("won")))
            if stats["games"] % 1000 == 0:
                stats["rss"].append((stats["games"], round(_rss_mb(stats["pid"]), 1)))
        await ws.send(json.dumps({"type": "close"}))


async def _run(url: str, clients: int, games: int, pid: int) -> dict:
    solver = EntropySolver()
    solver.opener()
    stats = {"errors": 0, "steps": 0, "games": 0, "wins": 0, "lat": [], "rss": [], "pid": pid}
    budget = {"left": games}
    t = time.perf_counter()
    await asyncio.gather(*(_client(url, solver, stats, budget, i) for i in range(clients)))
    stats["wall_s"] = time.perf_counter() - t
    return stats


@contextlib.contextmanager
def served(max_sessions: int):
    """``wordle-rl serve`` as its own process on a free loopback port: yields ``(port, process)``
    once healthy."""
    port = _free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "wordle_rl.cli.main",
            "serve",
            "--port",
            str(port),
            "--max-sessions",
            str(max_sessions),
        ],
        env=os.environ.copy(),
    )
    try:
        deadline = time.monotonic() + 120  # a loaded machine starts it slowly
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1)
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("`wordle-rl serve` did not become healthy") from None
                time.sleep(0.1)
        yield port, proc
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--clients", type=int, default=256)
    ap.add_argument("--games", type=int, default=10_000)
    args = ap.parse_args()
    with served(args.clients + 8) as (port, proc):
        rss0 = _rss_mb(proc.pid)
        s = asyncio.run(_run(f"ws://127.0.0.1:{port}/ws", args.clients, args.games, proc.pid))
        lat = sorted(s["lat"])
        q = lambda p: round(1000 * lat[min(len(lat) - 1, int(p * len(lat)))], 2)  # noqa: E731
        print(
            json.dumps(
                {
                    "clients": args.clients,
                    "games": s["games"],
                    "wins": s["wins"],
                    "steps": s["steps"],
                    "errors": s["errors"],
                    "wall_s": round(s["wall_s"], 1),
                    "games_per_s": round(s["games"] / s["wall_s"], 1),
                    "steps_per_s": round(s["steps"] / s["wall_s"], 1),
                    "step_latency_ms": {
                        "p50": q(0.5),
                        "p90": q(0.9),
                        "p99": q(0.99),
                        "max": round(1000 * lat[-1], 1),
                    },
                    "server_rss_mb_start": round(rss0, 1),
                    "server_rss_mb_by_games": s["rss"],
                },
                indent=1,
            )
        )


if __name__ == "__main__":
    main()
