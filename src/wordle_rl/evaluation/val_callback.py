"""Greedy play on the val answers during GRPO: the stage's own check of held-out play, and the
checkpoint it keeps.

    trainer callbacks: [ValEvalCallback(cfg)]   # cfg: a WordleGRPOConfig with eval_val_every > 0

Every ``eval_val_every`` steps, at step 0 (the starting model, before any update) and at the last
step, the policy plays the same val answers (all of them, or ``eval_val_games`` drawn with the run's
seed); win rate, guesses and the shares of non-words, contradictions and repeats go to
``val_eval.jsonl`` in the run's output folder, one line per step.
The model with the fewest guesses per game (a loss counts as ``max_turns + 1``; the earlier step on
a tie, so the starting model wins ties) is the one the run keeps: ``best_val.json`` names its step,
and a GRPO step that beats every earlier one is saved to ``best-val/``, and a checkpoint follows at
that step.

A run killed at any moment resumes consistent: the model it replaces in ``best-val/`` waits in
``best-val-prev/`` until the next checkpoint, and a run that starts (from a checkpoint or from
nothing) first forgets the records of the steps it will play again, with the best model they chose.
"""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

from transformers import TrainerCallback

from wordle_rl.engine.storage import repair_jsonl, write_atomic
from wordle_rl.environment.prompts import PromptStyle
from wordle_rl.models.embedded import eval_mode

__all__ = [
    "ValEvalCallback",
    "play_val",
    "val_callbacks",
    "read_records",
    "best_record",
    "forget_after",
    "ERROR_RATES",
]


BEST_DIR, BEST_FILE, LOG_FILE = "best-val", "best_val.json", "val_eval.jsonl"
PREV_DIR, STEP_FILE = "best-val-prev", "wordle_rl_val_step.json"
# the move errors each val record also holds (the shares of moves of :func:`run_eval`'s metrics)
ERROR_RATES = ("invalid_word_rate", "inconsistent_rate", "repeated_guess_rate")


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


def play_val(model, tokenizer, cfg) -> dict:
    """The val record (without its step) of ``model`` playing the check's val answers greedily:
    all of them, or ``cfg.eval_val_games`` drawn with ``cfg.seed``; ``cfg`` is a
    ``WordleGRPOConfig`` (its splits, style, seed and ``eval_val_*`` fields)."""
    from wordle_rl.data.splits import Splits
    from wordle_rl.engine.words import load_word_lists
    from wordle_rl.evaluation.evaluate import EvalConfig, ModelPolicy, run_eval

    words = load_word_lists()
    sp = Splits.load(cfg.splits, words)
    style = PromptStyle(cfg.style, think=cfg.think)
    policy = ModelPolicy(
        model,
        tokenizer,
        style,
        words,
        max_new_tokens=cfg.max_turn_tokens,
        batch_size=cfg.eval_val_batch_size,
    )
    ecfg = EvalConfig(split="val", train_sample=False, style=cfg.style, think=cfg.think)
    answers = sp.val
    if cfg.eval_val_games is not None:
        answers = random.Random(cfg.seed).sample(sp.val, min(cfg.eval_val_games, len(sp.val)))
    with eval_mode(model):
        res = run_eval(policy, answers, ecfg, None, words)
    return {
        "games": len(answers),
        "val_win_rate": res["metrics"]["win_rate"],
        "val_mean_guesses": res["metrics"]["mean_guesses_on_wins"],
        "val_mean_guesses_per_game": res["metrics"]["mean_guesses_per_game"],
        **{f"val_{k}": res["metrics"][k] for k in ERROR_RATES},
    }


