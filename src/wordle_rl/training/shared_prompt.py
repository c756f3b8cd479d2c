"""Forward passes that run a prompt shared by several rows through the model once.

GRPO (:func:`completion_logits`):
A GRPO group's ``num_generations`` completions share one prompt, and TRL's loss runs prompt and
completion together for every row. With a Wordle state of about 300 tokens and a move of about 10,
nearly all of an update's compute is then the same prompt, once per row of its group. Here each
distinct prompt but its last token runs once, with gradients; its KV cache is indexed out to the
rows that share it, and each row runs only that last token and its completion on top of it. The
gradient reaches the shared pass through the cache, so the loss and its gradient are those of the
per-row forward (up to float rounding; a test checks both).

Used by :class:`wordle_rl.training.grpo.WordleGRPOTrainer` for its log-probabilities and its
expected-letter loss; it needs the KV cache, so activation checkpointing (which turns the cache
off in training) keeps TRL's per-row forward.

SFT (:func:`shared_prefix_hidden`): every game of a batch opens with the same system prompt and
first user turn, about half of a short game's tokens. That common prefix runs once, the rest of
each row on its KV cache, with the same loss and gradient as the batch run row by row.
"""

from __future__ import annotations

from wordle_rl.models.embedded import cache_argument

__all__ = [
    "completion_logits",
    "common_prefix_length",
    "prefill_for_rows",
    "shared_prefix_hidden",
    "token_logps_and_entropies",
]


def completion_logits(model, input_ids, attention_mask, width: int):
    """``(rows, width, vocab)`` logits, each position's predicting that completion token, from
    left-padded prompts followed by right-padded completions of ``width`` tokens; ``None`` when no
    two rows share a prompt (nothing to save) or a prompt is a single column."""
    import torch

    prompt_width = input_ids.shape[1] - width
    if prompt_width < 2 or width < 1:
        return None
    prompts = torch.cat([input_ids[:, :prompt_width], attention_mask[:, :prompt_width]], dim=1)
    uniq, rows = torch.unique(prompts, dim=0, return_inverse=True)
    if len(uniq) == len(prompts):
        return None
    first = torch.empty(len(uniq), dtype=torch.long, device=rows.device)
    first[rows] = torch.arange(len(rows), device=rows.device)
    head = prompt_width - 1  # the shared part: every prompt column but the last
    cache = prefill_for_rows(model, input_ids[first, :head], attention_mask[first, :head], rows)
    # the prompt's last token and the completion but its last token: the positions that predict
    # the completion's tokens
    return model(
        input_ids=input_ids[:, head:-1],
        attention_mask=attention_mask[:, :-1],
        position_ids=_positions(attention_mask)[:, head:-1],
        use_cache=True,
        **{cache_argument(): cache},
    ).logits


def prefill_for_rows(model, input_ids, attention_mask, rows):
    """The KV cache of left-padded distinct prompts, each run once, indexed out to ``rows`` (the
    distinct prompt of each row): what each row's continuation runs on."""
    out = model(
        input_ids=input_ids,
        attention_mask=attention_mask,
        position_ids=_positions(attention_mask),
        use_cache=True,
        logits_to_keep=1,
    )
    cache = getattr(out, cache_argument())
    cache.batch_select_indices(rows)
    return cache


def common_prefix_length(input_ids, attention_mask) -> int:
    """How many columns at the start every row holds, unpadded and token for token the same.

    >>> import torch
    >>> ids = torch.tensor([[5, 6, 7, 8], [5, 6, 9, 0]])
    >>> common_prefix_length(ids, torch.tensor([[1, 1, 1, 1], [1, 1, 1, 0]]))
    2
    >>> common_prefix_length(ids, torch.tensor([[0, 1, 1, 1], [1, 1, 1, 0]]))
    0
    """
    same = (input_ids == input_ids[:1]).all(0) & (attention_mask == 1).all(0)
    differ = (~same).nonzero()
    return int(differ[0, 0]) if len(differ) else int(input_ids.shape[1])


def shared_prefix_hidden(model, input_ids, attention_mask):
    """``(rows, length, hidden)``: the last hidden state of right-padded rows, the prefix they all
    share run once (with gradients) and each row's rest on its KV cache; ``None`` when there is
    nothing to share (one row, no common prefix, or rows that are the prefix whole), or when
    activation checkpointing turns the cache off."""
    import torch

    rows, length = input_ids.shape
    shared = common_prefix_length(input_ids, attention_mask)
    if rows < 2 or shared < 1 or shared >= length or _checkpointing(model):
        return None
    head = model(
        input_ids=input_ids[:1, :shared],
        attention_mask=attention_mask[:1, :shared],
        use_cache=True,
        output_hidden_states=True,
        logits_to_keep=1,
    )
    cache = getattr(head, cache_argument())
    cache.batch_repeat_interleave(rows)
    positions = torch.arange(shared, length, device=input_ids.device).expand(rows, -1)
    rest = model(
        input_ids=input_ids[:, shared:],
        attention_mask=attention_mask,
        position_ids=positions,
        use_cache=True,
        output_hidden_states=True,
        logits_to_keep=1,
        **{cache_argument(): cache},
    )
    prefix = head.hidden_states[-1].expand(rows, -1, -1)
    return torch.cat([prefix, rest.hidden_states[-1]], dim=1)


def _checkpointing(model) -> bool:
    """Whether activation checkpointing is on (it turns the KV cache off in training)."""
    inner = getattr(model, "module", model)
    on = getattr(inner, "is_activation_checkpointing", None)  # transformers 5: the new name
    return bool(getattr(inner, "is_gradient_checkpointing", False) if on is None else on)


def _positions(attention_mask):
    """Position ids that follow the left padding, as in generation."""
    return (attention_mask.cumsum(-1) - 1).clamp(min=0)


def token_logps_and_entropies(logits, tokens, temperature: float, entropy: bool):
    """Log-probabilities of ``tokens`` under ``logits / temperature`` (float32), and the entropy
    of each position's distribution when asked (else ``None``).

    >>> import torch
    >>> tokens = torch.tensor([[0, 3]])
    >>> logps, ent = token_logps_and_entropies(torch.zeros(1, 2, 4), tokens, 1.0, True)
    >>> [round(x, 4) for x in logps[0].tolist()], [round(x, 4) for x in ent[0].tolist()]
    ([-1.3863, -1.3863], [1.3863, 1.3863])
    """
    logp = (logits.float() / temperature).log_softmax(-1)
    picked = logp.gather(-1, tokens.unsqueeze(-1)).squeeze(-1)
    if not entropy:
        return picked, None
    return picked, -(logp.exp() * logp).sum(-1)
