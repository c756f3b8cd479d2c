"""Move rollouts: GRPO groups of single moves sampled at states of the policy's own games, each move
scored by whether it could still be the answer.

    wordle-rl grpo --model runs/sft --data data/rl --rollout moves

Held-out games are lost in one recognisable way: a few good moves, then a non-word or a word the
feedback rules out, after which the policy, now in a conversation with a refused move in it, often
refuses again. Each group of ``num_generations`` completions is built at one such state:

1. the current policy plays the group's RL row to the end, greedily; refused moves stay in the
   conversation, as they do in play (with ``moves_reuse`` k, one round of games in one batch
   gives the states of k steps: for a GPU, where decoding is bound by latency, not batch size);
2. one decision of that game is drawn at random among those where some answer word still fits
   (every one, if none does), and its conversation so far (token ids) is the group's prompt, a
   state after a refused move included; with ``moves_states="recall"`` the policy plays
   ``moves_games`` games per group and the groups' states are drawn among every decision of them
   where exactly one answer word fits, the recall states where held-out games are lost (never one
   whose word is a val or test answer of the splits file: the RL term never rewards writing one);
   with ``moves_states="refused"`` among those where the greedy move was refused, if any;
3. ``num_generations`` moves are sampled there, one turn each;
4. each move earns :func:`wordle_rl.environment.rewards.move_fits`: 1 when it is a public answer
   word that fits every feedback so far, 0 for a refused move (a non-word, a repeat, a bad
   format), and ``played_score`` (0 unless set) for a word the game plays that the feedback rules
   out, or for a val or test answer of the splits file even where it fits.

The reward reads the feedback, never the row's answer: every word that could still be the answer
earns the same, so no answer word is preferred to another. (A return paid for the row's answer also
pays for believing that answers are RL-row words, a belief held-out play punishes.) Its optimum is a
policy that only plays words that could win, the behaviour constrained decoding imposes from
outside and free play lacks; the teacher of the SFT games plays only such words, so the reward and
the SFT loss pull the same way.

Credit (``credit``): ``move`` gives every token of a move GRPO's group advantage of its score.
``expected`` and ``expected-log`` (for a tokenizer that spells a guess one letter per token) replace
the sampled advantage by the exact chance, summed over the alphabet, that each letter of the move
keeps the word completable to a public answer word that fits the feedback, never a val or test
answer (its log for ``expected-log``): the letters up to the first that breaks the move are
credited, the format tokens are not.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np

from wordle_rl.data.splits import held_out_answers
from wordle_rl.engine.words import encode_words
from wordle_rl.environment.parser import parse
from wordle_rl.environment.rewards import as_history, move_fits
from wordle_rl.models.embedded import cache_argument, eval_mode
from wordle_rl.training.letter_ids import LETTERS, find_last, guess_letter_ids
from wordle_rl.training.rollout import ROW_KEY, WordleRollout, left_pad, move_error_rates
from wordle_rl.training.shared_prompt import prefill_for_rows

HELD_OUT = -1  # the fitting count of a state whose one fitting word is a val or test answer

__all__ = ["MoveRollout", "fits_reward", "decision_prefixes", "RECALL_STATES_DIR"]

RECALL_STATES_DIR = "rl_recall_states"  # under the run's output_dir: what the RL term taught


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
        """One sampled turn after each token prefix, cut after its end-of-turn token.

        A group's moves share their prefix: each distinct prefix is encoded once, and its KV cache
        is repeated for its rows before sampling (the prefill is most of a turn's compute)."""
        import torch

        starts = [i == 0 or p != prefixes[i - 1] for i, p in enumerate(prefixes)]
        rows = torch.as_tensor(np.cumsum(starts) - 1, device=model.device)
        uniq = [p for p, start in zip(prefixes, starts) if start]
        seqs, attn = left_pad(uniq, self.tok.pad_token_id, model.device)
        with eval_mode(model), torch.no_grad():
            cache = prefill_for_rows(model, seqs[:, :-1], attn[:, :-1], rows)
            seqs, attn = seqs[rows], attn[rows]
            out = model.generate(
                input_ids=seqs,
                attention_mask=attn,
                **{cache_argument(): cache},
                do_sample=True,
                temperature=self.cfg.temperature,
                top_k=0,
                top_p=1.0,
                max_new_tokens=self.cfg.max_turn_tokens,
                pad_token_id=self.tok.pad_token_id,
                eos_token_id=self.tok.eos_token_id,
                suppress_tokens=self._suppress or None,
            )
        return [self._cut(x)[0] for x in out[:, seqs.shape[1] :].tolist()]

    def _letter_table(self) -> tuple[tuple[int, ...], list[list[int]]]:
        """:func:`~wordle_rl.training.soft_targets.guess_letter_ids` of the policy's tokenizer and
        style, worked out once (with the answer words' letter codes)."""
        if not hasattr(self, "_table"):
            self._codes = encode_words(self.ctx.words.answers)
            held = self._held_out()
            self._open = np.array([w not in held for w in self.ctx.words.answers], dtype=bool)
            self._table = guess_letter_ids(
                self.tok,
                self.style,
                f"credit={self.cfg.credit!r}",
                "use that style, or credit='move'",
            )
        return self._table

    def guess_start(self, move: list[int]) -> int | None:
        """Where the letters of ``move``'s guess start: just after the last guess opener in it
        (``None`` when it has none)."""
        opener = list(self._letter_table()[0])
        at = find_last(move, opener)
        return None if at is None else at + len(opener)

    def letter_sets(self, moves, histories) -> list[list[tuple[int, np.ndarray]] | None]:
        """For each move, ``[(index in the move, allowed)]`` for its letters up to the first that
        breaks it: ``allowed[l]`` says whether the word so far plus letter ``l`` can still become
        a public answer word that fits the history, never a val or test answer of the splits file
        (``None``: the move has no guess tag)."""
        tables = self._letter_table()[1]
        letter_of = [{t: k for k, t in enumerate(row)} for row in tables]
        fitting: dict[str, np.ndarray] = {}
        out: list[list[tuple[int, np.ndarray]] | None] = []
        for move, history in zip(moves, histories):
            start = self.guess_start(move)
            if start is None:
                out.append(None)
                continue
            hist = as_history(history)
            if repr(hist) not in fitting:
                idx = self.ctx.candidates(hist)
                fitting[repr(hist)] = self._codes[idx[self._open[idx]]]
            codes, sets = fitting[repr(hist)], []
            for j in range(min(self.ctx.words.length, len(move) - start)):
                if not len(codes):
                    break
                allowed = np.zeros(len(LETTERS), dtype=bool)
                allowed[codes[:, j]] = True
                sets.append((start + j, allowed))
                letter = letter_of[j].get(move[start + j])
                if letter is None or not allowed[letter]:
                    break
                codes = codes[codes[:, j] == letter]
            out.append(sets)
        return out

    def allowed_letters(self, width: int):
        """``(allowed, ids)``, each ``(B, width, 26)``, of the last call's letter sets
        (``credit="expected"``): row ``b``, position ``i`` holds the letters that keep move ``b``
        completable at its token ``i`` (none where no letter is credited) and the token ids of
        the letters a-z there."""
        import torch

        tables = torch.tensor(self._letter_table()[1])
        sets = self.last_sets
        allowed = torch.zeros((len(sets), width, len(LETTERS)), dtype=torch.bool)
        ids = tables[0].repeat(len(sets), width, 1)
        for b, move_sets in enumerate(sets):
            for j, (i, letters) in enumerate(move_sets or []):
                if i < width:
                    allowed[b, i] = torch.from_numpy(letters)
                    ids[b, i] = tables[j]
        return allowed, ids

    def _held_out(self) -> set[str]:
        """The val and test answers of the splits file (none without one), read once: the RL term
        never rewards writing one of them."""
        if not hasattr(self, "_held"):
            self._held = held_out_answers(self.cfg.splits, self.ctx.words)
        return self._held

    def _fit_counts(self, game: dict, row: dict) -> tuple[list, list[int]]:
        """The game's :func:`decision_prefixes` and how many answer words fit at each
        (:data:`HELD_OUT` for a state whose one fitting word is a val or test answer: never drawn
        while the game has another)."""
        decisions, counts = decision_prefixes(game, row), []
        for _, h in decisions:
            fits = self.ctx.candidates(as_history(h))
            held = len(fits) == 1 and self.ctx.words.answers[int(fits[0])] in self._held_out()
            counts.append(HELD_OUT if held else len(fits))
        return decisions, counts

    def _draw(self, counts: list[int], errors: list | None = None) -> int:
        """A decision drawn at random among those where some answer word fits (with
        ``moves_states`` endgame or recall among those where exactly one fits, with refused among
        those whose greedy move, ``errors[i]``, was refused, if any); if none does, among those
        where none fits, and a held-out recall state only when nothing else is left."""
        open_ = [i for i, c in enumerate(counts) if c > 0]
        if self.cfg.moves_states == "refused" and errors is not None:
            open_ = [i for i, c in enumerate(counts) if c != HELD_OUT and errors[i]] or open_
        elif self.cfg.moves_states != "any":
            open_ = [i for i in open_ if counts[i] == 1] or open_
        open_ = open_ or [i for i, c in enumerate(counts) if c == 0] or list(range(len(counts)))
        return int(self.rng.choice(open_))

    def draw_state(self, game: dict, row: dict) -> tuple[int, list, int]:
        """``(k, decisions, n)``: decision ``k`` of a played game drawn by :meth:`_draw` (a state
        no answer word fits, late in a game on an outside word, scores every move 0), the game's
        :func:`decision_prefixes`, and the number of answer words that fit at ``k``."""
        decisions, counts = self._fit_counts(game, row)
        k = self._draw(counts, game.get("errors"))
        return k, decisions, counts[k]

    def draw_states(self, games: list[dict], rows: list[dict], n: int) -> list[tuple]:
        """``n`` group states ``(game index, k, decisions, fitting)``. Game ``i < n`` is group
        ``i``'s own game, drawn from by :meth:`draw_state`; with ``moves_states="recall"`` the
        states are drawn without replacement among every decision of every game where exactly one
        answer word fits (a recall state: the policy must write that word), and a group left
        without one takes its own game's :meth:`_draw`."""
        if self.cfg.moves_states != "recall":
            return [(i, *self.draw_state(games[i], rows[i])) for i in range(n)]
        counted = [self._fit_counts(game, row) for game, row in zip(games, rows)]
        pool = [(i, k) for i, (_, c) in enumerate(counted) for k in range(len(c)) if c[k] == 1]
        self.last_stats["wordle/recall_pool"] = len(pool) / n
        take = self.rng.choice(len(pool), size=min(n, len(pool)), replace=False) if pool else []
        out = [(i, k, counted[i][0], 1) for i, k in (pool[j] for j in take)]
        for i in range(len(out), n):
            decisions, counts = counted[i]
            k = self._draw(counts)
            out.append((i, k, decisions, counts[k]))
        return out

    def record_recall(self, histories: list, output_dir: str | Path) -> int:
        """Append the group states where exactly one answer word fits, each with that word, to
        ``output_dir/rl_recall_states/rank<r>.jsonl`` (``{"history", "recall_word"}`` per line):
        the RL term rewards writing that word there, so the training-overlap audit
        (:mod:`wordle_rl.evaluation.audit`) counts it as an imitated move. Returns how many were
        written."""
        from accelerate import PartialState

        lines = []
        for history in histories:
            fits = self.ctx.candidates(as_history(history))
            if len(fits) == 1:
                word = self.ctx.words.answers[int(fits[0])]
                lines.append(json.dumps({"history": history, "recall_word": word}) + "\n")
        if lines:
            folder = Path(output_dir) / RECALL_STATES_DIR
            folder.mkdir(parents=True, exist_ok=True)
            with open(folder / f"rank{PartialState().process_index}.jsonl", "a") as f:
                f.writelines(lines)
        return len(lines)

    def _score(self, ids: list[int], history: list) -> tuple[float, str | None]:
        """The move's :func:`move_fits`, a val or test answer held to ``played_score`` (never paid
        as a fitting word), and the game's refusal code for it (``None``: played)."""
        hist = as_history(history)
        text = self.tok.decode(ids, skip_special_tokens=True)
        pr = parse(text, self.style, words=self.ctx.words, history=hist, hard=self.cfg.hard)
        guess, played = (pr.guess if pr.ok else None), self.cfg.played_score
        score = move_fits(guess, hist, self.ctx.words, played)
        return (min(score, played) if guess in self._held_out() else score), pr.error

    def _round(self, model, group_rows: list[int]) -> tuple[list[tuple], dict]:
        """One round of greedy games for ``moves_reuse`` steps of ``len(group_rows)`` groups each:
        the groups' own rows, then rows drawn at random, all played in one batch. Returns the
        round's group states ``(decisions, k, fitting, refused before k, row)`` in the order the
        steps take them, and the round's statistics."""
        n = len(group_rows) * self.cfg.moves_reuse
        extra = n * self.cfg.moves_games - len(group_rows)
        played = group_rows + [int(self.rng.integers(len(self.rows))) for _ in range(extra)]
        games = self.play(model, played, sample_turns=0)
        picks = self.draw_states(games, [self.rows[r] for r in played], n)
        states = [
            (decisions, k, fitting, any(e is not None for e in games[i]["errors"][:k]), played[i])
            for i, k, decisions, fitting in picks
        ]
        won = float(np.mean([x["won"] for x in games]))
        return states, {"wordle/win_rate": won, "wordle/games": len(games)}

    def __call__(self, prompts: list, trainer) -> dict:
        t0 = time.perf_counter()
        g, model = self.cfg.num_generations, trainer.model
        group_rows = [int(p[0][ROW_KEY]) for p in prompts[::g]]
        # games played by this step (0 when it reuses a round; the win rate stays the round's)
        self.last_stats["wordle/games"] = 0
        if not getattr(self, "_states", None):
            # a resumed run starts a new round: the states are not in a checkpoint
            self._states, round_stats = self._round(model, group_rows)
            self.last_stats.update(round_stats)
        picks, self._states = self._states[: len(group_rows)], self._states[len(group_rows) :]
        t_play = time.perf_counter()
        states = [decisions[k] for decisions, k, *_ in picks]
        n_fit = [fitting for _, _, fitting, *_ in picks]
        # a held-out recall state, drawn only when its game has no other, teaches nothing
        held = [fitting == HELD_OUT for fitting in n_fit for _ in range(g)]
        refused = [r for *_, r, _ in picks]
        group_rows = [row for *_, row in picks]
        taught = [h for (_, h), n in zip(states, n_fit) if n != HELD_OUT]
        self.record_recall(taught, trainer.args.output_dir)
        prefixes = [ids for ids, _ in states for _ in range(g)]
        t_states = time.perf_counter()
        moves = self._sample_moves(model, prefixes)
        t_sample = time.perf_counter()
        scored = [self._score(m, states[i // g][1]) for i, m in enumerate(moves)]
        fits = [0.0 if h else s for h, (s, _) in zip(held, scored)]
        spread = [np.ptp(fits[k : k + g]) for k in range(0, len(fits), g)]
        self.last_sets = None
        histories = [states[i // g][1] for i in range(len(moves))]
        if self.cfg.credit.startswith("expected"):
            self.last_sets = self.letter_sets(moves, histories)
            for i in np.flatnonzero(held):
                self.last_sets[i] = []
        self.last_rows = [
            {"answer": self.rows[r]["answer"], "history": h}
            for r, (_, h) in zip(group_rows, states)
            for _ in range(g)
        ]
        self.last_stats.update(
            {
                "wordle/zero_spread_share": float(np.mean([s == 0 for s in spread])),
                "wordle/fits_rate": float(np.mean(fits)),
                "wordle/state_after_refusal": float(np.mean(refused)),
                "wordle/state_depth": float(np.mean([len(h) for _, h in states])),
                "wordle/state_sole_fit": float(np.mean([c == 1 for c in n_fit])),
                "wordle/state_held_out": float(np.mean([c == HELD_OUT for c in n_fit])),
                **move_error_rates([e for _, e in scored]),
                "wordle/episodes_per_s": len(moves) / (time.perf_counter() - t0),
                # where a rollout's time goes: a round of greedy games and its states (0 on a
                # step that reuses a round), recording the taught states, the samples
                "wordle/play_s": t_play - t0,
                "wordle/states_s": t_states - t_play,
                "wordle/sample_s": t_sample - t_states,
                "wordle/rollout_s": time.perf_counter() - t0,
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
