"""The project's helpers that place what they return, for ``check``, ``wrap``
and the editor: :func:`..values.project.placed_in_project` over the project's
files, remembered until a file of the project changes (in this process, and
beside the findings cache, like :func:`.scripted.for_check`)."""

from __future__ import annotations

import hashlib
import os
from typing import Callable

from ..values.project import checked, placed_in_project
from .reach import recall
from .scripted import Project


#: this process's maps, by the project's state
_MEMO: dict = {}


def for_check(project: Project, cfg, cache=None) -> dict:
    """:func:`placed_in_project` over the project's files (`project`, as the
    TorchScript pass reads them), remembered until a file of the project
    changes: in this process, and in the findings cache (`cache`), where the
    next run finds it."""
    return start(project, cfg, cache)()


#: From this many files on, the pass runs in a process of its own while the
#: caller does the TorchScript pass (one core each; torch's tree: 0.7 s saved).
BESIDE_MIN_FILES = 400


def placed_key(project: Project, gpu_first: bool) -> str:
    """The map's key: the project's state and the reading (`gpu_first`)."""
    return hashlib.blake2b(repr((gpu_first, project.state)).encode(), digest_size=16).hexdigest()


def start(project: Project, cfg, cache=None) -> Callable[[], dict]:
    """:func:`for_check`, begun: the map is had by calling what this returns.
    A large project's pass runs in a forked process meanwhile (where forking
    is safe: this process has one thread), a small one's when asked for."""
    files = project.files
    gpu_first = getattr(cfg, "implicit", "gpu-first") == "gpu-first"
    key = placed_key(project, gpu_first)
    got = recall(_MEMO, "placed", key, cache, checked)
    if got is not None:
        return _keep(key, got)
    pool = future = None
    if len(files) >= BESIDE_MIN_FILES and _one_thread():
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        from ..._workers import die_with_parent

        pool = ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("fork"),
                                   initializer=die_with_parent, initargs=(os.getpid(),))
        future = pool.submit(_job, files, cfg, gpu_first)

    def result() -> dict:
        if future is not None:
            try:
                value = future.result()
            finally:
                pool.shutdown()
        else:
            value = _job(files, cfg, gpu_first)
        if cache is not None:
            cache.side_put("placed", key, value)
        return _keep(key, value)()

    return result


def _job(files: list, cfg, gpu_first: bool) -> dict:
    return placed_in_project(files, lambda p: cfg.relpath(os.path.abspath(p)), gpu_first)


def _keep(key: str, value: dict) -> Callable[[], dict]:
    _MEMO.clear()  # (one project per process, in practice)
    _MEMO[key] = value
    return lambda: value


def _one_thread() -> bool:
    """This process has one OS thread (forking it is then safe)."""
    try:
        return len(os.listdir("/proc/self/task")) == 1
    except OSError:  # pragma: no cover - not Linux
        return False


