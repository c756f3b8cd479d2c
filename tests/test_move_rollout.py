"""Move rollouts: groups of single moves at states of the policy's own games (refused moves
included), each scored by whether it could still be the answer."""

import json
import re

import pytest
import torch

from wordle_rl.data.splits import Splits
from wordle_rl.engine.game import consistent_with, pattern_to_str, score
from wordle_rl.environment.parser import parse
from wordle_rl.environment.rewards import as_history
from wordle_rl.evaluation.audit import TrainingIndex, state_key
from wordle_rl.models.embedded import load_model
from wordle_rl.training.grpo import WordleGRPOConfig, load_rl_rows, run_grpo
from wordle_rl.training.letter_ids import LETTERS
from wordle_rl.training.move_rollout import RECALL_STATES_DIR, MoveRollout, decision_prefixes
from wordle_rl.training.rollout import ROW_KEY


def _cfg(root, **kw):
    base = dict(
        sft_coef=0.0,
        eval_val_every=0,
        output_dir=str(root / "m"),
        num_generations=4,
        per_device_train_batch_size=24,
        max_turn_tokens=10,
        rollout="moves",
        temperature=1.5,
    )
    return WordleGRPOConfig(**{**base, **kw})


def _train_cfg(root, model_path, out, **kw):
    """The settings of a two-step training run on the micro model."""
    base = dict(
        model=str(model_path),
        data=str(root / "rl"),
        output_dir=str(out),
        max_steps=2,
        per_device_train_batch_size=8,
        threads=1,
        learning_rate=1e-2,
        save_steps=2,
        disable_tqdm=True,
    )
    return _cfg(root, **{**base, **kw})


def test_decision_prefixes_keep_refused_moves_in_the_conversation():
    game = {
        "prompt_ids": [5],
        "completion_ids": [1, 2, 9, 9, 3, 9, 4, 4],
        "env_mask": [1, 1, 0, 0, 1, 0, 1, 1],
        "moves": [("raise", "XXXXX"), (None, None), ("could", "XYXXX")],
    }
    prefixes = decision_prefixes(game, {"history": []})
    assert [ids for ids, _ in prefixes] == [[5], [5, 1, 2, 9, 9], [5, 1, 2, 9, 9, 3, 9]]
    # the refused move lengthens the conversation, never the scored history
    assert [h for _, h in prefixes] == [[], [["raise", "XXXXX"]], [["raise", "XXXXX"]]]
    with pytest.raises(ValueError, match="model turns in the tokens but"):
        decision_prefixes({**game, "moves": game["moves"][:2]}, {"history": []})


def test_move_groups_share_a_state_of_the_policys_game(trained_micro, as_trainer):
    root, model_path = trained_micro
    model, tok = load_model(str(model_path), threads=1)
    rows = load_rl_rows(root / "rl")
    ro = MoveRollout(_cfg(root, moves_states="any"), rows, tok)
    torch.manual_seed(0)
    row_ids = (0, 1, 2, 3, 4, 5)
    prompts = [[{"role": "system", "content": "", ROW_KEY: r}] for r in row_ids for _ in "abcd"]
    out = ro(prompts, as_trainer(model))
    answers = set(ro.ctx.words.answers)
    paid = 0
    for i, row in enumerate(ro.last_rows):
        group = i // 4
        assert out["prompt_ids"][i] == out["prompt_ids"][4 * group]  # one state per group
        assert row["answer"] == rows[row_ids[group]]["answer"]
        assert row["history"][: len(rows[row_ids[group]]["history"])] == [
            list(t) for t in rows[row_ids[group]]["history"]
        ]
        prompt = tok.decode(out["prompt_ids"][i], skip_special_tokens=False)
        assert not re.search(rf"\b{row['answer']}\b", prompt, re.I)  # the secret never shows
        for guess, _ in row["history"]:  # every scored guess is in the conversation
            assert guess.upper() in prompt.upper()
        completion = tok.decode(out["completion_ids"][i], skip_special_tokens=False)
        assert completion.count("<|im_end|>") <= 1 and "<|im_start|>" not in completion
        assert out["env_mask"][i] == [1] * len(out["completion_ids"][i])
        text = tok.decode(out["completion_ids"][i], skip_special_tokens=True)
        hist = as_history(row["history"])
        pr = parse(text, ro.style, words=ro.ctx.words, history=hist)
        fits = pr.ok and pr.guess in answers and consistent_with(hist, pr.guess)
        assert out["move_fits"][i] == float(fits), (text, row["history"])
        paid += fits
    assert paid < len(out["move_fits"])  # a hot micro model misses
    # the scoring itself, on moves written out: a fitting answer word, a non-word, a ruled-out word
    state = [["crane", "XXGXG"]]
    for word, expected in (("shake", (1.0, None)), ("ahake", (0.0, "not_in_word_list"))):
        ids = tok(f"<guess>{word}</guess>", add_special_tokens=False)["input_ids"]
        assert ro._score(ids, state) == expected
    ids = tok("<guess>snake</guess>", add_special_tokens=False)["input_ids"]
    assert ro._score(ids, state)[0] == 0.0
    stats = ro.last_stats
    assert 0 <= stats["wordle/fits_rate"] <= 1 and 0 <= stats["wordle/state_after_refusal"] <= 1


