"""torch's device vocabulary: which device types are the host, and which hold no data.

Read from the pack's own rows (``rules.toml``, its ``[devices]`` table) by the
crossing rules (:mod:`xferaudit.runtime.counted.crossing`), which hold them so
that the runtime needs no import of this pack; named here too, for the pack's
own code. The runtime's wrappers, its guard and the crossing rules all read
the same two values.

* ``HOST``: the host's device type. A tensor there is in host memory.
* ``NO_DATA``: device types whose tensors have a shape and a dtype but no
  storage (``meta``). Moving a tensor to or from one copies nothing, so it is
  never a crossing (the finder does not report ``x.to('meta')`` either).
"""

from __future__ import annotations

from ...runtime.counted.crossing import HOST, NO_DATA

__all__ = ["HOST", "NO_DATA"]
