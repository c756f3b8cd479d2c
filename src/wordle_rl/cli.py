"""The ``wordle-rl`` command line (typer + rich).

    wordle-rl play [--hard] [--seed N] [--answer WORD]      # play in the terminal
    wordle-rl solve --answer crane --solver search          # watch a solver play one game
    wordle-rl solve --all --solver entropy [--hard] [--out results.json]

Every command takes ``--answers FILE [--allowed FILE]`` to use your own word lists.
"""

from __future__ import annotations

import dataclasses
import json
import random
import statistics
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from wordle_rl.game import GREEN, YELLOW, Game, InvalidGuess, pattern_to_tiles
from wordle_rl.prompts import DEFAULT_STYLE, STYLES
from wordle_rl.words import WordList, WordListError, load_word_lists

app = typer.Typer(add_completion=False, no_args_is_help=True, help="Train language models to play Wordle with RL.")
console = Console()
err_console = Console(stderr=True, soft_wrap=True)

AnswersOpt = Annotated[Path | None, typer.Option("--answers", help="File of possible answers, one per line.")]
AllowedOpt = Annotated[Path | None, typer.Option("--allowed", help="File of allowed guesses (answers included).")]

_STYLE = {GREEN: "bold white on green4", YELLOW: "bold black on yellow3", 0: "bold white on grey35"}
_KEY_STYLE = {-1: "bold black on grey82", 0: "grey50 on grey15"}  # unused letters, letters known absent


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
            t.append(f" {c.upper()} ", style=_KEY_STYLE.get(best.get(c, -1), _STYLE.get(best.get(c))))
        t.append("\n")
    return t


@app.command()
def play(
    hard: Annotated[bool, typer.Option(help="Hard mode: greens stay in place, revealed letters are reused.")] = False,
    seed: Annotated[int | None, typer.Option(help="Seed that picks the answer (random if unset).")] = None,
    answer: Annotated[str | None, typer.Option(help="Play against this answer.")] = None,
    max_turns: Annotated[int, typer.Option(help="Guesses allowed.")] = 6,
    answers: AnswersOpt = None,
    allowed: AllowedOpt = None,
) -> None:
    """Play Wordle in the terminal. Invalid words are refused and cost no turn."""
    wl = words_from(answers, allowed)
    rng = random.Random(seed)
    secret = answer.lower() if answer else wl.answers[rng.randrange(len(wl.answers))]
    try:
        game = Game(secret, words=wl, max_turns=max_turns, hard=hard)
    except ValueError as e:
        raise fail(str(e)) from e
    console.print(f"Guess the {wl.length}-letter word in {max_turns} tries{' (hard mode)' if hard else ''}.")
    while not game.over:
        try:
            raw = console.input(f"[bold]Guess {game.turns_used + 1}/{max_turns}:[/] ")
        except EOFError:
            console.print(f"\nGave up. The word was [bold]{game.answer.upper()}[/].")
            raise typer.Exit(1) from None
        try:
            game.guess(raw)
        except InvalidGuess as e:
            console.print(f"[red]{e}[/] (no turn used)")
            continue
        console.print()
        for g, p in game.history:
            console.print(tiles(g, p))
        console.print(keyboard(game.history))
    if game.won:
        console.print(f"[bold green]Solved in {game.turns_used}![/]")
    else:
        console.print(f"[bold red]Out of guesses.[/] The word was [bold]{game.answer.upper()}[/].")


def _solve_one(solver, answer: str, max_turns: int, rng: random.Random) -> dict:
    from wordle_rl.solvers import play_game

    rec = play_game(solver, answer, max_turns=max_turns, rng=rng)
    return {"answer": answer, "guesses": rec.guesses, "patterns": rec.patterns, "won": rec.won, "turns": rec.turns}


def summarize(games: list[dict], max_turns: int) -> dict:
    wins = [g for g in games if g["won"]]
    hist = Counter(g["turns"] for g in wins)
    return {
        "n_games": len(games),
        "wins": len(wins),
        "win_rate": len(wins) / len(games) if games else 0.0,
        "mean_guesses": statistics.fmean(g["turns"] for g in wins) if wins else None,
        "worst_case": max((g["turns"] for g in wins), default=None),
        "histogram": {str(k): hist.get(k, 0) for k in range(1, max_turns + 1)} | {"X": len(games) - len(wins)},
        "losses": [g["answer"] for g in games if not g["won"]],
    }


