import json
import math
import re

import pytest

from wordle_rl.data.files import DataError, read_jsonl, validate_rows, write_jsonl
from wordle_rl.data.recall import reach_ranking, recall_games
from wordle_rl.data.rl_rows import RlConfig, generate_rl, parse_depth_mix
from wordle_rl.data.sft_games import SftConfig, generate_sft, parse_solver_mix
from wordle_rl.data.splits import Splits, check_leakage, make_splits
from wordle_rl.data.stats import stats
from wordle_rl.engine.game import score, str_to_pattern
from wordle_rl.engine.solvers import RankedSolver
from wordle_rl.environment.prompts import Knowledge, PromptStyle


@pytest.fixture(scope="module")
def splits(words):
    return make_splits(words, seed=0)


@pytest.fixture(scope="module")
def sft_rows(splits, words):
    mix = "entropy:0.6,search:0.2,candidate:0.1,random:0.1"
    return generate_sft(
        splits, SftConfig(games=150, seed=3, solver_mix=mix, think=True, recall_share=0.0), words
    )


def test_splits_are_a_deterministic_partition(words, splits, tmp_path):
    assert (len(splits.train), len(splits.val), len(splits.test)) == (1851, 232, 232)
    assert sorted(splits.train + splits.val + splits.test) == sorted(words.answers)
    assert make_splits(words, seed=0) == splits and make_splits(words, seed=1).test != splits.test
    splits.save(tmp_path / "s.json")
    assert Splits.load(tmp_path / "s.json", words).test == splits.test
    (tmp_path / "bad.json").write_text('{"seed": 0}')
    with pytest.raises(DataError, match="not a splits file"):
        Splits.load(tmp_path / "bad.json", words)
    with pytest.raises(DataError, match="fractions"):
        make_splits(words, fractions=(0.5, 0.5, 0.5))


def test_sft_targets_only_train_and_leakage_check(splits, sft_rows, words):
    assert all(splits.split_of(r["answer"]) == "train" for r in sft_rows)
    assert check_leakage(sft_rows, splits) == len(sft_rows)
    leaked = sft_rows[:3] + [dict(sft_rows[0], answer=splits.test[0])]
    with pytest.raises(DataError, match=r"(?s)LEAKAGE: 1 row.*<rows>:4: target .* test split"):
        check_leakage(leaked, splits)
    validate_rows(sft_rows, "sft", words)


def _candidates(words, history):
    return [a for a in words.answers if all(score(g, a) == p for g, p in history)]


def _bits(guess, cands):
    counts = {}
    for c in cands:
        p = score(guess, c)
        counts[p] = counts.get(p, 0) + 1
    n = len(cands)
    return len(counts), -sum(k / n * math.log2(k / n) for k in counts.values())


def test_rationales_are_true(sft_rows, words):
    checked = 0
    for row in sft_rows[:60]:
        history = [(g, str_to_pattern(p)) for g, p in row["history"]]
        assistant = [m for m in row["messages"] if m["role"] == "assistant"]
        # a refused move has no rationale (checked by the replay test)
        if row["refused_at"] is not None:
            assistant.pop(row["refused_at"])
        assert len(assistant) == len(history)
        for k, msg in enumerate(assistant):
            state, guess = history[:k], history[k][0]
            think = re.fullmatch(r"<think>(.*)</think><guess>(\w+)</guess>", msg["content"], re.S)
            assert think and think.group(2) == guess
            text = think.group(1)
            known = Knowledge.from_history(state).describe()
            assert text.startswith(" ".join(known) if known else "No feedback yet.")
            cands = _candidates(words, state)
            n = int(re.search(r"Possible answers: (\d+)", text).group(1))
            assert n == len(cands)
            listed = re.search(r"Possible answers: \d+ \(([A-Z, ]+)\)", text)
            assert (listed is not None) == (n <= 3)
            if listed:
                assert sorted(w.lower() for w in listed.group(1).split(", ")) == sorted(cands)
            if f"Only {guess.upper()} fits." in text:
                assert cands == [guess]
                continue
            groups, bits = _bits(guess, cands)
            m = re.search(r"(\d+) groups \((\d+\.\d\d) bits\)", text)
            assert int(m.group(1)) == groups and abs(float(m.group(2)) - bits) < 0.006
            if "could be the answer" in text:
                assert guess in cands
            if "cannot be the answer" in text:
                assert guess not in cands
            assert ("Exploring" in text) == (msg.get("train") is False)
            checked += 1
    assert checked > 100


