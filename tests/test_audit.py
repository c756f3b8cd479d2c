"""The training-overlap audit and the strict protocol: what each evaluated game replays from
training."""

import json
import re

import pytest
from typer.testing import CliRunner

from wordle_rl.cli.main import app
from wordle_rl.data.files import DataError, write_jsonl
from wordle_rl.data.rl_rows import RlConfig, generate_rl
from wordle_rl.data.sft_games import SftConfig, generate_sft
from wordle_rl.data.splits import check_leakage, make_splits
from wordle_rl.engine.game import pattern_to_str, score
from wordle_rl.environment.parser import parse
from wordle_rl.environment.prompts import PromptStyle, render_conversation
from wordle_rl.evaluation.audit import TrainingIndex, audit_games, audit_summary, state_key


@pytest.fixture(scope="module")
def splits(words):
    return make_splits(words, seed=0)


def _scored(guesses, answer):
    return [(g, score(g, answer)) for g in guesses]


def test_hand_built_case(words):
    """Two SFT conversations and one RL row, written by hand, against four evaluated games."""
    style = PromptStyle("tiles", think=False)
    # game 1 on QUERY (a target no evaluated game shares): CRANE, a refused move, then MOIST, then
    # QUERY
    hist = _scored(["crane", "moist", "query"], "query")
    msgs = render_conversation(
        style, [hist[0], ("<guess>zzzzz</guess>", None, "not a word"), *hist[1:]]
    )[:-1]
    msgs[4]["train"] = False  # the refused move is context, never imitated
    sft1 = {
        "messages": msgs,
        "answer": "query",
        "history": [[g, pattern_to_str(p)] for g, p in hist],
        "refused_at": 1,
    }
    # game 2, a recall game: after CRANE scores GXYYG only CANOE fits, and the solver writes it
    recall = _scored(["crane", "canoe"], "canoe")
    sft2 = {
        "messages": render_conversation(style, recall)[:-1],
        "answer": "canoe",
        "recall": "canoe",
        "history": [[g, pattern_to_str(p)] for g, p in recall],
        "refused_at": None,
    }
    rl = {
        "answer": "query",
        "history": [["crane", pattern_to_str(score("crane", "query"))]],
        "prompt": [],
    }
    index = TrainingIndex()
    index.add_sft_row(sft1, words)
    index.add_sft_row(sft2, words)
    index.add_rl_row(rl)
    q = pattern_to_str(score("crane", "query"))
    assert index.pairs == {
        ">crane",
        f"crane:{q}>moist",
        f"crane:{q} moist:{pattern_to_str(score('moist', 'query'))}>query",
        "crane:GXYYG>canoe",
    }
    assert index.rl_states == {f"crane:{q}"} and index.rows == 3

    def game(answer, guesses, errors=()):
        moves, turn = [], 0
        for g in guesses:
            turn += 1
            if g in errors:
                moves.append(
                    {"turn": turn, "guess": None, "pattern": None, "error": "not_in_word_list"}
                )
                continue
            moves.append(
                {
                    "turn": turn,
                    "guess": g,
                    "pattern": pattern_to_str(score(g, answer)),
                    "error": None,
                }
            )
        return {"answer": answer, "won": guesses[-1] == answer, "turns": turn, "moves": moves}

    games = [
        game("canoe", ["crane", "canoe"]),  # the imitated endgame, won
        # refused move: same state, same class
        game("canoe", ["crane", "xxxxx", "canoe"], errors=("xxxxx",)),
        # CRANE leaves CAIRN as the only fit: a new endgame
        game("cairn", ["crane", "drain", "cairn"]),
        game("moist", ["crane", "moist"]),  # won while other words fitted
        game("cairn", ["crane"] + ["slate"] * 5, errors=("slate",)),
    ]  # lost in a never-imitated endgame
    audit_games(games, index, words)
    assert [g["audit"]["class"] for g in games] == [
        "endgame_imitated",
        "endgame_imitated",
        "endgame_new",
        "won_before_endgame",
        "endgame_new",
    ]
    assert [g["audit"]["endgame_turn"] for g in games] == [2, 2, 2, None, 2]
    assert [m["audit"]["imitated"] for m in games[0]["moves"]] == [True, True]
    assert [m["audit"]["state_seen"] for m in games[2]["moves"]] == [True, False, False]
    assert games[3]["moves"][1]["audit"] == {
        "state_seen": False,
        "rl_state": False,
        "imitated": False,
    }
    assert [g["audit"]["answer_imitated"] for g in games] == [True, True, False, True, False]
    s = audit_summary(games, index)
    assert {k: (c["games"], c["wins"]) for k, c in s["classes"].items()} == {
        "endgame_imitated": (2, 2),
        "endgame_new": (2, 1),
        "won_before_endgame": (1, 1),
        "lost_no_endgame": (0, 0),
    }
    assert (s["wins"], s["winning_moves_imitated"], s["answers_imitated_as_guess"]) == (4, 2, 3)
    lo, hi = s["classes"]["endgame_new"]["win_rate_ci95"]
    assert s["classes"]["endgame_new"]["win_rate"] == 0.5 and 0 < lo < 0.5 < hi < 1