@app.command()
def solve(
    answer: Annotated[str | None, typer.Option(help="Show the solver playing this answer.")] = None,
    all_answers: Annotated[bool, typer.Option("--all", help="Play every answer and report statistics.")] = False,
    solver: Annotated[str, typer.Option(help="random | entropy | search | candidate")] = "entropy",
    hard: Annotated[bool, typer.Option(help="Hard mode.")] = False,
    seed: Annotated[int, typer.Option(help="Seed for the random solver.")] = 0,
    max_turns: Annotated[int, typer.Option(help="Guesses allowed.")] = 6,
    limit: Annotated[int | None, typer.Option(help="With --all: only the first N answers.")] = None,
    out: Annotated[Path | None, typer.Option(help="With --all: write the results as JSON here.")] = None,
    answers: AnswersOpt = None,
    allowed: AllowedOpt = None,
) -> None:
    """Let a solver play one answer (``--answer``) or all of them (``--all``)."""
    from wordle_rl.solvers import make_solver

    if (answer is None) == (not all_answers):
        raise fail("give exactly one of --answer WORD or --all")
    wl = words_from(answers, allowed)
    try:
        policy = make_solver(solver, wl, hard=hard, seed=seed)
    except ValueError as e:
        raise fail(str(e)) from e
    rng = random.Random(seed)
    if answer is not None:
        a = answer.strip().lower()
        if not wl.is_answer(a):
            raise fail(f"{a!r} is not in the answer list")
        g = _solve_one(policy, a, max_turns, rng)
        for w, p in zip(g["guesses"], g["patterns"]):
            console.print(tiles(w, p))
        verdict = "Solved" if g["won"] else "Failed"
        console.print(f"{verdict} in {g['turns']} guesses ({solver}{', hard' if hard else ''}).")
        return
    targets = list(wl.answers[:limit] if limit else wl.answers)
    t0 = time.perf_counter()
    games = []
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=err_console, transient=True) as bar:
        task = bar.add_task(f"{solver}{' hard' if hard else ''}", total=len(targets))
        for a in targets:
            games.append(_solve_one(policy, a, max_turns, rng))
            bar.advance(task)
    wall = time.perf_counter() - t0
    res = summarize(games, max_turns) | {"solver": solver, "hard": hard, "seed": seed, "wall_s": round(wall, 2),
                                          "word_lists": wl.name}
    table = Table(title=f"{solver} solver{' (hard mode)' if hard else ''} on {len(games)} answers")
    table.add_column("metric")
    table.add_column("value", justify="right")
    table.add_row("win rate", f"{res['win_rate']:.2%}")
    table.add_row("mean guesses (wins)", f"{res['mean_guesses']:.4f}" if res["mean_guesses"] else "-")
    table.add_row("worst case", str(res["worst_case"]))
    table.add_row("histogram", "  ".join(f"{k}:{v}" for k, v in res["histogram"].items()))
    table.add_row("wall time", f"{wall:.1f} s")
    console.print(table)
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(res | {"games": games}, indent=1))
        console.print(f"wrote {out}")


rewards_app = typer.Typer(no_args_is_help=True, help="Inspect reward functions.")
app.add_typer(rewards_app, name="rewards")

StyleOpt = Annotated[str, typer.Option(help=f"Prompt style: {' | '.join(STYLES)}.")]
ThinkOpt = Annotated[bool, typer.Option("--think/--no-think", help="xml/tiles/plain: expect a <think> block.")]


def _read_transcript(path: Path) -> list[dict]:
    from wordle_rl.data import read_jsonl

    games = []
    for row in _data_call(read_jsonl, path):
        turns = row.get("completions") or row.get("turns") or row.get("guesses")
        if not isinstance(row.get("answer"), str) or not isinstance(turns, list):
            raise fail(f"{path}:{row['_line']}: expected {{\"answer\": str, \"completions\": [str, ...]}}")
        games.append({"answer": row["answer"], "turns": [str(t) for t in turns]})
    return games


@rewards_app.command("explain")
def rewards_explain(
    answer: Annotated[str | None, typer.Option(help="The answer of a game typed on the command line.")] = None,
    guesses: Annotated[str | None, typer.Option(help="Comma-separated guesses or raw completions.")] = None,
    transcript: Annotated[Path | None, typer.Option(help="JSONL: {answer, completions} per game.")] = None,
    style: StyleOpt = DEFAULT_STYLE,
    think: ThinkOpt = False,
    hard: Annotated[bool, typer.Option(help="Hard mode.")] = False,
    preset: Annotated[str, typer.Option(help="Reward weights preset.")] = "default",
    invalid_policy: Annotated[str, typer.Option(help="lose_turn | retry_once")] = "lose_turn",
    max_turns: Annotated[int, typer.Option(help="Guesses allowed.")] = 6,
) -> None:
    """Replay games and print every turn's reward components, to debug rewards before training.

    A plain word in --guesses is wrapped in the style's answer format; anything else is played verbatim.
    """
    from wordle_rl.env import EnvConfig, WordleEnv
    from wordle_rl.prompts import PromptStyle, format_answer
    from wordle_rl.rewards import COMPONENTS

    if transcript is not None:
        games = _read_transcript(transcript)
    elif answer and guesses:
        games = [{"answer": answer, "turns": [g.strip() for g in guesses.split(",") if g.strip()]}]
    else:
        raise fail("give --transcript FILE, or --answer WORD with --guesses 'g1,g2,...'")
    try:
        st = PromptStyle(style, think=think, max_turns=max_turns)
        env = WordleEnv(EnvConfig(style=st, hard=hard, reward_weights=preset, invalid_policy=invalid_policy,
                                  max_turns=max_turns))
    except ValueError as e:
        raise fail(str(e)) from e
    for game in games:
        try:
            env.reset(answer=game["answer"])
        except ValueError as e:
            raise fail(str(e)) from e
        rows: dict[str, list[str]] = {k: [] for k in ("completion", "guess", "feedback", "error", *COMPONENTS,
                                                         "reward")}
        info: dict = {}
        for text in game["turns"]:
            if env.done:
                console.print("[yellow]game over; remaining turns ignored[/]")
                break
            played = format_answer(st, text.lower()) if text.isalpha() else text
            res = env.step(played)
            info = res.info
            rows["completion"].append(played if len(played) <= 24 else played[:21] + "...")
            rows["guess"].append(info["guess"] or "-")
            rows["feedback"].append(info["pattern"] or "-")
            rows["error"].append(info["error"] or "")
            for c in COMPONENTS:
                rows[c].append(f"{info['components'][c]:.3f}")
            rows["reward"].append(f"{res.reward:.3f}")
        table = Table(title=f"answer {game['answer'].upper()}  (style {style}, preset {preset})")
        table.add_column("turn")
        for i in range(len(rows["guess"])):
            table.add_column(str(i + 1), justify="right")
        for name, vals in rows.items():
            table.add_row(name, *vals)
        console.print(table)
        if "episode_reward" in info:
            ep = info["episode_components"]
            console.print(f"{'won' if info['won'] else 'lost'} in {info['turns']} turns; episode reward "
                          f"{info['episode_reward']:.3f}, the weighted sum of the last turn's win and the per-turn "
                          "means: " + ", ".join(f"{c} {ep[c]:.3f}" for c in COMPONENTS))


