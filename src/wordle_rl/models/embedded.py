"""Model factory: any Hugging Face causal LM by hub id or path, and the embedded default built
offline.

    wordle-rl init-model models/mini --preset mini  # a Qwen3 from a config + a local tokenizer
    load_model("models/mini")  /  load_model("Qwen/Qwen3-1.7B")

Both go through ``AutoModelForCausalLM`` / ``AutoTokenizer``: the embedded default is a real Qwen3
model saved with ``save_pretrained``; nothing is mocked.

The default tokenizer (``tokenizers`` WordLevel model wrapped in ``PreTrainedTokenizerFast``) splits
text into single characters, except for the fixed phrases of the prompt renderer (system prompts,
"You have N guesses left.", tags such as ``<guess>``, a feedback mark with its space), which are one
token each. A game then costs ~25 tokens a turn instead of ~80, and every word is still spelled
letter by letter, so unseen words can be written. Compute is the bottleneck on a CPU: fewer tokens a
game is more games a minute. Its chat template marks assistant turns with ``{% generation %}``
(assistant-only loss) and leaves out turns marked ``"train": false`` (exploratory moves shown as
context).
"""

from __future__ import annotations

import json
import os
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "MODEL_PRESETS",
    "ModelPreset",
    "phrases",
    "build_tokenizer",
    "build_model",
    "init_model",
    "load_model",
    "cache_argument",
    "pick_device",
    "cpu_has_native_bf16",
]

SPECIAL = ["<|pad|>", "<|unk|>", "<|endoftext|>", "<|im_start|>", "<|im_end|>"]
CHAT_TEMPLATE = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' }}{% if "
    "message['role'] == 'assistant' %}{% if message['train'] is defined and message['train'] == "
    "false %}{{ message['content'] + '<|im_end|>' }}{% else %}{% generation %}{{ "
    "message['content'] + '<|im_end|>' }}{% endgeneration %}{% endif %}{% else %}{{ "
    "message['content'] + '<|im_end|>' }}{% endif %}{% endfor %}{% if add_generation_prompt %}{{ "
    "'<|im_start|>assistant\n' }}{% endif %}"
)


@dataclass(frozen=True)
class ModelPreset:
    hidden_size: int
    layers: int
    heads: int
    intermediate: int
    help: str


MODEL_PRESETS = {
    "mini": ModelPreset(
        160,
        4,
        4,
        480,
        "≈1.4 M parameters; the default: 2.3x the tokens/s of tiny, so more "
        "games in a fixed CPU budget, and better after 30 minutes of SFT",
    ),
    "tiny": ModelPreset(
        256, 4, 4, 768, "≈3.5 M parameters; fewer held-out wins than mini after 30 min of SFT"
    ),
    "small": ModelPreset(384, 6, 6, 1152, "≈11 M parameters; better with a longer budget"),
    "micro": ModelPreset(64, 2, 2, 192, "≈0.1 M parameters; for tests"),
}


def phrases(max_turns: int = 6) -> list[str]:
    """The fixed phrases of the prompt renderer that become single tokens (longest first)."""
    from wordle_rl.environment import prompts
    from wordle_rl.environment.prompts import PromptStyle

    out: set[str] = {
        "<think>",
        "</think>",
        "<guess>",
        "</guess>",
        " -> ",
        "system\n",
        "user\n",
        "assistant\n",
    }
    for name in prompts.STYLES:
        for think in (True, False):
            st = PromptStyle(name, think=think, max_turns=max_turns)
            out.add(prompts.system_prompt(st))
            out.add(prompts.first_user_message(st))
    for n in range(max_turns + 1):
        left = f"You have {n} guess{'es' if n != 1 else ''} left."
        out |= {left, "\n" + left}
    out |= {" " + t for t in prompts.TILE_MARKS}  # "Y X G" -> "Y", " X", " G": one token per mark
    tiles = {f"{chr(c)}:{t}" for c in range(ord("A"), ord("Z") + 1) for t in prompts.TILE_MARKS}
    out |= tiles | {" " + t for t in tiles}  # the tiles style: "C:G R:X" -> "C:G", " R:X"
    out |= {
        "Known positions: ",
        "Letters in the word: ",
        "Letters not in the word: ",
        "Guesses so far: ",
        "Your guess ",
        " got ",
        "not in position ",
        "exactly once",
        "exactly ",
        "at least ",
        " times",
        "Invalid move: ",
        "You submitted ",
        "Feedback:\n",
        "Possible answers: ",
        "No feedback yet. ",
        " could be the answer and splits them into ",
        " cannot be the answer but splits them into ",
        " groups (",
        " bits).",
        "Exploring with ",
        "Only ",
        " fits.",
        "Hint: ",
        " possible answers remain.",
    }
    out |= {f"{o} letter is " for o in ("1st", "2nd", "3rd", "4th", "5th")}
    return sorted(out, key=lambda p: (-len(p), p))


