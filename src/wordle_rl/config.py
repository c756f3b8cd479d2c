"""The main job's configuration: sections of typed settings, presets, and TOML/YAML files that
override them.

    wordle-rl pipeline --config quick      # a preset: cpu-default, quick, gpu-qwen3
    wordle-rl pipeline --config my.toml    # a file; `preset = "quick"` in it starts there

Every key is checked (unknown keys, wrong types and impossible values are refused with the key and
the reason), and the resolved config is saved with every run.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field, fields, is_dataclass
from importlib import resources
from pathlib import Path

import yaml

from wordle_rl.data import field_default, mix_text
from wordle_rl.prompts import STYLES
from wordle_rl.rl_rows import RlConfig
from wordle_rl.sft_games import SftConfig

__all__ = [
    "PipelineConfig",
    "DataSection",
    "ModelSection",
    "SftSection",
    "GrpoSection",
    "EvalSection",
    "PRESETS",
    "ConfigError",
    "load_config",
    "preset_values",
]


@dataclass
class DataSection:
    """The data stage; every default is the one of :class:`SftConfig` or :class:`RlConfig`."""

    split_seed: int = field(default=0, metadata={"help": "Seed of the train/val/test split."})
    rl_share: float = field(
        default=0.0,
        metadata={
            "help": "Share of the train answers held back from the SFT games as the rl split, the "
            "RL rows' only targets (0: RL rows on train answers)."
        },
    )
    sft_games: int = field(
        default=field_default(SftConfig, "games"), metadata={"help": "Solver games for SFT."}
    )
    sft_solvers: str = field(
        default=mix_text(field_default(SftConfig, "solver_mix")),
        metadata={
            "help": "Which solvers play the SFT games (solver:weight; entropy, search, candidate, "
            "random)."
        },
    )
    sft_balance_share: float = field(
        default=field_default(SftConfig, "balance_share"),
        metadata={
            "help": "Share of SFT games that write the least-written remaining answer words "
            "(SftConfig.balance_share)."
        },
    )
    sft_wide_share: float = field(
        default=field_default(SftConfig, "wide_share"),
        metadata={
            "help": "Share of SFT games whose target is an allowed word outside the answer list "
            "(SftConfig.wide_share)."
        },
    )
    sft_wide_answers_first: bool = field(
        default=field_default(SftConfig, "wide_answers_first"),
        metadata={
            "help": "Wide SFT games guess fitting answer words while any fits "
            "(SftConfig.wide_answers_first)."
        },
    )
    sft_refused_share: float = field(
        default=field_default(SftConfig, "refused_share"),
        metadata={
            "help": "Share of SFT games showing one refused move and the environment's reply "
            "(SftConfig.refused_share)."
        },
    )
    sft_refused_kinds: str = field(
        default=mix_text(field_default(SftConfig, "refused_kinds")),
        metadata={
            "help": "Which refused moves SFT games show, kind:weight of misspelt, blend, repeat "
            "(SftConfig.refused_kinds)."
        },
    )
    sft_recall_share: float = field(
        default=field_default(SftConfig, "recall_share"),
        metadata={"help": "Share of SFT games that are recall games (SftConfig.recall_share)."},
    )
    protocol: str = field(
        default=field_default(SftConfig, "protocol"),
        metadata={"help": "What SFT games may end on: open or strict (SftConfig.protocol)."},
    )
    rl_rows: int = field(
        default=field_default(RlConfig, "rows"), metadata={"help": "RL prompt rows."}
    )
    sft_lexicon_share: float = field(
        default=field_default(SftConfig, "lexicon_share"),
        metadata={
            "help": "Word-pattern exercises added to the SFT data, as a share of the games "
            "(SftConfig.lexicon_share)."
        },
    )
    rl_wide_share: float = field(
        default=field_default(RlConfig, "wide_share"),
        metadata={
            "help": "Share of RL rows whose target is an allowed word outside the answer list "
            "(RlConfig.wide_share)."
        },
    )
    depth_mix: str = field(
        default=mix_text(field_default(RlConfig, "depth_mix")),
        metadata={"help": "RL history-depth mix."},
    )
    style: str = field(
        default=field_default(SftConfig, "style"),
        metadata={"help": f"Prompt style: {' | '.join(STYLES)}."},
    )
    think: bool = field(
        default=field_default(SftConfig, "think"),
        metadata={"help": "Rationales in <think> (xml/tiles/plain)."},
    )


@dataclass
class ModelSection:
    name: str = field(
        default="init:mini",
        metadata={
            "help": "init:PRESET builds the embedded default; otherwise a hub id or local path."
        },
    )
    lora: bool = field(default=False, metadata={"help": "Train LoRA adapters (hub models)."})
    word_tokens: str = field(
        default="none",
        metadata={
            "help": "init: models only: 'answers' gives the tokenizer one token per answer-list "
            "word (models.WORD_TOKENS)."
        },
    )


def _sft(name: str):
    """A default factory reading ``WordleSFTConfig.<name>`` (imported when a config is built)."""

    def default():
        from wordle_rl.sft import WordleSFTConfig

        return field_default(WordleSFTConfig, name)

    return default


def _grpo(name: str):
    """A default factory reading ``WordleGRPOConfig.<name>`` (imported when a config is built)."""

    def default():
        from wordle_rl.grpo_config import WordleGRPOConfig

        return field_default(WordleGRPOConfig, name)

    return default


@dataclass
class SftSection:
    """The SFT stage; every default is the one of :class:`wordle_rl.sft.WordleSFTConfig`."""

    enabled: bool = field(default=True, metadata={"help": "Run this stage."})
    max_steps: int = field(default_factory=_sft("max_steps"), metadata={"help": "Optimizer steps."})
    batch_size: int = field(
        default_factory=_sft("per_device_train_batch_size"),
        metadata={"help": "Conversations per step."},
    )
    learning_rate: float = field(
        default_factory=_sft("learning_rate"), metadata={"help": "Peak learning rate."}
    )
    time_budget_minutes: float | None = field(
        default_factory=_sft("time_budget_minutes"), metadata={"help": "Stop after this long."}
    )
    schedule_follows_budget: bool = field(
        default_factory=_sft("lr_schedule_follows_budget"),
        metadata={"help": "The cosine schedule also advances with the time spent."},
    )
    save_steps: int = field(
        default_factory=_sft("save_steps"), metadata={"help": "Checkpoint every N steps."}
    )
    soft_target_weight: float = field(
        default_factory=_sft("soft_target_weight"),
        metadata={"help": "Weight of the soft letter targets (0 for BPE tokenizers)."},
    )


@dataclass
class GrpoSection:
    """The GRPO stage; every default is the one of :class:`wordle_rl.grpo.WordleGRPOConfig`."""

    enabled: bool = field(default=True, metadata={"help": "Run this stage."})
    max_steps: int = field(
        default_factory=_grpo("max_steps"), metadata={"help": "Optimizer steps."}
    )
    batch_size: int = field(
        default_factory=_grpo("per_device_train_batch_size"),
        metadata={"help": "Completions per step (a multiple of num_generations)."},
    )
    learning_rate: float = field(
        default_factory=_grpo("learning_rate"), metadata={"help": "Learning rate."}
    )
    time_budget_minutes: float | None = field(
        default_factory=_grpo("time_budget_minutes"), metadata={"help": "Stop after this long."}
    )
    save_steps: int = field(
        default_factory=_grpo("save_steps"), metadata={"help": "Checkpoint every N steps."}
    )
    num_generations: int = field(
        default_factory=_grpo("num_generations"), metadata={"help": "Completions per group."}
    )
    temperature: float = field(
        default_factory=_grpo("temperature"), metadata={"help": "Rollout sampling temperature."}
    )
    eval_val_every: int = field(
        default_factory=_grpo("eval_val_every"),
        metadata={"help": "Greedy play on a seeded val sample every N steps (0 = off)."},
    )
    sft_coef: float = field(
        default_factory=_grpo("sft_coef"),
        metadata={"help": "Weight of the SFT loss on this run's SFT games (0 = off)."},
    )
    sft_coef_final: float | None = field(
        default_factory=_grpo("sft_coef_final"),
        metadata={"help": "SFT loss weight at the last step (None: constant)."},
    )
    rl_coef: float = field(
        default_factory=_grpo("rl_coef"),
        metadata={"help": "Weight of the GRPO loss (0: the SFT loss alone, an ablation)."},
    )
    rollout: str = field(
        default_factory=_grpo("rollout"), metadata={"help": "game, branch, moves or tools."}
    )
    branch_states: str = field(
        default_factory=_grpo("branch_states"),
        metadata={"help": "branch: any, endgame, mistake or second states of the greedy game."},
    )
    branch_reward: str = field(
        default_factory=_grpo("branch_reward"),
        metadata={"help": "branch: game, expected, expected-candidate or fits."},
    )
    moves_states: str = field(
        default_factory=_grpo("moves_states"),
        metadata={"help": "moves: any, endgame or recall states of the policy's games."},
    )
    moves_games: int | None = field(
        default_factory=_grpo("moves_games"),
        metadata={"help": "moves: games the policy plays per group (None: 3 with recall, else 1)."},
    )
    credit: str | None = field(
        default_factory=_grpo("credit"),
        metadata={"help": "move, letter, expected or expected-log (None: expected-log for moves)."},
    )
    scale_rewards: str = field(
        default_factory=_grpo("scale_rewards"),
        metadata={"help": "Advantages divided by the group's reward std (group) or not (none)."},
    )
    use_vllm: bool = field(
        default_factory=_grpo("use_vllm"), metadata={"help": "Generate rollouts with vLLM."}
    )


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


@dataclass
class PipelineConfig:
    name: str = field(default="cpu-default", metadata={"help": "Preset or run name."})
    seed: int = field(default=0, metadata={"help": "Global seed."})
    threads: int = field(default=2, metadata={"help": "torch CPU threads."})
    data: DataSection = field(default_factory=DataSection)
    model: ModelSection = field(default_factory=ModelSection)
    sft: SftSection = field(default_factory=SftSection)
    grpo: GrpoSection = field(default_factory=GrpoSection)
    eval: EvalSection = field(default_factory=EvalSection)


PRESETS = ("cpu-default", "quick", "gpu-qwen3")  # files configs/<name>.yaml inside the package


def preset_values(name: str) -> dict:
    """The settings of a preset, read from the package's ``configs/<name>.yaml``."""
    if name not in PRESETS:
        raise ConfigError(f"unknown preset {name!r}; choose one of {', '.join(PRESETS)}")
    text = resources.files("wordle_rl").joinpath("configs", f"{name}.yaml").read_text()
    return yaml.safe_load(text) or {}