def test_moves_sampled_from_one_shared_prefill_are_the_models_own(trained_micro):
    """A group's rows share one prefill (its cache repeated per row): near zero temperature the
    sampled moves are what greedy generation writes from each whole prefix alone, unpadded, for
    prefixes of different lengths in one batch."""
    root, model_path = trained_micro
    model, tok = load_model(str(model_path), threads=1)
    rows = load_rl_rows(root / "rl")
    ro = MoveRollout(_cfg(root, moves_states="any", temperature=1e-4), rows, tok)
    model.eval()
    games = ro.play(model, [0, 1, 2], sample_turns=0)
    uniq = [decision_prefixes(games[i], rows[i])[k][0] for i, k in ((0, -1), (1, 0), (2, 1))]
    assert len({len(p) for p in uniq}) > 1
    moves = ro._sample_moves(model, [p for p in uniq for _ in range(3)])
    for i, prefix in enumerate(uniq):
        with torch.no_grad():
            out = model.generate(
                input_ids=torch.tensor([prefix]),
                do_sample=False,
                max_new_tokens=ro.cfg.max_turn_tokens,
                pad_token_id=tok.pad_token_id,
                eos_token_id=tok.eos_token_id,
            )
        want = ro._cut(out[0, len(prefix) :].tolist())[0]
        assert moves[3 * i : 3 * i + 3] == [want] * 3, (tok.decode(want), i)


def test_one_round_of_games_gives_the_states_of_moves_reuse_steps(trained_micro, as_trainer):
    """With ``moves_reuse`` 3 the first step plays three steps' games in one batch (its own rows
    first) and takes the first groups' states; the next two steps take the rest, playing nothing;
    the fourth plays a new round."""
    root, model_path = trained_micro
    model, tok = load_model(str(model_path), threads=1)
    rows = load_rl_rows(root / "rl")
    ro = MoveRollout(_cfg(root, moves_states="any", moves_reuse=3), rows, tok)
    torch.manual_seed(0)
    prompts = [[{"role": "system", "content": "", ROW_KEY: r}] for r in (0, 1) for _ in "abcd"]
    trainer = as_trainer(model)
    ro(prompts, trainer)
    assert ro.last_stats["wordle/games"] == 6 and len(ro._states) == 4
    assert [x["answer"] for x in ro.last_rows[::4]] == [rows[0]["answer"], rows[1]["answer"]]
    later = [(decisions[k][0], row) for decisions, k, *_, row in ro._states]
    for step in (1, 2):
        out = ro(prompts, trainer)
        assert ro.last_stats["wordle/games"] == 0 and len(ro._states) == 4 - 2 * step
        assert [ids for ids in out["prompt_ids"][::4]] == [ids for ids, _ in later[:2]]
        assert [x["answer"] for x in ro.last_rows[::4]] == [rows[r]["answer"] for _, r in later[:2]]
        later = later[2:]
    ro(prompts, trainer)
    assert len(ro._states) == 4 and ro.last_stats["wordle/games"] == 6
    with pytest.raises(ValueError, match="moves_reuse must be >= 1"):
        WordleGRPOConfig(output_dir="unused", moves_reuse=0)
    with pytest.raises(ValueError, match="eval_val_batch_size must be >= 1"):
        WordleGRPOConfig(output_dir="unused", eval_val_batch_size=0)


