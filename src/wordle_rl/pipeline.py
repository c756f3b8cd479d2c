"""The main job: one command from nothing to a trained Wordle player, with a report.

    wordle-rl pipeline                         # preset cpu-default, output runs/cpu-default
    wordle-rl pipeline --config quick          # a few minutes, a smoke run
    wordle-rl pipeline --config my.toml --out runs/exp1

Stages, in order: words (lists, pattern matrix, openers), baselines (solvers on each evaluated
split), data (splits, SFT games, RL prompts), model (the embedded default or a hub model), sft,
grpo, eval (free and consistent decoding on the test and val splits, audited against the run's own
training data), report. The settings are :mod:`wordle_rl.config`. Each stage writes its outputs and
a marker; a rerun skips finished stages and resumes a killed training stage from its last
checkpoint.
"""

from __future__ import annotations

import json
import platform
import resource
import time
from dataclasses import asdict
from pathlib import Path

from wordle_rl.config import ConfigError, PipelineConfig

__all__ = ["run_pipeline", "Runner", "STAGES", "peak_rss_gib", "versions"]


STAGES = ("words", "baselines", "data", "model", "sft", "grpo", "eval", "report")


# --------------------------------------------------------------------------- stages
def peak_rss_gib() -> float:
    """The largest resident set size so far of this process or any of its finished children, in GiB
    (Linux).

    >>> 0 < peak_rss_gib() < 1024
    True
    """
    kib = max(
        resource.getrusage(who).ru_maxrss
        for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
    )
    return round(kib / 2**20, 2)


