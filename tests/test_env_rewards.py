import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wordle_rl.engine.game import play_game, score
from wordle_rl.engine.solvers import EntropySolver
from wordle_rl.environment.env import EnvConfig, WordleEnv
from wordle_rl.environment.prompts import PromptStyle
from wordle_rl.environment.reward_funcs import make_reward_funcs
from wordle_rl.environment.rewards import (
    COMPONENTS,
    PRESETS,
    RANGES,
    RewardContext,
    RewardWeights,
    combine,
    episode_components,
    game_return,
)

NT = PromptStyle("xml", think=False)


@pytest.fixture(scope="module")
def ctx(words, matrix):
    return RewardContext(words, matrix)


def _env(ctx, seed=0, style=NT, **kw):
    return WordleEnv(EnvConfig(style=style, **kw), ctx=ctx, seed=seed)


def _all_weights():
    return list(PRESETS.values())


def test_full_game_and_secret_hidden(ctx):
    env = _env(ctx)
    obs = env.reset(answer="abide")
    assert "abide" not in repr(obs)
    step = env.step("<guess>speed</guess>")
    assert step.info["pattern"] == "XXYXY" and not step.done
    assert "answer" not in step.info and "abide" not in repr(step)
    assert step.info["components"]["valid"] == 1.0
    step = env.step("<guess>abide</guess>")
    assert (
        step.done
        and step.info["won"]
        and step.info["answer"] == "abide"
        and step.info["turns"] == 2
    )
    assert step.observation.state["answer"] == "abide"
    with pytest.raises(RuntimeError, match="over"):
        env.step("<guess>crane</guess>")


def test_lose_turn_and_retry_once(ctx):
    env = _env(ctx, invalid_policy="lose_turn")
    env.reset(answer="abide")
    s = env.step("crane")
    assert (
        s.info["error"] == "no_guess"
        and s.info["turn_lost"]
        and s.observation.state["guesses_left"] == 5
    )
    assert "Invalid move" in s.observation.messages[-1]["content"]
    env = _env(ctx, invalid_policy="retry_once")
    env.reset(answer="abide")
    s = env.step("<guess>qqqqq</guess>")
    assert not s.info["turn_lost"] and s.observation.state["guesses_left"] == 6
    s = env.step("<guess>qqqqq</guess>")
    assert s.info["turn_lost"] and s.observation.state["guesses_left"] == 5
    for _ in range(5):
        s = env.step("nothing")
        s = env.step("nothing") if not s.done else s
    assert s.done and not s.info["won"] and s.info["answer"] == "abide"


def test_seeded_resets_and_history(ctx):
    a = [_env(ctx, seed=7).reset().state for _ in range(2)]
    e1, e2 = _env(ctx), _env(ctx)
    answers1 = [e1.reset(seed=3) and e1._answer for _ in range(3)]
    answers2 = [e2.reset(seed=3) and e2._answer for _ in range(3)]
    assert answers1 == answers2 and a[0] == a[1]
    env = _env(ctx)
    obs = env.reset(answer="abide", history=[("crane", None), ("slate", None)])
    assert obs.state["turn"] == 2 and len(obs.messages) == 6
    with pytest.raises(ValueError, match="does not match"):
        env.reset(answer="abide", history=[("crane", 0)])
    with pytest.raises(ValueError, match="not in the word list"):
        env.reset(answer="abide", history=[("qqqqq", None)])
    with pytest.raises(ValueError, match="already ends"):
        env.reset(answer="abide", history=[("abide", None)])
    # the failed resets changed nothing: the game set up before them is intact
    assert env.played == [("crane", score("crane", "abide")), ("slate", score("slate", "abide"))]
    with pytest.raises(ValueError, match="not in the word list"):
        env.reset(answer="zzzzq")
    with pytest.raises(RuntimeError, match="reset"):
        _env(ctx).step("<guess>crane</guess>")


def test_env_config_errors():
    with pytest.raises(ValueError, match="invalid_policy"):
        EnvConfig(invalid_policy="skip")
    with pytest.raises(ValueError, match="unknown reward preset"):
        EnvConfig(reward_weights="greedy")


