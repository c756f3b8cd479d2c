import json

import pytest
from typer.testing import CliRunner

from wordle_rl.cli import app

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
    from wordle_rl.cli_train import _parse_config
    from wordle_rl.grpo import WordleGRPOConfig
    from wordle_rl.sft import WordleSFTConfig

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
    from wordle_rl.cli_train import _parse_config
    from wordle_rl.grpo import WordleGRPOConfig
    from wordle_rl.sft import WordleSFTConfig, save_config

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
    from wordle_rl.cli_train import _parse_config
    from wordle_rl.grpo import WordleGRPOConfig
    from wordle_rl.sft import save_config, stack_versions

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


def test_data_sft_wide_games_and_check(tmp_path):
    splits, out = tmp_path / "splits.json", tmp_path / "sft"
    assert runner.invoke(app, ["data", "split", "--out", str(splits)]).exit_code == 0
    r = runner.invoke(
        app,
        [
            "data",
            "sft",
            "--splits",
            str(splits),
            "--games",
            "24",
            "--no-think",
            "--wide-share",
            "0.5",
            "--out",
            str(out),
        ],
    )
    assert r.exit_code == 0, r.output
    r = runner.invoke(app, ["data", "check", str(out / "sft.jsonl"), "--splits", str(splits)])
    assert r.exit_code != 0 and "not in the answer list" in r.output
    r = runner.invoke(
        app, ["data", "check", str(out / "sft.jsonl"), "--splits", str(splits), "--allow-outside"]
    )
    assert r.exit_code == 0 and "24 rows" in r.output and "outside the answer list" in r.output, (
        r.output
    )
    r = runner.invoke(
        app, ["data", "sft", "--splits", str(splits), "--games", "2", "--wide-share", "2"]
    )
    assert r.exit_code != 0 and "wide_share must be between 0 and 1" in r.output


def test_data_sft_word_pattern_exercises_and_check(tmp_path):
    splits, out = tmp_path / "splits.json", tmp_path / "sft"
    assert runner.invoke(app, ["data", "split", "--out", str(splits)]).exit_code == 0
    r = runner.invoke(
        app,
        [
            "data",
            "sft",
            "--splits",
            str(splits),
            "--games",
            "20",
            "--no-think",
            "--recall-share",
            "0",
            "--lexicon-share",
            "0.5",
            "--out",
            str(out),
        ],
    )
    assert r.exit_code == 0 and "20 games + 10 word-pattern exercises" in r.output, r.output
    r = runner.invoke(app, ["data", "check", str(out / "sft.jsonl"), "--splits", str(splits)])
    assert r.exit_code == 0 and "30 rows (10 word-pattern exercises, no target)" in r.output, (
        r.output
    )
    rows = [json.loads(line) for line in (out / "sft.jsonl").read_text().splitlines()]
    rows[-1]["lexicon"]["word"] = "zzzzz"
    (tmp_path / "bad.jsonl").write_text("\n".join(json.dumps(row) for row in rows))
    r = runner.invoke(app, ["data", "check", str(tmp_path / "bad.jsonl"), "--splits", str(splits)])
    assert (
        r.exit_code != 0
        and "bad.jsonl:30: exercise word 'zzzzz' is not in the answer list" in r.output
    ), r.output
    r = runner.invoke(
        app, ["data", "sft", "--splits", str(splits), "--games", "2", "--lexicon-share", "-1"]
    )
    assert r.exit_code != 0 and "lexicon_share must be at least 0" in r.output


def test_data_split_with_rl_share_then_rl_rows_and_eval_on_it(tmp_path):
    splits, rl = tmp_path / "splits.json", tmp_path / "rl"
    r = runner.invoke(app, ["data", "split", "--rl-share", "0.2", "--out", str(splits)])
    assert r.exit_code == 0 and "train 1481 / rl 370 / val 232 / test 232" in r.output, r.output
    r = runner.invoke(
        app,
        [
            "data",
            "rl",
            "--splits",
            str(splits),
            "--split",
            "rl",
            "--wide-share",
            "0",
            "--rows",
            "12",
            "--no-think",
            "--out",
            str(rl),
        ],
    )
    assert r.exit_code == 0, r.output
    r = runner.invoke(app, ["data", "check", str(rl / "rl.jsonl"), "--splits", str(splits)])
    assert r.exit_code != 0 and "target" in r.output and "rl split" in r.output  # no SFT target
    r = runner.invoke(
        app, ["data", "check", str(rl / "rl.jsonl"), "--splits", str(splits), "--split", "rl"]
    )
    assert r.exit_code == 0, r.output
    r = runner.invoke(
        app,
        [
            "eval",
            "--solver",
            "entropy",
            "--splits",
            str(splits),
            "--split",
            "rl",
            "--limit",
            "3",
            "--no-train-sample",
            "--out",
            str(tmp_path / "ev"),
        ],
    )
    assert r.exit_code == 0, r.output
    res = json.loads((tmp_path / "ev" / "results.json").read_text())
    assert res["split"] == "rl" and res["metrics"]["games"] == 3
    ev = ["eval", "--solver", "candidate", "--splits", str(splits), "--limit", "3"]
    r = runner.invoke(app, [*ev, "--force-second", "oracle"])
    assert r.exit_code != 0 and "--force-second must be one of" in r.output, r.output
    r = runner.invoke(app, [*ev, "--force-second", "entropy", "--out", str(tmp_path / "f")])
    assert r.exit_code == 0, r.output
    res = json.loads((tmp_path / "f" / "results.json").read_text())
    assert res["policy"] == "solver:candidate+second:entropy" and res["metrics"]["games"] == 3
    plain = tmp_path / "plain.json"
    assert runner.invoke(app, ["data", "split", "--out", str(plain)]).exit_code == 0
    r = runner.invoke(app, ["eval", "--solver", "entropy", "--splits", str(plain), "--split", "rl"])
    assert r.exit_code != 0 and "the rl split" in r.output and "is empty" in r.output
    r = runner.invoke(
        app, ["data", "rl", "--splits", str(plain), "--split", "dev", "--out", str(tmp_path / "x")]
    )
    assert r.exit_code != 0 and "unknown split 'dev'" in r.output


def test_data_options_say_what_their_config_fields_say():
    import re

    from wordle_rl.cli_common import field_help
    from wordle_rl.rl_rows import RlConfig
    from wordle_rl.sft_games import SftConfig

    def flat(text: str) -> str:
        return re.sub(r"[\s│]+", " ", text)

    sft = flat(runner.invoke(app, ["data", "sft", "--help"], env={"COLUMNS": "300"}).output)
    rl = flat(runner.invoke(app, ["data", "rl", "--help"], env={"COLUMNS": "300"}).output)
    for name in ("games", "recall_share", "protocol", "informative_width", "solver_mix"):
        assert flat(field_help(SftConfig, name)) in sft, name
    for name in ("rows", "split", "random_move_share", "wide_share"):
        assert flat(field_help(RlConfig, name)) in rl, name
    with pytest.raises(KeyError, match="no field 'nothing'"):
        field_help(RlConfig, "nothing")
