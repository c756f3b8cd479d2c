"""The recall probe: the recall states of a games file, found by replaying it, and a real model's
chance of the answer there, its greedy flag checked against greedy generation."""

import json

import pytest
import torch
from typer.testing import CliRunner

from wordle_rl.cli.main import app
from wordle_rl.engine.game import score
from wordle_rl.environment.prompts import PromptStyle, format_answer
from wordle_rl.evaluation.recall_probe import greedy_discordance, probe_model, recall_states
from wordle_rl.models.embedded import load_model

MOVES = ["tares", "coden", "dowxl", "pinch", "bowel", "dowel"]  # dowxl: a refused non-word


def _games(path, words, answer="dowel", moves=MOVES):
    """A games.jsonl of one game of ``moves`` on ``answer`` and its results.json (tiles, no
    think), as `wordle-rl eval` writes them."""
    played = [
        {"completion": f"<guess>{m}</guess>", "guess": m if words.is_allowed(m) else None}
        for m in moves
    ]
    path.mkdir(parents=True, exist_ok=True)
    (path / "games.jsonl").write_text(json.dumps({"answer": answer, "moves": played}) + "\n")
    config = {"style": "tiles", "think": False, "hard": False}
    (path / "results.json").write_text(json.dumps({"config": config}))
    return path / "games.jsonl"


def test_recall_states_are_the_decisions_where_only_the_answer_fits(words, tmp_path):
    games = _games(tmp_path / "eval", words)
    states = recall_states(games)
    expected, history = [], []  # re-scored here: every answer word that fits every feedback
    for k, m in enumerate(MOVES):
        fits = [w for w in words.answers if all(score(g, w) == p for g, p in history)]
        if fits == ["dowel"]:
            expected.append(k)
        if words.is_allowed(m):
            history.append((m, score(m, "dowel")))
    assert expected and [s.played_right for s in states] == [MOVES[k] == "dowel" for k in expected]
    assert len(states) == len(expected)
    first = states[0].messages  # the conversation up to the decision, refused moves included
    assert sum(m["role"] == "assistant" for m in first) == expected[0]
    assert all("dowel" not in m["content"].lower() for m in first)  # the answer is not given away
    sample = json.dumps({"answer": "cigar", "split": "train-sample", "moves": []})
    with games.open("a") as f:  # a train sample beside the split's games is not probed
        f.write(sample.replace('"moves": []', '"moves": [{"completion": "<guess>cigar</guess>"}]'))
    assert len(recall_states(games)) == len(states)
    with pytest.raises(FileNotFoundError, match="no games.jsonl"):
        recall_states(tmp_path / "none.jsonl")
    (tmp_path / "bad.jsonl").write_text('{"answer": "dowel"}\n')
    with pytest.raises(ValueError, match=r"bad.jsonl: game 1 is not a record"):
        recall_states(tmp_path / "bad.jsonl")
    (tmp_path / "broken.jsonl").write_text('{"answer": \n')
    with pytest.raises(ValueError, match=r"broken.jsonl: not a games file"):
        recall_states(tmp_path / "broken.jsonl")


def test_the_greedy_flag_is_what_greedy_decoding_writes(trained_micro, words, tmp_path):
    _, model_path = trained_micro
    model, tok = load_model(str(model_path), threads=1)
    games = _games(tmp_path / "eval", words)
    states = recall_states(games)
    style = PromptStyle("tiles", think=False)
    found = probe_model(model, tok, states, style)
    assert found["states"] == len(states) and all(0 < p <= 1 for p in found["p"])
    assert found["greedy_right"] == sum(found["greedy"])
    target = tok(format_answer(style, "dowel"), add_special_tokens=False)["input_ids"]
    for s, flag in zip(states, found["greedy"]):
        text = tok.apply_chat_template(s.messages, add_generation_prompt=True, tokenize=False)
        ids = torch.tensor([tok(text, add_special_tokens=False)["input_ids"]], device=model.device)
        out = model.generate(
            input_ids=ids, do_sample=False, max_new_tokens=len(target), pad_token_id=0
        )
        assert (out[0, ids.shape[1] :].tolist() == target) == flag
    assert greedy_discordance(found["greedy"], found["greedy"]) == (0, 0, 1.0)
    with pytest.raises(ValueError, match="probe the same games"):
        greedy_discordance([True], [True, False])
    result = CliRunner().invoke(
        app, ["probe", str(model_path), str(model_path), "--games", str(games), "--threads", "1"]
    )
    assert result.exit_code == 0, result.output
    assert f"{len(states)} recall states" in result.output and "0 / 0" in result.output
    missing = CliRunner().invoke(app, ["probe", str(model_path), "--games", str(tmp_path / "x")])
    assert missing.exit_code != 0 and "no games.jsonl" in missing.output


def test_a_report_without_recall_states_says_so(trained_micro, tmp_path):
    from wordle_rl.evaluation.recall_probe import PROBE_FILE, probe_summary
    from wordle_rl.pipeline.report import _probe_lines

    _, model_path = trained_micro
    model, tok = load_model(str(model_path), threads=1)
    found = probe_model(model, tok, [], PromptStyle("tiles", think=False))
    summary = probe_summary([model_path, model_path], [found, found], tmp_path / "games.jsonl")
    (tmp_path / PROBE_FILE).write_text(json.dumps(summary))
    text = " ".join(_probe_lines(tmp_path))
    assert summary["states"] == 0 and "reached no recall state" in text and "nan" not in text