def test_grpo_with_move_rollouts_trains(trained_micro):
    root, model_path = trained_micro
    before = {k: v.clone() for k, v in load_model(str(model_path))[0].state_dict().items()}
    out = root / "run-moves"
    cfg = _train_cfg(
        root,
        model_path,
        out,
        sft_data=str(root / "sft"),
        sft_coef=0.5,
        sft_batch_size=4,
    )
    run_grpo(cfg)
    log = [e for e in json.loads((out / "wordle_rl_grpo_log.json").read_text()) if "loss" in e]
    assert len(log) == 2 and all(abs(e["loss"]) < 1e6 for e in log)
    assert all("wordle/fits_rate" in e and "rewards/fits_reward/mean" in e for e in log)
    after = load_model(str(out))[0].state_dict()
    assert any(not torch.equal(before[k], after[k]) for k in before)
    with pytest.raises(ValueError, match="credit must be one of"):
        WordleGRPOConfig(output_dir="unused", credit="letter")


@pytest.mark.parametrize("credit", ["expected", "expected-log"])
def test_expected_letter_loss_is_minus_the_chance_of_a_completable_letter(trained_micro, credit):
    """credit="expected": the batch carries each move's allowed letters (from the same letter sets
    as the sampled credit) and the RL loss is minus the mean sampling probability of the allowed
    letters over them (of its log with "expected-log"), recomputed here by hand; a step trains."""
    import math

    from transformers import TrainerCallback

    def by_hand(trainer, batch) -> float:
        """The loss from one unpadded forward pass per move, before any update."""
        allowed, letters = batch["letter_allowed"], batch["letter_ids"]
        total, n = 0.0, 0
        for b, row in enumerate(batch["completion_ids"].tolist()):
            prompt = [
                t for t, m in zip(batch["prompt_ids"][b].tolist(), batch["prompt_mask"][b]) if m
            ]
            move = row[: int(batch["completion_mask"][b].sum())]
            with torch.no_grad():
                ids = torch.tensor([prompt + move], device=trainer.model.device)
                logits = trainer.model(input_ids=ids).logits[0].float()
            probs = (logits / trainer.args.temperature).softmax(-1)
            if trainer.rollout_func.guess_start(move) is None:
                assert not allowed[b].any()
            for i in range(len(move)):
                if allowed[b, i].any():
                    keep = [int(letters[b, i, k]) for k in range(26) if allowed[b, i, k]]
                    mass = probs[len(prompt) + i - 1, keep].sum().item()
                    total += math.log(max(mass, 1e-6)) if credit == "expected-log" else mass
                    n += 1
        return -total / n

    class Probe(TrainerCallback):  # handed the real trainer by run_grpo
        trainer, seen = None, []

        def on_train_begin(self, args, state, control, **kwargs):
            batch = [self.trainer.train_dataset[i] for i in (0, 0, 0, 0, 1, 1, 1, 1)]
            torch.manual_seed(1)
            out = self.trainer._generate_and_score_completions(batch)
            loss = self.trainer.expected_letter_loss(self.trainer.model, out).item()
            self.seen.append((out, loss, by_hand(self.trainer, out)))
            return control

    root, model_path = trained_micro
    before = {k: v.clone() for k, v in load_model(str(model_path))[0].state_dict().items()}
    out_dir, probe = root / f"run-{credit}", Probe()
    cfg = _train_cfg(root, model_path, out_dir, max_steps=1, save_steps=1, credit=credit)
    run_grpo(cfg, callbacks=[probe])
    batch, loss, expected = probe.seen[-1]
    allowed = batch["letter_allowed"]
    assert allowed.shape == (*batch["completion_ids"].shape, 26) and allowed.any()
    assert loss == pytest.approx(expected, abs=1e-4)
    assert (loss > 0) == (credit == "expected-log")
    log = [e for e in json.loads((out_dir / "wordle_rl_grpo_log.json").read_text()) if "loss" in e]
    assert len(log) == 1 and 0 < log[0]["wordle/letter_value"] <= 1
    after = load_model(str(out_dir))[0].state_dict()
    assert any(not torch.equal(before[k], after[k]) for k in before)


