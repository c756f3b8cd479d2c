"""The quick preset end to end on CPU: every artefact exists and the report's numbers match
results.json."""

import json
import re

import pytest
from rich.console import Console

from wordle_rl.evaluation.recall_probe import recall_states
from wordle_rl.pipeline.config import ConfigError, load_config
from wordle_rl.pipeline.runner import STAGES, Runner, run_pipeline


def test_presets_and_config_errors(tmp_path):
    assert load_config("quick").model.name == "init:micro"
    assert load_config(None).name == "cpu-default"
    assert load_config("gpu-qwen3").model.name == "Qwen/Qwen3-1.7B"
    f = tmp_path / "exp.toml"
    f.write_text('preset = "quick"\nseed = 3\n[sft]\nmax_steps = 5\n')
    cfg = load_config(str(f))
    assert cfg.seed == 3 and cfg.sft.settings["max_steps"] == 5 and cfg.name == "exp"
    assert cfg.data.sft == {"games": 600} and cfg.sft.settings["learning_rate"] == 1e-2
    for text, msg in [
        ("[sft]\nmax_stepz = 5\n", "unknown key 'max_stepz'"),
        ('[sft]\nmax_steps = "many"\n', "sft.max_steps: expected a number"),
        ("[sft]\nseed = 5\n", "sft.seed: set by the pipeline; use the top-level seed"),
        ('[data]\nstyle = "yaml"\n', "data.style"),
        ("[data.sft]\nrecall_share = -0.5\n", "data.sft.recall_share: must be >= 0, got -0.5"),
        ("[data.rl]\nrowz = 5\n", "data.rl: unknown key 'rowz'"),
        ("threads = -1\n", ">= 0"),
        ('preset = "huge"\n', "unknown preset"),
        ('[eval]\ndecodes = ["greedy"]\n', "eval.decodes"),
        ("this is not toml", "cannot parse"),
    ]:
        f.write_text(text)
        with pytest.raises(ConfigError, match=re.escape(msg)):
            load_config(str(f))
    # values that only the stage's own config refuses stop the job before its first stage
    for text, msg in [
        ('preset = "quick"\n[grpo]\nnum_generations = 1\n', "at least 2"),
        ('preset = "quick"\n[data.sft]\nsolver_mix = "typo:1"\n', "bad solver mix"),
        ('preset = "quick"\n[grpo]\nper_device_train_batch_size = 6\n', "divisible by"),
        ('preset = "quick"\n[grpo]\nenabled = false\n', "control: needs the sft and grpo"),
        ('preset = "quick"\n[control]\nlearning_rate = -1.0\n', "control.learning_rate"),
    ]:
        f.write_text(text)
        out = tmp_path / "bad"
        with pytest.raises(ConfigError, match=re.escape(msg)):
            run_pipeline(load_config(str(f)), out, Console(file=open(tmp_path / "l.txt", "w")))
        assert not (out / "config.json").exists() and not (out / "data").exists()
    with pytest.raises(ConfigError, match="--until must be one of words, baselines"):
        run_pipeline(load_config("quick"), tmp_path / "u", Console(file=None), until="ev")
    assert not (tmp_path / "u").exists()
    with pytest.raises(ConfigError, match="neither a preset"):
        load_config(str(tmp_path / "missing.toml"))


def test_gpu_preset_without_cuda_or_vllm_stops_before_any_stage(tmp_path):
    from wordle_rl.training.grpo import vllm_missing

    if vllm_missing() is None:
        pytest.skip("this machine can run vLLM rollouts")
    cfg = load_config("gpu-qwen3")
    assert cfg.grpo.settings["use_vllm"]
    with pytest.raises(ConfigError, match=r"use_vllm needs a CUDA GPU"):
        run_pipeline(cfg, tmp_path / "run", Console(file=open(tmp_path / "log.txt", "w")))
    assert not (tmp_path / "run" / "data").exists() and not (tmp_path / "run" / "sft").exists()


