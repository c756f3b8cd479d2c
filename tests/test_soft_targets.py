"""Soft letter targets for SFT: distributions re-derived by brute force, token positions, real
training steps."""

import json
import random
from collections import Counter

import pytest

from wordle_rl.data.files import DataError, save_dataset, write_jsonl
from wordle_rl.data.sft_games import SftConfig, generate_sft
from wordle_rl.data.splits import make_splits
from wordle_rl.engine.game import pattern_to_str, score
from wordle_rl.models.embedded import load_model
from wordle_rl.training.sft import WordleSFTConfig, WordleSFTTrainer, run_sft
from wordle_rl.training.soft_targets import LETTERS, SoftTargets, load_sft_dataset


@pytest.fixture(scope="module")
def soft_data(tmp_path_factory, words):
    splits = make_splits(words, seed=0)
    rows = generate_sft(
        splits, SftConfig(games=96, seed=1, style="xml", think=False, recall_share=0.0), words
    )
    out = tmp_path_factory.mktemp("data") / "sft"
    save_dataset(rows, out, "sft")
    return out, rows


def brute_force(words, history, guess):
    fits = [a for a in words.answers if all(score(g, a) == p for g, p in history)]
    out = []
    for j in range(len(guess)):
        same = [w for w in fits if w[:j] == guess[:j]]
        if not same:
            break
        counts = Counter(w[j] for w in same)
        out.append((j, [counts[c] / len(same) for c in LETTERS]))
    return out


def test_letter_distributions_match_brute_force(words):
    st = SoftTargets(words)
    rng = random.Random(0)
    for _ in range(40):
        answer = rng.choice(words.answers)
        history = [(g, score(g, answer)) for g in rng.sample(words.allowed, rng.randrange(4))]
        guess = rng.choice([answer, rng.choice(words.allowed)])
        got = st.letter_distributions([(g, pattern_to_str(p)) for g, p in history], guess)
        want = brute_force(words, history, guess)
        assert [j for j, _ in got] == [j for j, _ in want]
        for (_, p), (_, q) in zip(got, want):
            assert p.tolist() == pytest.approx(q)
        if guess == answer:  # the game's own target always fits: every letter of it has mass
            assert len(got) == 5 and all(p[LETTERS.index(answer[j])] > 0 for j, p in got)


def test_soft_targets_sit_on_the_imitated_guess_letters(micro, soft_data, tmp_path):
    data, rows = soft_data
    model, tok = load_model(str(micro))
    cfg = WordleSFTConfig(
        model=str(micro),
        data=str(data),
        output_dir=str(tmp_path),
        max_steps=1,
        per_device_train_batch_size=96,
        soft_target_weight=0.5,
        threads=1,
    )
    trainer = WordleSFTTrainer(
        model=model, args=cfg, train_dataset=load_sft_dataset(data, soft=True), processing_class=tok
    )
    batch = next(iter(trainer.get_train_dataloader()))
    ids, labels = batch["input_ids"], batch["labels"]
    index, probs, cols = batch["soft_index"], batch["soft_probs"], batch["soft_ids"]
    letter_ids = trainer.data_collator.tables[0]
    # the character tokenizer writes a letter with the same id wherever it stands
    assert all(row == letter_ids for row in trainer.data_collator.tables)
    assert len(index) > 5 * len(ids)  # at least one full guess a game
    for (b, t), p, c in zip(index.tolist(), probs, cols.tolist()):
        assert labels[b, t + 1] == ids[b, t + 1] and int(ids[b, t + 1]) in letter_ids
        assert c == letter_ids and float(p.sum()) == pytest.approx(1.0)
    # every imitated letter gets a soft target unless no answer word shares the guess's prefix
    imitated_letters = sum(int(lab in letter_ids) for lab in labels.flatten().tolist())
    assert len(index) <= imitated_letters
    # the hard part of the loss is exactly TRL's loss; the soft part adds w * cross-entropy
    model.train()
    total = trainer.compute_loss(model, dict(batch)).item()
    hard, soft = (
        trainer._metrics["train"]["hard_loss"][-1],
        trainer._metrics["train"]["soft_loss"][-1],
    )
    plain = {k: v for k, v in batch.items() if not k.startswith("soft_")}
    trl = super(WordleSFTTrainer, trainer).compute_loss(model, plain).item()
    assert hard == pytest.approx(trl, rel=1e-5)
    assert total == pytest.approx(hard + 0.5 * soft, rel=1e-5) and soft > 0


def test_sft_with_soft_targets_lowers_both_losses(micro, soft_data, tmp_path):
    data, _ = soft_data
    out = tmp_path / "run"
    run_sft(
        WordleSFTConfig(
            model=str(micro),
            data=str(data),
            output_dir=str(out),
            max_steps=10,
            logging_steps=1,
            per_device_train_batch_size=16,
            learning_rate=1e-2,
            soft_target_weight=1.0,
            threads=1,
            disable_tqdm=True,
        )
    )
    log = [e for e in json.loads((out / "wordle_rl_sft_log.json").read_text()) if "loss" in e]
    assert len(log) == 10
    assert log[-1]["hard_loss"] < log[0]["hard_loss"] and log[-1]["soft_loss"] < log[0]["soft_loss"]
    assert json.loads((out / "wordle_rl_sft_config.json").read_text())["soft_target_weight"] == 1.0


def test_soft_targets_need_games_with_a_history(tmp_path):
    write_jsonl(
        [{"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "x"}]}],
        tmp_path / "plain.jsonl",
    )
    with pytest.raises(DataError, match="history"):
        load_sft_dataset(tmp_path / "plain.jsonl", soft=True)
    with pytest.raises(ValueError, match="soft_target_weight"):
        WordleSFTConfig(output_dir=str(tmp_path), soft_target_weight=-1)


def test_a_tokenizer_that_merges_letters_is_refused(words):
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    from wordle_rl.environment.prompts import PromptStyle
    from wordle_rl.training.soft_targets import SoftTargetCollator

    bpe = Tokenizer(models.BPE(unk_token="<unk>"))
    bpe.pre_tokenizer = pre_tokenizers.Whitespace()
    bpe.train_from_iterator(
        list(words.answers) * 3, trainers.BpeTrainer(vocab_size=400, special_tokens=["<unk>"])
    )
    tok = PreTrainedTokenizerFast(tokenizer_object=bpe, unk_token="<unk>")
    # merged: not one token a letter
    assert len(tok("crane", add_special_tokens=False)["input_ids"]) < 5
    with pytest.raises(ValueError, match="one letter per token"):
        SoftTargetCollator(None, tok, PromptStyle("xml", think=False), SoftTargets(words))




