"""Branch rollouts and the strict game return: one decision per completion, outcomes ordered
strictly."""

import json

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from wordle_rl.branch import BranchRollout, decision_states
from wordle_rl.env import EnvConfig, WordleEnv
from wordle_rl.game import pattern_to_str, score
from wordle_rl.grpo import WordleGRPOConfig, load_rl_rows, run_grpo
from wordle_rl.models import load_model
from wordle_rl.rewards import game_return
from wordle_rl.rollout import ROW_KEY

MOVES = st.lists(
    st.sampled_from(["crane", "slate", "moist", "pious", "abbey", "xxxxx", "<guess>", "nymph"]),
    min_size=1,
    max_size=6,
)


def _play(answer: str, moves: list[str]) -> tuple[bool, int, float]:
    """A real game in the environment: (won, turns used, share of legal moves)."""
    env = WordleEnv(EnvConfig())
    env.reset(answer=answer)
    errors = []
    for m in moves:
        if env.done:
            break
        errors.append(env.step(f"<guess>{m}</guess>").info["error"])
    while not env.done:  # lose the rest of the game on refused moves
        errors.append(env.step("no guess").info["error"])
    return env.won, env.turns_used, sum(e is None for e in errors) / len(errors)


@settings(max_examples=60, deadline=None)
@given(
    st.sampled_from(["pious", "abbey", "nymph"]),
    MOVES,
    st.sampled_from(["pious", "abbey", "nymph"]),
    MOVES,
    st.floats(0, 0.999),
)
def test_game_return_orders_outcomes_strictly(answer_a, moves_a, answer_b, moves_b, shaping):
    a, b = _play(answer_a, moves_a), _play(answer_b, moves_b)
    ra, rb = (game_return(won, turns, 6, legal, shaping) for won, turns, legal in (a, b))
    if a[0] and not b[0]:
        assert ra > rb  # every win beats every loss
    if a[0] and b[0] and a[1] < b[1]:
        assert ra > rb  # a win in k turns beats every win in k + 1 (refused moves count as turns)
    if a[:2] == b[:2]:
        assert abs(ra - rb) < 1  # shaping only orders equal outcomes


def test_game_return_refuses_bad_arguments():
    with pytest.raises(ValueError, match="shaping must be in"):
        game_return(True, 3, shaping=1.0)
    with pytest.raises(ValueError, match="turns must be 1-6"):
        game_return(False, 7)


