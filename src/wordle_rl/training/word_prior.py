"""A model's own preference among the answer words: the ranking the ``ranked`` teacher plays by.

Each answer word is scored by the log-probability that the model writes it as its first guess,
under its own chat template and the run's prompt style (the whole answer, ``<guess>word</guess>``,
summed over its tokens). The SFT games of the ``ranked`` solver then play, at every state, the
fitting word this model likes best, so that imitation teaches it which words fit and not a solver's
arbitrary choice among them.

    wordle-rl data rank --model runs/smollm2/model --out data/ranking.txt
"""

from __future__ import annotations

from pathlib import Path

from wordle_rl.engine.storage import write_atomic
from wordle_rl.engine.words import WordList
from wordle_rl.environment.prompts import PromptStyle, format_answer, render_conversation
from wordle_rl.models.embedded import eval_mode
from wordle_rl.training.shared_prompt import completion_logits, token_logps_and_entropies

__all__ = ["word_logprobs", "rank_words", "write_ranking", "write_model_ranking"]


def word_logprobs(model, tokenizer, style: PromptStyle, words: list[str], batch_size: int = 64):
    """The log-probability of each of ``words`` as the model's first answer, in ``words``' order."""
    import torch

    messages = render_conversation(style, [])
    prompt = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    head = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    scores: list[float] = []
    device = next(model.parameters()).device
    for start in range(0, len(words), batch_size):
        chunk = [
            tokenizer(format_answer(style, w), add_special_tokens=False)["input_ids"]
            for w in words[start : start + batch_size]
        ]
        width = max(len(c) for c in chunk)
        pad = tokenizer.pad_token_id
        ids = torch.tensor([head + c + [pad] * (width - len(c)) for c in chunk], device=device)
        mask = torch.tensor([[1] * (len(head) + len(c)) + [0] * (width - len(c)) for c in chunk])
        mask = mask.to(device)
        with torch.no_grad(), eval_mode(model):
            logits = completion_logits(model, ids, mask, width)
            if logits is None:  # a single row: no prompt to share
                logits = model(input_ids=ids, attention_mask=mask).logits[:, len(head) - 1 : -1]
        logps, _ = token_logps_and_entropies(logits, ids[:, len(head) :], 1.0, False)
        scores += (logps * mask[:, len(head) :]).sum(-1).tolist()
    return scores


def rank_words(model, tokenizer, style: PromptStyle, words: WordList) -> list[str]:
    """The answer words, the model's favourite first guess first (ties in list order)."""
    scores = word_logprobs(model, tokenizer, style, list(words.answers))
    order = sorted(range(len(scores)), key=lambda i: (-scores[i], i))
    return [words.answers[i] for i in order]


def write_ranking(path: str | Path, ranking: list[str]) -> Path:
    """One word a line, best first."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, "\n".join(ranking) + "\n")
    return path


def write_model_ranking(
    model_path: str | Path, style: PromptStyle, out: str | Path, threads: int | None = None
) -> Path:
    """Rank the answer words by the model at ``model_path`` and write them to ``out``."""
    from wordle_rl.engine.words import load_word_lists
    from wordle_rl.models.embedded import load_model

    model, tok = load_model(str(model_path), threads=threads)
    return write_ranking(out, rank_words(model, tok, style, load_word_lists()))
