"""The ``wordle-rl`` command line (typer + rich).

    wordle-rl play [--hard] [--seed N] [--answer WORD]      # play in the terminal
    wordle-rl solve --answer crane --solver search          # watch a solver play one game
    wordle-rl solve --all --solver entropy [--hard] [--out results.json]

    wordle-rl pipeline [--config quick]                     # the main job
    wordle-rl serve --port 8000                             # the environment over OpenEnv

``play`` and ``solve`` take ``--answers FILE [--allowed FILE]`` to use your own word lists. The
other commands live by group: ``cli.data`` (``data ...``), ``cli.train`` (``init-model``, ``sft``,
``grpo``), ``cli.eval`` (``eval``, ``compare``, ``probe``, ``plot``, ``watch``) and ``cli.rewards``
(``rewards explain``).
"""

from __future__ import annotations

import json
import random
import statistics
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Annotated

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from wordle_rl.cli import data as cli_data
from wordle_rl.cli import eval as cli_eval
from wordle_rl.cli import rewards as cli_rewards
from wordle_rl.cli import train as cli_train
from wordle_rl.cli.common import (
    AllowedOpt,
    AnswersOpt,
    StyleOpt,
    ThinkOpt,
    console,
    err_console,
    fail,
    keyboard,
    one_line_errors,
    tiles,
    words_from,
)
from wordle_rl.engine.game import Game, InvalidGuess
from wordle_rl.environment.prompts import DEFAULT_STYLE
from wordle_rl.pipeline.config import PRESETS

app = typer.Typer(
    add_completion=False, no_args_is_help=True, help="Train language models to play Wordle with RL."
)
app.add_typer(
    cli_data.app, name="data", no_args_is_help=True, help="Generate and check training data."
)
app.add_typer(
    cli_rewards.app, name="rewards", no_args_is_help=True, help="Inspect reward functions."
)
app.add_typer(cli_train.app)
app.add_typer(cli_eval.app)


@app.command()
def play(
    hard: Annotated[
        bool, typer.Option(help="Hard mode: greens stay in place, revealed letters are reused.")
    ] = False,
    seed: Annotated[
        int | None, typer.Option(help="Seed that picks the answer (random if unset).")
    ] = None,
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
    console.print(
        f"Guess the {wl.length}-letter word in {max_turns} tries{' (hard mode)' if hard else ''}."
    )
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
    from wordle_rl.engine.game import play_game

    rec = play_game(solver, answer, max_turns=max_turns, rng=rng)
    return {
        "answer": answer,
        "guesses": rec.guesses,
        "patterns": rec.patterns,
        "won": rec.won,
        "turns": rec.turns,
    }


def summarize(games: list[dict], max_turns: int) -> dict:
    wins = [g for g in games if g["won"]]
    hist = Counter(g["turns"] for g in wins)
    return {
        "n_games": len(games),
        "wins": len(wins),
        "win_rate": len(wins) / len(games) if games else 0.0,
        "mean_guesses": statistics.fmean(g["turns"] for g in wins) if wins else None,
        "worst_case": max((g["turns"] for g in wins), default=None),
        "histogram": {str(k): hist.get(k, 0) for k in range(1, max_turns + 1)}
        | {"X": len(games) - len(wins)},
        "losses": [g["answer"] for g in games if not g["won"]],
    }


@app.command()
def solve(
    answer: Annotated[str | None, typer.Option(help="Show the solver playing this answer.")] = None,
    all_answers: Annotated[
        bool, typer.Option("--all", help="Play every answer and report statistics.")
    ] = False,
    solver: Annotated[str, typer.Option(help="random | entropy | search | candidate")] = "entropy",
    hard: Annotated[bool, typer.Option(help="Hard mode.")] = False,
    seed: Annotated[int, typer.Option(help="Seed for the random solver.")] = 0,
    max_turns: Annotated[int, typer.Option(help="Guesses allowed.")] = 6,
    limit: Annotated[int | None, typer.Option(help="With --all: only the first N answers.")] = None,
    out: Annotated[
        Path | None, typer.Option(help="With --all: write the results as JSON here.")
    ] = None,
    answers: AnswersOpt = None,
    allowed: AllowedOpt = None,
) -> None:
    """Let a solver play one answer (``--answer``) or all of them (``--all``)."""
    from wordle_rl.engine.solvers import make_solver

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
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=err_console, transient=True) as bar:
        task = bar.add_task(f"{solver}{' hard' if hard else ''}", total=len(targets))
        for a in targets:
            games.append(_solve_one(policy, a, max_turns, rng))
            bar.advance(task)
    wall = time.perf_counter() - t0
    res = summarize(games, max_turns) | {
        "solver": solver,
        "hard": hard,
        "seed": seed,
        "wall_s": round(wall, 2),
        "word_lists": wl.name,
    }
    table = Table(title=f"{solver} solver{' (hard mode)' if hard else ''} on {len(games)} answers")
    table.add_column("metric")
    table.add_column("value", justify="right")
    table.add_row("win rate", f"{res['win_rate']:.2%}")
    table.add_row(
        "mean guesses (wins)", f"{res['mean_guesses']:.4f}" if res["mean_guesses"] else "-"
    )
    table.add_row("worst case", str(res["worst_case"]))
    table.add_row("histogram", "  ".join(f"{k}:{v}" for k, v in res["histogram"].items()))
    table.add_row("wall time", f"{wall:.1f} s")
    console.print(table)
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(res | {"games": games}, indent=1))
        console.print(f"wrote {out}")


