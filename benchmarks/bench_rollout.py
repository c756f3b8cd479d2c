"""GRPO rollout throughput: whole games played by a model, all games of a batch advancing together.

Run on an idle machine: ``python benchmarks/bench_rollout.py --model runs/sft --data data/rl --games
64``. Prints JSON: complete games per second, generated tokens per second, wins.
"""

from __future__ import annotations

import argparse
import json
import time

from wordle_rl.models.embedded import load_model
from wordle_rl.training.grpo import WordleGRPOConfig, load_rl_rows
from wordle_rl.training.rollout import WordleRollout


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--games", type=int, default=64)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    model, tok = load_model(args.model, threads=args.threads)
    rows = load_rl_rows(args.data)
    cfg = WordleGRPOConfig(
        sft_coef=0.0,
        eval_val_every=0,
        model=args.model,
        data=args.data,
        output_dir="/tmp/unused",
        num_generations=8,
        per_device_train_batch_size=args.games,
    )
    ro = WordleRollout(cfg, rows, tok)
    ro.play(model, [0] * 8)  # warm-up
    best = None
    for r in range(args.repeats):
        ids = [(r * args.games // 8 + k // 8) % len(rows) for k in range(args.games)]
        t = time.perf_counter()
        games = ro.play(model, ids)
        dt = time.perf_counter() - t
        res = {
            "games": len(games),
            "seconds": round(dt, 2),
            "games_per_s": round(len(games) / dt, 1),
            "gen_tokens_per_s": round(ro.last_stats["gen_tokens"] / dt),
            "wins": sum(g["won"] for g in games),
            "mean_turns": round(sum(g["turns"] for g in games) / len(games), 2),
        }
        best = res if best is None or res["games_per_s"] > best["games_per_s"] else best
    print(json.dumps({"best_of": args.repeats, **best}, indent=1))


if __name__ == "__main__":
    main()