data_app = typer.Typer(no_args_is_help=True, help="Generate and check training data.")
app.add_typer(data_app, name="data")
SplitsOpt = Annotated[Path, typer.Option("--splits", help="Splits file from `wordle-rl data split`.")]


def _data_call(fn, *args, **kw):
    from wordle_rl.data import DataError

    try:
        return fn(*args, **kw)
    except (DataError, WordListError) as e:
        raise fail(str(e)) from e


@data_app.command("split")
def data_split(
    seed: Annotated[int, typer.Option(help="Shuffle seed.")] = 0,
    fractions: Annotated[str, typer.Option(help="train,val,test fractions.")] = "0.8,0.1,0.1",
    rl_share: Annotated[float, typer.Option(help="Share of the train answers held back from SFT games as the rl "
                                                 "split: RL targets only (`data rl --split rl`).")] = 0.0,
    out: Annotated[Path, typer.Option(help="Where to write the splits JSON.")] = Path("data/splits.json"),
) -> None:
    """Divide the answers into train / val / test (and rl, with --rl-share), deterministically."""
    from wordle_rl.data import make_splits

    try:
        fr = tuple(float(x) for x in fractions.split(","))
    except ValueError as e:
        raise fail(f"--fractions must be three numbers like 0.8,0.1,0.1, got {fractions!r}") from e
    splits = _data_call(make_splits, load_word_lists(), seed, fr, rl_share)
    splits.save(out)
    rl = f" / rl {len(splits.rl)}" if splits.rl else ""
    console.print(f"train {len(splits.train)}{rl} / val {len(splits.val)} / test {len(splits.test)} -> {out}")


