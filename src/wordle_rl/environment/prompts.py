"""The one prompt renderer shared by data generation, training and evaluation.

Five styles, each producing chat messages ready for ``tokenizer.apply_chat_template``:

- ``xml``: the model answers ``<think>...</think><guess>word</guess>`` (or ``<guess>word</guess>``
  with ``think=False``); feedback is one line per turn (``CRANE -> G X Y X X``).
- ``brackets``: the model answers ``[word]``; feedback in the TextArena style (letters over
  colours).
- ``tiles``: as ``xml``, but each feedback tile is written as its letter and mark together (``C:G
  R:X A:Y N:X E:X``), so a letter and its mark are one token for the embedded tokenizer and need no
  lining up by position. The default (``DEFAULT_STYLE``): the embedded model wins more held-out
  games with it than with ``xml``.
- ``plain``: each user turn is a plain-English summary of everything known so far; answers as in
  ``xml``.
- ``spelled``: feedback as in ``tiles``, and the guess written letter by letter
  (``<guess>c r a n e</guess>``), so that a BPE model writes one token per letter, each lined up
  with its tile, instead of a whole word as one token whose spelling it must recall.

    >>> style = PromptStyle("xml", think=False)
    >>> msgs = render_conversation(style, [("crane", 0)])
    >>> [m["role"] for m in msgs]
    ['system', 'user', 'assistant', 'user']
    >>> msgs[2]["content"]
    '<guess>crane</guess>'

Hints (``hints=True``) add the number of answers still possible; they are off by default.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from wordle_rl.engine.game import GREEN, GREY, YELLOW, pattern_to_tiles

__all__ = [
    "PromptStyle",
    "STYLES",
    "Knowledge",
    "system_prompt",
    "first_user_message",
    "feedback_message",
    "invalid_message",
    "format_answer",
    "render_conversation",
    "tile_line",
    "Turn",
    "TILE_MARKS",
    "DEFAULT_STYLE",
    "detect_style",
]

STYLES = ("xml", "tiles", "brackets", "plain", "spelled")
# The default of every command and config: the embedded default model wins more held-out games with
# each tile written as letter and mark together (docs/results.md). Hub LLMs may prefer "xml".
DEFAULT_STYLE = "tiles"
_ORD = ["1st", "2nd", "3rd", "4th", "5th", "6th", "7th", "8th", "9th", "10th"]
_TILE = {GREEN: "G", YELLOW: "Y", GREY: "X"}
TILE_MARKS = tuple(_TILE.values())


@dataclass(frozen=True)
class PromptStyle:
    """How observations are written and how the model must answer."""

    name: str = DEFAULT_STYLE
    think: bool = True
    hints: bool = False
    max_turns: int = 6
    length: int = 5

    def __post_init__(self) -> None:
        if self.name not in STYLES:
            raise ValueError(
                f"unknown prompt style {self.name!r}; choose one of {', '.join(STYLES)}"
            )

    @property
    def answer_format(self) -> str:
        return "brackets" if self.name == "brackets" else "xml"

    @property
    def tile_feedback(self) -> bool:
        """Feedback written as ``letter:mark`` tiles (the ``tiles`` and ``spelled`` styles)."""
        return self.name in ("tiles", "spelled")

    @property
    def spelled(self) -> bool:
        """Guesses written letter by letter, separated by spaces (the ``spelled`` style)."""
        return self.name == "spelled"

    def written(self, guess: str) -> str:
        """``guess`` as this style writes it inside its answer.

        >>> PromptStyle("spelled").written("crane"), PromptStyle("xml").written("crane")
        ('c r a n e', 'crane')
        """
        return " ".join(guess) if self.spelled else guess

    @property
    def guess_tags(self) -> tuple[str, str]:
        """The text that opens and closes a guess in this style.

        >>> PromptStyle("xml").guess_tags, PromptStyle("brackets").guess_tags
        (('<guess>', '</guess>'), ('[', ']'))
        """
        return ("[", "]") if self.answer_format == "brackets" else ("<guess>", "</guess>")

    @property
    def uses_think(self) -> bool:
        return self.think and self.answer_format == "xml"


# A turn in a conversation: (guess, pattern) for a played guess, or (raw completion, None, error
# message)
Turn = tuple


@dataclass
class Knowledge:
    """What the feedback so far proves, derived tile by tile (used for wording only, never for
    filtering).

    ``min_count``/``max_count`` bound how often a letter occurs; ``not_at`` lists excluded
    positions.
    """

    length: int = 5
    fixed: dict[int, str] = field(default_factory=dict)
    min_count: dict[str, int] = field(default_factory=dict)
    max_count: dict[str, int] = field(default_factory=dict)
    not_at: dict[str, set[int]] = field(default_factory=dict)

    @classmethod
    def from_history(cls, history, length: int = 5) -> Knowledge:
        k = cls(length=length)
        for guess, pattern in history:
            tiles = pattern_to_tiles(pattern, len(guess))
            seen: dict[str, int] = {}
            for i, (c, t) in enumerate(zip(guess, tiles)):
                if t == GREEN:
                    k.fixed[i] = c
                else:
                    k.not_at.setdefault(c, set()).add(i)
                if t != GREY:
                    seen[c] = seen.get(c, 0) + 1
            for c, t in zip(guess, tiles):
                n = seen.get(c, 0)
                k.min_count[c] = max(k.min_count.get(c, 0), n)
                if t == GREY:
                    k.max_count[c] = min(k.max_count.get(c, length), n)
        return k

    @property
    def absent(self) -> list[str]:
        return sorted(c for c, n in self.max_count.items() if n == 0)

    @property
    def present(self) -> list[str]:
        return sorted(c for c, n in self.min_count.items() if n > 0)

    def describe(self) -> list[str]:
        """Plain-English lines, each a fact the feedback proves."""
        lines = []
        if self.fixed:
            lines.append(
                "Known positions: "
                + ", ".join(
                    f"{_ORD[i]} letter is {c.upper()}" for i, c in sorted(self.fixed.items())
                )
                + "."
            )
        moved = []
        for c in self.present:
            excl = sorted(i for i in self.not_at.get(c, set()) if self.fixed.get(i) != c)
            count = self.min_count[c]
            exact = self.max_count.get(c) == count
            amount = (
                f"exactly {count} times"
                if exact and count > 1
                else (f"at least {count} times" if count > 1 else ("exactly once" if exact else ""))
            )
            where = ("not in position " + ", ".join(str(i + 1) for i in excl)) if excl else ""
            detail = "; ".join(x for x in (amount, where) if x)
            moved.append(f"{c.upper()}" + (f" ({detail})" if detail else ""))
        if moved:
            lines.append("Letters in the word: " + ", ".join(moved) + ".")
        if self.absent:
            lines.append(
                "Letters not in the word: " + ", ".join(c.upper() for c in self.absent) + "."
            )
        return lines


def system_prompt(style: PromptStyle) -> str:
    rules = (
        f"You are playing Wordle. Find the secret {style.length}-letter English word in at most "
        f"{style.max_turns} guesses. Every guess must be a valid {style.length}-letter word.\n"
        "After each guess you get one mark per letter: G = right letter in the right spot, "
        "Y = in the word but in another spot, X = not in the word (no more copies of that "
        "letter).\n"
    )
    if style.answer_format == "brackets":
        return (
            rules
            + "Answer with your guess in square brackets, for example [crane], and nothing after "
            "it."
        )
    answer = (
        "your guess letter by letter, separated by spaces, as <guess>c r a n e</guess>,"
        if style.spelled
        else "your guess as <guess>word</guess>"
    )
    if style.uses_think:
        return rules + (
            f"Think briefly inside <think>...</think>, then give {answer} and nothing after it."
        )
    return rules + f"Answer with {answer} and nothing else."


def first_user_message(style: PromptStyle, n_candidates: int | None = None) -> str:
    text = f"Make your first guess. You have {style.max_turns} guesses."
    return text + _hint(style, n_candidates)


def _hint(style: PromptStyle, n_candidates: int | None) -> str:
    if style.hints and n_candidates is not None:
        return f"\nHint: {n_candidates} possible answer{'s' if n_candidates != 1 else ''} remain."
    return ""


def _left(style: PromptStyle, used: int) -> str:
    left = style.max_turns - used
    return f"You have {left} guess{'es' if left != 1 else ''} left."


def feedback_message(
    style: PromptStyle,
    history: list[tuple[str, int]],
    turns_used: int,
    n_candidates: int | None = None,
) -> str:
    """The user message after a played guess; ``history`` holds the played guesses so far, last one
    included."""
    guess, pattern = history[-1]
    if style.name == "brackets":
        text = (
            f"You submitted "
            f"[{guess}].\nFeedback:\n{' '.join(guess.upper())}\n{' '.join(_marks(guess, pattern))}"
            f"\n\n{_left(style, turns_used)}"
        )
    elif style.name == "xml":
        text = f"{guess.upper()} -> {' '.join(_marks(guess, pattern))}\n{_left(style, turns_used)}"
    elif style.tile_feedback:
        text = "\n".join([tile_line(guess, pattern), _left(style, turns_used)])
    else:
        text = _plain_summary(style, history, turns_used)
    return text + _hint(style, n_candidates)


def tile_line(guess: str, pattern: int) -> str:
    """Feedback of the ``tiles`` style: each letter with its mark.

    >>> from wordle_rl.engine.game import score
    >>> tile_line("crane", score("crane", "react"))
    'C:Y R:Y A:G N:X E:Y'
    """
    return " ".join(f"{c.upper()}:{m}" for c, m in zip(guess, _marks(guess, pattern)))


def _marks(guess: str, pattern: int) -> list[str]:
    """One mark (G, Y or X) per letter of ``guess``."""
    return [_TILE[t] for t in pattern_to_tiles(pattern, len(guess))]


def _plain_summary(style: PromptStyle, history, turns_used: int) -> str:
    guess, pattern = history[-1]
    lines = [
        f"Your guess {guess.upper()} got {' '.join(_marks(guess, pattern))}.",
        "Guesses so far: " + ", ".join(g.upper() for g, _ in history) + ".",
    ]
    lines += Knowledge.from_history(history, style.length).describe()
    lines.append(_left(style, turns_used))
    return "\n".join(lines)


def invalid_message(
    style: PromptStyle, message: str, turns_used: int, turn_lost: bool = True
) -> str:
    """The user message after a refused move."""
    cost = "" if turn_lost else " This time it costs no guess; try again."
    return f"Invalid move: {message}.{cost}\n{_left(style, turns_used)}"


def format_answer(style: PromptStyle, guess: str, think: str | None = None) -> str:
    """The assistant text that plays ``guess`` in this style (``think`` is the rationale, xml style
    only)."""
    if style.answer_format == "brackets":
        return f"[{guess}]"
    if style.uses_think:
        return f"<think>{think or ''}</think><guess>{style.written(guess)}</guess>"
    return f"<guess>{style.written(guess)}</guess>"


def render_conversation(
    style: PromptStyle,
    history: list[Turn],
    thinks: list[str | None] | None = None,
    n_candidates: list[int | None] | None = None,
) -> list[dict[str, str]]:
    """Full chat for a game so far: system, first user turn, then (assistant, user) per turn.

    ``history`` entries are ``(guess, pattern)`` for played guesses, or ``(raw_text, None,
    error_message)`` for refused moves that cost a turn. ``n_candidates[i]`` feeds the hint after
    turn ``i`` (index 0: start).
    """
    counts = n_candidates or []
    msgs = [
        {"role": "system", "content": system_prompt(style)},
        {"role": "user", "content": first_user_message(style, counts[0] if counts else None)},
    ]
    played: list[tuple[str, int]] = []
    for i, turn in enumerate(history):
        hint = counts[i + 1] if i + 1 < len(counts) else None
        if len(turn) == 3 and turn[1] is None:
            msgs.append({"role": "assistant", "content": turn[0]})
            msgs.append({"role": "user", "content": invalid_message(style, turn[2], i + 1)})
            continue
        guess, pattern = turn[0], turn[1]
        played.append((guess, pattern))
        think = thinks[i] if thinks and i < len(thinks) else None
        msgs.append({"role": "assistant", "content": format_answer(style, guess, think)})
        msgs.append({"role": "user", "content": feedback_message(style, played, i + 1, hint)})
    return msgs


_FEEDBACK_RE = {
    "tiles": re.compile(r"[A-Z]:[GYX]( [A-Z]:[GYX])*\n"),
    "xml": re.compile(r"[A-Z]+ -> [GYX]( [GYX])*\n"),
    "brackets": re.compile(r"You submitted \["),
    "plain": re.compile(r"Your guess [A-Z]+ got "),
}


_SPELLED_GUESS = re.compile(r"<guess>[a-z]( [a-z])+</guess>")


def detect_style(conversations) -> tuple[str, bool] | None:
    """``(style name, think)`` of rendered conversations (lists of chat messages), from the first
    feedback message after a played guess; ``None`` when none has one (e.g. only first-turn
    prompts).

    >>> from wordle_rl.engine.game import score
    >>> st = PromptStyle("xml", think=False)
    >>> msgs = render_conversation(st, [("crane", score("crane", "react"))])
    >>> detect_style([msgs]), detect_style([render_conversation(PromptStyle("tiles"), [])])
    (('xml', False), None)
    >>> detect_style([render_conversation(PromptStyle("spelled"), [("crane", 0)])])
    ('spelled', True)
    """
    for messages in conversations:
        think = any(m["role"] == "assistant" and "<think>" in m["content"] for m in messages)
        for before, m in zip(messages, messages[1:]):
            if before["role"] == "assistant" and m["role"] == "user":
                for name, pattern in _FEEDBACK_RE.items():
                    if pattern.match(m["content"]):
                        if name == "tiles" and _SPELLED_GUESS.search(before["content"]):
                            name = "spelled"
                        return name, think
    return None
