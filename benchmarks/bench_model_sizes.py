"""Training throughput of the embedded model presets: what a fixed CPU budget buys at each size.

Run on an idle machine: ``python benchmarks/bench_model_sizes.py [--presets mini tiny] [--batch
64]``. Each preset is built from its config (no download) and trained with plain forward + backward
+ AdamW on random token batches of SFT-game length; prints JSON lines with parameters, seconds per
step and tokens/s. SFTTrainer adds its own overhead on top (see docs/results.md).
"""

from __future__ import annotations

import argparse
import json
import time

import torch

from wordle_rl.models.embedded import MODEL_PRESETS, build_model


def measure(name: str, batch: int, length: int, steps: int) -> dict:
    """Seconds per training step and tokens/s of one preset (2 warm-up steps, then ``steps``
    timed)."""
    torch.manual_seed(0)
    model = build_model(vocab_size=256, preset=name)
    model.set_attn_implementation("eager")  # what load_model picks on CPU
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x = torch.randint(10, 256, (batch, length), generator=torch.Generator().manual_seed(0))
    for k in range(2 + steps):
        if k == 2:
            t = time.perf_counter()
        model(input_ids=x, labels=x).loss.backward()
        opt.step()
        opt.zero_grad()
    dt = (time.perf_counter() - t) / steps
    return {
        "preset": name,
        "parameters_m": round(sum(p.numel() for p in model.parameters()) / 1e6, 2),
        "batch": batch,
        "length": length,
        "s_per_step": round(dt, 3),
        "tokens_per_s": round(batch * length / dt),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument(
        "--presets", nargs="+", default=["mini", "tiny", "small"], choices=sorted(MODEL_PRESETS)
    )
    ap.add_argument("--batch", type=int, default=64, help="Sequences per step.")
    ap.add_argument("--length", type=int, default=96, help="Tokens per sequence (a game is ~90).")
    ap.add_argument("--steps", type=int, default=8, help="Timed steps (after 2 warm-up steps).")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    for name in args.presets:
        print(json.dumps(measure(name, args.batch, args.length, args.steps)), flush=True)


if __name__ == "__main__":
    main()
