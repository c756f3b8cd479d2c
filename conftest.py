"""Shared fixtures: a private cache directory, the canonical word lists, their pattern matrix, a
micro model."""

import os

import pytest

from wordle_rl.engine.matrix import pattern_matrix
from wordle_rl.engine.words import load_word_lists
from wordle_rl.models.embedded import init_model


@pytest.fixture(scope="session", autouse=True)
def _private_cache(tmp_path_factory):
    old = os.environ.get("WORDLE_RL_CACHE")
    os.environ["WORDLE_RL_CACHE"] = str(tmp_path_factory.mktemp("cache"))
    yield
    if old is None:
        os.environ.pop("WORDLE_RL_CACHE", None)
    else:
        os.environ["WORDLE_RL_CACHE"] = old


@pytest.fixture(scope="session")
def words():
    return load_word_lists()


@pytest.fixture(scope="session")
def matrix(words):
    return pattern_matrix(words)


@pytest.fixture(scope="session")
def micro(tmp_path_factory):
    """A real (untrained) embedded model of the ``micro`` preset, saved with ``save_pretrained``."""
    return init_model(tmp_path_factory.mktemp("models") / "micro", "micro", seed=0)


@pytest.fixture(scope="session")
def trained_micro(tmp_path_factory, words):
    """A micro model after a few SFT steps (it writes guesses sometimes, so groups have reward
    spread), its SFT games and a dozen RL rows."""
    from wordle_rl.data.files import save_dataset
    from wordle_rl.data.rl_rows import RlConfig, generate_rl
    from wordle_rl.data.sft_games import SftConfig, generate_sft
    from wordle_rl.data.splits import make_splits
    from wordle_rl.training.sft import WordleSFTConfig, run_sft

    root = tmp_path_factory.mktemp("grpo")
    raw = init_model(root / "micro", "micro", seed=1)
    splits = make_splits(words, seed=0)
    sft_rows = generate_sft(
        splits,
        SftConfig(games=200, seed=1, think=False, solver_mix="entropy:1", recall_share=0.0),
        words,
    )
    save_dataset(sft_rows, root / "sft", "sft")
    model = run_sft(
        WordleSFTConfig(
            model=str(raw),
            data=str(root / "sft"),
            output_dir=str(root / "sft-model"),
            max_steps=60,
            per_device_train_batch_size=16,
            learning_rate=1e-2,
            threads=1,
            save_steps=1000,
            disable_tqdm=True,
        )
    )
    rows = generate_rl(
        splits,
        RlConfig(rows=12, seed=0, think=False, depth_mix="0:0.5,2:0.5", wide_share=0.0),
        words,
    )
    save_dataset(rows, root / "rl", "rl")
    return root, model


@pytest.fixture
def as_trainer(tmp_path):
    """Wraps a model in the three attributes a ``rollout_func`` reads from TRL's trainer."""
    from types import SimpleNamespace

    from transformers import TrainerState

    args = SimpleNamespace(output_dir=str(tmp_path / "trainer"))
    return lambda model: SimpleNamespace(model=model, state=TrainerState(), args=args)
