"""Greedy play on a seeded sample of val answers during GRPO: the stage's own check of held-out
play.

    trainer callbacks: [ValEvalCallback(cfg)]   # cfg: a WordleGRPOConfig with eval_val_every > 0

Every ``eval_val_every`` steps (and at step 0, before any update) the policy plays the same
``eval_val_games`` val answers, drawn with the run's seed; win rate and guesses go to
``val_eval.jsonl`` in the run's output folder, one line per step.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

from transformers import TrainerCallback

from wordle_rl.environment.prompts import PromptStyle
from wordle_rl.models.embedded import eval_mode

__all__ = ["ValEvalCallback", "val_callbacks"]


def val_callbacks(cfg) -> list:
    """The callbacks that a GRPO run with this config wants from the evaluation layer."""
    return [ValEvalCallback(cfg)] if cfg.eval_val_every else []


class ValEvalCallback(TrainerCallback):
    """Plays a seeded sample of val answers every N steps with greedy decoding (step 0 included,
    before any update); appends win rate and mean guesses to ``val_eval.jsonl``."""

    def __init__(self, cfg):
        self.cfg, self.trainer = cfg, None

    def on_train_begin(self, args, state, control, **kwargs):
        if state.global_step == 0:  # the starting model, before any update (not again on resume)
            self.on_step_end(args, state, control)
        return control

    def on_step_end(self, args, state, control, **kwargs):
        if (
            self.trainer is None
            or not self.cfg.eval_val_every
            or state.global_step % self.cfg.eval_val_every
        ):
            return control
        # one val record per step, whatever the process count
        if not self.trainer.accelerator.is_main_process:
            return control
        from wordle_rl.data.splits import Splits
        from wordle_rl.engine.words import load_word_lists
        from wordle_rl.evaluation.evaluate import EvalConfig, ModelPolicy, run_eval

        words = load_word_lists()
        sp = Splits.load(self.cfg.splits, words)
        model = self.trainer.model
        style = PromptStyle(self.cfg.style, think=self.cfg.think)
        policy = ModelPolicy(
            model,
            self.trainer.processing_class,
            style,
            words,
            max_new_tokens=self.cfg.max_turn_tokens,
        )
        ecfg = EvalConfig(
            split="val", train_sample=False, style=self.cfg.style, think=self.cfg.think
        )
        sample = random.Random(self.cfg.seed).sample(
            sp.val, min(self.cfg.eval_val_games, len(sp.val))
        )
        with eval_mode(model):
            res = run_eval(policy, sample, ecfg, None, words)
        rec = {
            "step": state.global_step,
            "val_win_rate": res["metrics"]["win_rate"],
            "val_mean_guesses": res["metrics"]["mean_guesses_on_wins"],
            "val_mean_guesses_per_game": res["metrics"]["mean_guesses_per_game"],
        }
        with (Path(self.cfg.output_dir) / "val_eval.jsonl").open("a") as fh:
            fh.write(json.dumps(rec) + "\n")
        return control
