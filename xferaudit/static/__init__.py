"""The static half: find, check and rewrite sites (libcst and the standard library only).

One folder a step of the pipeline, each importing only the steps before it
(``tests/test_import_graph.py`` holds this)::

    site.py, codes.py  what a site is; every code ``check`` reports
    front/             one file's text in, its sites out: parse, resolve, classify, find
    values/            what each value is: implicit crossings, method rows re-judged
    codemod/           ``wrap`` / ``unwrap`` / ``--rename-sites``: one file, then a tree of them
    project/           a project's files through the front end: walk, workers, cache, TorchScript
    findings/          the sites as ``check`` reports them: findings, formats, fixes

The value layer (:mod:`.values.sites`) plugs itself into the finder's
per-file analyses when it is imported, and importing this package sees that
it is imported the moment the finder is (a post-import hook,
:func:`xferaudit._after_import.after_import`): whatever imports the finder
gets the value layer with it, and a warm ``check``, which answers every file
from the cache, imports neither.
"""

from .._after_import import after_import as _after_import


def _plug_in_values(_finder) -> None:
    from .values import sites  # noqa: F401  (registers itself in the finder's ANALYSES)


def _raise(exc: Exception) -> None:
    raise exc


_after_import("xferaudit.static.front.finder", _plug_in_values, _raise)