class ValEvalCallback(TrainerCallback):
    """Plays the val answers greedily every N steps, step 0 and the last step included; keeps the
    best model (see the module docstring)."""

    def __init__(self, cfg):
        self.cfg, self.trainer = cfg, None
        self.out = Path(cfg.output_dir)

    def on_train_begin(self, args, state, control, **kwargs):
        self.resume_at(state.global_step)
        if state.global_step == 0:  # the starting model, before any update (not again on resume)
            self.evaluate(state.global_step)
        return control

    def on_step_end(self, args, state, control, **kwargs):
        if self.cfg.eval_val_every and state.global_step % self.cfg.eval_val_every == 0:
            if self.evaluate(state.global_step):
                control.should_save = True  # the new best-val model, backed by a checkpoint
        return control

    def on_save(self, args, state, control, **kwargs):
        self.drop_prev()
        return control

    def on_train_end(self, args, state, control, **kwargs):
        if all(r["step"] != state.global_step for r in read_records(self.out)):  # a budget ended it
            self.evaluate(state.global_step)
            self.drop_prev()  # the run's last checkpoint, saved before this, holds this step
        return control

    def drop_prev(self) -> None:
        """A checkpoint now backs the model in ``best-val/``: the one it replaced can go."""
        if self.is_main() and (self.out / PREV_DIR).exists():
            shutil.rmtree(self.out / PREV_DIR)

    def is_main(self) -> bool:
        return self.trainer is not None and self.trainer.accelerator.is_main_process

    def resume_at(self, step: int) -> None:
        if self.is_main():
            forget_after(self.out, step, self.cfg.model)

    def evaluate(self, step: int) -> bool:
        """Play the val answers with the model of ``step``, record it, keep it when it is the best
        so far; whether it was."""
        # one val record per step, whatever the process count
        if not self.is_main():
            return False
        rec = {
            "step": step,
            **play_val(self.trainer.model, self.trainer.processing_class, self.cfg),
        }
        before = best_record(read_records(self.out))
        improved = (
            before is None or rec["val_mean_guesses_per_game"] < before["val_mean_guesses_per_game"]
        )
        if improved:
            self.keep(rec)
        with (self.out / LOG_FILE).open("a") as fh:
            fh.write(json.dumps(rec) + "\n")
        return improved

    def keep(self, rec: dict) -> None:
        """Save the model of ``rec`` as the run's best on val (step 0 is the starting model, which
        is already saved where the run started from); the model it replaces waits in
        ``best-val-prev/`` until the next checkpoint."""
        from wordle_rl.models.adapters import save_whole
        from wordle_rl.models.prompt_record import write_prompt_record

        if rec["step"] > 0:
            best, prev, tmp = (self.out / d for d in (BEST_DIR, PREV_DIR, f".{BEST_DIR}.tmp"))
            if tmp.exists():
                shutil.rmtree(tmp)
            model = self.trainer.accelerator.unwrap_model(self.trainer.model)
            save_whole(model, self.trainer.processing_class, tmp)
            write_prompt_record(tmp, PromptStyle(self.cfg.style, think=self.cfg.think))
            write_atomic(tmp / STEP_FILE, json.dumps({"step": rec["step"]}) + "\n")
            if prev.exists():
                shutil.rmtree(prev)
            if best.exists():
                best.rename(prev)
            tmp.rename(best)
        write_best(self.out, rec, self.cfg.model)


def write_best(out: Path, rec: dict, start_model: str) -> None:
    """``best_val.json``: the best val record, with the folder of its model."""
    path = out / BEST_DIR if rec["step"] > 0 else Path(start_model)
    write_atomic(out / BEST_FILE, json.dumps({**rec, "model": str(path)}, indent=1))


def forget_after(out: Path, step: int, start_model: str) -> None:
    """Forget what an earlier, killed run in ``out`` recorded after ``step`` (the checkpoint a run
    starts from; 0: all of it), and put back the best model among the records kept: the one in
    ``best-val/`` or ``best-val-prev/`` (see the module docstring).

    >>> import tempfile; out = Path(tempfile.mkdtemp())
    >>> for s in (2, 4):  # step 4 improved on step 2, then the run died before its checkpoint
    ...     d = out / (BEST_DIR if s == 4 else PREV_DIR); d.mkdir()
    ...     _ = (d / STEP_FILE).write_text(json.dumps({"step": s}))
    >>> lines = [{"step": s, "val_mean_guesses_per_game": 7 - s} for s in (0, 2, 4)]
    >>> _ = (out / LOG_FILE).write_text("".join(json.dumps(r) + "\\n" for r in lines) + '{"st')
    >>> forget_after(out, 2, "runs/sft")
    >>> [r["step"] for r in read_records(out)], [_held_step(out / d) for d in (BEST_DIR, PREV_DIR)]
    ([0, 2], [2, None])
    >>> json.loads((out / BEST_FILE).read_text())["step"]
    2
    """
    repair_jsonl(out / LOG_FILE, lambda r: step > 0 and r["step"] <= step)
    held = {d: _held_step(out / d) for d in (BEST_DIR, PREV_DIR)}
    records = [r for r in read_records(out) if r["step"] == 0 or r["step"] in held.values()]
    best = best_record(records)
    want = best["step"] if best and best["step"] > 0 else None
    if want is not None and held[BEST_DIR] != want:  # then best-val-prev holds it
        if (out / BEST_DIR).exists():
            shutil.rmtree(out / BEST_DIR)
        (out / PREV_DIR).rename(out / BEST_DIR)
    gone = (PREV_DIR, f".{BEST_DIR}.tmp") + ((BEST_DIR,) if want is None else ())
    for d in gone:
        if (out / d).exists():
            shutil.rmtree(out / d)
    if best is None:
        (out / BEST_FILE).unlink(missing_ok=True)
    else:
        write_best(out, best, start_model)


def _held_step(folder: Path) -> int | None:
    """The step whose model a best-val folder holds (None: no whole one)."""
    try:
        return json.loads((folder / STEP_FILE).read_text())["step"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
