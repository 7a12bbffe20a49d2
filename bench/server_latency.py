"""How fast does ``xferaudit server`` answer? Over a 1,000-line training file.

The file is ``examples/gpt_train.py`` (190 lines, 14 sites) repeated with
renamed classes until it has about 1,000 lines (the default: 995 lines, 84
sites, a dense case). The server runs as an editor runs it: a subprocess
spoken to in JSON-RPC over stdio (tests/server/lsp_client.py), with no wait
after a change (``initializationOptions: {"debounce": 0}``), so what is timed
is the work, not the wait. Times are wall-clock from sending to receiving, in
milliseconds, median and worst over the repeats:

- ``open``: didOpen -> the first publishDiagnostics (the findings);
- ``change``: didChange (the whole text, one line edited) -> publishDiagnostics
  of that version (the findings);
- ``fixes``: didChange -> the publish whose diagnostics carry their fixes
  (the codemod, run off the event loop after the findings are out);
- ``change during fixes``: didChange sent the moment the previous change's
  findings are out (its fixes being made) -> publishDiagnostics of the new
  version: an edit must not wait for the previous edit's fixes;
- ``codeAction`` and ``hover`` on a finding, once its fix is in ``data``;
- ``change, server CPU``: the server process's own CPU time (user + system,
  from /proc) over the same span as ``change``, the mean of the repeats: what
  the answer costs where the machine is not shared (the wall times above
  stretch with the load average, printed first);
- ``lint in-process``: the engine alone (``lint_source`` on the same text, in
  this process), interleaved with the rest, for comparison.

Target: ``open`` and ``change`` within 100 ms for the 1,000-line file.

    python bench/server_latency.py [--repeat 20] [--copies 6]
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "server"))

from lsp_client import Client  # noqa: E402


def big_file(copies: int) -> str:
    src = (ROOT / "examples" / "gpt_train.py").read_text(encoding="utf-8")
    head, sep, body = src.partition("from torch.utils.data import DataLoader, Dataset\n")
    names = r"\b(Config|TokenDataset|Block|GPT|Trainer|main)\b"
    return head + sep + "".join(re.sub(names, lambda m, i=i: f"{m.group(1)}{i}", body) for i in range(copies))


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (Linux /proc)."""
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def ms(xs: list[float]) -> str:
    return f"median {statistics.median(xs) * 1e3:7.1f} ms   worst {max(xs) * 1e3:7.1f} ms"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--copies", type=int, default=6, help="copies of the example's body (6: ~1,000 lines)")
    a = ap.parse_args()
    text = big_file(a.copies)
    work = Path(tempfile.mkdtemp(prefix="xfa-server-bench-"))
    (work / "pyproject.toml").write_text("[tool.xferaudit]\n")
    path = work / "train.py"
    path.write_text(text, encoding="utf-8")
    print(f"python bench/server_latency.py --repeat {a.repeat} --copies {a.copies}")
    print(f"file: {text.count(chr(10))} lines; {os.cpu_count()} cores; load average {os.getloadavg()[0]:.2f}")

    c = Client(work)
    rows: dict[str, list[float]] = {k: [] for k in ("open", "change", "fixes", "change during fixes",
                                                     "codeAction", "hover", "lint in-process")}
    cpu: list[float] = []
    from xferaudit.config import load_config
    from xferaudit.static.findings.lint import lint_source

    cfg = load_config(work)
    rules = cfg.table()
    try:
        c.initialize(work, {"debounce": 0}, resolve=True)  # as VS Code and Neovim say
        uri = path.as_uri()
        for r in range(a.repeat):
            # a fresh document each round: open, then change
            t = time.perf_counter()
            c.open(path, text, version=1)
            p = c.wait_for("textDocument/publishDiagnostics", lambda q: q["version"] == 1)
            rows["open"].append(time.perf_counter() - t)
            sites = len(p["diagnostics"])
            c.wait_for("textDocument/publishDiagnostics",
                       lambda q: q["version"] == 1 and all("fix" in d["data"] for d in q["diagnostics"]))
            edited = text.replace("lr: float = 3e-4", f"lr: float = {r + 1}e-4", 1)
            t = time.perf_counter()
            lint_source(edited, str(path), cfg, rules)
            rows["lint in-process"].append(time.perf_counter() - t)
            used = cpu_seconds(c.proc.pid)
            t = time.perf_counter()
            c.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": 2},
                                                "contentChanges": [{"text": edited}]})
            c.wait_for("textDocument/publishDiagnostics", lambda q: q["version"] == 2)
            rows["change"].append(time.perf_counter() - t)
            cpu.append(cpu_seconds(c.proc.pid) - used)
            p = c.wait_for("textDocument/publishDiagnostics",
                           lambda q: q["version"] == 2 and all("fix" in d["data"] for d in q["diagnostics"]))
            rows["fixes"].append(time.perf_counter() - t)
            diag = p["diagnostics"][len(p["diagnostics"]) // 2]
            # two edits in a row: the second sent as soon as the first's findings are out
            for v, lr in ((3, r + 2), (4, r + 3)):
                c.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": v}, "contentChanges": [
                    {"text": text.replace("lr: float = 3e-4", f"lr: float = {lr}e-4", 1)}]})
                t = time.perf_counter()
                c.wait_for("textDocument/publishDiagnostics", lambda q, v=v: q["version"] == v)
            rows["change during fixes"].append(time.perf_counter() - t)
            p = c.wait_for("textDocument/publishDiagnostics",
                           lambda q: q["version"] == 4 and all("fix" in d["data"] for d in q["diagnostics"]))
            diag = p["diagnostics"][len(p["diagnostics"]) // 2]
            t = time.perf_counter()
            c.request("textDocument/codeAction", {"textDocument": {"uri": uri}, "range": diag["range"],
                                                  "context": {"diagnostics": [diag], "only": ["quickfix"]}})
            rows["codeAction"].append(time.perf_counter() - t)
            t = time.perf_counter()
            c.request("textDocument/hover", {"textDocument": {"uri": uri}, "position": diag["range"]["start"]})
            rows["hover"].append(time.perf_counter() - t)
            c.notify("textDocument/didClose", {"textDocument": {"uri": uri}})
            c.wait_for("textDocument/publishDiagnostics", lambda q: q["diagnostics"] == [])
        c.shutdown()
    finally:
        c.close()
    print(f"findings: {sites}")
    for name, xs in rows.items():
        print(f"{name:>18}: {ms(xs)}")
    print(f"change, server CPU: mean    {statistics.mean(cpu) * 1e3:7.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