def test_branch_groups_share_one_state_of_the_greedy_game(trained_micro, as_trainer):
    root, model_path = trained_micro
    model, tok = load_model(str(model_path), threads=1)
    rows = load_rl_rows(root / "rl")
    cfg = WordleGRPOConfig(
        sft_coef=0.0,
        eval_val_every=0,
        model=str(model_path),
        data=str(root / "rl"),
        output_dir=str(root / "b"),
        num_generations=4,
        per_device_train_batch_size=8,
        max_turn_tokens=10,
        rollout="branch",
        temperature=1.5,
    )
    ro = BranchRollout(cfg, rows, tok)
    # the greedy path is deterministic: the same rows played twice give the same games
    again = [ro.play(model, [0, 3], sample_turns=0) for _ in range(2)]
    assert [g["completion_ids"] for g in again[0]] == [g["completion_ids"] for g in again[1]]
    torch.manual_seed(0)
    out = ro(
        [[{"role": "system", "content": "", ROW_KEY: r}] for r in (0, 0, 0, 0, 3, 3, 3, 3)],
        as_trainer(model),
    )
    assert len(out["completion_ids"]) == 8 and out["logprobs"] is None
    for k in range(0, 8, 4):
        group = range(k, k + 4)
        assert len({tuple(out["prompt_ids"][i]) for i in group}) == 1  # one state per group
        prompt = tok.decode(out["prompt_ids"][k])
        for guess, _ in rows[0 if k == 0 else 3]["history"]:  # the state extends the row's history
            assert guess.upper() in prompt.upper()
        for i in group:
            completion = tok.decode(out["completion_ids"][i], skip_special_tokens=False)
            # one move only
            assert "<|im_start|>" not in completion and completion.count("<|im_end|>") <= 1
            assert out["env_mask"][i] == [1] * len(out["completion_ids"][i])
            assert out["episode_return"][i] == game_return(out["won"][i], out["turns"][i], 6)
            assert out["won"][i] or out["turns"][i] == 6
    # endgame states: the first state of the greedy game in which the row's answer is the only
    # fitting answer word
    cfg.branch_states = "endgame"
    end = BranchRollout(cfg, rows, tok)
    out = end(
        [[{"role": "system", "content": "", ROW_KEY: r}] for r in (0, 0, 0, 0, 3, 3, 3, 3)],
        as_trainer(model),
    )
    assert end._only_fit([["crane", "GXYYG"]], "canoe") and not end._only_fit(
        [["crane", "XXXXX"]], "moist"
    )
    # the groups' greedy games, batched as the rollout does
    greedy = end.play(model, [0, 3], sample_turns=0)
    for k, r, game in ((0, 0, greedy[0]), (4, 3, greedy[1])):
        states = decision_states(rows[r], game["moves"])
        only = [s for s in states if end._only_fit(s, rows[r]["answer"])]
        if only:  # the group's prompt is that state's conversation
            prompt = tok.decode(out["prompt_ids"][k])
            assert all(g.upper() in prompt.upper() for g, _ in only[0])
            assert prompt.upper().count("<|IM_START|>ASSISTANT") == len(only[0]) + 1
    # mistake states: the first decision whose greedy move was refused or does not fit the feedback
    # before it
    fit = [["raise", pattern_to_str(score("raise", "mount"))]]
    states = [[], fit, fit + [["could", pattern_to_str(score("could", "mount"))]]]
    assert end._first_mistake(states, [("raise", "x"), ("could", "x"), ("mount", "x")]) is None
    # R in RAISE is gone
    assert end._first_mistake(states, [("raise", "x"), ("crane", "x"), ("mount", "x")]) == 1
    assert end._first_mistake(states[:2], [("raise", "x"), (None, None)]) == 1  # refused
    cfg.branch_states = "mistake"
    mis = BranchRollout(cfg, rows, tok)
    mis(
        [[{"role": "system", "content": "", ROW_KEY: r}] for r in (0, 0, 0, 0, 3, 3, 3, 3)],
        as_trainer(model),
    )
    assert 0 <= mis.last_stats["wordle/branch_on_mistake"] <= 1
    stats = ro.last_stats
    assert (
        0 <= stats["wordle/greedy_win_rate"] <= 1 and 1 <= stats["wordle/greedy_mean_guesses"] <= 7
    )
    assert stats["wordle/branch_depth"] >= 0


def test_decision_states_stop_at_the_first_refused_move():
    row = {"history": [["raise", pattern_to_str(score("raise", "mount"))]]}
    moves = [
        ("could", pattern_to_str(score("could", "mount"))),
        ("zzzzz", None),
        ("mount", "GGGGG"),
    ]
    moves[1] = (None, None)
    states = decision_states(row, moves)
    assert [len(s) for s in states] == [
        1,
        2,
    ]  # before COULD, and before the refused move; never after it


