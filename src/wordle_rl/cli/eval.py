"""``wordle-rl eval``, ``compare``, ``probe``, ``plot`` and ``watch``.

wordle-rl eval --model runs/sft --split val --train-data data/sft --out runs/sft/eval-val
wordle-rl compare runs/sft/eval-val runs/grpo/eval-val --paired
wordle-rl watch --model runs/sft --answer crane
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from wordle_rl.cli.common import (
    PASSTHROUGH,
    ModelStyleOpt,
    ModelThinkOpt,
    console,
    err_console,
    fail,
    parse_config,
    tiles,
)
from wordle_rl.cli.common import data_call as _data_call
from wordle_rl.engine.words import load_word_lists
from wordle_rl.models.prompt_record import model_style

app = typer.Typer()


@app.command("eval", context_settings=PASSTHROUGH)
def eval_cmd(
    ctx: typer.Context,
    model: Annotated[str | None, typer.Option(help="Local model path or hub id.")] = None,
    solver: Annotated[
        str | None,
        typer.Option(help="Evaluate a solver instead: random | entropy | search | candidate."),
    ] = None,
    base_url: Annotated[
        str | None, typer.Option(help="Evaluate an OpenAI-compatible endpoint.")
    ] = None,
    endpoint_model: Annotated[str | None, typer.Option(help="Model name at --base-url.")] = None,
    config: Annotated[
        Path | None, typer.Option(help="YAML/JSON file of EvalConfig fields.")
    ] = None,
    device: Annotated[str, typer.Option(help="auto | cpu | cuda.")] = "auto",
    out: Annotated[
        Path | None, typer.Option(help="Folder for results.json, games.jsonl, report.md.")
    ] = None,
    train_data: Annotated[
        list[Path] | None,
        typer.Option(
            help="The model's training data (SFT and RL data folders or JSONL files; repeat the "
            "option): audit which evaluated moves replay an imitated state."
        ),
    ] = None,
) -> None:
    """Play every answer of a split with a model, solver or endpoint; report honest metrics. Every
    EvalConfig field is a flag: --split, --splits, --decode, --limit, --train-sample, --style,
    --think, --batch-size, --temperature, --threads, --env-url, ... (`eval --help-config`)."""
    from wordle_rl.data.splits import Splits
    from wordle_rl.environment.prompts import PromptStyle
    from wordle_rl.evaluation.evaluate import (
        EndpointPolicy,
        EvalConfig,
        ModelPolicy,
        SolverPolicy,
        run_eval,
    )

    cfg = parse_config(EvalConfig, config, ctx.args)
    if sum(x is not None for x in (model, solver, base_url)) != 1:
        raise fail("give exactly one of --model, --solver or --base-url")
    try:
        cfg.style, cfg.think = model_style(model, cfg.style, cfg.think)
        style, think = cfg.style, cfg.think
        st = PromptStyle(style, think=think)
        if model is not None:
            from wordle_rl.models.prompt_record import check_prompt_style

            check_prompt_style(model, st)
    except ValueError as e:
        raise fail(str(e)) from e
    sp = _data_call(Splits.load, cfg.splits)
    answers = _data_call(sp.answers, cfg.split)
    if not answers:
        raise fail(f"the {cfg.split} split of {cfg.splits} is empty")
    answers = answers[: cfg.limit] if cfg.limit else answers
    wl = load_word_lists()
    meta: dict = {}
    index = None
    if train_data:
        from wordle_rl.evaluation.audit import TrainingIndex

        index = _data_call(TrainingIndex.from_paths, train_data, wl)
    if model is not None:
        from wordle_rl.models.embedded import load_model

        try:
            m, tok = load_model(model, device=device, threads=cfg.threads)
        except (FileNotFoundError, RuntimeError) as e:
            raise fail(str(e)) from e
        m.eval()
        policy = ModelPolicy(
            m,
            tok,
            st,
            wl,
            cfg.decode,
            cfg.temperature,
            cfg.max_new_tokens,
            cfg.batch_size,
            cfg.seed,
            name=model,
        )
        meta["model"] = model
    elif solver is not None:
        from wordle_rl.engine.solvers import make_solver

        try:
            policy = SolverPolicy(make_solver(solver, wl, seed=cfg.seed), st)
        except ValueError as e:
            raise fail(str(e)) from e
        cfg.decode = "free"
    else:
        from wordle_rl.data.teacher import TeacherConfig
        from wordle_rl.evaluation.evaluate import EndpointPolicy

        if not endpoint_model:
            raise fail("--base-url needs --endpoint-model")
        policy = EndpointPolicy(
            TeacherConfig(base_url=base_url, model=endpoint_model, style=style, think=think)
        )
    total = len(answers) * (2 if cfg.train_sample else 1)
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=err_console, transient=True) as bar:
        task = bar.add_task(f"eval {policy.name}", total=total)
        res = run_eval(
            policy, list(answers), cfg, out, wl, sp.train, meta, lambda: bar.advance(task), index
        )
    _print_results([res])
    if out:
        console.print(f"wrote {out}/results.json, games.jsonl, report.md")


def _print_results(results: list[dict], names: list[str] | None = None) -> None:
    from wordle_rl.evaluation.tables import (
        AUDIT_COLUMNS,
        BY_ANSWER_COLUMNS,
        SUMMARY_COLUMNS,
        audit_cells,
        by_answer_cells,
        summary_cells,
    )

    names = names or [str(i + 1) for i in range(len(results))]
    table = Table(title="evaluation")
    for col in ("run", "policy", "decode", "split", *SUMMARY_COLUMNS):
        table.add_column(col)
    for name, r in zip(names, results):
        table.add_row(name, r["policy"], r["decode"], r["split"], *summary_cells(r))
    console.print(table)
    audited = [(name, r) for name, r in zip(names, results) if "audit" in r]
    if audited:
        table = Table(
            title="training-overlap audit (endgame: the first state where the answer is the only "
            "fit)"
        )
        for col in ("run", "answers imitated as guesses", *AUDIT_COLUMNS):
            table.add_column(col)
        for name, r in audited:
            table.add_row(
                name,
                f"{r['audit']['answers_imitated_as_guess']} of {r['metrics']['games']}",
                *audit_cells(r),
            )
        console.print(table)
        split = [(name, row) for name, r in audited for row in by_answer_cells(r)]
        if split:
            table = Table(title="the same games by whether the training data writes the answer")
            for col in ("run", *BY_ANSWER_COLUMNS):
                table.add_column(col)
            for name, row in split:
                table.add_row(name, *row)
            console.print(table)


@app.command()
def compare(
    runs: Annotated[list[Path], typer.Argument(help="Run folders (or results.json files).")],
    paired: Annotated[
        bool,
        typer.Option(
            help="Two run folders on the same answers: games won by only one (exact "
            "McNemar p) and guesses per game (Wilcoxon p), second against first."
        ),
    ] = False,
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
        from wordle_rl.evaluation.stats import paired_comparison, read_games

        if len(runs) != 2 or not all(r.is_dir() for r in runs):
            raise fail("--paired compares exactly two run folders (each with games.jsonl)")
        try:
            r = paired_comparison(read_games(runs[0]), read_games(runs[1]))
        except (FileNotFoundError, ValueError) as e:
            raise fail(str(e)) from e
        table = Table(title=f"paired: {runs[1]} against {runs[0]} on {r['games']} answers")
        for col in (
            "won only by first",
            "won only by second",
            "McNemar p",
            "mean guesses (loss = 7)",
            "difference",
            "Wilcoxon p",
        ):
            table.add_column(col)
        table.add_row(
            str(r["only_a"]),
            str(r["only_b"]),
            f"{r['mcnemar_p']:.3g}",
            f"{r['mean_guesses_a']:.3f} -> {r['mean_guesses_b']:.3f}",
            f"{r['mean_guesses_diff']:+.3f}",
            f"{r['wilcoxon_p']:.3g}",
        )
        console.print(table)


@app.command()
def probe(
    models: Annotated[list[Path], typer.Argument(help="Model folders, the first the reference.")],
    games: Annotated[
        Path, typer.Option(help="A games.jsonl of `wordle-rl eval`, whose recall states are asked.")
    ],
    threads: Annotated[int, typer.Option(help="Torch CPU threads.")] = 2,
) -> None:
    """The recall probe (module wordle_rl.evaluation.recall_probe): each model's chance of writing
    the answer at the recall states of one evaluation's games, and the states only the first or only
    it writes it at."""
    from wordle_rl.evaluation.recall_probe import probe_models

    try:
        r = probe_models(models, games, threads)
    except (FileNotFoundError, ValueError, OSError) as e:
        raise fail(str(e)) from e
    table = Table(title=f"recall probe: {r['states']} recall states of {games}")
    for col in ("model", "mean P(answer)", "greedy writes it", "below 0.5", "only first / only it"):
        table.add_column(col)
    for i, m in enumerate(r["models"]):
        vs = f"{m['only_first']} / {m['only_it']} (McNemar p {m['mcnemar_p']:.3g})" if i else "-"
        cells = (f"{m['mean_p']:.3f}", str(m["greedy_right"]), str(m["below_half"]), vs)
        table.add_row(m["model"], *cells)
    console.print(table)


@app.command()
def plot(
    runs: Annotated[
        list[Path], typer.Argument(help="Run folders with results.json (models and solvers).")
    ],
    out: Annotated[Path, typer.Option(help="Folder for the PNG files.")] = Path("plots"),
) -> None:
    """Guess histograms side by side and error rates by turn, as PNGs."""
    from wordle_rl.evaluation.plots import plot_eval_runs

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
    style: ModelStyleOpt = None,
    think: ModelThinkOpt = None,
) -> None:
    """Watch a model play one game, with coloured tiles and its raw replies."""
    from wordle_rl.environment.env import EnvConfig, WordleEnv
    from wordle_rl.environment.prompts import PromptStyle
    from wordle_rl.evaluation.evaluate import ModelPolicy
    from wordle_rl.models.embedded import load_model
    from wordle_rl.models.prompt_record import check_prompt_style

    wl = load_word_lists()
    if not wl.is_allowed(answer.lower()):
        raise fail(f"{answer!r} is not in the word list")
    try:
        style, think = model_style(model, style, think)
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
    console.print(
        f"{'won' if env.won else 'lost'} in {env.turns_used}; the word was {answer.upper()}"
    )
