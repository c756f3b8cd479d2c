"""The fitting-set objective of the moves rollout (credit="set"): at a state of the policy's own
game, the fitting answer words it likes best, weighted by its own chances, and a loss whose
gradient is that of minus the log of the chance that it writes any fitting word."""

import json
import math

import numpy as np
import pytest
import torch

from wordle_rl.data.splits import Splits
from wordle_rl.engine.game import pattern_to_str, score
from wordle_rl.environment.parser import parse
from wordle_rl.environment.rewards import as_history
from wordle_rl.models.embedded import load_model
from wordle_rl.training.fit_set import SCORED_WORDS, fitting_moves, fitting_words
from wordle_rl.training.grpo import WordleGRPOConfig, load_rl_rows, run_grpo
from wordle_rl.training.move_rollout import MoveRollout, decision_prefixes


def _cfg(root, **kw):
    base = dict(
        sft_coef=0.0,
        eval_val_every=0,
        output_dir=str(root / "m"),
        num_generations=4,
        per_device_train_batch_size=8,
        max_turn_tokens=10,
        rollout="moves",
        credit="set",
        moves_states="missed",
    )
    return WordleGRPOConfig(**{**base, **kw})


def _shame_game() -> dict:
    """Four moves on SHAME: two that fit the feedback before them, one it rules out, a refusal."""
    moves = [(g, pattern_to_str(score(g, "shame"))) for g in ("crane", "shake", "snake")]
    return {
        "prompt_ids": [5],
        "completion_ids": [1, 9, 2, 9, 3, 9, 4, 9],
        "env_mask": [1, 0] * 4,
        "moves": [*moves, (None, None)],
    }


def _unpadded_logp(model, prefix: list[int], move: list[int]) -> float:
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([prefix + move])).logits[0].float()
    logp = logits.log_softmax(-1)
    return sum(logp[len(prefix) + i - 1, t].item() for i, t in enumerate(move))


def test_missed_states_are_where_a_word_fits_and_the_greedy_move_is_not_one(trained_micro):
    root, model_path = trained_micro
    _, tok = load_model(str(model_path), threads=1)
    ro = MoveRollout(_cfg(root), [], tok)
    game = _shame_game()
    assert {ro.draw_state(game, {})[0] for _ in range(100)} == {2, 3}
    solved = {**game, "moves": game["moves"][:2]}  # every greedy move fits: drawn as any
    solved |= {"completion_ids": [1, 9, 2, 9], "env_mask": [1, 0, 1, 0]}
    assert {ro.draw_state(solved, {})[0] for _ in range(100)} == {0, 1}


