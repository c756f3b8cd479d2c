"""The main job: one command from nothing to a trained Wordle player, with a report.

    wordle-rl pipeline                         # preset cpu-default, output runs/cpu-default
    wordle-rl pipeline --config quick          # a few minutes, a smoke run
    wordle-rl pipeline --config my.toml --out runs/exp1

Stages, in order: words (lists, pattern matrix, openers), baselines (solvers on the test split), data
(splits, SFT games, RL prompts), model (the embedded default or a hub model), sft, grpo, eval (free and
consistent decoding on the test split), report. Each stage writes its outputs and a marker; a rerun
skips finished stages and resumes a killed training stage from its last checkpoint.
"""

from __future__ import annotations

import json
import platform
import resource
import time
import tomllib
from dataclasses import asdict, dataclass, field, fields, is_dataclass
from pathlib import Path

from wordle_rl.prompts import DEFAULT_STYLE, STYLES

__all__ = ["PipelineConfig", "PRESETS", "load_config", "run_pipeline", "STAGES"]

STAGES = ("words", "baselines", "data", "model", "sft", "grpo", "eval", "report")


@dataclass
class DataSection:
    split_seed: int = field(default=0, metadata={"help": "Seed of the train/val/test split."})
    rl_share: float = field(default=0.0, metadata={
        "help": "Share of the train answers held back from the SFT games as the rl split, the RL rows' only "
                "targets: GRPO then plays words the SFT model was never taught as answers, as val and test are "
                "(0: RL rows on train answers)."})
    sft_games: int = field(default=140000, metadata={"help": "Solver games for SFT."})
    sft_solvers: str = field(default="candidate:0.8,random:0.2", metadata={
        "help": "Which solvers play the SFT games (solver:weight; entropy, search, candidate, random)."})
    sft_balance_share: float = field(default=0.0, metadata={
        "help": "Share of SFT games that write the least-written remaining answer words (SftConfig.balance_share)."})
    sft_wide_share: float = field(default=0.0, metadata={
        "help": "Share of SFT games whose target is an allowed word outside the answer list (SftConfig.wide_share)."})
    sft_wide_answers_first: bool = field(default=False, metadata={
        "help": "Wide SFT games guess fitting answer words while any fits (SftConfig.wide_answers_first)."})
    sft_refused_share: float = field(default=0.15, metadata={
        "help": "Share of SFT games showing one refused move and the environment's reply (SftConfig.refused_share)."})
    sft_refused_kinds: str = field(default="misspelt:1", metadata={
        "help": "Which refused moves SFT games show, kind:weight of misspelt, blend, repeat "
                "(SftConfig.refused_kinds)."})
    sft_recall_share: float = field(default=0.2, metadata={
        "help": "Share of SFT games that are recall games: on an outside word next to an answer word, cut where that "
                "answer word is the only fit and the solver writes it (SftConfig.recall_share)."})
    protocol: str = field(default="open", metadata={
        "help": "What SFT games may end on: open or strict (SftConfig.protocol)."})
    rl_rows: int = field(default=4000, metadata={"help": "RL prompt rows."})
    sft_lexicon_share: float = field(default=0.0, metadata={
        "help": "Word-pattern exercises added to the SFT data, as a share of the games (SftConfig.lexicon_share)."})
    rl_wide_share: float = field(default=0.0, metadata={
        "help": "Share of RL rows whose target is an allowed word outside the answer list (RlConfig.wide_share)."})
    depth_mix: str = field(default="0:0.4,1:0.3,2:0.2,3:0.1", metadata={"help": "RL history-depth mix."})
    style: str = field(default=DEFAULT_STYLE, metadata={
        "help": f"Prompt style: {' | '.join(STYLES)}."})
    think: bool = field(default=False, metadata={"help": "Rationales in <think> (xml/tiles/plain)."})


@dataclass
class ModelSection:
    name: str = field(default="init:mini", metadata={
        "help": "init:PRESET builds the embedded default; otherwise a hub id or local path."})
    lora: bool = field(default=False, metadata={"help": "Train LoRA adapters (hub models)."})
    word_tokens: str = field(default="none", metadata={
        "help": "init: models only: 'answers' gives the tokenizer one token per answer-list word "
                "(models.WORD_TOKENS)."})


