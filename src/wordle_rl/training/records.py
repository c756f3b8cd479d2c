"""What a training run records beside its model: the resolved config, with the versions of the
libraries it was resolved under; and which of its checkpoints a resumed run can start from.

    save_config(cfg, Path("runs/sft"), "sft")   # runs/sft/wordle_rl_sft_config.json
    last_checkpoint(Path("runs/sft"))           # runs/sft/checkpoint-N, the newest whole one
"""

from __future__ import annotations

import json
import logging
import re
import shutil
from dataclasses import asdict
from pathlib import Path

from wordle_rl.engine.storage import write_atomic

__all__ = ["library_versions", "stack_versions", "save_config", "last_checkpoint"]

log = logging.getLogger(__name__)


def library_versions(packages) -> dict[str, str | None]:
    """The installed version of each package named (``None`` for one that is not installed).

    >>> library_versions(["no-such-package-here"])
    {'no-such-package-here': None}
    """
    from importlib.metadata import PackageNotFoundError, version

    out: dict[str, str | None] = {}
    for pkg in packages:
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            out[pkg] = None
    return out


def stack_versions() -> dict[str, str | None]:
    """The transformers and TRL versions installed: the libraries whose config fields a resolved
    config holds."""
    return library_versions(("transformers", "trl"))


def save_config(cfg, out: Path, name: str) -> Path:
    """The resolved config, saved as ``wordle_rl_{name}_config.json`` in ``out``: what
    ``wordle-rl sft|grpo --config`` reads back (values JSON cannot hold are written as text),
    with the library versions it was resolved under as ``_saved_with``."""
    path = out / f"wordle_rl_{name}_config.json"
    fields = asdict(cfg) | {"_saved_with": stack_versions()}
    return write_atomic(path, json.dumps(fields, default=str, indent=1, sort_keys=True))


def last_checkpoint(out: str | Path) -> Path | None:
    """The newest whole ``checkpoint-N`` folder in ``out`` (None when there is none).

    The Trainer writes a checkpoint's ``trainer_state.json`` last, after the weights, optimizer,
    scheduler and RNG states; a checkpoint without one that parses was cut short by a kill, and is
    removed, so that the run resumes from the one before and later saves that step whole.

    >>> import tempfile; d = Path(tempfile.mkdtemp())
    >>> for n, state in ((2, "{}"), (4, "{}"), (6, '{"glo')):
    ...     (d / f"checkpoint-{n}").mkdir()
    ...     _ = (d / f"checkpoint-{n}" / "trainer_state.json").write_text(state)
    >>> last_checkpoint(d).name, sorted(p.name for p in d.iterdir())
    ('checkpoint-4', ['checkpoint-2', 'checkpoint-4'])
    """
    out = Path(out)
    if not out.is_dir():
        return None
    found = [
        (int(m.group(1)), p)
        for p in out.iterdir()
        if p.is_dir() and (m := re.fullmatch(r"checkpoint-(\d+)", p.name))
    ]
    for _, path in sorted(found, reverse=True):
        try:
            json.loads((path / "trainer_state.json").read_text())
            return path
        except (OSError, json.JSONDecodeError):
            log.warning("%s was cut short (no whole trainer_state.json): removed", path)
            shutil.rmtree(path)
    return None
