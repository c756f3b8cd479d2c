"""One forward per distinct GRPO prompt: the same log-probabilities and gradients as one per row."""

import pytest
import torch
from trl.trainer.utils import pad

from wordle_rl.models.embedded import load_model
from wordle_rl.training.shared_prompt import completion_logits, token_logps_and_entropies


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