def test_grpo_with_branch_rollouts_trains(trained_micro):
    root, model_path = trained_micro
    before = {k: v.clone() for k, v in load_model(str(model_path))[0].state_dict().items()}
    out = root / "run-branch"
    cfg = WordleGRPOConfig(
        eval_val_every=0,
        model=str(model_path),
        data=str(root / "rl"),
        output_dir=str(out),
        max_steps=2,
        num_generations=4,
        per_device_train_batch_size=8,
        max_turn_tokens=8,
        threads=1,
        learning_rate=1e-2,
        temperature=1.5,
        save_steps=2,
        disable_tqdm=True,
        rollout="branch",
        sft_data=str(root / "sft"),
        sft_coef=0.5,
        sft_batch_size=4,
    )
    run_grpo(cfg)
    log = [e for e in json.loads((out / "wordle_rl_grpo_log.json").read_text()) if "loss" in e]
    assert len(log) == 2 and all(abs(e["loss"]) < 1e6 for e in log)
    assert all(
        "wordle/greedy_win_rate" in e and "rewards/game_return_reward/mean" in e for e in log
    )
    after = load_model(str(out))[0].state_dict()
    assert any(not torch.equal(before[k], after[k]) for k in before)
    with pytest.raises(ValueError, match="takes no reward curriculum"):
        WordleGRPOConfig(output_dir="unused", rollout="branch", curriculum="step")
    with pytest.raises(ValueError, match="rollout must be"):
        WordleGRPOConfig(output_dir="unused", rollout="tree")
    with pytest.raises(ValueError, match="branch_states must be"):
        WordleGRPOConfig(output_dir="unused", rollout="branch", branch_states="late")


