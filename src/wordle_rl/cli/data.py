"""``wordle-rl data``: splits, SFT games, RL rows, checks and statistics, teacher traces.

wordle-rl data split --seed 0
wordle-rl data sft --games 140000 --recall_share 0.2     # every SftConfig field is a flag
wordle-rl data rl --rows 4000                            # every RlConfig field is a flag
wordle-rl data rank --model runs/m --style xml --no-think # the ranked teacher's ranking
wordle-rl data check data/sft/sft.jsonl --allow-outside
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from wordle_rl.cli.common import (
    PASSTHROUGH,
    SplitsOpt,
    StyleOpt,
    ThinkOpt,
    console,
    err_console,
    fail,
    parse_config,
)
from wordle_rl.cli.common import data_call as _data_call
from wordle_rl.engine.words import load_word_lists
from wordle_rl.environment.prompts import DEFAULT_STYLE

app = typer.Typer(no_args_is_help=True, help="Generate and check training data.")
ConfigOpt = Annotated[Path | None, typer.Option(help="YAML/JSON file of the config's fields.")]


@app.command("split")
def data_split(
    seed: Annotated[int, typer.Option(help="Shuffle seed.")] = 0,
    fractions: Annotated[str, typer.Option(help="train,val,test fractions.")] = "0.8,0.1,0.1",
    out: Annotated[Path, typer.Option(help="Where to write the splits JSON.")] = Path(
        "data/splits.json"
    ),
) -> None:
    """Divide the answers into train / val / test, deterministically."""
    from wordle_rl.data.splits import make_splits

    try:
        fr = tuple(float(x) for x in fractions.split(","))
    except ValueError as e:
        raise fail(f"--fractions must be three numbers like 0.8,0.1,0.1, got {fractions!r}") from e
    splits = _data_call(make_splits, load_word_lists(), seed, fr)
    splits.save(out)
    console.print(
        f"train {len(splits.train)} / val {len(splits.val)} / test {len(splits.test)} -> {out}"
    )


@app.command("sft", context_settings=PASSTHROUGH)
def data_sft(
    ctx: typer.Context,
    splits: SplitsOpt = Path("data/splits.json"),
    config: ConfigOpt = None,
    out: Annotated[Path, typer.Option(help="Output folder (sft.jsonl + hf/).")] = Path("data/sft"),
) -> None:
    """Solver games on train answers (and recall games on allowed words outside the answer list)
    as TRL conversational `messages` rows (JSONL + datasets). Every SftConfig field is a flag:
    --games, --seed, --style, --think, --solver_mix, --recall_share, --protocol, ... (`wordle-rl
    data sft --help-config`)."""
    from wordle_rl.data.files import save_dataset
    from wordle_rl.data.sft_games import SftConfig, generate_sft
    from wordle_rl.data.splits import Splits, record_splits

    cfg = parse_config(SftConfig, config, ctx.args)
    sp = _data_call(Splits.load, splits)
    t0 = time.perf_counter()
    with console.status(f"playing {cfg.games} solver games"):
        rows = _data_call(generate_sft, sp, cfg)
    path = _data_call(save_dataset, rows, out, "sft")
    record_splits(out, sp)
    dt = time.perf_counter() - t0
    console.print(f"{len(rows)} games -> {path} and {out / 'hf'} ({dt:.1f} s)")


@app.command("rl", context_settings=PASSTHROUGH)
def data_rl(
    ctx: typer.Context,
    splits: SplitsOpt = Path("data/splits.json"),
    config: ConfigOpt = None,
    out: Annotated[Path, typer.Option(help="Output folder (rl.jsonl + hf/).")] = Path("data/rl"),
) -> None:
    """RL prompt rows {answer, history, prompt} with a configurable history-depth mix. Every
    RlConfig field is a flag: --rows, --seed, --depth_mix, --wide_share, --style, --think, ...
    (`wordle-rl data rl --help-config`)."""
    from wordle_rl.data.files import save_dataset
    from wordle_rl.data.rl_rows import RlConfig, generate_rl
    from wordle_rl.data.splits import Splits, record_splits

    cfg = parse_config(RlConfig, config, ctx.args)
    sp = _data_call(Splits.load, splits)
    data = _data_call(generate_rl, sp, cfg)
    path = _data_call(save_dataset, data, out, "rl")
    record_splits(out, sp)
    console.print(f"{len(data)} prompts -> {path} and {out / 'hf'}")


@app.command("rank")
def data_rank(
    model: Annotated[str, typer.Option(help="Model folder whose preference ranks the words.")],
    out: Annotated[Path, typer.Option(help="Ranking file, one word a line.")] = Path(
        "data/ranking.txt"
    ),
    style: StyleOpt = DEFAULT_STYLE,
    think: ThinkOpt = False,
    threads: Annotated[int, typer.Option(help="Torch CPU threads.")] = 2,
) -> None:
    """Rank the answer words by the log-probability the model gives each as its first guess, best
    first: the `ranked` teacher's ranking (`wordle-rl data sft --solver_mix ranked:1 --ranking
    FILE`)."""
    from wordle_rl.environment.prompts import PromptStyle
    from wordle_rl.training.word_prior import write_model_ranking

    t0 = time.perf_counter()
    try:
        st = PromptStyle(style, think=think)
        with console.status(f"ranking the answer words by {model}"):
            path = write_model_ranking(model, st, out, threads)
    except (FileNotFoundError, RuntimeError, ValueError) as e:
        raise fail(str(e)) from e
    console.print(f"ranking -> {path} ({time.perf_counter() - t0:.1f} s)")


def _load_rows(path: Path) -> list[dict]:
    from wordle_rl.data.files import read_jsonl

    if path.is_dir():
        from datasets import load_from_disk

        target = path / "hf" if (path / "hf").is_dir() else path
        try:
            ds = load_from_disk(str(target))
        except (FileNotFoundError, ValueError) as e:
            raise fail(f"{path}: not a JSONL file or a saved datasets folder ({e})") from e
        return [dict(r, _line=i + 1) for i, r in enumerate(ds)]
    return _data_call(read_jsonl, path)


@app.command("check")
def data_check(
    dataset: Annotated[Path, typer.Argument(help="JSONL file or datasets folder.")],
    splits: SplitsOpt = Path("data/splits.json"),
    split: Annotated[str, typer.Option(help="The only split allowed as a target.")] = "train",
    allow_outside: Annotated[
        bool,
        typer.Option(
            help="Also accept targets that are allowed words outside the answer "
            "list (recall games, RL rows made with --wide_share)."
        ),
    ] = False,
    protocol: Annotated[
        str, typer.Option(help="strict also refuses a game that ends on a val or test word.")
    ] = "open",
) -> None:
    """Fail loudly if any row targets an answer outside the allowed split (leakage), or is
    malformed."""
    from wordle_rl.data.files import validate_rows
    from wordle_rl.data.splits import Splits, check_leakage, check_made_with

    sp = _data_call(Splits.load, splits)
    _data_call(check_made_with, dataset, sp, splits)
    rows = _load_rows(dataset)
    _data_call(validate_rows, rows, str(dataset), allow_outside=allow_outside)
    n = _data_call(check_leakage, rows, sp, str(dataset), split, allow_outside, protocol)
    extra = " or outside the answer list" if allow_outside else ""
    console.print(f"[green]ok[/]: {n} rows, every target in the {split} split{extra}")


@app.command("stats")
def data_stats(
    dataset: Annotated[Path, typer.Argument(help="JSONL file or datasets folder.")],
    splits: Annotated[Path | None, typer.Option(help="Splits file, for split membership.")] = None,
) -> None:
    """Counts, turn distribution, history-depth mix and split membership."""
    from wordle_rl.data.splits import Splits
    from wordle_rl.data.stats import stats

    sp = _data_call(Splits.load, splits) if splits else None
    console.print_json(json.dumps(stats(_load_rows(dataset), sp)))


@app.command("teacher")
def data_teacher(
    base_url: Annotated[str, typer.Option(help="OpenAI-compatible base URL (…/v1).")],
    model: Annotated[str, typer.Option(help="Model name.")],
    splits: SplitsOpt = Path("data/splits.json"),
    out: Annotated[Path, typer.Option(help="JSONL of games (appended, resumable).")] = Path(
        "data/teacher/games.jsonl"
    ),
    games_per_word: Annotated[int, typer.Option(help="Games per train answer.")] = 1,
    limit: Annotated[int | None, typer.Option(help="Only the first N train answers.")] = None,
    api_key_env: Annotated[
        str, typer.Option(help="Environment variable holding the API key.")
    ] = "OPENAI_API_KEY",
    concurrency: Annotated[int, typer.Option(help="Games at once.")] = 8,
    timeout: Annotated[float, typer.Option(help="Seconds per request.")] = 60.0,
    retries: Annotated[
        int, typer.Option(help="Retries per request (the openai client's exponential backoff).")
    ] = 3,
    temperature: Annotated[float, typer.Option(help="Sampling temperature.")] = 0.0,
    style: StyleOpt = DEFAULT_STYLE,
    think: ThinkOpt = True,
) -> None:
    """Play train answers against a chat endpoint; every finished game is appended and flushed."""
    from wordle_rl.data.splits import Splits
    from wordle_rl.data.teacher import TeacherConfig, play_teacher_games, summarize_teacher

    sp = _data_call(Splits.load, splits)
    answers = sp.train[:limit] if limit else sp.train
    cfg = TeacherConfig(
        base_url=base_url,
        model=model,
        api_key_env=api_key_env,
        concurrency=concurrency,
        timeout_s=timeout,
        retries=retries,
        temperature=temperature,
        style=style,
        think=think,
    )
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=err_console) as bar:
        task = bar.add_task("teacher games", total=len(answers) * games_per_word)
        counts = play_teacher_games(
            cfg, answers, out, games_per_word, on_game=lambda _: bar.advance(task)
        )
    from wordle_rl.data.files import read_jsonl

    per = summarize_teacher(_data_call(read_jsonl, out))
    wins = sum(d["wins"] for d in per.values())
    games = sum(d["games"] for d in per.values())
    console.print(
        f"played {counts['played']}, skipped {counts['skipped']} already finished, "
        f"{counts['errors']} failed (retried next run); finished games: {games}, won {wins}"
    )
    console.print(f"per-word summary: {len(per)} words -> see {out}")


@app.command("teacher-sft")
def data_teacher_sft(
    games: Annotated[Path, typer.Argument(help="Teacher games JSONL.")],
    out: Annotated[Path, typer.Option(help="Output folder (sft.jsonl + hf/).")] = Path(
        "data/teacher-sft"
    ),
    won_only: Annotated[
        bool, typer.Option("--won-only/--all-games", help="Keep won games only.")
    ] = True,
    format_clean: Annotated[
        bool, typer.Option("--format-clean/--any-format", help="Drop games with errors.")
    ] = True,
    max_turns: Annotated[int | None, typer.Option(help="Keep games of at most N turns.")] = None,
    splits: SplitsOpt = Path("data/splits.json"),
) -> None:
    """Filter teacher games into SFT rows (checked for leakage)."""
    from wordle_rl.data.files import read_jsonl, save_dataset
    from wordle_rl.data.splits import Splits, check_leakage, record_splits
    from wordle_rl.data.teacher import teacher_to_sft

    rows = teacher_to_sft(_data_call(read_jsonl, games), won_only, format_clean, max_turns)
    if not rows:
        raise fail("no teacher game passed the filters")
    sp = _data_call(Splits.load, splits)
    _data_call(check_leakage, rows, sp, str(games))
    path = _data_call(save_dataset, rows, out, "sft")
    record_splits(out, sp)
    console.print(f"{len(rows)} games -> {path}")
