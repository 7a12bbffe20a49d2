"""The project passes' three maps, remembered: what TorchScript compiles from
other files (``scripted``, :mod:`.scripted`), what ``torch.compile`` compiles
(``compiled``, :mod:`.compiled`) and the helpers that place what they return
(``placed``, :mod:`.placed`). Each is kept in this process (its pass module's
``_MEMO``) and beside the findings cache, under the project's state, so that a
later run over the same project reads it instead of walking the project again.

Light on purpose: a warm ``check`` reads two of the maps here, and imports
neither the finder nor the value layer (the placing helpers' slot, which
imports the value layer's project module, is made only when asked for)."""

from __future__ import annotations

from typing import Optional

from .reach import recall

NAMES = ("scripted", "compiled", "placed")


def _slot(name: str, project, gpu_first: bool) -> tuple:
    """(memo, key, shape check) of the map `name`."""
    if name == "scripted":
        from . import scripted

        return scripted._MEMO, project.state, scripted._checked
    if name == "compiled":
        from . import compiled

        return compiled._MEMO, project.state, compiled.checked
    from ..values.project import checked
    from . import placed

    return placed._MEMO, placed.placed_key(project, gpu_first), checked


def remembered(project, cfg, cache, names: tuple = NAMES) -> Optional[tuple]:
    """The maps `names` (in that order) where all are remembered (in this
    process, or beside the findings cache), kept in this process where the
    passes find them; else None."""
    gpu_first = getattr(cfg, "implicit", "gpu-first") == "gpu-first"
    got = []
    for name in names:
        memo, key, check = _slot(name, project, gpu_first)
        value = recall(memo, name, key, cache, check)
        if value is None:
            return None
        got.append(value)
    keep(project, gpu_first, None, got, names)
    return tuple(got)


def keep(project, gpu_first: bool, cache, values: list, names: tuple = NAMES) -> None:
    """Remember the maps `names` (`values`, in that order) in this process and,
    where `cache` is given, beside the findings cache."""
    for name, value in zip(names, values):
        memo, key, _ = _slot(name, project, gpu_first)
        if cache is not None:
            cache.side_put(name, key, value)
        memo.clear()  # (one project per process, in practice)
        memo[key] = value
