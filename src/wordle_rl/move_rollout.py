"""Move rollouts: GRPO groups of single moves sampled at states of the policy's own games, each move
scored by whether it could still be the answer.

    wordle-rl grpo --model runs/sft --data data/rl --rollout moves

Held-out games are lost in one recognisable way: a few good moves, then a non-word or a word the
feedback rules out, after which the policy, now in a conversation with a refused move in it, often
refuses again. Each group of ``num_generations`` completions is built at one such state:

1. the current policy plays the group's RL row to the end, every move sampled at the rollout
   temperature (``moves_from="sampled"``) or greedy (``"greedy"``); refused moves stay in the
   conversation, as they do in play;
2. one decision of that game is drawn at random, and its conversation so far (token ids) is the
   group's prompt, a state after a refused move included;
3. ``num_generations`` moves are sampled there, one turn each;
4. each move earns :func:`wordle_rl.rewards.move_fits`: 1 when it is a public answer word that fits
   every feedback so far, else 0 (a non-word, a repeat, a bad format, a word the feedback rules
   out).

The reward reads the feedback, never the row's answer: every word that could still be the answer
earns the same, so no answer word is preferred to another. (A return paid for the row's answer also
pays for believing that answers are RL-row words, a belief held-out play punishes.) Its optimum is a
policy that only plays words that could win, the behaviour constrained decoding imposes from
outside and free play lacks; the teacher of the SFT games plays only such words, so the reward and
the SFT loss pull the same way.
"""

from __future__ import annotations

import time

import numpy as np

from wordle_rl.parser import parse
from wordle_rl.rewards import as_history, move_fits
from wordle_rl.rollout import ROW_KEY, WordleRollout, _left_pad, move_error_rates

__all__ = ["MoveRollout", "fits_reward", "decision_prefixes"]


def fits_reward(completions, move_fits=None, **kwargs) -> list[float]:
    """Whether each sampled move could still be the answer, computed by :class:`MoveRollout` (TRL
    reward-function form).

    >>> fits_reward(["<guess>shake</guess>", "<guess>ahake</guess>"], move_fits=[1.0, 0.0])
    [1.0, 0.0]
    """
    if move_fits is None:
        raise ValueError("fits_reward scores move rollouts: it needs the rollout's move_fits")
    if len(move_fits) != len(completions):
        raise ValueError(f"{len(completions)} completions but {len(move_fits)} scores")
    return [float(x) for x in move_fits]


def decision_prefixes(game: dict, row: dict) -> list[tuple[list[int], list]]:
    """``(token ids, scored history)`` before each move of a played game: the conversation up to
    the move (refused moves and their replies included) and the ``[guess, pattern]`` turns that
    were scored before it (the row's own history first).

    >>> game = {"prompt_ids": [7, 8], "completion_ids": [1, 2, 9, 3, 4],
    ...         "env_mask": [1, 1, 0, 1, 1], "moves": [("could", "XYXXX"), ("mount", "GGGGG")]}
    >>> decision_prefixes(game, {"history": [["raise", "XXXXX"]]})
    [([7, 8], [['raise', 'XXXXX']]), ([7, 8, 1, 2, 9], [['raise', 'XXXXX'], ['could', 'XYXXX']])]
    """
    mask, ids = game["env_mask"], game["prompt_ids"] + game["completion_ids"]
    n = len(game["prompt_ids"])
    starts = [n + i for i, m in enumerate(mask) if m == 1 and (i == 0 or mask[i - 1] == 0)]
    if len(starts) != len(game["moves"]):
        raise ValueError(f"{len(starts)} model turns in the tokens but {len(game['moves'])} moves")
    history = [list(t) for t in row.get("history") or []]
    out = []
    for start, (guess, pattern) in zip(starts, game["moves"]):
        out.append((ids[:start], [list(t) for t in history]))
        if guess is not None and pattern is not None:
            history.append([guess, pattern])
    return out


class MoveRollout(WordleRollout):
    """The ``rollout_func`` of ``rollout="moves"``: per group, a game of the policy's own, one drawn
    decision of it, ``num_generations`` moves sampled there, each scored by :func:`move_fits`."""

    def _sample_moves(self, model, prefixes: list[list[int]]) -> list[list[int]]:
        """One sampled turn after each token prefix, cut after its end-of-turn token."""
        import torch

        was_training = model.training
        model.eval()
        try:
            seqs, attn = _left_pad(prefixes, self.tok.pad_token_id, model.device)
            with torch.no_grad():
                out = model.generate(
                    input_ids=seqs,
                    attention_mask=attn,
                    do_sample=True,
                    temperature=self.cfg.temperature,
                    top_k=0,
                    top_p=1.0,
                    max_new_tokens=self.cfg.max_turn_tokens,
                    pad_token_id=self.tok.pad_token_id,
                    eos_token_id=self.tok.eos_token_id,
                    suppress_tokens=self._suppress or None,
                )
        finally:
            if was_training:
                model.train()
        return [self._cut(x)[0] for x in out[:, seqs.shape[1] :].tolist()]

    def _score(self, ids: list[int], history: list) -> tuple[float, str | None]:
        """The move's :func:`move_fits` and the game's refusal code for it (``None``: played)."""
        hist = as_history(history)
        text = self.tok.decode(ids, skip_special_tokens=True)
        pr = parse(text, self.style, words=self.ctx.words, history=hist, hard=self.cfg.hard)
        return move_fits(pr.guess if pr.ok else None, hist, self.ctx.words), pr.error

    def __call__(self, prompts: list, trainer) -> dict:
        t0 = time.perf_counter()
        g, model = self.cfg.num_generations, trainer.model
        group_rows = [int(p[0][ROW_KEY]) for p in prompts[::g]]
        sample_turns = None if self.cfg.moves_from == "sampled" else 0
        games = self.play(model, group_rows, sample_turns=sample_turns)
        states, after_refusal = [], 0
        for r, game in zip(group_rows, games):
            decisions = decision_prefixes(game, self.rows[r])
            k = int(self.rng.integers(len(decisions)))
            after_refusal += any(e is not None for e in game["errors"][:k])
            states.append(decisions[k])
        prefixes = [ids for ids, _ in states for _ in range(g)]
        moves = self._sample_moves(model, prefixes)
        scored = [self._score(m, states[i // g][1]) for i, m in enumerate(moves)]
        fits = [s for s, _ in scored]
        spread = [np.ptp(fits[k : k + g]) for k in range(0, len(fits), g)]
        self.last_rows = [
            {"answer": self.rows[r]["answer"], "history": h}
            for r, (_, h) in zip(group_rows, states)
            for _ in range(g)
        ]
        self.last_stats.update(
            {
                "wordle/zero_spread_share": float(np.mean([s == 0 for s in spread])),
                "wordle/fits_rate": float(np.mean(fits)),
                "wordle/win_rate": float(np.mean([x["won"] for x in games])),
                "wordle/games": len(games),
                "wordle/state_after_refusal": after_refusal / len(games),
                "wordle/state_depth": float(np.mean([len(h) for _, h in states])),
                **move_error_rates([e for _, e in scored]),
                "wordle/episodes_per_s": len(moves) / (time.perf_counter() - t0),
            }
        )
        self.log_stats(trainer)
        return {
            "prompt_ids": prefixes,
            "completion_ids": moves,
            "env_mask": [[1] * len(m) for m in moves],
            "logprobs": None,
            "move_fits": fits,
        }
