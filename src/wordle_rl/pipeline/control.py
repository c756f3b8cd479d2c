"""The GRPO stage's control: more SFT from the same SFT model for as long as GRPO took.

    control: {enabled: true}            # in a pipeline config (on in `quick` and `smollm2-gpu`)

A GRPO stage that beats its SFT model may only be buying what more imitation in the same time would
buy. The control answers that: it trains on from the SFT model with SFT alone (the SFT stage's
settings, the GRPO stage's learning rate, the RL term off) for the GRPO stage's wall-clock, its val
checks included, into ``control/``. The evaluation plays it beside SFT and GRPO and the report pairs
it with both. Its section takes ``wordle-rl sft``'s keys, over the ``sft`` section's.
"""

from __future__ import annotations

import json

from wordle_rl.pipeline.config import ConfigError

__all__ = ["control_config", "run_control"]


def control_config(runner, grpo_seconds: float | None = None):
    """The control's ``WordleSFTConfig``: the SFT stage's (:meth:`Runner.sft_config`) from the SFT
    model, with the GRPO stage's learning rate and its seconds (read from its marker unless given)
    as the time budget, then the ``control`` section."""
    from wordle_rl.data.files import field_default
    from wordle_rl.training.grpo_config import WordleGRPOConfig

    cfg = runner.cfg
    if not (cfg.sft.enabled and cfg.grpo.enabled):
        raise ConfigError(
            "control: needs the sft and grpo stages (it trains on from the SFT model for as "
            "long as the GRPO stage took); disable it or enable them"
        )
    if grpo_seconds is None:
        grpo_seconds = json.loads((runner.markers / "grpo.json").read_text())["seconds"]
    lr = cfg.grpo.settings.get("learning_rate", field_default(WordleGRPOConfig, "learning_rate"))
    control = {
        "model": str(runner.paths["sft"]),
        "output_dir": str(runner.paths["control"]),
        "learning_rate": lr,
        "time_budget_minutes": round(grpo_seconds / 60, 4),
    }
    return runner.sft_config(**{**control, **cfg.control.settings})


def run_control(runner) -> dict:
    """Train the control (resuming a killed one from its last checkpoint); the marker's extras."""
    from wordle_rl.evaluation.val_callback import LOG_FILE
    from wordle_rl.pipeline.machine import run_apart
    from wordle_rl.pipeline.training import train_sft

    if not runner.cfg.control.enabled:
        return {"skipped": True}
    cfg = control_config(runner)
    # a val record (written by the select stage) of an earlier control model is stale from here on
    (runner.paths["control"] / LOG_FILE).unlink(missing_ok=True)
    run_apart(train_sft, cfg, runner._resume(runner.paths["control"]), name="control")
    return {"time_budget_minutes": cfg.time_budget_minutes}
