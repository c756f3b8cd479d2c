"""What a run records about the machine it ran on: peak memory, the accelerator, and the versions of
its stack; and the memory a finished stage leaves to the next (a training stage runs in a process of
its own, :func:`run_apart`).

    >>> sorted(versions())[:2]
    ['accelerate', 'datasets']
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import platform
import resource

__all__ = ["peak_rss_gib", "peak_gpu_gib", "versions", "release_memory", "rss_gib", "run_apart"]


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


def _libc():
    """The C library, or None where ctypes cannot find one."""
    name = ctypes.util.find_library("c")
    return ctypes.CDLL(name) if name else None


def release_memory() -> bool:
    """Collect garbage and hand the C heap's free pages back to the system (glibc's
    ``malloc_trim``); whether the C library could. A stage run in this process (data, eval) frees
    its arrays into glibc's heap, which keeps the pages: handed back, the next stage starts from a
    small process instead of from the last one's peak."""
    gc.collect()
    libc = _libc()
    if libc is None or not hasattr(libc, "malloc_trim"):  # not glibc: nothing to hand back this way
        return False
    libc.malloc_trim(0)
    return True


def _child(conn, parent: int, target, args) -> None:
    """The body of :func:`run_apart`'s process: ``target(*args)``, then what it raised (or None),
    with its traceback, sent back to the parent. It is killed when the parent dies (Linux), so a
    killed pipeline leaves no stage training on."""
    import os
    import pickle
    import signal
    import traceback

    libc = _libc()
    if libc is not None and hasattr(libc, "prctl"):
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    if os.getppid() != parent:  # the parent died before that took hold
        os._exit(1)
    try:
        target(*args)
    except BaseException as error:  # sent to the parent, which raises it
        try:
            pickle.loads(pickle.dumps(error))
        except Exception:  # one that cannot cross to the parent crosses as its text
            error = RuntimeError(f"{type(error).__name__}: {error}")
        conn.send((error, traceback.format_exc()))
    else:
        conn.send((None, ""))
    finally:
        conn.close()


def run_apart(target, *args, name: str = "stage") -> None:
    """Run ``target(*args)`` (a module-level function, picklable arguments) in a fresh Python
    process and wait for it. A training stage's heap, autograd buffers and thread pools end with
    its process, where in this one glibc would keep the pages: the next stage starts small, and
    the run's peak is its largest stage's. What ``target`` raised is raised here, with its
    traceback as a note; a process that dies without a word (killed, out of memory) raises a
    RuntimeError that says so.

    >>> try:
    ...     run_apart(divmod, 7, 0, name="demo")
    ... except ZeroDivisionError as error:
    ...     print(error.__notes__[0].splitlines()[0])
    raised in the demo process:
    """
    import multiprocessing
    import os

    ctx = multiprocessing.get_context("spawn")
    here, there = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(there, os.getpid(), target, args), name=name)
    try:
        proc.start()
        there.close()
        try:
            outcome = here.recv() if here.poll(None) else None
        except EOFError:  # the process ended before it could say how
            outcome = None
    except BaseException:  # interrupted here, even while starting it: the stage stops too
        if proc.pid is not None:
            proc.terminate()  # its last checkpoint stays for a resume
        raise
    finally:
        if proc.pid is not None:
            proc.join()
    if outcome is None:
        raise RuntimeError(
            f"the {name} process ended with exit code {proc.exitcode} before it finished (killed, "
            f"or out of memory); run the same command again to resume from its last checkpoint"
        )
    error, trace = outcome
    if error is not None:
        error.add_note(f"raised in the {name} process:\n{trace}")
        raise error


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
