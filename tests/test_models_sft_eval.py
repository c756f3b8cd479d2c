"""A real tiny model built by init-model: tokenizer, chat template, SFT steps, resume,
evaluation."""

import json

import pytest
import torch
from typer.testing import CliRunner

from wordle_rl.cli.main import app
from wordle_rl.data.files import save_dataset
from wordle_rl.data.sft_games import SftConfig, generate_sft
from wordle_rl.data.splits import make_splits
from wordle_rl.engine.solvers import EntropySolver
from wordle_rl.environment.prompts import PromptStyle
from wordle_rl.evaluation.decoding import GuessConstraint, guess_prefixes
from wordle_rl.evaluation.evaluate import (
    EvalConfig,
    ModelPolicy,
    SolverPolicy,
    metrics,
    run_eval,
    wilson,
)
from wordle_rl.models.embedded import build_tokenizer, load_model

NT = PromptStyle("xml", think=False)


@pytest.fixture(scope="module")
def sft_data(tmp_path_factory, words):
    splits = make_splits(words, seed=0)
    rows = generate_sft(
        splits,
        SftConfig(
            games=64,
            seed=0,
            style="xml",
            think=False,
            solver_mix="entropy:1",
            recall_share=0.0,
        ),
        words,
    )
    out = tmp_path_factory.mktemp("data") / "sft"
    save_dataset(rows, out, "sft")
    return out, splits, rows


def test_tokenizer_round_trip_and_phrases(micro):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(micro)
    text = "CRATE -> X X G G G\nYou have 5 guesses left.<guess>abide</guess>"
    ids = tok(text, add_special_tokens=False)["input_ids"]
    assert tok.decode(ids) == text
    assert tok.unk_token_id not in ids
    # letters, ' -> ', a token per mark, '\n' + phrase, tags, letters
    assert len(ids) == 5 + 1 + 5 + 1 + 1 + 5 + 1
    assert [tok.decode([i]) for i in ids[6:11]] == ["X", " X", " G", " G", " G"]
    assert len(tok("é", add_special_tokens=False)["input_ids"]) == 1  # unknown chars map to <|unk|>
    # the tiles style: one token per letter and mark
    tiles = "C:Y R:Y A:G N:X E:Y\nYou have 5 guesses left."
    ids = tok(tiles, add_special_tokens=False)["input_ids"]
    assert [tok.decode([i]) for i in ids] == [
        "C:Y",
        " R:Y",
        " A:G",
        " N:X",
        " E:Y",
        "\nYou have 5 guesses left.",
    ]


def test_chat_template_masks_assistant_and_skips_untrained_turns(micro, sft_data):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(micro)
    _, _, rows = sft_data
    row = next(r for r in rows if any(m.get("train") is False for m in r["messages"]))
    enc = tok.apply_chat_template(
        row["messages"], tokenize=True, return_dict=True, return_assistant_tokens_mask=True
    )
    ids, mask = enc["input_ids"], enc["assistant_masks"]
    trained = tok.decode([i for i, m in zip(ids, mask) if m])
    for m in row["messages"]:
        if m["role"] == "assistant":
            assert (m["content"] in trained) == (m.get("train") is not False)
    assert "You have" not in trained  # environment text is never a target


