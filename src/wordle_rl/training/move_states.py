"""The states of the policy's own games that move rollouts (:mod:`.move_rollout`) build their
groups at: each decision's conversation so far, and which groups a step trains on."""

from __future__ import annotations

import numpy as np

__all__ = ["decision_prefixes", "spread_first"]


def spread_first(fits: list[float], g: int, n: int) -> list[int]:
    """The ``n`` groups (``g`` consecutive scores each) a step trains on: those whose scores
    differ first, then the others, each in the order drawn.

    >>> spread_first([0, 0, 1, 0, 1, 1, 0, 1], g=2, n=2)
    [1, 3]
    >>> spread_first([0, 0, 1, 1, 0, 1], g=2, n=2)
    [2, 0]
    """
    spread = [np.ptp(fits[j : j + g]) for j in range(0, len(fits), g)]
    return sorted(range(len(spread)), key=lambda j: spread[j] == 0)[:n]


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
