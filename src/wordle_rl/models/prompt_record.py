"""The prompt style a trained model folder records, so that no stage prompts it in another one.

    write_prompt_record("runs/sft", PromptStyle("tiles", think=False))  # wordle_rl_prompt.json
    model_style("runs/sft", None, None)  # -> ("tiles", False): what eval, watch and GRPO use

SFT and GRPO write the record beside the model they save; evaluation, the recall probe and GRPO
read it, take the style from it when none is given, and refuse a given style that disagrees with
it. A hub id or a folder without a record has none, and is prompted in the default style.
"""

from __future__ import annotations

import json
from pathlib import Path

from wordle_rl.engine.storage import write_atomic
from wordle_rl.environment.prompts import DEFAULT_STYLE, PromptStyle

__all__ = [
    "PROMPT_RECORD",
    "write_prompt_record",
    "prompt_record",
    "check_prompt_style",
    "model_style",
]

PROMPT_RECORD = "wordle_rl_prompt.json"


def write_prompt_record(out: str | Path, style: PromptStyle) -> None:
    """Record in a model folder the prompt style it was trained on (its name, and whether answers
    think)."""
    write_atomic(
        Path(out) / PROMPT_RECORD,
        json.dumps({"style": style.name, "think": style.uses_think}) + "\n",
    )


def prompt_record(name_or_path: str | Path) -> dict:
    """The prompt style a model folder records (``{}`` for a hub id or a folder without one); a
    record that is not a JSON object is a ``ValueError`` naming the file."""
    record = Path(name_or_path) / PROMPT_RECORD
    if not record.is_file():
        return {}
    try:
        kept = json.loads(record.read_text())
    except json.JSONDecodeError as e:
        raise ValueError(f"{record}: not valid JSON ({e.msg}); delete it or rewrite it") from e
    if not isinstance(kept, dict):
        raise ValueError(f"{record}: expected a JSON object with 'style' and 'think'")
    return kept


def check_prompt_style(name_or_path: str, style: PromptStyle) -> None:
    """Raise ``ValueError`` when a local model folder records another prompt style than ``style`` (a
    hub model or a folder without a record is not checked). Think is compared as the style uses it
    (never for ``brackets``)."""
    record = Path(name_or_path) / PROMPT_RECORD
    if not (want := prompt_record(name_or_path)):
        return
    if want.get("style") != style.name:
        raise ValueError(
            f"model {name_or_path} was trained on {want.get('style')!r} prompts ({record}), not "
            f"{style.name!r}: pass --style {want.get('style')}"
        )
    if bool(want.get("think")) != style.uses_think:
        raise ValueError(
            f"model {name_or_path} was trained with think={bool(want.get('think'))} ({record}), "
            f"not think={style.uses_think}: set think to {bool(want.get('think'))}"
        )


def model_style(model: str | None, style: str | None, think: bool | None) -> tuple[str, bool]:
    """The prompt style and think flag to play ``model`` with: each given value as given, each
    missing one from the record its folder keeps (:func:`prompt_record`), else the defaults
    (``tiles``, no think).

    >>> model_style(None, None, None), model_style("no/such/folder", "xml", True)
    (('tiles', False), ('xml', True))
    """
    kept = prompt_record(model) if model else {}
    style = style if style is not None else kept.get("style", DEFAULT_STYLE)
    think = think if think is not None else bool(kept.get("think", False))
    return style, think
