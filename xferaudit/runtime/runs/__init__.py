"""Runs: an unmodified program counted whole, and budgets checked on it.

``runner`` (``xferaudit run``: the program run as Python would, counting and
the guard on), ``run_hooks`` (launches and optimizer steps counted without
wrappers), ``programs`` (the program's ``__main__``), and ``budget``
(``xfer.expect``, ``xferaudit budget``). The top layer under
``xferaudit.runtime`` itself.
"""
