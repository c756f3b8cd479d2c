"""Files written whole or not at all, so that a job killed at any moment leaves no torn file behind.

    write_atomic(path, text)            # a temporary file beside it, then one rename
    replace_dir(path, fill)             # fill(tmp_folder), then swap it in for path
    repair_jsonl(path, keep)            # after a kill: only whole lines (that ``keep`` accepts)

A rename within one folder is atomic on POSIX filesystems: a reader, or a rerun after SIGKILL, sees
the old file or the new one, never a mix. Appended JSONL logs cannot be written that way; a run that
resumes calls :func:`repair_jsonl` on them first, which drops a torn last line and the records of
the steps it will play again. The engine layer holds it, so every layer may use it; it imports no
other module of the package.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

__all__ = ["write_atomic", "stale_temps", "replace_dir", "whole_records", "repair_jsonl"]


def _alive(pid: int) -> bool:
    """Whether a process with this id exists (one of another user's counts as alive)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def stale_temps(path: str | Path) -> list[Path]:
    """The temporary files that writes of ``path`` by processes no longer alive left beside it
    (a job killed between creating one and its rename); a live writer's file is not among them."""
    path = Path(path)
    prefix = f".{path.name}."
    out = []
    for tmp in path.parent.glob(f"{glob.escape(prefix)}*.tmp"):
        pid = tmp.name[len(prefix) :].split(".", 1)[0]
        if pid.isdigit() and not _alive(int(pid)):
            out.append(tmp)
    return out


def write_atomic(path: str | Path, text: str | bytes) -> Path:
    """Write ``text`` (or bytes) to ``path`` through a temporary file in the same folder and one
    rename. The temporary file's name holds the writer's process id, so that the next write of
    ``path`` removes what a killed writer left (:func:`stale_temps`).

    >>> import tempfile; d = Path(tempfile.mkdtemp())
    >>> write_atomic(d / "a" / "x.json", "{}").read_text(), [p.name for p in (d / "a").iterdir()]
    ('{}', ['x.json'])
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    for leftover in stale_temps(path):
        leftover.unlink(missing_ok=True)
    fd, tmp = tempfile.mkstemp(
        dir=path.parent, prefix=f".{path.name}.{os.getpid()}.", suffix=".tmp"
    )
    try:
        binary = isinstance(text, bytes)
        with os.fdopen(fd, "wb" if binary else "w", encoding=None if binary else "utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException as e:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(e, OSError) and e.filename is None:  # say which file could not be written
            raise OSError(e.errno, e.strerror, str(path)) from e
        raise
    return path


def replace_dir(path: str | Path, fill: Callable[[Path], object]) -> Path:
    """Build a folder with ``fill(tmp)`` beside ``path``, then swap it in for ``path``: the old
    folder is renamed aside before the new one takes its name, and only then removed. Leftovers of
    an earlier killed call are removed first; a ``fill`` that fails leaves ``path`` as it was and
    nothing beside it.

    >>> import tempfile; d = Path(tempfile.mkdtemp())
    >>> _ = replace_dir(d / "m", lambda t: (t / "w").write_text("1"))
    >>> _ = replace_dir(d / "m", lambda t: (t / "w").write_text("2"))
    >>> (d / "m" / "w").read_text(), sorted(p.name for p in d.iterdir())
    ('2', ['m'])
    """
    path = Path(path)
    tmp, old = path.with_name(f".{path.name}.tmp"), path.with_name(f".{path.name}.old")
    for leftover in (tmp, old):
        if leftover.exists():
            shutil.rmtree(leftover)
    tmp.mkdir(parents=True)
    try:
        fill(tmp)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if path.exists():
        path.rename(old)
    tmp.rename(path)
    if old.exists():
        shutil.rmtree(old)
    return path


def whole_records(path: str | Path) -> tuple[list[dict], int]:
    """The records of a JSONL file that are whole (a complete line that parses as a JSON object),
    and how many lines were not; ``([], 0)`` for a missing file.

    >>> import tempfile; p = Path(tempfile.mkdtemp()) / "log.jsonl"
    >>> _ = p.write_text('{"step": 0}\\n{"step": 2}\\n{"ste')
    >>> whole_records(p)
    ([{'step': 0}, {'step': 2}], 1)
    """
    path = Path(path)
    if not path.is_file():
        return [], 0
    records, bad = [], 0
    for line in path.read_text(encoding="utf-8").splitlines(keepends=True):
        if not line.strip():
            continue
        try:
            rec = json.loads(line) if line.endswith("\n") else None
        except json.JSONDecodeError:
            rec = None
        if isinstance(rec, dict):
            records.append(rec)
        else:
            bad += 1
    return records, bad


def repair_jsonl(path: str | Path, keep: Callable[[dict], bool] = lambda rec: True) -> int:
    """Rewrite a JSONL file with only its whole records that ``keep`` accepts (atomically; nothing
    when the file is missing). Returns how many lines went.

    >>> import tempfile; p = Path(tempfile.mkdtemp()) / "log.jsonl"
    >>> _ = p.write_text('{"step": 0}\\n{"step": 2}\\n{"step": 4}\\n{"ste')
    >>> repair_jsonl(p, lambda r: r["step"] <= 2), p.read_text()
    (2, '{"step": 0}\\n{"step": 2}\\n')
    """
    path = Path(path)
    if not path.is_file():
        return 0
    records, bad = whole_records(path)
    kept = [r for r in records if keep(r)]
    dropped = bad + len(records) - len(kept)
    if dropped:
        write_atomic(path, "".join(json.dumps(r) + "\n" for r in kept))
    return dropped
