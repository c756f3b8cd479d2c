"""Move rollouts: groups of single moves at states of the policy's own games (refused moves
included), each scored by whether it could still be the answer."""

import json
import re

import pytest
import torch

from wordle_rl.game import consistent_with
from wordle_rl.grpo import WordleGRPOConfig, load_rl_rows, run_grpo
from wordle_rl.models import load_model
from wordle_rl.move_rollout import MoveRollout, decision_prefixes
from wordle_rl.parser import parse
from wordle_rl.rewards import as_history
from wordle_rl.rollout import ROW_KEY


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
    ro = MoveRollout(_cfg(root), rows, tok)
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


def test_grpo_with_move_rollouts_trains(trained_micro):
    root, model_path = trained_micro
    before = {k: v.clone() for k, v in load_model(str(model_path))[0].state_dict().items()}
    out = root / "run-moves"
    cfg = _cfg(
        root,
        model=str(model_path),
        data=str(root / "rl"),
        output_dir=str(out),
        max_steps=2,
        per_device_train_batch_size=8,
        threads=1,
        learning_rate=1e-2,
        save_steps=2,
        disable_tqdm=True,
        moves_from="greedy",
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
    with pytest.raises(ValueError, match="takes no reward curriculum"):
        WordleGRPOConfig(output_dir="unused", rollout="moves", curriculum="step")
    with pytest.raises(ValueError, match="moves_from must be one of"):
        WordleGRPOConfig(output_dir="unused", rollout="moves", moves_from="beam")


def test_negative_advantages_only_push_moves_down(trained_micro):
    """advantage_sign="negative": the trainer's advantages are GRPO's with every positive one set to
    0, whatever the rollout (here whole games, whose rewards differ within groups)."""
    from transformers import TrainerCallback

    class Probe(TrainerCallback):  # handed the real trainer by run_grpo
        trainer, seen = None, []

        def on_train_begin(self, args, state, control, **kwargs):
            batch = [self.trainer.train_dataset[i] for i in (0, 0, 0, 0, 1, 1, 1, 1) * 3]
            torch.manual_seed(1)
            out = self.trainer._generate_and_score_completions(batch)
            self.seen.append(out["advantages"])
            return control

    root, model_path = trained_micro
    probe = Probe()
    cfg = _cfg(
        root,
        model=str(model_path),
        data=str(root / "rl"),
        output_dir=str(root / "run-negative"),
        max_steps=1,
        threads=1,
        save_steps=1,
        disable_tqdm=True,
        rollout="game",
        max_turn_tokens=8,
        advantage_sign="negative",
    )
    run_grpo(cfg, callbacks=[probe])
    advantages = probe.seen[0]
    assert advantages.shape == (24,) and (advantages <= 0).all() and (advantages < 0).any()
    with pytest.raises(ValueError, match="advantage_sign must be both or negative"):
        WordleGRPOConfig(output_dir="unused", advantage_sign="positive")
