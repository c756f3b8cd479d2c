"""Multi-turn GRPO: TRL's ``GRPOTrainer`` with a ``rollout_func`` that plays Wordle games.

    wordle-rl grpo --model runs/sft --data data/rl --output-dir runs/grpo [--num-generations 8] [--resume]

Two rollouts, chosen by ``rollout``: ``game`` (:class:`wordle_rl.rollout.WordleRollout`) plays every prompt row
``num_generations`` times as whole sampled games, one advantage per game; ``branch``
(:class:`wordle_rl.branch.BranchRollout`) forms each group at one state of the policy's own greedy game, so
each advantage credits one decision. Health is logged every step: zero-spread group share, win rate, guesses,
repeats, format errors, episodes/s and tokens/s.
With ``--sft_data DIR --sft_coef C`` every step also adds C times the SFT loss (hard labels + soft targets) of a
batch of solver games (PPO-ptx): the imitation objective stays in the loss while RL moves the policy.
"""

from __future__ import annotations

import json
import random
from dataclasses import asdict, dataclass, field
from pathlib import Path

from transformers import TrainerCallback
from trl import GRPOConfig, GRPOTrainer

from wordle_rl.branch import BranchRollout, game_return_reward
from wordle_rl.prompts import DEFAULT_STYLE, PromptStyle
from wordle_rl.rewards import RewardCurriculum, RewardWeights, make_reward_funcs
from wordle_rl.rollout import ROW_KEY, WordleRollout

__all__ = ["WordleGRPOConfig", "WordleGRPOTrainer", "run_grpo", "load_rl_rows", "vllm_missing"]


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
    sft_coef_final: float | None = field(default=None, metadata={
        "help": "Weight of the SFT loss at max_steps, reached linearly from sft_coef (None: sft_coef throughout)."})
    rl_coef: float = field(default=1.0, metadata={
        "help": "Weight of the GRPO loss (1; 0 trains the SFT loss alone on the same steps, an ablation)."})
    rollout: str = field(default="game", metadata={
        "help": "game: whole sampled games, one advantage per game; branch: groups of sampled moves at one state of "
                "the policy's own greedy game, each finished greedily, one advantage per decision; tools: TRL's "
                "environment_factory, guesses as tool calls (chat models with a tool-calling template)."})
    branch_states: str = field(default="any", metadata={
        "help": "branch: any (a decision of the greedy game drawn at random), endgame (its first state in which the "
                "row's answer is the only answer word that fits, where there is one) or mistake (the state of its "
                "first refused or non-fitting move, else as endgame)."})
    return_shaping: float = field(default=0.0, metadata={
        "help": "branch: weight (below 1) of the share of legal moves added to the strict game return."})
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
        if self.rollout not in ("game", "branch", "tools"):
            raise ValueError(f"rollout must be 'game', 'branch' or 'tools', got {self.rollout!r}")
        if self.rollout == "tools" and self.curriculum:
            raise ValueError("rollout='tools' scores each game with the environment's strict return: it takes no "
                             "reward curriculum")
        if self.rollout == "branch" and (self.curriculum or getattr(self, "use_vllm", False)):
            raise ValueError("rollout='branch' scores the strict game return with the trained model itself: it takes "
                             "no reward curriculum and no vLLM")
        if self.rl_coef < 0 or (self.rl_coef == 0 and self.sft_coef == 0):
            raise ValueError(f"rl_coef must be >= 0, and with rl_coef 0 sft_coef must be > 0 (else nothing trains), "
                             f"got {self.rl_coef} and {self.sft_coef}")
        if self.branch_states not in ("any", "endgame", "mistake"):
            raise ValueError(f"branch_states must be 'any', 'endgame' or 'mistake', got {self.branch_states!r}")
        if not 0 <= self.return_shaping < 1:
            raise ValueError(f"return_shaping must be in [0, 1), got {self.return_shaping}")
        if self.sft_coef_final is not None and (self.sft_coef_final < 0 or self.sft_coef == 0):
            raise ValueError("sft_coef_final needs sft_coef > 0 and must be >= 0")
        if getattr(self, "use_vllm", False):
            _configure_vllm(self)
        from wordle_rl.sft import resolve_defaults

        resolve_defaults(self)
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
    from wordle_rl.data import DataError, read_jsonl, validate_rows
    from wordle_rl.splits import RL_TARGET_SPLITS, Splits, check_leakage

    p = Path(path)
    f = p / "rl.jsonl" if p.is_dir() else p
    if not f.is_file():
        raise DataError(f"{p}: no RL prompts here (make them with `wordle-rl data rl`)")
    rows = read_jsonl(f)
    validate_rows(rows, str(f), allow_outside=True)
    if splits is not None:
        check_leakage(rows, Splits.load(splits), str(f), allowed_split=RL_TARGET_SPLITS, allow_outside=True)
    return rows


