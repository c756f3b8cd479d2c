"""Kill the main job anywhere: SIGKILL ``wordle-rl pipeline`` at random moments (or when named files
appear), run the same command again after each kill until the job finishes, then check that
nothing it wrote is torn, lost or duplicated.

Run on an idle machine: ``python benchmarks/bench_kill_pipeline.py --kills 50 --out kills.json``.
Prints JSON (and writes it with ``--out``). ``--at GLOB`` (repeatable) kills instead once a path
matching the glob appears in the run folder, one kill a glob, in order: the suite's small version.

Each job runs in a fresh folder. A kill's moment is drawn uniformly up to ``--max-delay`` seconds
after the command starts (its Python start-up included), so kills fall in every stage of the job:
the stage each one hit is read from the job's own log. Once a job finishes:
- every JSONL file holds only whole lines, and every JSON file parses;
- every model folder and checkpoint loads (all tensors of its safetensors files are read; a
  checkpoint's ``trainer_state.json`` parses);
- no temporary file (``.*.tmp``, ``.*.old``) is left;
- the data (splits, SFT games, RL rows) are the same bytes as those of an uninterrupted run;
- each evaluation's ``games.jsonl`` holds exactly the split's answers once each, in order, and its
  ``results.json`` counts the same games and wins;
- the GRPO val log has one record a step, and the best model it names is the one in ``best-val/``;
- the report's win rates are those of the ``games.jsonl`` files present.
"""

from __future__ import annotations

import argparse
import glob
import hashlib
import json
import os
import random
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

DATA_FILES = ("data/splits.json", "data/sft/sft.jsonl", "data/rl/rl.jsonl")
STAGE_RULE = re.compile(r"─+ (\w+) ─+")


def pipeline_cmd(config: str, out: Path) -> list[str]:
    return [
        sys.executable,
        "-m",
        "wordle_rl.cli.main",
        "pipeline",
        "--config",
        config,
        "--out",
        str(out),
    ]


def reference_data(config: str, out: Path) -> dict[str, str]:
    """The data files' sha256 from the data stage of an uninterrupted run."""
    from rich.console import Console

    from wordle_rl.pipeline.config import load_config
    from wordle_rl.pipeline.runner import Runner

    with open(os.devnull, "w") as sink:
        Runner(load_config(config), out, Console(file=sink)).run(("data",))
    return {f: sha256(out / f) for f in DATA_FILES}


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def last_stage(log: Path) -> str:
    """The stage the job was in when it stopped: the last stage rule its log printed."""
    stages = STAGE_RULE.findall(log.read_text(errors="replace")) if log.is_file() else []
    return stages[-1] if stages else "start-up"


def run_killed(
    cmd: list[str], log: Path, delay: float | None, at: str | None, root: Path
) -> int | None:
    """Start ``cmd``; SIGKILL it after ``delay`` seconds, or once a path matching ``at`` exists
    under ``root``. The exit code, or None when it was killed."""
    with log.open("a") as fh:
        proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True)
        t0 = time.monotonic()
        while proc.poll() is None:
            due = delay is not None and time.monotonic() - t0 >= delay
            if due or (at is not None and glob.glob(str(root / at))):
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                return None
            time.sleep(0.02)
        return proc.returncode


