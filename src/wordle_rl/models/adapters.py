"""LoRA adapters (PEFT) for any model of the project, and saving a trained model as a whole folder.

    class WordleSFTConfig(LoraFields, SFTConfig): ...   # --lora, --lora-r, --lora-layers
    model = add_lora(model, LoraFields(lora=True, lora_layers=10))
    save_whole(trainer.model, tok, "runs/sft")           # adapters merged: a plain model folder

Every trained folder is a plain model (adapters merged into the weights), so evaluation, GRPO and
``watch`` load what SFT wrote the way they load the model it started from. ``lora_layers`` puts
adapters on the last N transformer layers only: backward then stops at the first of them, so a step
costs less (on SmolLM2-135M with 2 CPU threads, adapters on the last 10 of 30 layers train 1.6x the
tokens per second of adapters on all 30). A training run's ``checkpoint-N`` folders hold the
adapters alone; :func:`adapter_base` names the model they load on, merged, for evaluation.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from pathlib import Path

__all__ = [
    "LoraFields",
    "LINEAR_MODULES",
    "add_lora",
    "adapter_base",
    "save_whole",
    "layer_count",
    "weights_dtype",
]

# The linear layers of the Llama/Qwen/Gemma families.
LINEAR_MODULES = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


@dataclass
class LoraFields:
    """The LoRA settings shared by the SFT and GRPO configs."""

    lora: bool = field(
        default=False, metadata={"help": "Train LoRA adapters (PEFT) instead of all weights."}
    )
    lora_r: int = field(default=16, metadata={"help": "LoRA rank (alpha is twice the rank)."})
    lora_layers: int | None = field(
        default=None,
        metadata={
            "help": "Adapters on the last N transformer layers only (backward stops below them: "
            "faster steps); None: every layer."
        },
    )


def layer_count(model) -> int:
    """Transformer layers of a causal LM (``num_hidden_layers`` of its config)."""
    return int(model.config.num_hidden_layers)


def weights_dtype(settings: LoraFields) -> str:
    """The dtype a training stage loads its model in: fp32 when every weight is trained (bf16
    autocast computes in bf16 on a GPU, while AdamW updates fp32 weights, which bf16 weights would
    round away), the device's own (bf16 on CUDA) under LoRA, whose frozen base is never updated.

    >>> weights_dtype(LoraFields(lora=False)), weights_dtype(LoraFields(lora=True))
    ('float32', 'auto')
    """
    return "auto" if settings.lora else "float32"


def add_lora(model, settings: LoraFields):
    """``model`` with fresh LoRA adapters on its linear layers (all, or the last
    ``lora_layers``); the model itself when ``settings.lora`` is off."""
    if not settings.lora:
        return model
    from peft import LoraConfig, get_peft_model

    n = layer_count(model)
    layers = None
    if settings.lora_layers is not None:
        if not 1 <= settings.lora_layers <= n:
            raise ValueError(f"lora_layers must be between 1 and {n} for this model")
        layers = list(range(n - settings.lora_layers, n))
    config = LoraConfig(
        r=settings.lora_r,
        lora_alpha=2 * settings.lora_r,
        target_modules=LINEAR_MODULES,
        layers_to_transform=layers,
        task_type="CAUSAL_LM",
    )
    return get_peft_model(model, config)


def adapter_base(folder: str | Path) -> str | None:
    """The base model a folder of LoRA adapters alone (a training run's ``checkpoint-N``) was
    trained on, or None for any other folder. The base must still exist: a checkpoint names it by
    the path it had when the run started.

    >>> import tempfile; d = Path(tempfile.mkdtemp())
    >>> adapter_base(d) is None
    True
    >>> _ = (d / "adapter_config.json").write_text('{"base_model_name_or_path": "/no/such/base"}')
    >>> adapter_base(d)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    FileNotFoundError: ...: LoRA adapters of the model '/no/such/base', which does not exist...
    """
    folder = Path(folder)
    config = folder / "adapter_config.json"
    if not config.is_file() or (folder / "config.json").is_file():
        return None
    try:
        base = json.loads(config.read_text())["base_model_name_or_path"]
    except (ValueError, KeyError, TypeError) as e:
        raise FileNotFoundError(f"{config}: not a PEFT adapter config ({e})") from e
    if not isinstance(base, str) or not base:
        raise FileNotFoundError(f"{config}: names no base model (base_model_name_or_path)")
    hub_id = base.count("/") == 1 and not base.startswith((".", "/")) and not Path(base).exists()
    if not (Path(base).is_dir() or hub_id):
        raise FileNotFoundError(
            f"{folder}: LoRA adapters of the model {base!r}, which does not exist here; load "
            "the run's final model folder instead, or put the base model back at that path"
        )
    return str(base)


def save_whole(model, tok, out: str | Path) -> Path:
    """Save ``model`` and ``tok`` to ``out`` as a plain model folder: a PEFT model is saved with
    its adapters merged into a copy of its weights (the training model keeps its adapters)."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    if hasattr(model, "merge_and_unload"):
        model = copy.deepcopy(model).merge_and_unload()
    model.save_pretrained(out)
    tok.save_pretrained(out)
    return out
