"""PNG plots of evaluation runs and training logs (matplotlib, headless).

wordle-rl plot runs/sft/eval-free runs/solver-entropy --out plots/
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["plot_eval_runs", "plot_training_log", "plot_val_curve"]


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_eval_runs(runs: list[tuple[str, dict]], out: str | Path) -> list[Path]:
    """Guess histograms side by side, and format / invalid / repeated error rates by turn."""
    plt = _plt()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    fig, ax = plt.subplots(figsize=(8, 4))
    keys = ["1", "2", "3", "4", "5", "6", "X"]
    width = 0.8 / max(1, len(runs))
    for i, (name, r) in enumerate(runs):
        h = r["metrics"]["histogram"]
        n = max(1, r["metrics"]["games"])
        ax.bar(
            [k + i * width for k in range(len(keys))],
            [h.get(k, 0) / n for k in keys],
            width,
            label=f"{name} ({r['decode']})",
        )
    ax.set_xticks([k + 0.4 - width / 2 for k in range(len(keys))], keys)
    ax.set_xlabel("guesses used (X = lost)")
    ax.set_ylabel("share of games")
    ax.set_title(f"Guess histogram, {runs[0][1]['split']} split")
    ax.legend(fontsize=8)
    fig.tight_layout()
    paths.append(out / "guess_histogram.png")
    fig.savefig(paths[-1], dpi=110)
    plt.close(fig)
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.6), sharey=True)
    for metric, ax in zip(("format_error", "invalid_word", "repeated"), axes):
        for name, r in runs:
            bt = r["metrics"].get("by_turn", {})
            turns = sorted(bt, key=int)
            ax.plot([int(t) for t in turns], [bt[t][metric] for t in turns], marker="o", label=name)
        ax.set_title(metric.replace("_", " ") + " rate by turn")
        ax.set_xlabel("turn")
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    paths.append(out / "errors_by_turn.png")
    fig.savefig(paths[-1], dpi=110)
    plt.close(fig)
    return paths


def plot_training_log(log: list[dict], keys: list[str], out: str | Path, title: str) -> Path:
    """Curves of the given keys of a Trainer ``log_history`` against the step."""
    plt = _plt()
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(8, 4))
    for k in keys:
        pts = [(e["step"], e[k]) for e in log if k in e and "step" in e]
        if pts:
            ax.plot(*zip(*pts), label=k)
    ax.set_xlabel("step")
    ax.set_title(title)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out


def plot_val_curve(records: list[dict], out: str | Path) -> Path:
    """GRPO's in-training val check (``val_eval.jsonl``): greedy win rate, mean guesses per game
    and the shares of non-words, contradictions and repeats against step."""
    plt = _plt()
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    steps = [r["step"] for r in records]
    fig, (left, mid, right) = plt.subplots(1, 3, figsize=(14, 3.6))
    left.plot(steps, [100 * r["val_win_rate"] for r in records], marker="o")
    left.set_ylabel("greedy val wins (%)")
    mid.plot(
        steps, [r.get("val_mean_guesses_per_game") for r in records], marker="o", color="tab:orange"
    )
    mid.set_ylabel("mean guesses per game (loss = 7)")
    for key, label in (
        ("val_invalid_word_rate", "non-words"),
        ("val_inconsistent_rate", "contradictions"),
        ("val_repeated_guess_rate", "repeats"),
    ):
        pts = [(r["step"], 100 * r[key]) for r in records if key in r]
        if pts:
            right.plot(*zip(*pts), marker="o", label=label)
    right.set_ylabel("share of moves (%)")
    right.legend(fontsize=8)
    for ax in (left, mid, right):
        ax.set_xlabel("GRPO step")
    fig.suptitle("GRPO: greedy play on val answers during training")
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out
