"""The letters of a guess as tokens: which token writes each letter at each position of a guess,
and a ``generate`` logits processor that holds a guess to the answer words that fit.

    opener, tables = letter_table(tokenizer, PromptStyle("spelled"), 5, "constrained")
    processors = [FittingLetters(prompt_len, fitting_codes_per_row, list(opener), tables)]

The ``expected`` credits read the tables to credit letters; the ``constrained`` credit samples
moves whose letters keep each guess completable to a fitting answer word.
"""

from __future__ import annotations

import numpy as np

from wordle_rl.engine.words import encode_words
from wordle_rl.environment.prompts import format_answer
from wordle_rl.environment.rewards import as_history, move_fits
from wordle_rl.training.soft_targets import find_last

LETTERS = "abcdefghijklmnopqrstuvwxyz"

__all__ = ["LETTERS", "letter_table", "FittingLetters", "FittingWords"]


def letter_table(tok, style, n: int, credit: str) -> tuple[tuple[int, ...], list[list[int]]]:
    """The token ids that open a guess (``<guess>``, ``[``) and, for each letter position of a
    guess, the ids of the letters a-z there: a character tokenizer writes every letter with
    the same ids; a BPE tokenizer in the ``spelled`` style writes the first letter bare and
    the others with their leading space (``c``, `` r``). A clear error for a tokenizer and
    style that do not write a guess one letter per token (``n``: the word length; ``credit``: the
    option that needs the table, for the message)."""
    opening = format_answer(style, "a" * n).rsplit(style.written("a" * n), 1)[0]
    tables = [[0] * len(LETTERS) for _ in range(n)]
    for k, c in enumerate(LETTERS):
        ids = tok(format_answer(style, c * n), add_special_tokens=False)["input_ids"]
        at = next((i for i in range(len(ids)) if tok.decode(ids[:i]) == opening), None)
        spelled = None if at is None else ids[at : at + n]
        if spelled is None or any(tok.decode([t]).strip() != c for t in spelled):
            raise ValueError(
                f"credit={credit!r} needs a guess written one letter per token: the "
                "embedded tokenizer does this in every style, a BPE tokenizer such as "
                "SmolLM2's or Qwen's in the `spelled` style only; use that style, or "
                "credit='move'"
            )
        for j, t in enumerate(spelled):
            tables[j][k] = t
    # the shortest run of tokens before the letters that holds the opening tag (of the last
    # answer tokenized; what comes before the letters is the same for every letter)
    opener = next(
        tuple(ids[i:at])
        for i in range(at - 1, -1, -1)
        if style.guess_tags[0] in tok.decode(ids[i:at])
    )
    if any(len(set(row)) < len(LETTERS) for row in tables):
        raise ValueError(f"the tokenizer writes two letters with one token id: {tables}")
    return opener, tables


class FittingLetters:
    """A ``generate`` logits processor: once a row's turn has opened its guess, each letter is
    drawn only among those that keep the guess completable to one of that row's fitting answer
    words (their letter codes, ``(n, length)``; ``None`` or empty: the row is left free). Letters
    of other tokens, text before the guess tag and what follows the last letter are left free.

    ``start``: where the generated tokens begin; ``opener``: the tokens that open a guess;
    ``tables[j][k]``: the token id of letter ``k`` at position ``j``."""

    def __init__(self, start: int, fitting: list, opener: list[int], tables: list[list[int]]):
        self.start, self.fitting, self.opener, self.tables = start, fitting, opener, tables
        self.letter_of = [{t: k for k, t in enumerate(row)} for row in tables]

    def allowed(self, row: int, generated: list[int]) -> list[int] | None:
        """The token ids allowed next in ``row`` (``None``: any)."""
        codes = self.fitting[row]
        at = find_last(generated, self.opener)
        if codes is None or not len(codes) or at is None:
            return None
        letters = generated[at + len(self.opener) :]
        if len(letters) >= len(self.tables):
            return None
        for j, t in enumerate(letters):
            k = self.letter_of[j].get(t)
            if k is None:
                return None
            codes = codes[codes[:, j] == k]
        return [self.tables[len(letters)][k] for k in np.unique(codes[:, len(letters)])]

    def __call__(self, input_ids, scores):
        import torch

        free, rows, cols = [], [], []
        for row, ids in enumerate(input_ids[:, self.start :].tolist()):
            allowed = self.allowed(row, ids)
            if allowed is None:
                free.append(row)
            else:
                rows += [row] * len(allowed)
                cols += allowed
        if not rows:
            return scores
        out = torch.full_like(scores, -torch.inf)
        out[free] = scores[free]
        rows, cols = (
            torch.tensor(rows, device=scores.device),
            torch.tensor(cols, device=scores.device),
        )
        out[rows, cols] = scores[rows, cols]
        return out


class FittingWords:
    """The answer words that fit a history, as letter codes, under the RL term's guard (a state
    whose one fitting word is a val or test answer of the ``splits`` file, ``held``, has none to
    write), and how a tokenizer writes their letters (``tok`` and ``style``; ``credit`` names the
    option that needs it in an error)."""

    def __init__(self, ctx, splits, tok, style, credit: str):
        from wordle_rl.data.splits import held_out_answers

        self.ctx, self.tok, self.style, self.credit = ctx, tok, style, credit
        self.held = held_out_answers(splits, ctx.words)  # none without a splits file
        self.codes = encode_words(ctx.words.answers)
        self._table = None

    def table(self) -> tuple[tuple[int, ...], list[list[int]]]:
        """:func:`letter_table` of the tokenizer and style, worked out once."""
        if self._table is None:
            n = self.ctx.words.length
            self._table = letter_table(self.tok, self.style, n, self.credit)
        return self._table

    def processor(self, fitting: list, start: int):
        """A ``logits_processor`` holding row ``i``'s guess to the words of ``fitting[i]`` (letter
        codes, from :meth:`at`), for a ``generate`` whose new tokens begin at ``start``."""
        from transformers import LogitsProcessorList

        opener, tables = self.table()
        return LogitsProcessorList([FittingLetters(start, fitting, list(opener), tables)])

    def at(self, history) -> np.ndarray | None:
        """The letter codes of the answer words that fit ``history`` (``None``: held out)."""
        fits = self.ctx.candidates(as_history(history))
        if len(fits) == 1 and self.ctx.words.answers[int(fits[0])] in self.held:
            return None
        return self.codes[fits]

    def turn_mask(self, game: dict, history: list) -> list[int]:
        """A played game's ``env_mask`` with every turn zeroed whose move does not fit the
        feedback before it, had no feedback to read (an opening guess), or stood where the one
        fitting word is held out; ``history``: the scored turns before the game's first move."""
        mask, history = list(game["env_mask"]), [list(t) for t in history]
        starts = [i for i, m in enumerate(mask) if m == 1 and (i == 0 or mask[i - 1] == 0)]
        for start, (guess, pattern) in zip(starts, game["moves"]):
            end = start
            while end < len(mask) and mask[end] == 1:
                end += 1
            held = self.at(history) is None
            if not history or held or not move_fits(guess, as_history(history), self.ctx.words):
                mask[start:end] = [0] * (end - start)
            if guess is not None and pattern is not None:
                history.append([guess, pattern])
        return mask
