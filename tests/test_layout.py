"""The codebase stays one a newcomer can read: one subpackage per layer, imports that point one way
and close no cycle, short modules, 100-column lines, and no experiment history in code (figures and
their history live in docs/)."""

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "src" / "wordle_rl"
# each layer may import only itself and the layers before it
LAYERS = ["engine", "environment", "data", "models", "training", "evaluation", "pipeline", "cli"]
PYTHON = sorted(
    p
    for d in ("src", "tests", "benchmarks")
    for p in (ROOT / d).rglob("*.py")
    if ".egg" not in str(p)
)


def module_name(path: Path) -> str:
    parts = path.relative_to(PKG.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path) -> set[str]:
    """Every wordle_rl module that ``path`` imports, at the top or inside a function (docstring
    examples aside)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("wordle_rl"):
            out.add(node.module)
            out |= {f"{node.module}.{a.name}" for a in node.names}
        elif isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.startswith("wordle_rl")}
    modules = {module_name(p) for p in PKG.rglob("*.py")}
    return {m for m in out if m in modules}


GRAPH = {module_name(p): imports(p) for p in PKG.rglob("*.py")}


def layer(module: str) -> int | None:
    parts = module.split(".")
    return LAYERS.index(parts[1]) if len(parts) > 1 and parts[1] in LAYERS else None


def test_every_module_lives_in_a_layer():
    loose = [m for m in GRAPH if m != "wordle_rl" and layer(m) is None]
    assert loose == []


def test_no_import_runs_up_the_layers():
    up = [
        f"{m} -> {d}"
        for m, deps in GRAPH.items()
        for d in deps
        if layer(m) is not None and layer(d) is not None and layer(d) > layer(m)
    ]
    assert up == []


def test_no_import_cycle():
    state: dict[str, int] = {}
    cycles = []

    def visit(m: str, path: list[str]) -> None:
        state[m] = 1
        for d in sorted(GRAPH.get(m, ())):
            if state.get(d) == 1:
                cycles.append(" -> ".join(path[path.index(d) :] + [d]))
            elif d not in state:
                visit(d, path + [d])
        state[m] = 2

    for m in sorted(GRAPH):
        if m not in state:
            visit(m, [m])
    assert cycles == []


def test_the_checks_see_a_cycle_and_an_upward_import():
    """The two checks above fail on a graph that has what they look for."""
    assert layer("wordle_rl.engine.game") < layer("wordle_rl.cli.main")
    graph = {"a": {"b"}, "b": {"a"}}
    state: dict[str, int] = {}
    found = []

    def visit(m, path):
        state[m] = 1
        for d in graph[m]:
            if state.get(d) == 1:
                found.append(d)
            elif d not in state:
                visit(d, path + [d])
        state[m] = 2

    visit("a", ["a"])
    assert found == ["a"]


def test_every_subpackage_opens_with_a_docstring():
    bare = [
        str(p.relative_to(ROOT))
        for p in PKG.rglob("__init__.py")
        if not ast.get_docstring(ast.parse(p.read_text()))
    ]
    assert bare == []


def test_modules_are_at_most_400_lines():
    long = {
        str(p.relative_to(PKG)): n
        for p in PKG.rglob("*.py")
        if (n := len(p.read_text().splitlines())) > 400
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
