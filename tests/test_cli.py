import json
import shutil

from typer.testing import CliRunner

from wordle_rl.cli.main import app

runner = CliRunner()


def test_play_rejects_invalid_words_without_costing_a_turn():
    r = runner.invoke(app, ["play", "--answer", "abide"], input="xyz\nqqqqq\ncrane\nabide\n")
    assert r.exit_code == 0, r.output
    assert "has 3 letters" in r.output and "not in the word list" in r.output
    assert "Solved in 2!" in r.output


def test_play_loses_and_reveals(tmp_path):
    r = runner.invoke(
        app, ["play", "--answer", "abide", "--max-turns", "2"], input="crane\nslate\n"
    )
    assert r.exit_code == 0
    assert "The word was ABIDE" in r.output


def test_play_hard_mode_message():
    r = runner.invoke(app, ["play", "--answer", "abide", "--hard"], input="abbey\ncrane\nabide\n")
    assert "1st letter must be A" in r.output and "Solved in 2!" in r.output


def test_solve_one_and_all(tmp_path):
    r = runner.invoke(app, ["solve", "--answer", "speed", "--solver", "entropy"])
    assert r.exit_code == 0 and "Solved in" in r.output
    out = tmp_path / "res.json"
    r = runner.invoke(
        app,
        ["solve", "--all", "--limit", "30", "--solver", "random", "--seed", "1", "--out", str(out)],
    )
    assert r.exit_code == 0, r.output
    res = json.loads(out.read_text())
    assert res["n_games"] == 30 and len(res["games"]) == 30
    assert res["wins"] == sum(g["won"] for g in res["games"])
    assert sum(res["histogram"].values()) == 30


def test_solve_errors_are_clear(tmp_path):
    r = runner.invoke(app, ["solve", "--answer", "qqqqq"])
    assert r.exit_code == 2 and "not in the answer list" in r.output
    r = runner.invoke(app, ["solve"])
    assert r.exit_code == 2 and "exactly one of" in r.output
    bad = tmp_path / "bad.txt"
    bad.write_text("crane\ncr4ne\n")
    r = runner.invoke(app, ["solve", "--all", "--answers", str(bad)])
    assert r.exit_code == 2 and f"{bad}:2:" in r.output


def test_rewards_explain_typed_and_transcript(tmp_path):
    r = runner.invoke(
        app,
        [
            "rewards",
            "explain",
            "--answer",
            "abide",
            "--guesses",
            "crane,<guess>qqqqq</guess>,abide",
        ],
    )
    assert r.exit_code == 0, r.output
    assert "not_in_wo" in r.output and "won in 3 turns" in r.output
    f = tmp_path / "games.jsonl"
    turns = ["<guess>slate</guess>", "no guess here", "<guess>crane</guess>"]
    f.write_text(json.dumps({"answer": "crane", "completions": turns}) + "\n")
    r = runner.invoke(app, ["rewards", "explain", "--transcript", str(f), "--preset", "strategy"])
    assert r.exit_code == 0 and "won in 3 turns" in r.output and "no_guess" in r.output
    f.write_text('{"answer": "crane"}\n')
    r = runner.invoke(app, ["rewards", "explain", "--transcript", str(f)])
    assert r.exit_code == 2 and ":1: expected" in r.output
    r = runner.invoke(
        app, ["rewards", "explain", "--answer", "crane", "--guesses", "slate", "--preset", "nope"]
    )
    assert r.exit_code == 2 and "unknown reward preset" in r.output


