"""Constrained decoding of guesses: the ``allowed`` and ``consistent`` modes of ``wordle-rl eval``.

    prefixes = [guess_prefixes(words, style)]             # one set of permitted words per row
    processor = GuessConstraint(tokenizer, style, prompt_len, prefixes)
    model.generate(..., logits_processor=LogitsProcessorList([processor]))

The processor lets a row spell, inside its open guess tag, only words of that row's set, and end
the turn once the tag is closed; it works with any tokenizer.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from wordle_rl.engine.game import score_pairs
from wordle_rl.engine.words import encode_words
from wordle_rl.environment.prompts import PromptStyle

__all__ = ["GuessConstraint", "guess_prefixes", "fitting_prefixes"]


@lru_cache(maxsize=8)
def _spelling_tokens(tokenizer, chars: frozenset[str]) -> tuple[tuple[int, str], ...]:
    """The (id, text) of every token whose text is made of ``chars`` only (a scan of the whole
    vocabulary, done once per tokenizer)."""
    out = []
    for i, t in enumerate(tokenizer.convert_ids_to_tokens(list(range(len(tokenizer))))):
        s = tokenizer.convert_tokens_to_string([t]) if t is not None else ""
        if s and set(s) <= chars:
            out.append((i, s))
    return tuple(out)


class GuessConstraint:
    """``LogitsProcessor``: inside an open guess tag, only tokens that keep spelling a word of the
    row's set.

    Works with any tokenizer: the generated text of each row is decoded, and a token is allowed when
    the partial guess plus its text is a prefix of ``word + close_tag`` for some permitted word;
    once the tag is closed, only end-of-turn is allowed. A row whose set is ``None`` is free.
    """

    def __init__(
        self,
        tokenizer,
        style: PromptStyle,
        prompt_len: int,
        prefix_sets: list[set[str] | None],
    ):
        self.tok = tokenizer
        self.open, self.close = style.guess_tags
        self.prompt_len = prompt_len
        self.prefix_sets = prefix_sets
        self.eos = tokenizer.eos_token_id
        spaces = " " if style.spelled else ""
        chars = frozenset("abcdefghijklmnopqrstuvwxyz" + spaces + self.close + self.open)
        self.cands = _spelling_tokens(tokenizer, chars)

    def __call__(self, input_ids, scores):
        import torch

        for b in range(input_ids.shape[0]):
            if self.prefix_sets[b] is None:  # a free row
                continue
            text = self.tok.decode(input_ids[b, self.prompt_len :], skip_special_tokens=True)
            visible = text.split("</think>")[-1] if "<think>" in text else text
            k = visible.rfind(self.open)
            mask = torch.full_like(scores[b], float("-inf"))
            if k < 0:
                continue
            partial = visible[k + len(self.open) :]
            if partial.endswith(self.close):
                mask[self.eos] = 0
            else:
                ok = [i for i, s in self.cands if (partial + s) in self.prefix_sets[b]]
                if ok:
                    mask[ok] = 0
                else:
                    mask[self.eos] = 0
            scores[b] = scores[b] + mask
        return scores


def guess_prefixes(words_iter, style: PromptStyle) -> set[str]:
    """Every prefix of each word written as ``style`` writes a guess, its closing tag included:
    the texts a guess may spell."""
    close = style.guess_tags[1]
    out = set()
    for w in words_iter:
        full = style.written(w) + close
        for i in range(1, len(full) + 1):
            out.add(full[:i])
    return out


def fitting_prefixes(allowed, encoded: np.ndarray, history, style: PromptStyle) -> set[str]:
    """The prefixes (:func:`guess_prefixes`) of the allowed words that fit every scored guess of
    ``history`` (``(guess, pattern)`` pairs), found by re-scoring; ``encoded`` is
    ``encode_words(allowed)``.

    >>> from wordle_rl.engine.game import score
    >>> words, brackets = ["crane", "crank", "trace"], PromptStyle("brackets")
    >>> history = [("crane", score("crane", "crank"))]
    >>> p = fitting_prefixes(words, encode_words(words), history, brackets)
    >>> sorted(x for x in p if x.endswith("]"))
    ['crank]']
    """
    ok = np.ones(len(allowed), dtype=bool)
    for g, p in history:
        ok &= score_pairs(np.broadcast_to(encode_words([g]), encoded.shape), encoded) == p
    return guess_prefixes((allowed[i] for i in np.flatnonzero(ok)), style)
