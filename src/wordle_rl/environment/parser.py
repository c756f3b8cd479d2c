"""Strict parser: from a model's completion to a guess, or a structured error. No guessing from
stray letters.

    >>> parse("<think>maybe crane</think><guess>slate</guess>").guess
    'slate'
    >>> parse("<think><guess>crane</guess></think>").error
    'no_guess'
    >>> parse("<guess>crane</guess> because").error
    'text_after_guess'
    >>> parse("[crane]", style="brackets").guess
    'crane'
    >>> parse("<guess>c r a n e</guess>", style="spelled").guess
    'crane'

Error codes: ``no_guess``, ``multiple_guesses``, ``wrong_length``, ``not_alpha``,
``not_in_word_list``, ``repeated_guess``, ``hard_mode_violation``, ``text_after_guess``. A guess
written inside ``<think>`` never counts. ``format_ok`` is the strict shape check used by the format
reward (exactly one think block when the style thinks, then the answer, nothing else).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from wordle_rl.engine.game import hard_mode_violation
from wordle_rl.engine.words import WordList
from wordle_rl.environment.prompts import PromptStyle

__all__ = ["ParseResult", "parse", "ERROR_CODES"]

ERROR_CODES = (
    "no_guess",
    "multiple_guesses",
    "wrong_length",
    "not_alpha",
    "not_in_word_list",
    "repeated_guess",
    "hard_mode_violation",
    "text_after_guess",
)

_THINK_BLOCK = re.compile(r"<think>.*?</think>", re.S | re.I)
_GUESS_TAG = re.compile(r"<guess>(.*?)</guess>", re.S | re.I)
_BRACKET = re.compile(r"\[([^\[\]]*)\]")
_STRICT_XML_THINK = re.compile(
    r"\s*<think>(?:(?!</?think>).)*</think>\s*<guess>[^<>]*</guess>\s*", re.S | re.I
)
_STRICT_XML = re.compile(r"\s*<guess>[^<>]*</guess>\s*", re.S | re.I)
_STRICT_BRACKET = re.compile(r"[^\[\]]*\[[^\[\]]*\]\s*", re.S)


@dataclass(frozen=True)
class ParseResult:
    guess: str | None
    error: str | None = None
    message: str = ""
    format_ok: bool = False
    raw_guess: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and self.guess is not None


def _visible(text: str) -> str:
    """The text outside thinking: closed think blocks removed, an unclosed one runs to the end,
    and a stray ``</think>`` (template opened the block) hides everything before it."""
    low = text.lower()
    if "think>" not in low:
        return text
    if "</think>" in low and "<think>" not in low.split("</think>", 1)[0]:
        text = text[low.index("</think>") + len("</think>") :]
    text = _THINK_BLOCK.sub(" ", text)
    low = text.lower()
    if "<think>" in low:
        text = text[: low.index("<think>")]
    return text


def parse(
    text: str,
    style: PromptStyle | str = "xml",
    *,
    words: WordList | None = None,
    history: list[tuple[str, int]] | tuple = (),
    hard: bool = False,
    strict: bool = True,
    length: int | None = None,
) -> ParseResult:
    """Parse one completion. With ``words`` the guess is also checked against the list, earlier
    guesses (``history``) and, with ``hard``, the hard-mode rule."""
    if isinstance(style, str):
        style = PromptStyle(style)
    length = length or (words.length if words else style.length)
    text = text if isinstance(text, str) else str(text)
    if style.answer_format == "brackets":
        visible = text
        found = list(_BRACKET.finditer(visible))
        shape_ok = _STRICT_BRACKET.fullmatch(text) is not None
    else:
        visible = _visible(text)
        found = list(_GUESS_TAG.finditer(visible))
        pattern = _STRICT_XML_THINK if style.uses_think else _STRICT_XML
        shape_ok = pattern.fullmatch(text) is not None
    if not found:
        return ParseResult(
            None,
            "no_guess",
            "no guess found" + (" outside <think>" if "<think>" in text else ""),
            False,
        )
    if len(found) > 1:
        return ParseResult(
            None, "multiple_guesses", f"{len(found)} guesses found; give exactly one", False
        )
    m = found[0]
    raw = m.group(1)
    after = visible[m.end() :].strip()
    if after and strict:
        return ParseResult(
            None, "text_after_guess", "text after the guess is not allowed", False, raw
        )
    # the spelled style writes its guess letter by letter: "c r a n e"
    w = "".join(raw.split()).lower() if style.spelled else raw.strip().lower()
    fmt = shape_ok and not after
    if not w:
        return ParseResult(None, "no_guess", "the guess is empty", fmt, raw)
    if not (w.isascii() and w.isalpha()):
        return ParseResult(
            None, "not_alpha", f"{raw.strip()[:40]!r} must contain letters a-z only", fmt, raw
        )
    if len(w) != length:
        letters = "letter" if len(w) == 1 else "letters"
        return ParseResult(
            None, "wrong_length", f"{w[:40]!r} has {len(w)} {letters}, not {length}", fmt, raw
        )
    if words is not None and not words.is_allowed(w):
        return ParseResult(None, "not_in_word_list", f"{w!r} is not in the word list", fmt, raw)
    if any(w == g for g, _ in history):
        return ParseResult(None, "repeated_guess", f"{w!r} was already guessed", fmt, raw)
    if hard:
        msg = hard_mode_violation(list(history), w)
        if msg:
            return ParseResult(None, "hard_mode_violation", msg, fmt, raw)
    return ParseResult(w, None, "", fmt, raw)
