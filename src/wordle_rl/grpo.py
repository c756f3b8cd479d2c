"""Multi-turn GRPO: TRL's ``GRPOTrainer`` with a ``rollout_func`` that plays whole games.

    wordle-rl grpo --model runs/sft --data data/rl --output-dir runs/grpo [--num-generations 8] [--resume]

Each prompt row ``{answer, history}`` is played ``num_generations`` times; all games of a generation batch
advance together, one batched ``generate`` per turn (KV cache), never one game at a time. The episode is one
sequence: the model's turns (``env_mask`` 1, trained) interleaved with the environment's feedback
(``env_mask`` 0, masked out of the loss). Per-game results (won, turns, every reward component, errors) go
to the reward functions as ``episode_<component>`` keyword arguments, so TRL logs each component.

The answer never enters a prompt: rows are found by an index kept in the first message's dict.
The environment is in-process, or the server when ``env_url`` is set. Health is logged every step:
zero-spread group share, win rate, guesses, repeats, format errors, episodes/s and tokens/s.
With ``--sft_data DIR --sft_coef C`` every step also adds C times the SFT loss (hard labels + soft targets) of a
batch of solver games (PPO-ptx): the imitation objective stays in the loss while RL moves the policy.
"""

from __future__ import annotations

import json
import random
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
from transformers import TrainerCallback
from trl import GRPOConfig, GRPOTrainer

from wordle_rl.env import EnvConfig, WordleEnv
from wordle_rl.prompts import DEFAULT_STYLE, PromptStyle
from wordle_rl.rewards import COMPONENTS, RewardContext, RewardCurriculum, RewardWeights, combine, make_reward_funcs

__all__ = ["WordleGRPOConfig", "WordleGRPOTrainer", "WordleRollout", "run_grpo", "load_rl_rows", "vllm_missing"]

ROW_KEY = "wordle_row"