@data_app.command("sft")
def data_sft(
    splits: SplitsOpt = Path("data/splits.json"),
    games: Annotated[int, typer.Option(help="Number of solver games.")] = 20000,
    seed: Annotated[int, typer.Option(help="Seed.")] = 0,
    style: StyleOpt = DEFAULT_STYLE,
    think: ThinkOpt = True,
    solvers: Annotated[str, typer.Option(help="Solver mix, e.g. entropy:0.75,search:0.25 or candidate:0.8,random:0.2"
                                         )] = "candidate:0.8,random:0.2",
    balance_share: Annotated[float, typer.Option(help="Share of games that write the least-written remaining "
                                                      "answer words (evens out word exposure).")] = 0.0,
    wide_share: Annotated[float, typer.Option(help="Share of games whose target is an allowed word outside the "
                                                   "answer list (never a val/test answer), every allowed word a "
                                                   "possible answer.")] = 0.0,
    wide_answers_first: Annotated[bool, typer.Option(help="Wide games guess fitting answer words (the solver mix) "
                                                          "while any fits; then every allowed word.")] = False,
    refused_share: Annotated[float, typer.Option(help="Share of games showing one refused move and the reply."
                                                      )] = 0.15,
    refused_kinds: Annotated[str, typer.Option(help="Refused moves shown, kind:weight of misspelt, blend (a "
                                                    "non-word spliced from fitting words), repeat.")] = "misspelt:1",
    recall_share: Annotated[float, typer.Option(help="Share of games that are recall games: on an allowed word "
                                                     "outside the answer list next to an answer word, cut where the "
                                                     "solver writes that word as the only fit.")] = 0.0,
    lexicon_share: Annotated[float, typer.Option(help="Word-pattern exercises added, as a share of the games: any "
                                                      "answer word with 2-4 letters in place (no game, no target)."
                                                 )] = 0.0,
    protocol: Annotated[str, typer.Option(help="open: recall games recall every answer word; strict: only train "
                                               "answers, and no game ends on a val or test word.")] = "open",
    out: Annotated[Path, typer.Option(help="Output folder (sft.jsonl + hf/).")] = Path("data/sft"),
) -> None:
    """Solver games on train answers (and, with --wide-share or --recall-share, on allowed words outside the answer
    list) as TRL conversational `messages` rows (JSONL + datasets), and optionally word-pattern exercises."""
    from wordle_rl.data import (
        SftConfig,
        Splits,
        generate_sft,
        is_exercise,
        parse_refused_kinds,
        parse_solver_mix,
        save_dataset,
    )

    sp = _data_call(Splits.load, splits)
    mix = _data_call(parse_solver_mix, solvers)
    kinds = _data_call(parse_refused_kinds, refused_kinds)
    t0 = time.perf_counter()
    with console.status(f"playing {games} solver games"):
        rows = _data_call(generate_sft, sp, SftConfig(games=games, seed=seed, style=style, think=think,
                                                      solver_mix=mix, balance_share=balance_share,
                                                      wide_share=wide_share,
                                                      wide_answers_first=wide_answers_first,
                                                      refused_share=refused_share, refused_kinds=kinds,
                                                      recall_share=recall_share, protocol=protocol,
                                                      lexicon_share=lexicon_share))
    path = save_dataset(rows, out, "sft")
    exercises = sum(map(is_exercise, rows))
    what = f"{len(rows) - exercises} games" + (f" + {exercises} word-pattern exercises" if exercises else "")
    console.print(f"{what} -> {path} and {out / 'hf'} ({time.perf_counter() - t0:.1f} s)")


@data_app.command("rl")
def data_rl(
    splits: SplitsOpt = Path("data/splits.json"),
    rows: Annotated[int, typer.Option(help="Number of prompt rows.")] = 4000,
    seed: Annotated[int, typer.Option(help="Seed.")] = 0,
    split: Annotated[str, typer.Option(help="Split whose answers are targets: train, or rl (held back from SFT).")] =
    "train",
    depth_mix: Annotated[str, typer.Option(help="History depth weights, e.g. 0:0.4,1:0.3,2:0.2,3:0.1")] =
    "0:0.4,1:0.3,2:0.2,3:0.1",
    random_moves: Annotated[float, typer.Option(help="Share of random candidate moves in histories.")] = 0.0,
    wide_share: Annotated[float, typer.Option(help="Share of rows whose target is an allowed word outside the "
                                                   "answer list (never a val/test answer).")] = 0.0,
    style: StyleOpt = DEFAULT_STYLE,
    think: ThinkOpt = True,
    out: Annotated[Path, typer.Option(help="Output folder (rl.jsonl + hf/).")] = Path("data/rl"),
) -> None:
    """RL prompt rows {answer, history, prompt} with a configurable history-depth mix."""
    from wordle_rl.data import RlConfig, Splits, generate_rl, parse_depth_mix, save_dataset

    sp = _data_call(Splits.load, splits)
    mix = _data_call(parse_depth_mix, depth_mix)
    cfg = RlConfig(rows=rows, seed=seed, split=split, depth_mix=mix, random_move_share=random_moves,
                   wide_share=wide_share, style=style, think=think)
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


@data_app.command("check")
def data_check(
    dataset: Annotated[Path, typer.Argument(help="JSONL file or datasets folder.")],
    splits: SplitsOpt = Path("data/splits.json"),
    split: Annotated[str, typer.Option(help="The only split allowed as a target.")] = "train",
    allow_outside: Annotated[bool, typer.Option(help="Also accept targets that are allowed words outside the answer "
                                                     "list (SFT games made with --wide-share).")] = False,
    protocol: Annotated[str, typer.Option(help="strict also refuses a game that ends on a val or test word.")] =
    "open",
) -> None:
    """Fail loudly if any row targets an answer outside the allowed split (leakage), or is malformed."""
    from wordle_rl.data import Splits, check_leakage, is_exercise, validate_rows

    sp = _data_call(Splits.load, splits)
    rows = _load_rows(dataset)
    _data_call(validate_rows, rows, str(dataset), allow_outside=allow_outside)
    n = _data_call(check_leakage, rows, sp, str(dataset), split, allow_outside, protocol)
    extra = " or outside the answer list" if allow_outside else ""
    exercises = sum(map(is_exercise, rows))
    free = f" ({exercises} word-pattern exercises, no target)" if exercises else ""
    console.print(f"[green]ok[/]: {n} rows{free}, every target in the {split} split{extra}")


@data_app.command("stats")
def data_stats(
    dataset: Annotated[Path, typer.Argument(help="JSONL file or datasets folder.")],
    splits: Annotated[Path | None, typer.Option(help="Splits file, for split membership.")] = None,
) -> None:
    """Counts, turn distribution, history-depth mix and split membership."""
    from wordle_rl.data import Splits, stats

    sp = _data_call(Splits.load, splits) if splits else None
    console.print_json(json.dumps(stats(_load_rows(dataset), sp)))


