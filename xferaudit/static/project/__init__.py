"""A project's files through the front end: the walk, the workers, the cache.

:mod:`.scan` lists a project's Python files and notebooks (the config's
includes and excludes) and runs the finder over each, in worker processes
when there are enough bytes to repay them. :mod:`.cache` keeps each file's
findings, keyed by its bytes, the tool's own code and the rows in force.
:mod:`.scripted` and :mod:`.compiled` need the whole project (the walk they
share is :mod:`.reach`): the code TorchScript compiles from another file, whose
sites ``wrap`` leaves and every command reports as left, and the code
``torch.compile`` compiles, where a host read breaks the graph (``XFA601``).
:mod:`.progress` is the progress line of a long run.
``check``, ``sites``, ``wrap`` and the editor server all scan through here.
"""
