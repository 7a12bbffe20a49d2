"""How long does ``xferaudit server`` take on many sites on one line, and does
it answer meanwhile?

A file whose one long line holds N sites (``y = (x.item(), x.item(), ...)``)
is opened in the server (a subprocess spoken to over stdio, as an editor
does, with no wait after a change and the fixes held back: ``fixDelay`` 60 s).
Timed, wall clock, in seconds:

- ``publish``: didOpen -> the first publishDiagnostics (every finding, its
  range in the client's UTF-16 columns);
- ``hover``: a hover request on another (small, checked) document sent 50 ms
  after didOpen -> its answer (the event loop must not be blocked by the
  long document's check);
- ``lint in-process``: ``lint_source`` on the same text in this process (the
  engine alone, what ``check`` costs).

    python bench/server_one_line.py OUT_DIR [--sites 6000 20000] [--timeout 180]

writes OUT_DIR/server_one_line.json and .txt.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "server"))

from lsp_client import Client  # noqa: E402


def one_line(n: int) -> str:
    # (a character beyond the BMP before the sites: UTF-16 columns differ from characters)
    return ("import torch\n\nx = torch.ones(3, device='cuda')\n"
            "y = ('\U0001F600', " + ", ".join(["x.item()"] * n) + ")\n")


def measure(n: int, timeout: float) -> dict:
    text = one_line(n)
    work = Path(tempfile.mkdtemp(prefix="xfa-one-line-"))
    (work / "pyproject.toml").write_text("[tool.xferaudit]\n")
    path = work / "t.py"
    path.write_text(text, encoding="utf-8")
    out: dict = {"sites": n, "line_chars": len(text.splitlines()[-1])}
    from xferaudit.config import load_config
    from xferaudit.static.findings.lint import lint_source

    cfg = load_config(work)
    t = time.perf_counter()
    linted = lint_source(text, str(path), cfg, cfg.table())
    out["lint_in_process_s"] = round(time.perf_counter() - t, 3)
    out["findings_in_process"] = len(linted.diags)
    c = Client(work)
    try:
        c.initialize(work, {"debounce": 0, "fixDelay": 60})
        uri = path.as_uri()
        small = work / "small.py"
        small.write_text("import torch\n")
        c.open(small, "import torch\n")
        c.wait_for("textDocument/publishDiagnostics", lambda q: q["uri"] == small.as_uri())
        c.open(path, text)
        t0 = time.perf_counter()
        time.sleep(0.05)
        c.next_id += 1
        rid = c.next_id
        c.send({"id": rid, "method": "textDocument/hover",
                "params": {"textDocument": {"uri": small.as_uri()}, "position": {"line": 0, "character": 1}}})
        deadline = time.monotonic() + timeout
        try:
            while out.get("hover_s") is None or out.get("publish_s") is None:
                msg = c._next(deadline)
                if msg.get("id") == rid and "method" not in msg:
                    out["hover_s"] = round(time.perf_counter() - t0, 3)
                elif msg.get("method") == "textDocument/publishDiagnostics" and msg["params"]["uri"] == uri:
                    out["publish_s"] = round(time.perf_counter() - t0, 3)
                    out["findings"] = len(msg["params"]["diagnostics"])
                    out["last_range"] = msg["params"]["diagnostics"][-1]["range"]
        except Exception:  # (queue.Empty / TimeoutError: no answer in time)
            out["publish_error"] = f"no answer within {timeout} s"
    finally:
        c.close()
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--sites", type=int, nargs="+", default=[6000, 20000])
    ap.add_argument("--timeout", type=float, default=180)
    a = ap.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    rows = [measure(n, a.timeout) for n in a.sites]
    head = f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f}"
    (a.out / "server_one_line.json").write_text(json.dumps({"machine": head, "rows": rows}, indent=1))
    lines = [f"python bench/server_one_line.py {a.out} --sites {' '.join(map(str, a.sites))}", head]
    for r in rows:
        lines.append(f"{r['sites']:>6} sites on one line ({r['line_chars']} chars): publish {r.get('publish_s')} s, "
                     f"hover {r.get('hover_s')} s, lint in-process {r['lint_in_process_s']} s, "
                     f"findings {r.get('findings')}" + (f" [{r['publish_error']}]" if "publish_error" in r else ""))
    (a.out / "server_one_line.txt").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
