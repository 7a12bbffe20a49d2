"""A Lightning accelerator for the simulated device: :class:`SimulatedAccelerator`.

Lightning takes a plain device it does not know for the CPU's and refuses
it (``MisconfigurationException: Device should be CPU, got fakegpu:0``). This
accelerator gives Lightning the simulated device of :mod:`xferaudit.testing`
as a GPU: it is a ``CUDAAccelerator`` (so Lightning takes the GPU's paths:
its mixed precision, its device logging), with one device, ``fakegpu:0``::

    from xferaudit.testing_lightning import SimulatedAccelerator

    trainer = L.Trainer(accelerator=SimulatedAccelerator(), devices=1, max_epochs=1)
    trainer.fit(model, loader)          # the batches cross to fakegpu:0, counted

Under ``xferaudit run --simulate`` (or ``XFERAUDIT_SIMULATE=1``) nothing needs
changing in the program: ``Trainer(accelerator="gpu")``, ``"cuda"`` and
``"auto"`` get this accelerator (:mod:`xferaudit.simulate.lightning_swap`).

For ``lightning.pytorch`` (else the ``pytorch_lightning`` package);
:func:`accelerator_class` makes the same for another base
(``lightning.fabric``'s ``CUDAAccelerator``). Importing this module without
Lightning installed is fine; using :class:`SimulatedAccelerator` then
raises ``ImportError``.
"""

from __future__ import annotations

from typing import Any

__all__ = ["SimulatedAccelerator", "accelerator_class"]  # noqa: F822 - made on first use (__getattr__)


def accelerator_class(base: type, name: str = "SimulatedAccelerator") -> type:
    """A subclass of Lightning's (or Fabric's) `base` ``CUDAAccelerator`` on the simulated device."""

    def simulated() -> Any:
        from .testing import simulated_device

        return simulated_device()

    def _one(devices: Any) -> list:
        if devices in (1, -1, "1", "-1", "auto", [0], (0,), "0,", "0") or devices is None:
            return [0]
        raise ValueError(
            f"devices={devices!r}: the simulated device is one device; use devices=1 (several GPUs "
            "cannot be simulated)")

    def setup_device(self: Any, device: Any) -> None:
        if device.type not in (simulated().type, "cuda"):
            raise ValueError(f"{name}: device should be the simulated device, got {device}")

    def setup(self: Any, trainer: Any) -> None:
        pass

    def teardown(self: Any) -> None:
        pass

    def get_device_stats(self: Any, device: Any) -> dict:
        return {}

    namespace = {
        "__doc__": f"Lightning's {base.__name__} on the simulated device (``fakegpu:0``), one device.",
        "__module__": __name__,
        "setup_device": setup_device,
        "setup": setup,
        "teardown": teardown,
        "get_device_stats": get_device_stats,
        "parse_devices": staticmethod(_one),
        "get_parallel_devices": staticmethod(lambda devices: [simulated()]),
        "auto_device_count": staticmethod(lambda: 1),
        "is_available": staticmethod(lambda: True),
    }
    cls = type(name, (base,), namespace)
    cls.__qualname__ = name
    return cls


def _base() -> type:
    try:
        from lightning.pytorch.accelerators.cuda import CUDAAccelerator
    except ImportError:
        try:
            from pytorch_lightning.accelerators.cuda import CUDAAccelerator  # type: ignore[no-redef]
        except ImportError as e:
            raise ImportError("xferaudit.testing_lightning needs Lightning (pip install lightning)") from e
    return CUDAAccelerator


_made: list = []


def __getattr__(name: str) -> Any:
    # Made on first use: importing this module imports no Lightning (it may be
    # imported while Lightning itself is being imported).
    if name == "SimulatedAccelerator":
        if not _made:
            _made.append(accelerator_class(_base()))
        return _made[0]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
