"""Statistics of a data file: counts, turn distribution, history-depth mix, split membership.

    wordle-rl data stats data/sft/sft.jsonl --splits data/splits.json
"""

from __future__ import annotations

from collections import Counter

from wordle_rl.data.splits import Splits

__all__ = ["stats"]


def stats(rows: list[dict], splits: Splits | None = None) -> dict:
    """Counts, turn distribution, history-depth mix, split membership, win rate, solver mix."""
    out: dict = {"rows": len(rows)}
    out["distinct_answers"] = len({r.get("answer") for r in rows})
    if rows and "turns" in rows[0]:
        out["turns"] = dict(sorted(Counter(r["turns"] for r in rows).items()))
        out["won"] = sum(bool(r.get("won")) for r in rows)
    if rows and "refused_at" in rows[0]:
        out["refused_move_shown"] = sum(r["refused_at"] is not None for r in rows)
    if rows and "refused_kind" in rows[0]:
        out["refused_kind"] = dict(
            sorted(Counter(r["refused_kind"] for r in rows if r["refused_kind"]).items())
        )
    if rows and "depth" in rows[0]:
        out["history_depth"] = dict(sorted(Counter(r["depth"] for r in rows).items()))
    for key in ("solver", "start", "status"):
        if rows and key in rows[0]:
            out[key] = dict(sorted(Counter(str(r[key]) for r in rows).items()))
    if splits is not None:
        out["split_membership"] = dict(
            sorted(Counter(splits.split_of(r.get("answer", "")) or "none" for r in rows).items())
        )
    return out
