"""A small Language Server Protocol client: `xferaudit server` started as a
subprocess and spoken to over its standard input and output, with JSON-RPC
framed by Content-Length headers, as an editor does. Used by the server's
tests and by bench/server_latency.py."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable, Optional

ROOT = Path(__file__).resolve().parents[2]


class Client:
    def __init__(self, cwd: Path, env: Optional[dict] = None) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "xferaudit", "server"], cwd=cwd,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
        )
        self.messages: "queue.Queue[dict]" = queue.Queue()
        self.notifications: list[dict] = []
        self.next_id = 0
        self.server_requests: list[dict] = []
        threading.Thread(target=self._read, daemon=True).start()

    # --- framing ---------------------------------------------------------------------------

    def _read(self) -> None:
        out = self.proc.stdout
        while True:
            length = None
            while True:
                line = out.readline()
                if not line:
                    return
                if line in (b"\r\n", b"\n"):
                    break
                name, _, value = line.decode("ascii").partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value)
            if length is None:
                continue
            self.messages.put(json.loads(out.read(length)))

    def send(self, msg: dict) -> None:
        body = json.dumps({"jsonrpc": "2.0", **msg}).encode("utf-8")
        self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self.proc.stdin.flush()

    def _next(self, deadline: float) -> dict:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("no message from the server in time")
        msg = self.messages.get(timeout=left)
        if "method" in msg and "id" in msg:  # a request of the server's (e.g. showMessage requests)
            self.server_requests.append(msg)
            self.send({"id": msg["id"], "result": None})
        elif "method" in msg:
            self.notifications.append(msg)
        return msg

    # --- requests and notifications -----------------------------------------------------------

    def request(self, method: str, params: Any, timeout: float = 60) -> Any:
        self.next_id += 1
        rid = self.next_id
        self.send({"id": rid, "method": method, "params": params})
        deadline = time.monotonic() + timeout
        while True:
            msg = self._next(deadline)
            if msg.get("id") == rid and "method" not in msg:
                if "error" in msg:
                    raise RuntimeError(msg["error"])
                return msg.get("result")

    def notify(self, method: str, params: Any) -> None:
        self.send({"method": method, "params": params})

    def wait_for(self, method: str, pred: Callable[[dict], bool] = lambda p: True, timeout: float = 60) -> dict:
        """The first notification `method` (already received or to come) whose params satisfy `pred`."""
        for i, n in enumerate(self.notifications):
            if n["method"] == method and pred(n["params"]):
                return self.notifications.pop(i)["params"]
        deadline = time.monotonic() + timeout
        while True:
            msg = self._next(deadline)
            if msg.get("method") == method and "id" not in msg and pred(msg["params"]):
                self.notifications.remove(msg)
                return msg["params"]

    # --- the usual sequence -----------------------------------------------------------------

    def initialize(self, root: Path, options: Optional[dict] = None, resolve: bool = False) -> dict:
        """`resolve`: say, as VS Code and Neovim do, that a code action's edit
        may come later, from codeAction/resolve."""
        text_document: dict = {"publishDiagnostics": {"versionSupport": True}}
        if resolve:
            text_document["codeAction"] = {"resolveSupport": {"properties": ["edit"]}}
        result = self.request("initialize", {
            "processId": os.getpid(), "rootUri": root.as_uri(),
            "capabilities": {"textDocument": text_document},
            "initializationOptions": options or {},
        })
        self.notify("initialized", {})
        return result

    def open(self, path: Path, text: str, version: int = 1) -> str:
        uri = path.as_uri()
        self.notify("textDocument/didOpen", {"textDocument": {
            "uri": uri, "languageId": "python", "version": version, "text": text}})
        return uri

    def shutdown(self, timeout: float = 30) -> int:
        self.request("shutdown", None)
        self.notify("exit", None)
        try:
            return self.proc.wait(timeout=timeout)
        finally:
            self.close()

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        for f in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            try:
                f.close()
            except OSError:
                pass
