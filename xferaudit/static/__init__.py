"""The static half: find, check and rewrite sites (libcst and the standard library only).

One folder a step of the pipeline, each importing only the steps before it
(``tests/test_import_graph.py`` holds this)::

    site.py, codes.py  what a site is; every code ``check`` reports
    front/             one file's text in, its sites out: parse, resolve, classify, find
    values/            what each value is: implicit crossings, method rows re-judged
    codemod/           ``wrap`` / ``unwrap`` / ``--rename-sites``: one file, then a tree of them
    project/           a project's files through the front end: walk, workers, cache, TorchScript
    findings/          the sites as ``check`` reports them: findings, formats, fixes

Importing the package plugs the value layer (:mod:`.values.sites`) into the
finder's per-file analyses.
"""

from .values import sites as _value_sites

_value_sites.register()