def test_index_from_files_equals_the_parsed_conversations(splits, words, tmp_path):
    """Rows with their history (fast path) and the same conversations parsed and re-scored (teacher
    rows) agree."""
    rows = generate_sft(
        splits,
        SftConfig(
            games=300,
            seed=1,
            think=False,
            style="tiles",
            refused_share=0.5,
            recall_share=0.3,
        ),
        words,
    )
    write_jsonl(rows, tmp_path / "sft" / "sft.jsonl")
    write_jsonl(
        generate_rl(splits, RlConfig(rows=50, style="tiles", think=False), words),
        tmp_path / "rl.jsonl",
    )
    fast = TrainingIndex.from_paths([tmp_path / "sft", tmp_path / "rl.jsonl"], words)
    bare = [{"messages": r["messages"], "answer": r["answer"]} for r in rows]
    write_jsonl(bare, tmp_path / "teacher.jsonl")
    parsed = TrainingIndex.from_paths([tmp_path / "teacher.jsonl"], words)
    assert fast.pairs == parsed.pairs and len(fast.pairs) > 500
    assert fast.rows == 300 + 50 and len(fast.rl_states) > 10
    assert fast.sources == [str(tmp_path / "sft" / "sft.jsonl"), str(tmp_path / "rl.jsonl")]
    # every recall game's last move is an imitated pair whose state leaves only the recalled word
    for r in rows:
        if r.get("recall"):
            assert fast.imitated(state_key(r["history"][:-1]), r["recall"])
    (tmp_path / "broken.jsonl").write_text('{"messages": []}\n{oops\n')
    with pytest.raises(
        DataError, match=re.escape(f"{tmp_path / 'broken.jsonl'}:2: not valid JSON")
    ):
        TrainingIndex.from_paths([tmp_path / "broken.jsonl"], words)
    with pytest.raises(DataError, match="no training data here"):
        TrainingIndex.from_paths([tmp_path / "missing"], words)


