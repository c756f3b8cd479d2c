"""The pipeline's data stage: SFT games and RL rows on the run's splits, checked for leakage.

    data: {sft: {games: 2000, solver_mix: "ranked:1"}, rl: {rows: 512}}   # in a pipeline config

A ``ranked`` teacher with no ranking file of its own plays by the run's starting model's preference
among the answer words (:mod:`wordle_rl.training.word_prior`), written to ``data/ranking.txt`` here,
so the model stage runs first.
"""

from __future__ import annotations

__all__ = ["data_configs", "run_data"]


def data_configs(runner):
    """``(SftConfig, RlConfig)`` of the data stage: the ``data.sft`` and ``data.rl`` sections over
    the config classes' defaults, with this run's seed and prompt style, and the ranking file."""
    from wordle_rl.data.rl_rows import RlConfig
    from wordle_rl.data.sft_games import SftConfig, parse_solver_mix

    d = runner.cfg.data
    run = {"seed": runner.cfg.seed, "style": d.style, "think": d.think}
    sft = SftConfig(**run, **d.sft)
    if "ranked" in parse_solver_mix(sft.solver_mix) and sft.ranking is None:
        sft.ranking = str(runner.paths["ranking"])
    return sft, RlConfig(**run, **d.rl)


def run_data(runner) -> dict:
    """Write the ranking (when the run makes its own), the SFT games and the RL rows."""
    from wordle_rl.data.files import save_dataset
    from wordle_rl.data.rl_rows import generate_rl
    from wordle_rl.data.sft_games import generate_sft
    from wordle_rl.data.splits import check_leakage, record_splits

    sft_cfg, rl_cfg = data_configs(runner)
    paths, sp = runner.paths, runner._splits()
    if sft_cfg.ranking == str(paths["ranking"]):
        from wordle_rl.environment.prompts import PromptStyle
        from wordle_rl.training.word_prior import write_model_ranking

        style = PromptStyle(sft_cfg.style, think=sft_cfg.think)
        with runner.console.status("ranking the answer words by the model"):
            write_model_ranking(runner._model_source(), style, paths["ranking"], runner.cfg.threads)
    with runner.console.status(f"playing {sft_cfg.games} solver games"):
        sft_rows = generate_sft(sp, sft_cfg)
    check_leakage(sft_rows, sp, "sft", allow_outside=True, protocol=sft_cfg.protocol)
    save_dataset(sft_rows, paths["sft_data"], "sft")
    record_splits(paths["sft_data"], sp)
    rl_rows = generate_rl(sp, rl_cfg)
    check_leakage(rl_rows, sp, "rl", allow_outside=True)
    save_dataset(rl_rows, paths["rl_data"], "rl")
    record_splits(paths["rl_data"], sp)
    return {"sft_games": len(sft_rows), "rl_rows": len(rl_rows)}
