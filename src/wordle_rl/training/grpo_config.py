"""The configuration of ``wordle-rl grpo``: TRL's ``GRPOConfig`` with the main job's defaults.

    wordle-rl grpo --help-config          # every field, with its help

Each field is a flag of ``wordle-rl grpo`` and a key of the pipeline's ``grpo`` section; the values
here are the main job's (why each: docs/results.md). ``__post_init__`` refuses settings that cannot
run together, and refuses vLLM rollouts where CUDA or vLLM is missing.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from trl import GRPOConfig

from wordle_rl.environment.prompts import DEFAULT_STYLE
from wordle_rl.models.adapters import LoraFields
from wordle_rl.models.prompt_record import model_style
from wordle_rl.training.precision import PrecisionFields, resolve_precision

__all__ = ["WordleGRPOConfig", "vllm_missing", "ROLLOUTS", "MOVES_STATES", "CREDITS"]

ROLLOUTS = ("game", "moves", "tools")
MOVES_STATES = ("any", "endgame", "recall", "refused")
CREDITS = ("move", "expected", "expected-log")


@dataclass
class WordleGRPOConfig(LoraFields, PrecisionFields, GRPOConfig):
    """TRL's ``GRPOConfig`` with wordle-rl's defaults for the embedded CPU model, plus game
    settings."""

    model: str = field(
        default="runs/sft",
        metadata={"help": "Model to train (hub id or path), usually the SFT one."},
    )
    data: str = field(default="data/rl", metadata={"help": "RL prompts from `wordle-rl data rl`."})
    output_dir: str = field(
        default="runs/grpo", metadata={"help": "Checkpoints and the final model."}
    )
    style: str | None = field(
        default=None,
        metadata={
            "help": "Prompt style (must match the SFT data); default: the style and think that "
            f"the model folder records, else {DEFAULT_STYLE}."
        },
    )
    think: bool = field(default=False, metadata={"help": "Style expects <think>."})
    hard: bool = field(default=False, metadata={"help": "Hard mode."})
    max_turns: int = field(default=6, metadata={"help": "Guesses per game."})
    max_turn_tokens: int = field(
        default=16,
        metadata={
            "help": "New tokens per model turn (a no-think xml answer takes 8 with the embedded "
            "tokenizer)."
        },
    )
    env_url: str | None = field(
        default=None, metadata={"help": "Play against `wordle-rl serve` at this URL."}
    )
    reward_preset: str = field(
        default="default", metadata={"help": "Reward weights preset (see rewards.py)."}
    )
    threads: int = field(default=2, metadata={"help": "torch CPU threads."})
    seed: int = field(default=0, metadata={"help": "Seed of rollouts, batches and dropout."})
    max_steps: int = field(default=400, metadata={"help": "Optimizer steps."})
    time_budget_minutes: float | None = field(
        default=None,
        metadata={
            "help": "Stop (and save) after this long; None: train all max_steps, the same model "
            "on any machine."
        },
    )
    num_generations: int = field(
        default=2,
        metadata={
            "help": "Completions per prompt (a group); at least 2 (the default expected-log "
            "credit needs no group baseline, so 2 gives the most states a step; advantages "
            "compared within a group want 8 or more)."
        },
    )
    per_device_train_batch_size: int = field(
        default=64, metadata={"help": "Games per step (multiple of groups)."}
    )
    learning_rate: float = field(default=2e-4, metadata={"help": "Learning rate."})
    temperature: float = field(default=1.0, metadata={"help": "Sampling temperature of rollouts."})
    scale_rewards: str = field(
        default="none",
        metadata={
            "help": "Divide advantages by the group's reward std (group), the batch's (batch), or "
            "not (none)."
        },
    )
    beta: float = field(default=0.0, metadata={"help": "KL coefficient (0: no reference model)."})
    logging_steps: int = field(default=1, metadata={"help": "Log every N steps."})
    save_steps: int = field(default=25, metadata={"help": "Checkpoint every N steps."})
    save_total_limit: int | None = field(default=2, metadata={"help": "Checkpoints kept."})
    report_to: str = field(
        default="none", metadata={"help": "Tracker: none, tensorboard, trackio."}
    )
    max_completion_length: int = field(
        default=256, metadata={"help": "Upper bound of a whole episode's tokens."}
    )
    eval_val_every: int = field(
        default=50,
        metadata={
            "help": "Play the val answers greedily every N steps, at step 0 and at the last step, "
            "and keep the best model (0 = off)."
        },
    )
    eval_val_games: int | None = field(
        default=None,
        metadata={
            "help": "Val answers per evaluation (None: every one); a sample is drawn with the "
            "run's seed, the same at every step. The step with the fewest guesses per game is "
            "the run's best model (best-val/, best_val.json)."
        },
    )
    eval_val_batch_size: int = field(
        default=128,
        metadata={
            "help": "Val games played at once in a val check (only one batch's KV caches are "
            "held beside the training state)."
        },
    )
    splits: str = field(
        default="data/splits.json",
        metadata={
            "help": "Splits file: val evaluation, and (when it exists) the check that no RL target "
            "is a val/test answer."
        },
    )
    sft_data: str | None = field(
        default="data/sft",
        metadata={
            "help": "SFT games (`wordle-rl data sft`) whose loss (hard labels + soft targets, as "
            "in `wordle-rl sft`) is added to every GRPO step with weight sft_coef (PPO-ptx)."
        },
    )
    sft_coef: float = field(
        default=1.0, metadata={"help": "Weight of the SFT loss (0: off, sft_data unused)."}
    )
    rl_coef: float = field(
        default=1.0,
        metadata={
            "help": "Weight of the GRPO loss (1; 0 trains the SFT loss alone on the same steps, an "
            "ablation)."
        },
    )
    rollout: str = field(
        default="moves",
        metadata={
            "help": "game: whole sampled games, one advantage per game; moves: groups of single "
            "moves sampled at one state of the policy's own greedy game (after refused moves too), "
            "each scored by whether it could still be the answer; tools: TRL's "
            "environment_factory, guesses as tool calls (chat models with a tool-calling template)."
        },
    )
    moves_states: str = field(
        default="recall",
        metadata={
            "help": "moves: the states groups are drawn among: any (those where some answer word "
            "still fits), endgame (those where exactly one does, where the game has one; else "
            "as any), recall (those where exactly one does, pooled over all moves_games games "
            "of the step; a group without one as endgame) or refused (those where the greedy "
            "move was refused: a non-word, a wrong length, a repeat; else as any)."
        },
    )
    moves_games: int | None = field(
        default=None,
        metadata={
            "help": "moves: games the policy plays per group, on its own row and on rows drawn at "
            "random (more than 1 needs moves_states recall; None: 3 with recall, else 1)."
        },
    )
    moves_reuse: int = field(
        default=1,
        metadata={
            "help": "moves: GRPO steps whose group states come from one round of the policy's "
            "greedy games (1: a new round every step), played in one batch: for a GPU, where a "
            "small model's decoding is bound by latency more than by the batch size."
        },
    )
    credit: str | None = field(
        default=None,
        metadata={
            "help": "None: expected-log for the moves rollout, move for the others. moves: move "
            "(every token of a move gets its group advantage), expected (the RL loss is minus the "
            "chance that each letter the policy draws keeps the word completable to a fitting "
            "answer word, summed exactly over the alphabet: an expected policy gradient with no "
            "sampling noise) or expected-log (minus the log of that chance: the letters the policy "
            "gets most wrong weigh most)."
        },
    )
    played_score: float = field(
        default=0.0,
        metadata={
            "help": "moves: the score of a sampled move the game plays but that cannot be the "
            "answer (a word the feedback rules out, or one outside the answer list), from 0 (a "
            "refused move's score) up to below 1 (a fitting word's): it costs a turn, as a "
            "refused move does, but earns feedback."
        },
    )
    sft_batch_size: int = field(default=32, metadata={"help": "SFT games per step for that loss."})
    sft_soft_target_weight: float = field(
        default=1.0,
        metadata={
            "help": "Weight of the soft targets inside that loss (the `wordle-rl sft` option "
            "soft_target_weight; 0 where a guess is not written one letter per token, e.g. a BPE "
            "model outside the spelled style)."
        },
    )

    def __post_init__(self) -> None:
        if self.style is None:
            self.style, self.think = model_style(self.model, None, self.think or None)
        if self.num_generations is not None and self.num_generations < 2:
            raise ValueError(
                "num_generations must be at least 2: GRPO compares games within a group, and a "
                "group of one has no relative advantage to learn from"
            )
        if self.sft_coef < 0 or self.sft_soft_target_weight < 0:
            raise ValueError(
                f"sft_coef and sft_soft_target_weight must be >= 0, got {self.sft_coef} and "
                f"{self.sft_soft_target_weight}"
            )
        if self.sft_coef > 0 and not self.sft_data:
            raise ValueError(
                f"sft_coef={self.sft_coef} needs sft_data: the SFT games (`wordle-rl data sft`) "
                "whose loss it weighs"
            )
        if self.rollout not in ROLLOUTS:
            raise ValueError(f"rollout must be one of {', '.join(ROLLOUTS)}, got {self.rollout!r}")
        if self.rollout == "moves" and getattr(self, "use_vllm", False):
            raise ValueError(
                "rollout='moves' samples its groups' moves with the trained model itself: it takes "
                "no vLLM"
            )
        if self.moves_states not in MOVES_STATES:
            raise ValueError(
                f"moves_states must be one of {', '.join(MOVES_STATES)}, got {self.moves_states!r}"
            )
        if self.moves_games is None:
            self.moves_games = 3 if self.moves_states == "recall" else 1
        if self.credit is None:
            self.credit = "expected-log" if self.rollout == "moves" else "move"
        if self.moves_games < 1 or (self.moves_games > 1 and self.moves_states != "recall"):
            raise ValueError(
                f"moves_games must be >= 1, and above 1 only with moves_states='recall' (the pool "
                f"its groups are drawn from), got {self.moves_games} with {self.moves_states!r}"
            )
        if not 0.0 <= self.played_score < 1.0:
            raise ValueError(
                f"played_score must be in [0, 1): a played word that cannot be the answer scores "
                f"below a fitting one, got {self.played_score}"
            )
        if self.moves_reuse < 1:
            raise ValueError(f"moves_reuse must be >= 1, got {self.moves_reuse}")
        if self.eval_val_batch_size < 1:
            raise ValueError(f"eval_val_batch_size must be >= 1, got {self.eval_val_batch_size}")
        if self.credit not in CREDITS:
            raise ValueError(f"credit must be one of {', '.join(CREDITS)}, got {self.credit!r}")
        if self.credit != "move" and self.rollout != "moves":
            raise ValueError(
                f"credit={self.credit!r} scores single moves of the moves rollout, not rollout="
                f"{self.rollout!r}"
            )
        if self.rl_coef < 0 or (self.rl_coef == 0 and self.sft_coef == 0):
            raise ValueError(
                f"rl_coef must be >= 0, and with rl_coef 0 sft_coef must be > 0 (else nothing "
                f"trains), got {self.rl_coef} and {self.sft_coef}"
            )
        if getattr(self, "use_vllm", False):
            _configure_vllm(self)
        resolve_precision(self)
        super().__post_init__()


def vllm_missing() -> str | None:
    """Why vLLM rollouts cannot run on this machine (``None`` when they can)."""
    import importlib.util

    import torch

    if not torch.cuda.is_available() or importlib.util.find_spec("vllm") is None:
        return (
            "use_vllm needs a CUDA GPU and `pip install 'wordle-rl[gpu]'` (vLLM 0.22-0.31); "
            "without them leave use_vllm off and the rollout generates with the trained model"
        )
    return None


def _configure_vllm(cfg: WordleGRPOConfig) -> None:
    """Refuse vLLM rollouts this machine or setup cannot run; cap each turn's vLLM call at
    ``max_turn_tokens``."""
    import os

    missing = vllm_missing()
    if missing:
        raise ValueError(missing)
    shared = cfg.vllm_mode == "server" or getattr(cfg, "vllm_tensor_parallel_size", 1) > 1
    if shared and int(os.environ.get("WORLD_SIZE", "1")) > 1:
        raise ValueError(
            "use_vllm with several training processes sharing one vLLM engine (vllm_mode='server', "
            "or colocate with vllm_tensor_parallel_size > 1) is not supported by the multi-turn "
            "rollout: games end at different turns on each process; use one process, or colocate "
            "with one vLLM engine per GPU"
        )
    extra = cfg.generation_kwargs or {}
    extra = json.loads(extra) if isinstance(extra, str) else extra
    cfg.generation_kwargs = {"max_tokens": cfg.max_turn_tokens, **extra}