def test_a_ranked_teacher_plays_by_the_runs_own_model(tmp_path, words):
    from wordle_rl.engine.game import consistent_with, str_to_pattern
    from wordle_rl.environment.prompts import PromptStyle
    from wordle_rl.models.embedded import load_model
    from wordle_rl.training.word_prior import word_logprobs

    f = tmp_path / "ranked.toml"
    f.write_text('preset = "quick"\n[data.sft]\ngames = 40\nsolver_mix = "ranked:1"\n')
    cfg, out = load_config(str(f)), tmp_path / "run"
    run_pipeline(cfg, out, Console(file=open(tmp_path / "log.txt", "w")), until="data")
    ranking = (out / "data" / "ranking.txt").read_text().split()
    assert sorted(ranking) == sorted(words.answers)
    model, tok = load_model(str(out / "model"))
    style = PromptStyle(cfg.data.style, think=cfg.data.think)
    first, last = word_logprobs(model.eval(), tok, style, [ranking[0], ranking[-1]])
    assert first >= last
    rank = {w: i for i, w in enumerate(ranking)}
    rows = [json.loads(x) for x in (out / "data" / "sft" / "sft.jsonl").read_text().splitlines()]
    moves = 0
    for row in (r for r in rows if r["solver"] == "ranked"):
        hist = [(g, str_to_pattern(p)) for g, p in row["history"]]
        for k in range(1, len(hist)):
            if row["random_second"] and k == 1:  # a random candidate, not the teacher's
                continue
            fits = [w for w in words.answers if consistent_with(hist[:k], w)]
            assert hist[k][0] == min(fits, key=rank.__getitem__)
            moves += 1
    assert moves > 20


