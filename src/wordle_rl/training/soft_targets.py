"""SFT batches with soft letter targets: loading conversations, the assistant-only labels, the soft
targets.

With ``soft_target_weight`` > 0 every guess letter gets a soft target besides the solver's one pick:
the distribution of that letter over all answer words of the public list that fit the feedback so
far and share the guess's prefix (:class:`SoftTargets`). It teaches the whole set of words that fit,
including val/test words, which are never a game's target. It needs a guess written one letter per
token (:func:`guess_letter_ids`): the embedded tokenizer writes one in every style, a BPE tokenizer
such as SmolLM2's in the ``spelled`` style. :class:`SftBatches` draws seeded batches of the same
tensors for a loss mixed into another trainer (GRPO's ``sft_coef``).
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import numpy as np
import torch

from wordle_rl.engine.game import candidate_indices, str_to_pattern
from wordle_rl.engine.matrix import pattern_matrix
from wordle_rl.engine.words import WordList, encode_words, load_word_lists
from wordle_rl.environment.prompts import DEFAULT_STYLE, PromptStyle, detect_style
from wordle_rl.training.letter_ids import LETTERS, find_last, guess_letter_ids
from wordle_rl.training.shared_prompt import shared_prefix_hidden

__all__ = [
    "load_sft_dataset",
    "trained_turns",
    "SoftTargets",
    "data_style",
    "SoftTargetCollator",
    "soft_target_losses",
    "SftBatches",
]


def load_sft_dataset(path: str | Path, soft: bool = False, splits: str | Path | None = None):
    """``datasets.Dataset`` with a ``messages`` column from a data folder (``hf/`` or ``sft.jsonl``)
    or a JSONL.

    ``soft=True`` also keeps ``history`` and adds
    ``soft_turns`` (:func:`trained_turns`) for the soft targets. Given a ``splits`` file, the games'
    target answers are first checked against it (:func:`wordle_rl.data.splits.check_leakage`: a val
    or test target is an error).
    """
    from datasets import Dataset, load_from_disk

    from wordle_rl.data.files import DataError, read_jsonl
    from wordle_rl.data.splits import Splits, check_leakage, check_made_with

    p = Path(path)
    if splits is not None:
        check_made_with(p, Splits.load(splits), splits)
    keep = ("messages", "history", "refused_at")
    read = (*keep, "answer") if splits is not None else keep
    jsonl = p / "sft.jsonl" if p.is_dir() else p
    if p.is_dir() and (p / "hf").is_dir():
        ds = load_from_disk(str(p / "hf"))
    elif jsonl.is_file():
        ds = Dataset.from_list([{k: r[k] for k in read if k in r} for r in read_jsonl(jsonl)])
    else:
        raise DataError(
            f"{p}: no SFT data here (expected a folder from `wordle-rl data sft` or a JSONL file)"
        )
    if "messages" not in ds.column_names:
        raise DataError(f"{p}: rows have no 'messages' column")
    if splits is not None and "answer" in ds.column_names:  # word-pattern exercises have no answer
        check_leakage(
            [{"answer": a} for a in ds["answer"] if a is not None],
            Splits.load(splits),
            str(p),
            allow_outside=True,
        )
    if soft:
        if "history" not in ds.column_names:
            raise DataError(
                f"{p}: soft targets need solver games with a 'history' column "
                "(from `wordle-rl data sft`); these rows have none"
            )
        ds = ds.select_columns([c for c in keep if c in ds.column_names])
        drop = ["refused_at"] if "refused_at" in ds.column_names else []
        ds = ds.map(lambda row: {"soft_turns": trained_turns(row)}, remove_columns=drop)
    else:
        ds = ds.select_columns(["messages"])
    # a game won by its (exploratory, untrained) first move teaches nothing: drop it
    ds = ds.filter(
        lambda row: any(
            m["role"] == "assistant" and m.get("train") is not False for m in row["messages"]
        )
    )
    if len(ds) == 0:
        raise DataError(f"{p}: no conversation has an assistant turn to learn from")
    return ds


def trained_turns(row: dict) -> list[int]:
    """For each imitated assistant message of a solver game, the index of its guess in
    ``row["history"]``.

    The history holds the moves played; a refused move (``refused_at``, an index among the assistant
    messages) is shown but not played, and moves marked ``"train": false`` are played but not
    imitated.

    >>> msgs = [{"role": "system"}, {"role": "user"}, {"role": "assistant", "train": False},
    ...         {"role": "user"}, {"role": "assistant"}, {"role": "user"},
    ...         {"role": "assistant", "train": False}, {"role": "user"}, {"role": "assistant"}]
    >>> trained_turns({"messages": msgs, "refused_at": 2})
    [1, 2]
    """
    refused = row.get("refused_at")
    out, played = [], 0
    assistant = [m for m in row["messages"] if m["role"] == "assistant"]
    for a, m in enumerate(assistant):
        if a == refused:
            continue
        if m.get("train") is not False:
            out.append(played)
        played += 1
    return out


class SoftTargets:
    """Letter distributions over the answer words that fit a game state (the public answer list).

    >>> st = SoftTargets()
    >>> dists = st.letter_distributions([("crane", "GGGGX")], "cranf")  # only CRANK fits
    >>> [(j, LETTERS[int(d.argmax())], float(d.max())) for j, d in dists]
    [(0, 'c', 1.0), (1, 'r', 1.0), (2, 'a', 1.0), (3, 'n', 1.0), (4, 'k', 1.0)]
    >>> # no answer starts with ZZ: nothing to say about letters 3-5
    >>> len(st.letter_distributions([], "zzzzz"))
    2
    """

    def __init__(self, words: WordList | None = None):
        self.words = words or load_word_lists()
        self.matrix = pattern_matrix(self.words)
        self.codes = encode_words(self.words.answers)
        self._cached = lru_cache(maxsize=4096)(self._distributions)  # the early, shared states

    @staticmethod
    def _key(history) -> tuple:
        """A hashable cache key of ``[(guess, pattern as int or "GYX.." string)]``."""
        return tuple((g, p if isinstance(p, str) else int(p)) for g, p in history)

    def _fits(self, history: tuple) -> np.ndarray:
        """Indices of the answer words that fit a keyed history."""
        hist = [(g, str_to_pattern(p) if isinstance(p, str) else p) for g, p in history]
        return candidate_indices(self.words, hist, self.matrix)

    def letter_distributions(self, history, guess: str) -> list[tuple[int, np.ndarray]]:
        """``[(j, p)]``: for letter ``j`` of ``guess``, ``p[l]`` is the share of fitting answers
        with ``guess[:j]`` as prefix whose letter ``j`` is ``l``; stops at the first prefix no
        fitting answer has."""
        return self._cached(self._key(history), guess)

    def _distributions(self, history: tuple, guess: str) -> list[tuple[int, np.ndarray]]:
        codes = self.codes[self._fits(history)]
        target = encode_words([guess])[0]
        out = []
        for j in range(len(target)):
            if len(codes) == 0:
                break
            out.append((j, np.bincount(codes[:, j], minlength=26).astype(np.float32) / len(codes)))
            codes = codes[codes[:, j] == target[j]]
        return out


def data_style(dataset) -> PromptStyle | None:
    """The prompt style of SFT games (the first 200 rows of a ``messages`` column); ``None`` where
    none shows one (first-turn prompts only)."""
    found = detect_style(dataset.select(range(min(200, len(dataset))))["messages"])
    return PromptStyle(*found) if found else None


class SoftTargetCollator:
    """Wraps TRL's collator: adds ``soft_index`` (row, position of the logit that predicts a guess
    letter), ``soft_ids`` (the ids of the letters a-z at that letter's position) and
    ``soft_probs`` (its target over those ids) for the imitated guesses of each game.

    The tokenizer must write a guess of ``style`` one letter per token (:func:`guess_letter_ids`);
    each letter's target is its distribution over the fitting answer words with the guess's
    prefix.
    """

    def __init__(
        self, base, tokenizer, style: PromptStyle | None, targets: SoftTargets | None = None
    ):
        self.base = base
        self.targets = targets or SoftTargets()
        style = style or PromptStyle(DEFAULT_STYLE)
        self.tables = guess_letter_ids(
            tokenizer, style, "soft targets", "use that style, or set soft_target_weight=0"
        )[1]

    def _targets(
        self, history, k: int, guess: str, span: list[int]
    ) -> list[tuple[int, int, np.ndarray]]:
        """``[(offset in span of the logit, letter position, target)]`` for the guess of turn
        ``k``."""
        at = find_last(span, [self.tables[j][ord(c) - ord("a")] for j, c in enumerate(guess)])
        if at is None:
            raise ValueError(f"soft targets: guess {guess!r} is not spelled in its assistant turn")
        return [
            (at + j - 1, j, p) for j, p in self.targets.letter_distributions(history[:k], guess)
        ]

    def __call__(self, examples: list[dict]) -> dict:
        extras = [(ex.pop("history", None), ex.pop("soft_turns", None)) for ex in examples]
        index, ids, probs = [], [], []
        for b, (ex, (history, turns)) in enumerate(zip(examples, extras)):
            if not history or not turns:
                continue
            spans = _label_spans(ex["labels"])
            if len(spans) != len(turns):
                raise ValueError(
                    f"soft targets: {len(spans)} imitated turns in the tokens but {len(turns)} in "
                    "the game's history (was the conversation truncated? raise max_length)"
                )
            for (start, end), k in zip(spans, turns):
                for offset, j, p in self._targets(
                    history, k, history[k][0], ex["input_ids"][start:end]
                ):
                    # the logit one position before a token predicts it
                    index.append((b, start + offset))
                    ids.append(self.tables[j])
                    probs.append(p)
        batch = self.base(examples)
        batch["soft_index"] = torch.tensor(index, dtype=torch.long).reshape(-1, 2)
        batch["soft_ids"] = torch.tensor(ids, dtype=torch.long).reshape(-1, len(LETTERS))
        batch["soft_probs"] = (
            torch.from_numpy(np.stack(probs)) if probs else torch.zeros(0, len(LETTERS))
        )
        return batch


def _label_spans(labels: list[int]) -> list[tuple[int, int]]:
    """``[(start, end)]`` of the runs of trained tokens (labels other than -100)."""
    spans, start = [], None
    for i, lab in enumerate(labels):
        if lab != -100 and start is None:
            start = i
        elif lab == -100 and start is not None:
            spans.append((start, i))
            start = None
    if start is not None:
        spans.append((start, len(labels)))
    return spans


def scored_logits(model, inputs: dict, positions: torch.Tensor) -> torch.Tensor:
    """Logits at the ``positions`` (a boolean ``(batch, length - 1)`` mask over the positions whose
    logit predicts the next token), shape ``(n, vocab)``: the output head runs on those hidden
    states only, not on the whole batch (for a 49k-token vocabulary the head is a fifth of the
    forward pass and most of its memory).

    The forward pass still goes through ``model`` itself (a DDP or PEFT wrapper included); its
    last hidden state is the one the head reads. The prefix all rows share (the system prompt and
    first turn of a batch of games) runs once (:func:`shared_prefix_hidden`)."""
    ids, mask = inputs["input_ids"], inputs.get("attention_mask")
    hidden = None if mask is None else shared_prefix_hidden(model, ids, mask)
    if hidden is None:
        out = model(
            input_ids=ids,
            attention_mask=mask,
            use_cache=False,
            output_hidden_states=True,
            logits_to_keep=1,
        )
        hidden = out.hidden_states[-1]
    inner = getattr(model, "module", model)
    logits = inner.get_output_embeddings()(hidden[:, :-1][positions])
    cap = getattr(inner.config, "final_logit_softcapping", None)
    return torch.tanh(logits / cap) * cap if cap else logits


def soft_target_losses(model, inputs: dict, num_items=None):
    """``(hard, soft, token accuracy)`` of a batch from :class:`SoftTargetCollator` or TRL's
    collator: the mean cross-entropy of the hard labels (over ``num_items`` tokens when given, else
    the batch's) and the mean cross-entropy of the soft targets (``inputs`` loses its
    ``soft_index``/``soft_ids``/``soft_probs``; without them the soft part is 0). Logits are
    computed only where a label or a soft target falls (:func:`scored_logits`)."""
    soft_index, soft_ids = inputs.pop("soft_index", None), inputs.pop("soft_ids", None)
    soft_probs = inputs.pop("soft_probs", None)
    labels = inputs["labels"][:, 1:]
    mask = labels != -100
    has_soft = soft_index is not None and len(soft_index) > 0
    positions = mask.clone()
    if has_soft:
        positions[soft_index[:, 0], soft_index[:, 1]] = True
    logp = scored_logits(model, inputs, positions).float().log_softmax(-1)
    # row of each scored position in ``logp``
    row = torch.full(positions.shape, -1, dtype=torch.long, device=positions.device)
    row[positions] = torch.arange(int(positions.sum()), device=positions.device)
    hard_rows, hard_labels = row[mask], labels[mask]
    token_logp = logp[hard_rows].gather(-1, hard_labels.unsqueeze(-1)).squeeze(-1)
    n = mask.sum() if num_items is None else num_items
    hard = -token_logp.sum() / torch.as_tensor(n).clamp(min=1)
    if has_soft:
        targets = logp[row[soft_index[:, 0], soft_index[:, 1]]].gather(-1, soft_ids)
        soft = -(soft_probs.to(targets) * targets).sum(-1).mean()
    else:
        soft = hard.new_zeros(())
    with torch.no_grad():
        hits = (logp[hard_rows].argmax(-1) == hard_labels).sum()
        accuracy = (hits / mask.sum().clamp(min=1)).item()
    return hard, soft, accuracy


class SftBatches:
    """Random batches of SFT games for a loss mixed into another trainer (GRPO's ``sft_coef``,
    PPO-ptx style).

    Each conversation is tokenized with the chat template's assistant mask (the loss is on the
    imitated assistant turns, as in ``wordle-rl sft``) and collated with the soft targets
    (``soft=False``: hard labels only, for a tokenizer without them). Batch ``k`` is drawn by
    ``numpy.random.default_rng([seed, k])`` (``[seed, k, rank]`` on the other ranks of a
    multi-process run), so a resumed run draws the same batches as an unbroken one.
    """

    def __init__(
        self,
        path: str | Path,
        tokenizer,
        batch_size: int = 32,
        seed: int = 0,
        splits=None,
        soft: bool = True,
    ):
        from trl.trainer.sft_trainer import DataCollatorForLanguageModeling

        self.dataset = load_sft_dataset(path, soft=soft, splits=splits)
        if batch_size < 1 or batch_size > len(self.dataset):
            raise ValueError(
                f"SFT batch size {batch_size} must be between 1 and the {len(self.dataset)} games "
                f"of {path}"
            )
        self.tokenizer, self.batch_size, self.seed = tokenizer, batch_size, seed
        # as `wordle-rl sft` pads
        pad = DataCollatorForLanguageModeling(pad_token_id=tokenizer.pad_token_id)
        self.collate = SoftTargetCollator(pad, tokenizer, data_style(self.dataset)) if soft else pad

    def indices(self, k: int, rank: int = 0) -> list[int]:
        """The games of batch ``k`` on process ``rank`` (each rank of a multi-process run draws its
        own)."""
        key = [self.seed, k] if rank == 0 else [self.seed, k, rank]
        return sorted(
            int(i)
            for i in np.random.default_rng(key).choice(
                len(self.dataset), self.batch_size, replace=False
            )
        )

    def batch(self, k: int, rank: int = 0) -> dict:
        """Batch number ``k`` of process ``rank`` (tensors: input_ids, attention_mask, labels,
        soft_index, soft_ids, soft_probs)."""
        return self.collate_games(self.indices(k, rank))

    def collate_games(self, indices: list[int]) -> dict:
        """The batch of the SFT games at ``indices``."""
        return self.collate([self._encode(self.dataset[i]) for i in indices])

    def _encode(self, row: dict) -> dict:
        enc = self.tokenizer.apply_chat_template(
            row["messages"], tokenize=True, return_dict=True, return_assistant_tokens_mask=True
        )
        ids, marks = list(enc["input_ids"]), enc["assistant_masks"]
        if not any(marks):
            raise ValueError(
                "the SFT loss needs a chat template that marks assistant turns with {% generation "
                "%} (as the embedded default's does); this tokenizer's marks none, so there is "
                "nothing to learn from: set sft_coef=0, or give the tokenizer such a template"
            )
        labels = [t if m else -100 for t, m in zip(ids, marks)]
        return {
            "input_ids": ids,
            "labels": labels,
            "history": row.get("history"),
            "soft_turns": row.get("soft_turns"),
        }
