"""Supervised fine-tuning on solver (or teacher) conversations with TRL's ``SFTTrainer``.

    wordle-rl sft --model models/mini --data data/sft --output-dir runs/sft [--max-steps 2200] [--resume]

Loss is on assistant tokens only (``assistant_only_loss``; exploratory turns marked ``"train": false`` are
context). The resolved config is saved as ``wordle_rl_sft_config.json`` in the output folder; checkpoints
(model, optimizer, scheduler, RNG) go to ``checkpoint-N`` and ``--resume`` continues from the last one.
CPU by default here; CUDA with bf16 when present.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from transformers import TrainerCallback
from trl import SFTConfig, SFTTrainer

from wordle_rl.models import load_model, pick_device

__all__ = ["WordleSFTConfig", "run_sft", "load_sft_dataset", "TimeBudget"]


@dataclass
class WordleSFTConfig(SFTConfig):
    """TRL's ``SFTConfig`` with wordle-rl's defaults for the embedded CPU model, plus a few fields."""

    model: str = field(default="models/mini", metadata={"help": "Hub id or local path of the model to train."})
    data: str = field(default="data/sft", metadata={"help": "SFT data: a folder from `wordle-rl data sft` or a JSONL."})
    threads: int = field(default=2, metadata={"help": "torch CPU threads (use 1 on a busy 2-core machine)."})
    time_budget_minutes: float | None = field(default=None, metadata={
        "help": "Stop (and save) once training has run this long."})
    lora: bool = field(default=False, metadata={"help": "Train LoRA adapters (PEFT) instead of all weights."})
    output_dir: str = field(default="runs/sft", metadata={"help": "Where checkpoints and the final model go."})
    assistant_only_loss: bool = field(default=True, metadata={"help": "Loss on assistant tokens only."})
    learning_rate: float = field(default=3e-3, metadata={"help": "Peak learning rate."})
    lr_scheduler_type: str = field(default="cosine", metadata={"help": "Learning-rate schedule."})
    warmup_ratio: float = field(default=0.03, metadata={"help": "Warm-up share of steps."})
    weight_decay: float = field(default=0.01, metadata={"help": "AdamW weight decay."})
    per_device_train_batch_size: int = field(default=64, metadata={"help": "Conversations per step."})
    num_train_epochs: float = field(default=3.0, metadata={"help": "Epochs (max_steps wins when set)."})
    max_length: int | None = field(default=1024, metadata={"help": "Longest conversation in tokens (none cut)."})
    train_sampling_strategy: str = field(default="group_by_length", metadata={
        "help": "Batches of similar length (less padding: ~2x faster here than random order), or 'random'."})
    logging_steps: int = field(default=20, metadata={"help": "Log every N steps."})
    save_steps: int = field(default=200, metadata={"help": "Checkpoint every N steps."})
    save_total_limit: int | None = field(default=2, metadata={"help": "Checkpoints kept."})
    report_to: str = field(default="none", metadata={"help": "Tracker: none, tensorboard, trackio."})
    dataloader_num_workers: int = field(default=0, metadata={"help": "Data loader workers."})
    seed: int = field(default=0, metadata={"help": "Seed of model init order, shuffling and dropout."})
    bf16: bool | None = field(default=None, metadata={"help": "bf16 mixed precision; default: on with CUDA."})
    activation_checkpointing: bool | None = field(default=False, metadata={
        "help": "Recompute activations in backward: saves memory on large models, but makes the small default "
                "model's steps 1.18x slower (TRL turns it on by default; benchmarks/RESULTS.md)."})
    gradient_checkpointing: bool | None = field(default=None, metadata={
        "help": "Old name of activation_checkpointing; when given, it wins."})

    def __post_init__(self) -> None:
        _resolve_defaults(self)
        super().__post_init__()


def _resolve_defaults(cfg) -> None:
    """bf16 only where CUDA supports it; otherwise CPU training in fp32 (TRL would turn bf16 on blindly).

    Also resolves activation checkpointing: the old name ``gradient_checkpointing`` wins when given.
    """
    import torch

    if cfg.gradient_checkpointing is not None:
        cfg.activation_checkpointing = cfg.gradient_checkpointing
        cfg.gradient_checkpointing = None

    cuda = torch.cuda.is_available()
    if cfg.bf16 is None:
        cfg.bf16 = bool(cuda and torch.cuda.is_bf16_supported())
    elif cfg.bf16 and not cuda:
        raise ValueError("bf16=True needs a CUDA GPU with bf16 support; this machine has none (leave it unset)")
    if not cuda:
        cfg.use_cpu = True


class TimeBudget(TrainerCallback):
    """Stops training (with a save) once the wall-clock budget is spent."""

    def __init__(self, minutes: float):
        self.seconds = minutes * 60
        self.start = time.monotonic()

    def on_step_end(self, args, state, control, **kwargs):
        if time.monotonic() - self.start > self.seconds:
            control.should_training_stop = True
            control.should_save = True
        return control


def load_sft_dataset(path: str | Path):
    """``datasets.Dataset`` with a ``messages`` column from a data folder (``hf/`` or ``sft.jsonl``) or a JSONL."""
    from datasets import Dataset, load_from_disk

    from wordle_rl.data import DataError, read_jsonl

    p = Path(path)
    if p.is_dir() and (p / "hf").is_dir():
        ds = load_from_disk(str(p / "hf"))
    elif p.is_dir() and (p / "sft.jsonl").is_file():
        ds = Dataset.from_list([{"messages": r["messages"]} for r in read_jsonl(p / "sft.jsonl")])
    elif p.is_file():
        ds = Dataset.from_list([{"messages": r["messages"]} for r in read_jsonl(p)])
    else:
        raise DataError(f"{p}: no SFT data here (expected a folder from `wordle-rl data sft` or a JSONL file)")
    if "messages" not in ds.column_names:
        raise DataError(f"{p}: rows have no 'messages' column")
    ds = ds.select_columns(["messages"])
    # a game won by its (exploratory, untrained) first move teaches nothing: drop it
    ds = ds.filter(lambda row: any(m["role"] == "assistant" and m.get("train") is not False
                                   for m in row["messages"]))
    if len(ds) == 0:
        raise DataError(f"{p}: no conversation has an assistant turn to learn from")
    return ds


def run_sft(cfg: WordleSFTConfig, resume: bool = False) -> Path:
    """Train, save the final model + tokenizer to ``output_dir``, and return that path."""
    import torch

    torch.set_num_threads(cfg.threads)
    device = pick_device("auto")
    model, tok = load_model(cfg.model, device=device, lora=cfg.lora, threads=cfg.threads)
    dataset = load_sft_dataset(cfg.data)
    out = Path(cfg.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "wordle_rl_sft_config.json").write_text(json.dumps(_jsonable(asdict(cfg)), indent=1, sort_keys=True))
    callbacks = [TimeBudget(cfg.time_budget_minutes)] if cfg.time_budget_minutes else []
    trainer = SFTTrainer(model=model, args=cfg, train_dataset=dataset, processing_class=tok, callbacks=callbacks)
    return train_and_save(trainer, tok, out, resume, "sft")


def train_and_save(trainer, tok, out: Path, resume: bool, name: str) -> Path:
    """Train (from the last ``checkpoint-N`` when resuming), save model + tokenizer + log to ``out``."""
    last = _last_checkpoint(out) if resume else None
    if resume and last is None:
        raise FileNotFoundError(f"--resume: no checkpoint-N folder in {out}")
    trainer.train(resume_from_checkpoint=str(last) if last else None)
    trainer.save_model(str(out))
    tok.save_pretrained(str(out))
    (out / f"wordle_rl_{name}_log.json").write_text(json.dumps(trainer.state.log_history, indent=1))
    return out


def _last_checkpoint(out: Path) -> Path | None:
    cks = [p for p in out.glob("checkpoint-*") if p.is_dir() and p.name.split("-")[-1].isdigit()]
    return max(cks, key=lambda p: int(p.name.split("-")[-1])) if cks else None


def _jsonable(d):
    return json.loads(json.dumps(d, default=str))
