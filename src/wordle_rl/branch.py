"""Branch rollouts: GRPO groups formed at one state of the policy's own greedy game, one decision
each.

    wordle-rl grpo --model runs/sft --data data/rl --rollout branch --num-generations 8

Whole-game GRPO gives every token of a game one advantage, and trains sampled games that greedy play
never meets. Here each group of ``num_generations`` completions is built at one state:

1. the current policy plays the group's RL row (an answer and a start history) **greedily** to the
   end;
2. one decision of that game is drawn at random (before or at its first refused move, so the state
   is exact; ``branch_states="endgame"``: its first state in which the answer is the only answer
   word that fits; ``branch_states="mistake"``: the state of its first move that was refused or did
   not fit the feedback so far; ``branch_states="second"``: the state after its first move, which
   every answer giving the same feedback shares);
3. from that state ``num_generations`` moves are **sampled** at the rollout temperature, and each
   game is then finished **greedily** by the current policy;
4. each branch scores the strict game return (:func:`wordle_rl.rewards.game_return`: a win in k
   turns is worth ``max_turns + 1 - k``, a loss 0, a refused move costs its turn).

The completion TRL trains is the sampled move alone, so its group-relative advantage is how much
better (or worse) that one move did than the others from the same state, when the policy itself
plays on: a one-step policy improvement over the greedy policy, aimed at the states greedy play
reaches.
"""

from __future__ import annotations

import time

import numpy as np

from wordle_rl.decoding import fitting_prefixes, guess_tags
from wordle_rl.game import consistent_with
from wordle_rl.rewards import as_history, game_return, move_fits
from wordle_rl.rollout import ROW_KEY, WordleRollout, move_error_rates
from wordle_rl.solvers import SearchSolver
from wordle_rl.words import encode_words

__all__ = ["BranchRollout", "game_return_reward"]


def game_return_reward(completions, episode_return=None, **kwargs) -> list[float]:
    """The strict game return of each branch, computed by :class:`BranchRollout` (TRL
    reward-function form).

    >>> completions = ["<guess>crane</guess>", "<guess>crone</guess>"]
    >>> game_return_reward(completions, episode_return=[4.0, 0.0])
    [4.0, 0.0]
    """
    if episode_return is None:
        raise ValueError(
            "game_return_reward scores branch rollouts: it needs the rollout's episode_return"
        )
    if len(episode_return) != len(completions):
        raise ValueError(f"{len(completions)} completions but {len(episode_return)} returns")
    return [float(x) for x in episode_return]


def decision_states(row: dict, moves: list[tuple[str | None, str | None]]) -> list[list[list[str]]]:
    """The histories before each decision of a game played from ``row`` whose state is exact: every
    decision up to and including the first refused move (a refused move changes the conversation but
    not the scored history).

    >>> moves = [("could", "XYXXX"), (None, None), ("mount", "GGGGG")]
    >>> decision_states({"history": [["raise", "XXXXX"]]}, moves)
    [[['raise', 'XXXXX']], [['raise', 'XXXXX'], ['could', 'XYXXX']]]
    """
    history = [list(t) for t in row.get("history") or []]
    states = [list(history)]
    for guess, pattern in moves[:-1]:
        if guess is None or pattern is None:
            break
        history.append([guess, pattern])
        states.append(list(history))
    return states


class CandidateCritic(SearchSolver):
    """Expected guesses (:meth:`SearchSolver.greedy_value`) when the candidate solver finishes:
    each move the most informative word among the answers that still fit, as in the SFT games."""

    def best(self, cands, valid=None, history=None) -> int:
        return super().best(cands, self.words.answer_to_allowed[cands], history)