def _doxed() -> dict:
    """A game on the outside word "doxed": four played moves, two refused."""
    return {
        "prompt_ids": [5],
        "completion_ids": [1, 9, 2, 9, 3, 9, 4, 9, 6, 9, 7, 9],
        "env_mask": [1, 0] * 6,
        "moves": [
            ("tares", "XXXGX"),
            ("coden", "XGYGX"),  # DOPEY and DOWEL fit
            (None, None),
            ("pinch", "XXXXX"),  # DOWEL alone
            ("boxed", "XGGGG"),  # none
            (None, None),
        ],
    }


def test_groups_form_where_some_answer_word_still_fits(trained_micro):
    """A game on an allowed word outside the answer list soon reaches states no answer word fits,
    where every move scores 0: a group's state is drawn among those where some answer word still
    fits (among all only when none does); with moves_states="endgame" among those where exactly
    one does."""
    root, model_path = trained_micro
    _, tok = load_model(str(model_path), threads=1)
    ro = MoveRollout(_cfg(root, moves_states="any"), [], tok)
    game = _doxed()
    fits = [len(ro.ctx.candidates(as_history(h))) for _, h in decision_prefixes(game, {})]
    assert fits[0] == len(ro.ctx.words.answers) and fits[2:] == [2, 2, 1, 0]
    assert {ro.draw_state(game, {})[0] for _ in range(200)} == {0, 1, 2, 3, 4}
    k, decisions, n = ro.draw_state(game, {})
    assert n == fits[k] > 0 and len(decisions) == 6
    row = {"history": [["boxed", "XGGGG"]]}  # no answer word is ?OXED without B
    assert not any(len(ro.ctx.candidates(as_history(h))) for _, h in decision_prefixes(game, row))
    assert {ro.draw_state(game, row)[0] for _ in range(200)} == set(range(6))  # then any
    ro = MoveRollout(_cfg(root, moves_states="endgame"), [], tok)
    assert {ro.draw_state(game, {})[0] for _ in range(50)} == {4}
    assert {ro.draw_state(game, row)[0] for _ in range(200)} == set(range(6))
    with pytest.raises(ValueError, match="moves_states must be one of"):
        WordleGRPOConfig(output_dir="unused", moves_states="late")


def test_refused_states_are_where_the_greedy_move_was_refused(trained_micro):
    """With moves_states="refused" a group's state is one whose greedy move the game refused (a
    game without one draws as any), and with played_score a played word that cannot be the answer
    scores between a refused move and a fitting word."""
    root, model_path = trained_micro
    _, tok = load_model(str(model_path), threads=1)
    ro = MoveRollout(_cfg(root, moves_states="refused", played_score=0.25), [], tok)
    game = {**_doxed(), "errors": [None, None, "not_in_word_list", None, None, "repeated_guess"]}
    assert {ro.draw_state(game, {})[0] for _ in range(100)} == {2, 5}
    clean = {**game, "errors": [None] * 6}
    assert {ro.draw_state(clean, {})[0] for _ in range(200)} == {0, 1, 2, 3, 4}
    history = [["crane", "XXGXG"]]
    moves = {
        w: tok.encode(f"<guess>{w}</guess>", add_special_tokens=False)
        for w in ("shake", "snake", "ahake", "crane")
    }
    scored = {w: ro._score(ids, history) for w, ids in moves.items()}
    assert scored == {
        "shake": (1.0, None),
        "snake": (0.25, None),
        "ahake": (0.0, "not_in_word_list"),
        "crane": (0.0, "repeated_guess"),
    }
    with pytest.raises(ValueError, match="played_score must be in"):
        WordleGRPOConfig(output_dir="unused", played_score=1.0)


