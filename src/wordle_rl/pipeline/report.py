"""The pipeline's ``report.md``: results table, plots, sample games as tiles, config, versions,
stage times."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from wordle_rl.engine.game import pattern_to_emoji, str_to_pattern
from wordle_rl.engine.storage import write_atomic
from wordle_rl.evaluation.tables import (
    AUDIT_COLUMNS,
    SUMMARY_COLUMNS,
    audit_cells,
    by_answer_lines,
    fmt_pct,
    summary_cells,
)
from wordle_rl.evaluation.val_callback import ERROR_RATES, read_records
from wordle_rl.pipeline.control import control_config
from wordle_rl.pipeline.select import selection_lines

__all__ = ["write_report", "results_rows", "training_summary"]


def results_rows(eval_dir: Path) -> list[tuple[str, dict]]:
    """(run name, results.json) for every evaluation run in ``eval_dir``, solvers first."""
    if not eval_dir.is_dir():
        return []
    runs = sorted(
        (p.name, json.loads((p / "results.json").read_text()))
        for p in eval_dir.iterdir()
        if (p / "results.json").is_file()
    )
    return sorted(runs, key=lambda r: (not r[0].startswith("solver-"), r[0]))


def _row(name: str, r: dict) -> str:
    return "| " + " | ".join([name, r["decode"], *summary_cells(r)]) + " |"


def _audit_lines(runs: list[tuple[str, dict]]) -> list[str]:
    """The training-overlap audit of the trained policies' runs
    (:mod:`wordle_rl.evaluation.audit`)."""
    audited = [(name, r) for name, r in runs if "audit" in r]
    if not audited:
        return []
    first = audited[0][1]
    lines = [
        "",
        f"Training-overlap audit: {first['audit']['answers_imitated_as_guess']} of "
        f"{first['metrics']['games']} answers are imitated guesses in the training data. A game's "
        f"endgame is the "
        "first state in which its answer is the only answer word that fits; it was imitated when "
        "that exact "
        "state -> answer was a trained move (see `wordle_rl.evaluation.audit`).",
        "",
        "| " + " | ".join(["policy", "decoding", *AUDIT_COLUMNS]) + " |",
        "|---" * (2 + len(AUDIT_COLUMNS)) + "|",
    ]
    lines += ["| " + " | ".join([name, r["decode"], *audit_cells(r)]) + " |" for name, r in audited]
    return lines + by_answer_lines(
        [([name, r["decode"]], r) for name, r in audited], ["policy", "decoding"]
    )


def _paired_lines(eval_dir: Path, runs: list[tuple[str, dict]], cfg) -> list[str]:
    """Every trained model against each earlier one on the same answers, per decoding
    (:mod:`wordle_rl.evaluation.stats`)."""
    from wordle_rl.evaluation.stats import paired_comparison, read_games

    names = {name for name, _ in runs}
    order = ("start", "sft", "grpo", "control", "final")
    models = [m for m in order if any(n.startswith(f"{m}-") for n in names)]
    pairs = [(a, b) for k, a in enumerate(models) for b in models[k + 1 :]]
    rows = [
        (a, b, d) for a, b in pairs for d in cfg.eval.decodes if {f"{a}-{d}", f"{b}-{d}"} <= names
    ]
    if not rows:
        return []
    lines = [
        "",
        "Each trained model against the others, paired on the same answers (a loss counts as 7 "
        "guesses; exact McNemar test on the games won by only one, Wilcoxon signed-rank test on "
        "guesses per game):",
        "",
        "| A | B | decoding | won only by A | won only by B | McNemar p | mean guesses A | "
        "mean guesses B | B - A | Wilcoxon p |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for a, b, d in rows:
        r = paired_comparison(read_games(eval_dir / f"{a}-{d}"), read_games(eval_dir / f"{b}-{d}"))
        lines.append(
            f"| {a} | {b} | {d} | {r['only_a']} | {r['only_b']} | {r['mcnemar_p']:.3g} | "
            f"{r['mean_guesses_a']:.3f} | {r['mean_guesses_b']:.3f} | "
            f"{r['mean_guesses_diff']:+.3f} | {r['wilcoxon_p']:.3g} |"
        )
    return lines


def _probe_lines(eval_dir: Path) -> list[str]:
    """The recall probe of the SFT and GRPO models (:mod:`wordle_rl.evaluation.recall_probe`), if
    run."""
    from wordle_rl.evaluation.recall_probe import PROBE_FILE

    if not (eval_dir / PROBE_FILE).is_file():
        return []
    r = json.loads((eval_dir / PROBE_FILE).read_text())
    sft, grpo = r["models"]
    if not r["states"]:
        return [
            "",
            "Recall probe: the SFT model's games reached no recall state (no state where the "
            "answer is the one answer word that fits), so there is nothing to probe.",
        ]
    return [
        "",
        f"Recall probe: at the {r['states']} recall states of the SFT model's games (the answer "
        "is the one answer word that fits), the chance each model gives the whole answer, and "
        f"the states where greedy decoding writes it: SFT {sft['mean_p']:.3f}, "
        f"{sft['greedy_right']}; GRPO {grpo['mean_p']:.3f}, {grpo['greedy_right']} "
        f"({grpo['only_first']} only by SFT, {grpo['only_it']} only by GRPO, McNemar p = "
        f"{grpo['mcnemar_p']:.3g}).",
    ]


def write_report(runner) -> Path:
    from wordle_rl.evaluation.plots import plot_eval_runs, plot_training_log, plot_val_curve

    out: Path = runner.out
    plots = out / "plots"
    lines = [f"# wordle-rl run `{runner.cfg.name}`", "", *selection_lines(out)]
    stages = _training_summaries(runner)
    lines += _training_warnings(stages)
    runs: list[tuple[str, dict]] = []
    for split in runner.cfg.eval.splits:
        split_runs = results_rows(runner.paths["eval"] / split)
        if not split_runs:
            continue
        runs = runs or split_runs  # the first split's runs give the plots and the sample games
        n = split_runs[0][1]["metrics"]["games"]
        lines += [
            f"## {split.capitalize()} answers",
            "",
            f"All policies played the same {n} **{split}** answers; a win counts only when the "
            f"exact answer "
            "was guessed. 95 % Wilson intervals.",
            "",
            "| " + " | ".join(["policy", "decoding", *SUMMARY_COLUMNS]) + " |",
            "|---" * (2 + len(SUMMARY_COLUMNS)) + "|",
        ]
        lines += [_row(name, r) for name, r in split_runs]
        lines += _audit_lines(split_runs)
        lines += _paired_lines(runner.paths["eval"] / split, split_runs, runner.cfg)
        lines += _probe_lines(runner.paths["eval"] / split)
        lines.append("")
    if runs:
        for p in plot_eval_runs(runs, plots):
            lines.append(f"![{p.stem}](plots/{p.name})")
    for stage, keys in (
        ("sft", ["loss", "mean_token_accuracy"]),
        (
            "grpo",
            [
                "reward",
                "wordle/win_rate",
                "wordle/fits_rate",
                "wordle/zero_spread_share",
                "frac_reward_zero_std",
            ],
        ),
    ):
        log_file = runner.paths[stage] / f"wordle_rl_{stage}_log.json"
        if log_file.is_file():
            log = json.loads(log_file.read_text())
            p = plot_training_log(log, keys, plots / f"{stage}_curves.png", f"{stage} training")
            lines.append(f"![{stage} curves](plots/{p.name})")
            if stage == "grpo":
                games = runner.grpo_config().per_device_train_batch_size
                lines.append(_cumulative_wins(log, games, plots))
    records = read_records(runner.paths["grpo"])
    if records:
        lines += [
            "",
            "GRPO: greedy play on the val answers during training (step 0 is the SFT model; the "
            "step with the fewest guesses per game is the one kept)",
            "",
            "| step | val win rate | mean guesses on wins | mean guesses per game (loss = 7) | "
            "non-words | contradictions | repeats |",
            "|---|---|---|---|---|---|---|",
        ]
        for rec in records:
            mean = f"{rec['val_mean_guesses']:.3f}" if rec["val_mean_guesses"] else "-"
            per_game = rec.get("val_mean_guesses_per_game")
            errors = " | ".join(
                fmt_pct(rec[f"val_{k}"]) if f"val_{k}" in rec else "-" for k in ERROR_RATES
            )
            lines.append(
                f"| {rec['step']} | {fmt_pct(rec['val_win_rate'])} | {mean} | "
                f"{f'{per_game:.3f}' if per_game is not None else '-'} | {errors} |"
            )
        p = plot_val_curve(records, plots / "grpo_val_curve.png")
        lines += ["", f"![val during GRPO](plots/{p.name})"]
    trained = [(n, r) for n, r in runs if not n.startswith("solver-") and r["decode"] == "free"]
    if trained:
        name, _ = trained[-1]
        lines += ["", f"## Sample games ({name}, free decoding)", ""]
        split = runner.cfg.eval.splits[0]
        games = [
            json.loads(x)
            for x in (runner.paths["eval"] / split / name / "games.jsonl").read_text().splitlines()
        ]
        for g in [g for g in games if g["split"] == split][:6]:
            tiles = " ".join(
                pattern_to_emoji(str_to_pattern(m["pattern"])) if m["pattern"] else "⛔"
                for m in g["moves"]
            )
            words = " ".join((m["guess"] or m["error"] or "?").upper() for m in g["moves"])
            lines.append(
                f"- **{g['answer'].upper()}** {'won' if g['won'] else 'lost'}: {tiles}  `{words}`"
            )
    lines += _training_lines(stages) + _recall_lines(runner)
    lines += [
        "",
        "## Wall time and memory per stage",
        "",
        "Peak RSS is the process's largest resident set so far when the stage ended (it never "
        "falls; a resumed run starts a new process); peak GPU is the most CUDA memory its tensors "
        "held so far (- without CUDA).",
        "",
        "| stage | seconds | peak RSS (GiB) | peak GPU (GiB) |",
        "|---|---|---|---|",
    ]
    for m in sorted(runner.markers.glob("*.json"), key=lambda p: p.stat().st_mtime):
        d = json.loads(m.read_text())
        gpu = d.get("peak_gpu_gib")
        lines.append(
            f"| {d['stage']} | {d['seconds']} | {d.get('peak_rss_gib', '-')} | "
            f"{'-' if gpu is None else gpu} |"
        )
    lines += [
        "| report | (this file) | | |",
        "",
        "## Resolved config",
        "",
        "```json",
        (out / "config.json").read_text().strip(),
        "```",
        "",
        "## Versions",
        "",
        "```json",
        (out / "versions.json").read_text().strip(),
        "```",
        "",
    ]
    return write_atomic(out / "report.md", "\n".join(lines))


def training_summary(log: list[dict], max_steps: int, budget_minutes: float | None) -> dict:
    """Steps done, training seconds and what ended a training stage, from its
    ``wordle_rl_<stage>_log.json``.

    >>> log = [{"loss": 1.0, "step": 20}, {"train_runtime": 1800.4, "step": 6081}]
    >>> s = training_summary(log, 8000, 30)
    >>> s["steps"], s["max_steps"], s["seconds"], s["steps_per_s"]
    (6081, 8000, 1800.4, 3.378)
    >>> s["ended_by"]
    'time budget (30 min)'
    """
    end = next((e for e in reversed(log) if "train_runtime" in e), None)
    steps = max((e.get("step", 0) for e in log), default=0)
    seconds = end["train_runtime"] if end else None
    ended_by = (
        "max_steps"
        if steps >= max_steps
        else (f"time budget ({budget_minutes:g} min)" if budget_minutes else "stopped early")
    )
    return {
        "steps": steps,
        "max_steps": max_steps,
        "seconds": seconds,
        "steps_per_s": round(steps / seconds, 3) if seconds else None,
        "ended_by": ended_by,
    }


def _training_lines(rows: list[tuple[str, dict, object]]) -> list[str]:
    """The training stages' step counts (:func:`_training_summaries`): a budget that ends SFT
    early on a slow machine costs held-out wins."""
    if not rows:
        return []
    lines = [
        "",
        "## Training",
        "",
        "| stage | steps done | training seconds | steps/s | ended by |",
        "|---|---|---|---|---|",
    ]
    for stage, t, _ in rows:
        seconds = f"{t['seconds']:.0f}" if t["seconds"] is not None else "-"
        lines.append(
            f"| {stage} | {t['steps']:,} of {t['max_steps']:,} | {seconds} | "
            f"{t['steps_per_s'] or '-'} | {t['ended_by']} |"
        )
    cfg = next((cfg for stage, _, cfg in rows if stage == "control"), None)
    if cfg is not None:
        lines += [
            "",
            f"The control trained on from the SFT model with SFT alone (learning rate "
            f"{cfg.learning_rate:g}, {cfg.per_device_train_batch_size} games a step) for at "
            f"most the GRPO stage's wall-clock, its val checks included "
            f"({cfg.time_budget_minutes * 60:.0f} s): what the same time buys without the RL term.",
        ]
    return lines


def _training_summaries(runner) -> list[tuple[str, dict, object]]:
    """(stage, :func:`training_summary`, its config) of each training stage that left a log."""
    rows = []
    configs = {
        "sft": runner.sft_config,
        "grpo": runner.grpo_config,
        "control": lambda: control_config(runner),
    }
    for stage, kind in (("sft", "sft"), ("grpo", "grpo"), ("control", "sft")):
        log_file = runner.paths[stage] / f"wordle_rl_{kind}_log.json"
        if log_file.is_file():
            cfg = configs[stage]()
            log = json.loads(log_file.read_text())
            summary = training_summary(log, cfg.max_steps, cfg.time_budget_minutes)
            rows.append((stage, summary, cfg))
    return rows


def _training_warnings(rows: list[tuple[str, dict, object]]) -> list[str]:
    """A loud line at the top for each stage (:func:`_training_summaries`) that a time budget cut
    short: its model depends on the machine's speed."""
    return [
        f"> **Warning: the {stage} stage's time budget ended it at {t['steps']:,} of "
        f"{t['max_steps']:,} steps.** Its model depends on this machine's speed; without a "
        "budget (the default) every machine trains the same steps.\n"
        for stage, t, _ in rows
        # the control is ended by its budget by design: the GRPO stage's time
        if t["ended_by"].startswith("time budget") and stage != "control"
    ]


