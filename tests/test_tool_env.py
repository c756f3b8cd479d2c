"""Wordle as a TRL tool-calling environment: the game through the ``guess`` tool, and GRPO with
``environment_factory`` on a real tiny model whose chat template is TRL's copy of Qwen3's (it
renders tool calls)."""

import json
from importlib.resources import files

import pytest
import torch

from wordle_rl.environment.tool_env import TOOL_SYSTEM_PROMPT, WordleToolEnv
from wordle_rl.models.embedded import load_model

CALL = '<tool_call>\n{"name": "guess", "arguments": {"word": "crane"}}\n</tool_call>'


@pytest.fixture(scope="module")
def server_url():
    from wordle_rl.environment.server import ServerConfig, ServerThread

    with ServerThread(ServerConfig(port=0)) as srv:
        yield srv.url


@pytest.mark.parametrize("where", ["in-process", "server"])
def test_the_game_through_the_guess_tool_keeps_the_secret_until_the_end(where, request):
    env = WordleToolEnv(
        env_url=request.getfixturevalue("server_url") if where == "server" else None
    )
    seen = env.reset(answer="abide", history=[["crane", None]])
    assert "CRANE XXYXG" in seen and "5" in seen
    texts = [env.guess("slate"), env.guess("zzzzz")]
    assert texts[0].startswith("SLATE: XXYXG") and "Refused (not in word list)" in texts[1]
    assert not any("abide" in t.lower() for t in [seen, *texts]) and env.get_reward() == 0.0
    assert "answer" not in env.state and not env.state["done"]
    # won in 4 turns: 7 - 4
    assert env.guess(" ABIDE ").endswith("You won!") and env.get_reward() == 3.0
    with pytest.raises(ValueError, match="game is over"):
        env.guess("crane")
    env.reset(answer="crane")  # the same instance, reused by TRL across batches
    assert (
        env.get_reward() == 0.0
        and env.guess("crane").endswith("You won!")
        and env.get_reward() == 6.0
    )
    if where == "server":
        env.game.close()


@pytest.mark.slow
def test_grpo_with_environment_factory_plays_through_tool_calls(trained_micro, tmp_path):
    from trl.chat_template_utils import add_response_schema

    from wordle_rl.data.files import save_dataset
    from wordle_rl.data.rl_rows import RlConfig, generate_rl
    from wordle_rl.data.splits import make_splits
    from wordle_rl.engine.words import load_word_lists
    from wordle_rl.training.grpo import WordleGRPOConfig, run_grpo

    root, model_path = trained_micro
    words = load_word_lists()
    rl = tmp_path / "rl"  # games from the first guess, so every prompt is the one taught below
    save_dataset(
        generate_rl(
            make_splits(words, seed=0), RlConfig(rows=8, seed=0, depth_mix="0:1"), words
        ),
        rl,
        "rl",
    )
    model, tok = load_model(str(model_path), threads=1)
    tok.chat_template = files("trl").joinpath("chat_templates/qwen3.jinja").read_text()
    # teach the tiny model one tool call (it is tiny and random: without this it would never call
    # the tool)
    prompt = tok.apply_chat_template(
        [
            {"role": "system", "content": TOOL_SYSTEM_PROMPT},
            {
                "role": "user",
                "content": "Make your first guess with the guess tool."
                + WordleToolEnv().reset(answer="crane"),
            },
        ],
        tools=[WordleToolEnv.guess],
        add_generation_prompt=True,
        tokenize=False,
    )
    p_ids = tok(prompt, add_special_tokens=False)["input_ids"]
    c_ids = tok(CALL, add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
    ids = torch.tensor([p_ids + c_ids], device=model.device)
    labels = torch.tensor([[-100] * len(p_ids) + c_ids], device=model.device)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.0)
    model.train()
    for _ in range(160):
        loss = model(input_ids=ids, labels=labels).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad()
    assert loss.item() < 0.05
    tool_model = tmp_path / "tool-model"
    model.save_pretrained(tool_model)
    tok.save_pretrained(tool_model)
    assert add_response_schema(tok) is tok  # TRL recognises the template and can parse the calls

    out = tmp_path / "grpo-tools"
    cfg = WordleGRPOConfig(
        sft_coef=0.0,
        eval_val_every=0,
        model=str(tool_model),
        data=str(rl),
        output_dir=str(out),
        rollout="tools",
        num_generations=2,
        per_device_train_batch_size=4,
        max_steps=2,
        max_completion_length=160,
        max_tool_calling_iterations=2,
        temperature=0.3,
        threads=1,
        save_steps=2,
        disable_tqdm=True,
        style="xml",
        think=False,
    )
    run_grpo(cfg)
    log = json.loads((out / "wordle_rl_grpo_log.json").read_text())
    steps = [x for x in log if "rewards/WordleToolEnv/mean" in x]
    assert len(steps) == 2
    # the model called the tool: TRL counts the calls, and the environment's return is a real game's
    assert any(x.get("tools/call_frequency", 0) > 0 for x in steps), steps
    assert all(0.0 <= x["rewards/WordleToolEnv/mean"] <= 6.0 for x in steps)
    assert (out / "model.safetensors").is_file()