def test_sft_lowers_loss_changes_weights_and_resumes(micro, sft_data, tmp_path):
    from wordle_rl.training.sft import WordleSFTConfig, run_sft

    data, _, _ = sft_data
    before = {k: v.clone() for k, v in load_model(str(micro))[0].state_dict().items()}
    out = tmp_path / "run"
    cfg = WordleSFTConfig(
        model=str(micro),
        data=str(data),
        output_dir=str(out),
        max_steps=8,
        save_steps=4,
        logging_steps=1,
        per_device_train_batch_size=8,
        learning_rate=3e-3,
        threads=1,
        disable_tqdm=True,
    )
    run_sft(cfg)
    log = [e for e in json.loads((out / "wordle_rl_sft_log.json").read_text()) if "loss" in e]
    assert log[-1]["loss"] < log[0]["loss"]
    after = load_model(str(out))[0].state_dict()
    assert any(not torch.equal(before[k], after[k]) for k in before)
    assert (out / "checkpoint-8").is_dir() and (out / "wordle_rl_sft_config.json").is_file()
    # the model records the prompt style of its data; eval refuses to prompt it in another one
    assert json.loads((out / "wordle_rl_prompt.json").read_text()) == {
        "style": "xml",
        "think": False,
    }
    r = CliRunner().invoke(
        app, ["eval", "--model", str(out), "--split", "test", "--style", "tiles"]
    )
    assert r.exit_code != 0 and "trained on 'xml' prompts" in r.output and "--style xml" in r.output
    r = CliRunner().invoke(app, ["eval", "--model", str(out), "--style", "xml", "--think", "true"])
    assert r.exit_code != 0 and "think=False" in r.output
    # without --style it is prompted in the style its folder records
    split_file = tmp_path / "splits.json"
    sft_data[1].save(split_file)
    args = ["eval", "--model", str(out), "--splits", str(split_file), "--split", "val"]
    r = CliRunner().invoke(
        app, [*args, "--limit", "2", "--no-train-sample", "--out", str(tmp_path)]
    )
    assert r.exit_code == 0, r.output
    played = json.loads((tmp_path / "results.json").read_text())
    assert (played["config"]["style"], played["config"]["think"]) == ("xml", False)
    # and so does the GRPO stage, unless a style is given
    from wordle_rl.training.grpo_config import WordleGRPOConfig

    grpo = WordleGRPOConfig(model=str(out), output_dir=str(tmp_path / "g"))
    assert (grpo.style, grpo.think) == ("xml", False)
    given = WordleGRPOConfig(model=str(out), output_dir=str(tmp_path / "g"), style="tiles")
    assert (given.style, given.think) == ("tiles", False)
    bare = WordleGRPOConfig(model=str(micro), output_dir=str(tmp_path / "g"), think=True)
    assert (bare.style, bare.think) == ("tiles", True)
    # a broken record is an error that names the file, in the CLI and in the config
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "wordle_rl_prompt.json").write_text("{style")
    r = CliRunner().invoke(app, [*args[:2], str(broken), *args[3:], "--limit", "1"])
    assert r.exit_code != 0 and "wordle_rl_prompt.json: not valid JSON" in r.output
    with pytest.raises(ValueError, match="wordle_rl_prompt.json: not valid JSON"):
        WordleGRPOConfig(model=str(broken), output_dir=str(tmp_path / "g"))
    # a run killed after checkpoint-8 continues from it (optimizer, scheduler and RNG state
    # restored)
    cfg2 = WordleSFTConfig(
        model=str(micro),
        data=str(data),
        output_dir=str(out),
        max_steps=12,
        save_steps=4,
        logging_steps=1,
        per_device_train_batch_size=8,
        threads=1,
        disable_tqdm=True,
    )
    run_sft(cfg2, resume=True)
    state = json.loads((out / "checkpoint-12" / "trainer_state.json").read_text())
    assert state["global_step"] == 12
    steps = [
        e["step"] for e in json.loads((out / "wordle_rl_sft_log.json").read_text()) if "loss" in e
    ]
    # steps 1-8 restored from the checkpoint, not redone; 9-12 new
    assert steps == list(range(1, 13))


def test_resume_without_checkpoint_is_an_error(micro, sft_data, tmp_path):
    from wordle_rl.training.sft import WordleSFTConfig, run_sft

    data, _, _ = sft_data
    cfg = WordleSFTConfig(
        model=str(micro), data=str(data), output_dir=str(tmp_path / "empty"), max_steps=1, threads=1
    )
    with pytest.raises(FileNotFoundError, match="no checkpoint"):
        run_sft(cfg, resume=True)


def test_sft_with_splits_refuses_a_game_on_a_test_answer_before_training(micro, sft_data, tmp_path):
    from wordle_rl.data.files import read_jsonl, write_jsonl

    data, splits, _ = sft_data
    splits.save(tmp_path / "splits.json")
    rows = read_jsonl(data / "sft.jsonl")
    rows[3]["answer"] = splits.test[5]
    write_jsonl(rows, tmp_path / "leaky.jsonl")
    out = tmp_path / "run"
    r = CliRunner().invoke(
        app,
        [
            "sft",
            "--model",
            str(micro),
            "--data",
            str(tmp_path / "leaky.jsonl"),
            "--splits",
            str(tmp_path / "splits.json"),
            "--output_dir",
            str(out),
            "--max_steps",
            "1",
            "--threads",
            "1",
        ],
    )
    assert r.exit_code != 0 and "LEAKAGE" in str(r.exception) + r.output
    assert not list(out.glob("checkpoint-*")) and not (out / "model.safetensors").exists()


