"""xferaudit: find, wrap and count host<->device transfer sites.

``import xferaudit`` is light: the static half needs the standard library and
libcst only, and the runtime (``xferaudit.runtime``) imports torch on first use.
"""

__version__ = "0.1.0"