def test_a_fitting_set_holds_the_likeliest_fitting_train_words(trained_micro, tmp_path):
    """Each group: fitting answer words by re-scoring, never a val or test answer, the policy's
    likeliest first, weighted by its chances among them (summing to 1); where fewer fit than the
    group holds, the rest repeat at weight 0; where none may be written, the group weighs 0."""
    root, model_path = trained_micro
    model, tok = load_model(str(model_path), threads=1)
    Splits(0, (0.8, 0.1, 0.1), train=["dopey"], val=["dowel"], test=[]).save(tmp_path / "s.json")
    ro = MoveRollout(_cfg(root, splits=str(tmp_path / "s.json")), [], tok)
    game = {
        "prompt_ids": [tok.bos_token_id or 1],
        "completion_ids": [1, 9, 2, 9, 3, 9, 4, 9],
        "env_mask": [1, 0] * 4,
        "moves": [(g, pattern_to_str(score(g, "dopey"))) for g in ("crane", "tails", "dough")]
        + [(None, None)],
    }
    decisions = decision_prefixes(game, {})
    doxed = [[g, pattern_to_str(score(g, "doxed"))] for g in ("tares", "coden")]
    states = [decisions[1], decisions[3], ([5, 6], doxed)]  # DOPEY and DOWEL fit the third
    wide = [w for w in ro.ctx.words.answers if w != "dowel"]
    assert len(fitting_words(ro, [], ro.rng)) == SCORED_WORDS
    assert set(fitting_words(ro, [], ro.rng)) <= set(wide)
    moves, weights, stats = fitting_moves(ro, model, states, 4, log=True)
    same, chances, _ = fitting_moves(ro, model, states, 4)
    assert len(moves) == len(weights) == 12
    for s, (ids, history) in enumerate(states):
        group, w = moves[4 * s : 4 * s + 4], weights[4 * s : 4 * s + 4]
        words = [parse(tok.decode(m, skip_special_tokens=True), ro.style).guess for m in group]
        assert all(m[-1] == tok.eos_token_id for m in group)
        hist = as_history(history)
        fit = [x for x in ro.ctx.words.answers if all(score(g, x) == p for g, p in hist)]
        assert set(words) <= set(fit) - {"dowel"}, (words, history)
        assert sum(w) == pytest.approx(1.0) and w == sorted(w, reverse=True)
        logp = [_unpadded_logp(model, ids, m) for m in group]
        distinct = len(set(words))
        if s == 2:  # only DOPEY may be written: DOWEL is a val answer
            assert "dowel" in fit and words == ["dopey"] * 4 and w == [1.0, 0.0, 0.0, 0.0]
        if len(fit) <= SCORED_WORDS:  # every fitting word scored: the group is its best
            rest = [x for x in fit if x not in words and x != "dowel"]
            best = min(logp[:distinct])
            for x in rest[:5]:
                comp = tok(f"<guess>{x}</guess>", add_special_tokens=False)["input_ids"]
                assert _unpadded_logp(model, ids, comp + [tok.eos_token_id]) <= best + 1e-4
        z = np.logaddexp.reduce(logp[:distinct])
        assert w[:distinct] == pytest.approx([math.exp(x - z) for x in logp[:distinct]], abs=1e-4)
        if len(fit) <= SCORED_WORDS:  # without log: each word's own chance
            assert same[4 * s : 4 * s + 4] == group
            p = chances[4 * s : 4 * s + distinct]
            assert p == pytest.approx([math.exp(x) for x in logp[:distinct]], rel=1e-3)
    assert 0 < stats["wordle/set_chance"] <= 1 and stats["wordle/set_empty"] == 0
    only_held = [*doxed, ["pinch", pattern_to_str(score("pinch", "doxed"))]]  # DOWEL alone
    moves, weights, stats = fitting_moves(ro, model, [([5, 6], only_held)], 4)
    assert weights == [0.0] * 4 and stats["wordle/set_empty"] == 1.0


def test_grpo_with_the_fitting_set_trains_on_minus_its_weighted_log_chance(trained_micro):
    """The batch carries each row's weight; the RL loss is minus the weighted log-probability of
    the rows' words over the groups, recomputed here by hand; a step trains and logs the sets."""
    from transformers import TrainerCallback

    class Probe(TrainerCallback):  # handed the real trainer by run_grpo
        trainer, seen = None, []

        def on_train_begin(self, args, state, control, **kwargs):
            batch = [self.trainer.train_dataset[i] for i in (0, 0, 0, 0, 1, 1, 1, 1)]
            out = self.trainer._generate_and_score_completions(batch)
            loss = self.trainer.fitting_set_loss(self.trainer.model, out).item()
            total, n = 0.0, len(out["set_weight"]) / 4  # the groups
            for b, w in enumerate(out["set_weight"].tolist()):
                prompt = [
                    t for t, m in zip(out["prompt_ids"][b].tolist(), out["prompt_mask"][b]) if m
                ]
                move = out["completion_ids"][b][: int(out["completion_mask"][b].sum())].tolist()
                total += w * _unpadded_logp(self.trainer.model, prompt, move)
            self.seen.append((loss, -total / n))
            return control

    root, model_path = trained_micro
    before = {k: v.clone() for k, v in load_model(str(model_path))[0].state_dict().items()}
    out_dir, probe = root / "run-set", Probe()
    cfg = _cfg(
        root,
        model=str(model_path),
        data=str(root / "rl"),
        output_dir=str(out_dir),
        max_steps=1,
        save_steps=1,
        threads=1,
        learning_rate=1e-2,
        disable_tqdm=True,
        moves_states="any",
    )
    assert len(load_rl_rows(root / "rl")) > 1
    run_grpo(cfg, callbacks=[probe])
    loss, expected = probe.seen[-1]
    assert loss == pytest.approx(expected, rel=1e-3) and loss > 0
    log = [e for e in json.loads((out_dir / "wordle_rl_grpo_log.json").read_text()) if "loss" in e]
    assert len(log) == 1 and log[0]["wordle/set_size"] > 0 and "wordle/set_word_logp" in log[0]
    after = load_model(str(out_dir))[0].state_dict()
    assert any(not torch.equal(before[k], after[k]) for k in before)
    with pytest.raises(ValueError, match="moves_states must be one of"):
        WordleGRPOConfig(output_dir="unused", moves_states="missing")