def test_hard_mode_in_env(ctx):
    env = _env(ctx, hard=True)
    env.reset(answer="abide")
    env.step("<guess>abbey</guess>")
    s = env.step("<guess>crane</guess>")
    assert s.info["error"] == "hard_mode_violation" and s.info["message"] == "1st letter must be A"


def test_weights_validation():
    with pytest.raises(ValueError, match="lost game could out-score"):
        RewardWeights(format=0.5, valid=0.5, partial=0.5)
    with pytest.raises(ValueError, match="refused"):
        RewardWeights(format=0.3, valid=0.05, invalid=0.05, partial=0, consistency=0, info_gain=0)
    with pytest.raises(ValueError, match=">= 0"):
        RewardWeights(format=-0.1)
    with pytest.raises(ValueError, match="unknown reward component"):
        RewardWeights.from_any({"style": 1.0})


component_values = st.fixed_dictionaries(
    {c: st.floats(*RANGES[c]) for c in COMPONENTS if c != "win"}
)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(component_values, min_size=1, max_size=6),
    st.lists(component_values, min_size=1, max_size=6),
    st.integers(1, 6),
)
def test_lost_game_never_outscores_won_game(won_turns, lost_turns, won_at):
    won = [dict(t, win=0.0) for t in won_turns]
    won[-1]["win"] = 1.0 + 0.5 * (6 - min(won_at, 6)) / 5
    lost = [dict(t, win=0.0) for t in lost_turns]
    for w in _all_weights():
        assert combine(episode_components(won), w) > combine(episode_components(lost), w)


def _states(words, matrix, n=40, seed=0):
    rng = random.Random(seed)
    solver = EntropySolver(words, matrix=matrix)
    out = []
    for a in rng.sample(words.answers, n):
        rec = play_game(solver, a)
        depth = rng.randint(0, len(rec.guesses) - 1)
        out.append((a, list(zip(rec.guesses[:depth], rec.patterns[:depth]))))
    return out


def test_invalid_or_repeated_never_outscore_valid_new(words, matrix, ctx):
    rng = random.Random(1)
    for answer, hist in _states(words, matrix):
        valid = [w for w in rng.sample(words.allowed, 20) if w not in {g for g, _ in hist}]
        bad = [
            "<guess>qqqqq</guess>",
            "no guess at all",
            "<guess>abc</guess>",
            "<guess>crane</guess><guess>slate</guess>",
            "<think>x</think><guess>zzzzz</guess>",
            "<guess>slate</guess> trailing",
        ]
        if hist:
            bad += [
                f"<guess>{hist[0][0]}</guess>",
                f"<think>again</think><guess>{hist[-1][0]}</guess>",
            ]
        goods = [f"<guess>{w}</guess>" for w in valid] + [
            f"<think>t</think><guess>{w}</guess>" for w in valid
        ]
        for weights in _all_weights():
            score_of = {}
            for style in (NT, PromptStyle("xml", think=True)):
                for text in goods + bad:
                    comps = ctx.turn(text, answer, hist, style, False, 6)
                    score_of[(style, text)] = (combine(comps, weights), comps["valid"])
                lo_good = min(v for (s, t), (v, ok) in score_of.items() if s == style and ok)
                hi_bad = max(v for (s, t), (v, ok) in score_of.items() if s == style and not ok)
                assert hi_bad <= lo_good
                if weights.invalid > 0:
                    assert hi_bad < lo_good


def test_format_reward_denied_for_trailing_text_or_hidden_guess(words):
    fmt = make_reward_funcs(PromptStyle("xml"))[1]
    assert fmt.__name__ == "format_reward"
    texts = [
        "<think>a</think><guess>crane</guess>",
        "<think>a</think><guess>crane</guess> because",
        "<think><guess>crane</guess></think>",
        "<think>a</think><guess>crane</guess><guess>slate</guess>",
    ]
    assert fmt(texts, answer=["crane"] * 4) == [1.0, 0.0, 0.0, 0.0]