@data_app.command("teacher")
def data_teacher(
    base_url: Annotated[str, typer.Option(help="OpenAI-compatible base URL (…/v1).")],
    model: Annotated[str, typer.Option(help="Model name.")],
    splits: SplitsOpt = Path("data/splits.json"),
    out: Annotated[Path, typer.Option(help="JSONL of games (appended, resumable).")] = Path("data/teacher/games.jsonl"),
    games_per_word: Annotated[int, typer.Option(help="Games per train answer.")] = 1,
    limit: Annotated[int | None, typer.Option(help="Only the first N train answers.")] = None,
    api_key_env: Annotated[str, typer.Option(help="Environment variable holding the API key.")] = "OPENAI_API_KEY",
    concurrency: Annotated[int, typer.Option(help="Games at once.")] = 8,
    timeout: Annotated[float, typer.Option(help="Seconds per request.")] = 60.0,
    retries: Annotated[int, typer.Option(help="Retries per request (exponential backoff).")] = 3,
    temperature: Annotated[float, typer.Option(help="Sampling temperature.")] = 0.0,
    style: StyleOpt = DEFAULT_STYLE,
    think: ThinkOpt = True,
) -> None:
    """Play train answers against a chat endpoint; every finished game is appended and flushed."""
    from wordle_rl.data import Splits
    from wordle_rl.teacher import TeacherConfig, play_teacher_games, summarize_teacher

    sp = _data_call(Splits.load, splits)
    answers = sp.train[:limit] if limit else sp.train
    cfg = TeacherConfig(base_url=base_url, model=model, api_key_env=api_key_env, concurrency=concurrency,
                        timeout_s=timeout, retries=retries, temperature=temperature, style=style, think=think)
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=err_console) as bar:
        task = bar.add_task("teacher games", total=len(answers) * games_per_word)
        counts = play_teacher_games(cfg, answers, out, games_per_word, on_game=lambda _: bar.advance(task))
    from wordle_rl.data import read_jsonl

    per = summarize_teacher(_data_call(read_jsonl, out))
    wins = sum(d["wins"] for d in per.values())
    games = sum(d["games"] for d in per.values())
    console.print(f"played {counts['played']}, skipped {counts['skipped']} already finished, "
                  f"{counts['errors']} failed (retried next run); finished games: {games}, won {wins}")
    console.print(f"per-word summary: {len(per)} words -> see {out}")


@data_app.command("teacher-sft")
def data_teacher_sft(
    games: Annotated[Path, typer.Argument(help="Teacher games JSONL.")],
    out: Annotated[Path, typer.Option(help="Output folder (sft.jsonl + hf/).")] = Path("data/teacher-sft"),
    won_only: Annotated[bool, typer.Option("--won-only/--all-games", help="Keep won games only.")] = True,
    format_clean: Annotated[bool, typer.Option("--format-clean/--any-format", help="Drop games with errors.")] = True,
    max_turns: Annotated[int | None, typer.Option(help="Keep games of at most N turns.")] = None,
    splits: SplitsOpt = Path("data/splits.json"),
) -> None:
    """Filter teacher games into SFT rows (checked for leakage)."""
    from wordle_rl.data import Splits, check_leakage, read_jsonl, save_dataset
    from wordle_rl.teacher import teacher_to_sft

    rows = teacher_to_sft(_data_call(read_jsonl, games), won_only, format_clean, max_turns)
    if not rows:
        raise fail("no teacher game passed the filters")
    _data_call(check_leakage, rows, _data_call(Splits.load, splits), str(games))
    path = save_dataset(rows, out, "sft")
    console.print(f"{len(rows)} games -> {path}")


@app.command("init-model")
def init_model_cmd(
    out: Annotated[Path, typer.Argument(help="Folder for the model and tokenizer.")],
    preset: Annotated[str, typer.Option(
        help="Size: mini (default, ≈1.4 M), tiny (≈3.5 M), small (≈11 M), micro (tests).")] = "mini",
    seed: Annotated[int, typer.Option(help="Initialisation seed.")] = 0,
    word_tokens: Annotated[str, typer.Option(
        help="none: every word spelled letter by letter; answers: one token per answer-list word as well.")] = "none",
) -> None:
    """Build the embedded default model (Qwen3 from a config, local tokenizer) with no download."""
    from wordle_rl.models import MODEL_PRESETS, WORD_TOKENS, init_model

    if preset not in MODEL_PRESETS:
        raise fail(f"unknown preset {preset!r}; choose one of {sorted(MODEL_PRESETS)}")
    if word_tokens not in WORD_TOKENS:
        raise fail(f"unknown --word-tokens {word_tokens!r}; choose one of {list(WORD_TOKENS)}")
    path = init_model(out, preset, seed, word_tokens=word_tokens)
    meta = json.loads((path / "wordle_rl.json").read_text())
    console.print(f"{preset} model ({meta['parameters'] / 1e6:.2f} M parameters) -> {path}")