def test_strict_protocol_never_ends_a_game_on_a_held_out_word(splits, words):
    held = set(splits.val) | set(splits.test)
    cfg = dict(
        games=400, seed=2, think=False, style="tiles", recall_share=0.3, random_first_share=0.5
    )
    open_rows = generate_sft(splits, SftConfig(**cfg), words)
    strict = generate_sft(splits, SftConfig(**cfg, protocol="strict"), words)
    assert [r["recall"] for r in strict if r.get("recall")] and all(
        splits.split_of(r["recall"]) == "train" for r in strict if r.get("recall")
    )
    assert not [r for r in strict if r["history"][-1][0] in held]
    for (
        r
    ) in strict:  # each conversation still ends on its last played guess (or that guess's feedback)
        assistant = [m for m in r["messages"] if m["role"] == "assistant"]
        assert len(assistant) == len(r["history"]) + (r["refused_at"] is not None) == r["turns"]
    assert check_leakage(strict, splits, "strict", allow_outside=True, protocol="strict") == len(
        strict
    )
    # the open protocol recalls val and test words too: the strict check refuses them and names the
    # rows
    recalled = [
        k
        for k, r in enumerate(open_rows)
        if splits.split_of(r.get("recall") or "") in ("val", "test")
    ]
    assert recalled
    check_leakage(open_rows, splits, "open", allow_outside=True)
    with pytest.raises(DataError, match=r"LEAKAGE: .* end on a val/test word") as e:
        check_leakage(open_rows, splits, "open", allow_outside=True, protocol="strict")
    assert (
        f"open:{recalled[0] + 1}: recall game ends on {open_rows[recalled[0]]['recall']!r}"
        in str(e.value)
    )
    # ordinary games are the same under both protocols except where a lost game ended on a held-out
    # word
    ordinary = [(a, b) for a, b in zip(open_rows, strict) if not a.get("recall")]
    assert all(a == b for a, b in ordinary if a["won"] or a["history"][-1][0] not in held)
    with pytest.raises(DataError, match="protocol must be one of open, strict"):
        generate_sft(
            splits, SftConfig(games=1, protocol="tight", think=True, recall_share=0.0), words
        )


def test_eval_cli_audits_against_training_data(splits, words, tmp_path):
    splits.save(tmp_path / "splits.json")
    rows = generate_sft(
        splits, SftConfig(games=200, seed=0, think=False, style="tiles", recall_share=0.5), words
    )
    write_jsonl(rows, tmp_path / "sft" / "sft.jsonl")
    out = tmp_path / "eval"
    r = CliRunner().invoke(
        app,
        [
            "eval",
            "--solver",
            "candidate",
            "--splits",
            str(tmp_path / "splits.json"),
            "--split",
            "val",
            "--limit",
            "20",
            "--no-train-sample",
            "--style",
            "tiles",
            "--train-data",
            str(tmp_path / "sft"),
            "--out",
            str(out),
        ],
    )
    assert r.exit_code == 0, r.output
    res = json.loads((out / "results.json").read_text())
    a = res["audit"]
    assert sum(c["games"] for c in a["classes"].values()) == 20 and a["training_rows"] == 200
    games = [json.loads(x) for x in (out / "games.jsonl").read_text().splitlines()]
    assert all("audit" in m for g in games for m in g["moves"])
    assert "Training-overlap audit" in (out / "report.md").read_text()
    assert "training-overlap audit" in r.output
    # the games split by whether a trained move of the data writes their answer
    trained = {
        parse(m["content"], "tiles").guess
        for row in rows
        for m in row["messages"]
        if m["role"] == "assistant" and m.get("train", True)
    }
    by = a["by_answer"]
    written = [g for g in games if g["answer"] in trained]
    assert by["written"]["games"] == len(written) and 0 < len(written) < 20
    assert by["never_written"]["games"] == 20 - len(written)
    assert by["written"]["wins"] == sum(g["won"] for g in written)
    assert by["written"]["wins"] + by["never_written"]["wins"] == res["metrics"]["wins"]
    assert by["written"]["moves"] + by["never_written"]["moves"] == res["metrics"]["moves"]
    assert "| written as a guess | " in (out / "report.md").read_text()
    r = CliRunner().invoke(app, ["compare", str(out)])
    assert r.exit_code == 0 and "training-overlap audit" in r.output
    assert "the same games by whether the training data writes the answer" in r.output
    r = CliRunner().invoke(
        app,
        [
            "eval",
            "--solver",
            "candidate",
            "--splits",
            str(tmp_path / "splits.json"),
            "--train-data",
            str(tmp_path / "nothing"),
        ],
    )
    assert r.exit_code == 2 and "no training data here" in r.output
