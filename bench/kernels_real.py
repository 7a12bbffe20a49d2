"""Real code with GPU kernels (issue 42): findings before and after, and that
``wrap`` changes no line inside a kernel.

    python bench/kernels_real.py OUT_DIR TREE [TREE ...] [--before /path/to/older/checkout]

For each tree (an extracted wheel or sdist: liger-kernel, mamba-ssm): the
findings of ``xferaudit check`` (with --before, also those of that checkout's
code, e.g. /work/main), how many of the older findings fall inside a kernel,
then ``wrap`` on a copy of the tree and, file by file, every kernel's bytes
compared before and after. Writes ``kernels_real.json`` and ``.txt`` to OUT_DIR.
Needs libcst (the codemod): not for the GPU image.
"""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]


def _findings(tree: Path, code: Path) -> list:
    env = dict(os.environ, PYTHONPATH=str(code))
    done = subprocess.run([sys.executable, "-m", "xferaudit", "check", "--no-cache", "--exit-zero", "--format", "json",
                           "--jobs", "1", str(tree)], capture_output=True, text=True, env=env, cwd=tree)
    if done.returncode not in (0, 1):
        raise SystemExit(done.stderr[-2000:])
    return json.loads(done.stdout or "[]")


def _spans(text: str) -> list:
    from xferaudit.rules import table
    from xferaudit.static.front.kernels import kernel_spans
    from xferaudit.static.front.resolver import Resolver

    tree = ast.parse(text)
    rules = table()
    r = Resolver(tree, rules)
    r.bind()
    return kernel_spans(tree, text, r, rules.kernels)


def _segments(text: str, spans: list) -> list:
    lines = text.splitlines(keepends=True)
    return ["".join(lines[l0 - 1:l1]) for l0, _, l1, _ in spans]


def main(argv: list) -> int:
    before = None
    if "--before" in argv:
        i = argv.index("--before")
        before = Path(argv[i + 1])
        del argv[i:i + 2]
    out, trees = Path(argv[0]), [Path(a).resolve() for a in argv[1:]]
    out.mkdir(parents=True, exist_ok=True)
    sys.path.insert(0, str(HERE))
    report = {}
    for tree in trees:
        files = sorted(p for p in tree.rglob("*.py"))
        spans = {}
        for p in files:
            try:
                s = _spans(p.read_text(encoding="utf-8"))
            except (SyntaxError, UnicodeDecodeError):
                continue
            if s:
                spans[p] = s
        now = _findings(tree, HERE)
        row = {"files": len(files), "files_with_kernels": len(spans),
               "kernels": sum(len(v) for v in spans.values()), "findings_now": len(now)}

        def in_kernel(f, tree=tree, spans=spans) -> bool:
            p = Path(f["filename"])
            p = p if p.is_absolute() else tree / p
            ln = f["location"]["row"]
            return any(l0 <= ln <= l1 for l0, _, l1, _ in spans.get(p.resolve(), ()))

        row["findings_now_in_kernels"] = sum(map(in_kernel, now))
        if before is not None:
            old = _findings(tree, before)
            row["findings_before"] = len(old)
            row["findings_before_in_kernels"] = sum(map(in_kernel, old))
        with tempfile.TemporaryDirectory() as tmp:
            copy = Path(tmp) / tree.name
            shutil.copytree(tree, copy)
            env = dict(os.environ, PYTHONPATH=str(HERE))
            done = subprocess.run([sys.executable, "-m", "xferaudit", "wrap", "--no-cache", str(copy)],
                                  capture_output=True, text=True, env=env, cwd=copy)
            row["wrap"] = (done.stdout + done.stderr).strip().splitlines()[-1:]
            changed_kernels, changed_files = [], 0
            for p, s in spans.items():
                new = (copy / p.relative_to(tree)).read_text(encoding="utf-8")
                old_text = p.read_text(encoding="utf-8")
                changed_files += new != old_text
                new_spans = _spans(new)
                a, b = _segments(old_text, s), _segments(new, new_spans)
                if len(a) != len(b) or a != b:
                    changed_kernels.append(str(p.relative_to(tree)))
            row["kernel_files_changed_by_wrap"] = changed_files
            row["files_with_a_kernel_line_changed"] = changed_kernels
        report[str(tree)] = row
    (out / "kernels_real.json").write_text(json.dumps(report, indent=1) + "\n")
    text = "\n".join(f"{k}\n" + "\n".join(f"  {kk}: {vv}" for kk, vv in v.items()) for k, v in report.items())
    (out / "kernels_real.txt").write_text(text + "\n")
    print(text)
    return 0 if all(not v["files_with_a_kernel_line_changed"] for v in report.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