def test_training_flags_parse_into_trl_configs(tmp_path):
    from wordle_rl.cli.common import parse_config as _parse_config
    from wordle_rl.training.grpo import WordleGRPOConfig
    from wordle_rl.training.sft import WordleSFTConfig

    cfg = _parse_config(
        WordleSFTConfig, None, ["--output_dir", str(tmp_path), "--max-steps", "3", "--lora", "true"]
    )
    assert cfg.max_steps == 3 and cfg.lora is True and cfg.report_to in ("none", [])
    f = tmp_path / "grpo.yaml"
    f.write_text(f"output_dir: {tmp_path}\nnum_generations: 4\nper_device_train_batch_size: 8\n")
    g = _parse_config(WordleGRPOConfig, f, ["--temperature", "0.7"])
    assert g.num_generations == 4 and g.temperature == 0.7 and g.bf16 is False
    f.write_text("num_generationz: 4\n")
    r = runner.invoke(app, ["grpo", "--config", str(f)])
    assert r.exit_code == 2 and "unknown field" in r.output
    r = runner.invoke(app, ["grpo", "--num_generations", "1", "--output_dir", str(tmp_path)])
    assert r.exit_code == 2 and "no relative advantage" in r.output
    r = runner.invoke(app, ["sft", "--help-config"])
    assert r.exit_code == 0 and "--time_budget_minutes" in r.output


def test_a_saved_resolved_config_runs_again_with_flags_on_top(tmp_path):
    # what `wordle-rl sft` / `grpo` save next to a model (nulls, lists, mappings) loads as --config
    from wordle_rl.cli.common import parse_config as _parse_config
    from wordle_rl.training.grpo import WordleGRPOConfig
    from wordle_rl.training.records import save_config
    from wordle_rl.training.sft import WordleSFTConfig

    for cls, name, flags in [
        (WordleSFTConfig, "sft", ["--max-steps", "3", "--learning-rate", "2e-4"]),
        (
            WordleGRPOConfig,
            "grpo",
            ["--num-generations", "4", "--per-device-train-batch-size", "8"],
        ),
    ]:
        first = _parse_config(cls, None, ["--output_dir", str(tmp_path), *flags])
        saved = save_config(first, tmp_path, name)
        again = _parse_config(cls, saved, ["--seed", "7"])
        want = json.loads(saved.read_text()) | {"seed": 7}
        assert json.loads(save_config(again, tmp_path, name).read_text()) == want


def test_a_config_saved_under_other_library_versions_names_both(tmp_path):
    # a resolved config moved to a machine whose transformers/TRL lack some of its fields
    from wordle_rl.cli.common import parse_config as _parse_config
    from wordle_rl.training.grpo import WordleGRPOConfig
    from wordle_rl.training.records import save_config, stack_versions

    cfg = _parse_config(WordleGRPOConfig, None, ["--output_dir", str(tmp_path)])
    saved = save_config(cfg, tmp_path, "grpo")
    fields = json.loads(saved.read_text())
    assert fields["_saved_with"] == stack_versions()
    fields |= {"future_field": 1, "_saved_with": {"transformers": "99.0", "trl": "98.0"}}
    saved.write_text(json.dumps(fields))
    r = runner.invoke(app, ["grpo", "--config", str(saved)])
    here = stack_versions()
    assert r.exit_code == 2
    for text in (
        "future_field",
        "transformers 99.0",
        "trl 98.0",
        f"transformers {here['transformers']}",
    ):
        assert text in " ".join(r.output.split()), text
    fields.pop("future_field")
    saved.write_text(json.dumps(fields))
    assert _parse_config(WordleGRPOConfig, saved, []).output_dir == str(tmp_path)