class BranchRollout(WordleRollout):
    """The ``rollout_func`` of ``rollout="branch"``: per group, a greedy game, one drawn state,
    sampled moves there, greedy finishes; the completion is the sampled move, the reward its game's
    strict return. With ``branch_states="endgame"`` the state is the game's first in which its
    answer is the only answer word that fits (a drawn one when the game never gets there); with
    ``branch_states="mistake"`` it is the state of the greedy game's first refused or non-fitting
    move (else its endgame, else a drawn one)."""

    def _only_fit(self, history: list, answer: str) -> bool:
        """Whether ``answer`` is the only answer word that fits ``history`` (found by
        re-scoring)."""
        fits = self.ctx.candidates(as_history(history))
        return len(fits) == 1 and self.ctx.words.answers[int(fits[0])] == answer

    def _fitting(self, history: list) -> set[str]:
        """The guesses a guided move may spell: the allowed words that fit ``history``."""
        if not hasattr(self, "_encoded"):
            self._encoded = encode_words(list(self.ctx.words.allowed))
        close = guess_tags(self.style)[1]
        return fitting_prefixes(self.ctx.words.allowed, self._encoded, as_history(history), close)

    def _expected_return(self, history: list, guess: str | None, pattern: str | None) -> float:
        """The return a move earns in expectation over the public answer words that fit
        ``history``, the entropy solver finishing the game: ``max_turns + 1`` minus the turns
        played before, this move, and the solver's expected guesses after it (a refused move
        costs its turn and leaves the state as it was). It does not depend on the row's answer, so
        it cannot teach that answers come from the RL rows' words."""
        if not hasattr(self, "_critic"):
            cls = (
                CandidateCritic if self.cfg.branch_reward == "expected-candidate" else SearchSolver
            )
            self._critic = cls(self.ctx.words, matrix=self.ctx.matrix, by_answer=self.ctx.by_answer)
        critic, hist = self._critic, as_history(history)
        cands = self.ctx.candidates(hist)
        if guess is None or pattern is None or len(cands) == 0:
            after = 1.0 + (critic.greedy_value(cands) if len(cands) else 0.0)
        else:
            g = self.ctx.words.allowed_index[guess]
            after = 1.0 + sum(
                len(p) / len(cands) * critic.greedy_value(p) for p in critic._parts(g, cands)
            )
        return float(self.cfg.max_turns + 1 - len(hist) - after)

    def _guided_stats(self, returns: list[float]) -> dict:
        """Mean return of the guided and of the sampled moves (when groups have guided moves)."""
        g, k = self.cfg.num_generations, self.cfg.branch_guided
        if not k:
            return {}
        guided = [r for i, r in enumerate(returns) if i % g < k]
        free = [r for i, r in enumerate(returns) if i % g >= k]
        return {
            "wordle/guided_return": float(np.mean(guided)),
            "wordle/sampled_return": float(np.mean(free)),
        }

    def _first_mistake(self, states: list, moves: list) -> int | None:
        """Index of the first decision whose greedy move was refused or does not fit the feedback
        before it."""
        for k, state in enumerate(states):
            guess = moves[k][0]
            if guess is None or not consistent_with(as_history(state), guess):
                return k
        return None

    def __call__(self, prompts: list, trainer) -> dict:
        t0 = time.perf_counter()
        g = self.cfg.num_generations
        model = trainer.model
        group_rows = [int(p[0][ROW_KEY]) for p in prompts[::g]]
        greedy = self.play(model, group_rows, sample_turns=0)
        branch_rows, depths, mistakes = [], [], 0
        for r, game in zip(group_rows, greedy):
            states = decision_states(self.rows[r], game["moves"])
            ends = [s for s in states if self._only_fit(s, self.rows[r]["answer"])][:1]
            pool = ends if ends and self.cfg.branch_states in ("endgame", "mistake") else states
            k = (
                self._first_mistake(states, game["moves"])
                if self.cfg.branch_states == "mistake"
                else None
            )
            if k is not None:
                pool, mistakes = [states[k]], mistakes + 1
            if self.cfg.branch_states == "second":  # after the first move: states answers share
                pool = states[1:2] or states[:1]
            state = pool[int(self.rng.integers(len(pool)))]
            depths.append(len(state))
            branch_rows += [{"answer": self.rows[r]["answer"], "history": state}] * g
        guides = None
        if self.cfg.branch_guided:
            fits = [self._fitting(row["history"]) for row in branch_rows[::g]]  # once per state
            guides = [
                fits[k // g] if k % g < self.cfg.branch_guided else None
                for k in range(len(branch_rows))
            ]
        fits = self.cfg.branch_reward == "fits"  # the move alone is scored: no game to finish
        games = self.play(
            model,
            [],
            sample_turns=1,
            rows=branch_rows,
            first_prefixes=guides,
            max_moves=1 if fits else None,
        )
        self.last_rows = branch_rows
        returns = [
            move_fits(x["moves"][0][0], row["history"], self.ctx.words)
            if fits
            else self._expected_return(row["history"], *x["moves"][0])
            if self.cfg.branch_reward.startswith("expected")
            else game_return(
                x["won"],
                x["turns"],
                self.cfg.max_turns,
                legal_share=float(np.mean([e is None for e in x["errors"]])),
                shaping=self.cfg.return_shaping,
            )
            for x, row in zip(games, branch_rows)
        ]
        first = [
            x["env_mask"].index(0) if 0 in x["env_mask"] else len(x["env_mask"]) for x in games
        ]
        spread = [np.ptp(returns[k : k + g]) for k in range(0, len(returns), g)]
        won = [x for x in greedy if x["won"]]
        moves = [x["errors"][0] for x in games]
        self.last_stats.update(
            {
                "wordle/zero_spread_share": float(np.mean([s == 0 for s in spread])),
                "wordle/win_rate": float(np.mean([x["won"] for x in games])),
                "wordle/greedy_win_rate": len(won) / len(greedy),
                "wordle/greedy_mean_guesses": float(
                    np.mean([x["turns"] if x["won"] else 7 for x in greedy])
                ),
                "wordle/mean_return": float(np.mean(returns)),
                **self._guided_stats(returns),
                "wordle/branch_depth": float(np.mean(depths)),
                "wordle/branch_on_mistake": mistakes / len(greedy),
                **move_error_rates(moves),
                "wordle/episodes_per_s": len(games) / (time.perf_counter() - t0),
            }
        )
        self.log_stats(trainer)
        return {
            "prompt_ids": [x["prompt_ids"] for x in games],
            "completion_ids": [x["completion_ids"][:k] for x, k in zip(games, first)],
            "env_mask": [[1] * k for k in first],
            "logprobs": None,
            "episode_return": returns,
            "won": [x["won"] for x in games],
            "turns": [x["turns"] for x in games],
        }
