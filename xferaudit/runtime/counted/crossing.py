"""Which way a copy went, and whether it counts: the one rule every part applies.

Pure functions of device types (strings), no torch: the torch wrappers, the
guard and the other packs' wrappers all decide direction here, so they agree.

* ``up``: host -> device; ``down``: device -> host; ``d2d``: device -> a
  device (another one, or the same one: a same-device copy is still a copy on
  the device's wire, shown apart from host<->device traffic); ``none``: nothing
  crossed.
* A device type in the pack's ``no_data`` set (torch's ``meta``) holds no
  data: a copy to or from it moves nothing and is never a crossing.

The torch vocabulary is the default here: ``HOST``, the host's device type
(``cpu``: a tensor there is in host memory), and ``NO_DATA``, the device types
whose tensors have a shape and a dtype but no storage (``meta``), so the
finder does not report ``x.to('meta')`` either. Both are read from the torch
pack's rows (its ``rules.toml``'s ``[devices]`` table) as data, the same data
the finder reads, so the two halves cannot disagree about a device; no torch
import, and no import of the pack (:mod:`xferaudit.packs.torch.devices` takes
them from here).
"""

from __future__ import annotations

from ...rules import load_pack

_DEVICES = load_pack("torch").devices
HOST = min(_DEVICES.host) if _DEVICES.host else "cpu"
NO_DATA = frozenset(_DEVICES.no_data)

__all__ = ["HOST", "NO_DATA", "direction", "is_device", "largest", "nbytes"]


def is_device(device_type: str, host: str = HOST, no_data: frozenset = NO_DATA) -> bool:
    """A device that holds data and is not the host: the side of a crossing."""
    return device_type != host and device_type not in no_data


def direction(src_type: str, dst_type: str, same: bool = False, *, copy: bool = False,
              host: str = HOST, no_data: frozenset = NO_DATA) -> str:
    """The direction of a copy from a `src_type` device to a `dst_type` one.

    `same`: source and destination are the very same device (type and index).
    A move to where a tensor already is returns it and copies nothing
    (``none``), but an explicit copy (`copy`, e.g. ``dst.copy_(src)``) on the
    same device still runs a device-to-device copy (``d2d``).
    """
    if src_type in no_data or dst_type in no_data:
        return "none"
    s_host = src_type == host
    d_host = dst_type == host
    if s_host:
        return "none" if d_host else "up"
    if d_host:
        return "down"
    if same and not copy:
        return "none"
    return "d2d"


def nbytes(numel: int, itemsize: int) -> int:
    """Bytes of `numel` elements of `itemsize` bytes."""
    return numel * itemsize


def largest(per: dict) -> tuple:
    """(direction, total bytes) of a multi-tensor move: the direction that
    moved most bytes, with the bytes of all of them; ``("none", 0)`` if empty."""
    if not per:
        return "none", 0
    return max(per.items(), key=lambda kv: kv[1])[0], sum(per.values())
