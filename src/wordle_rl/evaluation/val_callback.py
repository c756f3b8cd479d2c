"""Greedy play on the val answers during GRPO: the stage's own check of held-out play, and the
checkpoint it keeps.

    trainer callbacks: [ValEvalCallback(cfg)]   # cfg: a WordleGRPOConfig with eval_val_every > 0

Every ``eval_val_every`` steps, at step 0 (the starting model, before any update) and at the last
step, the policy plays the same val answers (all of them, or ``eval_val_games`` drawn with the run's
seed); win rate and guesses go to ``val_eval.jsonl`` in the run's output folder, one line per step.
The model with the fewest guesses per game (a loss counts as ``max_turns + 1``; the earlier step on
a tie, so the starting model wins ties) is the one the run keeps: ``best_val.json`` names its step,
and a GRPO step that beats every earlier one is saved to ``best-val/``.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

from transformers import TrainerCallback

from wordle_rl.environment.prompts import PromptStyle
from wordle_rl.models.embedded import eval_mode

__all__ = ["ValEvalCallback", "val_callbacks", "read_records", "best_record"]


BEST_DIR, BEST_FILE, LOG_FILE = "best-val", "best_val.json", "val_eval.jsonl"


def val_callbacks(cfg) -> list:
    """The callbacks that a GRPO run with this config wants from the evaluation layer."""
    return [ValEvalCallback(cfg)] if cfg.eval_val_every else []


def read_records(out: Path) -> list[dict]:
    """The val records a run wrote to ``out/val_eval.jsonl`` (none when it wrote none)."""
    log = Path(out) / LOG_FILE
    return [json.loads(x) for x in log.read_text().splitlines() if x] if log.is_file() else []


def best_record(records: list[dict]) -> dict | None:
    """The val record with the fewest guesses per game, the earliest step on a tie.

    >>> best_record([{"step": 0, "val_mean_guesses_per_game": 4.1},
    ...              {"step": 50, "val_mean_guesses_per_game": 4.0},
    ...              {"step": 100, "val_mean_guesses_per_game": 4.0}])["step"]
    50
    """
    ordered = sorted(records, key=lambda r: r["step"])
    return min(ordered, key=lambda r: r["val_mean_guesses_per_game"], default=None)


class ValEvalCallback(TrainerCallback):
    """Plays the val answers greedily every N steps, step 0 and the last step included; keeps the
    best model (see the module docstring)."""

    def __init__(self, cfg):
        self.cfg, self.trainer = cfg, None
        self.out = Path(cfg.output_dir)

    def on_train_begin(self, args, state, control, **kwargs):
        if state.global_step == 0:  # the starting model, before any update (not again on resume)
            self.evaluate(state.global_step)
        return control

    def on_step_end(self, args, state, control, **kwargs):
        if self.cfg.eval_val_every and state.global_step % self.cfg.eval_val_every == 0:
            self.evaluate(state.global_step)
        return control

    def on_train_end(self, args, state, control, **kwargs):
        if all(r["step"] != state.global_step for r in read_records(self.out)):  # a budget ended it
            self.evaluate(state.global_step)
        return control

    def evaluate(self, step: int) -> None:
        # one val record per step, whatever the process count
        if self.trainer is None or not self.trainer.accelerator.is_main_process:
            return
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
        answers = sp.val
        if self.cfg.eval_val_games is not None:
            k = min(self.cfg.eval_val_games, len(sp.val))
            answers = random.Random(self.cfg.seed).sample(sp.val, k)
        with eval_mode(model):
            res = run_eval(policy, answers, ecfg, None, words)
        rec = {
            "step": step,
            "games": len(answers),
            "val_win_rate": res["metrics"]["win_rate"],
            "val_mean_guesses": res["metrics"]["mean_guesses_on_wins"],
            "val_mean_guesses_per_game": res["metrics"]["mean_guesses_per_game"],
        }
        before = best_record(read_records(self.out))
        with (self.out / LOG_FILE).open("a") as fh:
            fh.write(json.dumps(rec) + "\n")
        if before is None or rec["val_mean_guesses_per_game"] < before["val_mean_guesses_per_game"]:
            self.keep(rec)

    def keep(self, rec: dict) -> None:
        """Save the model of ``rec`` as the run's best on val (step 0 is the starting model, which
        is already saved where the run started from)."""
        from wordle_rl.models.adapters import save_whole
        from wordle_rl.models.prompt_record import write_prompt_record

        if rec["step"] > 0:
            best = self.out / BEST_DIR
            model = self.trainer.accelerator.unwrap_model(self.trainer.model)
            save_whole(model, self.trainer.processing_class, best)
            write_prompt_record(best, PromptStyle(self.cfg.style, think=self.cfg.think))
        path = self.out / BEST_DIR if rec["step"] > 0 else Path(self.cfg.model)
        (self.out / BEST_FILE).write_text(json.dumps({**rec, "model": str(path)}, indent=1))
