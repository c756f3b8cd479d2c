"""``wordle-rl rewards explain``: every reward component of a game, turn by turn.

wordle-rl rewards explain --answer crane --guesses slate,crane
wordle-rl rewards explain --transcript games.jsonl
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from wordle_rl.cli.common import (
    StyleOpt,
    ThinkOpt,
    console,
    fail,
)
from wordle_rl.cli.common import data_call as _data_call
from wordle_rl.environment.prompts import DEFAULT_STYLE

app = typer.Typer(no_args_is_help=True, help="Inspect reward functions.")


def _read_transcript(path: Path) -> list[dict]:
    from wordle_rl.data.files import read_jsonl

    games = []
    for row in _data_call(read_jsonl, path):
        turns = row.get("completions") or row.get("turns") or row.get("guesses")
        if not isinstance(row.get("answer"), str) or not isinstance(turns, list):
            raise fail(
                f'{path}:{row["_line"]}: expected {{"answer": str, "completions": [str, ...]}}'
            )
        games.append({"answer": row["answer"], "turns": [str(t) for t in turns]})
    return games


@app.command("explain")
def rewards_explain(
    answer: Annotated[
        str | None, typer.Option(help="The answer of a game typed on the command line.")
    ] = None,
    guesses: Annotated[
        str | None, typer.Option(help="Comma-separated guesses or raw completions.")
    ] = None,
    transcript: Annotated[
        Path | None, typer.Option(help="JSONL: {answer, completions} per game.")
    ] = None,
    style: StyleOpt = DEFAULT_STYLE,
    think: ThinkOpt = False,
    hard: Annotated[bool, typer.Option(help="Hard mode.")] = False,
    preset: Annotated[str, typer.Option(help="Reward weights preset.")] = "default",
    invalid_policy: Annotated[str, typer.Option(help="lose_turn | retry_once")] = "lose_turn",
    max_turns: Annotated[int, typer.Option(help="Guesses allowed.")] = 6,
) -> None:
    """Replay games and print every turn's reward components, to debug rewards before training.

    A plain word in --guesses is wrapped in the style's answer format; anything else is played
    verbatim.
    """
    from wordle_rl.environment.env import EnvConfig, WordleEnv
    from wordle_rl.environment.prompts import PromptStyle, format_answer
    from wordle_rl.environment.rewards import COMPONENTS

    if transcript is not None:
        games = _read_transcript(transcript)
    elif answer and guesses:
        games = [{"answer": answer, "turns": [g.strip() for g in guesses.split(",") if g.strip()]}]
    else:
        raise fail("give --transcript FILE, or --answer WORD with --guesses 'g1,g2,...'")
    try:
        st = PromptStyle(style, think=think, max_turns=max_turns)
        env = WordleEnv(
            EnvConfig(
                style=st,
                hard=hard,
                reward_weights=preset,
                invalid_policy=invalid_policy,
                max_turns=max_turns,
            )
        )
    except ValueError as e:
        raise fail(str(e)) from e
    for game in games:
        try:
            env.reset(answer=game["answer"])
        except ValueError as e:
            raise fail(str(e)) from e
        rows: dict[str, list[str]] = {
            k: [] for k in ("completion", "guess", "feedback", "error", *COMPONENTS, "reward")
        }
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
            console.print(
                f"{'won' if info['won'] else 'lost'} in {info['turns']} turns; episode reward "
                f"{info['episode_reward']:.3f}, the weighted sum of the last turn's win and the "
                f"per-turn "
                "means: " + ", ".join(f"{c} {ep[c]:.3f}" for c in COMPONENTS)
            )
