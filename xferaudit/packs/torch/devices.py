"""torch's device vocabulary: which device types are the host, and which hold no data.

Read from the pack's own rows (``rules.toml``, its ``[devices]`` table), the
same data the finder reads, so the two halves cannot disagree about a device;
no torch import. The runtime's wrappers, its guard and the crossing rules
(:mod:`xferaudit.runtime.crossing`) all read it from here.

* ``HOST``: the host's device type. A tensor there is in host memory.
* ``NO_DATA``: device types whose tensors have a shape and a dtype but no
  storage (``meta``). Moving a tensor to or from one copies nothing, so it is
  never a crossing (the finder does not report ``x.to('meta')`` either).
"""

from __future__ import annotations

from ...rules import load_pack

_DEVICES = load_pack("torch").devices
HOST = min(_DEVICES.host) if _DEVICES.host else "cpu"
NO_DATA = frozenset(_DEVICES.no_data)
