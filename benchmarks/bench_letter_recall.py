"""Seconds per LoRA step, and how well a model writes a word from some of its letters once taught
the task on other words: the skill a held-out Wordle game needs at its last guesses.

Run on an idle machine, with model folders such as the converted packaged models:

    wordle-rl init-model models/smollm2 --from smollm2-135m-instruct
    wordle-rl init-model models/gemma3 --from gemma3-270m
    python benchmarks/bench_letter_recall.py --model models/smollm2 --eval-at 150,290 \\
        --splits runs/smollm2-cpu/data/splits.json --out smollm2.json
    python benchmarks/bench_letter_recall.py --model models/gemma3 --eval-at 150 \\
        --splits runs/smollm2-cpu/data/splits.json --out gemma3.json --against smollm2.json

Each line of the task is a five-letter word with ``--hidden`` letters hidden, then the word
(``f r _ a _ -> friar``). LoRA (rank 16, every layer, lr 1e-3, ``--batch`` lines a step) trains it
on allowed words outside the answer list only, so no val or test answer is ever written. At each
step of ``--eval-at`` the model completes one seeded pattern of every val answer, greedily:
``fits`` counts completions that are allowed words agreeing with every shown letter, ``exact`` the
answer itself. ``--games`` (an audited `wordle-rl eval` run's games.jsonl) adds the same counts
over the answers that run's training data never writes. ``--against`` (another run's ``--out``)
pairs the two models on the same patterns, with the exact McNemar p-value.

Prints one JSON line per evaluated step; ``--out`` keeps every completion.
"""

from __future__ import annotations

import argparse
import json
import random
import time
from pathlib import Path

import torch

from wordle_rl.data.splits import Splits, make_splits
from wordle_rl.engine.words import encode_words, load_word_lists, pattern_mask
from wordle_rl.evaluation.recall_probe import greedy_discordance
from wordle_rl.evaluation.stats import read_games
from wordle_rl.models.adapters import LoraFields, add_lora
from wordle_rl.models.embedded import eval_mode, load_model

HEAD = "Fill in the hidden letters (_) to make a five-letter English word.\n"


def pattern(word: str, hidden: int, rng: random.Random) -> str:
    """``word`` spaced out, with ``hidden`` letters (drawn by ``rng``) shown as ``_``."""
    hide = set(rng.sample(range(len(word)), hidden))
    return " ".join("_" if i in hide else c for i, c in enumerate(word))


def train_batch(tok, lines: list[tuple[str, str]]) -> dict:
    """Left-padded ids and labels for ``(pattern, word)`` lines; the loss falls on the word and
    its newline."""
    ids, labels = [], []
    for pat, word in lines:
        prompt = tok(HEAD + pat + " ->").input_ids
        target = tok(" " + word + "\n", add_special_tokens=False).input_ids
        ids.append(prompt + target)
        labels.append([-100] * len(prompt) + target)
    width = max(map(len, ids))
    pads = [width - len(s) for s in ids]
    return {
        "input_ids": torch.tensor([[tok.pad_token_id] * p + s for p, s in zip(pads, ids)]),
        "attention_mask": torch.tensor([[0] * p + [1] * len(s) for p, s in zip(pads, ids)]),
        "labels": torch.tensor([[-100] * p + s for p, s in zip(pads, labels)]),
    }


def complete(model, tok, patterns: list[str], batch: int) -> list[str]:
    """The first word of each pattern's greedy completion (at most 6 tokens)."""
    out = []
    with eval_mode(model), torch.no_grad():
        for i in range(0, len(patterns), batch):
            enc = tok(
                [HEAD + p + " ->" for p in patterns[i : i + batch]],
                return_tensors="pt",
                padding=True,
            )
            gen = model.generate(
                **enc, max_new_tokens=6, do_sample=False, pad_token_id=tok.pad_token_id
            )
            for text in tok.batch_decode(
                gen[:, enc.input_ids.shape[1] :], skip_special_tokens=True
            ):
                out.append(text.split()[0].lower() if text.split() else "")
    return out


