"""Supervised fine-tuning on solver (or teacher) conversations with TRL's ``SFTTrainer``.

    wordle-rl sft --model models/mini --data data/sft --output-dir runs/sft \\
        [--max-steps 4000] [--resume]

Loss is on assistant tokens only (``assistant_only_loss``; exploratory turns marked ``"train":
false`` are context). With ``--soft-target-weight W`` (> 0) every guess letter also gets a soft
target (:mod:`wordle_rl.training.soft_targets`): the distribution of that letter over all answer
words that fit the feedback so far. The resolved config is saved as ``wordle_rl_sft_config.json`` in
the output folder; checkpoints (model, optimizer, scheduler, RNG) go to ``checkpoint-N`` and
``--resume`` continues from the last one. CPU (fp32) by default here; CUDA with bf16 when present;
bf16 on a CPU that computes it natively with ``--bf16 true`` (:mod:`wordle_rl.training.precision`).
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch
from transformers import TrainerCallback
from transformers.trainer_callback import ExportableState
from trl import SFTConfig, SFTTrainer

from wordle_rl.engine.storage import write_atomic
from wordle_rl.models.adapters import LoraFields, add_lora, save_whole, weights_dtype
from wordle_rl.models.embedded import load_model, pick_device
from wordle_rl.models.prompt_record import write_prompt_record
from wordle_rl.training.precision import PrecisionFields, resolve_precision
from wordle_rl.training.records import last_checkpoint, save_config
from wordle_rl.training.soft_targets import (
    SoftTargetCollator,
    data_style,
    load_sft_dataset,
    soft_target_losses,
)

__all__ = [
    "WordleSFTConfig",
    "TimeBudget",
    "budget_cosine",
    "WordleSFTTrainer",
    "run_sft",
    "train_and_save",
]


@dataclass
class WordleSFTConfig(LoraFields, PrecisionFields, SFTConfig):
    """TRL's ``SFTConfig`` with wordle-rl's defaults for the embedded CPU model, plus a few
    fields."""

    model: str = field(
        default="models/mini", metadata={"help": "Hub id or local path of the model to train."}
    )
    data: str = field(
        default="data/sft",
        metadata={"help": "SFT data: a folder from `wordle-rl data sft` or a JSONL."},
    )
    splits: str | None = field(
        default=None,
        metadata={
            "help": "A splits.json (from `wordle-rl data split`): before training, refuse SFT "
            "games whose target is not a train answer or an allowed word outside the answer list "
            "(a val/test target is LEAKAGE). The pipeline passes its own; none = unchecked."
        },
    )
    threads: int = field(
        default=2, metadata={"help": "torch CPU threads (use 1 on a busy 2-core machine)."}
    )
    time_budget_minutes: float | None = field(
        default=None,
        metadata={
            "help": "Stop (and save) once training has run this long (counted across --resume); "
            "None: train all max_steps, the same model on any machine."
        },
    )
    lr_schedule_follows_budget: bool = field(
        default=True,
        metadata={
            "help": "With a time budget and a cosine schedule, the schedule's progress is the "
            "larger of steps done / max_steps and time spent / budget, so the learning rate "
            "reaches its floor when the budget ends on a slow machine too (a run the budget cuts "
            "short otherwise stops mid-schedule). Off: steps only, reproducible to the bit."
        },
    )
    output_dir: str = field(
        default="runs/sft", metadata={"help": "Where checkpoints and the final model go."}
    )
    assistant_only_loss: bool = field(
        default=True, metadata={"help": "Loss on assistant tokens only."}
    )
    learning_rate: float = field(default=5e-4, metadata={"help": "Peak learning rate."})
    lr_scheduler_type: str = field(default="cosine", metadata={"help": "Learning-rate schedule."})
    warmup_steps: float = field(
        default=0, metadata={"help": "Linear warm-up: steps (>= 1) or a share of max_steps (< 1)."}
    )
    weight_decay: float = field(default=0.01, metadata={"help": "AdamW weight decay."})
    per_device_train_batch_size: int = field(
        default=32, metadata={"help": "Conversations per step."}
    )
    num_train_epochs: float = field(
        default=3.0, metadata={"help": "Epochs (max_steps wins when set)."}
    )
    max_length: int | None = field(
        default=1024, metadata={"help": "Longest conversation in tokens (none cut)."}
    )
    train_sampling_strategy: str = field(
        default="group_by_length",
        metadata={
            "help": "Batches of similar length (less padding: ~2x faster here than random order), "
            "or 'random'."
        },
    )
    logging_steps: int = field(default=20, metadata={"help": "Log every N steps."})
    max_steps: int = field(
        default=8000, metadata={"help": "Optimizer steps (the budget may stop sooner)."}
    )
    save_steps: int = field(default=400, metadata={"help": "Checkpoint every N steps."})
    save_total_limit: int | None = field(default=2, metadata={"help": "Checkpoints kept."})
    report_to: str = field(
        default="none", metadata={"help": "Tracker: none, tensorboard, trackio."}
    )
    dataloader_num_workers: int = field(default=0, metadata={"help": "Data loader workers."})
    seed: int = field(
        default=0, metadata={"help": "Seed of model init order, shuffling and dropout."}
    )
    soft_target_weight: float = field(
        default=1.0,
        metadata={
            "help": "Weight of the soft-target loss (0: off): at every guess letter, cross-entropy "
            "against that letter's distribution over the answer words (public list) that fit the "
            "feedback so far and share the guess's prefix. Needs solver data (rows with 'history') "
            "and a guess written one letter per token (the embedded tokenizer in any style, a BPE "
            "one in the spelled style)."
        },
    )

    def __post_init__(self) -> None:
        resolve_precision(self)
        if self.soft_target_weight < 0:
            raise ValueError(f"soft_target_weight must be >= 0, got {self.soft_target_weight}")
        super().__post_init__()
        # an enum after TRL's init
        schedule = getattr(self.lr_scheduler_type, "value", self.lr_scheduler_type)
        if self.lr_schedule_follows_budget and schedule != "cosine":
            raise ValueError(
                f"lr_schedule_follows_budget needs lr_scheduler_type='cosine', got {schedule!r}"
            )


class TimeBudget(TrainerCallback, ExportableState):
    """Stops training (with a save) once the wall-clock budget is spent; the time spent is saved in
    each checkpoint, so a resumed run continues the same budget.

    Every rank reads the same time spent: at each step's end the ranks agree on the largest of
    their clocks (``spent_at_step``), and both the stop and the schedule read that, so no rank
    stops alone and the learning rate is the same on all of them."""

    def __init__(self, minutes: float, spent: float = 0.0):
        self.minutes = minutes
        self.seconds = minutes * 60
        self.spent = spent
        self.spent_at_step = spent
        self.start = time.monotonic()

    def elapsed(self) -> float:
        """Seconds of the budget used so far on this rank (earlier runs of a resumed training
        included)."""
        return self.spent + time.monotonic() - self.start

    def on_step_end(self, args, state, control, **kwargs):
        self.spent_at_step = largest_over_ranks(self.elapsed())
        if self.spent_at_step > self.seconds:
            control.should_training_stop = True
            control.should_save = True
        return control

    def state(self) -> dict:
        return {"args": {"minutes": self.minutes}, "attributes": {"spent": self.spent_at_step}}


def largest_over_ranks(value: float) -> float:
    """``value`` in one process; the largest of every rank's ``value`` in several (a collective:
    every rank calls it at the same point).

    >>> largest_over_ranks(2.5)
    2.5
    """
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return value
    from accelerate import PartialState

    t = torch.tensor([value], dtype=torch.float64, device=PartialState().device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return float(t.item())


def budget_cosine(step: int, max_steps: int, warmup: int, time_share: float) -> float:
    """Learning-rate factor of a cosine schedule whose progress is the larger of the step share and
    the time share.

    >>> round(budget_cosine(50, 100, 0, 0.0), 3), round(budget_cosine(50, 100, 0, 0.75), 3)
    (0.5, 0.146)
    >>> budget_cosine(5, 100, 10, 0.9)  # warm-up is by steps
    0.5
    """
    if step < warmup:
        return step / max(1, warmup)
    progress = max((step - warmup) / max(1, max_steps - warmup), min(1.0, time_share))
    return 0.5 * (1.0 + math.cos(math.pi * min(1.0, progress)))


class WordleSFTTrainer(SFTTrainer):
    """``SFTTrainer`` plus the soft-target loss: ``loss = CE(hard labels) + w * CE(soft letter
    targets)``, with the output head run only where a label or a soft target falls."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if self.args.soft_target_weight > 0:
            self.data_collator = SoftTargetCollator(
                self.data_collator, self.processing_class, data_style(self.train_dataset)
            )

    def create_scheduler(self, num_training_steps: int, optimizer=None):
        args = self.args
        if not (
            args.lr_schedule_follows_budget
            and args.time_budget_minutes
            and self.lr_scheduler is None
        ):
            return super().create_scheduler(num_training_steps, optimizer)
        if self._budget() is None:
            return super().create_scheduler(num_training_steps, optimizer)
        warmup = args.get_warmup_steps(num_training_steps)

        def factor(
            step: int,
        ) -> float:  # the callback is looked up each time: a resumed run restores a new one
            budget = self._budget()
            return budget_cosine(
                step, num_training_steps, warmup, budget.spent_at_step / budget.seconds
            )

        self.lr_scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer or self.optimizer, factor)
        self._created_lr_scheduler = True
        return self.lr_scheduler

    def _budget(self) -> TimeBudget | None:
        return next((c for c in self.callback_handler.callbacks if isinstance(c, TimeBudget)), None)

    def _set_signature_columns_if_needed(self):
        super()._set_signature_columns_if_needed()
        if self.args.soft_target_weight > 0 and "soft_turns" not in self._signature_columns:
            self._signature_columns = [*self._signature_columns, "history", "soft_turns"]

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        if return_outputs:  # a prediction step wants the whole batch's logits
            return super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
        mode = "train" if model.training else "eval"
        hard, soft, accuracy = soft_target_losses(model, inputs, num_items_in_batch)
        # the hard part is already a share of all micro-batches' tokens; the soft mean is per
        # micro-batch, so it is divided by the accumulation steps whenever the Trainer will not do
        # it
        scaled = getattr(self, "loss_is_scaled_for_ga", None)
        if scaled is None:
            scaled = self.model_accepts_loss_kwargs and num_items_in_batch is not None
        steps = self.current_gradient_accumulation_steps if scaled and model.training else 1
        loss = hard + self.args.soft_target_weight * soft / steps
        self._metrics[mode]["mean_token_accuracy"].append(accuracy)
        self._metrics[mode]["hard_loss"].append(hard.item())
        self._metrics[mode]["soft_loss"].append(soft.item())
        return loss


