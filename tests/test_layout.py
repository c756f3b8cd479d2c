"""The codebase stays one a newcomer can read: short modules, 100-column lines, and no experiment
history in code (figures and their history live in docs/)."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PYTHON = sorted(
    p
    for d in ("src", "tests", "benchmarks")
    for p in (ROOT / d).rglob("*.py")
    if ".egg" not in str(p)
)


def test_modules_are_at_most_450_lines():
    long = {
        p.name: n
        for p in (ROOT / "src").rglob("*.py")
        if (n := len(p.read_text().splitlines())) > 450
    }
    assert long == {}


def test_lines_are_at_most_100_characters():
    wide = [
        f"{p.relative_to(ROOT)}:{i}"
        for p in PYTHON
        for i, line in enumerate(p.read_text().splitlines(), 1)
        if len(line) > 100
    ]
    assert wide == []


def test_no_experiment_history_under_src():
    history = re.compile(r"RESULTS\.md|\b[Rr]ound \d|\b[Ss]ession \d|\bp = 0\.\d")
    hits = [
        f"{p.relative_to(ROOT)}:{i}"
        for p in (ROOT / "src").rglob("*.py")
        for i, line in enumerate(p.read_text().splitlines(), 1)
        if history.search(line)
    ]
    assert hits == []