def check_run(run: Path, data: dict[str, str]) -> list[str]:
    """Every problem found in a finished run folder (see the module docstring)."""
    from safetensors import safe_open

    from wordle_rl.data.splits import Splits
    from wordle_rl.engine.storage import whole_records
    from wordle_rl.evaluation.val_callback import BEST_DIR, BEST_FILE, LOG_FILE, STEP_FILE

    problems = []
    for path in sorted(run.rglob("*")):
        rel = path.relative_to(run)
        if path.name.startswith(".") and path.name.endswith((".tmp", ".old")):
            problems.append(f"{rel}: a temporary file left behind")
        elif path.suffix == ".jsonl":
            _, bad = whole_records(path)
            text = path.read_text()
            if bad or (text and not text.endswith("\n")):
                problems.append(f"{rel}: {bad} torn line(s)")
        elif path.suffix == ".json":
            try:
                json.loads(path.read_text())
            except ValueError as e:
                problems.append(f"{rel}: not JSON ({e})")
        elif path.suffix == ".safetensors":
            try:
                with safe_open(str(path), "pt") as f:
                    for key in f.keys():
                        f.get_tensor(key)
            except Exception as e:  # noqa: BLE001 (any failure to read is the finding)
                problems.append(f"{rel}: does not load ({e})")
    for ckpt in run.rglob("checkpoint-*"):
        if not (ckpt / "trainer_state.json").is_file():
            problems.append(f"{ckpt.relative_to(run)}: no trainer_state.json")
    for f, digest in data.items():
        if sha256(run / f) != digest:
            problems.append(f"{f}: not the bytes of an uninterrupted run")
    cfg = json.loads((run / "config.json").read_text())
    sp, limit = Splits.load(run / "data" / "splits.json"), cfg["eval"]["limit"]
    report = (run / "report.md").read_text()
    for split in cfg["eval"]["splits"]:
        answers = sp.answers(split)[:limit] if limit else sp.answers(split)
        section = report.split(f"## {split.capitalize()} answers")[1].split("\n## ")[0]
        for folder in sorted((run / "eval" / split).iterdir()):
            if not folder.is_dir():
                continue
            games = [json.loads(x) for x in (folder / "games.jsonl").read_text().splitlines()]
            games = [g for g in games if g["split"] == split]
            played = [g["answer"] for g in games]
            if played != answers:
                lost, twice = (
                    set(answers) - set(played),
                    [a for a, n in Counter(played).items() if n > 1],
                )
                problems.append(f"eval/{split}/{folder.name}: lost {sorted(lost)}, twice {twice}")
            wins = sum(g["won"] for g in games)
            metrics = json.loads((folder / "results.json").read_text())["metrics"]
            if (metrics["games"], metrics["wins"]) != (len(games), wins):
                problems.append(
                    f"eval/{split}/{folder.name}: results.json disagrees with its games"
                )
            row = next((x for x in section.splitlines() if x.startswith(f"| {folder.name} |")), "")
            if f"| {100 * wins / len(games):.1f} % (" not in row:
                problems.append(
                    f"report, {split}: {folder.name}'s win rate is not its games' ({row!r})"
                )
    grpo = run / "grpo"
    if (grpo / BEST_FILE).is_file():
        steps = [r["step"] for r in whole_records(grpo / LOG_FILE)[0]]
        if steps != sorted(set(steps)):
            problems.append(f"grpo/val_eval.jsonl: steps {steps}, not one record a step")
        best = json.loads((grpo / BEST_FILE).read_text())
        held = grpo / BEST_DIR / STEP_FILE
        if best["step"] not in steps:
            problems.append(f"grpo/{BEST_FILE}: step {best['step']} has no val record")
        if best["step"] > 0 and (
            not held.is_file() or json.loads(held.read_text())["step"] != best["step"]
        ):
            problems.append(f"grpo/{BEST_DIR} does not hold step {best['step']}'s model")
    return problems


def run_job(run: Path, config: str, plan: list[str], kills: Counter, draw) -> dict:
    """One job in ``run``: killed at each glob of ``plan``, or after ``draw()`` seconds while
    ``kills["left"]`` is above 0 (each kill counted in ``kills`` by the stage it hit), then run to
    its end and checked."""
    log, starts, done = run.with_suffix(".log"), 0, 0
    while True:
        at = plan.pop(0) if plan else None
        delay = draw() if at is None and kills["left"] > 0 else None
        code = run_killed(pipeline_cmd(config, run), log, delay, at, run)
        starts += 1
        if code is not None:
            break
        done += 1
        kills["left"] -= 1
        kills[last_stage(log)] += 1
    return {"run": str(run), "starts": starts, "kills": done, "exit": code, "log": str(log)}


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--config", default="quick", help="The job's config (a preset or a file).")
    ap.add_argument("--kills", type=int, default=50, help="Random kills in all, over new jobs.")
    ap.add_argument("--max-delay", type=float, default=30.0, help="Latest kill after a start (s).")
    ap.add_argument("--at", action="append", default=[], help="Kill once this glob matches.")
    ap.add_argument("--seed", type=int, default=0, help="Seed of the kill moments.")
    ap.add_argument("--workdir", type=Path, default=Path("kill-runs"), help="Where jobs run.")
    ap.add_argument("--out", type=Path, help="Also write the JSON summary here.")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    args.workdir.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    data = reference_data(args.config, args.workdir / "reference")
    jobs, kills = [], Counter(left=0 if args.at else args.kills)
    while not jobs or kills["left"] > 0:
        run = args.workdir / f"job{len(jobs)}"
        job = run_job(
            run, args.config, list(args.at), kills, lambda: rng.uniform(0.5, args.max_delay)
        )
        code = job["exit"]
        job["problems"] = check_run(run, data) if code == 0 else [f"the job exited with {code}"]
        jobs.append(job)
    kills.pop("left")
    summary = {
        "config": args.config,
        "kills": sum(j["kills"] for j in jobs),
        "kills_by_stage": dict(kills),
        "jobs": jobs,
        "problem_count": sum(len(j["problems"]) for j in jobs),
        "wall_s": round(time.perf_counter() - t0, 1),
    }
    summary["ok"] = summary["problem_count"] == 0 and all(j["exit"] == 0 for j in jobs)
    text = json.dumps(summary, indent=1)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
