"""The static half: find, check and rewrite sites (libcst and the standard library only).

Importing the package plugs the value layer (:mod:`.values.sites`) into the
finder's per-file analyses.
"""

from .values import sites as _value_sites

_value_sites.register()
