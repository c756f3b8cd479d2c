"""What a run records about the machine it ran on: peak memory, the accelerator, and the versions of
its stack.

    >>> sorted(versions())[:2]
    ['accelerate', 'datasets']
"""

from __future__ import annotations

import platform
import resource

__all__ = ["peak_rss_gib", "peak_gpu_gib", "versions"]


def peak_rss_gib() -> float:
    """The largest resident set size so far of this process or any of its finished children, in GiB
    (Linux).

    >>> 0 < peak_rss_gib() < 1024
    True
    """
    kib = max(
        resource.getrusage(who).ru_maxrss
        for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
    )
    return round(kib / 2**20, 2)


def peak_gpu_gib() -> float | None:
    """The most CUDA memory this process's tensors have held so far, in GiB; None without CUDA."""
    import torch

    if not torch.cuda.is_available():
        return None
    return round(torch.cuda.max_memory_allocated() / 2**30, 2)


def versions() -> dict:
    import torch

    from wordle_rl.training.records import library_versions

    packages = "wordle-rl torch transformers trl datasets peft accelerate numpy numba openenv"
    here = {"python": platform.python_version(), "platform": platform.platform()}
    if torch.cuda.is_available():
        here["gpu"] = torch.cuda.get_device_name()
    return here | library_versions(packages.split())