@dataclass
class WordleGRPOConfig(GRPOConfig):
    """TRL's ``GRPOConfig`` with wordle-rl's defaults for the embedded CPU model, plus game settings."""

    model: str = field(default="runs/sft", metadata={"help": "Model to train (hub id or path), usually the SFT one."})
    data: str = field(default="data/rl", metadata={"help": "RL prompts from `wordle-rl data rl`."})
    output_dir: str = field(default="runs/grpo", metadata={"help": "Checkpoints and the final model."})
    style: str = field(default=DEFAULT_STYLE, metadata={"help": "Prompt style (must match the SFT data)."})
    think: bool = field(default=False, metadata={"help": "Style expects <think>."})
    hard: bool = field(default=False, metadata={"help": "Hard mode."})
    max_turns: int = field(default=6, metadata={"help": "Guesses per game."})
    max_turn_tokens: int = field(default=16, metadata={
        "help": "New tokens per model turn (a no-think xml answer takes 8 with the embedded tokenizer)."})
    env_url: str | None = field(default=None, metadata={"help": "Play against `wordle-rl serve` at this URL."})
    reward_preset: str = field(default="default", metadata={"help": "Reward weights preset (see rewards.py)."})
    curriculum: str | None = field(default=None, metadata={
        "help": "'step' or 'compliance': move weights from the 'format' preset to 'strategy'."})
    curriculum_steps: int = field(default=200, metadata={"help": "Steps of the step curriculum."})
    depth_curriculum_steps: int = field(default=0, metadata={
        "help": "History-depth curriculum: over the first N steps, groups start from deep histories (2+ earlier "
                "turns, few answers left, easier wins) with a share falling linearly from 1 to 0 (0 = off)."})
    resample_zero_spread: int = field(default=0, metadata={
        "help": "Replay a group whose games all scored the same up to N times with other prompts."})
    threads: int = field(default=2, metadata={"help": "torch CPU threads."})
    time_budget_minutes: float | None = field(default=None, metadata={"help": "Stop (and save) after this long."})
    num_generations: int = field(default=8, metadata={"help": "Games per prompt (a group); at least 2."})
    per_device_train_batch_size: int = field(default=64, metadata={"help": "Games per step (multiple of groups)."})
    learning_rate: float = field(default=5e-5, metadata={"help": "Learning rate."})
    temperature: float = field(default=1.0, metadata={"help": "Sampling temperature of rollouts."})
    beta: float = field(default=0.0, metadata={"help": "KL coefficient (0: no reference model)."})
    logging_steps: int = field(default=1, metadata={"help": "Log every N steps."})
    save_steps: int = field(default=25, metadata={"help": "Checkpoint every N steps."})
    save_total_limit: int | None = field(default=2, metadata={"help": "Checkpoints kept."})
    report_to: str = field(default="none", metadata={"help": "Tracker: none, tensorboard, trackio."})
    max_completion_length: int = field(default=256, metadata={"help": "Upper bound of a whole episode's tokens."})
    bf16: bool | None = field(default=None, metadata={
        "help": "bf16 autocast; default: on with CUDA, off on a CPU (true allowed where the CPU has native bf16)."})
    activation_checkpointing: bool | None = field(default=False, metadata={
        "help": "Recompute activations in backward (saves memory on large models, costs time)."})
    gradient_checkpointing: bool | None = field(default=None, metadata={
        "help": "Old name of activation_checkpointing; when given, it wins."})
    eval_val_every: int = field(default=0, metadata={"help": "Evaluate on the val split every N steps (0 = off)."})
    eval_val_games: int = field(default=100, metadata={
        "help": "Val answers per evaluation: a random sample drawn with the run's seed, the same at every step."})
    splits: str = field(default="data/splits.json", metadata={
        "help": "Splits file: val evaluation, and (when it exists) the check that no RL target is a val/test answer."})
    sft_data: str | None = field(default=None, metadata={
        "help": "SFT games (`wordle-rl data sft`) whose loss (hard labels + soft targets, as in `wordle-rl sft`) is "
                "added to every GRPO step with weight sft_coef (PPO-ptx): it keeps the imitation, and the soft "
                "targets over every fitting answer word, while RL moves the policy. None: off."})
    sft_coef: float = field(default=0.0, metadata={"help": "Weight of the SFT loss (0: off; > 0 needs sft_data)."})
    sft_batch_size: int = field(default=32, metadata={"help": "SFT games per step for that loss."})
    sft_soft_target_weight: float = field(default=1.0, metadata={
        "help": "Weight of the soft targets inside that loss (the `wordle-rl sft` option soft_target_weight; 0 for "
                "a tokenizer that does not spell a guess one letter per token, e.g. Qwen's)."})

    def __post_init__(self) -> None:
        if self.num_generations is not None and self.num_generations < 2:
            raise ValueError("num_generations must be at least 2: GRPO compares games within a group, and a group "
                             "of one has no relative advantage to learn from")
        if self.sft_coef < 0 or self.sft_soft_target_weight < 0:
            raise ValueError(f"sft_coef and sft_soft_target_weight must be >= 0, got {self.sft_coef} and "
                             f"{self.sft_soft_target_weight}")
        if self.sft_coef > 0 and not self.sft_data:
            raise ValueError(f"sft_coef={self.sft_coef} needs sft_data: the SFT games (`wordle-rl data sft`) "
                             "whose loss it weighs")
        if self.sft_data and self.sft_coef == 0:
            raise ValueError(f"sft_data={self.sft_data!r} is set but sft_coef is 0, so it would be unused: set "
                             "sft_coef > 0 (e.g. 1.0) or leave sft_data out")
        if getattr(self, "use_vllm", False):
            _configure_vllm(self)
        from wordle_rl.sft import _resolve_defaults

        _resolve_defaults(self)
        super().__post_init__()


def vllm_missing() -> str | None:
    """Why vLLM rollouts cannot run on this machine (``None`` when they can)."""
    import importlib.util

    import torch

    if not torch.cuda.is_available() or importlib.util.find_spec("vllm") is None:
        return ("use_vllm needs a CUDA GPU and `pip install 'wordle-rl[gpu]'` (vLLM 0.22-0.31); without them "
                "leave use_vllm off and the rollout generates with the trained model")
    return None


