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
   every answer giving the same feedback shares; ``branch_states="multi"``: a state after the first
   move where two or more answer words fit);
3. from that state ``num_generations`` moves are **sampled** at the rollout temperature, and each
   game is then finished **greedily** by the current policy;
4. each branch scores the strict game return (:func:`wordle_rl.rewards.game_return`: a win in k
   turns is worth ``max_turns + 1 - k``, a loss 0, a refused move costs its turn); with
   ``branch_reward="classes"`` the move is scored by its expected return over every public answer
   word that fits the state instead, the policy finishing a game per drawn feedback class
   (:meth:`BranchRollout.class_values`).

The completion TRL trains is the sampled move alone, so its group-relative advantage is how much
better (or worse) that one move did than the others from the same state, when the policy itself
plays on: a one-step policy improvement over the greedy policy, aimed at the states greedy play
reaches.
"""

from __future__ import annotations

import time

import numpy as np

from wordle_rl.decoding import fitting_prefixes, guess_tags
from wordle_rl.game import consistent_with, pattern_to_str, score
from wordle_rl.rewards import as_history, game_return, move_fits
from wordle_rl.rollout import ROW_KEY, WordleRollout, move_error_rates
from wordle_rl.solvers import SearchSolver
from wordle_rl.splits import Splits, held_out_answers
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

    def _unplayable(self) -> set[str]:
        """The answer words a class is never finished on, read once: the val and test answers of
        the splits file, or with ``branch_class_words="rl"`` every word outside its rl split."""
        if not hasattr(self, "_unplayable_words"):
            if self.cfg.branch_class_words == "rl":
                rl = set(Splits.load(self.cfg.splits, self.ctx.words).rl)
                if not rl:
                    raise ValueError(
                        f"branch_class_words='rl' needs a splits file with an rl split; "
                        f"{self.cfg.splits} has none (`wordle-rl data split --rl-share`)"
                    )
                self._unplayable_words = set(self.ctx.words.answers) - rl
            else:
                self._unplayable_words = held_out_answers(self.cfg.splits, self.ctx.words)
        return self._unplayable_words

    def _class_plan(self, history: list, guess: str) -> tuple[float, float, list, list[int]]:
        """What :meth:`class_values` needs of one move: ``(win, words in the playable classes,
        [(answer, history after the move, class size)] to finish, sizes of the classes not
        played)``. The public answer words that fit ``history`` are split by the feedback
        ``guess`` gets from each; the move wins at once on its own word (``win`` 1 when it fits);
        ``branch_classes`` of the classes holding a playable word (:meth:`_unplayable`) are drawn
        in proportion to their size, each to be finished on one such word; a class without one is
        never played (its size is returned for a stand-in value). On the last turn nothing is
        finished: every other class is a loss."""
        words = self.ctx.words.answers
        fits = [words[int(i)] for i in self.ctx.candidates(as_history(history))]
        classes: dict[int, list[str]] = {}
        for a in fits:
            classes.setdefault(score(guess, a), []).append(a)
        winning = score(guess, guess)  # all green: the class of the move's own word
        win = float(winning in classes)
        held = self._unplayable()
        rest = [(p, c, [a for a in c if a not in held]) for p, c in classes.items() if p != winning]
        if len(history) + 1 >= self.cfg.max_turns:
            return win, 0.0, [], [len(c) for _, c, _ in rest]  # no turn left: losses
        playable = [(p, c, reps) for p, c, reps in rest if reps]
        unplayed = [len(c) for _, c, reps in rest if not reps]
        if not playable:
            return win, 0.0, [], unplayed
        sizes = np.array([len(c) for _, c, _ in playable], dtype=float)
        drawn = self.rng.choice(len(playable), size=self.cfg.branch_classes, p=sizes / sizes.sum())
        plan = []
        for k in drawn:
            p, c, reps = playable[int(k)]
            answer = reps[int(self.rng.integers(len(reps)))]
            plan.append((answer, [*history, [guess, pattern_to_str(p)]], len(c)))
        return win, float(sizes.sum()), plan, unplayed

    def class_values(self, model, rows: list[dict], moves: list[tuple]) -> list[float]:
        """The expected return of each branch move over the public answer words that fit its
        state, the policy itself finishing (:meth:`_class_plan`): a win now on the move's own
        word, else the greedy return of the game finished on a word of a drawn feedback class,
        their mean standing for the playable classes. A class with no playable word takes the
        mean return of this call's finished games from classes of its size (of all of them when
        none had it). Every fitting word counts once, whichever split it is in, so no word
        is preferred for being an RL row's answer, and no game is played on a val or test answer.
        A refused move costs its turn: the mean value of its group's played moves less one (0
        when none was played)."""
        plans = [
            None if guess is None else self._class_plan(row["history"], guess)
            for row, (guess, _) in zip(rows, moves)
        ]
        cont = [c for plan in plans if plan for c in plan[2]]
        rows_to_play = [{"answer": a, "history": h} for a, h, _ in cont]
        games = self.play(model, [], sample_turns=0, rows=rows_to_play) if cont else []
        returns = [game_return(x["won"], x["turns"], self.cfg.max_turns) for x in games]
        by_size: dict[int, list[float]] = {}
        for (*_, size), r in zip(cont, returns):
            by_size.setdefault(size, []).append(r)
        overall = float(np.mean(returns)) if returns else 0.0
        it = iter(returns)
        values: list[float | None] = []
        for row, plan in zip(rows, plans):
            if plan is None:
                values.append(None)
                continue
            win, weight, played, unplayed = plan
            now = float(self.cfg.max_turns - len(row["history"]))  # a win at this turn
            total = win * now
            if played:
                total += weight * float(np.mean([next(it) for _ in played]))
            last = len(row["history"]) + 1 >= self.cfg.max_turns
            for size in unplayed:
                total += 0.0 if last else size * float(np.mean(by_size.get(size, [overall])))
            count = win + weight + sum(unplayed)
            values.append(total / count if count else 0.0)
        g, out = self.cfg.num_generations, []
        for k in range(0, len(values), g):
            group = values[k : k + g]
            played = [v for v in group if v is not None]
            fallback = max(0.0, float(np.mean(played)) - 1.0) if played else 0.0
            out += [fallback if v is None else v for v in group]
        return out

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
            if self.cfg.branch_states == "multi":  # past the opener, where a choice is left
                pool = [x for x in states if x and len(self.ctx.candidates(as_history(x))) > 1]
                pool = pool or states
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
        reward = self.cfg.branch_reward
        games = self.play(  # fits and classes score the move alone: no game to finish here
            model,
            [],
            sample_turns=1,
            rows=branch_rows,
            first_prefixes=guides,
            max_moves=1 if reward in ("fits", "classes") else None,
        )
        self.last_rows = branch_rows
        if reward == "classes":
            returns = self.class_values(model, branch_rows, [x["moves"][0] for x in games])
        else:
            returns = [
                move_fits(x["moves"][0][0], row["history"], self.ctx.words)
                if reward == "fits"
                else self._expected_return(row["history"], *x["moves"][0])
                if reward.startswith("expected")
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
