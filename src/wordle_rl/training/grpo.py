"""Multi-turn GRPO: TRL's ``GRPOTrainer`` with a ``rollout_func`` that plays Wordle games.

    wordle-rl grpo --model runs/sft --data data/rl --output-dir runs/grpo \\
        [--num-generations 8] [--resume]

Rollouts, chosen by ``rollout``: ``moves`` (the default,
:class:`wordle_rl.training.move_rollout.MoveRollout`) forms each group at one state of the policy's
own game and scores each sampled move by whether it could still be the answer; ``game``
(:class:`wordle_rl.training.rollout.WordleRollout`) plays every prompt row ``num_generations`` times
as whole sampled games, one advantage per game; ``tools`` is TRL's environment_factory. Health is
logged every step: zero-spread group share, win rate, guesses, repeats, format errors, episodes/s
and tokens/s. With ``--sft-data DIR --sft-coef C`` (the defaults: data/sft, 1.0) every step adds C
times the SFT loss (hard labels + soft targets) of a batch of solver games (PPO-ptx): the imitation
objective stays in the loss while RL moves the policy.
"""

from __future__ import annotations

from pathlib import Path

from trl import GRPOTrainer

from wordle_rl.environment.prompts import PromptStyle
from wordle_rl.environment.reward_funcs import make_reward_funcs
from wordle_rl.environment.rewards import RewardWeights
from wordle_rl.training.grpo_config import WordleGRPOConfig, vllm_missing
from wordle_rl.training.move_rollout import RECALL_STATES_DIR, MoveRollout, fits_reward
from wordle_rl.training.rollout import ROW_KEY, WordleRollout
from wordle_rl.training.shared_prompt import completion_logits, token_logps_and_entropies

__all__ = ["WordleGRPOConfig", "WordleGRPOTrainer", "run_grpo", "load_rl_rows", "vllm_missing"]


def load_rl_rows(path: str | Path, splits: str | Path | None = None) -> list[dict]:
    """RL prompt rows, checked: schema and words, and (given a splits file) no val or test answer as
    a target.

    Targets outside the answer list (``wordle-rl data rl --wide-share``) are accepted: they are no
    split's answer.
    """
    from wordle_rl.data.files import DataError, read_jsonl, validate_rows
    from wordle_rl.data.splits import Splits, check_leakage, check_made_with

    p = Path(path)
    f = p / "rl.jsonl" if p.is_dir() else p
    if not f.is_file():
        raise DataError(f"{p}: no RL prompts here (make them with `wordle-rl data rl`)")
    rows = read_jsonl(f)
    validate_rows(rows, str(f), allow_outside=True)
    if splits is not None:
        sp = Splits.load(splits)
        check_made_with(f, sp, splits)
        check_leakage(rows, sp, str(f), allow_outside=True)
    return rows