@dataclass
class TrainSection:
    enabled: bool = field(default=True, metadata={"help": "Run this stage."})
    max_steps: int = field(default=750, metadata={"help": "Optimizer steps."})
    batch_size: int = field(default=32, metadata={"help": "Conversations (SFT) or games (GRPO) per step."})
    learning_rate: float = field(default=2e-3, metadata={"help": "Peak learning rate."})
    time_budget_minutes: float | None = field(default=None, metadata={"help": "Stop after this long."})
    schedule_follows_budget: bool = field(default=False, metadata={
        "help": "SFT: the cosine schedule also advances with the time spent, so it ends at the budget "
                "(WordleSFTConfig.lr_schedule_follows_budget)."})
    num_generations: int = field(default=8, metadata={"help": "GRPO: games per prompt."})
    temperature: float = field(default=1.0, metadata={"help": "GRPO: rollout temperature."})
    save_steps: int = field(default=100, metadata={"help": "Checkpoint every N steps."})
    eval_val_every: int = field(default=0, metadata={
        "help": "GRPO: greedy win rate on a seeded sample of 100 val answers every N steps."})
    soft_target_weight: float = field(default=0.0, metadata={
        "help": "SFT: weight of the soft letter targets (WordleSFTConfig.soft_target_weight; 0 for BPE tokenizers)."})
    sft_coef: float = field(default=0.0, metadata={
        "help": "GRPO: weight of the SFT loss on this run's SFT games added to every step (WordleGRPOConfig.sft_coef, "
                "PPO-ptx; the soft targets follow sft.soft_target_weight; 0 = off)."})
    sft_coef_final: float | None = field(default=None, metadata={
        "help": "GRPO: SFT loss weight at the last step, reached linearly from sft_coef (None: constant)."})
    rollout: str = field(default="game", metadata={
        "help": "GRPO: game (whole sampled games) or branch (sampled moves at one state of the greedy game)."})
    use_vllm: bool = field(default=False, metadata={
        "help": "GRPO: generate rollouts with vLLM in colocate mode (needs CUDA and `pip install 'wordle-rl[gpu]'`)."})


@dataclass
class EvalSection:
    splits: list[str] = field(default_factory=lambda: ["test", "val"], metadata={
        "help": "Splits whose answers every policy plays, each in eval/<split>/ (val for choices, test for figures)."})
    limit: int | None = field(default=None, metadata={"help": "Only the first N answers of each split (None: all)."})
    decodes: list[str] = field(default_factory=lambda: ["free", "consistent"], metadata={"help": "Decoding modes."})
    solvers: list[str] = field(default_factory=lambda: ["random", "entropy", "search"], metadata={
        "help": "Solver baselines."})
    batch_size: int = field(default=128, metadata={"help": "Games per generate call."})


@dataclass
class PipelineConfig:
    name: str = field(default="cpu-default", metadata={"help": "Preset or run name."})
    seed: int = field(default=0, metadata={"help": "Global seed."})
    threads: int = field(default=2, metadata={"help": "torch CPU threads."})
    data: DataSection = field(default_factory=DataSection)
    model: ModelSection = field(default_factory=ModelSection)
    # 8,000 steps of 32 games (1.8 epochs of 140,000 games) about fill the 30-minute budget on an idle 2-core
    # machine; the cosine follows the budget, so a slower machine still ends at the learning-rate floor. Why each
    # value: docs/results.md.
    sft: TrainSection = field(default_factory=lambda: TrainSection(max_steps=8000, batch_size=32,
                                                                   learning_rate=1e-3, save_steps=400,
                                                                   time_budget_minutes=30, soft_target_weight=1.0,
                                                                   schedule_follows_budget=True))
    # GRPO keeps the SFT loss in every step (sft_coef 1.0, PPO-ptx), which stops it from losing held-out wins.
    grpo: TrainSection = field(default_factory=lambda: TrainSection(max_steps=200, batch_size=64, learning_rate=5e-5,
                                                                    temperature=0.7, save_steps=25,
                                                                    time_budget_minutes=40, eval_val_every=50,
                                                                    sft_coef=1.0))
    eval: EvalSection = field(default_factory=EvalSection)