_PASSTHROUGH = {"allow_extra_args": True, "ignore_unknown_options": True}


@app.command(context_settings=_PASSTHROUGH)
def sft(
    ctx: typer.Context,
    config: Annotated[Path | None, typer.Option(help="YAML/JSON file of WordleSFTConfig fields.")] = None,
    resume: Annotated[bool, typer.Option(help="Continue from the last checkpoint in --output-dir.")] = False,
) -> None:
    """Supervised fine-tuning (TRL SFTTrainer). Every WordleSFTConfig / SFTConfig field is a flag:
    --model, --data, --output-dir, --max-steps, --learning-rate, --per-device-train-batch-size, --threads,
    --time-budget-minutes, --lora, ... (see `wordle-rl sft --help-config`)."""
    from wordle_rl.sft import WordleSFTConfig, run_sft

    cfg = _parse_config(WordleSFTConfig, config, ctx.args)
    try:
        out = run_sft(cfg, resume=resume)
    except (FileNotFoundError, ValueError) as e:
        raise fail(str(e)) from e
    console.print(f"model -> {out}")


@app.command(context_settings=_PASSTHROUGH)
def grpo(
    ctx: typer.Context,
    config: Annotated[Path | None, typer.Option(help="YAML/JSON file of WordleGRPOConfig fields.")] = None,
    resume: Annotated[bool, typer.Option(help="Continue from the last checkpoint in --output-dir.")] = False,
) -> None:
    """Multi-turn GRPO against the environment (TRL GRPOTrainer + a whole-game rollout_func). Every
    WordleGRPOConfig / GRPOConfig field is a flag: --model, --data, --output-dir, --num-generations,
    --max-steps, --temperature, --reward-preset, --curriculum, --env-url, ... (`wordle-rl grpo --help-config`)."""
    import os

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    from wordle_rl.grpo import WordleGRPOConfig, run_grpo

    cfg = _parse_config(WordleGRPOConfig, config, ctx.args)
    try:
        out = run_grpo(cfg, resume=resume)
    except (FileNotFoundError, ValueError) as e:
        raise fail(str(e)) from e
    console.print(f"model -> {out}")


def _parse_config(cls, config: Path | None, args: list[str]):
    """A TRL-style config dataclass from an optional YAML/JSON file, overridden by --field value flags."""
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
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(base) - known)
        if unknown:
            raise fail(f"{config}: unknown field(s) {unknown}")
    argv = [x for k, v in base.items() for x in (f"--{k}", str(v))] + list(args)
    try:
        (cfg,) = parser.parse_args_into_dataclasses(args=argv)
    except (ValueError, SystemExit) as e:
        raise fail(f"bad config: {e}") from e
    return cfg


@app.command("eval")
def eval_cmd(
    model: Annotated[str | None, typer.Option(help="Local model path or hub id.")] = None,
    solver: Annotated[str | None, typer.Option(
        help="Evaluate a solver instead: random | entropy | search | candidate.")] = None,
    base_url: Annotated[str | None, typer.Option(help="Evaluate an OpenAI-compatible endpoint.")] = None,
    endpoint_model: Annotated[str | None, typer.Option(help="Model name at --base-url.")] = None,
    split: Annotated[str, typer.Option(help="train | rl | val | test.")] = "test",
    splits: SplitsOpt = Path("data/splits.json"),
    decode: Annotated[str, typer.Option(help="free | allowed | consistent (local models).")] = "free",
    temperature: Annotated[float, typer.Option(help="0 = greedy.")] = 0.0,
    seed: Annotated[int, typer.Option(help="Seed (sampling, train sample).")] = 0,
    batch_size: Annotated[int, typer.Option(help="Games per generate call.")] = 128,
    max_new_tokens: Annotated[int, typer.Option(help="Tokens per reply.")] = 64,
    limit: Annotated[int | None, typer.Option(help="Only the first N answers.")] = None,
    train_sample: Annotated[bool, typer.Option(help="Also play as many train answers.")] = True,
    style: StyleOpt = DEFAULT_STYLE,
    think: ThinkOpt = False,
    threads: Annotated[int, typer.Option(help="torch CPU threads.")] = 2,
    device: Annotated[str, typer.Option(help="auto | cpu | cuda.")] = "auto",
    out: Annotated[Path | None, typer.Option(help="Folder for results.json, games.jsonl, report.md.")] = None,
    train_data: Annotated[list[Path] | None, typer.Option(
        help="The model's training data (SFT and RL data folders or JSONL files; repeat the option): audit which "
             "evaluated moves replay an imitated state.")] = None,
) -> None:
    """Play every answer of a split with a model, solver or endpoint; report honest metrics."""
    from wordle_rl.data import Splits
    from wordle_rl.evaluate import EndpointPolicy, EvalConfig, ModelPolicy, SolverPolicy, run_eval
    from wordle_rl.prompts import PromptStyle

    if sum(x is not None for x in (model, solver, base_url)) != 1:
        raise fail("give exactly one of --model, --solver or --base-url")
    try:
        cfg = EvalConfig(split=split, splits=str(splits), decode=decode, temperature=temperature, seed=seed,
                         batch_size=batch_size, max_new_tokens=max_new_tokens, train_sample=train_sample,
                         limit=limit, style=style, think=think, threads=threads)
        st = PromptStyle(style, think=think)
        if model is not None:
            from wordle_rl.models import check_prompt_style

            check_prompt_style(model, st)
    except ValueError as e:
        raise fail(str(e)) from e
    sp = _data_call(Splits.load, splits)
    answers = _data_call(sp.answers, split)
    if not answers:
        raise fail(f"the {split} split of {splits} is empty")
    answers = answers[:limit] if limit else answers
    wl = load_word_lists()
    meta: dict = {}
    index = None
    if train_data:
        from wordle_rl.audit import TrainingIndex

        index = _data_call(TrainingIndex.from_paths, train_data, wl)
    if model is not None:
        from wordle_rl.models import load_model

        try:
            m, tok = load_model(model, device=device, threads=threads)
        except (FileNotFoundError, RuntimeError) as e:
            raise fail(str(e)) from e
        m.eval()
        policy = ModelPolicy(m, tok, st, wl, decode, temperature, max_new_tokens, batch_size, seed, name=model)
        meta["model"] = model
    elif solver is not None:
        from wordle_rl.solvers import make_solver

        try:
            policy = SolverPolicy(make_solver(solver, wl, seed=seed), st)
        except ValueError as e:
            raise fail(str(e)) from e
        cfg.decode = "free"
    else:
        from wordle_rl.evaluate import EndpointPolicy
        from wordle_rl.teacher import TeacherConfig

        if not endpoint_model:
            raise fail("--base-url needs --endpoint-model")
        policy = EndpointPolicy(TeacherConfig(base_url=base_url, model=endpoint_model, style=style, think=think))
    total = len(answers) * (2 if train_sample else 1)
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=err_console, transient=True) as bar:
        task = bar.add_task(f"eval {policy.name}", total=total)
        res = run_eval(policy, list(answers), cfg, out, wl, sp.train, meta, progress=lambda: bar.advance(task),
                       index=index)
    _print_results([res])
    if out:
        console.print(f"wrote {out}/results.json, games.jsonl, report.md")


