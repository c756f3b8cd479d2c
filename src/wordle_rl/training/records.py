"""What a training run records beside its model: the resolved config, with the versions of the
libraries it was resolved under.

    save_config(cfg, Path("runs/sft"), "sft")   # runs/sft/wordle_rl_sft_config.json
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

__all__ = ["library_versions", "stack_versions", "save_config"]


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
    path.write_text(json.dumps(fields, default=str, indent=1, sort_keys=True))
    return path
