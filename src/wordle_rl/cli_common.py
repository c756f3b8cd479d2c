"""Shared pieces of the ``wordle-rl`` command line: consoles, error exits, common options, tiles."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.text import Text

from wordle_rl.game import GREEN, YELLOW, pattern_to_tiles
from wordle_rl.prompts import DEFAULT_STYLE, STYLES
from wordle_rl.words import WordList, WordListError, load_word_lists

console = Console()
err_console = Console(stderr=True, soft_wrap=True)

AnswersOpt = Annotated[
    Path | None, typer.Option("--answers", help="File of possible answers, one per line.")
]
AllowedOpt = Annotated[
    Path | None, typer.Option("--allowed", help="File of allowed guesses (answers included).")
]

_STYLE = {GREEN: "bold white on green4", YELLOW: "bold black on yellow3", 0: "bold white on grey35"}
_KEY_STYLE = {
    -1: "bold black on grey82",
    0: "grey50 on grey15",
}  # unused letters, letters known absent
StyleOpt = Annotated[str, typer.Option(help=f"Prompt style: {' | '.join(STYLES)}.")]
ThinkOpt = Annotated[
    bool, typer.Option("--think/--no-think", help="xml/tiles/plain: expect a <think> block.")
]
ModelStyleOpt = Annotated[
    str | None,
    typer.Option(
        "--style",
        help=f"Prompt style: {' | '.join(STYLES)} (default: the one the model folder records, "
        f"else {DEFAULT_STYLE}).",
    ),
]
ModelThinkOpt = Annotated[
    bool | None,
    typer.Option(
        "--think/--no-think",
        help="xml/tiles/plain: expect a <think> block (default: as the model folder records, "
        "else no).",
    ),
]
SplitsOpt = Annotated[
    Path, typer.Option("--splits", help="Splits file from `wordle-rl data split`.")
]


def field_help(config, name: str) -> str:
    """The help of field ``name`` of the dataclass ``config``: an option that sets a config field
    says what the field says.

    >>> from wordle_rl.rl_rows import RlConfig
    >>> field_help(RlConfig, "rows")
    'Number of rows.'
    """
    for f in fields(config):
        if f.name == name:
            return f.metadata["help"]
    raise KeyError(f"{config.__name__} has no field {name!r}")


def fail(message: str, code: int = 2) -> typer.Exit:
    err_console.print(f"[bold red]error:[/] {escape(message)}")
    return typer.Exit(code)


def words_from(answers: Path | None, allowed: Path | None) -> WordList:
    try:
        return load_word_lists(answers, allowed)
    except WordListError as e:
        raise fail(str(e)) from e


def tiles(guess: str, pattern: int) -> Text:
    t = Text()
    for c, tile in zip(guess, pattern_to_tiles(pattern, len(guess))):
        t.append(f" {c.upper()} ", style=_STYLE[tile])
        t.append(" ")
    return t


def keyboard(history: list[tuple[str, int]]) -> Text:
    best: dict[str, int] = {}
    for g, p in history:
        for c, tile in zip(g, pattern_to_tiles(p, len(g))):
            best[c] = max(best.get(c, -1), tile)
    t = Text()
    for row in ("qwertyuiop", "asdfghjkl", "zxcvbnm"):
        t.append(" " * (10 - len(row)))
        for c in row:
            t.append(
                f" {c.upper()} ", style=_KEY_STYLE.get(best.get(c, -1), _STYLE.get(best.get(c)))
            )
        t.append("\n")
    return t


def data_call(fn, *args, **kw):
    """Call ``fn``; a data or word-list error becomes a clear error exit."""
    from wordle_rl.data import DataError

    try:
        return fn(*args, **kw)
    except (DataError, WordListError) as e:
        raise fail(str(e)) from e
