"""The ``wordle-rl`` command line (typer + rich).

    wordle-rl play [--hard] [--seed N] [--answer WORD]      # play in the terminal
    wordle-rl solve --answer crane --solver search          # watch a solver play one game
    wordle-rl solve --all --solver entropy [--hard] [--out results.json]

Every command takes ``--answers FILE [--allowed FILE]`` to use your own word lists.
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
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from wordle_rl.game import GREEN, YELLOW, Game, InvalidGuess, pattern_to_tiles
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
    solver: Annotated[str, typer.Option(help="random | entropy | search")] = "entropy",
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

StyleOpt = Annotated[str, typer.Option(help="Prompt style: xml | brackets | plain.")]
ThinkOpt = Annotated[bool, typer.Option("--think/--no-think", help="xml/plain: expect a <think> block.")]


def _read_transcript(path: Path) -> list[dict]:
    games = []
    if not path.is_file():
        raise fail(f"{path}: transcript file not found")
    for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            raise fail(f"{path}:{lineno}: not valid JSON ({e.msg})") from e
        turns = row.get("completions") or row.get("turns") or row.get("guesses") if isinstance(row, dict) else None
        if not isinstance(row, dict) or not isinstance(row.get("answer"), str) or not isinstance(turns, list):
            raise fail(f"{path}:{lineno}: expected {{\"answer\": str, \"completions\": [str, ...]}}")
        games.append({"answer": row["answer"], "turns": [str(t) for t in turns]})
    return games


@rewards_app.command("explain")
def rewards_explain(
    answer: Annotated[str | None, typer.Option(help="The answer of a game typed on the command line.")] = None,
    guesses: Annotated[str | None, typer.Option(help="Comma-separated guesses or raw completions.")] = None,
    transcript: Annotated[Path | None, typer.Option(help="JSONL: {answer, completions} per game.")] = None,
    style: StyleOpt = "xml",
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


@app.command()
def serve(
    host: Annotated[str, typer.Option(help="Interface to bind.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port.")] = 8000,
    max_sessions: Annotated[int, typer.Option(help="Concurrent sessions before 'busy'.")] = 512,
    idle_timeout: Annotated[float, typer.Option(help="Seconds before an idle session closes.")] = 300.0,
    max_message_bytes: Annotated[int, typer.Option(help="Larger messages get an error reply.")] = 65536,
    allow_answer: Annotated[bool, typer.Option("--allow-answer/--blind",
                                               help="Let clients choose the answer at reset.")] = True,
    style: StyleOpt = "xml",
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
