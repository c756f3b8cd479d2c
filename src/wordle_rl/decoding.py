"""Constrained decoding of guesses: the ``allowed`` and ``consistent`` modes of ``wordle-rl eval``.

    prefixes = [guess_prefixes(words, "</guess>")]        # one set of permitted words per row
    processor = GuessConstraint(tokenizer, style, prompt_len, prefixes)
    model.generate(..., logits_processor=LogitsProcessorList([processor]))

The processor lets a row spell, inside its open guess tag, only words of that row's set, and end
the turn once the tag is closed; it works with any tokenizer.
"""

from __future__ import annotations

from wordle_rl.prompts import PromptStyle

__all__ = ["GuessConstraint", "guess_prefixes"]


class GuessConstraint:
    """``LogitsProcessor``: inside an open guess tag, only tokens that keep spelling a word of the
    row's set.

    Works with any tokenizer: the generated text of each row is decoded, and a token is allowed when
    the partial guess plus its text is a prefix of ``word + close_tag`` for some permitted word;
    once the tag is closed, only end-of-turn is allowed.
    """

    def __init__(self, tokenizer, style: PromptStyle, prompt_len: int, prefix_sets: list[set[str]]):
        self.tok = tokenizer
        self.open, self.close = (
            ("[", "]") if style.answer_format == "brackets" else ("<guess>", "</guess>")
        )
        self.prompt_len = prompt_len
        self.prefix_sets = prefix_sets
        self.eos = tokenizer.eos_token_id
        allowed_chars = set("abcdefghijklmnopqrstuvwxyz") | set(self.close)
        vocab = tokenizer.convert_ids_to_tokens(list(range(len(tokenizer))))
        self.cands = []
        for i, t in enumerate(vocab):
            s = tokenizer.convert_tokens_to_string([t]) if t is not None else ""
            if s and set(s) <= allowed_chars:
                self.cands.append((i, s))

    def __call__(self, input_ids, scores):
        import torch

        for b in range(input_ids.shape[0]):
            text = self.tok.decode(input_ids[b, self.prompt_len :], skip_special_tokens=True)
            visible = text.split("</think>")[-1] if "<think>" in text else text
            k = visible.rfind(self.open)
            if k < 0:
                continue
            partial = visible[k + len(self.open) :]
            mask = torch.full_like(scores[b], float("-inf"))
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


def guess_prefixes(words_iter, close: str) -> set[str]:
    """Every prefix of ``word + close`` for the given words: the texts a guess may spell."""
    out = set()
    for w in words_iter:
        full = w + close
        for i in range(1, len(full) + 1):
            out.add(full[:i])
    return out