def test_sft_variety_and_shape(sft_rows):
    s = stats(sft_rows)
    assert set(s["solver"]) == {"entropy", "search", "candidate", "random"}
    assert {"opener", "random_first", "solver"} <= set(s["start"])
    # solvers recover from imperfect starts
    assert all(r["won"] for r in sft_rows if r["solver"] != "random")
    for r in sft_rows:  # the candidate and random solvers' moves always fit the feedback so far
        if r["solver"] in ("candidate", "random"):
            hist = [(g, str_to_pattern(p)) for g, p in r["history"]]
            for k in range(1, len(hist)):
                assert all(score(g, hist[k][0]) == p for g, p in hist[:k]), r["history"]
    row = sft_rows[0]
    assert row["messages"][0]["role"] == "system" and row["messages"][-1]["role"] == "assistant"


def test_same_seed_same_bytes(splits, words, tmp_path):
    a = generate_sft(splits, SftConfig(games=40, seed=9, think=True, recall_share=0.0), words)
    b = generate_sft(splits, SftConfig(games=40, seed=9, think=True, recall_share=0.0), words)
    c = generate_sft(splits, SftConfig(games=40, seed=10, think=True, recall_share=0.0), words)
    write_jsonl(a, tmp_path / "a.jsonl")
    write_jsonl(b, tmp_path / "b.jsonl")
    write_jsonl(c, tmp_path / "c.jsonl")
    assert (tmp_path / "a.jsonl").read_bytes() == (tmp_path / "b.jsonl").read_bytes()
    assert (tmp_path / "a.jsonl").read_bytes() != (tmp_path / "c.jsonl").read_bytes()
    r1 = generate_rl(splits, RlConfig(rows=50, seed=2, think=True), words)
    r2 = generate_rl(splits, RlConfig(rows=50, seed=2, think=True), words)
    assert json.dumps(r1) == json.dumps(r2)


def test_solver_mix_is_parsed_and_checked(splits, words):
    assert parse_solver_mix("candidate:3,random:1,search:0") == {"candidate": 0.75, "random": 0.25}
    for bad, why in (
        ("candidate", "solver:weight pairs"),
        ("candidate:x", "solver:weight pairs"),
        ("oracle:1", "unknown solver"),
        ("random:0", "not all zero"),
        ("random:-1", "weights >= 0"),
    ):
        with pytest.raises(DataError, match=why):
            parse_solver_mix(bad)
    with pytest.raises(DataError, match="unknown solver"):
        generate_sft(
            splits,
            SftConfig(games=5, solver_mix="oracle:1", think=True, recall_share=0.0),
            words,
        )


def test_bad_files_name_file_line_and_reason(tmp_path, words):
    f = tmp_path / "rows.jsonl"
    f.write_text('{"answer": "crane", "history": []}\n{"answer": "zzzzz"}\n[1, 2]\n')
    with pytest.raises(DataError, match=r"rows.jsonl:3: expected a JSON object"):
        read_jsonl(f)
    f.write_text(
        '{"answer": "crane", "history": []}\n{"answer": "zzzzz"}\n{"history": []}\n'
        '{"answer": "crane", "history": [["qqqqq", "GGXXX"]]}\n'
        '{"answer": "crane", "history": [["slate", "GQ"]]}\n'
    )
    with pytest.raises(DataError) as e:
        validate_rows(read_jsonl(f), str(f), words)
    msg = str(e.value)
    assert f"{f}:2: answer 'zzzzz' is not in the answer list" in msg
    assert f"{f}:3: missing 'answer'" in msg
    assert f"{f}:4: history guess 'qqqqq'" in msg
    assert f"{f}:5: history pattern 'GQ'" in msg
    f.write_text("{broken\n")
    with pytest.raises(DataError, match=r"rows.jsonl:1: not valid JSON"):
        read_jsonl(f)


def _replay(rows, words, think: bool = True) -> list[tuple[dict, str]]:
    """Replay every conversation in the environment, asserting it is what the environment itself
    answers.

    Returns ``(row, error code)`` for each refused move met."""
    from wordle_rl.environment.env import EnvConfig, WordleEnv
    from wordle_rl.environment.rewards import RewardContext

    style, ctx = PromptStyle(think=think), RewardContext(words)
    refused = []
    for row in rows:
        env = WordleEnv(EnvConfig(style=style), ctx=ctx)
        obs = env.reset(answer=row["answer"])
        msgs = row["messages"]
        assert msgs[:2] == obs.messages
        for k in range(2, len(msgs), 2):
            step = env.step(msgs[k]["content"])
            if step.info["error"] is not None:
                refused.append((row, step.info["error"]))
                assert msgs[k]["train"] is False and k == 2 + 2 * row["refused_at"]
            # the conversation ends on the winning guess, or on the last feedback of a lost game
            if step.done:
                assert k + 2 >= len(msgs) and step.info["won"] == row["won"]
            else:
                assert step.observation.messages[-1]["content"] == msgs[k + 1]["content"]
    assert len(refused) == sum(r["refused_at"] is not None for r in rows)
    return refused