def _print_results(results: list[dict], names: list[str] | None = None) -> None:
    from wordle_rl.evaluate import AUDIT_COLUMNS, SUMMARY_COLUMNS, audit_cells, summary_cells

    names = names or [str(i + 1) for i in range(len(results))]
    table = Table(title="evaluation")
    for col in ("run", "policy", "decode", "split", *SUMMARY_COLUMNS):
        table.add_column(col)
    for name, r in zip(names, results):
        table.add_row(name, r["policy"], r["decode"], r["split"], *summary_cells(r))
    console.print(table)
    audited = [(name, r) for name, r in zip(names, results) if "audit" in r]
    if audited:
        table = Table(title="training-overlap audit (endgame: the first state where the answer is the only fit)")
        for col in ("run", "answers imitated as guesses", *AUDIT_COLUMNS):
            table.add_column(col)
        for name, r in audited:
            table.add_row(name, f"{r['audit']['answers_imitated_as_guess']} of {r['metrics']['games']}",
                          *audit_cells(r))
        console.print(table)


@app.command()
def compare(
    runs: Annotated[list[Path], typer.Argument(help="Run folders (or results.json files).")],
    paired: Annotated[bool, typer.Option(help="Two run folders on the same answers: games won by only one (exact "
                                              "McNemar p) and guesses per game (Wilcoxon p), second against first."
                                         )] = False,
) -> None:
    """Side-by-side table of evaluation runs."""
    results, names = [], []
    for r in runs:
        f = r / "results.json" if r.is_dir() else r
        if not f.is_file():
            raise fail(f"{f}: no results.json")
        results.append(json.loads(f.read_text()))
        names.append(str(r))
    splits_seen = {r["split"] for r in results}
    if len(splits_seen) > 1:
        console.print(f"[yellow]warning: runs are on different splits {sorted(splits_seen)}[/]")
    _print_results(results, names)
    if paired:
        from wordle_rl.paired import paired_comparison, read_games

        if len(runs) != 2 or not all(r.is_dir() for r in runs):
            raise fail("--paired compares exactly two run folders (each with games.jsonl)")
        try:
            r = paired_comparison(read_games(runs[0]), read_games(runs[1]))
        except (FileNotFoundError, ValueError) as e:
            raise fail(str(e)) from e
        table = Table(title=f"paired: {runs[1]} against {runs[0]} on {r['games']} answers")
        for col in ("won only by first", "won only by second", "McNemar p", "mean guesses (loss = 7)",
                    "difference", "Wilcoxon p"):
            table.add_column(col)
        table.add_row(str(r["only_a"]), str(r["only_b"]), f"{r['mcnemar_p']:.3g}",
                      f"{r['mean_guesses_a']:.3f} -> {r['mean_guesses_b']:.3f}", f"{r['mean_guesses_diff']:+.3f}",
                      f"{r['wilcoxon_p']:.3g}")
        console.print(table)


