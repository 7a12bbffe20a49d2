"""Worker processes that end with the run that started them.

``check`` and ``wrap`` analyse files on a process pool. When the run is killed
(SIGKILL, an OOM killer, a CI job cancelled), its workers must not go on
computing for a minute: :func:`die_with_parent`, called first in each worker,
asks Linux to send the worker SIGKILL when its parent process ends
(``prctl(PR_SET_PDEATHSIG)``), and a worker started by a fork server (whose
parent is the server, not the run) also watches the run's process and exits
when it ends. Ctrl-C is the run's to handle: workers ignore SIGINT,
and the run stops them and says what it had done. Elsewhere than Linux this
does nothing beyond ignoring SIGINT.
"""

from __future__ import annotations

import os
import signal
import sys
import threading

PR_SET_PDEATHSIG = 1


def die_with_parent(run_pid: int = 0) -> None:
    """Make this (worker) process end with its parent, and leave SIGINT to the run.

    `run_pid`: the process of the run; if it has already gone (it died
    between starting this worker and this call), exit at once.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if not sys.platform.startswith("linux"):  # pragma: no cover - Linux only
        return
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):  # pragma: no cover - no libc prctl
        return
    if os.getppid() == 1 or (run_pid and not _alive(run_pid)):
        os._exit(1)
    if run_pid and run_pid != os.getppid():
        # Started by a fork server, which outlives the run while its children
        # live: watch the run itself.
        import threading

        threading.Thread(target=_watch, args=(run_pid,), name="xferaudit-watch", daemon=True).start()


def _watch(run_pid: int) -> None:
    """Exit this process when `run_pid` ends (a pidfd where Linux has one, else a poll)."""
    import select
    import time

    try:
        fd = os.pidfd_open(run_pid)
    except (AttributeError, OSError):
        fd = None
    if fd is not None:
        select.select([fd], [], [])
        os._exit(1)
    while _alive(run_pid):  # pragma: no cover - kernels before 5.3
        time.sleep(1.0)
    os._exit(1)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


class KeptInterrupt:
    """Ctrl-C that cannot be lost while a run writes files.

    Python raises KeyboardInterrupt wherever the main thread is when the signal
    is handled; inside a finalizer (a garbage collection that runs ``__del__``
    or a weakref callback) it is printed as "Exception ignored" and the run
    goes on, to the end. While this is open (in the main thread, over Python's
    own handler), a Ctrl-C is also noted, and :meth:`check` raises it again at
    the run's next safe point.
    """

    def __init__(self) -> None:
        self._seen = False
        self._active = (threading.current_thread() is threading.main_thread()
                        and signal.getsignal(signal.SIGINT) is signal.default_int_handler)
        if self._active:
            signal.signal(signal.SIGINT, self._handler)

    def _handler(self, signum: int, frame: object) -> None:
        self._seen = True
        raise KeyboardInterrupt

    def check(self) -> None:
        """Raise the KeyboardInterrupt of a Ctrl-C that something swallowed."""
        if self._seen:
            self._seen = False
            raise KeyboardInterrupt

    def close(self) -> None:
        if self._active:
            self._active = False
            signal.signal(signal.SIGINT, signal.default_int_handler)
