"""Multi-turn GRPO with a real tiny model on CPU: rollouts, env-token masking, rewards, a few
steps."""

import json

import numpy as np
import pytest
import torch

from wordle_rl.data.splits import make_splits
from wordle_rl.models.embedded import load_model
from wordle_rl.training.grpo import WordleGRPOConfig, load_rl_rows, run_grpo
from wordle_rl.training.rollout import WordleRollout


def test_num_generations_below_two_is_refused():
    with pytest.raises(ValueError, match="group of one has no relative advantage"):
        WordleGRPOConfig(num_generations=1, output_dir="unused")


def _check_episode(tok, g):
    """The episode alternates the model's turns (mask 1) and environment tokens (mask 0) that
    re-render the chat."""
    ids, mask = g["completion_ids"], g["env_mask"]
    assert len(ids) == len(mask) and mask[0] == 1  # starts with the model
    runs, cur = [], [mask[0], []]
    for i, m in zip(ids, mask):
        if m != cur[0]:
            runs.append(cur)
            cur = [m, []]
        cur[1].append(i)
    runs.append(cur)
    for m, run in runs:
        text = tok.decode(run)
        if m:  # the model's own tokens: one turn, never a chat-structure token
            assert "<|im_start|>" not in text and text.count("<|im_end|>") <= 1
        else:  # environment tokens: a forced close, or feedback up to the next assistant header
            assert text == "<|im_end|>" or text.startswith(
                ("<|im_end|><|im_start|>user\n", "<|im_start|>user\n")
            )
            assert text == "<|im_end|>" or text.endswith("<|im_start|>assistant\n")
    assert g["turns"] >= len(g["errors"]) and set(g["components"]) >= {"win", "format", "invalid"}
    # model and env tokens re-render the conversation
    full = tok.decode(g["prompt_ids"] + g["completion_ids"])
    assert full.startswith("<|im_start|>system") and full.endswith("<|im_end|>")


def _logprob_tolerance(model) -> float:
    """How far a log-prob recorded during a rollout may sit from a fresh forward pass: fp32 rounds
    alike in both; bf16 weights (load_model on CUDA) round the carried cache differently by ~1e-2,
    while a misaligned token would be off by whole nats."""
    return 1e-3 if model.dtype == torch.float32 else 5e-2


def _fresh_logprobs(model, g):
    """Log-probabilities of the game's own tokens from one unpadded forward pass of the whole
    episode."""
    ids = torch.tensor([g["prompt_ids"] + g["completion_ids"]], device=model.device)
    with torch.no_grad():
        lp = model(input_ids=ids).logits[0].float().log_softmax(-1)
    n = len(g["prompt_ids"])
    return [
        lp[n + k - 1, t].item()
        for k, (t, m) in enumerate(zip(g["completion_ids"], g["env_mask"]))
        if m
    ]


def test_rollout_masks_env_tokens_and_reports_games(trained_micro):
    root, model_path = trained_micro
    model, tok = load_model(str(model_path), threads=1)
    cfg = WordleGRPOConfig(
        sft_coef=0.0,
        eval_val_every=0,
        model=str(model_path),
        data=str(root / "rl"),
        output_dir=str(root / "x"),
        num_generations=2,
        per_device_train_batch_size=4,
        max_turn_tokens=10,
    )
    rows = load_rl_rows(root / "rl")
    ro = WordleRollout(cfg, rows, tok)
    games = ro.play(model, [0, 0, 1, 1])
    assert len(games) == 4
    for g in games:
        _check_episode(tok, g)


