"""Sampled moves whose answer format is forced: only the guess's letters are drawn.

    wordle-rl grpo --model runs/sft --data data/rl --rollout moves --moves-forced-format true

At a rollout temperature that spreads a group's moves, a BPE model spends many of them on a broken
answer format (a missing tag, a sixth letter), and a group whose moves are all broken has no reward
spread. With the format forced, the tag that opens the answer is part of the prompt, each sampled
token is a run of lower-case letters, the guess has exactly the word length, and the closing tag
and the end-of-turn token follow it as the only choices. What is left to the policy is the word,
which the move reward scores; the forced tokens get no gradient. Free play (the evaluation) is
never forced.

Needs a style whose answer is the bare word between two tags (``xml`` without think, ``tiles``,
``plain``, ``brackets``).
"""

from __future__ import annotations

import torch
from transformers import LogitsProcessor

from wordle_rl.environment.prompts import PromptStyle, format_answer

__all__ = ["ForcedFormat", "answer_frame", "letter_lengths", "word_tokens"]


def answer_frame(tok, style: PromptStyle) -> tuple[list[int], list[int]]:
    """``(opener, closer)``: the token ids that open an answer before its word and those that close
    it after the word, end-of-turn token included, as the tokenizer writes whole answers; a
    ``ValueError`` where the style's answer is not the bare word between two tags, or where the
    tokenizer merges a tag with the word."""
    if style.uses_think or style.spelled:
        raise ValueError(
            f"a forced answer format needs the guess written as one bare word without think "
            f"(the style here: {style.name!r}, think={style.think}); use xml, tiles, plain or "
            "brackets with think off"
        )
    n = style.length
    frames = set()
    for word in ["crane", "apple", "zesty", "hello"] if n == 5 else ["a" * n, "z" * n]:
        before, after = format_answer(style, word).split(word)
        ids = tok(format_answer(style, word), add_special_tokens=False)["input_ids"]
        cut = [i for i in range(len(ids) + 1) if tok.decode(ids[:i]) == before]
        end = [j for j in range(len(ids) + 1) if tok.decode(ids[j:]) == after]
        if not cut or not end or tok.decode(ids[cut[-1] : end[0]]) != word:
            raise ValueError(
                f"the tokenizer writes {format_answer(style, word)!r} with a tag merged into the "
                "word: the answer format cannot be forced around free letters"
            )
        frames.add((tuple(ids[: cut[-1]]), tuple(ids[end[0] :])))
    if len(frames) != 1:
        raise ValueError(f"the answer's tags are tokenized unlike around other words: {frames}")
    opener, closer = frames.pop()
    return list(opener), list(closer) + [tok.eos_token_id]


def letter_lengths(tok, width: int) -> torch.Tensor:
    """``(width,)``: for each token id, how many letters it writes when it is a run of lower-case
    letters a-z and nothing else, else 0 (special tokens, spaces, capitals, tags)."""
    special = set(tok.all_special_ids)
    out = torch.zeros(width, dtype=torch.long)
    for i in range(min(width, len(tok))):
        if i in special:
            continue
        text = tok.decode([i])
        if text.isascii() and text.isalpha() and text.islower():
            out[i] = len(text)
    return out


def word_tokens(move: list[int], letters: torch.Tensor, length: int) -> tuple[int, int]:
    """``(tokens, letters written)``: how many leading tokens of ``move`` write its word (until
    ``length`` letters are written or a token writes none), and how many letters they write.

    >>> word_tokens([1, 2, 3, 4], torch.tensor([0, 1, 2, 0, 0]), 3)
    (2, 3)
    """
    written, i = 0, 0
    while i < len(move) and written < length and int(letters[move[i]]) > 0:
        written, i = written + int(letters[move[i]]), i + 1
    return i, written


class ForcedFormat(LogitsProcessor):
    """Masks each row's next-token scores to what the forced format allows: letter runs that fit in
    what is left of the word, then the closer's tokens one by one (the rows' generated tokens start
    at column ``prompt_width``).

    >>> import torch
    >>> proc = ForcedFormat(torch.tensor([0, 1, 2, 0, 0]), closer=[3, 4], prompt_width=1, length=3)
    >>> allowed = lambda ids: proc(torch.tensor([ids]), torch.zeros(1, 5)).isfinite()[0].tolist()
    >>> allowed([9]), allowed([9, 2]), allowed([9, 2, 1]), allowed([9, 2, 1, 3])
    ([False, True, True, False, False], [False, True, False, False, False], \
[False, False, False, True, False], [False, False, False, False, True])
    """

    def __init__(self, letters: torch.Tensor, closer: list[int], prompt_width: int, length: int):
        self.letters, self.closer = letters, closer
        self.prompt_width, self.length = prompt_width, length

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        letters = self.letters.to(scores.device)
        allowed = torch.zeros_like(scores, dtype=torch.bool)
        for b, row in enumerate(input_ids[:, self.prompt_width :].tolist()):
            i, written = word_tokens(row, letters, self.length)
            if written < self.length:
                allowed[b, : len(letters)] = (letters > 0) & (letters <= self.length - written)
            else:
                allowed[b, self.closer[min(len(row) - i, len(self.closer) - 1)]] = True
        return scores.masked_fill(~allowed, float("-inf"))