def build_tokenizer(max_turns: int = 6):
    """Character tokens + renderer phrases, a chat template, pad/bos/eos/unk; a
    ``PreTrainedTokenizerFast``.
    """
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    phr = phrases(max_turns)
    chars = [chr(c) for c in range(32, 127)] + ["\n", "\t"]
    vocab = {tok: i for i, tok in enumerate(SPECIAL + chars + [p for p in phr if p not in chars])}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<|unk|>"))
    alternation = "|".join(_regex_escape(p) for p in SPECIAL + phr)
    tok.pre_tokenizer = pre_tokenizers.Split(Regex(f"{alternation}|[\\s\\S]"), behavior="isolated")
    tok.decoder = decoders.Fuse()
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        pad_token="<|pad|>",
        unk_token="<|unk|>",
        bos_token="<|endoftext|>",
        eos_token="<|im_end|>",
        additional_special_tokens=["<|im_start|>"],
    )
    fast.chat_template = CHAT_TEMPLATE
    fast.padding_side = "left"
    fast.model_max_length = 4096
    return fast


def _regex_escape(text: str) -> str:
    out = []
    for ch in text:
        if ch == "\n":
            out.append("\\n")
        elif ch.isalnum() or ch == " ":
            out.append(ch)
        else:
            out.append("\\" + ch)
    return "".join(out)


def build_model(
    vocab_size: int,
    preset: str = "mini",
    pad_token_id: int = 0,
    bos_token_id: int = 2,
    eos_token_id: int = 4,
    max_positions: int = 4096,
):
    """A Qwen3 causal LM built from a config (random weights; seed torch before calling)."""
    from transformers import Qwen3Config, Qwen3ForCausalLM

    if preset not in MODEL_PRESETS:
        raise ValueError(f"unknown model preset {preset!r}; choose one of {sorted(MODEL_PRESETS)}")
    p = MODEL_PRESETS[preset]
    cfg = Qwen3Config(
        vocab_size=vocab_size,
        hidden_size=p.hidden_size,
        num_hidden_layers=p.layers,
        num_attention_heads=p.heads,
        num_key_value_heads=p.heads,
        head_dim=p.hidden_size // p.heads,
        intermediate_size=p.intermediate,
        tie_word_embeddings=True,
        max_position_embeddings=max_positions,
        pad_token_id=pad_token_id,
        bos_token_id=bos_token_id,
        eos_token_id=eos_token_id,
        use_cache=True,
    )
    return Qwen3ForCausalLM(cfg)


def init_model(out: str | Path, preset: str = "mini", seed: int = 0) -> Path:
    """Build the embedded default (tokenizer + model) and ``save_pretrained`` both to ``out``."""
    import torch

    out = Path(out)
    tok = build_tokenizer()
    torch.manual_seed(seed)
    model = build_model(len(tok), preset, tok.pad_token_id, tok.bos_token_id, tok.eos_token_id)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tok.save_pretrained(out)
    (out / "wordle_rl.json").write_text(
        json.dumps(
            {
                "preset": preset,
                "seed": seed,
                "parameters": sum(p.numel() for p in model.parameters()),
            },
            indent=1,
        )
    )
    return out


def pick_device(device: str = "auto") -> str:
    """``auto`` → ``cuda`` when available, else ``cpu``; asking for ``cuda`` without it is an
    error."""
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise RuntimeError(
            "--device cuda was asked for, but torch sees no CUDA device on this machine"
        )
    return device


def cpu_has_native_bf16(cpuinfo: str | Path = "/proc/cpuinfo") -> bool:
    """Whether this CPU computes bf16 in hardware (AVX512-BF16 or AMX-BF16) and torch's oneDNN can
    use it.

    Only there is ``bf16=True`` accepted on a CPU (elsewhere bf16 is emulated and slower); it makes
    the small default model's SFT steps ~1.4x faster. Reads the Linux CPU flags; ``False`` when
    absent.
    """
    import torch

    path = Path(cpuinfo)
    if not path.is_file() or not torch.backends.mkldnn.is_available():
        return False
    flags = next(
        (
            line.split(":", 1)[1].split()
            for line in path.read_text().splitlines()
            if line.startswith("flags")
        ),
        [],
    )
    return bool({"avx512_bf16", "amx_bf16"} & set(flags))


