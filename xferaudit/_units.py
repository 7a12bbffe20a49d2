"""Readable units for the printed tables: bytes and host time.

The tables print what a person reads at a glance (``6.14 kB``, ``0.412``
ms); the JSON keeps the exact figures (integer bytes, seconds to the
nanosecond). Bytes are decimal (1 kB = 1,000 bytes), as the profilers and
``nvidia-smi`` count them.
"""

from __future__ import annotations

_UNITS = ("B", "kB", "MB", "GB", "TB")


def human_bytes(n: float) -> str:
    """``512 B``, ``6.14 kB``, ``1.2 MB``, ``3.4 GB``: three significant digits."""
    v = float(n)
    i = 0
    while abs(v) >= 999.5 and i < len(_UNITS) - 1:
        v /= 1000.0
        i += 1
    if i == 0:
        return f"{int(round(v))} B"
    return f"{v:.3g} {_UNITS[i]}" if abs(v) < 999.5 else f"{v:,.0f} {_UNITS[i]}"


def signed_bytes(n: float) -> str:
    """A change in bytes: ``+6.14 kB``, ``-12 B``, ``0``."""
    if not n:
        return "0"
    return ("+" if n > 0 else "-") + human_bytes(abs(n))


def ms(seconds: float) -> str:
    """Seconds as milliseconds to the microsecond: ``0.412``."""
    return f"{seconds * 1e3:.3f}"


def signed_ms(seconds: float) -> str:
    """A change in time, in milliseconds: ``+0.412``, ``-1.500``, ``0``."""
    return f"{seconds * 1e3:+.3f}" if round(seconds * 1e6) else "0"


def share(part: float, whole: float) -> str:
    """``part`` as a percentage of ``whole``: ``14.5%`` (``-`` when whole is 0)."""
    return f"{100.0 * part / whole:.1f}%" if whole > 0 else "-"