def test_rollout_with_carried_cache_matches_a_fresh_forward_pass(trained_micro):
    """Every sampled token's log-probability, computed during the batched rollout (KV cache carried
    across turns, padding inside the batch, finished games dropped), equals the one from one
    unpadded forward of that game."""
    root, model_path = trained_micro
    model, tok = load_model(str(model_path), threads=1)
    cfg = WordleGRPOConfig(
        sft_coef=0.0,
        eval_val_every=0,
        model=str(model_path),
        data=str(root / "rl"),
        output_dir=str(root / "z"),
        num_generations=2,
        per_device_train_batch_size=8,
        max_turn_tokens=10,
    )
    ro = WordleRollout(cfg, load_rl_rows(root / "rl"), tok)
    ro.record_logprobs = True
    torch.manual_seed(0)
    games = ro.play(model, [0, 0, 1, 1, 2, 2, 3, 3])
    assert (
        len({g["turns"] for g in games}) > 1 or len({len(g["completion_ids"]) for g in games}) > 1
    )
    model.eval()
    for g in games:
        assert len(g["logprobs"]) == len(g["completion_ids"])  # aligned, 0 for environment tokens
        own = [lp for lp, m in zip(g["logprobs"], g["env_mask"]) if m]
        gap = max(abs(a - b) for a, b in zip(_fresh_logprobs(model, g), own, strict=True))
        assert gap < _logprob_tolerance(model)


class TransformersTurns:
    """TRL's ``VLLMGeneration.generate`` interface served by transformers (vLLM itself needs CUDA),
    so the vLLM turn loop of the rollout runs here: full token prompts in, sampled completions and
    their log-probs out."""

    def __init__(self, model, tok, max_tokens):
        self.model, self.tok, self.max_tokens, self.calls = model, tok, max_tokens, 0

    def generate(self, prompts, images, num_generations):
        assert images is None and num_generations == 1
        self.calls += 1
        completions, logprobs = [], []
        for p in prompts:
            with torch.no_grad():
                out = self.model.generate(
                    input_ids=torch.tensor([p], device=self.model.device),
                    do_sample=True,
                    top_k=0,
                    top_p=1.0,
                    max_new_tokens=self.max_tokens,
                    eos_token_id=self.tok.eos_token_id,
                    pad_token_id=self.tok.pad_token_id,
                    return_dict_in_generate=True,
                    output_logits=True,
                )
            new = out.sequences[0, len(p) :]
            lp = torch.stack(out.logits, 1)[0].float().log_softmax(-1).gather(1, new[:, None])[:, 0]
            completions.append(new.tolist())
            logprobs.append([[x] for x in lp.tolist()])
        return prompts, completions, logprobs, None


def test_vllm_turn_loop_builds_the_same_episodes_with_aligned_logprobs(trained_micro):
    """The vLLM path (whole conversation re-sent each turn) yields episodes of the same shape, and
    its per-token log-probabilities line up with the completion tokens for TRL's importance-sampling
    correction."""
    root, model_path = trained_micro
    model, tok = load_model(str(model_path), threads=1)
    model.eval()
    cfg = WordleGRPOConfig(
        sft_coef=0.0,
        eval_val_every=0,
        model=str(model_path),
        data=str(root / "rl"),
        output_dir=str(root / "v"),
        num_generations=2,
        per_device_train_batch_size=4,
        max_turn_tokens=10,
    )
    ro = WordleRollout(cfg, load_rl_rows(root / "rl"), tok)
    gen = TransformersTurns(model, tok, max_tokens=10)
    torch.manual_seed(0)
    from transformers import TrainerState

    class T:  # the trainer attributes the rollout reads
        pass

    t = T()
    t.model, t.state, t.use_vllm, t.vllm_generation = model, TrainerState(), True, gen
    out = ro([[{"role": "system", "content": "", "wordle_row": r}] for r in (0, 0, 1, 1)], t)
    assert 1 <= gen.calls <= cfg.max_turns and len(out["completion_ids"]) == 4
    for k in range(4):
        g = {key: out[key][k] for key in ("prompt_ids", "completion_ids", "env_mask", "logprobs")}
        g |= {
            "turns": out["turns"][k],
            "errors": [],
            "components": {"win": 0, "format": 0, "invalid": 0},
        }
        _check_episode(tok, g)
        assert len(g["logprobs"]) == len(g["completion_ids"])
        own = [lp for lp, m in zip(g["logprobs"], g["env_mask"]) if m]
        gap = max(abs(a - b) for a, b in zip(_fresh_logprobs(model, g), own, strict=True))
        assert gap < _logprob_tolerance(model)