def test_recall_states_are_drawn_from_every_game_played(trained_micro):
    """With moves_states="recall" the groups' states are drawn without replacement among the
    decisions of all the step's games where exactly one answer word fits; a group left without
    one falls back to its own game's endgame draw."""
    root, model_path = trained_micro
    _, tok = load_model(str(model_path), threads=1)
    ro = MoveRollout(_cfg(root, moves_states="recall", moves_games=3), [], tok)
    doxed = _doxed()
    opening = {**doxed, "moves": doxed["moves"][:2] + [(None, None)] * 4}  # DOPEY, DOWEL fit
    one = {"history": [["pinch", "XXXXX"]]}  # doxed from a row that has played pinch
    games, rows = [opening, doxed, doxed], [{}, {}, one]
    fits = [
        [len(ro.ctx.candidates(as_history(h))) for _, h in decision_prefixes(g, r)]
        for g, r in zip(games, rows)
    ]
    recall = {(i, k) for i, f in enumerate(fits) for k, c in enumerate(f) if c == 1}
    assert recall == {(1, 4), (2, 2), (2, 3), (2, 4)}  # none in the game that stops early
    drawn = set()
    for _ in range(100):
        picks = ro.draw_states(games, rows, 3)
        assert len({(i, k) for i, k, *_ in picks}) == 3 and all(p[3] == 1 for p in picks)
        assert all(len(p[2]) == 6 and (p[0], p[1]) in recall for p in picks)
        drawn |= {(i, k) for i, k, *_ in picks}
    assert drawn == recall
    games, rows = [opening, opening, doxed], [{}, {}, {}]  # one recall state for two groups
    for _ in range(20):
        first, second = ro.draw_states(games, rows, 2)
        assert first[:2] == (2, 4) and first[3] == 1
        assert second[0] == 1 and second[3] == fits[0][second[1]] > 1  # its own game's draw
    with pytest.raises(ValueError, match="moves_games must be >= 1, and above 1 only"):
        WordleGRPOConfig(output_dir="unused", moves_states="any", moves_games=2)


def test_a_held_out_recall_state_is_never_drawn(trained_micro, tmp_path):
    """A state whose one fitting word is a val or test answer of the splits file is not a recall
    state, nor any state while the game has another: the RL term never rewards writing a held-out
    answer. Without a splits file nothing is held out."""
    root, model_path = trained_micro
    _, tok = load_model(str(model_path), threads=1)
    Splits(0, (0.8, 0.1, 0.1), train=["dopey"], val=["dowel"], test=[]).save(tmp_path / "s.json")
    kw = dict(moves_states="recall", moves_games=2)
    held = MoveRollout(_cfg(root, splits=str(tmp_path / "s.json"), **kw), [], tok)
    games, rows = [_doxed(), _doxed()], [{}, {"history": [["pinch", "XXXXX"]]}]
    for _ in range(20):  # DOWEL is the only fit at (0, 4), (1, 2), (1, 3) and (1, 4)
        picks = held.draw_states(games, rows, 2)
        assert all(p[3] > 1 for p in picks)  # no recall state: each game's own other states
        assert all(held.draw_state(g, r)[2] > 1 for g, r in zip(games, rows))
        assert held._draw([-1, 0, -1, 0]) in (1, 3)  # no word fits: still not the held-out one
    assert held._draw([-1]) == 0  # nothing else left
    unsplit = MoveRollout(_cfg(root, splits=str(tmp_path / "none.json"), **kw), [], tok)
    assert [p[3] for p in unsplit.draw_states(games, rows, 2)] == [1, 1]  # DOWEL is taught


