"""``wordle-rl init-model``, ``sft`` and ``grpo``: every field of the TRL config dataclasses is a
flag.

wordle-rl init-model models/mini --preset mini
wordle-rl sft --model models/mini --data data/sft --output-dir runs/sft
wordle-rl grpo --model runs/sft --data data/rl --output-dir runs/grpo --rollout branch
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Annotated

import typer

from wordle_rl.cli_common import console, fail

app = typer.Typer()


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
    word_tokens: Annotated[
        str,
        typer.Option(
            help="none: every word spelled letter by letter; answers: one token per answer-list "
            "word as well."
        ),
    ] = "none",
) -> None:
    """Build the embedded default model (Qwen3 from a config, local tokenizer) with no download."""
    from wordle_rl.models import MODEL_PRESETS, WORD_TOKENS, init_model

    if preset not in MODEL_PRESETS:
        raise fail(f"unknown preset {preset!r}; choose one of {sorted(MODEL_PRESETS)}")
    if word_tokens not in WORD_TOKENS:
        raise fail(f"unknown --word-tokens {word_tokens!r}; choose one of {list(WORD_TOKENS)}")
    path = init_model(out, preset, seed, word_tokens=word_tokens)
    meta = json.loads((path / "wordle_rl.json").read_text())
    console.print(f"{preset} model ({meta['parameters'] / 1e6:.2f} M parameters) -> {path}")


_PASSTHROUGH = {"allow_extra_args": True, "ignore_unknown_options": True}


@app.command(context_settings=_PASSTHROUGH)
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
    from wordle_rl.sft import WordleSFTConfig, run_sft

    cfg = _parse_config(WordleSFTConfig, config, ctx.args)
    try:
        out = run_sft(cfg, resume=resume)
    except (FileNotFoundError, ValueError) as e:
        raise fail(str(e)) from e
    finally:
        end_processes()
    console.print(f"model -> {out}")


@app.command(context_settings=_PASSTHROUGH)
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
    --max-steps, --temperature, --reward-preset, --curriculum, --env-url, ... (`wordle-rl grpo
    --help-config`)."""
    import os

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    from wordle_rl.grpo import WordleGRPOConfig, run_grpo

    cfg = _parse_config(WordleGRPOConfig, config, ctx.args)
    try:
        out = run_grpo(cfg, resume=resume)
    except (FileNotFoundError, ValueError) as e:
        raise fail(str(e)) from e
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


def _unknown_fields(config: Path, unknown: list[str], saved_with) -> str:
    """The error for fields the config class lacks: a typo, or a resolved config saved under
    other transformers/TRL versions, whose field sets differ."""
    from wordle_rl.sft import stack_versions

    here = stack_versions()
    msg = f"{config}: unknown field(s) {unknown}"

    def show(v: dict) -> str:
        return ", ".join(f"{k} {v.get(k, '?')}" for k in here)

    if isinstance(saved_with, dict) and saved_with != here:
        return (
            f"{msg}; the file was saved with {show(saved_with)} and this is {show(here)}: "
            f"remove the fields this version does not have"
        )
    return f"{msg} (check the spelling; installed: {show(here)})"


def _parse_config(cls, config: Path | None, args: list[str]):
    """A TRL-style config dataclass from an optional YAML/JSON file, overridden by --field value
    flags."""
    from transformers import HfArgumentParser

    parser = HfArgumentParser(cls)
    if "--help-config" in args:
        parser.print_help()
        raise typer.Exit(0)
    base: dict = {}
    if config is not None:
        if not config.is_file():
            raise fail(f"{config}: config file not found")
        import yaml

        try:
            base = yaml.safe_load(config.read_text()) or {}
        except yaml.YAMLError as e:
            raise fail(f"{config}: not valid YAML/JSON ({e})") from e
        if not isinstance(base, dict):
            raise fail(f"{config}: expected a mapping of config fields")
        saved_with = base.pop("_saved_with", None)
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(base) - known)
        if unknown:
            raise fail(_unknown_fields(config, unknown, saved_with))
    if base.get("steps_per_generation") is not None:
        # GRPOConfig derives the generation batch from this; a saved resolved config holds both
        base.pop("generation_batch_size", None)
    # the file's values are the defaults the flags override, taken as they are (a saved resolved
    # config holds nulls, lists and mappings that no command-line string spells)
    parser.set_defaults(**base)
    try:
        (cfg,) = parser.parse_args_into_dataclasses(args=list(args))
    except (ValueError, SystemExit) as e:
        raise fail(f"bad config: {e}") from e
    return cfg
