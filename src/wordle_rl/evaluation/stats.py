"""Statistics of evaluated games: the Wilson interval of a win rate, and the paired comparison of
two policies that played the same answers: who won which games, and in how many guesses.

    wordle-rl compare runs/x/eval/val/sft-free runs/x/eval/val/grpo-free --paired

- **Wins**: the games won by only one of the two, with the exact McNemar test (a two-sided binomial
  test on those discordant games).
- **Guesses per game**, a loss counted as ``max_turns + 1``: both means, their difference, and the
  paired Wilcoxon signed-rank test (games with equal guesses dropped, Wilcoxon's own rule).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

__all__ = ["wilson", "mcnemar_p", "paired_comparison", "read_games"]


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """95 % Wilson score interval for k successes out of n."""
    if n == 0:
        return (0.0, 0.0)
    p = k / n
    den = 1 + z * z / n
    mid = (p + z * z / (2 * n)) / den
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    return (max(0.0, mid - half), min(1.0, mid + half))


def mcnemar_p(only_a: int, only_b: int) -> float:
    """The exact McNemar p of a paired split: a two-sided binomial test on the discordant pairs,
    ``only_a`` won (or right) under the first only and ``only_b`` under the second only.

    >>> round(mcnemar_p(0, 7), 4), mcnemar_p(2, 3), mcnemar_p(0, 0)
    (0.0156, 1.0, 1.0)
    """
    from scipy.stats import binomtest

    return float(binomtest(only_b, only_a + only_b).pvalue) if only_a + only_b else 1.0


def read_games(run: str | Path, split: str | None = None) -> list[dict]:
    """The evaluated games of a run folder's ``games.jsonl`` (its own split's games; no train
    sample)."""
    path = Path(run) / "games.jsonl" if Path(run).is_dir() else Path(run)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no games.jsonl (run `wordle-rl eval --out DIR` first)")
    games = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [
        g
        for g in games
        if g.get("split") != "train-sample" and (split is None or g.get("split") == split)
    ]


def paired_comparison(games_a: list[dict], games_b: list[dict], max_turns: int = 6) -> dict:
    """Compare policy B against policy A on the same answers (each a list of games with ``answer``,
    ``won``, ``turns``).

    >>> a = [{"answer": w, "won": w != "nymph", "turns": 4} for w in ("crane", "nymph", "abbey")]
    >>> b = [{"answer": w, "won": True, "turns": 3} for w in ("crane", "nymph", "abbey")]
    >>> r = paired_comparison(a, b)
    >>> (r["only_a"], r["only_b"], r["mcnemar_p"], round(r["mean_guesses_diff"], 3))
    (0, 1, 1.0, -2.0)
    """
    from scipy.stats import wilcoxon

    by_a, by_b = {g["answer"]: g for g in games_a}, {g["answer"]: g for g in games_b}
    if set(by_a) != set(by_b) or len(by_a) != len(games_a) or len(by_b) != len(games_b):
        missing = sorted(set(by_a) ^ set(by_b))
        raise ValueError(
            f"a paired comparison needs the same answers, each once; differing: {missing[:10]}"
        )
    answers = sorted(by_a)

    def guesses(g: dict) -> int:
        return g["turns"] if g["won"] else max_turns + 1

    only_a = sum(by_a[w]["won"] and not by_b[w]["won"] for w in answers)
    only_b = sum(by_b[w]["won"] and not by_a[w]["won"] for w in answers)
    ga, gb = [guesses(by_a[w]) for w in answers], [guesses(by_b[w]) for w in answers]
    diffs = [y - x for x, y in zip(ga, gb)]
    wilcoxon_p = float(wilcoxon(gb, ga).pvalue) if any(diffs) else 1.0
    n = len(answers)
    return {
        "games": n,
        "wins_a": sum(by_a[w]["won"] for w in answers),
        "wins_b": sum(by_b[w]["won"] for w in answers),
        "only_a": only_a,
        "only_b": only_b,
        "mcnemar_p": mcnemar_p(only_a, only_b),
        "mean_guesses_a": sum(ga) / n,
        "mean_guesses_b": sum(gb) / n,
        "mean_guesses_diff": sum(diffs) / n,
        "guesses_better_b": sum(d < 0 for d in diffs),
        "guesses_better_a": sum(d > 0 for d in diffs),
        "wilcoxon_p": wilcoxon_p,
    }