def score(words, answers: list[str], patterns: list[str], got: list[str]) -> list[dict]:
    rows = []
    for answer, pat, word in zip(answers, patterns, got):
        fits = words.is_allowed(word) and bool(
            pattern_mask(encode_words([word]), pat.replace(" ", ""))[0]
        )
        rows.append(
            {
                "answer": answer,
                "pattern": pat,
                "got": word,
                "fits": fits,
                "exact": word == answer,
                "five": len(word) == 5,
            }
        )
    return rows


def counts(rows: list[dict]) -> dict:
    return {"answers": len(rows), **{k: sum(r[k] for r in rows) for k in ("fits", "exact", "five")}}


def paired(mine: list[dict], theirs: list[dict]) -> dict:
    """Per count, the answers only this run gets and only the other does, and McNemar's exact p."""
    out = {}
    for key in ("fits", "exact"):
        a, b, p = greedy_discordance([r[key] for r in mine], [r[key] for r in theirs])
        out[key] = {"this_only": a, "other_only": b, "p": p}
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True, help="A model folder (wordle-rl init-model).")
    ap.add_argument("--eval-at", default="150", help="Steps (comma-separated) to evaluate at.")
    ap.add_argument("--batch", type=int, default=32, help="Lines per training step.")
    ap.add_argument("--hidden", type=int, default=2, help="Letters hidden in each pattern.")
    ap.add_argument("--splits", help="A splits file (default: the seed-0 splits).")
    ap.add_argument(
        "--games", help="An audited eval's games.jsonl: counts for never-written answers."
    )
    ap.add_argument("--against", help="Another run's --out, to pair with at the last step.")
    ap.add_argument("--out", help="A JSON file for every completion at the last step.")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    torch.manual_seed(args.seed)
    words = load_word_lists()
    splits = Splits.load(args.splits, words) if args.splits else make_splits(words, seed=args.seed)
    outside = [w for w in words.allowed if not words.is_answer(w)]
    never = None
    if args.games:
        never = {g["answer"] for g in read_games(args.games) if not g["audit"]["answer_imitated"]}
    eval_rng = random.Random(args.seed)
    patterns = [pattern(w, args.hidden, eval_rng) for w in splits.val]
    model, tok = load_model(args.model, threads=args.threads)
    model = add_lora(model, LoraFields(lora=True))
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-3)
    rng = random.Random(args.seed + 1)
    steps = sorted(int(s) for s in args.eval_at.split(","))
    spent, rows = 0.0, []
    model.train()
    for step in range(1, steps[-1] + 1):
        lines = [(pattern(w, args.hidden, rng), w) for w in rng.choices(outside, k=args.batch)]
        start = time.perf_counter()
        loss = model(**train_batch(tok, lines)).loss
        loss.backward()
        opt.step()
        opt.zero_grad()
        spent += time.perf_counter() - start
        if step not in steps:
            continue
        rows = score(words, splits.val, patterns, complete(model, tok, patterns, args.batch))
        line = {
            "model": args.model,
            "step": step,
            "seconds_per_step": round(spent / step, 2),
            "loss": round(loss.item(), 3),
            "val": counts(rows),
        }
        if never is not None:
            line["val_never_written"] = counts([r for r in rows if r["answer"] in never])
        print(json.dumps(line), flush=True)
    if args.against:
        other = json.loads(Path(args.against).read_text())
        if [r["pattern"] for r in other] != patterns:
            raise SystemExit(
                f"{args.against} holds other patterns: pair runs of one --splits/--seed"
            )
        print(json.dumps({"against": args.against, **paired(rows, other)}))
    if args.out:
        Path(args.out).write_text(json.dumps(rows, indent=0))


if __name__ == "__main__":
    main()
