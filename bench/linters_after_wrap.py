"""Does wrapped code pass the project's linters as the code did before?

    python bench/linters_after_wrap.py TREE [--line-length N] [--first-party NAME ...]

Copies TREE to a temporary folder (TREE is never touched), writes a
``pyproject.toml`` there with ``[tool.ruff] line-length`` (and isort's
known-first-party when given), counts ruff's ``E501`` (line too long) and
``I001`` (unsorted imports) before and after ``xferaudit wrap .``, then runs
``xferaudit unwrap .`` and compares every file with TREE byte for byte. With
``--show`` it prints the lines that are new violations after wrap.

With ``--own-config`` the tree's own settings are used instead (its
``pyproject.toml`` or ``ruff.toml``, as ruff and ``wrap`` read them).

Prints one line per code (before -> after), the sites wrapped, and whether the
round trip is exact; then the ``site=`` literals ``wrap`` wrote (their median
length, and the median of the full names, the path put before a short literal),
and how much longer wrap made the lines it changed in place (the largest growth
of any line, and of a line already over the limit before wrap, which keeps its
layout). Exit status 1 when a count grew or a byte differs.

To compare with the full literals of an older version, run this script with
``PYTHONPATH`` pointing at that version's checkout.
"""

from __future__ import annotations

import argparse
import filecmp
import shutil
import subprocess
import sys
import tempfile
import difflib
import re
import statistics
from collections import Counter
from pathlib import Path
from typing import Optional


def ruff(tree: Path, line_length: Optional[int]) -> Counter:
    """E501 and I001 findings (`line_length` None: the tree's own setting)."""
    cmd = ["ruff", "check", "--no-cache", "--select", "E501,I001", "--output-format", "concise", "--exit-zero", "."]
    if line_length is not None:
        cmd[5:5] = ["--line-length", str(line_length)]
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


_SITE_LITERAL = re.compile(r"""\bsite=(?P<q>["'])(?P<name>[^"'\n]*)(?P=q)""")


def literals(tree: Path) -> tuple[list[int], list[int]]:
    """Lengths of the site= literals in the tree, and of their full names (a
    short literal, ``":f:x.cpu"``, is named after its file: ``a/b.py:f:x.cpu``)."""
    written, full = [], []
    for p in sorted(tree.rglob("*.py")):
        rel = p.relative_to(tree).as_posix()
        for m in _SITE_LITERAL.finditer(p.read_text(encoding="utf-8", errors="replace")):
            name = m.group("name")
            written.append(len(name))
            full.append(len(rel) + len(name) if name.startswith(":") else len(name))
    return written, full


def growth(before: Path, after: Path, limit: int) -> dict:
    """How much longer wrap made the lines it changed in place (a line paired
    with one line, not broken): the largest growth of any such line, and of a
    line that was already over `limit` before wrap."""
    out = {"paired": 0, "max": 0, "long": 0, "max_long": 0, "example": None}
    for p in sorted(before.rglob("*.py")):
        q = after / p.relative_to(before)
        if not q.is_file():
            continue
        a = p.read_text(encoding="utf-8", errors="replace").splitlines()
        b = q.read_text(encoding="utf-8", errors="replace").splitlines()
        for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
            if op != "replace" or i2 - i1 != j2 - j1:
                continue
            for x, y in zip(a[i1:i2], b[j1:j2]):
                lx, ly = len(x.expandtabs(4)), len(y.expandtabs(4))
                out["paired"] += 1
                out["max"] = max(out["max"], ly - lx)
                if lx > limit:
                    out["long"] += 1
                    if ly - lx > out["max_long"]:
                        out["max_long"], out["example"] = ly - lx, (lx, ly)
    return out


def own_line_length(tree: Path) -> int:
    from xferaudit.static.codemod.style import code_style

    return code_style(tree).line_length


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("tree", type=Path)
    ap.add_argument("--line-length", type=int, default=88)
    ap.add_argument("--first-party", nargs="*", default=[], help="isort's known-first-party modules")
    ap.add_argument("--show", action="store_true", help="print the files with new violations")
    ap.add_argument("--own-config", action="store_true",
                    help="the tree's own settings (its pyproject.toml or ruff.toml), not --line-length")
    args = ap.parse_args()
    if shutil.which("ruff") is None:
        sys.exit("ruff is not installed")
    with tempfile.TemporaryDirectory(prefix="xferaudit-linters-") as tmp:
        work = Path(tmp) / args.tree.name
        shutil.copytree(args.tree, work, ignore=shutil.ignore_patterns("__pycache__", ".git"))
        if args.own_config:
            limit, given = own_line_length(work), None
        else:
            config = f"[tool.ruff]\nline-length = {args.line_length}\n"
            if args.first_party:
                names = ", ".join(f'"{n}"' for n in args.first_party)
                config += f"\n[tool.ruff.lint.isort]\nknown-first-party = [{names}]\n"
            mine = work / "pyproject.toml"
            kept = mine.read_bytes() if mine.exists() else None
            mine.write_text(config)
            limit = given = args.line_length
        before = ruff(work, given)
        wrapped = xferaudit(work, "wrap")
        after = ruff(work, given)
        written, full = literals(work)
        grew_by = growth(args.tree, work, limit)
        unwrapped = xferaudit(work, "unwrap")
        if not args.own_config:
            mine.unlink()
            if kept is not None:
                mine.write_bytes(kept)
        shutil.rmtree(work / ".xferaudit_cache", ignore_errors=True)
        diff = same_tree(args.tree, work)
    print(f"tree: {args.tree} (line length {limit}, {'its own settings' if args.own_config else 'given'})")
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
    if written:
        print(f"site literals: {len(written)}, median length {statistics.median(written):g} "
              f"(full names: median {statistics.median(full):g}, max {max(full)}), longest literal {max(written)}")
    ex = grew_by["example"]
    print(f"lines changed in place: {grew_by['paired']}, largest growth {grew_by['max']} chars; "
          f"of lines already over {limit}: {grew_by['long']}, largest growth {grew_by['max_long']} chars"
          + (f" ({ex[0]} -> {ex[1]})" if ex else ""))
    return 1 if grew or diff else 0


if __name__ == "__main__":
    sys.exit(main())