def test_vllm_without_cuda_is_refused_with_the_reason():
    with pytest.raises(ValueError, match="use_vllm needs a CUDA GPU"):
        WordleGRPOConfig(use_vllm=True, rollout="game", output_dir="unused")
    with pytest.raises(ValueError, match="rollout='moves' samples its groups' moves with the"):
        WordleGRPOConfig(use_vllm=True, output_dir="unused")  # the default rollout


def test_zero_spread_group_is_reported(trained_micro):
    root, model_path = trained_micro
    model, tok = load_model(str(model_path), threads=1)
    cfg = WordleGRPOConfig(
        sft_coef=0.0,
        eval_val_every=0,
        model=str(model_path),
        data=str(root / "rl"),
        output_dir=str(root / "y"),
        num_generations=2,
        per_device_train_batch_size=4,
        max_turn_tokens=1,
    )
    ro = WordleRollout(cfg, load_rl_rows(root / "rl"), tok)

    class T:  # the trainer attributes the rollout reads
        pass

    from transformers import TrainerState

    t = T()
    t.model, t.state = model, TrainerState()
    out = ro([[{"role": "system", "content": "", "wordle_row": 0}]] * 4, t)
    # one token per turn can never hold <guess>xxxxx</guess>: every move is "no_guess", every game
    # scores the same
    assert ro.last_stats["wordle/zero_spread_share"] == 1.0
    assert out["episode_invalid"] == [-1.0] * 4 and len(out["completion_ids"]) == 4


def test_grpo_steps_change_parameters_with_finite_loss(trained_micro):
    root, model_path = trained_micro
    before = {k: v.clone() for k, v in load_model(str(model_path))[0].state_dict().items()}
    out = root / "run"
    cfg = WordleGRPOConfig(
        sft_coef=0.0,
        eval_val_every=0,
        model=str(model_path),
        data=str(root / "rl"),
        output_dir=str(out),
        max_steps=2,
        num_generations=2,
        per_device_train_batch_size=4,
        max_turn_tokens=8,
        threads=1,
        learning_rate=1e-2,
        temperature=1.5,
        save_steps=2,
        disable_tqdm=True,
        reward_preset="format",
        rollout="game",
    )
    run_grpo(cfg)
    log = [e for e in json.loads((out / "wordle_rl_grpo_log.json").read_text()) if "loss" in e]
    assert len(log) == 2 and all(abs(e["loss"]) < 1e6 for e in log)
    assert all("wordle/zero_spread_share" in e and "rewards/invalid_reward/mean" in e for e in log)
    after = load_model(str(out))[0].state_dict()
    assert any(not torch.equal(before[k], after[k]) for k in before)
    assert (out / "checkpoint-2").is_dir() and (out / "wordle_rl_grpo_config.json").is_file()




def test_sft_loss_config_is_checked():
    with pytest.raises(ValueError, match="needs sft_data"):
        WordleGRPOConfig(output_dir="unused", sft_data=None)
    with pytest.raises(ValueError, match="must be >= 0"):
        WordleGRPOConfig(output_dir="unused", sft_coef=-1.0)
    with pytest.raises(ValueError, match="else nothing trains"):
        WordleGRPOConfig(output_dir="unused", sft_coef=0.0, rl_coef=0.0)
    off = WordleGRPOConfig(output_dir="unused", sft_coef=0.0)  # the SFT games are then unused
    assert off.sft_data == "data/sft" and off.sft_coef == 0.0