def test_quick_pipeline_end_to_end(tmp_path):
    out = tmp_path / "run"
    console = Console(file=open(tmp_path / "log.txt", "w"), width=120)
    # --until sft stops after SFT; the same command without it goes on from there
    assert run_pipeline(load_config("quick"), out, console, until="sft") == out
    marked = sorted(p.stem for p in (out / "markers").iterdir())
    assert marked == sorted(STAGES[: STAGES.index("sft") + 1])
    report = run_pipeline(load_config("quick"), out, console)
    assert report.is_file()
    for stage in STAGES:
        assert (out / "markers" / f"{stage}.json").is_file(), stage
    for path in [
        "config.json",
        "versions.json",
        "data/splits.json",
        "data/sft/sft.jsonl",
        "data/sft/hf",
        "data/rl/rl.jsonl",
        "model/config.json",
        "sft/model.safetensors",
        "grpo/model.safetensors",
        "plots/guess_histogram.png",
        "plots/errors_by_turn.png",
        "plots/sft_curves.png",
        "plots/grpo_curves.png",
        "plots/grpo_cumulative_wins.png",
    ]:
        assert (out / path).exists(), path
    text = report.read_text()
    assert sorted(p.name for p in (out / "eval").iterdir()) == ["test", "val"]
    for split in ("test", "val"):
        runs = sorted(p.name for p in (out / "eval" / split).iterdir() if p.is_dir())
        assert runs == [
            "control-consistent",
            "control-free",
            "grpo-consistent",
            "grpo-free",
            "sft-consistent",
            "sft-free",
            "solver-entropy",
            "solver-random",
        ]
        section = text.split(f"## {split.capitalize()} answers")[1].split("## ")[0]
        for name in runs:
            res = json.loads((out / "eval" / split / name / "results.json").read_text())
            m = res["metrics"]
            row = next(line for line in section.splitlines() if line.startswith(f"| {name} |"))
            assert f"{100 * m['win_rate']:.1f} %" in row
            assert "/".join(str(v) for v in m["histogram"].values()) in row
            assert res["split"] == split and m["games"] == 12
            # one train sample, with the first split
            assert ("train_sample_metrics" in res) == (split == "test")
            # trained policies are audited against the run's own training data; solvers are not
            assert ("audit" in res) == (not name.startswith("solver-"))
            if "audit" in res:
                a = res["audit"]
                # and the GRPO model also against the states where it was rewarded for writing
                # the one answer word that fits
                taught = sorted(map(str, (out / "grpo" / "rl_recall_states").glob("*.jsonl")))
                assert a["training_files"] == [
                    str(out / "data" / "sft" / "sft.jsonl"),
                    str(out / "data" / "rl" / "rl.jsonl"),
                ] + (taught if name.startswith("grpo") else [])
                assert ("rewarded writing an answer word" in text) == bool(taught)
                assert sum(c["games"] for c in a["classes"].values()) == 12
                assert sum(c["wins"] for c in a["classes"].values()) == m["wins"] == a["wins"]
                audit_row = [
                    line for line in section.splitlines() if line.startswith(f"| {name} |")
                ][1]
                c = a["classes"]["endgame_imitated"]
                assert audit_row.startswith(
                    f"| {name} | {res['decode']} | {c['wins']} of {c['games']} |"
                )
                by = a["by_answer"]
                assert by["written"]["games"] + by["never_written"]["games"] == 12
                assert by["written"]["games"] == sum(
                    json.loads(line)["audit"]["answer_imitated"]
                    for line in (out / "eval" / split / name / "games.jsonl").open()
                    if '"split": "train-sample"' not in line
                )
                w = by["written"]
                assert f"| {name} | {res['decode']} | written as a guess | {w['games']} | " in (
                    section
                )
        assert "Training-overlap audit" in section
        # both models asked at the SFT model's recall states: greedy SFT writes the answer
        # exactly where its own free game did
        probe = json.loads((out / "eval" / split / "recall_probe.json").read_text())
        states = recall_states(out / "eval" / split / "sft-free" / "games.jsonl")
        sft, grpo = probe["models"]
        assert probe["states"] == len(states) and sft["model"] == str(out / "sft")
        assert sft["greedy_right"] == sum(s.played_right for s in states)
        if probe["states"]:
            assert f"GRPO {grpo['mean_p']:.3f}, {grpo['greedy_right']} " in section
        else:  # the micro model's games may reach none
            assert "reached no recall state" in section and "nan" not in section
    assert (
        "Sample games" in text
        and "Wall time and memory per stage" in text
        and '"name": "quick"' in text
    )
    # one process ran every stage, so the peak RSS each marker records is real (a model was loaded)
    # and never falls
    marks = {stage: json.loads((out / "markers" / f"{stage}.json").read_text()) for stage in STAGES}
    peaks = [marks[stage]["peak_rss_gib"] for stage in STAGES]
    assert peaks[0] > 0.05 and peaks == sorted(peaks), peaks
    assert f"| sft | {marks['sft']['seconds']} | {marks['sft']['peak_rss_gib']} |" in text
    # steps done, read back from each stage's log, against the preset's max_steps
    for stage in ("sft", "grpo", "control"):
        max_steps = getattr(load_config("quick"), stage).settings["max_steps"]
        kind = "grpo" if stage == "grpo" else "sft"
        log = json.loads((out / stage / f"wordle_rl_{kind}_log.json").read_text())
        done = max(e["step"] for e in log)
        control_steps = done  # the last of the three
        training = text.split("## Training")[1].splitlines()
        row = next(line for line in training if line.startswith(f"| {stage} | "))
        assert row.startswith(f"| {stage} | {done} of {max_steps} |"), row
        assert ("max_steps" in row) == (done == max_steps)
    val = [json.loads(x) for x in (out / "grpo" / "val_eval.jsonl").read_text().splitlines()]
    assert [v["step"] for v in val] == [
        0,
        2,
    ] and f"| 2 | {100 * val[1]['val_win_rate']:.1f} % |" in text
    assert (out / "plots" / "grpo_val_curve.png").is_file() and "| sft | grpo | free |" in text
    assert all(0 <= v["val_invalid_word_rate"] <= 1 for v in val)
    # the control: more SFT from the SFT model, for the GRPO stage's time, at GRPO's learning rate
    control = json.loads((out / "control" / "wordle_rl_sft_config.json").read_text())
    assert control["model"] == str(out / "sft")
    assert control["learning_rate"] == load_config("quick").grpo.settings["learning_rate"]
    assert control["time_budget_minutes"] == round(marks["grpo"]["seconds"] / 60, 4)
    assert "| grpo | control | free |" in text and "| sft | control | free |" in text
    assert "time budget ended it" not in text
    # the job's model: the val check's best, never worse on val than the SFT model (step 0)
    picked = json.loads((out / "selected.json").read_text())
    assert picked["name"] in ("sft", "grpo", "control") and "## The job's model" in text
    assert picked["val"]["val_mean_guesses_per_game"] <= val[0]["val_mean_guesses_per_game"]
    # the control played the same val answers once, and is the job's model only when it beat
    # every GRPO check
    ctl = [json.loads(x) for x in (out / "control" / "val_eval.jsonl").read_text().splitlines()]
    assert len(ctl) == 1 and ctl[0]["games"] == 24 and ctl[0]["step"] == control_steps
    best_grpo = min(v["val_mean_guesses_per_game"] for v in val)
    assert (picked["name"] == "control") == (ctl[0]["val_mean_guesses_per_game"] < best_grpo)
    if picked["name"] != "control":
        assert picked["val"]["step"] == (0 if picked["name"] == "sft" else 2)
        assert picked["control_val"] == ctl[0]
    assert all(v["games"] == 24 for v in val)
    assert (out / "final" / "model.safetensors").is_file()
    assert not any((out / "final").glob("checkpoint-*"))
    # a rerun skips every finished stage; a different config in the same folder is refused
    before = {p.name: p.stat().st_mtime for p in (out / "markers").iterdir()}
    run_pipeline(load_config("quick"), out, console)
    assert {p.name: p.stat().st_mtime for p in (out / "markers").iterdir()} == before
    cfg = load_config("quick")
    cfg.seed = 9
    with pytest.raises(ConfigError, match="different config"):
        run_pipeline(cfg, out, console)
    # a killed GRPO stage (marker missing, checkpoint present) resumes from the checkpoint instead
    # of restarting
    first = [
        e for e in json.loads((out / "grpo" / "wordle_rl_grpo_log.json").read_text()) if "loss" in e
    ]
    # GRPO keeps the SFT loss on the run's own SFT games
    assert all(e["sft/hard_loss"] > 0 for e in first)
    (out / "markers" / "grpo.json").unlink()
    run_pipeline(load_config("quick"), out, console)
    log = [
        e for e in json.loads((out / "grpo" / "wordle_rl_grpo_log.json").read_text()) if "loss" in e
    ]
    assert log[:2] == first  # steps 1-2 come from the checkpoint's state, not a new run
    assert (out / "markers" / "grpo.json").is_file()
    # a control trained again drops the val record select played on the earlier control model
    assert (out / "control" / "val_eval.jsonl").is_file()
    Runner(load_config("quick"), out, console).stage_control()
    assert not (out / "control" / "val_eval.jsonl").exists()
    # without the recall probe the evaluation asks no model at recall states
    cfg = load_config("quick")
    cfg.eval.recall_probe, cfg.eval.decodes, cfg.eval.train_sample = False, ["free"], False
    for split in ("test", "val"):
        (out / "eval" / split / "recall_probe.json").unlink()
    Runner(cfg, out, console).stage_eval()
    assert not any((out / "eval").glob("*/recall_probe.json"))
    assert (out / "eval" / "val" / "grpo-free" / "results.json").is_file()