def test_missing_model_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_model(str(tmp_path / "nothing"))


def test_a_lora_checkpoint_loads_on_its_base_with_its_adapters_merged(micro, tmp_path):
    from wordle_rl.models.adapters import LoraFields, add_lora

    model, tok = load_model(str(micro), threads=1)
    peft = add_lora(model, LoraFields(lora=True, lora_r=4))
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():  # adapters that change the outputs (fresh ones add nothing)
        for name, p in peft.named_parameters():
            if "lora_B" in name:
                p.normal_(0.0, 0.05, generator=g)
    ckpt = tmp_path / "run" / "checkpoint-3"
    peft.save_pretrained(ckpt)
    tok.save_pretrained(ckpt)
    ids = tok("CRANE -> X Y G X X", return_tensors="pt")["input_ids"]
    with torch.no_grad():
        want = peft(input_ids=ids).logits
        loaded, loaded_tok = load_model(str(ckpt), threads=1)
        got = loaded(input_ids=ids).logits
        plain = load_model(str(micro), threads=1)[0](input_ids=ids).logits
    assert not hasattr(loaded, "peft_config")  # merged: a plain model, as a final folder is
    assert torch.allclose(got, want, atol=1e-4) and not torch.allclose(plain, want, atol=1e-3)
    assert loaded_tok("CRANE")["input_ids"] == tok("CRANE")["input_ids"]

    config = ckpt / "adapter_config.json"
    record = json.loads(config.read_text())
    record["base_model_name_or_path"] = str(tmp_path / "moved")
    config.write_text(json.dumps(record))
    with pytest.raises(FileNotFoundError, match="LoRA adapters of the model .*moved.*does not"):
        load_model(str(ckpt), threads=1)


def test_untrained_model_reports_real_low_numbers(micro, words, tmp_path, sft_data):
    _, splits, _ = sft_data
    model, tok = load_model(str(micro), threads=1)
    cfg = EvalConfig(split="test", train_sample=True, max_new_tokens=12, batch_size=16)
    policy = ModelPolicy(model.eval(), tok, NT, words, max_new_tokens=12, batch_size=16)
    res = run_eval(policy, splits.test[:8], cfg, tmp_path / "ev", words, splits.train)
    m = res["metrics"]
    assert m["games"] == 8 and m["wins"] == 0 and m["win_rate_ci95"][0] == 0.0
    assert m["format_error_rate"] > 0.9 and m["moves"] == 8 * 6
    assert res["train_sample_metrics"]["games"] == 8
    saved = json.loads((tmp_path / "ev" / "results.json").read_text())
    assert saved["metrics"]["win_rate"] == m["win_rate"] and saved["decode"] == "free"
    assert len((tmp_path / "ev" / "games.jsonl").read_text().splitlines()) == 16
    assert "Evaluation" in (tmp_path / "ev" / "report.md").read_text()


def test_solver_policy_metrics(words, sft_data):
    _, splits, _ = sft_data
    cfg = EvalConfig(train_sample=False)
    res = run_eval(SolverPolicy(EntropySolver(words), NT), splits.test[:30], cfg, None, words)
    m = res["metrics"]
    assert m["win_rate"] == 1.0 and m["format_error_rate"] == 0 and m["repeated_guess_rate"] == 0
    assert 2.5 < m["mean_guesses_on_wins"] < 4.5 and 0.9 < m["mean_info_gain_vs_best"] <= 1.0
    assert metrics([{"won": True, "turns": 1, "moves": []}])["win_rate"] == 1.0


def test_wilson_interval():
    lo, hi = wilson(50, 100)
    assert 0.40 < lo < 0.41 and 0.59 < hi < 0.60
    assert wilson(0, 10)[0] == 0.0 and wilson(10, 10)[1] == 1.0