@app.command()
def pipeline(
    config: Annotated[
        str, typer.Option(help=f"Preset ({', '.join(PRESETS)}) or a TOML/YAML file.")
    ] = "cpu-default",
    out: Annotated[
        Path | None, typer.Option(help="Run folder (default runs/<config name>).")
    ] = None,
    until: Annotated[
        str, typer.Option(help="Stop after this stage; the same command without it goes on.")
    ] = "report",
) -> None:
    """Everything in order: words, solver baselines, data, model, SFT, GRPO, control, select,
    evaluation, report. Finished stages are skipped on a rerun; a killed training stage resumes
    from its last checkpoint."""
    from wordle_rl.data.files import DataError
    from wordle_rl.pipeline.config import ConfigError, load_config
    from wordle_rl.pipeline.runner import run_pipeline

    try:
        cfg = load_config(config)
    except ConfigError as e:
        raise fail(str(e)) from e
    out = out or Path("runs") / cfg.name
    again = "run the same command again (finished stages are kept, training resumes)"
    with one_line_errors((ConfigError, DataError, FileNotFoundError), out, again):
        report = run_pipeline(cfg, out, console, until)
    console.print(f"[bold green]done[/]: {report}" + ("" if until == "report" else f" ({until})"))


@app.command()
def serve(
    host: Annotated[str, typer.Option(help="Interface to bind.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port.")] = 8000,
    max_sessions: Annotated[int, typer.Option(help="Concurrent sessions before 'busy'.")] = 512,
    idle_timeout: Annotated[
        float, typer.Option(help="Seconds before an idle session closes.")
    ] = 300.0,
    max_message_bytes: Annotated[
        int, typer.Option(help="Larger messages get an error reply.")
    ] = 65536,
    allow_answer: Annotated[
        bool, typer.Option("--allow-answer/--blind", help="Let clients choose the answer at reset.")
    ] = True,
    style: StyleOpt = DEFAULT_STYLE,
    think: ThinkOpt = True,
    hard: Annotated[bool, typer.Option(help="Hard mode.")] = False,
    preset: Annotated[str, typer.Option(help="Reward weights preset.")] = "default",
) -> None:
    """Serve the environment over OpenEnv's WebSocket protocol (``/ws``, ``/health``)."""
    from wordle_rl.environment.env import EnvConfig
    from wordle_rl.environment.prompts import PromptStyle
    from wordle_rl.environment.server import ServerConfig
    from wordle_rl.environment.server import serve as run_server

    try:
        cfg = ServerConfig(
            host=host,
            port=port,
            max_sessions=max_sessions,
            idle_timeout_s=idle_timeout,
            max_message_bytes=max_message_bytes,
            allow_answer=allow_answer,
            env=EnvConfig(style=PromptStyle(style, think=think), hard=hard, reward_weights=preset),
        )
    except ValueError as e:
        raise fail(str(e)) from e
    console.print(
        f"wordle-rl environment server on http://{host}:{port} (WebSocket /ws, health /health)"
    )
    run_server(cfg)


def main() -> None:  # pragma: no cover - console script entry
    app(prog_name="wordle-rl")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