def test_data_flags_are_the_config_fields_and_bad_values_are_refused(tmp_path):
    splits, out = tmp_path / "splits.json", tmp_path / "sft"
    assert runner.invoke(app, ["data", "split", "--out", str(splits)]).exit_code == 0
    args = ["data", "sft", "--splits", str(splits), "--games", "24", "--think", "false"]
    r = runner.invoke(app, [*args, "--recall_share", "0.5", "--out", str(out)])
    assert r.exit_code == 0 and "24 games" in r.output, r.output
    rows = [json.loads(line) for line in (out / "sft.jsonl").read_text().splitlines()]
    assert sum(r["split"] == "outside" for r in rows) == 12  # recall games on outside words
    r = runner.invoke(app, ["data", "check", str(out / "sft.jsonl"), "--splits", str(splits)])
    assert r.exit_code != 0 and "not in the answer list" in r.output
    r = runner.invoke(
        app, ["data", "check", str(out / "sft.jsonl"), "--splits", str(splits), "--allow-outside"]
    )
    assert r.exit_code == 0 and "24 rows" in r.output, r.output
    for bad, msg in [
        (["--recall_share", "2"], "recall_share must be between 0 and 1"),
        (["--solver_mix", "oracle:1"], "unknown solver(s) oracle"),
        (["--gamez", "3"], "gamez"),
    ]:
        r = runner.invoke(app, [*args, *bad, "--out", str(tmp_path / "x")])
        assert r.exit_code != 0 and msg in " ".join(r.output.split()), r.output
    r = runner.invoke(
        app, ["data", "rl", "--splits", str(splits), "--rows", "5", "--depth_mix", "9:1"]
    )
    assert r.exit_code != 0 and "depths must be 0-4" in r.output, r.output


def test_data_help_lists_every_config_field():
    from dataclasses import fields

    from wordle_rl.data.rl_rows import RlConfig
    from wordle_rl.data.sft_games import SftConfig

    for cmd, cls in (("sft", SftConfig), ("rl", RlConfig)):
        r = runner.invoke(app, ["data", cmd, "--help-config"])
        assert r.exit_code == 0
        text = " ".join(r.output.split())
        for f in fields(cls):
            assert f"--{f.name}" in text, (cmd, f.name)
            assert " ".join(f.metadata["help"].split()[:4]) in text, (cmd, f.name)


def test_a_damaged_model_folder_is_one_clear_line(tmp_path):
    good = tmp_path / "good"
    assert runner.invoke(app, ["init-model", str(good)]).exit_code == 0
    splits = tmp_path / "splits.json"
    assert runner.invoke(app, ["data", "split", "--out", str(splits)]).exit_code == 0
    truncated, broken = tmp_path / "truncated", tmp_path / "broken"
    for d in (truncated, broken):
        shutil.copytree(good, d)
    weights = truncated / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    (broken / "config.json").write_text('{"model_type": ')
    for folder, why in ((truncated, "weights file is damaged"), (broken, "not a valid JSON")):
        for cmd in (
            ["eval", "--split", "val", "--limit", "1", "--splits", str(splits)],
            ["watch", "--answer", "abide"],
            ["data", "rank", "--out", str(tmp_path / "r.txt")],
        ):
            r = runner.invoke(app, [*cmd, "--model", str(folder)])
            assert r.exit_code == 2 and why in r.output and str(folder) in r.output, r.output


def test_a_models_ranking_drives_the_ranked_teacher(tmp_path):
    model, splits, ranking = tmp_path / "m", tmp_path / "splits.json", tmp_path / "ranking.txt"
    assert runner.invoke(app, ["init-model", str(model), "--preset", "micro"]).exit_code == 0
    assert runner.invoke(app, ["data", "split", "--out", str(splits)]).exit_code == 0
    r = runner.invoke(app, ["data", "rank", "--model", str(model), "--out", str(ranking)])
    assert r.exit_code == 0, r.output
    words = ranking.read_text().split()
    assert len(words) == len(set(words)) == 2315
    args = ["data", "sft", "--splits", str(splits), "--games", "6", "--solver_mix", "ranked:1"]
    r = runner.invoke(app, [*args, "--ranking", str(ranking), "--out", str(tmp_path / "sft")])
    assert r.exit_code == 0 and "6 games" in r.output, r.output
    r = runner.invoke(app, [*args, "--ranking", str(tmp_path / "no.txt"), "--out", str(tmp_path)])
    assert r.exit_code == 2 and "cannot read the ranking file" in r.output, r.output
    r = runner.invoke(app, ["data", "rank", "--model", str(model), "--style", "yaml"])
    assert r.exit_code == 2 and "unknown prompt style 'yaml'" in r.output, r.output
