"""The multi-turn rollout: whole Wordle games played by a causal LM, batched per turn, as GRPO
episodes.

    # cfg: a WordleGRPOConfig; rows: `wordle-rl data rl`
    rollout = WordleRollout(cfg, rows, tokenizer)
    games = rollout.play(model, [0, 0, 1, 1])  # one game per row id; repeats allowed

Each prompt row ``{answer, history}`` is played ``num_generations`` times; all games of a batch
advance together, one batched ``generate`` per turn with the KV cache carried from turn to turn,
never one game at a time. An episode is one sequence: the model's turns (``env_mask`` 1, trained)
interleaved with the environment's feedback (``env_mask`` 0, masked out of the loss). Per-game
results (won, turns, every reward component, errors) go to the reward functions as
``episode_<component>`` keyword arguments, so TRL logs each component. The answer never enters a
prompt: rows are found by an index kept in the first message's dict (``ROW_KEY``). The environment
is in-process, or the server when ``env_url`` is set.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from wordle_rl.environment.env import EnvConfig, WordleEnv
from wordle_rl.environment.prompts import PromptStyle
from wordle_rl.environment.rewards import COMPONENTS, RewardContext, RewardWeights, combine
from wordle_rl.models.embedded import cache_argument, eval_mode

if TYPE_CHECKING:
    from wordle_rl.training.grpo_config import WordleGRPOConfig

__all__ = ["WordleRollout", "ROW_KEY", "left_pad"]

ROW_KEY = "wordle_row"


def left_pad(seqs: list[list[int]], pad: int, device):
    """``(ids, attention_mask)`` tensors of token lists, padded on the left to the longest (TRL's
    ``pad``)."""
    import torch
    from trl.trainer.utils import pad as trl_pad

    ids = trl_pad(
        [torch.tensor(x, dtype=torch.long) for x in seqs], padding_value=pad, padding_side="left"
    )
    att = trl_pad(
        [torch.ones(len(x), dtype=torch.long) for x in seqs], padding_value=0, padding_side="left"
    )
    return ids.to(device), att.to(device)


@dataclass
class _Episode:
    """One game of a rollout: its environment, prompt, and the episode sequence built turn by
    turn."""

    env: object
    prompt_ids: list[int]
    covered: str  # the conversation text whose tokens are already in prompt_ids + comp_ids
    comp_ids: list[int] = field(default_factory=list)
    mask: list[int] = field(default_factory=list)  # 1: generated (trained), 0: environment tokens
    logps: list[float] = field(default_factory=list)
    errors: list[str | None] = field(default_factory=list)
    # (guess, pattern) per turn
    moves: list[tuple[str | None, str | None]] = field(default_factory=list)
    turn: int = 0  # the game turn of the last move
    result: dict = field(default_factory=dict)


def move_error_rates(errors: list[str | None]) -> dict[str, float]:
    """Shares of moves refused as non-words, repeats, or for their format (``None``: a played move).

    >>> rates = move_error_rates([None, "not_in_word_list", "repeated_guess", "no_guess"])
    >>> sorted(rates.values())
    [0.25, 0.25, 0.25]
    """
    other = (None, "not_in_word_list", "repeated_guess", "hard_mode_violation")
    n = max(len(errors), 1)
    return {
        "wordle/invalid_word_rate": sum(e == "not_in_word_list" for e in errors) / n,
        "wordle/repeated_guess_rate": sum(e == "repeated_guess" for e in errors) / n,
        "wordle/format_error_rate": sum(e not in other for e in errors) / n,
    }


class WordleRollout:
    """The ``rollout_func``: whole games, batched per turn, with env tokens masked and per-game
    rewards."""

    def __init__(
        self, cfg: WordleGRPOConfig, rows: list[dict], tokenizer, ctx: RewardContext | None = None
    ):
        self.cfg, self.rows, self.tok = cfg, rows, tokenizer
        self.ctx = ctx or RewardContext()
        self.style = PromptStyle(cfg.style, think=cfg.think, max_turns=cfg.max_turns)
        self.env_config = EnvConfig(
            style=self.style,
            hard=cfg.hard,
            max_turns=cfg.max_turns,
            reward_weights=cfg.reward_preset,
        )
        self.weights = RewardWeights.from_any(cfg.reward_preset)
        from accelerate import PartialState

        # each process of a multi-process run draws its own rows and states
        rank = PartialState().process_index
        self.rng = np.random.default_rng(cfg.seed if rank == 0 else [cfg.seed, rank])
        self.last_stats: dict[str, float] = {}
        # the rows ({answer, history}) of the games of the last call
        self.last_rows: list[dict] = []
        # special tokens other than end-of-turn would break the turn structure: never sample them
        self._suppress = sorted(set(tokenizer.all_special_ids) - {tokenizer.eos_token_id})
        # keep each sampled token's log-probability (tests, diagnostics)
        self.record_logprobs = False

    def _env(self):
        if self.cfg.env_url:
            from wordle_rl.environment.client import RemoteEnv

            return RemoteEnv(self.cfg.env_url)
        return WordleEnv(self.env_config, ctx=self.ctx)

    def play(
        self, model, row_ids: list[int], vllm=None, sample_turns: int | None = None
    ) -> list[dict]:
        """Play one game per entry of ``row_ids`` (repeats allowed); every turn is one batched
        generate.

        ``vllm``: TRL's ``VLLMGeneration`` of the trainer (``use_vllm``); each turn then sends every
        live game's whole conversation so far to vLLM (its prefix cache reuses the earlier turns)
        instead of ``model``. ``sample_turns``: only the first N turns are sampled at the rollout
        temperature, the rest greedy (None: all sampled)."""
        if vllm is not None:
            if sample_turns is not None:
                raise ValueError("greedy turns are not supported with vLLM rollouts")
            return self._play_vllm(vllm, row_ids)
        with eval_mode(model):
            return self._play(model, [self.rows[r] for r in row_ids], sample_turns)

    def _start(self, rows: list[dict]) -> list[_Episode]:
        """Reset one environment per row; each episode starts from the rendered prompt's token
        ids."""
        eps = []
        for row in rows:
            env = self._env()
            obs = env.reset(
                answer=row["answer"], history=[(g, p) for g, p in row["history"]] or None
            )
            text = self.tok.apply_chat_template(
                obs.messages, add_generation_prompt=True, tokenize=False
            )
            eps.append(_Episode(env, self.tok(text, add_special_tokens=False)["input_ids"], text))
        return eps

    def _cut(self, ids: list[int]) -> tuple[list[int], bool]:
        """A generated turn up to its end-of-turn token, and whether it had none (cut at
        ``max_turn_tokens``)."""
        eos = self.tok.eos_token_id
        return (ids, True) if eos not in ids else (ids[: ids.index(eos) + 1], False)

    def _turn(self, ep: _Episode, ids: list[int], logps: list[float] | None) -> list[int] | None:
        """Apply one generated turn (cut at end-of-turn) to its game: the environment's reply as
        token ids to append to the conversation, or ``None`` when the game is over."""
        eos = self.tok.eos_token_id
        ids, forced = self._cut(ids)
        self.last_stats["gen_tokens"] += len(ids)
        if logps is not None:
            ep.logps += logps[: len(ids)]
        step = ep.env.step(self.tok.decode(ids, skip_special_tokens=True))
        ep.comp_ids += ids
        ep.mask += [1] * len(ids)
        ep.errors.append(step.info["error"])
        ep.moves.append((step.info.get("guess"), step.info.get("pattern")))
        ep.turn = step.info.get("turn", ep.turn + 1)
        if step.done:
            # a turn cut off at max_turn_tokens is closed by the environment, not the model
            if forced:
                ep.comp_ids.append(eos)
                ep.mask.append(0)
                if logps is not None:
                    ep.logps.append(0.0)
            ep.result = step.info
            return None
        ep.covered += self.tok.decode(ids, skip_special_tokens=False)
        nxt = self.tok.apply_chat_template(
            step.observation.messages, add_generation_prompt=True, tokenize=False
        )
        if not nxt.startswith(ep.covered):
            raise RuntimeError(
                "the chat template does not re-render the played turns verbatim; "
                "env tokens cannot be aligned with generated tokens"
            )
        env_ids = self.tok(nxt[len(ep.covered) :], add_special_tokens=False)["input_ids"]
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
            comp = info.get("episode_components")
            games.append(
                {
                    "prompt_ids": ep.prompt_ids,
                    "completion_ids": ep.comp_ids,
                    "env_mask": ep.mask,
                    "won": bool(info.get("won", False)),
                    "turns": int(info.get("turns", ep.turn)),
                    "components": comp,
                    "errors": ep.errors,
                    "moves": ep.moves,
                    "reward": None if comp is None else combine(comp, self.weights),
                }
            )
            if logprobs:
                games[-1]["logprobs"] = ep.logps
        return games

    def _play(self, model, rows: list[dict], sample_turns: int | None = None) -> list[dict]:
        """All games in one batch; the KV cache is carried from turn to turn, so each turn only
        processes the new feedback tokens. The batch is a left-padded tensor that grows by
        [generated | feedback] each turn: padding inside it (after an early end-of-turn, before a
        shorter feedback) is masked, and position ids follow the mask, so every game sees exactly
        the positions of its own unpadded conversation. Finished games leave the batch and the
        cache."""
        import torch

        eps = self._start(rows)
        pad, eos, dev = self.tok.pad_token_id, self.tok.eos_token_id, model.device
        self.last_stats["gen_tokens"] = 0
        active = list(range(len(eps)))  # episode index of each batch row
        seqs, attn = left_pad([ep.prompt_ids for ep in eps], pad, dev)
        cache, turn, cache_name = None, 0, cache_argument()
        while active:
            how = {"do_sample": False}  # greedy: the policy's own best move
            if sample_turns is None or turn < sample_turns:
                how = {
                    "do_sample": True,
                    "temperature": self.cfg.temperature,
                    "top_k": 0,
                    "top_p": 1.0,
                }
            turn += 1
            with torch.no_grad():
                out = model.generate(
                    input_ids=seqs,
                    attention_mask=attn,
                    **{cache_name: cache},
                    **how,
                    max_new_tokens=self.cfg.max_turn_tokens,
                    pad_token_id=pad,
                    eos_token_id=eos,
                    use_cache=True,
                    suppress_tokens=self._suppress or None,
                    return_dict_in_generate=True,
                    output_logits=self.record_logprobs,
                )
            cache = getattr(out, cache_name)
            new = out.sequences[:, seqs.shape[1] :]
            new_list = new.tolist()
            step_lp = None
            if self.record_logprobs:
                step_lp = (
                    torch.stack(out.logits, 1)
                    .float()
                    .log_softmax(-1)
                    .gather(2, new[..., None])[..., 0]
                    .tolist()
                )
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
            env_t, env_attn = left_pad(env_segments, pad, dev)
            seqs = torch.cat([out.sequences[idx], env_t], 1)
            attn = torch.cat([attn[idx], new_attn[idx], env_attn], 1)
            active = [active[j] for j in keep]
        return self._finish(eps, self.record_logprobs)

    def _play_vllm(self, vllm, row_ids: list[int]) -> list[dict]:
        """The same games with vLLM generating each turn (GPU). vLLM samples with the trainer's
        temperature; a turn longer than ``max_turn_tokens`` is cut there, as in :meth:`_play`. Its
        per-token log-probabilities are kept (0 for environment tokens) for TRL's
        importance-sampling correction."""
        eps = self._start([self.rows[r] for r in row_ids])
        self.last_stats["gen_tokens"] = 0
        active = list(range(len(eps)))
        with_logprobs = True  # vLLM returns them unless its logprobs setting is None
        while active:
            prompts = [eps[i].prompt_ids + eps[i].comp_ids for i in active]
            _, completions, logprobs, _ = vllm.generate(
                prompts=prompts, images=None, num_generations=1
            )
            with_logprobs = with_logprobs and logprobs is not None
            still = []
            for j, i in enumerate(active):
                ids = list(completions[j])[: self.cfg.max_turn_tokens]
                lps = (
                    [float(lp[0]) for lp in logprobs[j]][: len(ids)]
                    if logprobs is not None
                    else None
                )
                if self._turn(eps[i], ids, lps) is not None:
                    still.append(i)
            active = still
        return self._finish(eps, with_logprobs)

    def log_stats(self, trainer) -> None:
        """Append this rollout's ``wordle/*`` statistics to the trainer's logged metrics."""
        metrics = getattr(trainer, "_metrics", None)
        if metrics is not None:
            for k, v in self.last_stats.items():
                if k.startswith("wordle/"):
                    metrics["train"][k].append(v)

    def __call__(self, prompts: list, trainer) -> dict:
        t0 = time.perf_counter()
        row_ids = [int(p[0][ROW_KEY]) for p in prompts]
        vllm = trainer.vllm_generation if getattr(trainer, "use_vllm", False) else None
        games = self.play(trainer.model, row_ids, vllm)
        g = self.cfg.num_generations
        self.last_rows = [self.rows[r] for r in row_ids]
        spread = [np.ptp([x["reward"] for x in games[k : k + g]]) for k in range(0, len(games), g)]
        dt = time.perf_counter() - t0
        moves = [e for x in games for e in x["errors"]]
        won = [x for x in games if x["won"]]
        self.last_stats.update(
            {
                "wordle/zero_spread_share": float(np.mean([s == 0 for s in spread])),
                "wordle/win_rate": len(won) / len(games),
                "wordle/mean_guesses_on_wins": float(np.mean([x["turns"] for x in won]))
                if won
                else 0.0,
                **move_error_rates(moves),
                "wordle/episodes_per_s": len(games) / dt,
                "wordle/tokens_per_s": self.last_stats["gen_tokens"] / dt,
                "wordle/mean_history_depth": float(
                    np.mean([len(self.rows[r]["history"]) for r in row_ids])
                ),
            }
        )
        self.log_stats(trainer)
        out = {
            "prompt_ids": [x["prompt_ids"] for x in games],
            "completion_ids": [x["completion_ids"] for x in games],
            "env_mask": [x["env_mask"] for x in games],
            "logprobs": (
                [x["logprobs"] for x in games]
                if vllm is not None and all("logprobs" in x for x in games)
                else None
            ),
            "won": [x["won"] for x in games],
            "turns": [x["turns"] for x in games],
        }
        for c in COMPONENTS:
            out[f"episode_{c}"] = [x["components"][c] for x in games]
        return out
