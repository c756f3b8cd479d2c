"""The main job: one command from nothing to a trained Wordle player, with a report.

    wordle-rl pipeline                         # preset cpu-default, output runs/cpu-default
    wordle-rl pipeline --config quick          # a few minutes, a smoke run
    wordle-rl pipeline --config my.toml --out runs/exp1

Stages, in order: words (lists, pattern matrix, openers), baselines (solvers on each evaluated
split), model (the embedded default or a hub model), data (splits, SFT games, RL prompts; the
``ranked`` teacher's ranking from the model), sft,
grpo, control (when enabled: more SFT for as long as GRPO took, the RL term's control), select
(the job's model: the one that plays val best, :mod:`wordle_rl.pipeline.select`),
eval (free and consistent decoding on the test and val splits, audited against the run's own
training data), report. The settings are :mod:`wordle_rl.pipeline.config`. Each stage writes its
outputs and a marker; a rerun skips finished stages and resumes a killed training stage from its
last checkpoint. The training stages (sft, grpo, control) each run in a process of their own
(:func:`wordle_rl.pipeline.machine.run_apart`): the heap one leaves is not the next one's.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict
from pathlib import Path

from wordle_rl.engine.storage import write_atomic
from wordle_rl.pipeline.config import ConfigError, PipelineConfig, check_same_run
from wordle_rl.pipeline.machine import (
    peak_gpu_gib,
    peak_rss_gib,
    release_memory,
    run_apart,
    versions,
)
from wordle_rl.pipeline.training import train_grpo, train_sft

__all__ = ["run_pipeline", "Runner", "STAGES"]


STAGES = tuple("words baselines model data sft grpo control select eval report".split())


class Runner:
    def __init__(self, cfg: PipelineConfig, out: Path, console):
        self.cfg, self.out, self.console = cfg, out, console
        self.markers = out / "markers"
        self.markers.mkdir(parents=True, exist_ok=True)
        self.paths = {
            "splits": out / "data" / "splits.json",
            "sft_data": out / "data" / "sft",
            "rl_data": out / "data" / "rl",
            "ranking": out / "data" / "ranking.txt",
            **{name: out / name for name in ("model", "sft", "grpo", "control", "eval")},
        }

    def done(self, stage: str) -> bool:
        return (self.markers / f"{stage}.json").is_file()

    def mark(self, stage: str, seconds: float, extra: dict | None = None) -> None:
        record = {"stage": stage, "seconds": round(seconds, 1), "peak_rss_gib": peak_rss_gib()}
        record |= {"peak_gpu_gib": peak_gpu_gib(), **(extra or {})}
        write_atomic(self.markers / f"{stage}.json", json.dumps(record, indent=1))

    def run(self, stages=STAGES) -> None:
        for stage in stages:
            if self.done(stage):
                self.console.print(f"[dim]✓ {stage} (done earlier, skipped)[/]")
                continue
            self.console.rule(f"[bold]{stage}")
            t0 = time.perf_counter()
            extra = getattr(self, f"stage_{stage}")() or {}
            release_memory()  # what an in-process stage (eval, data) freed goes back to the system
            self.mark(stage, time.perf_counter() - t0, extra)
            self.console.print(f"[green]✓ {stage}[/] in {time.perf_counter() - t0:.1f} s")

    # each stage -------------------------------------------------------------
    def stage_words(self):
        from wordle_rl.engine.matrix import pattern_matrix
        from wordle_rl.engine.solvers import make_solver
        from wordle_rl.engine.words import load_word_lists

        words = load_word_lists()
        pattern_matrix(words)
        openers = {
            s: make_solver(s, words).opener() for s in self.cfg.eval.solvers if s != "random"
        }
        return {"answers": len(words.answers), "allowed": len(words.allowed), "openers": openers}

    def _splits(self):
        from wordle_rl.data.splits import Splits, make_splits

        if not self.paths["splits"].is_file():
            make_splits(seed=self.cfg.data.split_seed).save(self.paths["splits"])
        return Splits.load(self.paths["splits"])

    def _eval_cfg(self, split: str, decode: str):
        from wordle_rl.evaluation.evaluate import EvalConfig

        c = self.cfg
        # one train sample is enough
        return EvalConfig(
            split=split,
            splits=str(self.paths["splits"]),
            decode=decode,
            limit=c.eval.limit,
            style=c.data.style,
            think=c.data.think,
            batch_size=c.eval.batch_size,
            max_new_tokens=c.eval.max_new_tokens,
            threads=c.threads,
            seed=c.seed,
            train_sample=c.eval.train_sample and split == c.eval.splits[0],
        )

    def _answers(self, sp, split: str):
        answers = sp.answers(split)
        return answers[: self.cfg.eval.limit] if self.cfg.eval.limit else answers

    def stage_baselines(self):
        from wordle_rl.engine.solvers import make_solver
        from wordle_rl.engine.words import load_word_lists
        from wordle_rl.environment.prompts import PromptStyle
        from wordle_rl.evaluation.evaluate import SolverPolicy, run_eval

        sp, words = self._splits(), load_word_lists()
        style = PromptStyle(self.cfg.data.style, think=self.cfg.data.think)
        for split in self.cfg.eval.splits:
            for s in self.cfg.eval.solvers:
                res = run_eval(
                    SolverPolicy(make_solver(s, words, seed=self.cfg.seed), style),
                    self._answers(sp, split),
                    self._eval_cfg(split, "free"),
                    self.paths["eval"] / split / f"solver-{s}",
                    words,
                    sp.train,
                )
                self.console.print(
                    f"{s} ({split}): win {res['metrics']['win_rate']:.1%}, "
                    f"mean {res['metrics']['mean_guesses_on_wins']:.3f}"
                )

    def data_configs(self):
        from wordle_rl.pipeline.data_stage import data_configs

        return data_configs(self)

    def stage_data(self):
        from wordle_rl.pipeline.data_stage import run_data

        return run_data(self)

    def stage_model(self):
        import shutil

        from wordle_rl.models.embedded import init_model
        from wordle_rl.models.packaged import convert_packaged

        name, folder = self.cfg.model.name, self.paths["model"]
        if name.startswith("init:"):
            init_model(folder, name.split(":", 1)[1], seed=self.cfg.seed)
        elif name.startswith("from:"):
            if folder.exists():  # a stage cut short: convert again, whole
                shutil.rmtree(folder)
            convert_packaged(folder, name.split(":", 1)[1])
        else:
            return {"model": name}
        return {"model": str(folder)}

    def _model_source(self) -> str:
        name = self.cfg.model.name
        return str(self.paths["model"]) if name.startswith(("init:", "from:")) else name

    def _resume(self, path: Path) -> bool:
        from wordle_rl.training.records import last_checkpoint

        return last_checkpoint(path) is not None

    def stage_sft(self):
        if not self.cfg.sft.enabled:
            return {"skipped": True}
        run_apart(train_sft, self.sft_config(), self._resume(self.paths["sft"]), name="sft")

    def sft_config(self, **override):
        """The SFT stage's ``WordleSFTConfig``: this run's paths, seed and threads, then the ``sft``
        section, then ``override``."""
        from wordle_rl.training.sft import WordleSFTConfig

        run = {
            "model": self._model_source(),
            "data": str(self.paths["sft_data"]),
            "splits": str(self.paths["splits"]),
            "output_dir": str(self.paths["sft"]),
            "threads": self.cfg.threads,
            "seed": self.cfg.seed,
            "disable_tqdm": False,
        }
        return WordleSFTConfig(**{**run, **self.cfg.sft.settings, **override})

    def stage_grpo(self):
        if not self.cfg.grpo.enabled:
            return {"skipped": True}
        run_apart(train_grpo, self.grpo_config(), self._resume(self.paths["grpo"]), name="grpo")

    def grpo_config(self):
        """The GRPO stage's ``WordleGRPOConfig``: this run's paths, seed, threads and prompt style,
        then the ``grpo`` section. Its SFT loss uses this run's SFT games, weighted inside as the
        SFT stage weighs its soft targets unless the section says otherwise."""
        from wordle_rl.data.files import field_default
        from wordle_rl.training.grpo_config import WordleGRPOConfig
        from wordle_rl.training.sft import WordleSFTConfig

        t = dict(self.cfg.grpo.settings)
        start = self.paths["sft"] if self.cfg.sft.enabled else Path(self._model_source())
        sft_coef = t.get("sft_coef", field_default(WordleGRPOConfig, "sft_coef"))
        soft = self.cfg.sft.settings.get(
            "soft_target_weight", field_default(WordleSFTConfig, "soft_target_weight")
        )
        t.setdefault("sft_soft_target_weight", soft)
        t.setdefault("vllm_mode", "colocate")
        return WordleGRPOConfig(
            model=str(start),
            data=str(self.paths["rl_data"]),
            output_dir=str(self.paths["grpo"]),
            threads=self.cfg.threads,
            seed=self.cfg.seed,
            style=self.cfg.data.style,
            think=self.cfg.data.think,
            splits=str(self.paths["splits"]),
            disable_tqdm=False,
            sft_data=str(self.paths["sft_data"]) if sft_coef > 0 else None,
            **t,
        )

    def stage_control(self):
        from wordle_rl.pipeline.control import run_control

        return run_control(self)

    def check_stages(self) -> None:
        """Build every enabled stage's config once, so that a bad value stops the job before the
        first stage rather than after hours of the ones before it."""
        from wordle_rl.pipeline.control import control_config

        try:
            self.data_configs()
            if self.cfg.sft.enabled:
                self.sft_config()
            if self.cfg.grpo.enabled:
                self.grpo_config()
            if self.cfg.control.enabled:
                control_config(self, grpo_seconds=60.0)
        except (TypeError, ValueError) as e:
            raise ConfigError(f"bad setting: {e}") from e

    def stage_select(self):
        from wordle_rl.pipeline.select import select_model

        picked = select_model(self)
        self.console.print(f"the job's model: {picked['name']} ({picked['why']})")
        return {"selected": picked["name"]}

    def trained(self) -> list[tuple[str, Path]]:
        """The models to evaluate: the starting model (``eval.start_model``), each trained
        stage's, and the job's model where the val check chose a GRPO step before the last."""
        from wordle_rl.pipeline.select import SELECTED_FILE

        out = [("start", Path(self._model_source()))] if self.cfg.eval.start_model else []
        if self.cfg.sft.enabled:
            out.append(("sft", self.paths["sft"]))
        if self.cfg.grpo.enabled:
            out.append(("grpo", self.paths["grpo"]))
        if self.cfg.control.enabled:
            out.append(("control", self.paths["control"]))
        selected = self.out / SELECTED_FILE
        if selected.is_file() and json.loads(selected.read_text())["name"] == "final":
            out.append(("final", self.out / "final"))
        return out

    def stage_eval(self):
        from wordle_rl.engine.words import load_word_lists
        from wordle_rl.environment.prompts import PromptStyle
        from wordle_rl.evaluation import recall_probe
        from wordle_rl.evaluation.audit import TrainingIndex
        from wordle_rl.evaluation.evaluate import ModelPolicy, run_eval
        from wordle_rl.models.embedded import load_model
        from wordle_rl.training.move_rollout import RECALL_STATES_DIR

        sp, words = self._splits(), load_word_lists()
        style = PromptStyle(self.cfg.data.style, think=self.cfg.data.think)
        t0 = time.perf_counter()
        index = TrainingIndex.from_paths(
            [self.paths["sft_data"] / "sft.jsonl", self.paths["rl_data"] / "rl.jsonl"], words
        )
        audit_index_s = round(time.perf_counter() - t0, 1)
        self.console.print(
            f"training-overlap index: {len(index.pairs):,} imitated moves from {index.rows:,} rows "
            f"in {audit_index_s} s"
        )
        names = [name for name, _ in self.trained() if name != "start"]
        probe = (
            self.cfg.eval.recall_probe
            and names[:2] == ["sft", "grpo"]
            and "free" in self.cfg.eval.decodes
        )
        states, found = {}, {split: [] for split in self.cfg.eval.splits}
        for name, path in self.trained():
            # what the RL term rewarded writing, where (for a GRPO step before the last, the whole
            # stage's: the audit then counts more moves as imitated, never fewer)
            taught = (self.paths["grpo"] if name == "final" else path) / RECALL_STATES_DIR
            seen = index.extended([taught], words) if taught.is_dir() else index
            model, tok = load_model(str(path), threads=self.cfg.threads)
            model.eval()
            for split in self.cfg.eval.splits:
                for decode in self.cfg.eval.decodes:
                    policy = ModelPolicy(
                        model,
                        tok,
                        style,
                        words,
                        decode=decode,
                        batch_size=self.cfg.eval.batch_size,
                        seed=self.cfg.seed,
                        name=name,
                    )
                    res = run_eval(
                        policy,
                        self._answers(sp, split),
                        self._eval_cfg(split, decode),
                        self.paths["eval"] / split / f"{name}-{decode}",
                        words,
                        sp.train,
                        {"model": str(path)},
                        index=seen,
                    )
                    self.console.print(
                        f"{name} ({decode}, {split}): win {res['metrics']['win_rate']:.1%}"
                    )
                if probe and name in ("sft", "grpo"):  # both at the SFT model's recall states
                    games = self.paths["eval"] / split / "sft-free" / "games.jsonl"
                    if split not in states:
                        states[split] = recall_probe.recall_states(games)
                    found[split].append(recall_probe.probe_model(model, tok, states[split], style))
        for split in self.cfg.eval.splits if probe else []:
            d = self.paths["eval"] / split
            r = recall_probe.probe_summary(
                [p for n, p in self.trained() if n in ("sft", "grpo")],
                found[split],
                d / "sft-free" / "games.jsonl",
            )
            write_atomic(d / recall_probe.PROBE_FILE, json.dumps(r, indent=1) + "\n")
        return {"audit_index_s": audit_index_s}

    def stage_report(self):
        from wordle_rl.pipeline.report import write_report

        path = write_report(self)
        self.console.print(f"report -> {path}")
        return {"report": str(path)}


def run_pipeline(cfg: PipelineConfig, out: str | Path, console, until: str = "report") -> Path:
    """Run the stages up to and including ``until``; return the report's path (or the run's)."""
    if until not in STAGES:
        raise ConfigError(f"--until must be one of {', '.join(STAGES)}, got {until!r}")
    out = Path(out)
    resolved = out / "config.json"
    if resolved.is_file():
        check_same_run(out, json.loads(json.dumps(asdict(cfg))))
    out.mkdir(parents=True, exist_ok=True)
    runner = Runner(cfg, out, console)
    runner.check_stages()  # fail now, not after hours of SFT (vLLM missing included)
    if not resolved.is_file():
        write_atomic(resolved, json.dumps(asdict(cfg), indent=1))
    write_atomic(out / "versions.json", json.dumps(versions(), indent=1))
    import torch

    torch.set_num_threads(cfg.threads)
    runner.run(STAGES[: STAGES.index(until) + 1])
    return out / "report.md" if until == "report" else out
