"""The fitting-set objective of the moves rollout (``credit="set"`` or ``"set-log"``): at each
group's state, raise the chance that the policy writes some answer word that could still be the
answer.

    wordle-rl grpo --model runs/sft --data data/rl --rollout moves --credit set \\
        --moves-states missed --num-generations 4

The move reward of the moves rollout is 1 for a fitting answer word and 0 otherwise. Where the
policy's greedy move misses, its samples rarely fit either, so a sampled group has no spread and
teaches nothing. This objective needs no sampling. At a state, the policy's expected reward is its
chance of writing a fitting word, the sum of its chances of writing each one, and the gradient of
that sum (``set``) or of its log (``set-log``) is exact:

    grad sum_w p(w) = sum_w p(w) grad log p(w)
    grad log sum_w p(w) = sum_w q(w) grad log p(w),     q(w) = p(w) / sum_v p(v)

Each group holds the ``num_generations`` fitting words the policy likes best at its state (of at
most ``SCORED_WORDS`` scored, drawn at random where more fit), each written as the model answers
(the style's guess, then the end-of-turn token) and weighted by ``p`` (``q`` among them for
``set-log``). The loss is minus the weighted log-probability of those words, averaged over the
groups. The weights travel with each row, so the trainer's shuffling of rows does not matter.
``set`` leaves alone the states where the policy has no fitting word in mind; ``set-log`` pushes
hardest there. No word is preferred for being the game's answer, and a val or test answer is never
in a set: the RL term never rewards writing one.
"""

from __future__ import annotations

import numpy as np

from wordle_rl.environment.prompts import format_answer
from wordle_rl.environment.rewards import as_history
from wordle_rl.models.embedded import eval_mode
from wordle_rl.training.shared_prompt import completion_logits, token_logps_and_entropies

__all__ = ["SCORED_WORDS", "fitting_words", "word_completions", "score_words", "fitting_moves"]

SCORED_WORDS = 64  # at most this many fitting words are scored at a state


def fitting_words(rollout, history: list, rng: np.random.Generator) -> list[str]:
    """The public answer words that fit ``history`` and are no val or test answer, at most
    :data:`SCORED_WORDS` of them (drawn with ``rng`` where more fit), in answer-list order."""
    answers = rollout.ctx.words.answers
    held = rollout._held_out()
    idx = [int(i) for i in rollout.ctx.candidates(as_history(history))]
    idx = [i for i in idx if answers[i] not in held]
    if len(idx) > SCORED_WORDS:
        idx = sorted(rng.choice(idx, size=SCORED_WORDS, replace=False).tolist())
    return [answers[i] for i in idx]


def word_completions(tok, style, words: list[str]) -> list[list[int]]:
    """Each word as the model writes its move: the style's answer, then the end-of-turn token."""
    return [
        tok(format_answer(style, w), add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
        for w in words
    ]


def score_words(model, pad: int, prefix: list[int], completions: list[list[int]]) -> np.ndarray:
    """The log-probability of each completion after the token ids ``prefix`` (no gradient)."""
    import torch

    device = model.device
    width = max(len(c) for c in completions)
    ids = torch.tensor([prefix + c + [pad] * (width - len(c)) for c in completions], device=device)
    mask = torch.tensor(
        [[1] * (len(prefix) + len(c)) + [0] * (width - len(c)) for c in completions], device=device
    )
    with torch.no_grad(), eval_mode(model):
        logits = completion_logits(model, ids, mask, width)
        if logits is None:  # one word: nothing to share
            logits = model(input_ids=ids, attention_mask=mask).logits[:, len(prefix) - 1 : -1]
        logps, _ = token_logps_and_entropies(logits, ids[:, len(prefix) :], 1.0, False)
    return (logps * mask[:, len(prefix) :]).sum(-1).float().cpu().numpy()


def fitting_moves(rollout, model, states: list[tuple], g: int, log: bool = False):
    """For each state ``(token ids, history)``: its ``g`` likeliest fitting words as completions
    (repeated, at weight 0, where fewer fit), their weights (each word's chance ``p``; with
    ``log``, ``q``, summing to 1 in a group; all 0 where no word may be written) and the
    statistics of the sets. Returns ``(completions, weights, stats)``."""
    completions: list[list[int]] = []
    weights: list[float] = []
    sizes, chance, top_mass = [], [], []
    for ids, history in states:
        words = fitting_words(rollout, history, rollout.rng)
        sizes.append(len(words))
        if not words:  # only held-out words fit (or none): the group teaches nothing
            completions += [[rollout.tok.eos_token_id]] * g
            weights += [0.0] * g
            continue
        comps = word_completions(rollout.tok, rollout.style, words)
        logp = score_words(model, rollout.tok.pad_token_id, ids, comps)
        top = np.argsort(-logp, kind="stable")[:g]
        total = np.logaddexp.reduce(logp)
        chance.append(float(np.exp(total)))
        q = np.exp(logp[top] - (np.logaddexp.reduce(logp[top]) if log else 0.0))
        top_mass.append(float(np.exp(np.logaddexp.reduce(logp[top]) - total)))
        picks = [int(top[k % len(top)]) for k in range(g)]
        completions += [comps[i] for i in picks]
        weights += [float(q[k]) if k < len(top) else 0.0 for k in range(g)]
    stats = {
        "wordle/set_size": float(np.mean(sizes)),
        "wordle/set_empty": float(np.mean([n == 0 for n in sizes])),
        "wordle/set_chance": float(np.mean(chance)) if chance else 0.0,
        "wordle/set_top_mass": float(np.mean(top_mass)) if top_mass else 0.0,
    }
    return completions, weights, stats
