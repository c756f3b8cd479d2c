"""Tables of evaluation results: the summary and audit cells shared by ``wordle-rl compare`` and
the pipeline report, and the ``report.md`` of one evaluation run.

    from wordle_rl.evaluation.tables import SUMMARY_COLUMNS, summary_cells
    result = json.load(open("runs/x/eval/test/sft-free/results.json"))
    dict(zip(SUMMARY_COLUMNS, summary_cells(result)))
"""

from __future__ import annotations

__all__ = [
    "fmt_pct",
    "SUMMARY_COLUMNS",
    "summary_cells",
    "AUDIT_COLUMNS",
    "audit_cells",
    "BY_ANSWER_COLUMNS",
    "by_answer_cells",
    "by_answer_lines",
    "report_markdown",
]


def fmt_pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f} %"


def fmt_win_rate(m: dict) -> str:
    """A metrics dict's win rate with its 95 % interval.

    >>> fmt_win_rate({"win_rate": 0.5, "win_rate_ci95": [0.25, 0.75]})
    '50.0 % (25.0 %–75.0 %)'
    """
    lo, hi = m["win_rate_ci95"]
    return f"{fmt_pct(m['win_rate'])} ({fmt_pct(lo)}–{fmt_pct(hi)})"


SUMMARY_COLUMNS = (
    "win rate (95 % CI)",
    "mean guesses (wins)",
    "histogram 1-6/X",
    "format err",
    "invalid word",
    "repeated",
    "inconsistent",
    "win on train sample",
)


def summary_cells(result: dict) -> list[str]:
    """The headline metrics of one ``results.json``, formatted, in the order of
    :data:`SUMMARY_COLUMNS`."""
    m = result["metrics"]
    tr = result.get("train_sample_metrics")
    return [
        fmt_win_rate(m),
        f"{m['mean_guesses_on_wins']:.3f}" if m["mean_guesses_on_wins"] else "-",
        "/".join(str(v) for v in m["histogram"].values()),
        fmt_pct(m["format_error_rate"]),
        fmt_pct(m["invalid_word_rate"]),
        fmt_pct(m["repeated_guess_rate"]),
        fmt_pct(m["inconsistent_rate"]),
        fmt_pct(tr["win_rate"]) if tr else "-",
    ]


AUDIT_COLUMNS = (
    "wins, endgame imitated",
    "wins, endgame never imitated (95 % CI)",
    "won before the endgame",
    "lost, no endgame",
    "winning moves imitated",
)


def audit_cells(result: dict) -> list[str]:
    """The training-overlap audit of one ``results.json`` (``-`` for every column when it has none),
    formatted, in the order of :data:`AUDIT_COLUMNS`."""
    a = result.get("audit")
    if a is None:
        return ["-"] * len(AUDIT_COLUMNS)
    c = a["classes"]

    def wins(cls: str) -> str:
        return f"{c[cls]['wins']} of {c[cls]['games']}"

    new = c["endgame_new"]
    rate = f"{fmt_win_rate(new)}, " if new["games"] else ""
    share = f" ({fmt_pct(a['winning_moves_imitated_share'])})" if a["wins"] else ""
    return [
        wins("endgame_imitated"),
        rate + wins("endgame_new"),
        wins("won_before_endgame"),
        f"{c['lost_no_endgame']['games']}",
        f"{a['winning_moves_imitated']} of {a['wins']}{share}",
    ]


BY_ANSWER_COLUMNS = (
    "answer in the training data",
    "games",
    "wins (95 % CI)",
    "format err",
    "invalid word",
    "repeated",
)