def load_model(
    name_or_path: str,
    device: str = "auto",
    dtype: str = "auto",
    threads: int | None = None,
):
    """``(model, tokenizer)`` from a hub id or local path; bf16 on CUDA, fp32 on CPU (LoRA:
    :func:`wordle_rl.models.adapters.add_lora`)."""
    import torch
    from safetensors import SafetensorError
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    if threads:
        torch.set_num_threads(threads)
    local = Path(name_or_path)
    if not local.exists() and (
        name_or_path.startswith((".", "/"))
        or os.sep in name_or_path.rstrip(os.sep)
        and not _looks_like_hub_id(name_or_path)
    ):
        raise FileNotFoundError(
            f"model path {name_or_path!r} does not exist (run `wordle-rl init-model` first?)"
        )
    dev = pick_device(device)
    if dtype == "auto":
        torch_dtype = (
            torch.bfloat16
            if dev.startswith("cuda") and torch.cuda.is_bf16_supported()
            else torch.float32
        )
    else:
        torch_dtype = {
            "float32": torch.float32,
            "bfloat16": torch.bfloat16,
            "float16": torch.float16,
        }[dtype]
    from wordle_rl.models.adapters import adapter_base

    base = adapter_base(name_or_path)  # a LoRA checkpoint of a training run: its base + adapters
    weights = base or name_or_path
    try:
        tok = AutoTokenizer.from_pretrained(
            name_or_path if not base or _has_tokenizer(local) else base
        )
        attn = attention_for(AutoConfig.from_pretrained(weights), dev)
        model = AutoModelForCausalLM.from_pretrained(
            weights, dtype=torch_dtype, attn_implementation=attn
        )
        if base:
            from peft import PeftModel

            model = PeftModel.from_pretrained(model, name_or_path).merge_and_unload()
    except OSError as e:
        raise FileNotFoundError(f"cannot load model {name_or_path!r}: {e}") from e
    except SafetensorError as e:  # a truncated or overwritten weights file
        raise FileNotFoundError(
            f"cannot load model {name_or_path!r}: its weights file is damaged ({e}); rebuild the "
            "folder or resume the run that wrote it"
        ) from e
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    tok.padding_side = "left"
    return model.to(dev), tok


EAGER_MAX_HIDDEN = 512


def attention_for(config, device: str) -> str | None:
    """The attention implementation to load a model with: eager on a CPU for models as narrow as
    the embedded presets (hidden size below ``EAGER_MAX_HIDDEN``), where it is the faster one;
    otherwise transformers' default (SDPA), faster and without a ``length²`` weight tensor per layer
    for pretrained models such as SmolLM2.

    >>> from transformers import PretrainedConfig
    >>> attention_for(PretrainedConfig(hidden_size=160), "cpu"), attention_for(
    ...     PretrainedConfig(hidden_size=576), "cpu")
    ('eager', None)
    """
    narrow = getattr(config, "hidden_size", EAGER_MAX_HIDDEN) < EAGER_MAX_HIDDEN
    return "eager" if device == "cpu" and narrow else None


def cache_argument() -> str:
    """``generate``'s name for the KV cache: ``cache`` once transformers renamed it,
    ``past_key_values`` before."""
    from transformers.generation import utils

    return "cache" if "cache" in getattr(utils, "ALL_CACHE_NAMES", ()) else "past_key_values"


@contextmanager
def eval_mode(model):
    """Put ``model`` in eval mode for the block (generation, a scoring pass) and back in train
    mode after it if it was training: sampling in train mode (no KV cache under gradient
    checkpointing, dropout) is wrong and slow."""
    was_training = model.training
    model.eval()
    try:
        yield model
    finally:
        if was_training:
            model.train()


def _has_tokenizer(folder: Path) -> bool:
    return (folder / "tokenizer_config.json").is_file()


def _looks_like_hub_id(name: str) -> bool:
    parts = name.split("/")
    return len(parts) == 2 and all(parts) and not name.startswith((".", "/"))