def _configure_vllm(cfg: WordleGRPOConfig) -> None:
    """Refuse vLLM rollouts this machine or setup cannot run; cap each turn's vLLM call at ``max_turn_tokens``."""
    import os

    missing = vllm_missing()
    if missing:
        raise ValueError(missing)
    shared = cfg.vllm_mode == "server" or getattr(cfg, "vllm_tensor_parallel_size", 1) > 1
    if shared and int(os.environ.get("WORLD_SIZE", "1")) > 1:
        raise ValueError("use_vllm with several training processes sharing one vLLM engine (vllm_mode='server', or "
                         "colocate with vllm_tensor_parallel_size > 1) is not supported by the multi-turn rollout: "
                         "games end at different turns on each process; use one process, or colocate with one "
                         "vLLM engine per GPU")
    extra = cfg.generation_kwargs or {}
    extra = json.loads(extra) if isinstance(extra, str) else extra
    cfg.generation_kwargs = {"max_tokens": cfg.max_turn_tokens, **extra}


def load_rl_rows(path: str | Path, splits: str | Path | None = None) -> list[dict]:
    """RL prompt rows, checked: schema and words, and (given a splits file) no val or test answer as a target.

    Targets outside the answer list (``wordle-rl data rl --wide-share``) are accepted: they are no split's answer.
    """
    from wordle_rl.data import RL_TARGET_SPLITS, DataError, Splits, check_leakage, read_jsonl, validate_rows

    p = Path(path)
    f = p / "rl.jsonl" if p.is_dir() else p
    if not f.is_file():
        raise DataError(f"{p}: no RL prompts here (make them with `wordle-rl data rl`)")
    rows = read_jsonl(f)
    validate_rows(rows, str(f), allow_outside=True)
    if splits is not None:
        check_leakage(rows, Splits.load(splits), str(f), allowed_split=RL_TARGET_SPLITS, allow_outside=True)
    return rows


def _left_pad(seqs: list[list[int]], pad: int, device):
    """``(ids, attention_mask)`` tensors of token lists, padded on the left to the longest."""
    import torch

    width = max(len(x) for x in seqs)
    ids = torch.tensor([[pad] * (width - len(x)) + x for x in seqs], dtype=torch.long, device=device)
    att = torch.tensor([[0] * (width - len(x)) + [1] * len(x) for x in seqs], dtype=torch.long, device=device)
    return ids, att


@dataclass
class _Episode:
    """One game of a rollout: its environment, prompt, and the episode sequence built turn by turn."""

    env: object
    prompt_ids: list[int]
    covered: str  # the conversation text whose tokens are already in prompt_ids + comp_ids
    comp_ids: list[int] = field(default_factory=list)
    mask: list[int] = field(default_factory=list)  # 1: generated (trained), 0: environment tokens
    logps: list[float] = field(default_factory=list)
    errors: list[str | None] = field(default_factory=list)
    result: dict = field(default_factory=dict)


