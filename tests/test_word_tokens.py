"""The embedded tokenizer with one token per answer word: round trip, word soft targets, training,
decoding."""

import json

import pytest
import torch

from wordle_rl.data import save_dataset
from wordle_rl.decoding import GuessConstraint, guess_prefixes
from wordle_rl.evaluate import EvalConfig, ModelPolicy, run_eval
from wordle_rl.game import score, str_to_pattern
from wordle_rl.models import build_tokenizer, init_model, load_model
from wordle_rl.prompts import PromptStyle
from wordle_rl.sft import WordleSFTConfig, WordleSFTTrainer, run_sft
from wordle_rl.sft_games import SftConfig, generate_sft
from wordle_rl.soft_targets import SoftTargets, load_sft_dataset
from wordle_rl.splits import make_splits

NT = PromptStyle("xml", think=False)


@pytest.fixture(scope="module")
def word_micro(tmp_path_factory):
    return init_model(
        tmp_path_factory.mktemp("models") / "micro-words", "micro", seed=0, word_tokens="answers"
    )


@pytest.fixture(scope="module")
def data(tmp_path_factory, words):
    splits = make_splits(words, seed=0)
    rows = generate_sft(splits, SftConfig(games=64, seed=2, think=False, recall_share=0.0), words)
    out = tmp_path_factory.mktemp("data") / "sft"
    save_dataset(rows, out, "sft")
    return out, splits


def test_answer_words_are_single_tokens_and_everything_else_is_spelled(word_micro, words):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(word_micro)
    assert len(tok) == len(build_tokenizer()) + len(words.answers)
    text = (
        "ABIDE -> X X G G G\nYou have 5 guesses left."
        "<guess>abide</guess><guess>feity</guess> 'crane' cranes"
    )
    ids = tok(text, add_special_tokens=False)["input_ids"]
    assert tok.decode(ids) == text and tok.unk_token_id not in ids
    pieces = [tok.decode([i]) for i in ids]
    assert pieces[:5] == list("ABIDE")  # feedback letters stay letters
    assert "abide" in pieces and "crane" in pieces  # a lone answer word is one token
    assert "feity" not in pieces and "f" in pieces  # a non-word is spelled
    assert pieces[-7:] == list(" cranes")  # a longer string of letters is never cut into a word
    assert all(len(tok(w, add_special_tokens=False)["input_ids"]) == 1 for w in words.answers)
    assert json.loads((word_micro / "wordle_rl.json").read_text())["word_tokens"] == "answers"
    # word embeddings start spelled: words sharing letters in place start alike
    emb = load_model(str(word_micro))[0].get_input_embeddings().weight
    crane, crank, pilot = (emb[tok.convert_tokens_to_ids(w)] for w in ("crane", "crank", "pilot"))
    cos = torch.nn.functional.cosine_similarity
    assert cos(crane, crank, dim=0) > 0.6 > 0.3 > abs(cos(crane, pilot, dim=0))
    with pytest.raises(ValueError, match="word_tokens"):
        build_tokenizer(word_tokens="all")


def test_word_soft_targets_are_the_fitting_answers(word_micro, data, words, tmp_path):
    path, _ = data
    model, tok = load_model(str(word_micro))
    cfg = WordleSFTConfig(
        model=str(word_micro),
        data=str(path),
        output_dir=str(tmp_path),
        max_steps=1,
        per_device_train_batch_size=64,
        soft_target_weight=0.5,
        threads=1,
    )
    ds = load_sft_dataset(path, soft=True)
    trainer = WordleSFTTrainer(model=model, args=cfg, train_dataset=ds, processing_class=tok)
    collator = trainer.data_collator
    assert collator.word_tokens and len(collator.target_ids) == len(words.answers)
    examples = [dict(trainer.train_dataset[i]) for i in range(len(trainer.train_dataset))]
    histories = [[(g, str_to_pattern(p)) for g, p in ex["history"]] for ex in examples]
    batch = collator(examples)
    ids, labels = batch["input_ids"], batch["labels"]
    answer_of = {i: w for w, i in zip(words.answers, collator.target_ids)}
    assert len(batch["soft_index"]) > len(examples)
    for (b, t), p in zip(batch["soft_index"].tolist(), batch["soft_probs"]):
        nxt = int(ids[b, t + 1])
        # the logit that predicts an imitated answer word
        assert labels[b, t + 1] == nxt and nxt in answer_of
        guess = answer_of[nxt]
        k = [g for g, _ in histories[b]].index(guess)
        fits = {a for a in words.answers if all(score(g, a) == pat for g, pat in histories[b][:k])}
        got = {words.answers[i] for i in torch.nonzero(p).flatten().tolist()}
        assert got == fits and guess in fits
        assert p.sum().item() == pytest.approx(1.0) and p.max().item() == pytest.approx(
            1 / len(fits)
        )
    assert SoftTargets(words).word_distribution([("crane", "GGGGX")]).nonzero()[0].tolist() == [
        words.answers.index("crank")
    ]