def test_guess_constraint_allows_only_continuations():
    tok = build_tokenizer()
    words = ["abide", "abbey", "crane"]

    prefix = guess_prefixes(words, NT)
    prompt = tok("<|im_start|>assistant\n", add_special_tokens=False)["input_ids"]
    gen = tok("<guess>ab", add_special_tokens=False)["input_ids"]
    ids = torch.tensor([prompt + gen])
    proc = GuessConstraint(tok, NT, len(prompt), [prefix])
    scores = proc(ids, torch.zeros(1, len(tok)))
    allowed = {tok.decode([i]) for i in torch.nonzero(scores[0] > -1e9).flatten().tolist()}
    assert allowed == {"i", "b"}
    done = torch.tensor(
        [prompt + tok("<guess>abide</guess>", add_special_tokens=False)["input_ids"]]
    )
    scores = proc(done, torch.zeros(1, len(tok)))
    assert torch.nonzero(scores[0] > -1e9).flatten().tolist() == [tok.eos_token_id]
    free = torch.tensor([prompt + tok("hello", add_special_tokens=False)["input_ids"]])
    assert torch.all(proc(free, torch.zeros(1, len(tok))) == 0)


def test_guess_constraint_spells_letter_by_letter_in_the_spelled_style():
    tok = build_tokenizer()
    style = PromptStyle("spelled", think=False)
    prefix = guess_prefixes(["abide", "abbey", "crane"], style)
    prompt = tok("<|im_start|>assistant\n", add_special_tokens=False)["input_ids"]
    proc = GuessConstraint(tok, style, len(prompt), [prefix])

    def allowed(text):
        ids = torch.tensor([prompt + tok(text, add_special_tokens=False)["input_ids"]])
        scores = proc(ids, torch.zeros(1, len(tok)))
        return {tok.decode([i]) for i in torch.nonzero(scores[0] > -1e9).flatten().tolist()}

    assert allowed("<guess>a b") == {" "}
    assert allowed("<guess>a b ") == {"i", "b"}
    assert "</guess>" in allowed("<guess>c r a n e") and " " not in allowed("<guess>c r a n e")


def test_activation_checkpointing_is_off_by_default_and_the_old_flag_still_works(tmp_path, recwarn):
    from wordle_rl.training.grpo import WordleGRPOConfig
    from wordle_rl.training.sft import WordleSFTConfig

    for cls in (WordleSFTConfig, WordleGRPOConfig):
        off = cls(output_dir=str(tmp_path / cls.__name__))
        assert off.activation_checkpointing is False and off.gradient_checkpointing is False
        on = cls(output_dir=str(tmp_path / cls.__name__), gradient_checkpointing=True)
        assert on.activation_checkpointing is True and on.gradient_checkpointing is True
        # a transformers without activation_checkpointing (5.17) reads only the old name
        new = cls(output_dir=str(tmp_path / cls.__name__), activation_checkpointing=True)
        assert new.gradient_checkpointing is True
    assert not [w for w in recwarn if "gradient_checkpointing" in str(w.message)]


def test_cpu_bf16_follows_the_cpu_flags(tmp_path):
    from wordle_rl.models.embedded import cpu_has_native_bf16
    from wordle_rl.training.grpo_config import WordleGRPOConfig
    from wordle_rl.training.sft import WordleSFTConfig

    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nflags\t\t: fpu avx2 avx512f avx512_bf16 avx512_vnni\n")
    assert cpu_has_native_bf16(info) is True
    info.write_text("processor\t: 0\nflags\t\t: fpu avx2 avx512f\n")
    assert cpu_has_native_bf16(info) is False
    assert cpu_has_native_bf16(tmp_path / "absent") is False
    if torch.cuda.is_available():
        return
    native = cpu_has_native_bf16()
    # fp32 on a CPU unless asked
    assert WordleSFTConfig(output_dir=str(tmp_path / "a")).bf16 is False
    if native:
        assert WordleSFTConfig(output_dir=str(tmp_path / "b"), bf16=True).bf16 is True
    else:
        with pytest.raises(ValueError, match="native bf16"):
            WordleSFTConfig(output_dir=str(tmp_path / "c"), bf16=True)
    # where native: bf16 where the CPU has it, fp32 elsewhere; an explicit bf16 wins
    for cls in (WordleSFTConfig, WordleGRPOConfig):
        where = cls(output_dir=str(tmp_path / "d"), bf16_where_native=True)
        assert where.bf16 is native
        assert cls(output_dir=str(tmp_path / "e"), bf16_where_native=True, bf16=False).bf16 is False