def test_sft_batches_match_the_sft_trainer_and_are_drawn_by_seed_and_step(trained_micro):
    from wordle_rl.training.sft import WordleSFTConfig, WordleSFTTrainer
    from wordle_rl.training.soft_targets import SftBatches, load_sft_dataset

    root, model_path = trained_micro
    model, tok = load_model(str(model_path))
    batches = SftBatches(root / "sft", tok, batch_size=4, seed=3)
    one, again, other = batches.batch(0), batches.batch(0), batches.batch(1)
    assert torch.equal(one["input_ids"], again["input_ids"]) and torch.equal(
        one["soft_probs"], again["soft_probs"]
    )
    assert one["input_ids"].shape != other["input_ids"].shape or not torch.equal(
        one["input_ids"], other["input_ids"]
    )
    # the same four games through `wordle-rl sft`'s own tokenization and collator give the same
    # batch
    idx = sorted(
        int(i) for i in np.random.default_rng([3, 0]).choice(len(batches.dataset), 4, replace=False)
    )
    # rank 0 draws what a single process draws; another rank of a multi-process run draws its own
    # games
    assert (
        batches.indices(0) == batches.indices(0, rank=0) == idx
        and batches.indices(0, rank=1) != idx
    )
    cfg = WordleSFTConfig(
        model=str(model_path),
        data=str(root / "sft"),
        output_dir=str(root / "unused-sft"),
        max_steps=1,
        threads=1,
        disable_tqdm=True,
        soft_target_weight=1.0,
    )
    trainer = WordleSFTTrainer(
        model=model,
        args=cfg,
        train_dataset=load_sft_dataset(root / "sft", soft=True),
        processing_class=tok,
    )
    ref = trainer.data_collator([dict(trainer.train_dataset[i]) for i in idx])
    for key in ("input_ids", "labels", "soft_index", "soft_ids", "soft_probs"):
        assert torch.equal(one[key], ref[key]), key


def test_sft_batches_refuse_games_on_held_out_answers(trained_micro, tmp_path, words):
    from wordle_rl.data.files import DataError, read_jsonl, write_jsonl
    from wordle_rl.training.soft_targets import SftBatches

    root, model_path = trained_micro
    rows = read_jsonl(root / "sft" / "sft.jsonl")
    splits = make_splits(words, seed=0)
    splits.save(tmp_path / "splits.json")
    rows[1]["answer"] = splits.test[0]
    write_jsonl(rows, tmp_path / "leaky.jsonl")
    with pytest.raises(DataError, match="LEAKAGE"):
        SftBatches(
            tmp_path / "leaky.jsonl",
            load_model(str(model_path))[1],
            4,
            splits=tmp_path / "splits.json",
        )


def test_grpo_with_the_sft_loss_logs_it_and_trains(trained_micro):
    root, model_path = trained_micro
    out = root / "run-ptx"
    cfg = WordleGRPOConfig(
        eval_val_every=0,
        model=str(model_path),
        data=str(root / "rl"),
        output_dir=str(out),
        max_steps=2,
        num_generations=2,
        per_device_train_batch_size=4,
        max_turn_tokens=8,
        threads=1,
        learning_rate=1e-2,
        temperature=1.5,
        save_steps=2,
        disable_tqdm=True,
        sft_data=str(root / "sft"),
        sft_coef=1.0,
        sft_batch_size=4,
    )
    run_grpo(cfg)
    log = [e for e in json.loads((out / "wordle_rl_grpo_log.json").read_text()) if "loss" in e]
    assert len(log) == 2 and all(
        0 < e["sft/hard_loss"] < 20 and 0 < e["sft/soft_loss"] < 20 for e in log
    )
    saved = json.loads((out / "wordle_rl_grpo_config.json").read_text())
    assert saved["sft_coef"] == 1.0 and saved["sft_data"] == str(root / "sft")


def test_sft_batches_need_a_template_that_marks_assistant_turns(trained_micro):
    from wordle_rl.training.soft_targets import SftBatches

    root, model_path = trained_micro
    tok = load_model(str(model_path))[1]
    tok.chat_template = (
        "{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\\n' + m['content'] + "
        "'<|im_end|>' }}{% endfor %}"
    )
    with pytest.raises(ValueError, match="generation"):
        SftBatches(root / "sft", tok, 4).batch(0)
