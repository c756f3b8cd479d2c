"""Run by test_distributed.py under ``accelerate launch`` with two processes: one SFT or GRPO stage
through ``run_sft``/``run_grpo``; at every step each rank appends to ``OUT/rank<r>.jsonl`` a digest
of its weights, the RL rows it played and the SFT games its GRPO loss drew.

    accelerate launch --config_file configs/accelerate/multi_gpu.yaml --num_processes 2 \\
        tests/distributed_worker.py grpo MODEL DATA OUT SFT_DATA [--resume]
"""

import hashlib
import json
import os
import sys
import time
from pathlib import Path

from transformers import TrainerCallback


class Recorder(TrainerCallback):
    def __init__(self, out: Path):
        self.out, self.trainer = out, None

    def on_init_end(self, args, state, control, **kwargs):
        if os.environ.get("RANK") == "1":  # a late rank: the ranks' clocks disagree on time spent
            time.sleep(2)
        return control

    def on_step_end(self, args, state, control, **kwargs):
        t = self.trainer
        digest = hashlib.sha256()
        for p in t.accelerator.unwrap_model(t.model).parameters():
            digest.update(p.detach().cpu().numpy().tobytes())
        rollout = getattr(t, "rollout_func", None)
        rec = {
            "rank": t.accelerator.process_index,
            "processes": t.accelerator.num_processes,
            "step": state.global_step,
            "weights": digest.hexdigest(),
            "rows": [[r["answer"], r.get("history")] for r in getattr(rollout, "last_rows", [])],
            "sft_games": getattr(t, "last_sft_games", None),
        }
        with (self.out / f"rank{rec['rank']}.jsonl").open("a") as fh:
            fh.write(json.dumps(rec) + "\n")
        return control


def main() -> None:
    stage, model, data, out = sys.argv[1:5]
    resume = "--resume" in sys.argv
    out_dir = Path(out)
    common = dict(
        model=model, data=data, output_dir=out, threads=1, save_steps=2, disable_tqdm=True, seed=0
    )
    if stage == "sft":
        from wordle_rl.training.sft import WordleSFTConfig, run_sft

        run_sft(
            WordleSFTConfig(
                max_steps=4,
                per_device_train_batch_size=4,
                learning_rate=1e-3,
                time_budget_minutes=1.0,  # its schedule follows the time spent, as the default's
                **common,
            ),
            resume,
            callbacks=[Recorder(out_dir)],
        )
    else:
        from wordle_rl.training.grpo import WordleGRPOConfig, run_grpo

        sft_data = sys.argv[5]
        cfg = WordleGRPOConfig(
            eval_val_every=0,
            max_steps=3 if resume else 2,
            num_generations=2,
            per_device_train_batch_size=4,
            max_turn_tokens=10,
            learning_rate=1e-3,
            sft_data=sft_data,
            sft_coef=1.0,
            sft_batch_size=4,
            **common,
        )
        run_grpo(cfg, resume, callbacks=[Recorder(out_dir)])
    from wordle_rl.cli.train import end_processes

    end_processes()  # as the CLI does: no rank exits with gloo running


if __name__ == "__main__":
    main()