@settings(max_examples=150, deadline=None)
@given(
    st.text(max_size=200)
    | st.sampled_from(["", "\x00", "<guess>" * 1000, "é" * 5000, "<guess>ÉCLAT</guess>"])
)
def test_rewards_finite_for_any_string(text):
    funcs = make_reward_funcs(PromptStyle("xml"))
    for f in funcs:
        vals = f(
            [text, [{"role": "assistant", "content": text}]],
            answer=["crane", "crane"],
            history=[[["slate", "XXYXY"]], []],
        )
        assert all(math.isfinite(v) for v in vals)
        lo, hi = RANGES[f.__name__.removesuffix("_reward")]
        assert all(lo <= v <= hi for v in vals)


def test_component_values(words, ctx):
    funcs = {f.__name__: f for f in make_reward_funcs(NT, ctx=ctx)}
    answer = "shake"
    hist = [["crane", score("crane", answer)]]
    texts = [
        "<guess>shake</guess>",
        "<guess>crane</guess>",
        "<guess>qqqqq</guess>",
        "<guess>trace</guess>",
    ]
    kw = {"answer": [answer] * 4, "history": [hist] * 4}
    assert funcs["win_reward"](texts, **kw)[0] == pytest.approx(1.0 + 0.5 * 4 / 5)
    assert funcs["repetition_reward"](texts, **kw) == [0.0, -1.0, 0.0, 0.0]
    assert funcs["invalid_reward"](texts, **kw) == [0.0, -1.0, -1.0, 0.0]
    assert funcs["valid_reward"](texts, **kw) == [1.0, 0.0, 0.0, 1.0]
    cons = funcs["consistency_reward"](texts, **kw)
    assert cons[0] == 1.0 and 0 < cons[3] < 1.0  # trace: re-scored, crane would show a yellow C
    info = funcs["info_gain_reward"](texts, **kw)
    assert all(0.0 <= v <= 1.0 for v in info) and info[2] == 0.0
    # episode values passed by a rollout win over recomputation
    assert funcs["win_reward"](texts[:2], episode_win=[1.2, 0.0]) == [1.2, 0.0]




def test_real_games_won_beat_lost(ctx):
    """Played games: every won game's episode reward beats every lost game's."""
    rng = random.Random(5)
    env = _env(ctx)
    won, lost = [], []
    for i in range(60):
        env.reset(seed=i)
        done = False
        while not done:
            r = rng.random()
            if r < 0.15:
                text = "garbage"
            elif r < 0.3 and env.played:
                text = f"<guess>{env.played[0][0]}</guess>"
            elif r < 0.45:
                cands = env.candidates()
                text = f"<guess>{ctx.words.answers[cands[rng.randrange(len(cands))]]}</guess>"
            else:
                text = f"<guess>{rng.choice(ctx.words.allowed)}</guess>"
            s = env.step(text)
            done = s.done
        (won if s.info["won"] else lost).append(s.info["episode_reward"])
    assert won and lost
    assert min(won) > max(lost)


GAME_MOVES = st.lists(
    st.sampled_from(["crane", "slate", "moist", "pious", "abbey", "xxxxx", "<guess>", "nymph"]),
    min_size=1,
    max_size=6,
)


def _play_moves(answer: str, moves: list[str]) -> tuple[bool, int]:
    """A real game in the environment: (won, turns used); refused moves cost their turn."""
    env = WordleEnv(EnvConfig())
    env.reset(answer=answer)
    for m in moves:
        if env.done:
            break
        env.step(f"<guess>{m}</guess>")
    while not env.done:  # lose the rest of the game on refused moves
        env.step("no guess")
    return env.won, env.turns_used


@settings(max_examples=60, deadline=None)
@given(
    st.sampled_from(["pious", "abbey", "nymph"]),
    GAME_MOVES,
    st.sampled_from(["pious", "abbey", "nymph"]),
    GAME_MOVES,
)
def test_game_return_orders_outcomes_strictly(answer_a, moves_a, answer_b, moves_b):
    a, b = _play_moves(answer_a, moves_a), _play_moves(answer_b, moves_b)
    ra, rb = (game_return(won, turns, 6) for won, turns in (a, b))
    if a[0] and not b[0]:
        assert ra > rb  # every win beats every loss
    if a[0] and b[0] and a[1] < b[1]:
        assert ra > rb  # a win in k turns beats every win in k + 1 (refused moves count as turns)
    if a == b:
        assert ra == rb
    with pytest.raises(ValueError, match="turns must be 1-6"):
        game_return(False, 7)
