"""Benchmark SFT data generation: 20,000 solver games (xml style with rationales), rendered and
written.

Run on an idle machine: ``python benchmarks/bench_data.py [--games 20000]``. Prints JSON. Cold
start: the solvers' memo starts empty (the pattern matrix and openers come from the disk cache).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from wordle_rl.data.files import write_jsonl
from wordle_rl.data.sft_games import SftConfig, generate_sft
from wordle_rl.data.splits import make_splits


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--games", type=int, default=20000)
    args = ap.parse_args()
    splits = make_splits(seed=0)
    t = time.perf_counter()
    rows = generate_sft(splits, SftConfig(games=args.games, seed=0, think=True, recall_share=0.0))
    gen = time.perf_counter() - t
    with tempfile.TemporaryDirectory() as d:
        t = time.perf_counter()
        write_jsonl(rows, Path(d) / "sft.jsonl")
        write = time.perf_counter() - t
        size = (Path(d) / "sft.jsonl").stat().st_size
    print(
        json.dumps(
            {
                "games": len(rows),
                "generate_s": round(gen, 1),
                "write_jsonl_s": round(write, 2),
                "total_s": round(gen + write, 1),
                "jsonl_mb": round(size / 2**20, 1),
                "games_per_s": round(len(rows) / (gen + write), 1),
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
