"""``wordle-rl data``: splits, SFT games, RL rows, checks and statistics, teacher traces.

wordle-rl data split --seed 0
wordle-rl data sft --games 140000 --no-think --recall-share 0.2
wordle-rl data rl --rows 4000
wordle-rl data check data/sft/sft.jsonl --allow-outside
"""

from __future__ import annotations

import json
import time
from functools import partial
from pathlib import Path
from typing import Annotated

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from wordle_rl.cli_common import (
    SplitsOpt,
    StyleOpt,
    ThinkOpt,
    console,
    err_console,
    fail,
    field_help,
)
from wordle_rl.cli_common import data_call as _data_call
from wordle_rl.data import mix_text
from wordle_rl.prompts import DEFAULT_STYLE
from wordle_rl.rl_rows import RlConfig
from wordle_rl.sft_games import SftConfig
from wordle_rl.words import load_word_lists

_SFT, _RL = SftConfig(), RlConfig()  # every option's default is the config's: the main job's data
_SOLVER_MIX, _REFUSED_KINDS = mix_text(_SFT.solver_mix), mix_text(_SFT.refused_kinds)
_DEPTH_MIX = mix_text(_RL.depth_mix)
_sft, _rl = partial(field_help, SftConfig), partial(field_help, RlConfig)

app = typer.Typer(no_args_is_help=True, help="Generate and check training data.")


@app.command("split")
def data_split(
    seed: Annotated[int, typer.Option(help="Shuffle seed.")] = 0,
    fractions: Annotated[str, typer.Option(help="train,val,test fractions.")] = "0.8,0.1,0.1",
    rl_share: Annotated[
        float,
        typer.Option(
            help="Share of the train answers held back from SFT games as the rl "
            "split: RL targets only (`data rl --split rl`)."
        ),
    ] = 0.0,
    out: Annotated[Path, typer.Option(help="Where to write the splits JSON.")] = Path(
        "data/splits.json"
    ),
) -> None:
    """Divide the answers into train / val / test (and rl, with --rl-share), deterministically."""
    from wordle_rl.splits import make_splits

    try:
        fr = tuple(float(x) for x in fractions.split(","))
    except ValueError as e:
        raise fail(f"--fractions must be three numbers like 0.8,0.1,0.1, got {fractions!r}") from e
    splits = _data_call(make_splits, load_word_lists(), seed, fr, rl_share)
    splits.save(out)
    rl = f" / rl {len(splits.rl)}" if splits.rl else ""
    console.print(
        f"train {len(splits.train)}{rl} / val {len(splits.val)} / test {len(splits.test)} -> {out}"
    )


@app.command("sft")
def data_sft(
    splits: SplitsOpt = Path("data/splits.json"),
    games: Annotated[int, typer.Option(help=_sft("games"))] = _SFT.games,
    seed: Annotated[int, typer.Option(help=_sft("seed"))] = _SFT.seed,
    style: StyleOpt = DEFAULT_STYLE,
    think: ThinkOpt = _SFT.think,
    solvers: Annotated[
        str, typer.Option(help=_sft("solver_mix") + " As name:weight,...")
    ] = _SOLVER_MIX,
    balance_share: Annotated[float, typer.Option(help=_sft("balance_share"))] = _SFT.balance_share,
    wide_share: Annotated[float, typer.Option(help=_sft("wide_share"))] = _SFT.wide_share,
    wide_answers_first: Annotated[
        bool, typer.Option(help=_sft("wide_answers_first"))
    ] = _SFT.wide_answers_first,
    informative_second_share: Annotated[
        float, typer.Option(help=_sft("informative_second_share"))
    ] = _SFT.informative_second_share,
    informative_width: Annotated[
        int, typer.Option(help=_sft("informative_width"))
    ] = _SFT.informative_width,
    refused_share: Annotated[float, typer.Option(help=_sft("refused_share"))] = _SFT.refused_share,
    refused_kinds: Annotated[
        str, typer.Option(help=_sft("refused_kinds") + " As kind:weight,...")
    ] = _REFUSED_KINDS,
    recall_share: Annotated[float, typer.Option(help=_sft("recall_share"))] = _SFT.recall_share,
    lexicon_share: Annotated[float, typer.Option(help=_sft("lexicon_share"))] = _SFT.lexicon_share,
    protocol: Annotated[str, typer.Option(help=_sft("protocol"))] = _SFT.protocol,
    out: Annotated[Path, typer.Option(help="Output folder (sft.jsonl + hf/).")] = Path("data/sft"),
) -> None:
    """Solver games on train answers (and, with --wide-share or --recall-share, on allowed words
    outside the answer list) as TRL conversational `messages` rows (JSONL + datasets), and
    optionally word-pattern exercises."""
    from wordle_rl.data import is_exercise, save_dataset
    from wordle_rl.sft_games import SftConfig, generate_sft, parse_refused_kinds, parse_solver_mix
    from wordle_rl.splits import Splits

    sp = _data_call(Splits.load, splits)
    mix = _data_call(parse_solver_mix, solvers)
    kinds = _data_call(parse_refused_kinds, refused_kinds)
    t0 = time.perf_counter()
    with console.status(f"playing {games} solver games"):
        rows = _data_call(
            generate_sft,
            sp,
            SftConfig(
                games=games,
                seed=seed,
                style=style,
                think=think,
                solver_mix=mix,
                balance_share=balance_share,
                wide_share=wide_share,
                wide_answers_first=wide_answers_first,
                informative_second_share=informative_second_share,
                informative_width=informative_width,
                refused_share=refused_share,
                refused_kinds=kinds,
                recall_share=recall_share,
                protocol=protocol,
                lexicon_share=lexicon_share,
            ),
        )
    path = save_dataset(rows, out, "sft")
    exercises = sum(map(is_exercise, rows))
    what = f"{len(rows) - exercises} games" + (
        f" + {exercises} word-pattern exercises" if exercises else ""
    )
    console.print(f"{what} -> {path} and {out / 'hf'} ({time.perf_counter() - t0:.1f} s)")