def test_schedule_that_follows_the_budget_ends_at_its_floor(micro, sft_data, tmp_path):
    from wordle_rl.training.sft import WordleSFTConfig, run_sft

    data, _, _ = sft_data
    with pytest.raises(ValueError, match="needs lr_scheduler_type='cosine'"):
        WordleSFTConfig(
            output_dir=str(tmp_path / "x"),
            lr_schedule_follows_budget=True,
            lr_scheduler_type="linear",
        )
    out = tmp_path / "run"
    # far more steps than the 6-second budget allows: by steps alone the learning rate would barely
    # have moved
    cfg = WordleSFTConfig(
        model=str(micro),
        data=str(data),
        output_dir=str(out),
        max_steps=1_000_000,
        save_steps=10,
        logging_steps=1,
        per_device_train_batch_size=8,
        learning_rate=3e-3,
        threads=1,
        time_budget_minutes=0.1,
        lr_schedule_follows_budget=True,
        disable_tqdm=True,
    )
    run_sft(cfg)
    log = json.loads((out / "wordle_rl_sft_log.json").read_text())
    lrs = [e["learning_rate"] for e in log if "learning_rate" in e]
    assert 5 <= len(lrs) < 1_000_000
    assert lrs[0] > 0.5 * 3e-3 and lrs[-1] < 0.05 * 3e-3
    assert all(a >= b for a, b in zip(lrs, lrs[1:]))  # monotone decay, by time
    # the budget already spent is saved with each checkpoint, so a resumed run continues the same
    # budget
    last = max(out.glob("checkpoint-*"), key=lambda p: int(p.name.split("-")[1]))
    state = json.loads((last / "trainer_state.json").read_text())
    saved, step = state["stateful_callbacks"]["TimeBudget"], state["global_step"]
    assert saved["args"] == {"minutes": 0.1} and 0 < saved["attributes"]["spent"] <= 0.1 * 60 + 30
    run_sft(cfg, resume=True)  # the whole budget is spent: one more step, then stop
    assert (
        json.loads((out / f"checkpoint-{step + 1}" / "trainer_state.json").read_text())[
            "global_step"
        ]
        == step + 1
    )


class _Reencoded(ModelPolicy):
    """The same policy encoding every game's whole conversation anew each turn."""

    def act(self, envs):
        self._carry = None
        return super().act(envs)


@pytest.mark.parametrize("decode", ["free", "consistent"])
def test_carried_cache_plays_the_games_a_full_encode_plays(trained_micro, words, decode):
    from wordle_rl.environment.env import EnvConfig
    from wordle_rl.environment.rewards import RewardContext
    from wordle_rl.evaluation.evaluate import play_games

    _, path = trained_micro
    model, tok = load_model(str(path), threads=1)
    style = PromptStyle("tiles", think=False)
    answers = make_splits(words, seed=0).val[:24]
    games = [
        play_games(
            cls(model.eval(), tok, style, words, decode=decode, max_new_tokens=12, batch_size=10),
            answers,
            EnvConfig(),
            RewardContext(),
        )
        for cls in (ModelPolicy, _Reencoded)
    ]
    assert games[0] == games[1]
    if decode == "consistent":  # it wins some: batches shrink as games end, caches follow
        assert len({g["turns"] for g in games[0]}) > 1


class _Counted(ModelPolicy):
    """The policy, recording how many games each turn's call is asked for."""

    def act(self, envs):
        self.sizes = getattr(self, "sizes", []) + [len(envs)]
        return super().act(envs)


def test_a_model_plays_one_batch_of_games_at_a_time(trained_micro, words):
    """Games are played ``batch_size`` at a time, each batch to its end (only one batch's KV caches
    held), and greedy play is the same as all the games together."""
    from wordle_rl.environment.env import EnvConfig
    from wordle_rl.environment.rewards import RewardContext
    from wordle_rl.evaluation.evaluate import play_games

    _, path = trained_micro
    model, tok = load_model(str(path), threads=1)
    style = PromptStyle("tiles", think=False)
    answers = make_splits(words, seed=0).val[:10]
    policies = [
        _Counted(model.eval(), tok, style, words, decode="consistent", batch_size=b)
        for b in (4, 10)
    ]
    games = [play_games(p, answers, EnvConfig(), RewardContext()) for p in policies]
    assert games[0] == games[1]
    assert max(policies[0].sizes) == 4 and policies[0].sizes[0] == 4
    assert policies[0].sizes.count(4) < len(policies[0].sizes)  # the last batch holds 2 games
    assert policies[1].sizes[0] == 10
