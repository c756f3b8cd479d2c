"""Where a guess's letters stand among a tokenizer's ids: what the soft letter targets and the
move rollout's letter credit need to read the policy's probability of each letter a-z.

A character tokenizer writes every letter with the same id wherever it stands; a BPE tokenizer
writes a guess one letter per token only in the ``spelled`` style, the first letter bare and the
others with a leading space (``<guess>c r a n e</guess>``).
"""

from __future__ import annotations

from wordle_rl.environment.prompts import PromptStyle, format_answer

__all__ = ["LETTERS", "guess_letter_ids", "find_last"]

LETTERS = "abcdefghijklmnopqrstuvwxyz"


def guess_letter_ids(
    tok, style: PromptStyle, needed_by: str, fix: str
) -> tuple[tuple[int, ...], list[list[int]]]:
    """``(opener, tables)``: the token ids just before a guess's letters (the one that holds
    ``<guess>`` or ``[``) and, for each letter position, the ids of the letters a-z written there.

    A character tokenizer writes every letter with the same ids; a BPE tokenizer in the ``spelled``
    style writes the first letter bare and the others with their leading space (``c``, `` r``).
    Any other tokenizer and style is a ``ValueError`` naming what needs the letters (``needed_by``)
    and what to do instead (``fix``)."""
    n = style.length
    opening = format_answer(style, "a" * n).rsplit(style.written("a" * n), 1)[0]
    tables = [[0] * len(LETTERS) for _ in range(n)]
    for k, c in enumerate(LETTERS):
        ids = tok(format_answer(style, c * n), add_special_tokens=False)["input_ids"]
        at = next((i for i in range(len(ids)) if tok.decode(ids[:i]) == opening), None)
        spelled = None if at is None else ids[at : at + n]
        if spelled is None or any(tok.decode([t]).strip() != c for t in spelled):
            raise ValueError(
                f"{needed_by} needs a guess written one letter per token: the embedded tokenizer "
                "writes one in every style, a BPE tokenizer such as SmolLM2's or Qwen's in the "
                f"`spelled` style only (the style here: {style.name!r}); {fix}"
            )
        for j, t in enumerate(spelled):
            tables[j][k] = t
    if any(len(set(row)) < len(LETTERS) for row in tables):
        raise ValueError(f"the tokenizer writes two letters with one token id: {tables}")
    # the shortest run of tokens before the letters that holds the opening tag (of the last answer
    # tokenized; what comes before the letters is the same for every letter)
    opener = next(
        tuple(ids[i:at])
        for i in range(at - 1, -1, -1)
        if style.guess_tags[0] in tok.decode(ids[i:at])
    )
    return opener, tables


def find_last(seq: list[int], sub: list[int]) -> int | None:
    """Where the last occurrence of ``sub`` in ``seq`` starts (``None``: nowhere).

    >>> find_last([1, 2, 3, 1, 2], [1, 2]), find_last([1, 2], [3])
    (3, None)
    """
    for i in range(len(seq) - len(sub), -1, -1):
        if seq[i : i + len(sub)] == sub:
            return i
    return None