def test_sft_with_word_tokens_lowers_both_losses_and_decodes_consistently(
    word_micro, data, words, tmp_path
):
    path, splits = data
    out = tmp_path / "run"
    run_sft(
        WordleSFTConfig(
            model=str(word_micro),
            data=str(path),
            output_dir=str(out),
            max_steps=8,
            logging_steps=1,
            per_device_train_batch_size=16,
            learning_rate=1e-2,
            soft_target_weight=1.0,
            threads=1,
            disable_tqdm=True,
        )
    )
    log = [e for e in json.loads((out / "wordle_rl_sft_log.json").read_text()) if "loss" in e]
    assert log[-1]["hard_loss"] < log[0]["hard_loss"] and log[-1]["soft_loss"] < log[0]["soft_loss"]
    model, tok = load_model(str(out), threads=1)
    policy = ModelPolicy(
        model.eval(), tok, NT, words, decode="consistent", max_new_tokens=12, batch_size=8
    )
    res = run_eval(
        policy, splits.test[:8], EvalConfig(decode="consistent", train_sample=False), None, words
    )
    m = res["metrics"]
    assert m["games"] == 8 and m["invalid_word_rate"] == 0 and m["inconsistent_rate"] == 0


def test_guess_constraint_with_word_tokens_allows_whole_words():
    tok = build_tokenizer(word_tokens="answers")
    # aahed: allowed, not an answer
    prefix = guess_prefixes(["abide", "abbey", "crane", "aahed"], "</guess>")
    prompt = tok("<|im_start|>assistant\n", add_special_tokens=False)["input_ids"]
    ids = torch.tensor([prompt + tok("<guess>", add_special_tokens=False)["input_ids"]])
    scores = GuessConstraint(tok, NT, len(prompt), [prefix])(ids, torch.zeros(1, len(tok)))
    allowed = {tok.decode([i]) for i in torch.nonzero(scores[0] > -1e9).flatten().tolist()}
    assert allowed == {"a", "c", "abide", "abbey", "crane"}


def test_word_pattern_exercises_target_every_fitting_answer_word(word_micro, words, tmp_path):
    rows = generate_sft(
        make_splits(words, seed=0),
        SftConfig(games=4, seed=3, think=False, lexicon_share=4, recall_share=0.0),
        words,
    )
    exercises = [r["lexicon"] for r in rows if r.get("lexicon") is not None]
    assert len(exercises) == 16
    save_dataset(rows, tmp_path / "sft", "sft")
    model, tok = load_model(str(word_micro))
    cfg = WordleSFTConfig(
        model=str(word_micro),
        data=str(tmp_path / "sft"),
        output_dir=str(tmp_path / "run"),
        max_steps=1,
        per_device_train_batch_size=20,
        soft_target_weight=1.0,
        threads=1,
    )
    trainer = WordleSFTTrainer(
        model=model,
        args=cfg,
        train_dataset=load_sft_dataset(tmp_path / "sft", soft=True),
        processing_class=tok,
    )
    ds = trainer.train_dataset
    batch = trainer.data_collator(
        [dict(ds[i]) for i in range(len(ds)) if ds[i]["lexicon"] is not None]
    )
    assert batch["soft_index"][:, 0].tolist() == list(range(16))  # one target a row: the word token
    for (b, t), p, lex in zip(batch["soft_index"].tolist(), batch["soft_probs"], exercises):
        assert tok.decode([int(batch["input_ids"][b, t + 1])]) == lex["word"]
        fits = {a for a in words.answers if all(c in ("_", x) for c, x in zip(lex["pattern"], a))}
        assert {words.answers[i] for i in torch.nonzero(p).flatten().tolist()} == fits
        assert p.max().item() == pytest.approx(1 / len(fits))