class ConfigError(ValueError):
    """A pipeline config file or value is wrong; the message says which key and why."""


def _merge(dc, values: dict, where: str):
    known = {f.name: f for f in fields(dc)}
    for k, v in values.items():
        if k not in known:
            raise ConfigError(f"{where}: unknown key {k!r}; known keys: {sorted(known)}")
        cur = getattr(dc, k)
        if is_dataclass(cur):
            if not isinstance(v, dict):
                raise ConfigError(f"{where}.{k}: expected a table of settings, got {v!r}")
            _merge(cur, v, f"{where}.{k}")
            continue
        if v is None:
            if "None" not in str(known[k].type):
                raise ConfigError(f"{where}.{k}: cannot be empty")
            setattr(dc, k, None)
            continue
        expected = type(cur) if cur is not None else None
        if expected is bool and not isinstance(v, bool):
            raise ConfigError(f"{where}.{k}: expected true/false, got {v!r}")
        if expected in (int, float) and (isinstance(v, bool) or not isinstance(v, int | float)):
            raise ConfigError(f"{where}.{k}: expected a number, got {v!r}")
        if expected is int and isinstance(v, float) and not v.is_integer():
            raise ConfigError(f"{where}.{k}: expected an integer, got {v!r}")
        if expected is str and not isinstance(v, str):
            raise ConfigError(f"{where}.{k}: expected a string, got {v!r}")
        if expected is list and not isinstance(v, list):
            raise ConfigError(f"{where}.{k}: expected a list, got {v!r}")
        if isinstance(v, int | float) and not isinstance(v, bool) and v < 0:
            raise ConfigError(f"{where}.{k}: must be >= 0, got {v!r}")
        setattr(dc, k, int(v) if expected is int else v)