@app.command()
def plot(
    runs: Annotated[list[Path], typer.Argument(help="Run folders with results.json (models and solvers).")],
    out: Annotated[Path, typer.Option(help="Folder for the PNG files.")] = Path("plots"),
) -> None:
    """Guess histograms side by side and error rates by turn, as PNGs."""
    from wordle_rl.plots import plot_eval_runs

    results = []
    for r in runs:
        f = r / "results.json" if r.is_dir() else r
        if not f.is_file():
            raise fail(f"{f}: no results.json")
        results.append((r.name if r.is_dir() else r.parent.name, json.loads(f.read_text())))
    for path in plot_eval_runs(results, out):
        console.print(f"wrote {path}")


@app.command()
def watch(
    model: Annotated[str, typer.Option(help="Local model path or hub id.")],
    answer: Annotated[str, typer.Option(help="The secret word.")],
    decode: Annotated[str, typer.Option(help="free | allowed | consistent.")] = "free",
    style: StyleOpt = DEFAULT_STYLE,
    think: ThinkOpt = False,
) -> None:
    """Watch a model play one game, with coloured tiles and its raw replies."""
    from wordle_rl.env import EnvConfig, WordleEnv
    from wordle_rl.evaluate import ModelPolicy
    from wordle_rl.models import check_prompt_style, load_model
    from wordle_rl.prompts import PromptStyle

    wl = load_word_lists()
    if not wl.is_allowed(answer.lower()):
        raise fail(f"{answer!r} is not in the word list")
    try:
        st = PromptStyle(style, think=think)
        check_prompt_style(model, st)
        m, tok = load_model(model)
    except (FileNotFoundError, RuntimeError, ValueError) as e:
        raise fail(str(e)) from e
    policy = ModelPolicy(m.eval(), tok, st, wl, decode=decode)
    env = WordleEnv(EnvConfig(style=st))
    env.reset(answer=answer.lower())
    while not env.done:
        text = policy.act([env])[0]
        res = env.step(text)
        if res.info["guess"]:
            console.print(tiles(res.info["guess"], env.played[-1][1]), f"  [dim]{escape(text)}[/]")
        else:
            console.print(f"[red]{res.info['error']}[/]: [dim]{escape(text)}[/]")
    console.print(f"{'won' if env.won else 'lost'} in {env.turns_used}; the word was {answer.upper()}")


@app.command()
def pipeline(
    config: Annotated[str, typer.Option(help="Preset (cpu-default, quick, gpu-qwen3) or a TOML/YAML file.")] =
    "cpu-default",
    out: Annotated[Path | None, typer.Option(help="Run folder (default runs/<config name>).")] = None,
) -> None:
    """Everything in order: words, solver baselines, data, model, SFT, GRPO, evaluation, report.
    Finished stages are skipped on a rerun; a killed training stage resumes from its last checkpoint."""
    from wordle_rl.pipeline import ConfigError, load_config, run_pipeline

    try:
        cfg = load_config(config)
        report = run_pipeline(cfg, out or Path("runs") / cfg.name, console)
    except ConfigError as e:
        raise fail(str(e)) from e
    console.print(f"[bold green]done[/]: {report}")


@app.command()
def serve(
    host: Annotated[str, typer.Option(help="Interface to bind.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port.")] = 8000,
    max_sessions: Annotated[int, typer.Option(help="Concurrent sessions before 'busy'.")] = 512,
    idle_timeout: Annotated[float, typer.Option(help="Seconds before an idle session closes.")] = 300.0,
    max_message_bytes: Annotated[int, typer.Option(help="Larger messages get an error reply.")] = 65536,
    allow_answer: Annotated[bool, typer.Option("--allow-answer/--blind",
                                               help="Let clients choose the answer at reset.")] = True,
    style: StyleOpt = DEFAULT_STYLE,
    think: ThinkOpt = True,
    hard: Annotated[bool, typer.Option(help="Hard mode.")] = False,
    preset: Annotated[str, typer.Option(help="Reward weights preset.")] = "default",
) -> None:
    """Serve the environment over OpenEnv's WebSocket protocol (``/ws``, ``/health``)."""
    from wordle_rl.env import EnvConfig
    from wordle_rl.prompts import PromptStyle
    from wordle_rl.server import ServerConfig
    from wordle_rl.server import serve as run_server

    try:
        cfg = ServerConfig(host=host, port=port, max_sessions=max_sessions, idle_timeout_s=idle_timeout,
                           max_message_bytes=max_message_bytes, allow_answer=allow_answer,
                           env=EnvConfig(style=PromptStyle(style, think=think), hard=hard, reward_weights=preset))
    except ValueError as e:
        raise fail(str(e)) from e
    console.print(f"wordle-rl environment server on http://{host}:{port} (WebSocket /ws, health /health)")
    run_server(cfg)


def main() -> None:  # pragma: no cover - console script entry
    app(prog_name="wordle-rl")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
