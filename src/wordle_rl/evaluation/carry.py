"""Turn-by-turn batched generation that carries each game's KV cache from one turn to the next.

    carry = CarriedTurns(model, tok)
    prompts = carry.inputs(envs, texts)        # per batch: only what is new since the last turn
    for batch in prompts: out = model.generate(**batch.kwargs, ...); carry.record(batch, out)

A game's conversation only grows: each turn appends the model's reply and the environment's
feedback. Re-encoding the whole conversation every turn makes evaluation cost grow with the square
of the game's length, and on a pretrained LLM, whose system prompt alone is ~100 tokens, the
re-encoded prompt is most of the work. Here each batch of games keeps its cache: a turn encodes
only the new feedback tokens, appended to the last turn's sequences. Padding inside a row (after a
reply that ended early, before a shorter feedback) is masked, and position ids follow the mask, so
each game sees the positions of its own unpadded conversation (the GRPO game rollout builds its
turns the same way). A game whose re-rendered conversation does not extend the text already cached
(a chat template that rewrites earlier turns) sends its batch back to a full encode.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["CarriedTurns", "Batch"]


@dataclass
class _Group:
    """The games that share one batch and its cache, in batch-row order."""

    envs: list  # the games (kept alive so that their ids stay theirs)
    rows: list[int]  # index into envs of each row of the cache
    covered: list[str]  # each row's conversation text already in the cache
    index: dict[int, int] = field(default_factory=dict)  # id(env) -> its index in envs
    seqs: object = None  # sequences the last generate returned
    attn: object = None  # their attention mask, generated tokens included
    cache: object = None


@dataclass
class Batch:
    """One generate call: the games (positions in the caller's list) and the model inputs."""

    group: _Group
    positions: list[int]
    kwargs: dict = field(default_factory=dict)

    @property
    def prompt_length(self) -> int:
        return int(self.kwargs["input_ids"].shape[1])


class CarriedTurns:
    """Builds each turn's generate inputs from the games' re-rendered conversations and keeps
    the caches between turns (games stay in the batch they started in)."""

    def __init__(self, model, tok, batch_size: int):
        from wordle_rl.models.embedded import cache_argument

        self.model, self.tok, self.batch_size = model, tok, batch_size
        self.cache_name = cache_argument()
        self.groups: dict[int, _Group] = {}  # id(env) -> its group

    def inputs(self, envs: list, texts: list[str]) -> list[Batch]:
        """The generate inputs of this turn, one :class:`Batch` per group of games."""
        live = {id(e) for e in envs}
        # games no longer asked for are over: drop the groups none of whose games is live
        self.groups = {k: g for k, g in self.groups.items() if any(id(e) in live for e in g.envs)}
        new = [p for p, e in enumerate(envs) if id(e) not in self.groups]
        for start in range(0, len(new), self.batch_size):
            part = new[start : start + self.batch_size]
            group = _Group([envs[p] for p in part], [], [])
            group.index = {id(e): i for i, e in enumerate(group.envs)}
            for e in group.envs:
                self.groups[id(e)] = group
        batches: dict[int, Batch] = {}
        for p, e in enumerate(envs):
            g = self.groups[id(e)]
            batches.setdefault(id(g), Batch(g, [])).positions.append(p)
        out = []
        for b in batches.values():
            b.positions.sort(key=lambda p: self._row(b.group, envs[p]))
            b.kwargs = self._extend(
                b.group, [envs[p] for p in b.positions], [texts[p] for p in b.positions]
            )
            out.append(b)
        return out

    def _row(self, g: _Group, env) -> int:
        index = g.index[id(env)]
        return g.rows.index(index) if index in g.rows else -1

    def _extend(self, g: _Group, envs: list, want: list[str]) -> dict:
        """Inputs that continue ``g``'s cache with the new text of each game (``envs`` in batch-row
        order, ``want`` their conversations), or encode them whole."""
        import torch

        from wordle_rl.training.rollout import left_pad

        index = [g.index[id(env)] for env in envs]
        pad, dev = self.tok.pad_token_id, self.model.device
        carried = g.cache is not None and all(i in g.rows for i in index)
        if carried:
            keep = [g.rows.index(i) for i in index]
            covered = [g.covered[j] for j in keep]
            carried = all(t.startswith(c) for t, c in zip(want, covered))
        if not carried:  # the first turn, or a conversation that does not extend the cached one
            ids = [self.tok(t, add_special_tokens=False)["input_ids"] for t in want]
            seqs, attn = left_pad(ids, pad, dev)
            g.cache = None
        else:
            idx = torch.tensor(keep, device=dev)
            g.cache.batch_select_indices(idx)
            segments = [
                self.tok(t[len(c) :], add_special_tokens=False)["input_ids"]
                for t, c in zip(want, covered)
            ]
            env_t, env_attn = left_pad(segments, pad, dev)
            seqs = torch.cat([g.seqs[idx], env_t], 1)
            attn = torch.cat([g.attn[idx], env_attn], 1)
        g.rows, g.covered, g.seqs, g.attn = index, want, seqs, attn
        return {"input_ids": seqs, "attention_mask": attn, self.cache_name: g.cache}

    def record(self, batch: Batch, sequences, cache) -> list[list[int]]:
        """Keep the cache and sequences of ``batch``'s generate call; returns each row's reply up
        to and including its end-of-turn token."""
        import torch

        g, eos = batch.group, self.tok.eos_token_id
        new = sequences[:, batch.prompt_length :]
        replies = []
        new_attn = new.new_zeros(new.shape)
        for j, ids in enumerate(new.tolist()):
            ids = ids[: ids.index(eos) + 1] if eos in ids else ids
            new_attn[j, : len(ids)] = 1
            g.covered[j] += self.tok.decode(ids, skip_special_tokens=False)
            replies.append(ids)
        g.seqs, g.cache = sequences, cache
        g.attn = torch.cat([g.attn, new_attn], 1)
        return replies
