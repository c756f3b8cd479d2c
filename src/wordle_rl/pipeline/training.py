"""The pipeline's training stages as plain functions of their configs, which
:func:`wordle_rl.pipeline.machine.run_apart` runs each in a process of its own: the SFT stage and
the control (:func:`train_sft`), the GRPO stage with its val checks (:func:`train_grpo`)."""

from __future__ import annotations

__all__ = ["train_sft", "train_grpo"]


def train_sft(cfg, resume: bool) -> None:
    """The SFT stage's (and the control's) training, in a process of its own (:func:`run_apart`)."""
    from wordle_rl.training.sft import run_sft

    run_sft(cfg, resume=resume)


def train_grpo(cfg, resume: bool) -> None:
    """The GRPO stage's training with its val checks, in a process of its own."""
    import os

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    from wordle_rl.evaluation.val_callback import val_callbacks
    from wordle_rl.training.grpo import run_grpo

    run_grpo(cfg, resume=resume, callbacks=val_callbacks(cfg))