def load_config(spec: str | None) -> PipelineConfig:
    """A preset name, or a TOML/YAML file (optionally ``preset = "quick"`` inside, overridden by the
    file)."""
    cfg = PipelineConfig()
    spec = spec or "cpu-default"
    if spec in PRESETS:
        _merge(cfg, preset_values(spec), f"preset {spec}")
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
        _merge(cfg, preset_values(base), f"preset {base}")
    _merge(cfg, values, str(path))
    if "name" not in values:
        cfg.name = path.stem
    return _validate(cfg)


def _validate(cfg: PipelineConfig) -> PipelineConfig:
    from wordle_rl.data import DataError
    from wordle_rl.evaluate import DECODE_MODES
    from wordle_rl.models import WORD_TOKENS
    from wordle_rl.rl_rows import parse_depth_mix
    from wordle_rl.sft_games import parse_refused_kinds, parse_solver_mix
    from wordle_rl.solvers import SOLVERS
    from wordle_rl.splits import PROTOCOLS

    if cfg.data.style not in STYLES:
        raise ConfigError(f"data.style: {cfg.data.style!r} is not one of {STYLES}")
    for key, parse in (
        ("sft_solvers", parse_solver_mix),
        ("sft_refused_kinds", parse_refused_kinds),
        ("depth_mix", parse_depth_mix),
    ):
        try:
            parse(getattr(cfg.data, key))
        except DataError as e:
            raise ConfigError(f"data.{key}: {e}") from e
    if not 0 <= cfg.data.rl_share < 1:
        raise ConfigError(f"data.rl_share: at least 0 and below 1, got {cfg.data.rl_share}")
    if cfg.model.word_tokens not in WORD_TOKENS:
        raise ConfigError(
            f"model.word_tokens: {cfg.model.word_tokens!r} is not one of {WORD_TOKENS}"
        )
    if cfg.data.protocol not in PROTOCOLS:
        raise ConfigError(f"data.protocol: {cfg.data.protocol!r} is not one of {PROTOCOLS}")
    bad = [s for s in cfg.eval.splits if s not in ("train", "rl", "val", "test")]
    if bad or not cfg.eval.splits:
        raise ConfigError(f"eval.splits: {bad or 'none'} not a list of train, rl, val, test")
    bad = [d for d in cfg.eval.decodes if d not in DECODE_MODES]
    if bad:
        raise ConfigError(f"eval.decodes: {bad} not in {DECODE_MODES}")
    bad = [s for s in cfg.eval.solvers if s not in SOLVERS]
    if bad:
        raise ConfigError(f"eval.solvers: {bad} not in {sorted(SOLVERS)}")
    from wordle_rl.grpo_config import BRANCH_STATES, ROLLOUTS

    if cfg.grpo.rollout not in ROLLOUTS:
        raise ConfigError(f"grpo.rollout: {cfg.grpo.rollout!r} is not one of {', '.join(ROLLOUTS)}")
    if cfg.grpo.branch_states not in BRANCH_STATES:
        raise ConfigError(
            f"grpo.branch_states: {cfg.grpo.branch_states!r} is not one of "
            f"{', '.join(BRANCH_STATES)}"
        )
    if cfg.grpo.enabled and cfg.grpo.num_generations < 2:
        raise ConfigError(
            "grpo.num_generations: at least 2 (a group of one has no relative advantage)"
        )
    if cfg.grpo.enabled and cfg.grpo.batch_size % cfg.grpo.num_generations:
        raise ConfigError("grpo.batch_size must be a multiple of grpo.num_generations")
    if cfg.threads < 1:
        raise ConfigError("threads: at least 1")
    return cfg