def test_data_commands_with_no_flags_make_the_main_jobs_data(tmp_path):
    """`wordle-rl data split/sft/rl` with only a size given write byte for byte what the main job's
    data stage writes at that size: each default is declared once, in SftConfig / RlConfig, and both
    read it."""
    from typer.testing import CliRunner

    from wordle_rl.cli.main import app

    cfg = load_config("cpu-default")
    cfg.data.sft, cfg.data.rl = {"games": 300}, {"rows": 40}
    Runner(cfg, tmp_path / "run", Console(file=open(tmp_path / "log.txt", "w"))).run(("data",))
    d = tmp_path / "cli"
    for args in (
        ["data", "split", "--out", str(d / "splits.json")],
        [
            "data",
            "sft",
            "--games",
            "300",
            "--splits",
            str(d / "splits.json"),
            "--out",
            str(d / "sft"),
        ],
        ["data", "rl", "--rows", "40", "--splits", str(d / "splits.json"), "--out", str(d / "rl")],
    ):
        r = CliRunner().invoke(app, args)
        assert r.exit_code == 0, r.output
    for name in ("splits.json", "sft/sft.jsonl", "rl/rl.jsonl"):
        assert (d / name).read_bytes() == (tmp_path / "run" / "data" / name).read_bytes(), name


def test_training_commands_with_no_flags_train_like_the_main_job(tmp_path):
    """`wordle-rl sft` / `wordle-rl grpo` given only the paths resolve to the config the main job's
    stage builds: the SFT and GRPO defaults are declared once, in WordleSFTConfig /
    WordleGRPOConfig, and the pipeline reads them."""
    from dataclasses import asdict

    from wordle_rl.cli.common import parse_config as _parse_config
    from wordle_rl.pipeline.runner import Runner
    from wordle_rl.training.grpo import WordleGRPOConfig
    from wordle_rl.training.sft import WordleSFTConfig

    runner = Runner(load_config("cpu-default"), tmp_path, Console(file=open(tmp_path / "l", "w")))
    paths = ("model", "data", "splits", "output_dir", "sft_data", "logging_dir")
    for stage, cls in (
        (runner.sft_config(), WordleSFTConfig),
        (runner.grpo_config(), WordleGRPOConfig),
    ):
        ours = asdict(stage)
        flags = [x for k in paths if ours.get(k) for x in (f"--{k.replace('_', '-')}", ours[k])]
        cli = asdict(_parse_config(cls, None, flags))
        differ = {k: (ours[k], cli[k]) for k in ours if ours[k] != cli[k]}
        assert differ == {}, (cls.__name__, differ)


