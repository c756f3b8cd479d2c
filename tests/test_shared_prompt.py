"""One forward per distinct GRPO prompt: the same log-probabilities and gradients as one per row."""

import pytest
import torch
from trl.trainer.utils import pad

from wordle_rl.models.embedded import load_model
from wordle_rl.training.shared_prompt import (
    common_prefix_length,
    completion_logits,
    shared_prefix_hidden,
    token_logps_and_entropies,
)


def _batch(vocab: int, pad_id: int):
    """Three prompts of different lengths (left-padded), each followed by three completions of
    different lengths (right-padded), in shuffled order as TRL may hand them over."""
    g = torch.Generator().manual_seed(0)
    prompts = [torch.randint(1, vocab, (n,), generator=g) for n in (9, 14, 6)]
    completions = [torch.randint(1, vocab, (n,), generator=g) for n in (5, 2, 4) * 3]
    order = torch.randperm(9, generator=g).tolist()
    p = [prompts[i // 3] for i in order]
    c = [completions[i] for i in order]
    ones = [torch.ones_like(x) for x in p]
    p_ids = pad(p, padding_value=pad_id, padding_side="left")
    p_mask = pad(ones, padding_value=0, padding_side="left")
    c_ids = pad(c, padding_value=pad_id, padding_side="right")
    c_mask = pad([torch.ones_like(x) for x in c], padding_value=0, padding_side="right")
    return torch.cat([p_ids, c_ids], 1), torch.cat([p_mask, c_mask], 1), c_ids.shape[1], c_mask


def _per_row(model, ids, mask, width):
    """The reference: every row's prompt and completion through the model together."""
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    out = model(input_ids=ids, attention_mask=mask, position_ids=positions, use_cache=False)
    return out.logits[:, -width - 1 : -1]


def test_shared_prompt_logps_and_gradients_equal_the_per_row_forward(micro):
    model, tok = load_model(str(micro), threads=1)
    model.train()
    model.config.dropout = 0.0
    ids, mask, width, c_mask = _batch(model.config.vocab_size, tok.pad_token_id)
    grads, values = [], []
    for fn in (completion_logits, _per_row):
        model.zero_grad()
        logits = fn(model, ids, mask, width)
        logps, ent = token_logps_and_entropies(logits, ids[:, -width:], 0.7, True)
        loss = (logps * c_mask).sum() + 0.1 * (ent * c_mask).sum()
        loss.backward()
        values.append((logps * c_mask, ent * c_mask))
        grad = [p.grad.flatten() for p in model.parameters() if p.grad is not None]
        grads.append(torch.cat(grad))
    torch.testing.assert_close(values[0], values[1], atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(grads[0], grads[1], atol=1e-5, rtol=1e-3)
    assert grads[0].abs().sum() > 0


@pytest.mark.parametrize("case", ["one row", "one-column prompts"])
def test_nothing_shared_falls_back(micro, case):
    """A batch with no repeated prompt (or prompts of one column) leaves the forward to TRL."""
    model, tok = load_model(str(micro), threads=1)
    ids, mask, width, _ = _batch(model.config.vocab_size, tok.pad_token_id)
    if case == "one row":
        assert completion_logits(model, ids[[0]], mask[[0]], width) is None
    else:
        assert completion_logits(model, ids[:, -width - 1 :], mask[:, -width - 1 :], width) is None


def _sft_batch(vocab: int, pad_id: int, shared: int):
    """Four right-padded rows of different lengths, the first ``shared`` tokens the same in all."""
    g = torch.Generator().manual_seed(1)
    head = torch.randint(1, vocab, (shared,), generator=g)
    rows = [torch.cat([head, torch.randint(1, vocab, (n,), generator=g)]) for n in (7, 3, 11, 5)]
    ids = pad(rows, padding_value=pad_id, padding_side="right")
    mask = pad([torch.ones_like(r) for r in rows], padding_value=0, padding_side="right")
    return ids, mask


@pytest.mark.parametrize("shared", [1, 9])
def test_a_batchs_common_prefix_run_once_gives_the_row_by_row_loss_and_gradients(micro, shared):
    """The SFT loss's hidden states with the common prefix run once equal the plain forward's,
    and so do the gradients of a loss on the real rows' positions (padding excluded)."""
    model, tok = load_model(str(micro), threads=1)
    model.train()
    model.config.dropout = 0.0
    ids, mask = _sft_batch(model.config.vocab_size, tok.pad_token_id, shared)
    assert common_prefix_length(ids, mask) == shared
    weights = torch.randn(ids.shape + (model.config.hidden_size,), generator=torch.Generator())
    results = []
    for run_once in (True, False):
        model.zero_grad()
        if run_once:
            hidden = shared_prefix_hidden(model, ids, mask)
        else:
            out = model(input_ids=ids, attention_mask=mask, output_hidden_states=True)
            hidden = out.hidden_states[-1]
        kept = hidden * mask.unsqueeze(-1)
        (kept * weights).sum().backward()
        grad = torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None])
        results.append((kept.detach(), grad))
    torch.testing.assert_close(results[0][0], results[1][0], atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(results[0][1], results[1][1], atol=1e-4, rtol=1e-3)
    assert results[0][1].abs().sum() > 0


def test_rows_with_nothing_to_share_take_the_plain_forward(micro):
    model, tok = load_model(str(micro), threads=1)
    ids, mask = _sft_batch(model.config.vocab_size, tok.pad_token_id, 4)
    assert shared_prefix_hidden(model, ids[[0]], mask[[0]]) is None  # one row
    other = ids.clone()
    other[1, 0] = (other[0, 0] + 1) % model.config.vocab_size
    assert shared_prefix_hidden(model, other, mask) is None  # differ at the first token
    whole = int(mask[0].sum())
    same = ids[[0, 0], :whole]
    assert shared_prefix_hidden(model, same, mask[[0, 0], :whole]) is None  # rows = the prefix