class Runner:
    def __init__(self, cfg: PipelineConfig, out: Path, console):
        self.cfg, self.out, self.console = cfg, out, console
        self.markers = out / "markers"
        self.markers.mkdir(parents=True, exist_ok=True)
        self.paths = {
            "splits": out / "data" / "splits.json",
            "sft_data": out / "data" / "sft",
            "rl_data": out / "data" / "rl",
            "model": out / "model",
            "sft": out / "sft",
            "grpo": out / "grpo",
            "eval": out / "eval",
        }

    def done(self, stage: str) -> bool:
        return (self.markers / f"{stage}.json").is_file()

    def mark(self, stage: str, seconds: float, extra: dict | None = None) -> None:
        (self.markers / f"{stage}.json").write_text(
            json.dumps(
                {
                    "stage": stage,
                    "seconds": round(seconds, 1),
                    "peak_rss_gib": peak_rss_gib(),
                    **(extra or {}),
                },
                indent=1,
            )
        )

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
        openers = {
            s: make_solver(s, words).opener() for s in self.cfg.eval.solvers if s != "random"
        }
        return {"answers": len(words.answers), "allowed": len(words.allowed), "openers": openers}

    def _splits(self):
        from wordle_rl.splits import Splits, make_splits

        if not self.paths["splits"].is_file():
            make_splits(seed=self.cfg.data.split_seed, rl_share=self.cfg.data.rl_share).save(
                self.paths["splits"]
            )
        return Splits.load(self.paths["splits"])

    def _eval_cfg(self, split: str, decode: str):
        from wordle_rl.evaluate import EvalConfig

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
            threads=c.threads,
            seed=c.seed,
            train_sample=split == c.eval.splits[0],
        )

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

    def stage_data(self):
        from wordle_rl.data import is_exercise, save_dataset
        from wordle_rl.rl_rows import RlConfig, generate_rl, parse_depth_mix
        from wordle_rl.sft_games import (
            SftConfig,
            generate_sft,
            parse_refused_kinds,
            parse_solver_mix,
        )
        from wordle_rl.splits import RL_TARGET_SPLITS, check_leakage

        d, sp = self.cfg.data, self._splits()
        with self.console.status(f"playing {d.sft_games} solver games"):
            sft_rows = generate_sft(
                sp,
                SftConfig(
                    games=d.sft_games,
                    seed=self.cfg.seed,
                    style=d.style,
                    think=d.think,
                    solver_mix=parse_solver_mix(d.sft_solvers),
                    balance_share=d.sft_balance_share,
                    wide_share=d.sft_wide_share,
                    wide_answers_first=d.sft_wide_answers_first,
                    refused_share=d.sft_refused_share,
                    refused_kinds=parse_refused_kinds(d.sft_refused_kinds),
                    recall_share=d.sft_recall_share,
                    protocol=d.protocol,
                    lexicon_share=d.sft_lexicon_share,
                ),
            )
        check_leakage(sft_rows, sp, "sft", allow_outside=True, protocol=d.protocol)
        save_dataset(sft_rows, self.paths["sft_data"], "sft")
        rl_rows = generate_rl(
            sp,
            RlConfig(
                rows=d.rl_rows,
                seed=self.cfg.seed,
                split="rl" if sp.rl else "train",
                style=d.style,
                think=d.think,
                depth_mix=parse_depth_mix(d.depth_mix),
                wide_share=d.rl_wide_share,
            ),
        )
        check_leakage(rl_rows, sp, "rl", allowed_split=RL_TARGET_SPLITS, allow_outside=True)
        save_dataset(rl_rows, self.paths["rl_data"], "rl")
        exercises = sum(map(is_exercise, sft_rows))
        return {
            "sft_games": len(sft_rows) - exercises,
            "sft_exercises": exercises,
            "rl_rows": len(rl_rows),
        }

    def stage_model(self):
        from wordle_rl.models import init_model

        name = self.cfg.model.name
        if name.startswith("init:"):
            init_model(
                self.paths["model"],
                name.split(":", 1)[1],
                seed=self.cfg.seed,
                word_tokens=self.cfg.model.word_tokens,
            )
            return {"model": str(self.paths["model"])}
        return {"model": name}

    def _model_source(self) -> str:
        name = self.cfg.model.name
        return str(self.paths["model"]) if name.startswith("init:") else name

    def _resume(self, path: Path) -> bool:
        from transformers.trainer_utils import get_last_checkpoint

        return path.is_dir() and get_last_checkpoint(str(path)) is not None

    def stage_sft(self):
        from wordle_rl.sft import run_sft

        if not self.cfg.sft.enabled:
            return {"skipped": True}
        run_sft(self.sft_config(), resume=self._resume(self.paths["sft"]))

    def sft_config(self):
        """The SFT stage's ``WordleSFTConfig``: this run's paths and the ``sft`` section."""
        from wordle_rl.sft import WordleSFTConfig

        t = self.cfg.sft
        return WordleSFTConfig(
            model=self._model_source(),
            data=str(self.paths["sft_data"]),
            splits=str(self.paths["splits"]),
            output_dir=str(self.paths["sft"]),
            max_steps=t.max_steps,
            per_device_train_batch_size=t.batch_size,
            learning_rate=t.learning_rate,
            time_budget_minutes=t.time_budget_minutes,
            save_steps=t.save_steps,
            threads=self.cfg.threads,
            seed=self.cfg.seed,
            lora=self.cfg.model.lora,
            soft_target_weight=t.soft_target_weight,
            train_sampling_strategy="group_by_length",
            lr_schedule_follows_budget=t.schedule_follows_budget,
            disable_tqdm=False,
        )

    def stage_grpo(self):
        import os

        os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
        from wordle_rl.grpo import run_grpo

        if not self.cfg.grpo.enabled:
            return {"skipped": True}
        run_grpo(self.grpo_config(), resume=self._resume(self.paths["grpo"]))

    def grpo_config(self):
        """The GRPO stage's ``WordleGRPOConfig``: this run's paths and the ``grpo`` section."""
        from wordle_rl.grpo import WordleGRPOConfig

        t = self.cfg.grpo
        start = self.paths["sft"] if self.cfg.sft.enabled else Path(self._model_source())
        return WordleGRPOConfig(
            model=str(start),
            data=str(self.paths["rl_data"]),
            output_dir=str(self.paths["grpo"]),
            max_steps=t.max_steps,
            per_device_train_batch_size=t.batch_size,
            num_generations=t.num_generations,
            learning_rate=t.learning_rate,
            temperature=t.temperature,
            time_budget_minutes=t.time_budget_minutes,
            save_steps=t.save_steps,
            threads=self.cfg.threads,
            seed=self.cfg.seed,
            style=self.cfg.data.style,
            think=self.cfg.data.think,
            splits=str(self.paths["splits"]),
            eval_val_every=t.eval_val_every,
            use_vllm=t.use_vllm,
            vllm_mode="colocate",
            disable_tqdm=False,
            sft_data=str(self.paths["sft_data"]) if t.sft_coef > 0 else None,
            sft_coef=t.sft_coef,
            sft_coef_final=t.sft_coef_final,
            rl_coef=t.rl_coef,
            rollout=t.rollout,
            branch_states=t.branch_states,
            branch_reward=t.branch_reward,
            scale_rewards=t.scale_rewards,
            credit=t.credit,
            moves_states=t.moves_states,
            moves_games=t.moves_games,
            sft_soft_target_weight=self.cfg.sft.soft_target_weight,
        )

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
        from wordle_rl.move_rollout import RECALL_STATES_DIR
        from wordle_rl.prompts import PromptStyle
        from wordle_rl.recall_probe import PROBE_FILE, probe_model, probe_summary, recall_states
        from wordle_rl.words import load_word_lists

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
        probe = len(self.trained()) == 2 and "free" in self.cfg.eval.decodes
        states, found = {}, {split: [] for split in self.cfg.eval.splits}
        for name, path in self.trained():
            taught = path / RECALL_STATES_DIR  # what the RL term rewarded writing, where
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
                if probe:  # both models at the SFT model's recall states, loaded once
                    games = self.paths["eval"] / split / "sft-free" / "games.jsonl"
                    if split not in states:
                        states[split] = recall_states(games)
                    found[split].append(probe_model(model, tok, states[split], style))
        for split in self.cfg.eval.splits if probe else []:
            d = self.paths["eval"] / split
            r = probe_summary(
                [p for _, p in self.trained()], found[split], d / "sft-free" / "games.jsonl"
            )
            (d / PROBE_FILE).write_text(json.dumps(r, indent=1) + "\n")
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
            raise ConfigError(
                f"{out} holds a run with a different config; use another --out or delete it"
            )
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
    from wordle_rl.sft import library_versions

    packages = "wordle-rl torch transformers trl datasets peft accelerate numpy numba openenv"
    here = {"python": platform.python_version(), "platform": platform.platform()}
    return here | library_versions(packages.split())
