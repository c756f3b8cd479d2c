"""Contrast moves: at a GRPO group whose state has exactly one fitting answer word, two of the
group's moves are written for it instead of sampled: that word, and the fitting word of another
group of the step, which the feedback here rules out.

    wordle-rl grpo --model runs/sft --data data/rl --moves-states recall --moves-contrast

Both are scored by the same reward as the sampled moves, so the group always has a spread: the
fitting word is raised, the other word and the policy's own misses are lowered. A word raised only
where it fits is raised everywhere, and the policy then writes it where the feedback rules it out;
here every word the step raises at its own state it lowers at another group's state, so what is
taught is which word the feedback allows, not a list of words.
"""

from __future__ import annotations

from wordle_rl.environment.prompts import PromptStyle, format_answer

__all__ = ["contrast_pairs", "written_move"]


def contrast_pairs(words: list[str | None]) -> list[tuple[str | None, str | None]]:
    """For each group, ``(raised, lowered)``: its own fitting word (``None`` where its state has
    more or less than one) and the nearest earlier group's fitting word, cyclically, that differs
    from it (``None`` where there is none). At a state with one fitting answer word, any other
    answer word is ruled out by the feedback.

    >>> contrast_pairs(["crane", None, "slate", "crane"])
    [('crane', 'slate'), (None, None), ('slate', 'crane'), ('crane', 'slate')]
    >>> contrast_pairs(["crane", "crane", None])
    [('crane', None), ('crane', None), (None, None)]
    """
    n, out = len(words), []
    for j, word in enumerate(words):
        other = None
        if word is not None:
            for d in range(1, n):
                w = words[(j - d) % n]
                if w is not None and w != word:
                    other = w
                    break
        out.append((word, other))
    return out


def written_move(tok, style: PromptStyle, word: str) -> list[int]:
    """The token ids of the assistant turn that plays ``word`` in ``style``, end-of-turn token
    included: the turn as the SFT data writes it after a conversation's generation prompt."""
    ids = tok(format_answer(style, word), add_special_tokens=False)["input_ids"]
    return [*ids, tok.eos_token_id]