def test_sft_games_replay_exactly_in_the_environment(sft_rows, words):
    """Every conversation, refused moves included, is what the environment itself answers to those
    moves."""
    refused = _replay(sft_rows, words)
    assert len(refused) > 5
    assert {err for _, err in refused} <= {"not_in_word_list", "wrong_length"}
    assert {row["refused_kind"] for row, _ in refused} == {"misspelt"}


def test_a_refused_repeat_is_followed_by_a_new_word(splits, words):
    """With repeat_share 1 a refused move after the first turn repeats a guess the game has
    played, and the environment refuses it as such; the next move is a new word."""
    cfg = SftConfig(games=80, seed=5, think=False, refused_share=1.0, repeat_share=1.0)
    rows = [r for r in generate_sft(splits, cfg, words) if r["refused_at"] is not None]
    refused = _replay(rows, words, think=False)
    kinds = {(row["refused_kind"], row["refused_at"] > 0, err) for row, err in refused}
    assert {(k, err) for k, later, err in kinds if later} == {("repeat", "repeated_guess")}
    assert {k for k, later, _ in kinds if not later} == {"misspelt"}  # no guess to repeat yet
    for row in rows:
        if row["refused_kind"] == "repeat":
            k = 2 + 2 * row["refused_at"]
            text = row["messages"][k]["content"]
            assert text in [m["content"] for m in row["messages"][2:k:2]]
            assert row["messages"][k + 2]["content"] != text
    with pytest.raises(ValueError, match="repeat_share"):
        generate_sft(splits, SftConfig(games=2, repeat_share=1.5), words)


def _near(refused: str, word: str) -> bool:
    """Whether ``refused`` is ``word`` cut short or with one letter changed: a misspelling."""
    if len(refused) < len(word):
        return word.startswith(refused)
    return len(refused) == len(word) and sum(a != b for a, b in zip(refused, word)) == 1


@pytest.mark.parametrize("source", ["next", "other"])
def test_a_misspelt_refusal_misspells_the_next_guess_or_another_word(splits, words, source):
    """misspelt_from next: the refused text misspells the move that follows it; other: it
    misspells a train answer drawn at random, so the move that follows is hardly ever near it."""
    cfg = SftConfig(games=120, seed=3, think=False, refused_share=1.0, misspelt_from=source)
    rows = [r for r in generate_sft(splits, cfg, words) if r["refused_kind"] == "misspelt"]
    assert len(rows) > 80
    _replay(rows, words, think=False)
    near = []
    for row in rows:
        k = 2 + 2 * row["refused_at"]
        refused, after = (
            re.fullmatch("<guess>(.*)</guess>", row["messages"][i]["content"]).group(1)
            for i in (k, k + 2)
        )
        near.append(_near(refused, after))
    assert all(near) if source == "next" else sum(near) <= len(near) // 10
    with pytest.raises(ValueError, match="misspelt_from"):
        SftConfig(misspelt_from="previous")


# candidate-solver games alone: every move imitated, no exploration, refusals or recall games
CANDIDATE_ONLY = dict(
    think=False,
    solver_mix="candidate:1",
    random_first_share=0.0,
    random_second_share=0.0,
    refused_share=0.0,
    recall_share=0.0,
)


