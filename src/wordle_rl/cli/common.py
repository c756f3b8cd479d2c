"""Shared pieces of the ``wordle-rl`` command line: consoles, error exits, common options, tiles."""

from __future__ import annotations

import dataclasses
import errno
import shutil
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.text import Text

from wordle_rl.engine.game import GREEN, YELLOW, pattern_to_tiles
from wordle_rl.engine.words import WordList, WordListError, load_word_lists
from wordle_rl.environment.prompts import DEFAULT_STYLE, STYLES

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
# a command whose config dataclass's fields are its flags, parsed by parse_config
PASSTHROUGH = {"allow_extra_args": True, "ignore_unknown_options": True}
SplitsOpt = Annotated[
    Path, typer.Option("--splits", help="Splits file from `wordle-rl data split`.")
]


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
    """Call ``fn``; a data or word-list error, or a full disk, becomes a clear error exit."""
    from wordle_rl.data.files import DataError

    with one_line_errors((DataError, WordListError)):
        return fn(*args, **kw)


@contextmanager
def one_line_errors(known: tuple, where: Path | None = None, again: str = "run it again"):
    """Run the body; an error of a ``known`` type, or any error on a full disk (the disk holding
    ``where``), ends the command with one clear line and exit code 2, naming the file that could
    not be written where the error does; ``again`` says how to go on once there is space."""
    try:
        yield
    except known as e:
        raise fail(str(e)) from e
    except Exception as e:
        if not disk_full(e, where):
            raise
        if isinstance(e, OSError) and e.filename:
            what = f"{e.filename}: no space left on the disk"
        else:
            disk = f" holding {where}" if where is not None else ""
            what = f"no space left on the disk{disk} ({e})"
        raise fail(f"{what}; free some, then {again}") from e


def disk_full(e: BaseException | None, where: Path | None = None) -> bool:
    """Whether ``e``, or an error it was raised from, is a full disk (or a spent disk quota); with
    ``where``, also whether the disk holding that folder is (nearly) full: less than 1 MiB or 1 %
    free. torch reports a failed write in a checkpoint without naming the cause.

    >>> import errno; disk_full(OSError(errno.ENOSPC, "No space left on device"))
    True
    >>> disk_full(ValueError("no"))
    False
    """
    if where is not None:
        folder = Path(where).absolute()
        while not folder.exists():
            folder = folder.parent
        usage = shutil.disk_usage(folder)
        if usage.free < max(2**20, usage.total // 100):
            return True
    while e is not None:
        if isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT):
            return True
        if "No space left on device" in str(e) or "StorageFull" in str(e):
            return True
        e = e.__cause__ or e.__context__
    return False


def _unknown_fields(config: Path, unknown: list[str], saved_with) -> str:
    """The error for fields the config class lacks: a typo, or a resolved config saved under
    other transformers/TRL versions, whose field sets differ."""
    from wordle_rl.training.records import stack_versions

    here = stack_versions()
    msg = f"{config}: unknown field(s) {unknown}"

    def show(v: dict) -> str:
        return ", ".join(f"{k} {v.get(k, '?')}" for k in here)

    if isinstance(saved_with, dict) and saved_with != here:
        return (
            f"{msg}; the file was saved with {show(saved_with)} and this is {show(here)}: "
            f"remove the fields this version does not have"
        )
    return f"{msg} (check the spelling; installed: {show(here)})"


def parse_config(cls, config: Path | None, args: list[str]):
    """A config dataclass from an optional YAML/JSON file, overridden by ``--field value`` flags:
    every field is a flag (``--help-config`` lists them with their help)."""
    from transformers import HfArgumentParser

    parser = HfArgumentParser(cls)
    if "--help-config" in args:
        parser.print_help()
        raise typer.Exit(0)
    base: dict = {}
    if config is not None:
        if not config.is_file():
            raise fail(f"{config}: config file not found")
        import yaml

        try:
            base = yaml.safe_load(config.read_text()) or {}
        except yaml.YAMLError as e:
            raise fail(f"{config}: not valid YAML/JSON ({e})") from e
        if not isinstance(base, dict):
            raise fail(f"{config}: expected a mapping of config fields")
        saved_with = base.pop("_saved_with", None)
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(base) - known)
        if unknown:
            raise fail(_unknown_fields(config, unknown, saved_with))
    if base.get("steps_per_generation") is not None:
        # GRPOConfig derives the generation batch from this; a saved resolved config holds both
        base.pop("generation_batch_size", None)
    # the file's values are the defaults the flags override, taken as they are (a saved resolved
    # config holds nulls, lists and mappings that no command-line string spells)
    parser.set_defaults(**base)
    try:
        (cfg,) = parser.parse_args_into_dataclasses(args=list(args))
    except (ValueError, SystemExit) as e:
        raise fail(f"bad config: {e}") from e
    return cfg