@app.command("rl")
def data_rl(
    splits: SplitsOpt = Path("data/splits.json"),
    rows: Annotated[int, typer.Option(help=_rl("rows"))] = _RL.rows,
    seed: Annotated[int, typer.Option(help=_rl("seed"))] = _RL.seed,
    split: Annotated[str, typer.Option(help=_rl("split"))] = _RL.split,
    depth_mix: Annotated[
        str, typer.Option(help=_rl("depth_mix") + " As depth:weight,...")
    ] = _DEPTH_MIX,
    random_moves: Annotated[
        float, typer.Option(help=_rl("random_move_share"))
    ] = _RL.random_move_share,
    wide_share: Annotated[float, typer.Option(help=_rl("wide_share"))] = _RL.wide_share,
    style: StyleOpt = DEFAULT_STYLE,
    think: ThinkOpt = _RL.think,
    out: Annotated[Path, typer.Option(help="Output folder (rl.jsonl + hf/).")] = Path("data/rl"),
) -> None:
    """RL prompt rows {answer, history, prompt} with a configurable history-depth mix."""
    from wordle_rl.data import save_dataset
    from wordle_rl.rl_rows import RlConfig, generate_rl, parse_depth_mix
    from wordle_rl.splits import Splits

    sp = _data_call(Splits.load, splits)
    mix = _data_call(parse_depth_mix, depth_mix)
    cfg = RlConfig(
        rows=rows,
        seed=seed,
        split=split,
        depth_mix=mix,
        random_move_share=random_moves,
        wide_share=wide_share,
        style=style,
        think=think,
    )
    data = _data_call(generate_rl, sp, cfg)
    path = save_dataset(data, out, "rl")
    console.print(f"{len(data)} prompts -> {path} and {out / 'hf'}")


def _load_rows(path: Path) -> list[dict]:
    from wordle_rl.data import read_jsonl

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
            "list (SFT games made with --wide-share)."
        ),
    ] = False,
    protocol: Annotated[
        str, typer.Option(help="strict also refuses a game that ends on a val or test word.")
    ] = "open",
) -> None:
    """Fail loudly if any row targets an answer outside the allowed split (leakage), or is
    malformed."""
    from wordle_rl.data import is_exercise, validate_rows
    from wordle_rl.splits import Splits, check_leakage

    sp = _data_call(Splits.load, splits)
    rows = _load_rows(dataset)
    _data_call(validate_rows, rows, str(dataset), allow_outside=allow_outside)
    n = _data_call(check_leakage, rows, sp, str(dataset), split, allow_outside, protocol)
    extra = " or outside the answer list" if allow_outside else ""
    exercises = sum(map(is_exercise, rows))
    free = f" ({exercises} word-pattern exercises, no target)" if exercises else ""
    console.print(f"[green]ok[/]: {n} rows{free}, every target in the {split} split{extra}")


@app.command("stats")
def data_stats(
    dataset: Annotated[Path, typer.Argument(help="JSONL file or datasets folder.")],
    splits: Annotated[Path | None, typer.Option(help="Splits file, for split membership.")] = None,
) -> None:
    """Counts, turn distribution, history-depth mix and split membership."""
    from wordle_rl.data import stats
    from wordle_rl.splits import Splits

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
    from wordle_rl.splits import Splits
    from wordle_rl.teacher import TeacherConfig, play_teacher_games, summarize_teacher

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
    from wordle_rl.data import read_jsonl

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
    from wordle_rl.data import read_jsonl, save_dataset
    from wordle_rl.splits import Splits, check_leakage
    from wordle_rl.teacher import teacher_to_sft

    rows = teacher_to_sft(_data_call(read_jsonl, games), won_only, format_clean, max_turns)
    if not rows:
        raise fail("no teacher game passed the filters")
    _data_call(check_leakage, rows, _data_call(Splits.load, splits), str(games))
    path = save_dataset(rows, out, "sft")
    console.print(f"{len(rows)} games -> {path}")