def test_a_held_out_recall_state_left_as_the_only_one_teaches_nothing(
    trained_micro, as_trainer, tmp_path
):
    """Rows one move from the end whose every decision is a held-out recall state: the groups
    still form there, but no move earns anything, no letter is credited and nothing is recorded
    as taught."""
    root, model_path = trained_micro
    model, tok = load_model(str(model_path), threads=1)
    Splits(0, (0.8, 0.1, 0.1), train=["dopey"], val=["dowel"], test=[]).save(tmp_path / "s.json")
    guesses = ["tares", "coden", "pinch", "jumpy", "fight"]  # then DOWEL alone fits
    history = [[g, pattern_to_str(score(g, "doxed"))] for g in guesses]
    row = {**load_rl_rows(root / "rl")[0], "answer": "doxed", "history": history, "depth": 5}
    cfg = _cfg(root, splits=str(tmp_path / "s.json"), moves_states="recall", moves_games=2)
    ro = MoveRollout(cfg, [row, row], tok)
    prompts = [[{"role": "system", "content": "", ROW_KEY: r}] for r in (0, 1) for _ in "abcd"]
    out = ro(prompts, as_trainer(model))
    assert out["move_fits"] == [0.0] * 8 and ro.last_sets == [[]] * 8
    assert ro.last_stats["wordle/state_held_out"] == 1.0
    assert not (tmp_path / "trainer" / RECALL_STATES_DIR).exists()
    assert ro.allowed_letters(12)[0].sum() == 0


def test_recall_states_are_recorded_for_the_audit(trained_micro, tmp_path):
    """Every group state where one answer word fits is written down with that word, and the
    training-overlap audit reads it back as an imitated move: what the RL term taught."""
    root, model_path = trained_micro
    _, tok = load_model(str(model_path), threads=1)
    ro = MoveRollout(_cfg(root, moves_states="recall", moves_games=2), [], tok)
    histories = [h for _, h in decision_prefixes(_doxed(), {})]  # fits: all, ..., 2, 2, 1, 0
    assert ro.record_recall(histories, tmp_path) == 1
    assert ro.record_recall(histories[:2], tmp_path) == 0
    folder = tmp_path / RECALL_STATES_DIR
    assert [json.loads(x) for x in (folder / "rank0.jsonl").read_text().splitlines()] == [
        {"history": histories[4], "recall_word": "dowel"}
    ]
    words = ro.ctx.words
    index = TrainingIndex().extended([folder], words)
    assert index.rows == 1 and index.words == {"dowel"}
    assert index.imitated(state_key(histories[4]), "dowel")
    assert not index.imitated(state_key(histories[3]), "dowel")


def test_a_held_out_answer_is_never_paid_as_a_fitting_word(trained_micro, tmp_path):
    """A sampled move that writes a val or test answer scores as a played word that cannot be the
    answer, even where it fits: the RL term never rewards writing one."""
    root, model_path = trained_micro
    _, tok = load_model(str(model_path), threads=1)
    Splits(0, (0.8, 0.1, 0.1), train=["shame"], val=["shake"], test=[]).save(tmp_path / "s.json")
    history = [["crane", "XXGXG"]]  # SHAKE and SHAME both fit
    for splits, held in ((tmp_path / "s.json", 0.25), (tmp_path / "none.json", 1.0)):
        ro = MoveRollout(_cfg(root, splits=str(splits), played_score=0.25), [], tok)
        scored = {
            w: ro._score(tok.encode(f"<guess>{w}</guess>", add_special_tokens=False), history)
            for w in ("shake", "shame", "snake")
        }
        assert scored == {"shake": (held, None), "shame": (1.0, None), "snake": (0.25, None)}


def test_the_letter_credit_never_counts_a_held_out_answer_as_completable(trained_micro, tmp_path):
    """credit="expected": a letter that completes the guess only to a val or test answer of the
    splits file earns no credit, as writing that answer earns no score."""
    root, model_path = trained_micro
    _, tok = load_model(str(model_path), threads=1)
    Splits(0, (0.8, 0.1, 0.1), train=["shame"], val=["shake"], test=[]).save(tmp_path / "s.json")
    history = [["crane", "XXGXG"]]  # SHAKE, SHAME, SHAPE, SHADE, ... fit
    move = tok.encode("<guess>shake</guess>", add_special_tokens=False)
    k, m = LETTERS.index("k"), LETTERS.index("m")
    for splits, k_credited in ((tmp_path / "s.json", False), (tmp_path / "none.json", True)):
        ro = MoveRollout(_cfg(root, splits=str(splits), credit="expected"), [], tok)
        (sets,) = ro.letter_sets([move], [history])
        fourth = sets[3][1]  # the letters that may follow "sha"
        assert bool(fourth[k]) == k_credited and fourth[m]
        assert len(sets) == (5 if k_credited else 4)  # credit stops at the first breaking letter