def _recall_lines(runner) -> list[str]:
    """The answer words the GRPO stage rewarded writing where each was the only one that fits
    (its recall states), by split: a held-out word among them was trained on in that form."""
    from wordle_rl.data.splits import SPLIT_NAMES
    from wordle_rl.training.move_rollout import RECALL_STATES_DIR

    files = sorted((runner.paths["grpo"] / RECALL_STATES_DIR).glob("*.jsonl"))
    if not files:
        return []
    words = Counter(
        json.loads(x)["recall_word"] for f in files for x in f.read_text().splitlines() if x
    )
    sp = runner._splits()
    by_split = ", ".join(
        f"{name} {len(words.keys() & set(getattr(sp, name)))} of {len(getattr(sp, name))}"
        for name in SPLIT_NAMES
        if getattr(sp, name)
    )
    return [
        "",
        f"The GRPO stage rewarded writing an answer word at {sum(words.values()):,} states of its "
        f"own games where that word was the only answer word that fits, {len(words):,} distinct "
        f"words ({by_split} answers of each split). The audit counts each such state -> word as "
        "an imitated move of the GRPO model.",
    ]


def _cumulative_wins(log: list[dict], batch: int, plots: Path) -> str:
    from wordle_rl.evaluation.plots import _plt

    # a rollout that plays fewer whole games than completions logs how many (wordle/games)
    pts = [
        (e["step"], e["wordle/win_rate"] * e.get("wordle/games", batch))
        for e in log
        if "wordle/win_rate" in e
    ]
    if not pts:
        return ""
    plt = _plt()
    steps, wins = zip(*pts)
    cum = [sum(wins[: i + 1]) for i in range(len(wins))]
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.plot(steps, cum)
    ax.set_xlabel("step")
    ax.set_ylabel("games won (cumulative)")
    ax.set_title("GRPO: cumulative wins in rollouts")
    fig.tight_layout()
    fig.savefig(plots / "grpo_cumulative_wins.png", dpi=110)
    plt.close(fig)
    return "![cumulative wins](plots/grpo_cumulative_wins.png)"
