"""Precision and activation checkpointing: the fields the SFT and GRPO configs share, resolved
before TRL reads them.

    class WordleSFTConfig(LoraFields, PrecisionFields, SFTConfig):
        def __post_init__(self):
            resolve_precision(self)
            super().__post_init__()

bf16 here is autocast over fp32 weights. It is on by default where CUDA supports it and off on a
CPU, where ``bf16_where_native`` turns it on only if the CPU computes bf16 natively (AVX512-BF16 or
AMX), so that the same config runs in fp32, with the same steps, on a CPU without it. TRL would turn
bf16 on blindly, and activation checkpointing too; both are settled here first.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["PrecisionFields", "resolve_precision"]


@dataclass
class PrecisionFields:
    """The precision settings shared by the SFT and GRPO configs."""

    bf16: bool | None = field(
        default=None,
        metadata={
            "help": "bf16 mixed precision (fp32 weights, bf16 autocast); default: on with CUDA, "
            "off on a CPU. true is allowed on a CPU with native bf16 (AVX512-BF16 or AMX)."
        },
    )
    bf16_where_native: bool = field(
        default=False,
        metadata={
            "help": "With bf16 unset: bf16 autocast on a CPU that computes it natively "
            "(AVX512-BF16 or AMX), fp32 on any other CPU; the same steps either way."
        },
    )
    activation_checkpointing: bool | None = field(
        default=False,
        metadata={
            "help": "Recompute activations in backward: saves memory on large models, costs time "
            "(the small default model's steps 1.18x slower; TRL turns it on by default)."
        },
    )
    gradient_checkpointing: bool | None = field(
        default=None,
        metadata={"help": "Old name of activation_checkpointing; when given, it wins."},
    )


def resolve_precision(cfg: PrecisionFields) -> None:
    """Settle ``cfg``'s bf16 and activation checkpointing for this machine, in place. Asking for
    bf16 where neither CUDA nor the CPU computes it is an error."""
    import torch

    from wordle_rl.models.embedded import cpu_has_native_bf16

    if cfg.gradient_checkpointing is not None:
        cfg.activation_checkpointing = cfg.gradient_checkpointing
    # the old name mirrors the new: a transformers that predates activation_checkpointing reads it
    cfg.gradient_checkpointing = cfg.activation_checkpointing

    if torch.cuda.is_available():
        supported = torch.cuda.is_bf16_supported()
        if cfg.bf16 is None:
            cfg.bf16 = bool(supported)
        elif cfg.bf16 and not supported:
            raise ValueError("bf16=True: this CUDA GPU does not support bf16 (leave it unset)")
        return
    cfg.use_cpu = True
    if cfg.bf16 is None:
        cfg.bf16 = bool(cfg.bf16_where_native and cpu_has_native_bf16())
    elif cfg.bf16 and not cpu_has_native_bf16():
        raise ValueError(
            "bf16=True needs a CUDA GPU or a CPU with native bf16 (AVX512-BF16 or AMX); this "
            "machine has neither (leave it unset)"
        )