def test_recall_games_end_on_the_only_fitting_answer_word(splits, words):
    """A recall game plays an outside word next to an answer word W and ends on W, written where W
    is the only answer word that fits (re-scored over the whole list); the words W are taken in turn
    from every split alike."""
    rows = generate_sft(splits, SftConfig(games=60, seed=4, think=False, recall_share=0.5), words)
    recall = [r for r in rows if r["solver"] == "recall"]
    assert len(recall) == 30 and len(rows) == 60
    for r in recall:
        target, word = r["answer"], r["recall"]
        assert r["split"] == "outside" and words.is_allowed(target) and not words.is_answer(target)
        assert 1 <= sum(a != b for a, b in zip(target, word)) <= 2
        hist = [(g, str_to_pattern(p)) for g, p in r["history"]]
        assert hist[-1][0] == word and all(p == score(g, target) for g, p in hist) and not r["won"]
        fits = [a for a in words.answers if all(score(g, a) == p for g, p in hist[:-1])]
        assert fits == [word]
        assert r["messages"][-1] == {"role": "assistant", "content": f"<guess>{word}</guess>"}
        # no feedback after W: the answer stays unsaid
        assert len(r["messages"]) == 2 + 2 * len(hist) - 1
    # each word once before any comes again
    assert len({r["recall"] for r in recall}) == len(recall)
    assert {"train"} < {
        splits.split_of(r["recall"]) for r in recall
    }  # held-out words too, never as targets
    with pytest.raises(DataError, match=r"LEAKAGE"):
        check_leakage(rows, splits)
    assert check_leakage(rows, splits, allow_outside=True) == len(rows)
    with pytest.raises(DataError, match="recall_share"):
        generate_sft(splits, SftConfig(games=2, recall_share=1.5, think=True), words)
    # one turn can never reach W: no endless loop
    with pytest.raises(DataError, match=r"within 1 turns in 2 tries"):
        recall_games(words, 1, PromptStyle("tiles", think=False), max_turns=1, tries=2)


def test_recall_words_spread_over_the_splits_made_with_the_same_seed(splits, words):
    """The splits shuffle the answer list with seed 0 too: the recall order must not follow theirs,
    which would recall every train word before the first held-out one."""
    rows = recall_games(words, 100, PromptStyle("xml", think=False), seed=splits.seed)
    held_out = sum(splits.split_of(r["recall"]) != "train" for r in rows)
    assert 5 <= held_out <= 40  # 20 expected


def test_recall_games_by_the_mix_teacher_follow_its_path_on_the_word(splits, words):
    """With recall_teacher "mix" a recall game is the path the mix's solver takes on W: each guess
    is the ranked solver's at W's own feedback, the last one W."""
    rows = generate_sft(
        splits,
        SftConfig(
            games=40,
            seed=0,
            think=False,
            recall_share=0.5,
            solver_mix="ranked:1",
            recall_teacher="mix",
        ),
        words,
    )
    recall = [r for r in rows if r["solver"] == "recall"]
    assert len(recall) == 20
    ranked = RankedSolver(words)
    for r in recall:
        word = r["recall"]
        guesses = [g for g, _ in r["history"]]
        path = [(g, score(g, word)) for g in guesses]
        assert guesses[-1] == word and word not in guesses[:-1]
        assert guesses == [ranked.guess(path[:i]) for i in range(len(path))]
        # the target is no held-out answer, and only W's own feedback would tell it from W
        assert splits.split_of(r["answer"]) in (None, "train")
        assert [score(g, r["answer"]) for g in guesses[:-1]] == [p for _, p in path[:-1]]
        assert r["won"] == (r["answer"] == word)
    with pytest.raises(ValueError, match="recall_teacher must be one of candidate, mix"):
        SftConfig(recall_teacher="oracle")


def test_mix_recall_games_reach_held_out_words_and_more_once_reranked(splits, words):
    """Any outside word or train answer with W's feedback on the teacher's path stands in as a mix
    recall game's target, not only a word one or two letters from W: most held-out words have a
    game. Reranking the ranked teacher leaves far fewer without one, the recall games then reach
    every held-out word but those it reports, and the teacher still plays a fitting answer word
    at every state."""
    held_out = list(splits.val) + list(splits.test)
    pool = [w for w in words.allowed if not words.is_answer(w)] + list(splits.train)
    before = reach_ranking(RankedSolver(words), words, held_out, pool, rounds=0)
    assert len(before) < 0.4 * len(held_out)
    ranked = RankedSolver(words)
    left = reach_ranking(ranked, words, held_out, pool, rounds=2)
    assert len(left) < 0.6 * len(before)
    rows = recall_games(
        words,
        len(words.answers),
        PromptStyle("xml", think=False),
        teachers={ranked: 1.0},
        stand_ins=pool,
    )
    assert set(held_out) - {r["recall"] for r in rows} <= set(left)
    assert all(splits.split_of(r["answer"]) in (None, "train") for r in rows)
    for r in rows:
        path = [(g, score(g, r["recall"])) for g, _ in r["history"]]
        fitting = [
            words.answer_index[g] in ranked.candidates(path[:k]) for k, (g, _) in enumerate(path)
        ]
        assert all(fitting[1:])
    with pytest.raises(ValueError, match="recall_reach reranks the ranked solver"):
        SftConfig(recall_reach=True, solver_mix="candidate:1", recall_teacher="mix")


