"""Shared fixtures: a private cache directory, the canonical word lists, their pattern matrix, a micro model."""

import os

import pytest

from wordle_rl.game import pattern_matrix
from wordle_rl.models import init_model
from wordle_rl.words import load_word_lists


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
