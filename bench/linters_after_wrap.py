"""Does wrapped code pass the project's linters as the code did before?

    python bench/linters_after_wrap.py TREE [--line-length N] [--first-party NAME ...]

Copies TREE to a temporary folder (TREE is never touched), writes a
``pyproject.toml`` there with ``[tool.ruff] line-length`` (and isort's
known-first-party when given), counts ruff's ``E501`` (line too long) and
``I001`` (unsorted imports) before and after ``xferaudit wrap .``, then runs
``xferaudit unwrap .`` and compares every file with TREE byte for byte. With
``--show`` it prints the lines that are new violations after wrap.

Prints one line per code (before -> after), the sites wrapped, and whether the
round trip is exact; exit status 1 when a count grew or a byte differs.
"""

from __future__ import annotations

import argparse
import filecmp
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path


def ruff(tree: Path, line_length: int) -> Counter:
    cmd = ["ruff", "check", "--no-cache", "--select", "E501,I001", "--line-length", str(line_length),
           "--output-format", "concise", "--exit-zero", "."]
    out = subprocess.run(cmd, cwd=tree, capture_output=True, text=True, check=True).stdout
    found: Counter = Counter()
    for line in out.splitlines():
        for code in ("E501", "I001"):
            if f" {code} " in line:
                found[code] += 1
                found[(code, line.split(":", 1)[0])] += 1
    return found


def xferaudit(tree: Path, command: str) -> str:
    r = subprocess.run([sys.executable, "-m", "xferaudit", command, "."], cwd=tree, capture_output=True, text=True)
    if r.returncode not in (0, 1):
        sys.exit(f"xferaudit {command} failed ({r.returncode}):\n{r.stderr}")
    return (r.stdout + r.stderr).strip().splitlines()[-1]


def same_tree(a: Path, b: Path) -> list[str]:
    diff = []
    for p in sorted(a.rglob("*.py")):
        q = b / p.relative_to(a)
        if not q.is_file() or not filecmp.cmp(p, q, shallow=False):
            diff.append(str(p.relative_to(a)))
    return diff


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("tree", type=Path)
    ap.add_argument("--line-length", type=int, default=88)
    ap.add_argument("--first-party", nargs="*", default=[], help="isort's known-first-party modules")
    ap.add_argument("--show", action="store_true", help="print the files with new violations")
    args = ap.parse_args()
    if shutil.which("ruff") is None:
        sys.exit("ruff is not installed")
    with tempfile.TemporaryDirectory(prefix="xferaudit-linters-") as tmp:
        work = Path(tmp) / args.tree.name
        shutil.copytree(args.tree, work, ignore=shutil.ignore_patterns("__pycache__", ".git"))
        config = f"[tool.ruff]\nline-length = {args.line_length}\n"
        if args.first_party:
            names = ", ".join(f'"{n}"' for n in args.first_party)
            config += f"\n[tool.ruff.lint.isort]\nknown-first-party = [{names}]\n"
        (work / "pyproject.toml").write_text(config)
        before = ruff(work, args.line_length)
        wrapped = xferaudit(work, "wrap")
        after = ruff(work, args.line_length)
        unwrapped = xferaudit(work, "unwrap")
        (work / "pyproject.toml").unlink()
        shutil.rmtree(work / ".xferaudit_cache", ignore_errors=True)
        diff = same_tree(args.tree, work)
    print(f"tree: {args.tree} (line length {args.line_length})")
    print(wrapped)
    print(unwrapped)
    grew = False
    for code in ("E501", "I001"):
        print(f"{code}: {before[code]} before wrap -> {after[code]} after")
        grew |= after[code] > before[code]
        if args.show:
            for key, n in sorted(after.items(), key=str):
                if isinstance(key, tuple) and key[0] == code and n > before[key]:
                    print(f"  {key[1]}: {before[key]} -> {n}")
    print("unwrap: byte-identical" if not diff else f"unwrap: {len(diff)} files differ: " + ", ".join(diff[:10]))
    return 1 if grew or diff else 0


if __name__ == "__main__":
    sys.exit(main())
