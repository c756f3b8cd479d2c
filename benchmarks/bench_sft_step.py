"""Seconds per step of the real SFT trainer (TRL ``SFTTrainer`` through ``run_sft``), with and
without activation (gradient) checkpointing, and with the soft letter targets (``--soft W``), on
real solver games and the real embedded model.

Run on an idle machine (it builds everything it needs in a temporary folder):

    python benchmarks/bench_sft_step.py [--preset mini] [--games 4000] [--steps 40] \\
        [--batch 64] [--soft 1.0]

Prints one JSON line per setting: steps, batch, the trainer's own ``train_runtime``, seconds per
step and games per second. Step time, not wall time, is what decides how many games fit in the
30-minute SFT budget.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from wordle_rl.data.files import save_dataset
from wordle_rl.data.sft_games import SftConfig, generate_sft
from wordle_rl.data.splits import make_splits
from wordle_rl.models.embedded import init_model
from wordle_rl.training.sft import WordleSFTConfig, run_sft


def measure(
    root: Path,
    model: Path,
    data: Path,
    checkpointing: bool,
    steps: int,
    batch: int,
    threads: int,
    soft: float = 0.0,
) -> dict:
    out = root / f"sft-gc{int(checkpointing)}-soft{soft}"
    cfg = WordleSFTConfig(
        model=str(model),
        data=str(data),
        output_dir=str(out),
        max_steps=steps,
        per_device_train_batch_size=batch,
        activation_checkpointing=checkpointing,
        soft_target_weight=soft,
        save_steps=10 * steps,
        logging_steps=steps,
        threads=threads,
        disable_tqdm=True,
    )
    run_sft(cfg)
    log = json.loads((out / "wordle_rl_sft_log.json").read_text())
    runtime = next(e["train_runtime"] for e in log if "train_runtime" in e)
    return {
        "activation_checkpointing": checkpointing,
        "soft_target_weight": soft,
        "steps": steps,
        "batch": batch,
        "train_runtime_s": round(runtime, 1),
        "s_per_step": round(runtime / steps, 3),
        "games_per_s": round(steps * batch / runtime, 1),
        "final_loss": [e["loss"] for e in log if "loss" in e][-1],
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--preset", default="mini")
    ap.add_argument("--games", type=int, default=4000, help="Solver games to train on.")
    ap.add_argument("--steps", type=int, default=40, help="Optimizer steps per setting.")
    ap.add_argument("--batch", type=int, default=64, help="Games per step.")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument(
        "--soft", type=float, default=1.0, help="Also measure this soft_target_weight (0: skip)."
    )
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        model = init_model(root / "model", args.preset, seed=0)
        rows = generate_sft(
            make_splits(seed=0), SftConfig(games=args.games, think=False, recall_share=0.0)
        )
        data = save_dataset(rows, root / "data", "sft").parent
        settings = [(True, 0.0), (False, 0.0)] + ([(False, args.soft)] if args.soft > 0 else [])
        for checkpointing, soft in settings:
            print(
                json.dumps(
                    measure(
                        root, model, data, checkpointing, args.steps, args.batch, args.threads, soft
                    )
                ),
                flush=True,
            )


if __name__ == "__main__":
    main()
