"""Paired comparisons of two policies on the same answers: the counts and the tests match a hand
computation."""

import json

import pytest
from scipy.stats import binomtest, wilcoxon
from typer.testing import CliRunner

from wordle_rl.cli.main import app
from wordle_rl.data.splits import make_splits
from wordle_rl.evaluation.stats import paired_comparison, read_games


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory, words):
    root = tmp_path_factory.mktemp("paired")
    make_splits(words, seed=0).save(root / "splits.json")
    for solver in ("random", "candidate"):
        r = CliRunner().invoke(
            app,
            [
                "eval",
                "--solver",
                solver,
                "--splits",
                str(root / "splits.json"),
                "--split",
                "val",
                "--limit",
                "60",
                "--out",
                str(root / solver),
                "--seed",
                "3",
            ],
        )
        assert r.exit_code == 0, r.output
    return root


def test_paired_counts_and_tests_match_a_hand_computation(two_runs):
    a, b = read_games(two_runs / "random"), read_games(two_runs / "candidate")
    assert len(a) == len(b) == 60  # the train sample is not part of the comparison
    r = paired_comparison(a, b)
    by_b = {g["answer"]: g for g in b}
    pairs = [(g, by_b[g["answer"]]) for g in a]
    only_a = sum(x["won"] and not y["won"] for x, y in pairs)
    only_b = sum(y["won"] and not x["won"] for x, y in pairs)
    ga = [x["turns"] if x["won"] else 7 for x, _ in pairs]
    gb = [y["turns"] if y["won"] else 7 for _, y in pairs]
    assert (r["only_a"], r["only_b"], r["games"]) == (only_a, only_b, 60)
    assert r["mean_guesses_a"] == pytest.approx(sum(ga) / 60) and r[
        "mean_guesses_b"
    ] == pytest.approx(sum(gb) / 60)
    assert r["mcnemar_p"] == pytest.approx(
        binomtest(only_b, only_a + only_b).pvalue if only_a + only_b else 1.0
    )
    assert r["wilcoxon_p"] == pytest.approx(wilcoxon(gb, ga).pvalue)
    # the candidate solver needs fewer guesses than random candidates
    assert r["mean_guesses_diff"] < 0
    same = paired_comparison(a, a)
    assert (same["only_a"], same["only_b"], same["mcnemar_p"], same["wilcoxon_p"]) == (
        0,
        0,
        1.0,
        1.0,
    )
    with pytest.raises(ValueError, match="same answers"):
        paired_comparison(a, b[:-1])


def test_compare_paired_cli(two_runs):
    r = CliRunner().invoke(
        app, ["compare", str(two_runs / "random"), str(two_runs / "candidate"), "--paired"]
    )
    assert r.exit_code == 0, r.output
    assert "McNemar" in r.output or "paired" in r.output
    res = json.loads((two_runs / "candidate" / "results.json").read_text())
    assert res["metrics"]["mean_guesses_per_game"] == pytest.approx(
        sum(g["turns"] if g["won"] else 7 for g in read_games(two_runs / "candidate")) / 60
    )
    r = CliRunner().invoke(app, ["compare", str(two_runs / "random"), "--paired"])
    assert r.exit_code == 2 and "exactly two run folders" in r.output
