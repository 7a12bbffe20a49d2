"""The static half: find, check and rewrite sites (libcst and the standard library only).

Importing the package plugs the value layer (:mod:`.value_sites`) into the
finder's per-file analyses.
"""

from . import value_sites as _value_sites

_value_sites.register()