def test_wide_rl_rows_target_outside_words_and_the_leakage_guard_holds(splits, words, tmp_path):
    from wordle_rl.environment.env import WordleEnv
    from wordle_rl.training.grpo import load_rl_rows

    cfg = RlConfig(rows=60, seed=3, think=False, wide_share=0.5, depth_mix="0:0.3,2:0.7")
    rows = generate_rl(splits, cfg, words)
    wide = [r for r in rows if r["split"] == "outside"]
    assert 15 < len(wide) < 45
    for r in rows:
        if r["split"] == "outside":
            assert words.is_allowed(r["answer"]) and not words.is_answer(r["answer"])
        else:
            assert splits.split_of(r["answer"]) == "train"
        hist = [(g, str_to_pattern(p)) for g, p in r["history"]]
        assert all(score(g, r["answer"]) == p and g != r["answer"] for g, p in hist)
    write_jsonl(rows, tmp_path / "rl.jsonl")
    splits.save(tmp_path / "splits.json")
    assert len(load_rl_rows(tmp_path / "rl.jsonl", tmp_path / "splits.json")) == len(rows)
    write_jsonl(rows + [dict(rows[0], answer=splits.val[0], history=[])], tmp_path / "leak.jsonl")
    with pytest.raises(DataError, match="val split"):
        load_rl_rows(tmp_path / "leak.jsonl", tmp_path / "splits.json")
    # a game on an outside word plays to the end
    r = next(w for w in wide if len(w["history"]) == 2)
    env = WordleEnv(words=words)
    env.reset(answer=r["answer"], history=[tuple(h) for h in r["history"]])
    played = {g for g, _ in r["history"]} | {r["answer"]}
    for g in [w for w in ("zonal", "pithy") if w not in played] + [r["answer"]]:
        step = env.step(f"<guess>{g}</guess>")
        assert all(math.isfinite(v) for v in step.info["components"].values())
    assert step.done and env.won and step.info["components"]["win"] > 0
    with pytest.raises(DataError, match="wide_share"):
        generate_rl(splits, RlConfig(rows=2, wide_share=1.5, think=True), words)


def test_rl_rows(splits, words):
    rows = generate_rl(
        splits,
        RlConfig(
            rows=300,
            seed=1,
            depth_mix="0:0.2,2:0.5,4:0.3",
            random_move_share=0.3,
            think=True,
            wide_share=0.0,
        ),
        words,
    )
    assert all(r["split"] == "train" and splits.split_of(r["answer"]) == "train" for r in rows)
    depths = stats(rows)["history_depth"]
    assert set(depths) <= {0, 1, 2, 3, 4} and depths.get(2, 0) > 50
    for r in rows:
        hist = [(g, str_to_pattern(p)) for g, p in r["history"]]
        assert all(score(g, r["answer"]) == p for g, p in hist)
        assert all(g != r["answer"] for g, _ in hist)  # never already solved
        assert len(r["prompt"]) == 2 + 2 * len(hist) and r["prompt"][-1]["role"] == "user"
    with pytest.raises(DataError, match="depth mix"):
        parse_depth_mix("0:1,9:1")
    assert parse_depth_mix("2:1, 0:3") == {0: 0.75, 2: 0.25}
    with pytest.raises(DataError, match="depths must be 0-4"):
        generate_rl(splits, RlConfig(rows=5, depth_mix="7:1", think=True), words)


def test_ranked_teacher_games_follow_the_ranking_file(splits, words, tmp_path):
    ranking = tmp_path / "ranking.txt"
    ranking.write_text("\n".join(reversed(words.answers)) + "\n")
    clean = {"opener_share": 0.0, "random_first_share": 0.0, "random_second_share": 0.0}
    cfg = SftConfig(
        games=30, seed=2, solver_mix="ranked:1", ranking=str(ranking), think=False,
        recall_share=0.0, refused_share=0.0, **clean,
    )  # fmt: skip
    rows = generate_sft(splits, cfg, words)
    assert len(rows) == 30 and all(r["solver"] == "ranked" for r in rows)
    for r in rows:
        hist = [(g, str_to_pattern(p)) for g, p in r["history"]]
        for k in range(1, len(hist)):
            fits = [w for w in words.answers if all(score(g, w) == p for g, p in hist[:k])]
            assert hist[k][0] == fits[-1]  # the ranking is the answer list backwards
    missing = SftConfig(games=2, solver_mix="ranked:1", ranking=str(tmp_path / "none.txt"))
    with pytest.raises(DataError, match="cannot read the ranking file .*none.txt"):
        generate_sft(splits, missing, words)
