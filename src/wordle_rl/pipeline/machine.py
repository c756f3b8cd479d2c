"""What a run records about the machine it ran on: peak memory, the accelerator, and the versions of
its stack; and the memory a finished stage leaves to the next.

    >>> sorted(versions())[:2]
    ['accelerate', 'datasets']
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import platform
import resource

__all__ = ["peak_rss_gib", "peak_gpu_gib", "versions", "release_memory", "rss_gib"]


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


def rss_gib() -> float:
    """This process's resident set size now, in GiB (Linux)."""
    with open("/proc/self/status") as f:
        kib = next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))
    return round(kib / 2**20, 2)


def release_memory() -> bool:
    """Collect garbage and hand the C heap's free pages back to the system (glibc's
    ``malloc_trim``); whether the C library could. A training stage frees its tensors into glibc's
    heap, which keeps the pages: handed back, the next stage starts from a small process instead of
    from the last one's peak."""
    gc.collect()
    name = ctypes.util.find_library("c")
    libc = ctypes.CDLL(name) if name else None
    if libc is None or not hasattr(libc, "malloc_trim"):  # not glibc: nothing to hand back this way
        return False
    libc.malloc_trim(0)
    return True


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