PRESETS: dict[str, dict] = {
    "cpu-default": {},
    "quick": {"name": "quick", "threads": 2,
              "data": {"sft_games": 600, "rl_rows": 64},
              "model": {"name": "init:micro"},
              "sft": {"max_steps": 30, "batch_size": 16, "learning_rate": 1e-2, "save_steps": 15,
                      "time_budget_minutes": 5},
              "grpo": {"max_steps": 2, "batch_size": 8, "num_generations": 4, "learning_rate": 1e-3,
                       "save_steps": 2, "time_budget_minutes": 5, "eval_val_every": 2},
              "eval": {"limit": 12, "solvers": ["random", "entropy"], "batch_size": 32}},
    "gpu-qwen3": {"name": "gpu-qwen3",
                  "data": {"sft_games": 20000, "rl_rows": 4000, "think": False, "style": "xml"},
                  "model": {"name": "Qwen/Qwen3-1.7B", "lora": True},
                  "sft": {"max_steps": 1000, "batch_size": 16, "learning_rate": 1e-4, "time_budget_minutes": None,
                          "soft_target_weight": 0.0},  # Qwen's BPE spells words in chunks, not letters
                  "grpo": {"max_steps": 500, "batch_size": 64, "num_generations": 8, "learning_rate": 1e-5,
                           "time_budget_minutes": None, "use_vllm": True,
                           "sft_coef": 0.0},  # Qwen's chat template marks no assistant turns for the SFT loss
                  "eval": {"batch_size": 64}},
}


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
    """A preset name, or a TOML/YAML file (optionally ``preset = "quick"`` inside, overridden by the file)."""
    cfg = PipelineConfig()
    spec = spec or "cpu-default"
    if spec in PRESETS:
        _merge(cfg, PRESETS[spec], f"preset {spec}")
        cfg.name = spec
        return _validate(cfg)
    path = Path(spec)
    if not path.is_file():
        raise ConfigError(f"{spec!r} is neither a preset ({', '.join(PRESETS)}) nor an existing config file")
    text = path.read_text()
    try:
        if path.suffix in (".yaml", ".yml"):
            import yaml

            values = yaml.safe_load(text) or {}
        else:
            values = tomllib.loads(text)
    except (tomllib.TOMLDecodeError, ValueError) as e:
        raise ConfigError(f"{path}: cannot parse ({e})") from e
    if not isinstance(values, dict):
        raise ConfigError(f"{path}: expected a table of settings")
    base = values.pop("preset", None)
    if base is not None:
        if base not in PRESETS:
            raise ConfigError(f"{path}: unknown preset {base!r}; choose one of {sorted(PRESETS)}")
        _merge(cfg, PRESETS[base], f"preset {base}")
    _merge(cfg, values, str(path))
    if "name" not in values:
        cfg.name = path.stem
    return _validate(cfg)


def _validate(cfg: PipelineConfig) -> PipelineConfig:
    from wordle_rl.data import PROTOCOLS, DataError, parse_depth_mix, parse_refused_kinds, parse_solver_mix
    from wordle_rl.evaluate import DECODE_MODES
    from wordle_rl.models import WORD_TOKENS
    from wordle_rl.solvers import SOLVERS

    if cfg.data.style not in STYLES:
        raise ConfigError(f"data.style: {cfg.data.style!r} is not one of {STYLES}")
    for key, parse in (("sft_solvers", parse_solver_mix), ("sft_refused_kinds", parse_refused_kinds),
                       ("depth_mix", parse_depth_mix)):
        try:
            parse(getattr(cfg.data, key))
        except DataError as e:
            raise ConfigError(f"data.{key}: {e}") from e
    if not 0 <= cfg.data.rl_share < 1:
        raise ConfigError(f"data.rl_share: at least 0 and below 1, got {cfg.data.rl_share}")
    if cfg.model.word_tokens not in WORD_TOKENS:
        raise ConfigError(f"model.word_tokens: {cfg.model.word_tokens!r} is not one of {WORD_TOKENS}")
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
    if cfg.grpo.rollout not in ("game", "branch"):
        raise ConfigError(f"grpo.rollout: {cfg.grpo.rollout!r} is not game or branch")
    if cfg.grpo.enabled and cfg.grpo.num_generations < 2:
        raise ConfigError("grpo.num_generations: at least 2 (a group of one has no relative advantage)")
    if cfg.grpo.enabled and cfg.grpo.batch_size % cfg.grpo.num_generations:
        raise ConfigError("grpo.batch_size must be a multiple of grpo.num_generations")
    if cfg.threads < 1:
        raise ConfigError("threads: at least 1")
    return cfg