class WordleGRPOTrainer(GRPOTrainer):
    """TRL's ``GRPOTrainer`` plus, when ``sft_batches`` is given, ``sft_coef`` times the SFT loss of one batch of
    solver games at every optimisation step (logged as ``sft/hard_loss`` and ``sft/soft_loss``)."""

    def __init__(self, *args, sft_batches=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.sft_batches = sft_batches
        self._sft_draw = (-1, 0)  # (global step, micro-batches drawn in it)
        self.last_sft_games: list[int] = []  # the SFT games of this process's last batch

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        from wordle_rl.soft_targets import soft_target_losses

        loss = self.args.rl_coef * super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
        if self.sft_batches is None or not model.training:
            return loss
        step, drawn = self._sft_draw
        drawn = drawn + 1 if step == self.state.global_step else 0
        self._sft_draw = (self.state.global_step, drawn)
        k, rank = self.state.global_step * self.args.gradient_accumulation_steps + drawn, self.accelerator.process_index
        self.last_sft_games = self.sft_batches.indices(k, rank)
        batch = self.sft_batches.collate_games(self.last_sft_games)
        batch = {k: v.to(model.device) for k, v in batch.items()}
        hard, soft, _, _ = soft_target_losses(model, batch, self.sft_batches.target_ids)
        self._metrics["train"]["sft/hard_loss"].append(hard.item())
        self._metrics["train"]["sft/soft_loss"].append(soft.item())
        self._metrics["train"]["sft/coef"].append(self.sft_coef())
        sft = hard + self.args.sft_soft_target_weight * soft
        return loss + self.sft_coef() * sft / self.current_gradient_accumulation_steps

    def sft_coef(self) -> float:
        """The SFT loss weight at this step: ``sft_coef``, moving linearly to ``sft_coef_final`` at max_steps."""
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
    """Plays a seeded sample of val answers every N steps with greedy decoding (step 0 included, before any
    update); appends win rate and mean guesses to ``val_eval.jsonl``."""

    def __init__(self, cfg: WordleGRPOConfig, tokenizer, out: Path):
        self.cfg, self.tok, self.out, self.trainer = cfg, tokenizer, out, None

    def on_train_begin(self, args, state, control, **kwargs):
        if state.global_step == 0:  # the starting model, before any update (not again on resume)
            self.on_step_end(args, state, control)
        return control

    def on_step_end(self, args, state, control, **kwargs):
        if self.trainer is None or not self.cfg.eval_val_every or state.global_step % self.cfg.eval_val_every:
            return control
        if not self.trainer.accelerator.is_main_process:  # one val record per step, whatever the process count
            return control
        from wordle_rl.evaluate import EvalConfig, ModelPolicy, run_eval
        from wordle_rl.splits import Splits
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
               "val_mean_guesses": res["metrics"]["mean_guesses_on_wins"],
               "val_mean_guesses_per_game": res["metrics"]["mean_guesses_per_game"]}
        with (self.out / "val_eval.jsonl").open("a") as fh:
            fh.write(json.dumps(rec) + "\n")
        return control


def run_grpo(cfg: WordleGRPOConfig, resume: bool = False, callbacks: list | None = None) -> Path:
    """Train, save the final model + tokenizer to ``output_dir``, and return that path. ``callbacks``: extra
    ``TrainerCallback`` objects; one with a ``trainer`` attribute is handed the trainer once it exists."""
    import torch
    from datasets import Dataset

    from wordle_rl.models import check_prompt_style, load_model, write_prompt_record
    from wordle_rl.sft import TimeBudget, jsonable, train_and_save
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
        dataset = Dataset.from_list([{"prompt": [{"role": "system", "content": TOOL_SYSTEM_PROMPT},
                                                 {"role": "user", "content": first}],
                                      "answer": r["answer"], "history": [list(t) for t in r.get("history") or []]}
                                     for r in rows])
        env_factory = tool_env_factory(EnvConfig(max_turns=cfg.max_turns, hard=cfg.hard),
                                       None if cfg.env_url else RewardContext(), cfg.env_url)
        rollout, reward_funcs, cfg.reward_weights = None, None, None  # the environment owns the reward
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
    (out / "wordle_rl_grpo_config.json").write_text(json.dumps(jsonable(asdict(cfg)), indent=1, sort_keys=True))
    write_prompt_record(out, style)
    extra = list(callbacks or [])
    callbacks = [TimeBudget(cfg.time_budget_minutes)] if cfg.time_budget_minutes else []
    callbacks += extra
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
    trainer = WordleGRPOTrainer(model=model, reward_funcs=reward_funcs, args=cfg, train_dataset=dataset,
                                processing_class=tok, rollout_func=rollout, environment_factory=env_factory,
                                callbacks=callbacks, sft_batches=sft)
    for cb in (cur, val, *extra):
        if cb is not None and hasattr(cb, "trainer"):
            cb.trainer = trainer
    return train_and_save(trainer, tok, out, resume, "grpo")