def test_the_jobs_model_is_the_val_checks_best_and_sft_wins_ties(tmp_path):
    """The select stage copies the model with the fewest val guesses per game to final/: the SFT
    model when no GRPO step beats it, else the kept GRPO step (the last step's own folder, or
    best-val/ for an earlier one), or the control where it beats them all on the same answers."""
    from wordle_rl.pipeline.runner import Runner
    from wordle_rl.pipeline.select import select_model, selection_lines

    def run_with(records, best_step, control=9.0):
        out = tmp_path / f"run-{best_step}-{len(records)}-{control}"
        runner = Runner(load_config("quick"), out, Console(file=open(tmp_path / "l", "w")))
        for name in ("sft", "grpo", "grpo/best-val", "grpo/checkpoint-2", "control"):
            (out / name).mkdir(parents=True, exist_ok=True)
            (out / name / "model.safetensors").write_text(name)
        (out / "sft" / "checkpoint-30").mkdir()
        (out / "control" / "val_eval.jsonl").write_text(
            json.dumps({"step": 6, "games": 24, "val_mean_guesses_per_game": control}) + "\n"
        )
        (out / "grpo" / "val_eval.jsonl").write_text(
            "".join(
                json.dumps({"step": s, "games": 24, "val_mean_guesses_per_game": g}) + "\n"
                for s, g in records
            )
        )
        best = next(r for r in records if r[0] == best_step)
        model = out / ("sft" if best_step == 0 else "grpo/best-val")
        (out / "grpo" / "best_val.json").write_text(
            json.dumps(
                {
                    "step": best_step,
                    "games": 24,
                    "val_mean_guesses_per_game": best[1],
                    "model": str(model),
                }
            )
        )
        return out, select_model(runner)

    out, picked = run_with([(0, 4.0), (2, 4.0), (4, 4.2)], 0)
    assert picked["name"] == "sft" and (out / "final" / "model.safetensors").read_text() == "sft"
    assert not (out / "final" / "checkpoint-30").exists()
    out, picked = run_with([(0, 4.1), (2, 3.9), (4, 4.2)], 2)
    assert picked["name"] == "final" and picked["step"] == 2 and picked["last_step"] == 4
    assert (out / "final" / "model.safetensors").read_text() == "grpo/best-val"
    assert "3.900" in picked["why"] and "4.100" in picked["why"]
    out, picked = run_with([(0, 4.1), (4, 3.8)], 4)
    assert picked["name"] == "grpo" and (out / "final" / "model.safetensors").read_text() == "grpo"
    assert not (out / "final" / "best-val").exists()
    # the control only where it needs fewer guesses than the best GRPO check, not on a tie
    out, picked = run_with([(0, 4.1), (2, 3.9), (4, 4.2)], 2, control=3.9)
    assert picked["name"] == "final" and picked["control_val"]["val_mean_guesses_per_game"] == 3.9
    out, picked = run_with([(0, 4.1), (2, 3.9), (4, 4.2)], 2, control=3.8)
    assert picked["name"] == "control" and picked["step"] == 6 and picked["grpo_val"]["step"] == 2
    assert (out / "final" / "model.safetensors").read_text() == "control"
    assert "3.800" in picked["why"] and "3.900" in picked["why"] and "4.100" in picked["why"]
    assert "the control" in "\n".join(selection_lines(out))
    cfg = load_config("quick")  # nothing trained: the starting model is the job's model
    cfg.sft.enabled = cfg.grpo.enabled = False
    runner = Runner(cfg, tmp_path / "none", Console(file=open(tmp_path / "l", "w")))
    assert select_model(runner)["model"] == str(tmp_path / "none" / "model")
    assert not (tmp_path / "none" / "final").exists()


def test_a_finished_stage_hands_its_freed_heap_back():
    import gc

    from wordle_rl.pipeline.machine import release_memory, rss_gib

    blocks = [bytearray(4096) for _ in range(100_000)]  # about 400 MB in small C-heap blocks
    pinned = blocks[::1000]  # a few kept alive, so the heap cannot shrink from its top on its own
    del blocks
    gc.collect()
    before = rss_gib()
    assert release_memory()  # glibc, as on the machines the project runs on
    assert rss_gib() < before - 0.2 and len(pinned) == 100