# --------------------------------------------------------------------------- stages
def peak_rss_gib() -> float:
    """The largest resident set size so far of this process or any of its finished children, in GiB (Linux).

    >>> 0 < peak_rss_gib() < 1024
    True
    """
    kib = max(resource.getrusage(who).ru_maxrss for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
    return round(kib / 2**20, 2)


class Runner:
    def __init__(self, cfg: PipelineConfig, out: Path, console):
        self.cfg, self.out, self.console = cfg, out, console
        self.markers = out / "markers"
        self.markers.mkdir(parents=True, exist_ok=True)
        self.paths = {"splits": out / "data" / "splits.json", "sft_data": out / "data" / "sft",
                      "rl_data": out / "data" / "rl", "model": out / "model", "sft": out / "sft",
                      "grpo": out / "grpo", "eval": out / "eval"}

    def done(self, stage: str) -> bool:
        return (self.markers / f"{stage}.json").is_file()

    def mark(self, stage: str, seconds: float, extra: dict | None = None) -> None:
        (self.markers / f"{stage}.json").write_text(json.dumps({"stage": stage, "seconds": round(seconds, 1),
                                                                "peak_rss_gib": peak_rss_gib(), **(extra or {})},
                                                               indent=1))

    def run(self, stages=STAGES) -> None:
        for stage in stages:
            if self.done(stage):
                self.console.print(f"[dim]✓ {stage} (done earlier, skipped)[/]")
                continue
            self.console.rule(f"[bold]{stage}")
            t0 = time.perf_counter()
            extra = getattr(self, f"stage_{stage}")() or {}
            self.mark(stage, time.perf_counter() - t0, extra)
            self.console.print(f"[green]✓ {stage}[/] in {time.perf_counter() - t0:.1f} s")

    # each stage -------------------------------------------------------------
    def stage_words(self):
        from wordle_rl.game import pattern_matrix
        from wordle_rl.solvers import make_solver
        from wordle_rl.words import load_word_lists

        words = load_word_lists()
        pattern_matrix(words)
        openers = {s: make_solver(s, words).opener() for s in self.cfg.eval.solvers if s != "random"}
        return {"answers": len(words.answers), "allowed": len(words.allowed), "openers": openers}

    def _splits(self):
        from wordle_rl.data import Splits, make_splits

        if not self.paths["splits"].is_file():
            make_splits(seed=self.cfg.data.split_seed, rl_share=self.cfg.data.rl_share).save(self.paths["splits"])
        return Splits.load(self.paths["splits"])

    def _eval_cfg(self, split: str, decode: str):
        from wordle_rl.evaluate import EvalConfig

        c = self.cfg
        return EvalConfig(split=split, splits=str(self.paths["splits"]), decode=decode, limit=c.eval.limit,
                          style=c.data.style, think=c.data.think, batch_size=c.eval.batch_size, threads=c.threads,
                          seed=c.seed, train_sample=split == c.eval.splits[0])  # one train sample is enough

    def _answers(self, sp, split: str):
        answers = sp.answers(split)
        return answers[: self.cfg.eval.limit] if self.cfg.eval.limit else answers

    def stage_baselines(self):
        from wordle_rl.evaluate import SolverPolicy, run_eval
        from wordle_rl.prompts import PromptStyle
        from wordle_rl.solvers import make_solver
        from wordle_rl.words import load_word_lists

        sp, words = self._splits(), load_word_lists()
        style = PromptStyle(self.cfg.data.style, think=self.cfg.data.think)
        for split in self.cfg.eval.splits:
            for s in self.cfg.eval.solvers:
                res = run_eval(SolverPolicy(make_solver(s, words, seed=self.cfg.seed), style),
                               self._answers(sp, split), self._eval_cfg(split, "free"),
                               self.paths["eval"] / split / f"solver-{s}", words, sp.train)
                self.console.print(f"{s} ({split}): win {res['metrics']['win_rate']:.1%}, "
                                   f"mean {res['metrics']['mean_guesses_on_wins']:.3f}")

    def stage_data(self):
        from wordle_rl.data import (
            RL_TARGET_SPLITS,
            RlConfig,
            SftConfig,
            check_leakage,
            generate_rl,
            generate_sft,
            is_exercise,
            parse_depth_mix,
            parse_refused_kinds,
            parse_solver_mix,
            save_dataset,
        )

        d, sp = self.cfg.data, self._splits()
        with self.console.status(f"playing {d.sft_games} solver games"):
            sft_rows = generate_sft(sp, SftConfig(games=d.sft_games, seed=self.cfg.seed, style=d.style, think=d.think,
                                                  solver_mix=parse_solver_mix(d.sft_solvers),
                                                  balance_share=d.sft_balance_share,
                                                  wide_share=d.sft_wide_share,
                                                  wide_answers_first=d.sft_wide_answers_first,
                                                  refused_share=d.sft_refused_share,
                                                  refused_kinds=parse_refused_kinds(d.sft_refused_kinds),
                                                  recall_share=d.sft_recall_share, protocol=d.protocol,
                                                  lexicon_share=d.sft_lexicon_share))
        check_leakage(sft_rows, sp, "sft", allow_outside=True, protocol=d.protocol)
        save_dataset(sft_rows, self.paths["sft_data"], "sft")
        rl_rows = generate_rl(sp, RlConfig(rows=d.rl_rows, seed=self.cfg.seed, split="rl" if sp.rl else "train",
                                           style=d.style, think=d.think, depth_mix=parse_depth_mix(d.depth_mix),
                                           wide_share=d.rl_wide_share))
        check_leakage(rl_rows, sp, "rl", allowed_split=RL_TARGET_SPLITS, allow_outside=True)
        save_dataset(rl_rows, self.paths["rl_data"], "rl")
        exercises = sum(map(is_exercise, sft_rows))
        return {"sft_games": len(sft_rows) - exercises, "sft_exercises": exercises, "rl_rows": len(rl_rows)}

    def stage_model(self):
        from wordle_rl.models import init_model

        name = self.cfg.model.name
        if name.startswith("init:"):
            init_model(self.paths["model"], name.split(":", 1)[1], seed=self.cfg.seed,
                       word_tokens=self.cfg.model.word_tokens)
            return {"model": str(self.paths["model"])}
        return {"model": name}

    def _model_source(self) -> str:
        name = self.cfg.model.name
        return str(self.paths["model"]) if name.startswith("init:") else name

    def _resume(self, path: Path) -> bool:
        return any(p.is_dir() for p in path.glob("checkpoint-*"))

    def stage_sft(self):
        from wordle_rl.sft import WordleSFTConfig, run_sft

        t = self.cfg.sft
        if not t.enabled:
            return {"skipped": True}
        cfg = WordleSFTConfig(model=self._model_source(), data=str(self.paths["sft_data"]),
                              splits=str(self.paths["splits"]),
                              output_dir=str(self.paths["sft"]), max_steps=t.max_steps,
                              per_device_train_batch_size=t.batch_size, learning_rate=t.learning_rate,
                              time_budget_minutes=t.time_budget_minutes, save_steps=t.save_steps,
                              threads=self.cfg.threads, seed=self.cfg.seed, lora=self.cfg.model.lora,
                              soft_target_weight=t.soft_target_weight, train_sampling_strategy="group_by_length",
                              lr_schedule_follows_budget=t.schedule_follows_budget, disable_tqdm=False)
        run_sft(cfg, resume=self._resume(self.paths["sft"]))

    def stage_grpo(self):
        import os

        os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
        from wordle_rl.grpo import WordleGRPOConfig, run_grpo

        t = self.cfg.grpo
        if not t.enabled:
            return {"skipped": True}
        start = self.paths["sft"] if self.cfg.sft.enabled else Path(self._model_source())
        cfg = WordleGRPOConfig(model=str(start), data=str(self.paths["rl_data"]), output_dir=str(self.paths["grpo"]),
                               max_steps=t.max_steps, per_device_train_batch_size=t.batch_size,
                               num_generations=t.num_generations, learning_rate=t.learning_rate,
                               temperature=t.temperature, time_budget_minutes=t.time_budget_minutes,
                               save_steps=t.save_steps, threads=self.cfg.threads, seed=self.cfg.seed,
                               style=self.cfg.data.style, think=self.cfg.data.think,
                               splits=str(self.paths["splits"]), eval_val_every=t.eval_val_every,
                               use_vllm=t.use_vllm, vllm_mode="colocate", disable_tqdm=False,
                               sft_data=str(self.paths["sft_data"]) if t.sft_coef > 0 else None, sft_coef=t.sft_coef,
                               sft_coef_final=t.sft_coef_final, rollout=t.rollout,
                               sft_soft_target_weight=self.cfg.sft.soft_target_weight)
        run_grpo(cfg, resume=self._resume(self.paths["grpo"]))

    def trained(self) -> list[tuple[str, Path]]:
        out = []
        if self.cfg.sft.enabled:
            out.append(("sft", self.paths["sft"]))
        if self.cfg.grpo.enabled:
            out.append(("grpo", self.paths["grpo"]))
        return out

    def stage_eval(self):
        from wordle_rl.audit import TrainingIndex
        from wordle_rl.evaluate import ModelPolicy, run_eval
        from wordle_rl.models import load_model
        from wordle_rl.prompts import PromptStyle
        from wordle_rl.words import load_word_lists

        sp, words = self._splits(), load_word_lists()
        style = PromptStyle(self.cfg.data.style, think=self.cfg.data.think)
        t0 = time.perf_counter()
        index = TrainingIndex.from_paths([self.paths["sft_data"] / "sft.jsonl", self.paths["rl_data"] / "rl.jsonl"],
                                         words)
        audit_index_s = round(time.perf_counter() - t0, 1)
        self.console.print(f"training-overlap index: {len(index.pairs):,} imitated moves from {index.rows:,} rows "
                           f"in {audit_index_s} s")
        for name, path in self.trained():
            model, tok = load_model(str(path), threads=self.cfg.threads)
            model.eval()
            for split in self.cfg.eval.splits:
                for decode in self.cfg.eval.decodes:
                    policy = ModelPolicy(model, tok, style, words, decode=decode,
                                         batch_size=self.cfg.eval.batch_size, seed=self.cfg.seed, name=name)
                    res = run_eval(policy, self._answers(sp, split), self._eval_cfg(split, decode),
                                   self.paths["eval"] / split / f"{name}-{decode}", words, sp.train,
                                   {"model": str(path)}, index=index)
                    self.console.print(f"{name} ({decode}, {split}): win {res['metrics']['win_rate']:.1%}")
        return {"audit_index_s": audit_index_s}

    def stage_report(self):
        from wordle_rl.report import write_report

        path = write_report(self)
        self.console.print(f"report -> {path}")
        return {"report": str(path)}


def run_pipeline(cfg: PipelineConfig, out: str | Path, console) -> Path:
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    resolved = out / "config.json"
    if resolved.is_file():
        old = json.loads(resolved.read_text())
        if old != json.loads(json.dumps(asdict(cfg))):
            raise ConfigError(f"{out} holds a run with a different config; use another --out or delete it")
    else:
        resolved.write_text(json.dumps(asdict(cfg), indent=1))
    if cfg.grpo.enabled and cfg.grpo.use_vllm:  # fail now, not after hours of SFT
        from wordle_rl.grpo import vllm_missing

        missing = vllm_missing()
        if missing:
            raise ConfigError(f"grpo.use_vllm: {missing}")
    (out / "versions.json").write_text(json.dumps(versions(), indent=1))
    import torch

    torch.set_num_threads(cfg.threads)
    Runner(cfg, out, console).run()
    return out / "report.md"


def versions() -> dict:
    from importlib.metadata import PackageNotFoundError, version

    out = {"python": platform.python_version(), "platform": platform.platform()}
    for pkg in ("wordle-rl", "torch", "transformers", "trl", "datasets", "peft", "accelerate", "numpy", "numba",
                "openenv"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            out[pkg] = None
    return out
