"""The optional C part of the runtime: the counted path of the scalar-read
wrappers (xferaudit/runtime/counted/_fastcount.c, see xferaudit/runtime/counted/fastpath.py).

Optional: where it cannot be built (no C compiler, Windows, PyPy, a
free-threaded CPython) the install goes on without it and the same wrappers
run in Python. Everything else about the package is in pyproject.toml.

Opt-in: the static value layer (xferaudit/static/values) compiled by mypyc,
when XFERAUDIT_MYPYC=1 is set, mypy is installed and the build is not
isolated (``pip install mypy && XFERAUDIT_MYPYC=1 pip install
--no-build-isolation -e .``). The same source, run as C: its findings are the
pure build's (docs/performance.md, "A compiled value layer"). Off by default,
since it needs mypy and a C compiler at install time, which the pure-Python
static half (a pre-commit hook's install) does without.
"""

import os
import sys
import sysconfig

from setuptools import Extension, setup

ext_modules = []
if (
    sys.implementation.name == "cpython"
    and sys.platform != "win32"
    and not sysconfig.get_config_var("Py_GIL_DISABLED")  # (it reads borrowed references under the GIL)
    and not os.environ.get("XFERAUDIT_PURE_PYTHON")
):
    ext_modules.append(
        Extension("xferaudit.runtime.counted._fastcount", ["xferaudit/runtime/counted/_fastcount.c"], optional=True)
    )

if os.environ.get("XFERAUDIT_MYPYC"):
    from mypyc.build import mypycify  # (a clear ImportError where mypy is missing)

    here = os.path.dirname(os.path.abspath(__file__))
    values = os.path.join("xferaudit", "static", "values")
    # project.py is left as Python (mypyc 2.4 fails on one of its lambdas); __init__ registers the layer
    compiled = sorted(os.path.join(values, f) for f in os.listdir(os.path.join(here, values))
                      if f.endswith(".py") and f not in ("__init__.py", "project.py"))
    ext_modules += mypycify(["--config-file", os.path.join(here, "mypyc.ini"), *compiled], opt_level="3")
    # What each module was built from (its source's CRC-32): the layer names a module whose source
    # has changed since, which would not run (xferaudit/static/values/__init__.py)
    import zlib

    built_from = []
    for path in compiled:
        with open(os.path.join(here, path), "rb") as f:
            built_from.append(f"{os.path.basename(path)} {zlib.crc32(f.read()):08x}\n")
    with open(os.path.join(here, values, "_compiled_from.txt"), "w") as f:
        f.write("# source CRC-32 of each module this build compiled (written by setup.py)\n" + "".join(built_from))

setup(ext_modules=ext_modules)
