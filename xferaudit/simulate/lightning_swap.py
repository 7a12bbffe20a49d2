"""Under the simulation, Lightning's ``"cuda"`` accelerator is the simulated one.

``Trainer(accelerator="gpu")`` (and ``"cuda"``, and ``"auto"``, which picks
CUDA since ``torch.cuda.is_available()`` answers yes) looks ``"cuda"`` up in
Lightning's accelerator registry; the entry is replaced by
:class:`xferaudit.testing_lightning.SimulatedAccelerator` (a
``CUDAAccelerator``), for ``lightning.pytorch``, ``lightning.fabric`` and the
standalone ``pytorch_lightning``/``lightning_fabric`` packages, as each is
imported.
"""

from __future__ import annotations

import importlib
from typing import Any

#: package imported -> (its accelerators module with the registry, the registry's name, the CUDA module)
_WHERE = {
    "lightning.pytorch": ("lightning.pytorch.accelerators", "AcceleratorRegistry",
                          "lightning.pytorch.accelerators.cuda"),
    "pytorch_lightning": ("pytorch_lightning.accelerators", "AcceleratorRegistry",
                          "pytorch_lightning.accelerators.cuda"),
    "lightning.fabric": ("lightning.fabric.accelerators", "ACCELERATOR_REGISTRY",
                         "lightning.fabric.accelerators.cuda"),
    "lightning_fabric": ("lightning_fabric.accelerators", "ACCELERATOR_REGISTRY",
                         "lightning_fabric.accelerators.cuda"),
}


def install(package: Any) -> None:
    where = _WHERE.get(getattr(package, "__name__", ""))
    if where is None:
        return
    accelerators = importlib.import_module(where[0])
    registry = getattr(accelerators, where[1], None)
    base = getattr(importlib.import_module(where[2]), "CUDAAccelerator", None)
    if registry is None or base is None or "cuda" not in registry:
        return
    from .. import testing_lightning

    if package.__name__ in ("lightning.pytorch", "pytorch_lightning") and testing_lightning._base() is base:
        cls = testing_lightning.SimulatedAccelerator
    else:
        cls = testing_lightning.accelerator_class(base)
    registry["cuda"] = dict(registry["cuda"], accelerator=cls)