class WordleGRPOTrainer(GRPOTrainer):
    """TRL's ``GRPOTrainer`` plus, when ``sft_batches`` is given, ``sft_coef`` times the SFT loss of
    one batch of solver games at every optimisation step (logged as ``sft/hard_loss`` and
    ``sft/soft_loss``); with ``credit="expected"`` or ``"expected-log"`` the RL loss is the
    expected letter loss of the moves rollout."""

    def __init__(self, *args, sft_batches=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.sft_batches = sft_batches
        self._sft_draw = (-1, 0)  # (global step, micro-batches drawn in it)
        self.last_sft_games: list[int] = []  # the SFT games of this process's last batch

    def _generate_and_score_completions(self, inputs):
        out = super()._generate_and_score_completions(inputs)
        if self.args.credit.startswith("expected"):
            # the letter sets travel with the batch to the loss
            width = out["completion_ids"].shape[1]
            allowed, ids = self.rollout_func.allowed_letters(width)
            out["letter_allowed"] = allowed.to(self.model.device)
            out["letter_ids"] = ids.to(self.model.device)
        return out

    def _get_per_token_logps_and_entropies(
        self,
        model,
        input_ids,
        attention_mask,
        logits_to_keep,
        batch_size=None,
        compute_entropy=False,
        compute_aux_loss=False,
        **inputs,
    ):
        """TRL's per-token log-probabilities and entropies, each group's prompt run once
        (:mod:`wordle_rl.training.shared_prompt`); TRL's own per-row forward where that cannot
        apply (a multimodal input, an MoE aux loss, activation checkpointing, no shared prompt)."""
        logits = None
        if not (
            compute_aux_loss
            or self.args.activation_checkpointing
            or any(v is not None for v in inputs.values())
        ):
            with self.accelerator.autocast():
                logits = completion_logits(model, input_ids, attention_mask, logits_to_keep)
        if logits is None:
            return super()._get_per_token_logps_and_entropies(
                model,
                input_ids,
                attention_mask,
                logits_to_keep,
                batch_size,
                compute_entropy,
                compute_aux_loss,
                **inputs,
            )
        tokens = input_ids[:, -logits_to_keep:]
        logps, entropies = token_logps_and_entropies(
            logits, tokens, self.temperature, compute_entropy
        )
        return logps, entropies, None

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        from wordle_rl.training.soft_targets import soft_target_losses

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
        hard, soft, _ = soft_target_losses(model, batch)
        self._metrics["train"]["sft/hard_loss"].append(hard.item())
        self._metrics["train"]["sft/soft_loss"].append(soft.item())
        sft = hard + self.args.sft_soft_target_weight * soft
        return loss + self.args.sft_coef * sft / self.current_gradient_accumulation_steps

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
        # only the positions that predict the completion's tokens (the logit one position before
        # a token predicts it): a long prompt's logits over a large vocabulary would not fit
        width = completion.shape[1]
        logits = None
        if not self.args.activation_checkpointing:
            logits = completion_logits(model, ids, mask, width)
        if logits is None:
            logits = model(
                input_ids=ids, attention_mask=mask, use_cache=False, logits_to_keep=width + 1
            ).logits[:, :width]
        logits = logits.float() / self.args.temperature
        # each position's letters a-z (a BPE model writes later letters with a leading space)
        probs = logits.softmax(-1).gather(-1, inputs["letter_ids"])
        value = (probs * allowed).sum(-1)
        n = credited.sum().clamp(min=1)
        self._metrics["train"]["wordle/letter_value"].append(((value * credited).sum() / n).item())
        if self.args.credit == "expected-log":
            value = value.clamp(min=1e-6).log()
        # outside a training step (a probe, an evaluation) nothing is accumulated
        steps = getattr(self, "current_gradient_accumulation_steps", 1)
        return -(value * credited).sum() / n / steps


def forget_recall_states(out: Path, resume: bool) -> None:
    """Before training: a fresh run drops the recall states an earlier run in ``out`` recorded; a
    resumed one keeps them whole (a kill may have torn a last line). States of steps a resumed run
    plays again stay: the audit then counts more moves as imitated, never fewer."""
    import shutil

    from accelerate import PartialState

    from wordle_rl.engine.storage import repair_jsonl

    folder, state = out / RECALL_STATES_DIR, PartialState()
    if not resume and state.is_main_process and folder.exists():
        shutil.rmtree(folder)
    state.wait_for_everyone()
    repair_jsonl(folder / f"rank{state.process_index}.jsonl")


def run_grpo(cfg: WordleGRPOConfig, resume: bool = False, callbacks: list | None = None) -> Path:
    """Train, save the final model + tokenizer to ``output_dir``, and return that path.
    ``callbacks``: extra ``TrainerCallback`` objects; one with a ``trainer`` attribute is handed the
    trainer once it exists."""
    import torch
    from datasets import Dataset

    from wordle_rl.models.adapters import add_lora, weights_dtype
    from wordle_rl.models.embedded import load_model
    from wordle_rl.models.prompt_record import check_prompt_style, write_prompt_record
    from wordle_rl.training.records import save_config
    from wordle_rl.training.sft import TimeBudget, train_and_save
    from wordle_rl.training.soft_targets import SftBatches

    torch.set_num_threads(cfg.threads)
    forget_recall_states(Path(cfg.output_dir), resume)
    style = PromptStyle(cfg.style, think=cfg.think)
    check_prompt_style(cfg.model, style)
    model, tok = load_model(cfg.model, dtype=weights_dtype(cfg), threads=cfg.threads)
    model = add_lora(model, cfg)
    rows = load_rl_rows(cfg.data, cfg.splits if Path(cfg.splits).is_file() else None)
    prompts = []
    for i, r in enumerate(rows):  # the row travels with its prompt to the rollout
        p = [dict(m) for m in r["prompt"]]
        p[0][ROW_KEY] = i
        prompts.append({"prompt": p})
    env_factory = None
    if cfg.rollout == "tools":
        from wordle_rl.environment.env import EnvConfig
        from wordle_rl.environment.rewards import RewardContext
        from wordle_rl.environment.tool_env import TOOL_SYSTEM_PROMPT, tool_env_factory

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
    for cb in extra:
        if cb is not None and hasattr(cb, "trainer"):
            cb.trainer = trainer
    return train_and_save(trainer, tok, out, resume, "grpo")