class WordleRollout:
    """The ``rollout_func``: whole games, batched per turn, with env tokens masked and per-game rewards."""

    def __init__(self, cfg: WordleGRPOConfig, rows: list[dict], tokenizer, ctx: RewardContext | None = None):
        self.cfg, self.rows, self.tok = cfg, rows, tokenizer
        self.ctx = ctx or RewardContext()
        self.style = PromptStyle(cfg.style, think=cfg.think, max_turns=cfg.max_turns)
        self.env_config = EnvConfig(style=self.style, hard=cfg.hard, max_turns=cfg.max_turns,
                                    reward_weights=cfg.reward_preset)
        self.weights = RewardWeights.from_any(cfg.reward_preset)
        self.rng = np.random.default_rng(cfg.seed)
        self.last_stats: dict[str, float] = {}
        # special tokens other than end-of-turn would break the turn structure: never sample them
        self._suppress = sorted(set(tokenizer.all_special_ids) - {tokenizer.eos_token_id})
        self.record_logprobs = False  # keep each sampled token's log-probability (tests, diagnostics)

    def _env(self):
        if self.cfg.env_url:
            from wordle_rl.client import RemoteEnv

            return RemoteEnv(self.cfg.env_url)
        return WordleEnv(self.env_config, ctx=self.ctx)

    def play(self, model, row_ids: list[int], vllm=None) -> list[dict]:
        """Play one game per entry of ``row_ids`` (repeats allowed); every turn is one batched generate.

        ``vllm``: TRL's ``VLLMGeneration`` of the trainer (``use_vllm``); each turn then sends every live game's
        whole conversation so far to vLLM (its prefix cache reuses the earlier turns) instead of ``model``."""
        if vllm is not None:
            return self._play_vllm(vllm, row_ids)
        was_training = model.training
        model.eval()  # sampling in train mode (no KV cache under gradient checkpointing) is wrong and slow
        try:
            return self._play(model, row_ids)
        finally:
            if was_training:
                model.train()

    def _start(self, row_ids: list[int]) -> list[_Episode]:
        """Reset one environment per row; each episode starts from the rendered prompt's token ids."""
        eps = []
        for r in row_ids:
            row = self.rows[r]
            env = self._env()
            obs = env.reset(answer=row["answer"], history=[(g, p) for g, p in row["history"]] or None)
            text = self.tok.apply_chat_template(obs.messages, add_generation_prompt=True, tokenize=False)
            eps.append(_Episode(env, self.tok(text, add_special_tokens=False)["input_ids"], text))
        return eps

    def _cut(self, ids: list[int]) -> tuple[list[int], bool]:
        """A generated turn up to its end-of-turn token, and whether it had none (cut at ``max_turn_tokens``)."""
        eos = self.tok.eos_token_id
        return (ids, True) if eos not in ids else (ids[: ids.index(eos) + 1], False)

    def _turn(self, ep: _Episode, ids: list[int], logps: list[float] | None) -> list[int] | None:
        """Apply one generated turn (cut at end-of-turn) to its game: the environment's reply as token ids to
        append to the conversation, or ``None`` when the game is over."""
        eos = self.tok.eos_token_id
        ids, forced = self._cut(ids)
        self.last_stats["gen_tokens"] += len(ids)
        if logps is not None:
            ep.logps += logps[: len(ids)]
        step = ep.env.step(self.tok.decode(ids, skip_special_tokens=True))
        ep.comp_ids += ids
        ep.mask += [1] * len(ids)
        ep.errors.append(step.info["error"])
        if step.done:
            if forced:  # a turn cut off at max_turn_tokens is closed by the environment, not the model
                ep.comp_ids.append(eos)
                ep.mask.append(0)
                if logps is not None:
                    ep.logps.append(0.0)
            ep.result = step.info
            return None
        ep.covered += self.tok.decode(ids, skip_special_tokens=False)
        nxt = self.tok.apply_chat_template(step.observation.messages, add_generation_prompt=True, tokenize=False)
        if not nxt.startswith(ep.covered):
            raise RuntimeError("the chat template does not re-render the played turns verbatim; "
                               "env tokens cannot be aligned with generated tokens")
        env_ids = self.tok(nxt[len(ep.covered):], add_special_tokens=False)["input_ids"]
        ep.covered = nxt
        ep.comp_ids += env_ids
        ep.mask += [0] * len(env_ids)
        if logps is not None:
            ep.logps += [0.0] * len(env_ids)
        return env_ids

    def _finish(self, eps: list[_Episode], logprobs: bool) -> list[dict]:
        games = []
        for ep in eps:
            if hasattr(ep.env, "close"):
                ep.env.close()
            info = ep.result
            comp = info["episode_components"]
            games.append({"prompt_ids": ep.prompt_ids, "completion_ids": ep.comp_ids, "env_mask": ep.mask,
                          "won": bool(info["won"]), "turns": int(info["turns"]), "components": comp,
                          "errors": ep.errors, "reward": combine(comp, self.weights)})
            if logprobs:
                games[-1]["logprobs"] = ep.logps
        return games

    def _play(self, model, row_ids: list[int]) -> list[dict]:
        """All games in one batch; the KV cache is carried from turn to turn, so each turn only processes the new
        feedback tokens. The batch is a left-padded tensor that grows by [generated | feedback] each turn: padding
        inside it (after an early end-of-turn, before a shorter feedback) is masked, and position ids follow the
        mask, so every game sees exactly the positions of its own unpadded conversation. Finished games leave the
        batch and the cache."""
        import torch

        eps = self._start(row_ids)
        pad, eos, dev = self.tok.pad_token_id, self.tok.eos_token_id, model.device
        self.last_stats["gen_tokens"] = 0
        active = list(range(len(eps)))  # episode index of each batch row
        seqs, attn = _left_pad([ep.prompt_ids for ep in eps], pad, dev)
        cache = None
        while active:
            with torch.no_grad():
                out = model.generate(input_ids=seqs, attention_mask=attn, past_key_values=cache, do_sample=True,
                                     temperature=self.cfg.temperature, top_k=0, top_p=1.0,
                                     max_new_tokens=self.cfg.max_turn_tokens, pad_token_id=pad, eos_token_id=eos,
                                     use_cache=True, suppress_tokens=self._suppress or None,
                                     return_dict_in_generate=True, output_logits=self.record_logprobs)
            cache = out.past_key_values
            new = out.sequences[:, seqs.shape[1]:]
            new_list = new.tolist()
            step_lp = None
            if self.record_logprobs:
                step_lp = torch.stack(out.logits, 1).float().log_softmax(-1).gather(2, new[..., None])[..., 0].tolist()
            new_attn = torch.zeros_like(new)
            env_segments: list[list[int]] = []
            keep: list[int] = []
            for j, i in enumerate(active):
                ids = new_list[j]
                new_attn[j, : len(self._cut(ids)[0])] = 1
                env_ids = self._turn(eps[i], ids, step_lp[j] if step_lp else None)
                if env_ids is not None:
                    env_segments.append(env_ids)
                    keep.append(j)
            if not keep:
                break
            idx = torch.tensor(keep, device=dev)
            cache.batch_select_indices(idx)
            env_t, env_attn = _left_pad(env_segments, pad, dev)
            seqs = torch.cat([out.sequences[idx], env_t], 1)
            attn = torch.cat([attn[idx], new_attn[idx], env_attn], 1)
            active = [active[j] for j in keep]
        return self._finish(eps, self.record_logprobs)

    def _play_vllm(self, vllm, row_ids: list[int]) -> list[dict]:
        """The same games with vLLM generating each turn (GPU). vLLM samples with the trainer's temperature; a
        turn longer than ``max_turn_tokens`` is cut there, as in :meth:`_play`. Its per-token log-probabilities
        are kept (0 for environment tokens) for TRL's importance-sampling correction."""
        eps = self._start(row_ids)
        self.last_stats["gen_tokens"] = 0
        active = list(range(len(eps)))
        with_logprobs = True  # vLLM returns them unless its logprobs setting is None
        while active:
            prompts = [eps[i].prompt_ids + eps[i].comp_ids for i in active]
            _, completions, logprobs, _ = vllm.generate(prompts=prompts, images=None, num_generations=1)
            with_logprobs = with_logprobs and logprobs is not None
            still = []
            for j, i in enumerate(active):
                ids = list(completions[j])[: self.cfg.max_turn_tokens]
                lps = [float(lp[0]) for lp in logprobs[j]][: len(ids)] if logprobs is not None else None
                if self._turn(eps[i], ids, lps) is not None:
                    still.append(i)
            active = still
        return self._finish(eps, with_logprobs)

    def depth_curriculum(self, row_ids: list[int], step: int) -> list[int]:
        """Swap whole groups' rows for deep-history rows with probability ``1 - step / depth_curriculum_steps``."""
        n = self.cfg.depth_curriculum_steps
        share = max(0.0, 1.0 - step / n) if n else 0.0
        if share == 0.0:
            return row_ids
        deep = [k for k, r in enumerate(self.rows) if len(r["history"]) >= 2]
        if not deep:
            return row_ids
        g, out = self.cfg.num_generations, list(row_ids)
        for k in range(0, len(out), g):
            if self.rng.random() < share:
                out[k:k + g] = [deep[int(self.rng.integers(len(deep)))]] * len(out[k:k + g])
        return out

    def __call__(self, prompts: list, trainer) -> dict:
        t0 = time.perf_counter()
        row_ids = self.depth_curriculum([int(p[0][ROW_KEY]) for p in prompts], trainer.state.global_step)
        vllm = trainer.vllm_generation if getattr(trainer, "use_vllm", False) else None
        games = self.play(trainer.model, row_ids, vllm)
        g = self.cfg.num_generations
        tries = 0
        while tries < self.cfg.resample_zero_spread:
            flat = [k for k in range(0, len(games), g) if np.ptp([x["reward"] for x in games[k:k + g]]) == 0]
            if not flat:
                break
            new_rows = [int(self.rng.integers(len(self.rows))) for _ in flat]
            replay = self.play(trainer.model, [r for r in new_rows for _ in range(g)], vllm)
            for n, k in enumerate(flat):
                games[k:k + g] = replay[n * g:(n + 1) * g]
            tries += 1
        spread = [np.ptp([x["reward"] for x in games[k:k + g]]) for k in range(0, len(games), g)]
        dt = time.perf_counter() - t0
        moves = [e for x in games for e in x["errors"]]
        won = [x for x in games if x["won"]]
        self.last_stats.update({
            "wordle/zero_spread_share": float(np.mean([s == 0 for s in spread])),
            "wordle/win_rate": len(won) / len(games),
            "wordle/mean_guesses_on_wins": float(np.mean([x["turns"] for x in won])) if won else 0.0,
            "wordle/repeated_guess_rate": float(np.mean([e == "repeated_guess" for e in moves])),
            "wordle/format_error_rate": float(np.mean([e not in (None, "not_in_word_list", "repeated_guess",
                                                                 "hard_mode_violation") for e in moves])),
            "wordle/invalid_word_rate": float(np.mean([e == "not_in_word_list" for e in moves])),
            "wordle/episodes_per_s": len(games) / dt,
            "wordle/tokens_per_s": self.last_stats["gen_tokens"] / dt,
            "wordle/resample_rounds": tries,
            "wordle/mean_history_depth": float(np.mean([len(self.rows[r]["history"]) for r in row_ids])),
        })
        metrics = getattr(trainer, "_metrics", None)
        if metrics is not None:
            for k, v in self.last_stats.items():
                if k.startswith("wordle/"):
                    metrics["train"][k].append(v)
        out = {"prompt_ids": [x["prompt_ids"] for x in games], "completion_ids": [x["completion_ids"] for x in games],
               "env_mask": [x["env_mask"] for x in games],
               "logprobs": ([x["logprobs"] for x in games]
                            if vllm is not None and all("logprobs" in x for x in games) else None),
               "won": [x["won"] for x in games], "turns": [x["turns"] for x in games]}
        for c in COMPONENTS:
            out[f"episode_{c}"] = [x["components"][c] for x in games]
        return out


