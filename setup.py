"""The optional C part of the runtime: the counted path of the scalar-read
wrappers (xferaudit/runtime/counted/_fastcount.c, see xferaudit/runtime/counted/fastpath.py).

Optional: where it cannot be built (no C compiler, Windows, PyPy, a
free-threaded CPython) the install goes on without it and the same wrappers
run in Python. Everything else about the package is in pyproject.toml.
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

setup(ext_modules=ext_modules)
