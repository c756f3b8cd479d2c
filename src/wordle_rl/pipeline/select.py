"""The job's model: the one of its trained models that plays val best, never one worse than SFT.

The GRPO stage plays the val answers greedily at step 0 (its starting model, the SFT model), every
``eval_val_every`` steps and at its last step, and keeps the model with the fewest guesses per game
(a loss counts as 7; the earlier step on a tie, so the SFT model wins ties):
:mod:`wordle_rl.evaluation.val_callback`. Where the pipeline trained the control (more SFT for as
long as the GRPO stage took), the ``select`` stage plays it on the same val answers
(``control/val_eval.jsonl``) and takes it instead only where it needs fewer guesses per game. It
copies the chosen model to ``final/`` and writes ``selected.json`` with the step, the val figures
and the reason; test plays no part. The report names the chosen model, and every trained model is
still evaluated against the others.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from wordle_rl.engine.storage import replace_dir, write_atomic
from wordle_rl.evaluation.val_callback import BEST_DIR, BEST_FILE, LOG_FILE, read_records

__all__ = ["SELECTED_FILE", "select_model", "selection_lines"]

SELECTED_FILE = "selected.json"


def select_model(runner) -> dict:
    """Choose the job's model (see the module docstring), copy it to ``final/`` and record why."""
    grpo, out = runner.paths["grpo"], runner.out
    records = read_records(grpo) if runner.cfg.grpo.enabled else []
    if records and (grpo / BEST_FILE).is_file():
        best = json.loads((grpo / BEST_FILE).read_text())
        last = max(r["step"] for r in records)
        start = min(records, key=lambda r: r["step"])
        name = "sft" if best["step"] == 0 else "grpo" if best["step"] == last else "final"
        sft = runner.paths["sft"] if runner.cfg.sft.enabled else Path(best["model"])
        path = {"sft": sft, "grpo": grpo, "final": grpo / BEST_DIR}[name]
        why = (
            f"fewest val guesses per game ({best['val_mean_guesses_per_game']:.3f}, a loss as 7) "
            f"of the {len(records)} GRPO val checks on {best['games']} answers; the SFT model "
            f"(step 0) read {start['val_mean_guesses_per_game']:.3f}"
        )
        picked = {"name": name, "step": best["step"], "last_step": last, "why": why}
        picked |= {"val": best, "sft_val": start}
        control = control_record(runner) if runner.cfg.control.enabled else None
        if control is not None:
            picked["control_val"] = control
            if control["val_mean_guesses_per_game"] < best["val_mean_guesses_per_game"]:
                path = runner.paths["control"]
                why = (
                    f"fewer val guesses per game ({control['val_mean_guesses_per_game']:.3f}, a "
                    f"loss as 7) on the GRPO val check's {control['games']} answers than the "
                    f"best of its {len(records)} checks ({best['val_mean_guesses_per_game']:.3f}, "
                    f"step {best['step']}); the SFT model (step 0) read "
                    f"{start['val_mean_guesses_per_game']:.3f}"
                )
                picked |= {"name": "control", "step": control["step"], "why": why, "val": control}
                picked["grpo_val"] = best
    elif runner.cfg.sft.enabled or runner.cfg.grpo.enabled:
        name = "grpo" if runner.cfg.grpo.enabled else "sft"
        path = runner.paths[name]
        picked = {"name": name, "why": "the last trained stage (no GRPO val check ran)"}
    else:  # nothing trained: the model the job started from is its model
        picked = {"name": "model", "why": "no stage trained it", "model": runner._model_source()}
        write_atomic(out / SELECTED_FILE, json.dumps(picked, indent=1) + "\n")
        return picked
    skip = shutil.ignore_patterns("checkpoint-*", f"{BEST_DIR}*", ".*")
    final = replace_dir(
        out / "final", lambda tmp: shutil.copytree(path, tmp, ignore=skip, dirs_exist_ok=True)
    )
    picked["model"] = str(final)
    write_atomic(out / SELECTED_FILE, json.dumps(picked, indent=1) + "\n")
    return picked


def control_record(runner) -> dict:
    """The control's val record on the GRPO val check's answers, played and written to
    ``control/val_eval.jsonl`` the first time it is asked for."""
    from wordle_rl.evaluation.val_callback import play_val
    from wordle_rl.models.embedded import load_model

    folder = runner.paths["control"]
    done = read_records(folder)
    if done:
        return done[-1]
    log = folder / "wordle_rl_sft_log.json"
    steps = [e["step"] for e in json.loads(log.read_text()) if "step" in e] if log.is_file() else []
    model, tokenizer = load_model(str(folder), threads=runner.cfg.threads)
    record = {"step": max(steps, default=None), **play_val(model, tokenizer, runner.grpo_config())}
    write_atomic(folder / LOG_FILE, json.dumps(record) + "\n")
    return record


def selection_lines(out: Path) -> list[str]:
    """The report's section on the job's model."""
    f = out / SELECTED_FILE
    if not f.is_file():
        return []
    s = json.loads(f.read_text())
    what = {
        "sft": "the SFT model",
        "grpo": "the GRPO model of the last step",
        "control": "the control (the SFT model trained on with SFT for as long as GRPO took)",
        "model": "the starting model",
    }.get(s["name"], f"the GRPO model of step {s.get('step')}")
    return [
        "## The job's model",
        "",
        f"`{s['model']}` is {what}, chosen on val: {s['why']}. Test played no part in the choice.",
        "",
    ]