class WordleGRPOTrainer(GRPOTrainer):
    """TRL's ``GRPOTrainer`` plus, when ``sft_batches`` is given, ``sft_coef`` times the SFT loss of one batch of
    solver games at every optimisation step (logged as ``sft/hard_loss`` and ``sft/soft_loss``)."""

    def __init__(self, *args, sft_batches=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.sft_batches = sft_batches
        self._sft_draw = (-1, 0)  # (global step, micro-batches drawn in it)

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        from wordle_rl.sft import soft_target_losses

        loss = super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
        if self.sft_batches is None or not model.training:
            return loss
        step, drawn = self._sft_draw
        drawn = drawn + 1 if step == self.state.global_step else 0
        self._sft_draw = (self.state.global_step, drawn)
        batch = self.sft_batches.batch(self.state.global_step * self.args.gradient_accumulation_steps + drawn)
        batch = {k: v.to(model.device) for k, v in batch.items()}
        hard, soft, _, _ = soft_target_losses(model, batch, self.sft_batches.target_ids)
        self._metrics["train"]["sft/hard_loss"].append(hard.item())
        self._metrics["train"]["sft/soft_loss"].append(soft.item())
        sft = hard + self.args.sft_soft_target_weight * soft
        return loss + self.args.sft_coef * sft / self.current_gradient_accumulation_steps


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
    """Plays val answers every N steps with greedy decoding; logs win rate and appends to a JSONL."""

    def __init__(self, cfg: WordleGRPOConfig, tokenizer, out: Path):
        self.cfg, self.tok, self.out, self.trainer = cfg, tokenizer, out, None

    def on_step_end(self, args, state, control, **kwargs):
        if self.trainer is None or not self.cfg.eval_val_every or state.global_step % self.cfg.eval_val_every:
            return control
        from wordle_rl.data import Splits
        from wordle_rl.evaluate import EvalConfig, ModelPolicy, run_eval
        from wordle_rl.words import load_word_lists

        words = load_word_lists()
        sp = Splits.load(self.cfg.splits, words)
        model = self.trainer.model
        was_training = model.training
        model.eval()
        style = PromptStyle(self.cfg.style, think=self.cfg.think)
        policy = ModelPolicy(model, self.tok, style, words, max_new_tokens=self.cfg.max_turn_tokens)
        ecfg = EvalConfig(split="val", train_sample=False, style=self.cfg.style, think=self.cfg.think)
        sample = random.Random(self.cfg.seed).sample(sp.val, min(self.cfg.eval_val_games, len(sp.val)))
        res = run_eval(policy, sample, ecfg, None, words)
        if was_training:
            model.train()
        rec = {"step": state.global_step, "val_win_rate": res["metrics"]["win_rate"],
               "val_mean_guesses": res["metrics"]["mean_guesses_on_wins"]}
        with (self.out / "val_eval.jsonl").open("a") as fh:
            fh.write(json.dumps(rec) + "\n")
        return control


def run_grpo(cfg: WordleGRPOConfig, resume: bool = False) -> Path:
    import torch
    from datasets import Dataset

    from wordle_rl.models import check_prompt_style, load_model, write_prompt_record
    from wordle_rl.sft import SftBatches, TimeBudget, _jsonable, train_and_save

    torch.set_num_threads(cfg.threads)
    style = PromptStyle(cfg.style, think=cfg.think)
    check_prompt_style(cfg.model, style)
    model, tok = load_model(cfg.model, threads=cfg.threads)
    rows = load_rl_rows(cfg.data, cfg.splits if Path(cfg.splits).is_file() else None)
    prompts = []
    for i, r in enumerate(rows):
        p = [dict(m) for m in r["prompt"]]
        p[0][ROW_KEY] = i
        prompts.append({"prompt": p})
    dataset = Dataset.from_list(prompts)
    rollout = WordleRollout(cfg, rows, tok)
    weights = RewardWeights.from_any(cfg.reward_preset)
    cfg.reward_weights = weights.as_list()
    out = Path(cfg.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "wordle_rl_grpo_config.json").write_text(json.dumps(_jsonable(asdict(cfg)), indent=1, sort_keys=True))
    write_prompt_record(out, style)
    callbacks: list = [TimeBudget(cfg.time_budget_minutes)] if cfg.time_budget_minutes else []
    cur = None
    if cfg.curriculum:
        cur = CurriculumCallback(RewardCurriculum("format", "strategy", mode=cfg.curriculum,
                                                  steps=cfg.curriculum_steps), rollout)
        callbacks.append(cur)
    val = ValEvalCallback(cfg, tok, out) if cfg.eval_val_every else None
    if val:
        callbacks.append(val)
    sft = (SftBatches(cfg.sft_data, tok, cfg.sft_batch_size, cfg.seed,
                      cfg.splits if Path(cfg.splits).is_file() else None, soft=cfg.sft_soft_target_weight > 0)
           if cfg.sft_coef > 0 else None)
    trainer = WordleGRPOTrainer(model=model, reward_funcs=make_reward_funcs(rollout.style, cfg.hard, cfg.max_turns),
                                args=cfg, train_dataset=dataset, processing_class=tok, rollout_func=rollout,
                                callbacks=callbacks, sft_batches=sft)
    for cb in (cur, val):
        if cb is not None:
            cb.trainer = trainer
    return train_and_save(trainer, tok, out, resume, "grpo")