def test_guided_branch_moves_are_allowed_words_that_fit_the_state(trained_micro, as_trainer):
    """With branch_guided=k the first k moves of every group are sampled among the allowed words
    that fit the state's feedback; the others stay the policy's own free samples. With
    branch_states="second" each group forms after the greedy game's first move."""
    from wordle_rl.game import consistent_with
    from wordle_rl.parser import parse
    from wordle_rl.rewards import as_history
    from wordle_rl.words import load_word_lists

    root, model_path = trained_micro
    model, tok = load_model(str(model_path), threads=1)
    rows = load_rl_rows(root / "rl")
    cfg = WordleGRPOConfig(
        sft_coef=0.0,
        eval_val_every=0,
        output_dir=str(root / "g"),
        num_generations=4,
        per_device_train_batch_size=16,
        max_turn_tokens=10,
        rollout="branch",
        branch_guided=2,
        branch_states="second",
        temperature=1.5,
    )
    ro = BranchRollout(cfg, rows, tok)
    torch.manual_seed(0)
    prompts = [
        [{"role": "system", "content": "", ROW_KEY: r}] for r in (0, 1, 2, 3) for _ in "abcd"
    ]
    out = ro(prompts, as_trainer(model))
    allowed = set(load_word_lists().allowed)
    for i, row in enumerate(ro.last_rows):
        start = rows[(0, 1, 2, 3)[i // 4]]["history"]  # "second": the state after one greedy move
        assert row["history"][: len(start)] == start and len(row["history"]) <= len(start) + 1
        text = tok.decode(out["completion_ids"][i], skip_special_tokens=True)
        guess = parse(text, ro.style).guess
        if i % 4 < 2:
            assert guess in allowed and consistent_with(as_history(row["history"]), guess), guess
    stats = ro.last_stats
    assert {"wordle/guided_return", "wordle/sampled_return"} <= set(stats)
    with pytest.raises(ValueError, match="branch_guided must be in"):
        WordleGRPOConfig(output_dir="unused", rollout="branch", branch_guided=8)
    with pytest.raises(ValueError, match="needs rollout='branch'"):
        WordleGRPOConfig(output_dir="unused", branch_guided=1)


@pytest.mark.parametrize("reward", ["expected", "expected-candidate"])
def test_expected_return_scores_a_move_from_the_state_alone(trained_micro, reward):
    """branch_reward=expected*: a move's return is max_turns + 1 minus the turns before it, itself,
    and the solver's expected guesses after it, over the public answer words that fit."""
    from wordle_rl.rewards import as_history

    root, model_path = trained_micro
    _, tok = load_model(str(model_path), threads=1)
    cfg = WordleGRPOConfig(
        sft_coef=0.0,
        eval_val_every=0,
        output_dir=str(root / "e"),
        rollout="branch",
        branch_reward=reward,
    )
    ro = BranchRollout(cfg, load_rl_rows(root / "rl"), tok)
    answers = ro.ctx.words.answers
    for a in answers:  # a state two answer words fit
        h = [[g, pattern_to_str(score(g, a))] for g in ("crane", "moist")]
        cands = ro.ctx.candidates(as_history(h))
        if len(cands) == 2:
            break
    one, other = (answers[int(i)] for i in cands)
    mine = pattern_to_str(score(one, other))
    assert ro._expected_return(h, one, mine) == 7 - 2 - 1.5  # wins now half the time, else next
    assert ro._expected_return(h, "xxxxx", None) == 7 - 2 - 2.5  # refused: a turn lost
    assert ro._expected_return([], "crane", "XXXXX") > ro._expected_return([], "fuzzy", "XXXXX")


def test_fits_reward_scores_the_sampled_move_alone(trained_micro, as_trainer):
    """branch_reward=fits: each branch is the sampled move and nothing after it (the game is not
    finished), and its return is 1 exactly when that move is a public answer word that fits every
    feedback of the group's state."""
    from wordle_rl.game import consistent_with
    from wordle_rl.parser import parse
    from wordle_rl.rewards import as_history

    root, model_path = trained_micro
    model, tok = load_model(str(model_path), threads=1)
    rows = load_rl_rows(root / "rl")
    cfg = WordleGRPOConfig(
        sft_coef=0.0,
        eval_val_every=0,
        output_dir=str(root / "f"),
        num_generations=4,
        per_device_train_batch_size=16,
        max_turn_tokens=10,
        rollout="branch",
        branch_reward="fits",
        temperature=1.5,
    )
    ro = BranchRollout(cfg, rows, tok)
    torch.manual_seed(0)
    prompts = [
        [{"role": "system", "content": "", ROW_KEY: r}] for r in (0, 1, 2, 3) for _ in "abcd"
    ]
    out = ro(prompts, as_trainer(model))
    answers = set(ro.ctx.words.answers)
    paid = 0
    for i, row in enumerate(ro.last_rows):
        text = tok.decode(out["completion_ids"][i], skip_special_tokens=True)
        guess = parse(text, ro.style, words=ro.ctx.words).guess
        fits = guess in answers and consistent_with(as_history(row["history"]), guess)
        assert out["episode_return"][i] == float(fits), (guess, row["history"])
        assert out["won"][i] == (guess == row["answer"])
        assert out["turns"][i] == len(row["history"]) + 1  # one move played from the state
        paid += fits
    assert paid < len(out["episode_return"])  # a hot micro model misses
    with pytest.raises(ValueError, match="branch_reward must be one of"):
        WordleGRPOConfig(output_dir="unused", rollout="branch", branch_reward="answer")


def test_class_values_weigh_every_fitting_word_and_never_play_a_held_out_one(
    trained_micro, tmp_path, as_trainer
):
    """branch_reward=classes: a move is worth the expected return over the public answer words
    that fit its state, the policy finishing each drawn feedback class greedily on a word that is
    no val or test answer; classes of held-out words only still count, at a stand-in value."""
    from wordle_rl.rewards import as_history
    from wordle_rl.splits import make_splits

    root, model_path = trained_micro
    model, tok = load_model(str(model_path), threads=1)
    splits = make_splits(seed=0)
    splits.save(tmp_path / "splits.json")
    held = splits.held_out()
    cfg = WordleGRPOConfig(
        sft_coef=0.0,
        eval_val_every=0,
        output_dir=str(tmp_path / "c"),
        splits=str(tmp_path / "splits.json"),
        num_generations=2,
        rollout="branch",
        branch_states="multi",
        branch_reward="classes",
        branch_classes=3,
    )
    ro = BranchRollout(cfg, load_rl_rows(root / "rl"), tok)
    answers = ro.ctx.words.answers
    # a state with two fitting words, one held out and one not
    pair = None
    for a in answers:
        h = [[g, pattern_to_str(score(g, a))] for g in ("crane", "moist")]
        fits = [answers[int(i)] for i in ro.ctx.candidates(as_history(h))]
        if len(fits) == 2 and len(set(fits) & held) == 1:
            pair = h, next(w for w in fits if w in held), next(w for w in fits if w not in held)
            break
    assert pair is not None
    h, held_word, train_word = pair
    # guessing the held-out word: it wins now on itself; the other class is finished on the
    # train word, as often as drawn
    win, weight, plan, held_sizes = ro._class_plan(h, held_word)
    assert win == 1.0 and weight == 1.0 and held_sizes == []
    assert len(plan) == 3 and {a for a, _, _ in plan} == {train_word}
    assert all(
        hist[-1] == [held_word, pattern_to_str(score(held_word, train_word))] for _, hist, _ in plan
    )
    # guessing the train word: the class of the held-out word is never played
    win, weight, plan, held_sizes = ro._class_plan(h, train_word)
    assert win == 1.0 and weight == 0.0 and plan == [] and held_sizes == [1]
    # on the last turn every other class is a loss: a fitting word is worth its win chance
    fuzzy = ["fuzzy", pattern_to_str(score("fuzzy", train_word))]
    late = h + [fuzzy] * 3
    n_fit = len(ro.ctx.candidates(as_history(late)))
    values = ro.class_values(model, [{"history": late}] * 2, [(train_word, None), (None, None)])
    assert values[0] == pytest.approx(1.0 / n_fit)  # one turn left: a win now or a loss
    assert values[1] == pytest.approx(max(0.0, values[0] - 1.0))  # refused: a turn lost
    # with turns left, the value mixes a win now and the finished games of the other class
    values = ro.class_values(model, [{"history": h}] * 2, [(held_word, None), (train_word, None)])
    after = h + [[held_word, pattern_to_str(score(held_word, train_word))]]
    cont = ro.play(model, [], sample_turns=0, rows=[{"answer": train_word, "history": after}])[0]
    finished = game_return(cont["won"], cont["turns"], 6)
    assert values[0] == pytest.approx((6 - len(h) + finished) / 2)
    # the held-out class takes the mean return of this call's finished classes of its size
    assert values[1] == pytest.approx((6 - len(h) + finished) / 2)
    # the whole rollout: each group's state is past the opener with two or more words fitting
    # (where the greedy game has one), every move scored by its class value
    torch.manual_seed(0)
    out = ro(
        [[{"role": "system", "content": "", ROW_KEY: r}] for r in (0, 0, 3, 3)], as_trainer(model)
    )
    greedy = ro.play(model, [0, 3], sample_turns=0)
    for k, r in ((0, 0), (2, 3)):
        states = decision_states(ro.rows[r], greedy[k // 2]["moves"])
        multi = [x for x in states if x and len(ro.ctx.candidates(as_history(x))) > 1]
        assert ro.last_rows[k]["history"] in (multi or states)
    assert len(out["episode_return"]) == 4 and all(0 <= v <= 6 for v in out["episode_return"])
    # branch_class_words="rl": classes are finished on rl-split words only
    with_rl = make_splits(seed=0, rl_share=0.2)
    with_rl.save(tmp_path / "rl.json")
    cfg.branch_class_words, cfg.splits = "rl", str(tmp_path / "rl.json")
    ro_rl = BranchRollout(cfg, ro.rows, tok)
    win, weight, plan, unplayed = ro_rl._class_plan([["crane", "XXXXX"]], "moist")
    assert plan and {a for a, _, _ in plan} <= set(with_rl.rl)
    # every fitting word is counted once: in its own win, a played class or one left unplayed
    n_fit = len(ro.ctx.candidates(as_history([["crane", "XXXXX"]])))
    assert win == 1.0 and win + weight + sum(unplayed) == n_fit and unplayed
    # each drawn class carries its size: the words that fit after the move and its feedback
    assert all(len(ro.ctx.candidates(as_history(h))) == size for _, h, size in plan)
    cfg.splits = str(tmp_path / "splits.json")  # no rl split
    with pytest.raises(ValueError, match="needs a splits file with an rl split"):
        BranchRollout(cfg, ro.rows, tok)._class_plan([["crane", "XXXXX"]], "moist")
    with pytest.raises(ValueError, match="branch_classes must be >= 1"):
        WordleGRPOConfig(
            output_dir="unused", rollout="branch", branch_reward="classes", branch_classes=0
        )
