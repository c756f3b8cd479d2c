"""Seconds per SFT step with a batch's common prefix (system prompt and first user turn) run once,
against the plain forward that runs every row whole, on real solver games and a real model folder.

Run on an idle machine, with a model folder such as the converted SmolLM2:

    wordle-rl init-model models/smollm2 --from smollm2-135m-instruct
    python benchmarks/bench_sft_prefix.py --model models/smollm2 [--batches 4] [--batch 8] \\
        [--style xml] [--lora-layers 0] [--full] [--threads 2] [--cpu-bf16]

On a CUDA machine the model, the batches and the timing move to the GPU, under bf16 autocast as the
trainer computes there (`--full` trains every weight, as the `smollm2-gpu` preset does).

Prints one JSON line per setting (after an untimed warm-up step; the shared setting twice): the
batches' shapes and shared prefix lengths, seconds per step (forward, backward, no optimizer) and
each batch's loss, which must agree between the settings.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from contextlib import nullcontext
from pathlib import Path

import torch

from wordle_rl.data.files import save_dataset
from wordle_rl.data.sft_games import SftConfig, generate_sft
from wordle_rl.data.splits import make_splits
from wordle_rl.models.adapters import add_lora, weights_dtype
from wordle_rl.models.embedded import load_model
from wordle_rl.training.sft import WordleSFTConfig, WordleSFTTrainer
from wordle_rl.training.shared_prompt import common_prefix_length
from wordle_rl.training.soft_targets import load_sft_dataset, soft_target_losses


def loss_of(model, batch: dict, shared: bool) -> torch.Tensor:
    """The mean cross-entropy of the batch's labels: the SFT trainer's own loss (its shared prefix
    run once), or the same loss from the plain forward of every row whole."""
    if shared:
        return soft_target_losses(model, dict(batch))[0]
    ids, mask, labels = batch["input_ids"], batch["attention_mask"], batch["labels"]
    hidden = model(input_ids=ids, attention_mask=mask, output_hidden_states=True).hidden_states[-1]
    keep = labels[:, 1:] != -100
    logits = model.get_output_embeddings()(hidden[:, :-1][keep])
    return torch.nn.functional.cross_entropy(logits.float(), labels[:, 1:][keep])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True, help="A model folder (wordle-rl init-model).")
    ap.add_argument("--batches", type=int, default=4, help="Batches timed per setting.")
    ap.add_argument("--batch", type=int, default=8, help="Games per batch.")
    ap.add_argument("--style", default="xml")
    ap.add_argument(
        "--lora-layers", type=int, default=0, help="LoRA on this many last layers (0: every layer)."
    )
    ap.add_argument("--full", action="store_true", help="Train every weight, not LoRA adapters.")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument(
        "--cpu-bf16",
        action="store_true",
        help="On a CPU, bf16 autocast over fp32 weights, as bf16_where_native trains where the CPU "
        "computes bf16 natively (fp32 without it).",
    )
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as tmp:
        rows = generate_sft(
            make_splits(seed=0),
            SftConfig(games=args.batch * args.batches, seed=0, style=args.style, think=False),
        )
        data = save_dataset(rows, Path(tmp) / "sft", "sft").parent
        cfg = WordleSFTConfig(
            model=args.model,
            data=str(data),
            output_dir=tmp,
            soft_target_weight=0.0,
            per_device_train_batch_size=args.batch,
            lora=not args.full,
            lora_layers=args.lora_layers or None,
            report_to=[],
        )
        # on the device and in the dtype the trainer loads (fp32 weights when all are trained)
        model, tok = load_model(args.model, dtype=weights_dtype(cfg), threads=args.threads)
        model = add_lora(model, cfg)
        cuda = model.device.type == "cuda"
        if cuda or args.cpu_bf16:
            autocast = torch.autocast(model.device.type, dtype=torch.bfloat16)
        else:
            autocast = nullcontext()
        trainer = WordleSFTTrainer(
            model=model, args=cfg, train_dataset=load_sft_dataset(data), processing_class=tok
        )
        batches = [
            {k: v.to(model.device) for k, v in b.items()}
            for _, b in zip(range(args.batches), trainer.get_train_dataloader())
        ]
        model.train()
        with autocast:  # the forward under autocast, the backward outside it, as in the trainer
            warm = loss_of(model, batches[0], False)
        warm.backward()  # warm-up, not timed
        for shared in (True, False, True):
            start, losses = time.perf_counter(), []
            for batch in batches:
                model.zero_grad()
                with autocast:
                    loss = loss_of(model, batch, shared)
                loss.backward()
                losses.append(round(loss.item(), 5))
            if cuda:
                torch.cuda.synchronize()
            seconds = (time.perf_counter() - start) / len(batches)
            print(
                json.dumps(
                    {
                        "prefix_run_once": shared,
                        "shapes": [list(b["input_ids"].shape) for b in batches],
                        "prefix": [
                            common_prefix_length(b["input_ids"], b["attention_mask"])
                            for b in batches
                        ],
                        "s_per_step": round(seconds, 2),
                        "losses": losses,
                    }
                ),
                flush=True,
            )


if __name__ == "__main__":
    main()
