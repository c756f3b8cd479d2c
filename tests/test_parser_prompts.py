import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wordle_rl.engine.game import score
from wordle_rl.environment.parser import ERROR_CODES, parse
from wordle_rl.environment.prompts import (
    STYLES,
    Knowledge,
    PromptStyle,
    detect_style,
    format_answer,
    render_conversation,
)

XML = PromptStyle("xml")
XML_NT = PromptStyle("xml", think=False)
BR = PromptStyle("brackets")


@pytest.mark.parametrize(
    "text,style,code",
    [
        ("I like crane", XML, "no_guess"),
        ("<think>it is <guess>crane</guess></think>", XML, "no_guess"),
        ("<think>unclosed <guess>crane</guess>", XML, "no_guess"),
        ("<guess>crane</guess><guess>slate</guess>", XML, "multiple_guesses"),
        ("<guess>cranes</guess>", XML, "wrong_length"),
        ("<guess>cr4ne</guess>", XML, "not_alpha"),
        ("<guess>crâne</guess>", XML, "not_alpha"),
        ("<guess>qqqqq</guess>", XML, "not_in_word_list"),
        ("<guess>crane</guess>", XML, "repeated_guess"),
        ("<guess>slate</guess> I hope", XML, "text_after_guess"),
        ("<guess></guess>", XML, "no_guess"),
        ("[crane] [slate]", BR, "multiple_guesses"),
        ("[slate] ok", BR, "text_after_guess"),
        ("crane", BR, "no_guess"),
    ],
)
def test_error_codes(words, text, style, code):
    hist = [("crane", score("crane", "abide"))]
    r = parse(text, style, words=words, history=hist)
    assert r.error == code and r.guess is None
    assert code in ERROR_CODES


def test_hard_mode_violation_code(words):
    hist = [("abbey", score("abbey", "abide"))]
    r = parse("<guess>crane</guess>", XML, words=words, history=hist, hard=True)
    assert r.error == "hard_mode_violation" and r.message == "1st letter must be A"


def test_valid_guesses_and_format(words):
    r = parse("<think>two vowels</think><guess> Slate </guess>", XML, words=words)
    assert r.ok and r.guess == "slate" and r.format_ok
    r = parse("<guess>slate</guess>", XML, words=words)  # thinking style but no think block
    assert r.ok and not r.format_ok
    r = parse("<guess>slate</guess>", XML_NT, words=words)
    assert r.ok and r.format_ok
    r = parse("preamble <guess>slate</guess>", XML_NT, words=words)
    assert r.ok and not r.format_ok
    r = parse("reasoning first. [slate]", BR, words=words)
    assert r.ok and r.format_ok
    # a template that opened <think> in the prompt: the completion starts inside the block
    r = parse("maybe <guess>crane</guess> no</think><guess>slate</guess>", XML, words=words)
    assert r.guess == "slate"
    r = parse("<guess>slate</guess> trailing", XML, words=words, strict=False)
    assert r.guess == "slate" and not r.format_ok


def test_no_fallback_from_stray_letters(words):
    for text in ["slate", "SLATE", "my guess is slate", "guess: slate", "<guess>slate"]:
        assert parse(text, XML, words=words).guess is None


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=300))
def test_parse_never_crashes(text):
    for style in (XML, XML_NT, BR):
        r = parse(text, style)
        assert (r.guess is None) == (r.error is not None)


@pytest.mark.parametrize("name", STYLES)
def test_styles_render_and_round_trip(words, name):
    style = PromptStyle(name)
    hist = [("crane", score("crane", "abide")), ("slate", score("slate", "abide"))]
    msgs = render_conversation(style, hist, thinks=["first", "second"])
    assert [m["role"] for m in msgs] == ["system", "user", "assistant", "user", "assistant", "user"]
    assert "abide" not in " ".join(m["content"] for m in msgs).lower()
    assert "4 guesses left" in msgs[-1]["content"]
    for i, (g, _) in enumerate(hist):
        text = msgs[2 + 2 * i]["content"]
        r = parse(text, style, words=words, history=hist[:i])
        assert r.ok and r.guess == g and r.format_ok
    hinted = render_conversation(PromptStyle(name, hints=True), hist, n_candidates=[2315, 40, 3])
    assert "3 possible answers remain" in hinted[-1]["content"]


def test_unknown_style():
    with pytest.raises(ValueError, match="unknown prompt style"):
        PromptStyle("yaml")


def test_tiles_feedback_pairs_each_letter_with_its_mark():
    tiles = PromptStyle("tiles", think=False)
    # repeated E: the first Y, the second X
    msgs = render_conversation(tiles, [("speed", score("speed", "abide"))])
    assert msgs[-1]["content"] == "S:X P:X E:Y E:X D:Y\nYou have 5 guesses left."
    assert format_answer(tiles, "speed") == "<guess>speed</guess>"  # answers as in the xml style






def test_brackets_feedback_textarena_form():
    msgs = render_conversation(BR, [("crane", score("crane", "react"))])
    assert "C R A N E\nY Y G X Y" in msgs[-1]["content"]
    assert format_answer(BR, "crane") == "[crane]"


@settings(max_examples=200, deadline=None)
@given(st.randoms(use_true_random=False))
def test_plain_knowledge_is_true(words, rnd: random.Random):
    answer = rnd.choice(words.answers)
    hist = []
    for _ in range(rnd.randint(1, 5)):
        g = rnd.choice(words.allowed)
        hist.append((g, score(g, answer)))
    k = Knowledge.from_history(hist)
    for i, c in k.fixed.items():
        assert answer[i] == c
    for c, n in k.min_count.items():
        assert answer.count(c) >= n
    for c, n in k.max_count.items():
        assert answer.count(c) <= n
    for c, pos in k.not_at.items():
        for i in pos:
            assert answer[i] != c
    text = "\n".join(k.describe())
    for c in k.absent:
        assert c not in answer and c.upper() in text


@pytest.mark.parametrize("name", STYLES)
@pytest.mark.parametrize("think", [False, True])
def test_the_style_of_a_rendered_game_is_recognised(name, think):
    style = PromptStyle(name, think=think)
    # a refusal's reply is not feedback: it is skipped
    refused = (
        "qqqqq",
        None,
        "not in the word list",
    )
    history = [refused, ("crane", score("crane", "react")), ("trace", score("trace", "react"))]
    msgs = render_conversation(style, history, thinks=[None, "vowels first", None])
    # no feedback yet: nothing to recognise
    assert detect_style([render_conversation(style, [])]) is None
    assert detect_style([render_conversation(style, []), msgs]) == (name, style.uses_think)


PIECES = ["<guess>", "</guess>", "<think>", "</think>", "[", "]", "crane", "c r a n e", "abide"]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.sampled_from(PIECES) | st.text(max_size=12), max_size=8).map("".join),
    st.sampled_from(STYLES),
    st.booleans(),
    st.booleans(),
)
def test_moves_from_generated_text_get_a_known_error_or_a_play(words, text, name, think, hard):
    from wordle_rl.environment.env import EnvConfig, WordleEnv

    env = WordleEnv(EnvConfig(style=PromptStyle(name, think=think), hard=hard), words=words, seed=0)
    env.reset(answer="abide", history=["crane"])
    out = env.step(text)
    assert out.info["error"] in (None, *ERROR_CODES)
    assert (out.info["guess"] is None) == (out.info["error"] is not None)
    assert out.info["pattern"] is not None or out.info["guess"] is None