def by_answer_cells(result: dict) -> list[list[str]]:
    """Two rows of the audit's ``by_answer`` metrics (none when the run has no audit), in the
    order of :data:`BY_ANSWER_COLUMNS`: the games whose answer the training data writes as a
    trained guess somewhere, then the games whose answer it never writes."""
    by = result.get("audit", {}).get("by_answer")
    if by is None:
        return []
    rows = []
    for key, label in (("written", "written as a guess"), ("never_written", "never written")):
        m = by[key]
        rate = f", {fmt_win_rate(m)}" if m["games"] else ""
        rows.append(
            [
                label,
                str(m["games"]),
                f"{m['wins']}{rate}",
                fmt_pct(m["format_error_rate"]),
                fmt_pct(m["invalid_word_rate"]),
                fmt_pct(m["repeated_guess_rate"]),
            ]
        )
    return rows


def by_answer_lines(runs: list[tuple[list[str], dict]], lead: list[str]) -> list[str]:
    """The markdown table of :func:`by_answer_cells` for ``runs`` (each: its leading cells, under
    the ``lead`` columns, and its ``results.json``); no lines when no run has the split."""
    rows = [cells + row for cells, result in runs for row in by_answer_cells(result)]
    if not rows:
        return []
    columns = [*lead, *BY_ANSWER_COLUMNS]
    return [
        "",
        "The games by whether the training data writes their answer as a trained guess somewhere "
        "(format errors, invalid words and repeats are shares of those games' moves):",
        "",
        "| " + " | ".join(columns) + " |",
        "|---" * len(columns) + "|",
        *("| " + " | ".join(row) + " |" for row in rows),
    ]


def report_markdown(result: dict, games: list[dict]) -> str:
    m = result["metrics"]
    lines = [
        f"# Evaluation: {result['policy']} ({result['decode']} decoding) on the {result['split']} "
        f"split",
        "",
        "| metric | value |",
        "|---|---|",
        f"| games | {m['games']} |",
        f"| win rate (95 % CI) | {fmt_win_rate(m)} |",
        f"| mean guesses on wins | {m['mean_guesses_on_wins'] or '-'} |",
        f"| histogram (1..6, X) | {' / '.join(str(v) for v in m['histogram'].values())} |",
        f"| format-error rate (per move) | {fmt_pct(m['format_error_rate'])} |",
        f"| invalid-word rate | {fmt_pct(m['invalid_word_rate'])} |",
        f"| repeated-guess rate | {fmt_pct(m['repeated_guess_rate'])} |",
        f"| inconsistent guesses (turn ≥ 2) | {fmt_pct(m['inconsistent_rate'])} |",
        f"| mean information gain / best | {m['mean_info_gain_vs_best']:.3f} |",
    ]
    if "train_sample_metrics" in result:
        t = result["train_sample_metrics"]
        lines += [
            f"| win rate on {t['games']} train answers | {fmt_pct(t['win_rate'])} |",
            f"| generalisation gap (train − {result['split']}) | "
            f"{fmt_pct(result['generalisation_gap'])} |",
        ]
    if "audit" in result:
        a = result["audit"]
        lines += [
            "",
            "## Training-overlap audit",
            "",
            f"Against {a['training_rows']:,} training rows ({', '.join(a['training_files'])}). A "
            f"game's endgame "
            "is the first state in which its answer is the only answer word that fits; it is "
            "imitated when "
            "that state -> answer was a trained move. "
            f"{a['answers_imitated_as_guess']} of {m['games']} answers were imitated guesses "
            f"somewhere.",
            "",
            "| " + " | ".join(AUDIT_COLUMNS) + " |",
            "|---" * len(AUDIT_COLUMNS) + "|",
            "| " + " | ".join(audit_cells(result)) + " |",
        ]
        lines += by_answer_lines([([], result)], [])
    lines += ["", "## Sample games", ""]
    for g in games[:5]:
        row = " ".join(f"{mv['guess'] or '∅'}:{mv['pattern'] or mv['error']}" for mv in g["moves"])
        lines.append(f"- {g['answer']}: {'won' if g['won'] else 'lost'} — {row}")
    return "\n".join(lines) + "\n"
