"""The sites out, as ``check`` reports them: findings, formats, fixes, suppressions.

:mod:`.diagnostics` turns a scan's sites into findings (a code, a message and
what to write instead), :mod:`.formats` writes them (text, JSON, SARIF,
GitHub, GitLab, JUnit), :mod:`.fixes` gives each finding ``wrap`` can rewrite
its edits (:mod:`.edits`: text edits and their hunks), :mod:`.noqa` adds
suppression comments, :mod:`.baseline` keeps the findings a project has
accepted, and :mod:`.lint` is one file's findings from its source, which
``check -``, the flake8 plugin and the editor server share. The codes
themselves are data, in :mod:`xferaudit.static.codes`.
"""
