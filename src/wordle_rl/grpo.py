"""Multi-turn GRPO: TRL's ``GRPOTrainer`` with a ``rollout_func`` that plays Wordle games.

    wordle-rl grpo --model runs/sft --data data/rl --output-dir runs/grpo \\
        [--num-generations 8] [--resume]

Rollouts, chosen by ``rollout``: ``moves`` (the default,
:class:`wordle_rl.move_rollout.MoveRollout`) forms each group at one state of the policy's own game
and scores each sampled move by whether it could still be the answer; ``game``
(:class:`wordle_rl.rollout.WordleRollout`) plays every prompt row ``num_generations`` times as whole
sampled games, one advantage per game; ``branch`` (:class:`wordle_rl.branch.BranchRollout`) forms
each group at one state of the policy's own greedy game and scores each move by the game the policy
finishes; ``tools`` is TRL's environment_factory. Health is logged every step: zero-spread group
share, win rate, guesses, repeats, format errors, episodes/s and tokens/s. With ``--sft-data DIR
--sft-coef C`` (the defaults: data/sft, 1.0) every step adds C times the SFT loss (hard labels +
soft targets) of a batch of solver games (PPO-ptx): the imitation objective stays in the loss while
RL moves the policy.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

from transformers import TrainerCallback
from trl import GRPOTrainer

from wordle_rl.branch import BranchRollout, game_return_reward
from wordle_rl.grpo_config import WordleGRPOConfig, vllm_missing
from wordle_rl.models import eval_mode
from wordle_rl.move_rollout import MoveRollout, fits_reward
from wordle_rl.prompts import PromptStyle
from wordle_rl.reward_funcs import RewardCurriculum, make_reward_funcs
from wordle_rl.rewards import RewardWeights
from wordle_rl.rollout import ROW_KEY, WordleRollout

__all__ = ["WordleGRPOConfig", "WordleGRPOTrainer", "run_grpo", "load_rl_rows", "vllm_missing"]


def load_rl_rows(path: str | Path, splits: str | Path | None = None) -> list[dict]:
    """RL prompt rows, checked: schema and words, and (given a splits file) no val or test answer as
    a target.

    Targets outside the answer list (``wordle-rl data rl --wide-share``) are accepted: they are no
    split's answer.
    """
    from wordle_rl.data import DataError, read_jsonl, validate_rows
    from wordle_rl.splits import RL_TARGET_SPLITS, Splits, check_leakage

    p = Path(path)
    f = p / "rl.jsonl" if p.is_dir() else p
    if not f.is_file():
        raise DataError(f"{p}: no RL prompts here (make them with `wordle-rl data rl`)")
    rows = read_jsonl(f)
    validate_rows(rows, str(f), allow_outside=True)
    if splits is not None:
        check_leakage(
            rows, Splits.load(splits), str(f), allowed_split=RL_TARGET_SPLITS, allow_outside=True
        )
    return rows


class WordleGRPOTrainer(GRPOTrainer):
    """TRL's ``GRPOTrainer`` plus, when ``sft_batches`` is given, ``sft_coef`` times the SFT loss of
    one batch of solver games at every optimisation step (logged as ``sft/hard_loss`` and
    ``sft/soft_loss``); with ``advantage_sign="negative"`` positive advantages are set to 0."""

    def __init__(self, *args, sft_batches=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.sft_batches = sft_batches
        self._sft_draw = (-1, 0)  # (global step, micro-batches drawn in it)
        self.last_sft_games: list[int] = []  # the SFT games of this process's last batch

    def _generate_and_score_completions(self, inputs):
        out = super()._generate_and_score_completions(inputs)
        if self.args.credit == "letter":  # per-token advantages from the moves rollout
            width = out["completion_ids"].shape[1]
            out["advantages"] = self.rollout_func.token_advantages(out["advantages"], width)
        elif self.args.credit.startswith("expected"):
            # the letter sets travel with the batch to the loss
            width = out["completion_ids"].shape[1]
            out["letter_allowed"] = self.rollout_func.allowed_letters(width).to(self.model.device)
        if self.args.advantage_sign == "negative":  # only moves worse than their group's mean
            out["advantages"] = out["advantages"].clamp(max=0.0)
        return out

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        from wordle_rl.soft_targets import soft_target_losses

        if self.args.credit.startswith("expected"):
            rl = self.expected_letter_loss(model, inputs)
        else:
            rl = super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
        loss = self.args.rl_coef * rl
        if self.sft_batches is None or not model.training:
            return loss
        step, drawn = self._sft_draw
        drawn = drawn + 1 if step == self.state.global_step else 0
        self._sft_draw = (self.state.global_step, drawn)
        k, rank = (
            self.state.global_step * self.args.gradient_accumulation_steps + drawn,
            self.accelerator.process_index,
        )
        self.last_sft_games = self.sft_batches.indices(k, rank)
        batch = self.sft_batches.collate_games(self.last_sft_games)
        batch = {k: v.to(model.device) for k, v in batch.items()}
        hard, soft, _, _ = soft_target_losses(model, batch, self.sft_batches.target_ids)
        self._metrics["train"]["sft/hard_loss"].append(hard.item())
        self._metrics["train"]["sft/soft_loss"].append(soft.item())
        self._metrics["train"]["sft/coef"].append(self.sft_coef())
        sft = hard + self.args.sft_soft_target_weight * soft
        return loss + self.sft_coef() * sft / self.current_gradient_accumulation_steps

    def expected_letter_loss(self, model, inputs):
        """``credit="expected"``: minus the mean, over the letters of the batch's moves up to the
        first that breaks each, of the chance that the letter the policy draws there (at the
        rollout temperature) keeps the word completable to a fitting answer word: the exact
        expectation of the letter reward, so its gradient carries no sampling noise
        (``"expected-log"``: minus the mean log of that chance)."""
        import torch

        allowed = inputs["letter_allowed"]
        credited = allowed.any(-1)
        prompt, completion = inputs["prompt_ids"], inputs["completion_ids"]
        ids = torch.cat([prompt, completion], dim=1)
        mask = torch.cat([inputs["prompt_mask"], inputs["completion_mask"]], dim=1)
        logits = model(input_ids=ids, attention_mask=mask, use_cache=False).logits
        # the logit one position before a token predicts it
        logits = logits[:, prompt.shape[1] - 1 : -1].float() / self.args.temperature
        letters = torch.tensor(self.rollout_func.letter_tokens, device=logits.device)
        probs = logits.softmax(-1)[..., letters]
        value = (probs * allowed).sum(-1)
        n = credited.sum().clamp(min=1)
        self._metrics["train"]["wordle/letter_value"].append(((value * credited).sum() / n).item())
        if self.args.credit == "expected-log":
            value = value.clamp(min=1e-6).log()
        # outside a training step (a probe, an evaluation) nothing is accumulated
        steps = getattr(self, "current_gradient_accumulation_steps", 1)
        return -(value * credited).sum() / n / steps

    def sft_coef(self) -> float:
        """The SFT loss weight at this step: ``sft_coef``, moving linearly to ``sft_coef_final`` at
        max_steps."""
        a, b = self.args.sft_coef, self.args.sft_coef_final
        if b is None:
            return a
        t = min(1.0, self.state.global_step / max(1, self.args.max_steps))
        return (1 - t) * a + t * b


class CurriculumCallback(TrainerCallback):
    """Moves ``trainer.reward_weights`` along a :class:`RewardCurriculum` each step."""

    def __init__(self, curriculum: RewardCurriculum, rollout: WordleRollout):
        self.curriculum, self.rollout, self.trainer = curriculum, rollout, None

    def on_step_begin(self, args, state, control, **kwargs):
        import torch

        if self.trainer is None:
            return control
        compliance = 1.0 - self.rollout.last_stats.get("wordle/format_error_rate", 1.0)
        w = self.curriculum.weights(step=state.global_step, compliance=compliance)
        self.trainer.reward_weights = torch.tensor(w.as_list(), dtype=torch.float32)
        self.rollout.weights = w
        return control


class ValEvalCallback(TrainerCallback):
    """Plays a seeded sample of val answers every N steps with greedy decoding (step 0 included,
    before any update); appends win rate and mean guesses to ``val_eval.jsonl``."""

    def __init__(self, cfg: WordleGRPOConfig, tokenizer, out: Path):
        self.cfg, self.tok, self.out, self.trainer = cfg, tokenizer, out, None

    def on_train_begin(self, args, state, control, **kwargs):
        if state.global_step == 0:  # the starting model, before any update (not again on resume)
            self.on_step_end(args, state, control)
        return control

    def on_step_end(self, args, state, control, **kwargs):
        if (
            self.trainer is None
            or not self.cfg.eval_val_every
            or state.global_step % self.cfg.eval_val_every
        ):
            return control
        # one val record per step, whatever the process count
        if not self.trainer.accelerator.is_main_process:
            return control
        from wordle_rl.evaluate import EvalConfig, ModelPolicy, run_eval
        from wordle_rl.splits import Splits
        from wordle_rl.words import load_word_lists

        words = load_word_lists()
        sp = Splits.load(self.cfg.splits, words)
        model = self.trainer.model
        style = PromptStyle(self.cfg.style, think=self.cfg.think)
        policy = ModelPolicy(model, self.tok, style, words, max_new_tokens=self.cfg.max_turn_tokens)
        ecfg = EvalConfig(
            split="val", train_sample=False, style=self.cfg.style, think=self.cfg.think
        )
        sample = random.Random(self.cfg.seed).sample(
            sp.val, min(self.cfg.eval_val_games, len(sp.val))
        )
        with eval_mode(model):
            res = run_eval(policy, sample, ecfg, None, words)
        rec = {
            "step": state.global_step,
            "val_win_rate": res["metrics"]["win_rate"],
            "val_mean_guesses": res["metrics"]["mean_guesses_on_wins"],
            "val_mean_guesses_per_game": res["metrics"]["mean_guesses_per_game"],
        }
        with (self.out / "val_eval.jsonl").open("a") as fh:
            fh.write(json.dumps(rec) + "\n")
        return control


def run_grpo(cfg: WordleGRPOConfig, resume: bool = False, callbacks: list | None = None) -> Path:
    """Train, save the final model + tokenizer to ``output_dir``, and return that path.
    ``callbacks``: extra ``TrainerCallback`` objects; one with a ``trainer`` attribute is handed the
    trainer once it exists."""
    import torch
    from datasets import Dataset

    from wordle_rl.models import load_model
    from wordle_rl.prompt_record import check_prompt_style, write_prompt_record
    from wordle_rl.sft import TimeBudget, save_config, train_and_save
    from wordle_rl.soft_targets import SftBatches

    torch.set_num_threads(cfg.threads)
    style = PromptStyle(cfg.style, think=cfg.think)
    check_prompt_style(cfg.model, style)
    model, tok = load_model(cfg.model, threads=cfg.threads)
    rows = load_rl_rows(cfg.data, cfg.splits if Path(cfg.splits).is_file() else None)
    prompts = []
    for i, r in enumerate(rows):  # the row travels with its prompt to the rollout
        p = [dict(m) for m in r["prompt"]]
        p[0][ROW_KEY] = i
        prompts.append({"prompt": p})
    env_factory = None
    if cfg.rollout == "tools":
        from wordle_rl.env import EnvConfig
        from wordle_rl.rewards import RewardContext
        from wordle_rl.tool_env import TOOL_SYSTEM_PROMPT, tool_env_factory

        first = "Make your first guess with the guess tool."
        dataset = Dataset.from_list(
            [
                {
                    "prompt": [
                        {"role": "system", "content": TOOL_SYSTEM_PROMPT},
                        {"role": "user", "content": first},
                    ],
                    "answer": r["answer"],
                    "history": [list(t) for t in r.get("history") or []],
                }
                for r in rows
            ]
        )
        env_factory = tool_env_factory(
            EnvConfig(max_turns=cfg.max_turns, hard=cfg.hard),
            None if cfg.env_url else RewardContext(),
            cfg.env_url,
        )
        # the environment owns the reward
        rollout, reward_funcs, cfg.reward_weights = (
            None,
            None,
            None,
        )
    elif cfg.rollout == "moves":
        dataset = Dataset.from_list(prompts)
        rollout, reward_funcs = MoveRollout(cfg, rows, tok), [fits_reward]
        cfg.reward_weights = [1.0]
    elif cfg.rollout == "branch":
        dataset = Dataset.from_list(prompts)
        rollout, reward_funcs = BranchRollout(cfg, rows, tok), [game_return_reward]
        cfg.reward_weights = [1.0]
    else:
        dataset = Dataset.from_list(prompts)
        rollout = WordleRollout(cfg, rows, tok)
        reward_funcs = make_reward_funcs(rollout.style, cfg.hard, cfg.max_turns)
        cfg.reward_weights = RewardWeights.from_any(cfg.reward_preset).as_list()
    out = Path(cfg.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    save_config(cfg, out, "grpo")
    write_prompt_record(out, style)
    extra = list(callbacks or [])
    callbacks = [TimeBudget(cfg.time_budget_minutes)] if cfg.time_budget_minutes else []
    callbacks += extra
    cur = None
    if cfg.curriculum:
        cur = CurriculumCallback(
            RewardCurriculum("format", "strategy", mode=cfg.curriculum, steps=cfg.curriculum_steps),
            rollout,
        )
        callbacks.append(cur)
    val = ValEvalCallback(cfg, tok, out) if cfg.eval_val_every else None
    if val:
        callbacks.append(val)
    sft = (
        SftBatches(
            cfg.sft_data,
            tok,
            cfg.sft_batch_size,
            cfg.seed,
            cfg.splits if Path(cfg.splits).is_file() else None,
            soft=cfg.sft_soft_target_weight > 0,
        )
        if cfg.sft_coef > 0
        else None
    )
    trainer = WordleGRPOTrainer(
        model=model,
        reward_funcs=reward_funcs,
        args=cfg,
        train_dataset=dataset,
        processing_class=tok,
        rollout_func=rollout,
        environment_factory=env_factory,
        callbacks=callbacks,
        sft_batches=sft,
    )
    for cb in (cur, val, *extra):
        if cb is not None and hasattr(cb, "trainer"):
            cb.trainer = trainer
    return train_and_save(trainer, tok, out, resume, "grpo")