def run_sft(cfg: WordleSFTConfig, resume: bool = False, callbacks: list | None = None) -> Path:
    """Train, save the final model + tokenizer to ``output_dir``, and return that path.
    ``callbacks``: extra ``TrainerCallback`` objects; one with a ``trainer`` attribute is handed the
    trainer once it exists."""
    torch.set_num_threads(cfg.threads)
    device = pick_device("auto")
    model, tok = load_model(
        cfg.model, device=device, dtype=weights_dtype(cfg), threads=cfg.threads
    )
    model = add_lora(model, cfg)
    dataset = load_sft_dataset(cfg.data, soft=cfg.soft_target_weight > 0, splits=cfg.splits)
    out = Path(cfg.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    save_config(cfg, out, "sft")
    style = data_style(dataset)
    if style is not None:
        write_prompt_record(out, style)
    extra = list(callbacks or [])
    callbacks = [TimeBudget(cfg.time_budget_minutes)] if cfg.time_budget_minutes else []
    trainer = WordleSFTTrainer(
        model=model,
        args=cfg,
        train_dataset=dataset,
        processing_class=tok,
        callbacks=callbacks + extra,
    )
    for cb in extra:
        if hasattr(cb, "trainer"):
            cb.trainer = trainer
    return train_and_save(trainer, tok, out, resume, "sft")


def train_and_save(trainer, tok, out: Path, resume: bool, name: str) -> Path:
    """Train (from the last ``checkpoint-N`` when resuming), save model + tokenizer + log to
    ``out`` (LoRA adapters merged: a plain model folder).

    A resumed run gets its :class:`TimeBudget` back from the checkpoint through the Trainer's own
    restore of stateful callbacks, so it continues the same budget."""
    from safetensors import SafetensorError

    last = last_checkpoint(out) if resume else None
    if resume and last is None:
        raise FileNotFoundError(f"--resume: no checkpoint-N folder in {out} (none that is whole)")
    trainer.args.restore_callback_states_from_checkpoint = True
    try:
        trainer.train(resume_from_checkpoint=str(last) if last else None)
    except SafetensorError as e:
        raise FileNotFoundError(
            f"{last}: its weights are damaged ({e}); remove that folder to resume from the "
            "checkpoint before it"
        ) from e
    save_whole(trainer.model, tok, out)
    log = json.dumps(trainer.state.log_history, indent=1)
    write_atomic(out / f"wordle_rl_{name}_log.json", log)
    return out
